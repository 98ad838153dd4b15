#!/usr/bin/env bash
# A whole local collection against Ansible gathering the same host's facts, same machine, same run.
#
#   bench/run.sh [RUNS]     (default 10 runs each, after 2 warm-up runs)
#
# Measures, end to end from process start, the median wall time of:
#   1. factbuoy run --plugin host-facts --plugin setup   (release build: fresh CA, aggregator and
#      agent over mutual TLS on loopback, both plugins, bundle written; component cache warm)
#   2. ansible -i localhost, -c local localhost -m setup
# and prints the ratio. Target: factbuoy run <= 1/20 of Ansible's time.
# Needs hyperfine (apt-get install hyperfine); ansible-core comes from tests/ansible/venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-10}"
. bench/ansible-peer.sh
export FACTBUOY_CACHE_DIR="$work/cache" FACTBUOY_STATE_DIR="$work/state"

hyperfine --style basic --warmup 2 --runs "$runs" --export-json "$work/results.json" \
    -n "factbuoy run" "$factbuoy run --plugin host-facts --plugin setup --out $work/bundles -o json" \
    -n "ansible -m setup" "$venv/bin/ansible -i localhost, -c local localhost -m setup -e ansible_python_interpreter=$venv/bin/python3" \
    >&2

python3 - "$work/results.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
print(f"{'command':<18} {'median':>10} {'min':>10} {'max':>10}")
for name, r in results.items():
    print(f"{name:<18} {r['median'] * 1000:>8.1f}ms {r['min'] * 1000:>8.1f}ms {r['max'] * 1000:>8.1f}ms")
run, ansible = results["factbuoy run"]["median"], results["ansible -m setup"]["median"]
print(f"factbuoy run / ansible -m setup: {run / ansible:.3f}  ({ansible / run:.1f}x faster; target <= 0.050)")
PY
