#!/usr/bin/env bash
# Makes (once) a Python venv with componentize-py (PyPI), which builds Python gatherer plugins
# into components (tests/all/plugin_authoring*.rs, bench/plugin-langs.sh), and prints its absolute path.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${COMPONENTIZE_PY_VENV:-target/componentize-py-venv}"
version="0.25.1"
if [ "$("$venv/bin/python3" -m pip show componentize-py 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "componentize-py==$version" >&2
fi
cd "$venv" && pwd
