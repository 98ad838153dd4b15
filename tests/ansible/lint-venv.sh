#!/usr/bin/env bash
# Makes (once) a Python venv with ansible-lint for the Ansible role's test
# (tests/all/ansible_role.rs lints deploy/ansible/), and prints its absolute path. A venv of its
# own: ansible-lint brings its own dependencies, which must not move tests/ansible/venv.sh's
# ansible-core, the version the fact comparison was written against. Pinned, with the same
# ansible-core, so that a new rule upstream does not fail the suite by itself.
set -euo pipefail
cd "$(dirname "$0")/../.."

lint_version="26.10.1"
core_version="2.19.14"
venv="${ANSIBLE_LINT_VENV:-target/ansible-lint-venv}"

if [ "$("$venv/bin/python3" -m pip show ansible-lint 2>/dev/null | sed -n 's/^Version: //p')" != "$lint_version" ] \
    || [ "$("$venv/bin/python3" -m pip show ansible-core 2>/dev/null | sed -n 's/^Version: //p')" != "$core_version" ]; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        "ansible-lint==$lint_version" "ansible-core==$core_version" >&2
fi
cd "$venv" && pwd
