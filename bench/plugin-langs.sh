#!/usr/bin/env bash
# The same trivial plugin (what `factbuoy plugin new NAME --lang rust|python|js` writes: a
# greeting with the host name) in Rust, Python and JavaScript: component size, build time
# (which precompiles into the cache), the first run after the build, cold compile, cached load,
# and load + instantiate + gather, with the ratio of Python and JavaScript to Rust for each.
#
# Usage: bench/plugin-langs.sh [RUNS]          (RUNS: timed repetitions, median kept; default 20)
# FACTBUOY=path/to/factbuoy uses that binary instead of building the release one.
# Needs Rust with wasm32-wasip2, python3 and npm (componentize-py comes from
# toolchains/python/venv.sh, componentize-js from toolchains/js/install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"

if [ -z "${FACTBUOY:-}" ]; then
    echo "building factbuoy (release)..." >&2
    cargo build --release --locked -p factbuoy >&2
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    FACTBUOY="$target_dir/release/factbuoy"
fi
venv="$(toolchains/python/venv.sh)"
node_modules="$(toolchains/js/install.sh)"
export PATH="$venv/bin:$node_modules/.bin:$PATH"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for lang in rust python js; do
    (cd "$work" && "$FACTBUOY" plugin new "bench-$lang" --lang "$lang" >/dev/null 2>&1)
done

FACTBUOY="$FACTBUOY" WORK="$work" RUNS="$runs" python3 - <<'PY'
import os, shutil, statistics, subprocess, time

factbuoy, work, runs = os.environ["FACTBUOY"], os.environ["WORK"], int(os.environ["RUNS"])

def timed(args, cwd=None):
    start = time.perf_counter()
    out = subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, out.stdout

def median(args, setup=None):
    times = []
    for _ in range(runs):
        if setup:
            setup()
        times.append(timed(args)[0])
    return statistics.median(times)

results = {}
for lang in ("rust", "python", "js"):
    name = f"bench-{lang}"
    project = os.path.join(work, name)
    cache = os.path.join(work, f"cache-{lang}")
    # The Rust build includes compiling wit-bindgen and serde_json once; Python's and
    # JavaScript's have no dependencies to build. Every build ends by precompiling into `cache`.
    build_s, stdout = timed([factbuoy, "plugin", "build", "--cache-dir", cache], cwd=project)
    wasm = stdout.strip()
    clear = lambda: shutil.rmtree(cache, ignore_errors=True)
    info = [factbuoy, "plugin", "info", wasm, "--cache-dir", cache]
    run = [factbuoy, "plugin", "run", wasm, "--grant", f"{name}:host-info", "--cache-dir", cache,
           "--out", os.path.join(work, f"out-{lang}")]
    first_run_s = timed(run)[0]
    results[lang] = {
        "component size (MB)": os.path.getsize(wasm) / 1e6,
        "build + precompile (s)": build_s,
        "first run after plugin build (ms)": 1000 * first_run_s,
        "first run without it: cold (ms)": 1000 * median(run, setup=clear),
        "cold compile + describe (ms)": 1000 * median(info, setup=clear),
        "cached load + describe (ms)": 1000 * median(info),
        "cached load + instantiate + gather (ms)": 1000 * median(run),
    }

print(f"{'median of ' + str(runs) + ' runs':42} {'rust':>10} {'python':>10} {'js':>10}"
      f" {'python/rust':>12} {'js/rust':>8}")
for key in results["rust"]:
    r, p, j = (results[lang][key] for lang in ("rust", "python", "js"))
    print(f"{key:42} {r:10.2f} {p:10.2f} {j:10.2f} {p / r:11.1f}x {j / r:7.1f}x")
for lang in ("python", "js"):
    target = results[lang]["cached load + instantiate + gather (ms)"]
    print(f"{lang} cached load + run: {target:.1f} ms (target: at most 50 ms)")
PY
