#!/usr/bin/env bash
# Makes (once) a Python venv with ansible-core for the Ansible comparison and the fact cache
# tests, and prints its absolute path.
# Usage: tests/ansible/venv.sh [ANSIBLE_CORE_VERSION]
# Without a version: the one the comparison was written against, in target/ansible-venv (or
# $ANSIBLE_VENV); with one, in target/ansible-venv-<version>.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The version compare.py was written against; a newer one may add or rename facts.
default_version="2.19.14"
version="${1:-$default_version}"
if [ "$version" = "$default_version" ]; then
    venv="${ANSIBLE_VENV:-target/ansible-venv}"
else
    venv="target/ansible-venv-$version"
fi

if [ "$("$venv/bin/python3" -m pip show ansible-core 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "ansible-core==$version" >&2
fi
cd "$venv" && pwd
