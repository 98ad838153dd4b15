#!/usr/bin/env bash
# Makes (once) a Python venv with the Python plugin toolchain (PyPI, pinned) and prints its
# absolute path: componentize-py, which builds Python gatherer plugins into components
# (tests/all/plugin_authoring*.rs, bench/plugin-langs.sh); mypy, which type-checks a project
# with the SDK; build, which makes the SDK's wheel (tests/all/plugin_authoring_python.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${COMPONENTIZE_PY_VENV:-target/componentize-py-venv}"
pins=(componentize-py==0.25.1 mypy==2.4.1 build==1.6.1)
installed="$("$venv/bin/python3" -m pip list --format=freeze --disable-pip-version-check 2>/dev/null || true)"
for pin in "${pins[@]}"; do
    if ! grep -qixF "$pin" <<<"$installed"; then
        python3 -m venv "$venv" >&2
        "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
        break
    fi
done
cd "$venv" && pwd
