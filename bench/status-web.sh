#!/usr/bin/env bash
# What `factbuoy status --web` costs a 1,000-node run (docs/status.md, "Performance").
#
#   bench/status-web.sh [AGENTS] [SECONDS]     (defaults 1000 and 20)
#
# Twice, side by side: a fleet aggregator (`fleet serve`, release build) on loopback,
# bench/fleet-load's AGENTS simulated agents joined and offered a run (`run --fleet`, the hello
# plugin). The agents work as real ones do once offered a run: each enrolls with the run, sends
# heartbeats and delivers a recorded real hello result (one `plugin run hello` of this machine),
# one agent after another over SECONDS + 15 s, so that results keep arriving through the
# measurement. Over SECONDS, the CPU the run's aggregator uses is read from /proc/PID/stat. The
# first time nobody watches; the second time `status --web RUN-ID` serves the run and a client
# holds its page's event stream open, and the page server's own CPU over the same SECONDS is
# read too. Prints both sides, the results that arrived in each side's SECONDS, and the ratio of
# the page server's CPU to the run's (target: at most 5 %). Any error of an agent, the run, the
# aggregator or the page server, or a side during which no result arrived, prints the errors and
# no ratio. BIN=DIR takes factbuoy and factbuoy-bench-fleet from DIR instead of building them
# (a debug build's figures are not the release's).
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-1000}
seconds=${2:-20}
[[ $agents =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$ ]] \
  || { echo "usage: bench/status-web.sh [AGENTS] [SECONDS]" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p factbuoy -p factbuoy-bench-fleet >&2
fi
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# The results the agents deliver: a real hello result of this machine.
mkdir -p "$work/replay/hello"
FACTBUOY_STATE_DIR=$work/replay-state "$bin/factbuoy" -o json plugin run hello --out "$work/replay/hello" \
  > "$work/replay/hello.json"
mv "$work/replay/hello.json" "$work/replay/hello/report.json"

# The pairs of the current run with a result, as `status -o json` says.
results() {
  "$bin/factbuoy" status -o json | python3 -c '
import json, sys
print(sum(1 for p in json.load(sys.stdin)["plugins"] if p.get("result_status")))'
}

# CPU seconds (user + system) process $1 has used.
cpu() { awk '{ sub(/.*\) /, ""); print ($12 + $13) / 100 }' "/proc/$1/stat"; }

# One side: $1 is "bare" or "watched". Prints "RUN_CPU WEB_CPU" (WEB_CPU 0 when bare), and
# stops its processes, so that the other side is measured alone.
side() {
  local name=$1 dir=$work/$1
  mkdir -p "$dir"
  export FACTBUOY_STATE_DIR=$dir/state
  "$bin/factbuoy" fleet serve --dir "$dir/fleet" --listen 127.0.0.1:0 --name 127.0.0.1 -o json \
    > "$dir/serve.json" 2> "$dir/serve.log" &
  local fleet_pid=$!
  pids+=("$fleet_pid")
  for _ in $(seq 100); do [ -s "$dir/serve.json" ] && break; sleep 0.1; done
  [ -s "$dir/serve.json" ] || { echo "$name: the fleet did not start:" >&2; cat "$dir/serve.log" >&2; return 1; }
  local address token_json
  address=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["advertised"])' "$dir/serve.json")
  token_json=$("$bin/factbuoy" fleet token create --dir "$dir/fleet" --ttl 1h --uses "$agents" -o json)
  field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$token_json" "$1"; }
  # The run outlives fleet-load (it starts it with `nohup`, so the agents' offers are what is
  # timed, and the run goes on): its agents are lost after 60 s, after the measurement.
  local run="nohup '$bin/factbuoy' run --fleet $address --fleet-credentials '$dir/fleet/operator' \
    --plugin hello --timeout 300s --lost-after 60s --out '$dir/out' -o json > '$dir/run.json' 2> '$dir/run.log' & echo \$! > '$dir/run.pid'"
  # The load goes on delivering after it has printed its first line (every agent offered).
  "$bin/factbuoy-bench-fleet" --fleet "$address" --token "$(field token)" --pin "$(field ca_pin)" \
    --agents "$agents" --fleet-pid "$fleet_pid" --idle 1 --start-run "$run" \
    --replay "$work/replay" --deliver-over $((seconds + 15)) > "$dir/load.json" 2> "$dir/load.log" &
  local load_pid=$!
  pids+=("$load_pid")
  while [ ! -s "$dir/load.json" ] && kill -0 "$load_pid" 2>/dev/null; do sleep 0.1; done
  local offered_at=$SECONDS
  if [ ! -s "$dir/load.json" ]; then
    echo "$name: errors (no figures):" >&2
    cat "$dir/load.log" >&2
    echo "the aggregator's log ends:" >&2
    grep -v '^info' "$dir/serve.log" | tail -20 >&2
    return 1
  fi
  local web_pid=
  if [ "$name" = watched ]; then
    local run_id url base token
    run_id=$("$bin/factbuoy" status -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])')
    "$bin/factbuoy" status --web "$run_id" --out "$dir/retrieved" > "$dir/web.url" 2> "$dir/web.log" &
    web_pid=$!
    pids+=("$web_pid")
    for _ in $(seq 100); do [ -s "$dir/web.url" ] && break; sleep 0.1; done
    url=$(cat "$dir/web.url")
    base=${url%%/runs/*}
    token=${url##*token=}
    # The page's client: its event stream, held open as a browser tab holds it.
    curl -sN -H "Authorization: Bearer $token" "$base/api/v1/runs/$run_id/events" > "$dir/events" &
    pids+=("$!")
    sleep 2
    [ -s "$dir/events" ] || { echo "$name: no event from the page server:" >&2; cat "$dir/web.log" >&2; return 1; }
  fi
  # Both sides' SECONDS start 5 s after every agent held its offer, however long the page
  # server took to start: the same part of the run's enrollments and deliveries.
  while (( SECONDS < offered_at + 5 )); do sleep 0.1; done
  local run_before web_before=0 run_after web_after=0 results_before results_after
  results_before=$(results)
  run_before=$(cpu "$fleet_pid")
  [ -n "$web_pid" ] && web_before=$(cpu "$web_pid")
  sleep "$seconds"
  run_after=$(cpu "$fleet_pid")
  [ -n "$web_pid" ] && web_after=$(cpu "$web_pid")
  results_after=$(results)
  if ! wait "$load_pid"; then
    echo "$name: the agents had errors (no figures):" >&2
    cat "$dir/load.log" >&2
    return 1
  fi
  if [ "$results_after" -le "$results_before" ]; then
    echo "$name: no result arrived while the CPU was measured ($results_before pairs with a result before, $results_after after; no figures)" >&2
    return 1
  fi
  local errors
  errors=$(grep -c '^error' "$dir/serve.log" || true)
  if [ "$errors" -gt 0 ]; then
    echo "$name: the aggregator logged $errors errors (no figures):" >&2
    grep '^error' "$dir/serve.log" | sort | uniq -c | head -20 >&2
    return 1
  fi
  if [ -n "$web_pid" ] && grep -q '^error\|ERROR' "$dir/web.log"; then
    echo "$name: the page server logged errors (no figures):" >&2
    cat "$dir/web.log" >&2
    return 1
  fi
  if [ -n "$web_pid" ] && ! grep -q '"status":"running"' "$dir/events"; then
    echo "$name: the page server did not stream the running run (no figures)" >&2
    return 1
  fi
  echo "$(echo "$run_after - $run_before" | bc -l) $(echo "$web_after - $web_before" | bc -l) $((results_after - results_before))"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  pids=()
  # The run `nohup` started, by the id it wrote.
  [ -s "$dir/run.pid" ] && kill "$(cat "$dir/run.pid")" 2>/dev/null || true
}

# Not in $(...): the processes a side starts are this shell's, for cleanup to stop.
side bare > "$work/bare.txt" || exit 1
side watched > "$work/watched.txt" || exit 1
python3 - "$agents" "$seconds" $(cat "$work/bare.txt") $(cat "$work/watched.txt") <<'PY'
import sys
agents, seconds = int(sys.argv[1]), int(sys.argv[2])
bare_run, _, bare_results, watched_run, web, watched_results = map(float, sys.argv[3:9])
print(f"a {agents}-node fleet run, CPU over {seconds} s while its results arrive:")
print(f"  without the page:  the run (fleet serve) {bare_run:.2f} s = {bare_run / seconds * 100:.1f} % of a core, {bare_results:.0f} results arrived")
print(f"  with the page:     the run (fleet serve) {watched_run:.2f} s = {watched_run / seconds * 100:.1f} % of a core, {watched_results:.0f} results arrived")
print(f"                     status --web          {web:.2f} s = {web / seconds * 100:.1f} % of a core")
# The aggregator answers the page server's polls: what that adds is shown, not hidden.
print(f"  the aggregator's CPU with the page, less without: {watched_run - bare_run:+.2f} s")
ratio = web / watched_run if watched_run > 0 else float("inf")
print(f"status --web / the run: {ratio * 100:.1f} % (target <= 5 %)")
PY
