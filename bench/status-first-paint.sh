#!/usr/bin/env bash
# The status page's first paint of a large run, against a peer: the `inspect report` page of a
# bundle of the same nodes, opened in the same headless Chromium (docs/status.md, "Performance").
#
#   bench/status-first-paint.sh [NODES]     (default 5000)
#   FACTBUOY=target/debug/factbuoy bench/status-first-paint.sh 500   # a quick look, not figures
#
# A real local run (the hello plugin) ends; its final status is then replaced by one of NODES
# nodes of three plugins each (one node in 250 lost, setup failed on one in 100), which
# `status --web` reads as it reads any ended local run's. The peer is that run's bundle with the
# same status document in it (its index updated to match). Both pages are opened through the
# DevTools protocol (tests/support/devtools.mjs), each timed from navigation start to the frame
# after it has drawn its first screen: the status page's summaries and first page of nodes
# (tests/all/status-browser.mjs `large`), the report's band, failures, charts and first page of
# nodes (bench/report-browser.mjs). Prints both times and the ratio (target: the status page
# within 2 s). Either page with an error prints the errors and no ratio.
#
# Needs: chromium, node (18+, run with --experimental-websocket), python3.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=${1:-5000}
[[ $nodes =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/status-first-paint.sh [NODES]" >&2; exit 2; }
command -v chromium >/dev/null || { echo "missing chromium (apt-get install chromium)" >&2; exit 1; }
command -v node >/dev/null || { echo "missing node (apt-get install nodejs)" >&2; exit 1; }
if [ -z "${FACTBUOY:-}" ]; then
  cargo build --release --locked -q -p factbuoy >&2
  FACTBUOY=${CARGO_TARGET_DIR:-target}/release/factbuoy
fi
work=$(mktemp -d)
web_pid=
cleanup() {
  [ -n "$web_pid" ] && kill "$web_pid" 2>/dev/null && wait "$web_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export FACTBUOY_STATE_DIR=$work/state

"$FACTBUOY" run --node this-host --plugin hello --out "$work/out" -o json > "$work/run.json" 2> "$work/run.log" \
  || { echo "the run failed (no figures):" >&2; cat "$work/run.log" >&2; exit 1; }
run_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$work/run.json")
bundle=$(ls "$work"/out/*.tar.gz)

# NODES nodes' pairs, into the run's final status and into the peer bundle's status document.
mkdir "$work/peer"
tar -xzf "$bundle" -C "$work/peer"
python3 - "$nodes" "$FACTBUOY_STATE_DIR/runs/$run_id/final-status.json" "$work/peer/meta" <<'PY'
import hashlib, json, os, sys
nodes, final, meta = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pairs = []
for n in range(nodes):
    for plugin in ["hello", "setup", "host-facts"]:
        pair = {"plugin": plugin, "node": f"node-{n:04}", "status": "complete",
                "result_status": "passed", "last_heartbeat": "2026-11-28T18:00:00Z"}
        if n % 250 == 7:
            pair.update(status="lost", result_status="failed", error="node-lost: no heartbeat for 60s")
        elif plugin == "setup" and n % 100 == 3:
            pair.update(result_status="failed", error=f"setup failed: reason {n % 3}")
        pairs.append(pair)
for path in [final, os.path.join(meta, "status.json")]:
    document = json.load(open(path))
    document["plugins"] = pairs
    with open(path, "w") as f:
        json.dump(document, f)
# The peer's index says what its status document now is.
index_path = os.path.join(meta, "index.json")
index = json.load(open(index_path))
data = open(os.path.join(meta, "status.json"), "rb").read()
for entry in index:
    if entry["path"] == "meta/status.json":
        entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
with open(index_path, "w") as f:
    json.dump(index, f)
PY
# meta/run.json first, as factbuoy writes a bundle.
(cd "$work/peer" && tar -czf "$work/peer.tar.gz" meta/run.json $(find . -type f ! -path ./meta/run.json | sed 's|^\./||' | sort))
"$FACTBUOY" inspect verify "$work/peer.tar.gz" > /dev/null \
  || { echo "the peer bundle does not verify (no figures)" >&2; exit 1; }

# The status page, served as `status --web` serves an ended run.
"$FACTBUOY" status --web "$run_id" > "$work/web.url" 2> "$work/web.log" &
web_pid=$!
for _ in $(seq 100); do [ -s "$work/web.url" ] && break; sleep 0.1; done
[ -s "$work/web.url" ] || { echo "status --web did not start (no figures):" >&2; cat "$work/web.log" >&2; exit 1; }
status=$(node --experimental-websocket --no-warnings tests/all/status-browser.mjs "$(cat "$work/web.url")" "$work/status.png" large)

"$FACTBUOY" inspect report "$work/peer.tar.gz" --out "$work/peer.html" > /dev/null
node_name=$(printf 'node-%04d' $((nodes * 42 / 100)))
report=$(node --experimental-websocket --no-warnings bench/report-browser.mjs "$work/peer.html" "$node_name" "$node_name")

python3 - "$nodes" "$status" "$report" <<'PY'
import json, sys
nodes, status, report = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
failed = False
for name, side in [("the status page", status), ("the report (peer)", report)]:
    if side["errors"]:
        failed = True
        print(f"{name} logged errors (no ratio):")
        for e in side["errors"]:
            print("  ", e)
if report.get("rendered") != "ok":
    failed = True
    print("the report did not finish rendering (no ratio)")
# Both pages drew the run's nodes: the status page counts them, the report finds one of them.
if status["before"]["title"] != f"Nodes ({nodes})":
    failed = True
    print(f"the status page shows {status['before']['title']!r}, not {nodes} nodes (no ratio)")
if report["search_node_said"] != "1 node matches":
    failed = True
    print(f"the report's search for a node said {report['search_node_said']!r} (no ratio)")
if failed:
    sys.exit(1)
paint, peer = status["first_draw_ms"], report["first_screen_ms"]
print(f"first paint of a {nodes}-node run, from navigation start, headless Chromium:")
print(f"  status --web's page:             {paint:6d} ms (target <= 2000 ms: {'met' if paint <= 2000 else 'MISSED'})")
print(f"  inspect report of its bundle:    {peer:6d} ms (the peer, same nodes, same browser)")
print(f"status page / report: {paint / peer:.2f}")
PY
