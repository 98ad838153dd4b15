#!/usr/bin/env bash
# How fast factbuoy gathers Ansible's facts, against Ansible on the same machine in the same run.
#
#   bench/setup.sh [RUNS]     (default 10 runs each, after 2 warm-up runs)
#
# Measures, end to end from process start, the median wall time of:
#   1. factbuoy plugin run setup        (release build; component cache warm, as in normal use)
#   2. factbuoy plugin run host-facts
#   3. ansible -i localhost, -c local localhost -m setup   (the whole Ansible command)
#   4. python -m ansible.modules.setup  (the setup module alone, no Ansible controller)
# and prints the ratios. Target: setup <= 1/10 of the module alone.
# Needs hyperfine (apt-get install hyperfine); ansible-core comes from tests/ansible/venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-10}"
. bench/ansible-peer.sh
echo '{"ANSIBLE_MODULE_ARGS": {}}' > "$work/args.json"
export FACTBUOY_CACHE_DIR="$work/cache"

hyperfine --style basic --warmup 2 --runs "$runs" --export-json "$work/results.json" \
    -n "factbuoy setup" "$factbuoy plugin run setup --out $work/out-setup" \
    -n "factbuoy host-facts" "$factbuoy plugin run host-facts --out $work/out-host-facts" \
    -n "ansible -m setup" "$venv/bin/ansible -i localhost, -c local localhost -m setup -e ansible_python_interpreter=$venv/bin/python3" \
    -n "setup module alone" "$venv/bin/python3 -m ansible.modules.setup $work/args.json" \
    >&2

python3 - "$work/results.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
median = {name: r["median"] * 1000 for name, r in results.items()}
print(f"{'command':<22} {'median':>10} {'min':>10} {'max':>10}")
for name, r in results.items():
    print(f"{name:<22} {median[name]:>8.1f}ms {r['min'] * 1000:>8.1f}ms {r['max'] * 1000:>8.1f}ms")
setup, module, ansible = median["factbuoy setup"], median["setup module alone"], median["ansible -m setup"]
host_facts = median["factbuoy host-facts"]
print(f"factbuoy setup / ansible -m setup:       {setup / ansible:.3f}  ({ansible / setup:.1f}x faster)")
print(f"factbuoy setup / setup module alone:     {setup / module:.3f}  ({module / setup:.1f}x faster; target <= 0.100)")
print(f"factbuoy host-facts / setup module alone: {host_facts / module:.3f}  ({module / host_facts:.1f}x faster)")
PY
