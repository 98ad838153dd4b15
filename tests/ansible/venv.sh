#!/usr/bin/env bash
# Makes (once) the Python venv with ansible-core that the Ansible comparisons and the fact
# cache test run, and prints its absolute path. ANSIBLE_VENV overrides where it lives.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The version the comparison was written against; a newer one may add or rename facts.
ansible_core="ansible-core==2.19.14"
venv="${ANSIBLE_VENV:-target/ansible-venv}"

if ! "$venv/bin/python3" -m pip show -q ansible-core >/dev/null 2>&1; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "$ansible_core" >&2
fi
cd "$venv" && pwd
