#!/usr/bin/env bash
# Compares factbuoy's setup plugin with real Ansible on this machine (see compare.py) and
# fails below the bar. Usage: tests/ansible/compare.sh [FACTBUOY_BINARY] [--show-values]
# (without FACTBUOY_BINARY: the one `cargo build` makes, wherever CARGO_TARGET_DIR puts it).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  factbuoy=$1
  shift
else
  # The binary cargo builds (or has built) here, wherever CARGO_TARGET_DIR puts it.
  factbuoy=$(cargo build --locked -q -p factbuoy --bin factbuoy --message-format=json |
    python3 -c 'import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("executable"):
        print(message["executable"])')
fi
venv="$(tests/ansible/venv.sh)"

exec python3 tests/ansible/compare.py \
    --factbuoy "$factbuoy" --ansible "$venv/bin/ansible" --python "$venv/bin/python3" "$@"
