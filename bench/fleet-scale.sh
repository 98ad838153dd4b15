#!/usr/bin/env bash
# A fleet aggregator at scale (docs/fleet.md, "Scale").
#
#   bench/fleet-scale.sh [AGENTS]     (default 5000)
#
# Starts `factbuoy fleet serve` (release build) on loopback; bench/fleet-load joins AGENTS
# simulated agents with one token (each with a key of its own, as `agent join` does, 64 joins in
# flight), holds an idle long poll for each (as `agent serve` does), then starts a run with
# `factbuoy run --fleet` and waits until every agent holds its offer. Prints:
#   - the enrollment rate (joins per second);
#   - the aggregator's RSS and CPU with every agent idle in a parked poll, over one period of
#     idle lines (every agent told `idle` once), and what
#     each agent adds to the RSS the fleet had before any joined (targets: 5,000 agents
#     <= 150 MB, 20,000 <= 400 MB, 20 KiB each; CPU under 2 % of a core);
#   - the time from `run` to every agent offered the run.
# Any error of an agent, the run or the aggregator prints the errors and no figures.
#
# Needs a file descriptor limit above AGENTS for both processes (raised here; root raises the
# hard limit too, where it may). The fleet gives its listener half the descriptors; when that
# holds fewer than AGENTS the script says so and stops. FACTBUOY_BENCH_IDLE: the period between
# idle lines (`fleet serve --idle-every`) and the seconds of idle measurement (default 170, the
# fleet's default period).
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-5000}
[[ $agents =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/fleet-scale.sh [AGENTS]" >&2; exit 2; }
idle=${FACTBUOY_BENCH_IDLE:-170}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

cargo build --release --locked -p factbuoy -p factbuoy-bench-fleet >&2
bin=target/release
work=$(mktemp -d)
fleet_pid=
cleanup() {
  [ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null && wait "$fleet_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/factbuoy" fleet serve --dir "$work/fleet" --listen 127.0.0.1:0 --name 127.0.0.1 \
  --idle-every "${idle}s" -o json \
  > "$work/serve.json" 2> "$work/serve.log" &
fleet_pid=$!
for _ in $(seq 100); do [ -s "$work/serve.json" ] && break; sleep 0.1; done
[ -s "$work/serve.json" ] || { echo "the fleet did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }
served() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/serve.json" "$1"; }
address=$(served advertised)
most=$(served max_agents)
if [ "$most" -lt "$agents" ]; then
  echo "this machine's descriptor limit (ulimit -Hn: $(ulimit -Hn)) lets the fleet hold $most" \
    "connections, fewer than $agents agents; raise the hard limit (needs CAP_SYS_RESOURCE)" >&2
  exit 1
fi
rss_at_start=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$fleet_pid/status")
token_json=$("$bin/factbuoy" fleet token create --dir "$work/fleet" --ttl 1h --uses "$agents" -o json)
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$token_json" "$1"; }

echo "fleet at $address; $agents agents joining and polling" >&2
# The simulated agents never take part: the run gives them up as lost after 30 s; it is only
# timed up to the moment every agent holds its offer.
run="'$bin/factbuoy' run --fleet $address --fleet-credentials '$work/fleet/operator' --plugin hello \
  --timeout 120s --lost-after 30s --out '$work/out' -o json > '$work/run.json' 2> '$work/run.log'"
if ! figures=$("$bin/factbuoy-bench-fleet" --fleet "$address" --token "$(field token)" \
      --pin "$(field ca_pin)" --agents "$agents" --fleet-pid "$fleet_pid" --idle "$idle" \
      --start-run "$run"); then
  echo "errors (no figures); the aggregator's log ends:" >&2
  grep -v '^info' "$work/serve.log" | tail -20 >&2
  exit 1
fi
errors=$(grep -c '^error' "$work/serve.log" || true)
if [ "$errors" -gt 0 ]; then
  echo "the aggregator logged $errors errors (no figures):" >&2
  grep '^error' "$work/serve.log" | sort | uniq -c | head -20 >&2
  exit 1
fi
python3 - "$figures" "$rss_at_start" <<'PY'
import json, sys
f = json.loads(sys.argv[1])
start_mib = int(sys.argv[2]) / 1024
print(f"agents:                        {f['agents']}")
print(f"enrollment:                    {f['joins_per_second']:.0f} joins/s ({f['join_seconds']:.1f} s)")
mb = f['idle_rss_mib'] * 2**20 / 1e6
print(f"idle long polls, RSS:          {f['idle_rss_mib']:.1f} MiB = {mb:.1f} MB (peak {f['peak_rss_mib']:.1f} MiB)")
print(f"  each agent:                  {(f['idle_rss_mib'] - start_mib) * 1024 / f['agents']:.1f} KiB "
      f"(above the {start_mib:.1f} MiB before any joined; target 20 KiB)")
print(f"idle long polls, CPU:          {f['idle_cpu_cores'] * 100:.2f} % of a core over {f['idle_seconds']} s (target < 2 %)")
print(f"run -> every agent offered:    {f['run_to_all_offered_seconds']:.2f} s (target <= 2 s)")
PY
