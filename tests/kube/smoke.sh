#!/usr/bin/env bash
# tests/kube/smoke.sh: proves the test-cluster harness end to end, on a cluster of its own.
#
# up 3 -> 3 Ready nodes -> an image made by mkimage.sh and imported -> a DaemonSet (read-only
# hostPath, projected audience-bound token) Running on every node -> logs, exec, the API server
# reached from a pod through the `kubernetes` Service -> each node its own host name, network and
# processes, seen by node-exec and by a hostNetwork pod -> TokenRequest + TokenReview ->
# port-forward to a pod -> node-stop 3 turns NotReady -> node-add 4 joins and gets its pod ->
# down -> nothing left (namespaces, processes, cgroups, mounts, files).
#
# Prints one PASS or FAIL line per check and ends with "N passed, M failed"; exits 1 on any
# failure. Runs as a cluster of its own (netns factbuoy-kube-smoke, state in
# /run/factbuoy-kube-smoke), so a developer's cluster is left alone and a smoke run that was
# killed is cleaned up by the next one. Needs tests/kube/build.sh to have run. About 85 s.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export FACTBUOY_KUBE_NETNS=${FACTBUOY_KUBE_NETNS:-factbuoy-kube-smoke}
export FACTBUOY_KUBE_DIR=${FACTBUOY_KUBE_DIR:-/run/factbuoy-kube-smoke}
CLUSTER=$HERE/cluster.sh
NS=$FACTBUOY_KUBE_NETNS
STATE=$FACTBUOY_KUBE_DIR

passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# check DESCRIPTION CMD...: one PASS/FAIL line for CMD's exit status.
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
# eventually SECONDS CMD...: retry CMD every second until it succeeds.
eventually() {
  local end=$(( $(date +%s) + $1 ))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 1
  done
}
k() { "$CLUSTER" exec kubectl "$@"; }
now() { date +%s%N; }
secs() { local t=$(( ($(now) - $1) / 100000000 )); echo "$((t / 10)).$((t % 10))"; }

W=$(mktemp -d)
PF_PID=
finish() {
  [ -z "$PF_PID" ] || kill "$PF_PID" 2>/dev/null
  if [ -e "$STATE" ] || [ -e "/run/netns/$NS" ]; then
    if [ "$failed" -gt 0 ] && [ -f "$STATE/up" ]; then   # what the cluster looked like, before it goes
      k get nodes,pods -A -o wide 2>&1 | sed 's/^/  | /'
      for f in "$STATE"/logs/*.log; do
        echo "  --- $f"; tail -n 15 "$f" | sed 's/^/  | /'
      done
    fi
    "$CLUSTER" down >/dev/null 2>&1 || true
  fi
  rm -rf "$W"
}
trap finish EXIT

# A smoke run that was killed leaves its cluster: remove it (it is this script's own).
"$CLUSTER" down >/dev/null 2>&1 || true

HOST_DIRS="/var/log/pods /var/log/containers /var/lib/cni /run/containerd /var/lib/kubelet
  /etc/kubernetes /var/run/kubernetes /etc/cni /opt/cni /var/lib/containerd /var/lib/etcd
  /usr/libexec/kubernetes"
absent_before=$(for d in $HOST_DIRS; do [ -e "$d" ] || echo "$d"; done)
T_START=$(now)

# ------------------------------------------------------------------ up
t=$(now)
if "$CLUSTER" up 3; then
  pass "up 3 in $(secs "$t") s"
else
  fail "up 3"
  echo "$passed passed, $failed failed"
  exit 1
fi
NETNS_INO=$(stat -L -c %i "/run/netns/$NS")
MNTNS_INO=$(stat -L -c %i "$STATE/ns/mnt")
NODE_NETNS_INOS=$(for n in 1 2 3; do stat -L -c %i "/run/netns/$NS-node-$n"; done)

ready_nodes() {
  k get nodes -o 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'
}
check "3 nodes Ready" [ "$(ready_nodes | grep -c '=True$')" = 3 ]
check "cluster addresses exist only in netns $NS" \
  bash -c "! ip -o addr show | grep -q '10\.200\.0\.' && ip -n '$NS' -o addr show | grep -q '10\.200\.0\.1/'"

# ------------------------------------------------------------------ image
# busybox-static with its applets, packed offline by mkimage.sh.
R=$W/rootfs
mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/proc" "$R/sys" "$R/dev" "$R/var/run"
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
chmod 1777 "$R/tmp"
check "mkimage.sh packs busybox" "$HERE/mkimage.sh" "$R" factbuoy.local/smoke-busybox:1 "$W/busybox.tar" /bin/sh
check "import into every node" "$CLUSTER" import "$W/busybox.tar"

# ------------------------------------------------------------------ DaemonSet
# Like factbuoy's agents: the host's root read-only at /host, not privileged, capabilities
# dropped, a projected ServiceAccount token for a custom audience. Each pod serves
# "pong from <node>" on port 8080 (busybox nc: -ll keeps listening).
t=$(now)
k apply -f - > /dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: smoke}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: agent, namespace: smoke}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: smoke}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      serviceAccountName: agent
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: factbuoy.local/smoke-busybox:1
        imagePullPolicy: Never
        command: [/bin/sh, -c, 'echo agent on $NODE_NAME; exec nc -ll -p 8080 -e /bin/echo pong from $NODE_NAME']
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        securityContext:
          privileged: false
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: host, mountPath: /host, readOnly: true}
        - {name: token, mountPath: /var/run/factbuoy, readOnly: true}
      volumes:
      - name: host
        hostPath: {path: /, type: Directory}
      - name: token
        projected:
          sources:
          - serviceAccountToken: {audience: factbuoy-smoke, expirationSeconds: 3600, path: token}
EOF
pods_running() { # N: N pods Running, on N different nodes
  local out
  out=$(k -n smoke get pods -o 'jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}')
  [ "$(echo "$out" | grep -c ' Running$')" = "$1" ] &&
    [ "$(echo "$out" | grep ' Running$' | cut -d' ' -f1 | sort -u | wc -l)" = "$1" ]
}
if eventually 90 pods_running 3; then
  pass "DaemonSet: a pod Running on each of 3 nodes in $(secs "$t") s"
else
  fail "DaemonSet: a pod Running on each of 3 nodes"
  k -n smoke get pods -o wide; k -n smoke describe pods | tail -n 30
fi
pod_on() { k -n smoke get pods --field-selector "spec.nodeName=$1" -o 'jsonpath={.items[0].metadata.name}'; }
POD=$(pod_on node-2)
POD_UID=$(k -n smoke get pod "$POD" -o 'jsonpath={.metadata.uid}')

check "kubectl logs" bash -c "'$CLUSTER' exec kubectl -n smoke logs '$POD' | grep -qx 'agent on node-2'"
check "kubectl exec: the host's root is mounted at /host" \
  k -n smoke exec "$POD" -- test -s /host/etc/os-release
check "the hostPath mount is read-only" \
  k -n smoke exec "$POD" -- sh -c '! touch /host/tmp/.factbuoy-smoke-probe 2>/dev/null'
# Go's TLS server answers a plain HTTP request with this 400: the API server was reached.
check "a pod reaches the API server through the kubernetes Service (10.96.0.1:443)" bash -c \
  "'$CLUSTER' exec kubectl -n smoke exec '$POD' -- sh -c \
     'printf \"GET / HTTP/1.0\r\n\r\n\" | nc \$KUBERNETES_SERVICE_HOST \$KUBERNETES_SERVICE_PORT' |
   grep -q 'HTTP request to an HTTPS server'"

# ------------------------------------------------------------------ nodes are machines
# Each node has its own host name, network and processes: a command started there with
# node-exec, and a hostNetwork pod, see node-2's, not the machine's or another node's.
check "node-exec 2: host name node-2" [ "$("$CLUSTER" node-exec 2 hostname)" = node-2 ]
check "node-exec 2: its eth0 is node-2's (MAC, address)" bash -c \
  "[ \"\$('$CLUSTER' node-exec 2 cat /sys/class/net/eth0/address)\" = 02:fb:00:00:00:02 ] &&
   '$CLUSTER' node-exec 2 ip -4 -o addr show dev eth0 | grep -q ' 10\.200\.0\.12/24 '"
check "node-exec 2: process 1 is node-2's own, and its kubelet is the only one" bash -c \
  "'$CLUSTER' node-exec 2 cat /proc/1/cmdline | tr '\\0' ' ' | grep -q 'node-init 2' &&
   [ \"\$('$CLUSTER' node-exec 2 sh -c 'grep -l kubelet /proc/[0-9]*/comm | wc -l')\" = 1 ]"
k apply -f - > /dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: on-host-network, namespace: smoke}
spec:
  nodeName: node-2
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: look
    image: factbuoy.local/smoke-busybox:1
    imagePullPolicy: Never
    command: [/bin/sh, -c, 'echo "hostname=$(hostname)"; echo "mac=$(cat /sys/class/net/eth0/address)";
      printf "GET / HTTP/1.0\r\n\r\n" | nc $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT | head -n 1;
      exec sleep 3600']
EOF
host_network_log() { k -n smoke logs on-host-network 2>/dev/null; }
eventually 60 bash -c "'$CLUSTER' exec kubectl -n smoke logs on-host-network 2>/dev/null | grep -q HTTP"
check "a hostNetwork pod on node-2 has node-2's host name and eth0" bash -c \
  "'$CLUSTER' exec kubectl -n smoke logs on-host-network | grep -qx 'hostname=node-2' &&
   '$CLUSTER' exec kubectl -n smoke logs on-host-network | grep -qx 'mac=02:fb:00:00:00:02'"
check "it reaches the API server's Service from node-2's network" bash -c \
  "'$CLUSTER' exec kubectl -n smoke logs on-host-network | grep -q 'HTTP/1.0 400'"
[ "$failed" = 0 ] || host_network_log | sed 's/^/  | /'

# ------------------------------------------------------------------ tokens
# review TOKEN AUDIENCE: the TokenReview's status as "authenticated username pod-name".
review() {
  k create -o json -f - <<EOF | python3 -c '
import json, sys
s = json.load(sys.stdin).get("status", {})
u = s.get("user", {})
print(s.get("authenticated", False), u.get("username", "-"),
      (u.get("extra", {}).get("authentication.kubernetes.io/pod-name") or ["-"])[0])'
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
 "spec": {"token": "$1", "audiences": ["$2"]}}
EOF
}
WANT="True system:serviceaccount:smoke:agent $POD"
TOKEN=$(k create --raw /api/v1/namespaces/smoke/serviceaccounts/agent/token -f - <<EOF |
{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
 "spec": {"audiences": ["factbuoy-smoke"], "expirationSeconds": 600,
          "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "$POD", "uid": "$POD_UID"}}}
EOF
  python3 -c 'import json, sys; print(json.load(sys.stdin)["status"]["token"])')
check "TokenRequest: a pod-bound token for audience factbuoy-smoke" [ -n "$TOKEN" ]
check "TokenReview authenticates it as the pod's ServiceAccount, naming the pod" \
  [ "$(review "$TOKEN" factbuoy-smoke)" = "$WANT" ]
check "TokenReview refuses it for another audience" \
  [ "$(review "$TOKEN" another-audience | cut -d' ' -f1)" = False ]
PROJECTED=$(k -n smoke exec "$POD" -- cat /var/run/factbuoy/token)
check "the pod's projected token (audience factbuoy-smoke) authenticates" \
  [ "$(review "$PROJECTED" factbuoy-smoke)" = "$WANT" ]

# ------------------------------------------------------------------ port-forward
"$CLUSTER" exec kubectl -n smoke port-forward "pod/$POD" 18080:8080 > "$W/pf.log" 2>&1 &
PF_PID=$!
eventually 20 grep -q 'Forwarding from 127.0.0.1:18080' "$W/pf.log"
check "kubectl port-forward reaches the pod's listener" bash -c \
  "'$CLUSTER' exec socat -T 5 - TCP:127.0.0.1:18080 </dev/null | grep -qx 'pong from node-2'"
check "port-forward again (nc -ll keeps listening)" bash -c \
  "'$CLUSTER' exec socat -T 5 - TCP:127.0.0.1:18080 </dev/null | grep -qx 'pong from node-2'"
kill "$PF_PID" 2>/dev/null; wait "$PF_PID" 2>/dev/null; PF_PID=

# ------------------------------------------------------------------ nodes leaving and joining
t=$(now)
check "node-stop 3" "$CLUSTER" node-stop 3
node_not_ready() { ready_nodes | grep -qx 'node-3=Unknown\|node-3=False'; }
if eventually 90 node_not_ready; then
  pass "node-3 NotReady $(secs "$t") s after its kubelet died"
else
  fail "node-3 NotReady after its kubelet died"
fi
t=$(now)
check "node-add 4 joins, Ready" "$CLUSTER" node-add 4
pod4_running() { [ "$(k -n smoke get pods --field-selector spec.nodeName=node-4 -o 'jsonpath={.items[0].status.phase}')" = Running ]; }
if eventually 60 pod4_running; then
  pass "node-4 runs its DaemonSet pod (imported image) $(secs "$t") s after node-add"
else
  fail "node-4 runs its DaemonSet pod"
fi
"$CLUSTER" status | sed 's/^/  | /'

# ------------------------------------------------------------------ down
t=$(now)
check "down" "$CLUSTER" down
echo "  down took $(secs "$t") s"
check "netns $NS and its nodes' are gone" bash -c "! ip netns list | grep -q '^$NS\\b'"
ns_procs() { # processes in the cluster's or a node's network namespace, or its mount namespace
  local p net
  for p in /proc/[0-9]*; do
    net=$(stat -L -c %i "$p/ns/net" 2>/dev/null)
    case "$net $(stat -L -c %i "$p/ns/mnt" 2>/dev/null)" in
      "$NETNS_INO "*|*" $MNTNS_INO") echo "${p#/proc/}" ;;
    esac
    if [ -n "$net" ] && echo "$NODE_NETNS_INOS" | grep -qx "$net"; then echo "${p#/proc/}"; fi
  done
}
check "no process left in its namespaces" [ -z "$(ns_procs)" ]
cluster_procs() { # processes naming its state directory (every daemon and shim does)
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null < "$p/cmdline" | grep -qF "$STATE/" && echo "${p#/proc/}"
  done
}
check "no process left naming its state directory" [ -z "$(cluster_procs)" ]
check "no cgroup left" bash -c "! ls -d /sys/fs/cgroup/*/'$NS' 2>/dev/null"
check "no mount left" bash -c "! grep -q '$STATE' /proc/self/mountinfo"
check "state directory removed" [ ! -e "$STATE" ]
left=$(for d in $absent_before; do [ -e "$d" ] && echo "$d"; done)
check "no host directory left behind${left:+ ($left)}" [ -z "$left" ]
check "down again (idempotent)" "$CLUSTER" down

echo "smoke took $(secs "$T_START") s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
