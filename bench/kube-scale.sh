#!/usr/bin/env bash
# factbuoy on Kubernetes at scale, without that many kubelets (docs/kubernetes.md, "Scale").
#
#   bench/kube-scale.sh [NODES]     (default 1000)
#
# On a cluster of tests/kube/cluster.sh (v1.20.2, real API server, controllers and scheduler)
# with one real kubelet node (node-1) plus NODES Node objects nobody runs:
#   1. bench/kube-load `nodes` creates the Node objects (tainted factbuoy-bench/fake:NoSchedule,
#      which only the agents tolerate) and makes them Ready (status
#      subresource). They get no heartbeats: the controller manager runs with
#      --node-monitor-grace-period 2h (FACTBUOY_KUBE_NODE_GRACE), so none turns NotReady.
#   2. The peer: bench/kube-load `placement` times Kubernetes alone placing a DaemonSet whose
#      pod asks what an agent's does, on the Node objects only (none starts), and deletes it.
#   3. `factbuoy run --kubernetes --plugin host-facts` for real (release build, image from
#      deploy/build-image.sh), timed from its start to the bundle on disk. The DaemonSet
#      controller makes an agent pod per node; those on Node objects stay Pending.
#   4. bench/kube-load `agents` plays the agents of those pods, authenticated exactly as real
#      ones (a TokenRequest for the pod's projected token, the run's audience, bound to the pod;
#      enroll with a key of its own), and delivers host-facts' result of a real local run, with
#      a bounded number of requests in flight. node-1's real agent runs host-facts for real.
# and prints: time run -> bundle, and its ratio to the peer's time to place its pods; the
# aggregator's peak RSS (VmHWM of the serve-kubernetes process, target <= 150 MB); the status
# annotation's largest size (every update watched, target < 64 KiB); the aggregator's API
# requests per node, from the API server's audit log (its ServiceAccount only). It checks that
# the bundle holds NODES+1 nodes' results. Any error, of the run, the aggregator, the peer or
# the load generator, prints the errors and no figures.
#
# Needs root, cgroup v1, and tests/kube/build.sh's cache. Cluster: FACTBUOY_KUBE_NETNS
# (default factbuoy-bench) and FACTBUOY_KUBE_DIR (default /run/factbuoy-bench); it is removed at
# the end unless FACTBUOY_BENCH_KEEP=1 (then `cluster.sh down` with the same variables removes
# it, and the work directory is left in /tmp). FACTBUOY_BENCH_IN_FLIGHT (default 64): requests
# the load generator has in flight. FACTBUOY_BENCH_API_QPS (default 100): the controller
# manager's and the scheduler's API rate (Kubernetes' defaults, 20 and 50, take minutes to
# create and bind 1,000 pods).
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=${1:-1000}
[[ $nodes =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/kube-scale.sh [NODES]" >&2; exit 2; }
export FACTBUOY_KUBE_NETNS=${FACTBUOY_KUBE_NETNS:-factbuoy-bench}
export FACTBUOY_KUBE_DIR=${FACTBUOY_KUBE_DIR:-/run/factbuoy-bench}
export FACTBUOY_KUBE_NODE_GRACE=2h
export FACTBUOY_KUBE_API_QPS=${FACTBUOY_BENCH_API_QPS:-100}
in_flight=${FACTBUOY_BENCH_IN_FLIGHT:-64}
target=${CARGO_TARGET_DIR:-$PWD/target}
cluster=tests/kube/cluster.sh
image=factbuoy.local/factbuoy:bench

work=$(mktemp -d /tmp/fb-bench.XXXXXX)
cleanup() {
  if [ "${FACTBUOY_BENCH_KEEP:-}" = 1 ]; then
    echo "kept the cluster ($FACTBUOY_KUBE_NETNS) and $work" >&2
    return
  fi
  "$cluster" down >/dev/null 2>&1 || echo "kube-scale: cluster.sh down failed" >&2
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf 'kube-scale: %s\n' "$*" >&2; }
# fail WHAT FILE...: the errors, and no figures.
fail() {
  local what=$1 f
  shift
  echo "kube-scale: FAILED: $what" >&2
  for f in "$@"; do
    [ -s "$f" ] && { echo "--- $f (last 40 lines)" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}

say "building (release)"
# One package at a time: built together, their features unify into a third build of everything.
cargo build --release --locked -p factbuoy >&2
cargo build --release --locked -p factbuoy-bench-kube >&2
objcopy --strip-debug "$target/release/factbuoy" "$work/factbuoy"
load=$target/release/factbuoy-bench-kube
deploy/build-image.sh "$work/factbuoy" "$image" "$work/image.tar" >/dev/null

# The audit log: every request of the run namespace's ServiceAccounts (the aggregator's is the
# only one that calls the API), metadata only. The controllers' accounts live in kube-system.
cat > "$work/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
EOF
export FACTBUOY_KUBE_AUDIT_POLICY=$work/audit-policy.yaml
"$cluster" down >/dev/null 2>&1 || true
"$cluster" up 1
"$cluster" import "$work/image.tar"

say "recording a real host-facts result to replay"
mkdir -p "$work/replay/host-facts"
FACTBUOY_CACHE_DIR=$work/cache "$work/factbuoy" -o json plugin run host-facts \
  --out "$work/replay/host-facts" > "$work/host-facts-report.json"
mv "$work/host-facts-report.json" "$work/replay/host-facts/report.json"

say "measuring the API server's TokenReview rate"
"$cluster" exec "$load" reviews --tokens 3000 --in-flight 1,4,8,16,32,64 > "$work/reviews.jsonl" \
  || fail "measuring TokenReviews"

say "creating $nodes Node objects"
"$cluster" exec "$load" nodes --count "$nodes" --prefix bench- >&2 || fail "creating the Node objects"

say "the peer: Kubernetes alone placing a DaemonSet on the $nodes Node objects"
"$cluster" exec "$load" placement --nodes "$nodes" --prefix bench- --image "$image" \
  > "$work/placement.json" || fail "placing the peer DaemonSet"

"$cluster" exec "$load" agents --nodes "$nodes" --prefix bench- --replay "$work/replay" \
  --in-flight "$in_flight" --report "$work/load.json" 2> "$work/load.log" &
load_pid=$!

mkdir -p "$work/out"
say "factbuoy run --kubernetes"
start=$(date +%s%N)
if ! "$cluster" exec env FACTBUOY_STATE_DIR="$work/state" "$work/factbuoy" run --kubernetes \
    --image "$image" --image-pull-policy Never --plugin host-facts --out "$work/out" \
    > "$work/run.out" 2> "$work/run.log"; then
  kill "$load_pid" 2>/dev/null || true
  fail "factbuoy run --kubernetes" "$work/run.log" "$work/load.log"
fi
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
load_ok=0
wait "$load_pid" || load_ok=$?
namespace=$(jq -r '.namespace // empty' "$work/load.json" 2>/dev/null || true)
[ -n "$namespace" ] || namespace=$(grep -o 'namespace factbuoy-[0-9a-z-]*' "$work/run.log" | head -n1 | cut -d' ' -f2)
"$cluster" exec kubectl -n "$namespace" logs factbuoy-aggregator > "$work/aggregator.log" 2>&1 || true
if [ "$load_ok" != 0 ]; then
  [ -s "$work/load.json" ] && jq '{errors, retries}' "$work/load.json" >&2
  fail "the load generator" "$work/load.log" "$work/aggregator.log"
fi

# The aggregator's peak RSS, from the host: its process is in the cluster's cgroups.
agg_pid=""
for p in $(find "/sys/fs/cgroup/memory/$FACTBUOY_KUBE_NETNS" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un); do
  if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q 'aggregator serve-kubernetes'; then agg_pid=$p; fi
done
[ -n "$agg_pid" ] || fail "no serve-kubernetes process in the cluster's cgroups" "$work/aggregator.log"
hwm_kb=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$agg_pid/status")
# Its CPU time over the run, user + system, in clock ticks (fields 14 and 15 after the name).
cpu_ms=$(( $(sed 's/.*) //' "/proc/$agg_pid/stat" | awk '{print $12 + $13}') * 1000 / $(getconf CLK_TCK) ))
container_cg=$(awk -F: '$2 == "memory" {print $3}' "/proc/$agg_pid/cgroup")
cg_max=$(cat "/sys/fs/cgroup/memory$container_cg/memory.max_usage_in_bytes")

# Errors on the aggregator's side: its log's ERROR lines (warnings are shown, not fatal).
if grep -q ' ERROR ' "$work/aggregator.log"; then
  grep ' ERROR ' "$work/aggregator.log" | head -n 40 >&2
  fail "the aggregator logged errors"
fi

python3 - "$nodes" "$work" "$FACTBUOY_KUBE_DIR/logs/audit.log" "$namespace" "$run_ms" \
  "$hwm_kb" "$cg_max" "$in_flight" "$FACTBUOY_KUBE_API_QPS" "$cpu_ms" <<'PY'
import collections, glob, json, sys, tarfile

nodes, work, audit, namespace = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
run_ms, hwm_kb, cg_max, in_flight, qps, cpu_ms = (int(a) for a in sys.argv[5:11])
load = json.load(open(f"{work}/load.json"))
errors = list(load["errors"])

# The bundle: every node's host-facts result, sent by its agent and passed.
bundles = glob.glob(f"{work}/out/*.tar.gz")
if len(bundles) != 1:
    errors.append(f"expected one bundle in {work}/out, found {bundles}")
else:
    with tarfile.open(bundles[0]) as tar:
        names = tar.getnames()
        marker = "/plugins/host-facts/results/"
        results = {("/" + n).split(marker, 1)[1].split("/")[0] for n in names
                   if marker in "/" + n and ("/" + n).split(marker, 1)[1]}
        errs = [n for n in names if "/plugins/host-facts/errors/" in "/" + n]
    want = {f"bench-{i}" for i in range(1, nodes + 1)} | {"node-1"}
    if results != want:
        errors.append(f"the bundle has results of {len(results)} nodes, not {len(want)}: "
                      f"missing {sorted(want - results)[:10]}, extra {sorted(results - want)[:10]}")
    if errs:
        errors.append(f"the bundle has {len(errs)} error results: {errs[:5]}")

# The aggregator's API requests, from the audit log: one entry per request (its last stage).
user = f"system:serviceaccount:{namespace}:factbuoy-aggregator"
requests = {}
for line in open(audit):
    event = json.loads(line)
    if event["user"]["username"] == user:
        requests[event["auditID"]] = event
by_kind = collections.Counter()
for event in requests.values():
    ref = event.get("objectRef") or {}
    what = ref.get("resource") or event["requestURI"]
    if ref.get("subresource"):
        what += "/" + ref["subresource"]
    by_kind[(event["verb"], what)] += 1

if errors:
    print("kube-scale: FAILED", file=sys.stderr)
    for e in errors:
        print(f"  {e}", file=sys.stderr)
    sys.exit(1)

total = sum(by_kind.values())
watches = sum(c for (verb, _), c in by_kind.items() if verb == "watch")
print(f"factbuoy on Kubernetes, {nodes} Node objects + 1 real node (bench/kube-scale.sh {nodes})")
print(f"  fake nodes stay Ready: controller manager --node-monitor-grace-period 2h; "
      f"controller manager and scheduler --kube-api-qps {qps}; load generator {in_flight} requests in flight")
print(f"  run -> bundle on disk:         {run_ms / 1000:.1f} s "
      f"(agent pods created {load['seconds_to_all_pods_created']:.1f} s, bound "
      f"{load['seconds_to_all_pods_bound']:.1f} s, all delivered "
      f"{load['seconds_to_all_delivered']:.1f} s after the aggregator was up)")
a = load["admission_seconds"]
peer = json.load(open(f"{work}/placement.json"))
print(f"  the peer, Kubernetes alone:    a DaemonSet on the {nodes} Node objects: pods created "
      f"{peer['seconds_to_all_pods_created']:.1f} s, bound {peer['seconds_to_all_pods_bound']:.1f} s after its creation")
print(f"  run -> bundle / the peer's placement: {run_ms / 1000 / peer['seconds_to_all_pods_bound']:.2f}")
print(f"  admission (enroll request):    p50 {a['p50'] * 1000:.0f} ms, p99 {a['p99'] * 1000:.0f} ms, max {a['max'] * 1000:.0f} ms"
      f" (target p99 <= 2 s); {sum(load['retries'].values())} retries")
# Enrollments the aggregator found slow (over 1 s): its log says where their time went.
import re
slow = []
for line in open(f"{work}/aggregator.log", errors="replace"):
    if "enrolling an agent took over" in line:
        fields = {k: int(v) for k, v in re.findall(r"(waited_ms|admission_ms|total_ms)=(\d+)", line)}
        if len(fields) == 3:
            slow.append(fields)
if slow:
    worst = max(slow, key=lambda f: f["total_ms"])
    print(f"    in the aggregator: {len(slow)} enrollments took over 1 s; the slowest {worst['total_ms']} ms "
          f"({worst['waited_ms']} ms waiting for a turn, {worst['admission_ms']} ms admission)")
else:
    print("    in the aggregator: no enrollment took over 1 s (the rest is the connection, TLS and the load generator's own time)")
print("  the API server's TokenReview rate before the run (bench/kube-load reviews, 3,000 fresh pod-bound tokens a level):")
for line in open(f"{work}/reviews.jsonl"):
    r = json.loads(line)
    print(f"    {r['in_flight']:>3} in flight: {r['per_second']:7.0f} reviews/s, p50 {r['p50_ms']:6.1f} ms, p99 {r['p99_ms']:6.1f} ms")
print(f"  bundle: {nodes + 1} nodes' host-facts results, all passed")
print(f"  aggregator peak RSS (VmHWM):   {hwm_kb / 1024:.1f} MiB = {hwm_kb * 1024 / 1e6:.1f} MB, "
      f"{hwm_kb * 1024 / 150e6:.2f} of the 150 MB target "
      f"(container cgroup max usage, page cache included: {cg_max / 2**20:.1f} MiB)")
print(f"  aggregator CPU time:           {cpu_ms / 1000:.1f} s (user + system, over the run)")
ann = load["annotation"]
print(f"  status annotation, largest:    {ann['largest_bytes']} bytes = "
      f"{ann['largest_bytes'] / 65536:.3f} of the 64 KiB target ({ann['updates']} updates seen)")
lists = sum(c for (verb, _), c in by_kind.items() if verb == "list")
print(f"  aggregator API requests:       {total} = {total / (nodes + 1):.2f} per node "
      f"(audit log); {lists} lists (pages), {watches} watch requests logged"
      + ("" if watches else ": this API server's audit log records no watch requests at all"))
for (verb, what), count in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"    {verb:<7} {what:<28} {count:>6}  {count / (nodes + 1):.3f}/node")
if load["retries"]:
    print("  load generator retries (retried until they succeeded):")
    for what, count in load["retries"].items():
        print(f"    {count:>6}  {what}")
PY
