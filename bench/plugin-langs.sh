#!/usr/bin/env bash
# The same trivial plugin (what `factbuoy plugin new NAME --lang rust|python` writes: a greeting
# with the host name) in Rust and in Python: component size, build time, cold compile, cached
# load, and load + instantiate + gather, with the ratio of Python to Rust for each.
#
# Usage: bench/plugin-langs.sh [RUNS]          (RUNS: timed repetitions, median kept; default 20)
# FACTBUOY=path/to/factbuoy uses that binary instead of building the release one.
# Needs Rust with wasm32-wasip2 and python3 (componentize-py comes from tests/python/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"

if [ -z "${FACTBUOY:-}" ]; then
    echo "building factbuoy (release)..." >&2
    cargo build --release --locked -p factbuoy >&2
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    FACTBUOY="$target_dir/release/factbuoy"
fi
venv="$(tests/python/venv.sh)"
export PATH="$venv/bin:$PATH"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for lang in rust python; do
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
for lang in ("rust", "python"):
    name = f"bench-{lang}"
    project = os.path.join(work, name)
    # The Rust build includes compiling wit-bindgen and serde_json once; Python's has no
    # dependencies to build.
    build_s, stdout = timed([factbuoy, "plugin", "build"], cwd=project)
    wasm = stdout.strip()
    cache = os.path.join(work, f"cache-{lang}")
    clear = lambda: shutil.rmtree(cache, ignore_errors=True)
    info = [factbuoy, "plugin", "info", wasm, "--cache-dir", cache]
    run = [factbuoy, "plugin", "run", wasm, "--grant", f"{name}:host-info", "--cache-dir", cache,
           "--out", os.path.join(work, f"out-{lang}")]
    results[lang] = {
        "component size (MB)": os.path.getsize(wasm) / 1e6,
        "build (s)": build_s,
        "cold compile + describe (ms)": 1000 * median(info, setup=clear),
        "cached load + describe (ms)": 1000 * median(info),
        "cached load + instantiate + gather (ms)": 1000 * median(run),
    }

print(f"{'median of ' + str(runs) + ' runs':42} {'rust':>10} {'python':>10} {'python/rust':>12}")
for key in results["rust"]:
    r, p = results["rust"][key], results["python"][key]
    print(f"{key:42} {r:10.2f} {p:10.2f} {p / r:11.1f}x")
target = results["python"]["cached load + instantiate + gather (ms)"]
print(f"\npython cached load + run: {target:.1f} ms (target: at most 50 ms)")
PY
