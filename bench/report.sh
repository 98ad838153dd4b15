#!/usr/bin/env bash
# factbuoy inspect report on a large generated fleet, against the targets of docs/inspect.md.
#
#   bench/report.sh                          # 10,000 nodes, cached in /var/tmp/factbuoy-bench
#   NODES=1000 SHOT=docs/images/report-10000-nodes.png bench/report.sh
#
# The fleet is bench/fleet.sh's (real setup and host-facts facts of this machine, each node's
# own names, addresses, ids, host keys, MAC addresses and sizes; one node in a hundred with a
# failed systemd-logs), here with small journals. Measured:
#   writing the report: wall time and peak RSS (GNU time)     targets: <= 10 s, <= 200 MB
#   the page's size                                           target:  <= 25 MB
#   in headless Chromium (bench/report-browser.mjs, through the DevTools protocol):
#     the first screen drawn, from navigation start          target:  <= 3 s
#     a search for a node's name, then for a fact value only that node has (the first search
#     inflates the page's facts), each until the page says how many nodes match
#                                                             target:  <= 1 s
# With SHOT, a screenshot of the first screen is written there. Absolute targets, no peer:
# no other tool writes this page. A browser that logs errors prints them and no figures.
#
# Needs: GNU time, chromium, node (18+, run with --experimental-websocket).
set -euo pipefail
cd "$(dirname "$0")/.."

export NODES=${NODES:-10000}
export JOURNAL_BYTES=${JOURNAL_BYTES:-2000}
command -v /usr/bin/time >/dev/null || { echo "missing GNU time (apt-get install time)" >&2; exit 1; }
command -v chromium >/dev/null || { echo "missing chromium (apt-get install chromium)" >&2; exit 1; }
command -v node >/dev/null || { echo "missing node (apt-get install nodejs)" >&2; exit 1; }
. bench/fleet.sh

page=$fleet/report.html
timing=$(mktemp)
trap 'rm -f "$timing"' EXIT
cat "$bundle" >/dev/null
if ! /usr/bin/time -o "$timing" -f '%e %M' "$factbuoy" inspect report "$bundle" --out "$page" >/dev/null; then
  echo "inspect report failed: no figures" >&2
  exit 1
fi
read -r seconds kb <"$timing"
bytes=$(stat -c %s "$page")

# The node at 42 % of the fleet, and its address (bench-bundle.rs: 10.A.B.C from its index).
index=$((NODES * 42 / 100))
node=$(printf 'node-%04d.bench.example' "$index")
address="10.$((index / 65536)).$((index / 256 % 256)).$((index % 256 + 1))"
browser=$(node --experimental-websocket --no-warnings bench/report-browser.mjs "$page" "$node" "$address" ${SHOT:+"$SHOT"})

verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t ? "met" : "MISSED") }'; }
echo "$NODES nodes; bundle $(du -h "$bundle" | cut -f1)"
printf '%-44s %8.2f s %7.1f MB (targets <= 10 s: %s, <= 200 MB: %s)\n' "writing the report" \
  "$seconds" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$(verdict "$seconds" 10)" "$(verdict "$kb" $((200 * 1024)))"
printf '%-44s %8.1f MB (target <= 25 MB: %s)\n' "the page" \
  "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$(verdict "$bytes" 25000000)"
python3 - "$browser" <<'EOF'
import json, sys
b = json.loads(sys.argv[1])
if b["errors"] or b["rendered"] != "ok":
    print("the page logged errors or did not finish rendering: no figures")
    for e in b["errors"]:
        print("  ", e)
    sys.exit(1)
def line(name, ms, target, said=None):
    note = f" ({said})" if said else ""
    print(f"{name:<44} {ms / 1000:8.2f} s (target <= {target} s: {'met' if ms <= target * 1000 else 'MISSED'}){note}")
line("first screen drawn", b["first_screen_ms"], 3)
line("search for a node's name (inflates facts)", b["search_node_ms"], 1, b["search_node_said"])
line("search for a value only that node has", b["search_value_ms"], 1, b["search_value_said"])
line("the node's name again", b["search_again_ms"], 1)
EOF
