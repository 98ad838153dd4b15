#!/usr/bin/env bash
# Compares factbuoy's setup plugin with real Ansible on this machine (see compare.py) and
# fails below the bar. Usage: tests/ansible/compare.sh [FACTBUOY_BINARY] [--show-values]
set -euo pipefail
cd "$(dirname "$0")/../.."

factbuoy="${1:-target/debug/factbuoy}"
shift || true
venv="$(tests/ansible/venv.sh)"

exec python3 tests/ansible/compare.py \
    --factbuoy "$factbuoy" --ansible "$venv/bin/ansible" --python "$venv/bin/python3" "$@"
