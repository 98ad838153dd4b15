#!/usr/bin/env bash
# Makes (once) a Python venv with fusepy (PyPI) for tests/fuse/stuck_fs.py, and prints its
# absolute path. fusepy loads libfuse.so.2 (Debian: libfuse2), which tests/prerequisites.sh installs.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="target/fuse-venv"
version="3.0.1"
if [ "$("$venv/bin/python3" -m pip show fusepy 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "fusepy==$version" >&2
fi
cd "$venv" && pwd
