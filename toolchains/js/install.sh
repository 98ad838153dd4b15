#!/usr/bin/env bash
# Installs (once) the JavaScript plugin toolchain pinned in toolchains/js/package-lock.json —
# componentize-js, which builds JavaScript gatherers into components, and jco, whose WASI WIT
# they are built against — into target/js-toolchain (tests/all/plugin_authoring*.rs,
# bench/plugin-langs.sh), and prints the absolute path of its node_modules.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${FACTBUOY_JS_TOOLCHAIN:-target/js-toolchain}"
mkdir -p "$dir"
if ! cmp -s toolchains/js/package.json "$dir/package.json" || [ ! -x "$dir/node_modules/.bin/componentize-js" ]; then
    cp toolchains/js/package.json toolchains/js/package-lock.json "$dir/"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >&2)
fi
cd "$dir/node_modules" && pwd
