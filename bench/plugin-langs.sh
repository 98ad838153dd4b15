#!/usr/bin/env bash
# The same trivial plugin (what `factbuoy plugin new NAME --lang rust|python|js` writes: a
# greeting with the host name) in Rust, Python and JavaScript: component size, build time
# (which precompiles into the cache), the first run after the build, cold compile, cached load,
# and load + instantiate + gather, with the ratio of Python and JavaScript to Rust for each.
# Then the author's edit loop: a one-line edit, then `plugin run DIR` until the new result is
# printed, as a development build (the default) and with `--release` (the component `plugin
# build` writes, which is what every edit cost before development builds), with the ratio of
# each language's development loop to Rust's. A side whose run failed or printed the wrong
# result is printed with its error, and no ratio.
#
# Usage: bench/plugin-langs.sh [RUNS] [EDITS]  (RUNS: timed repetitions, median kept; default 20;
#                                              EDITS: edits timed per loop, median kept; default 5,
#                                              and 2 with --release, which takes a minute each)
# FACTBUOY=path/to/factbuoy uses that binary instead of building the release one.
# Needs Rust with wasm32-wasip2, python3 and npm (componentize-py comes from
# toolchains/python/venv.sh, componentize-js from toolchains/js/install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
edits="${2:-5}"

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

FACTBUOY="$FACTBUOY" WORK="$work" RUNS="$runs" EDITS="$edits" python3 - <<'PY'
import json, os, shutil, statistics, subprocess, time

factbuoy, work, runs = os.environ["FACTBUOY"], os.environ["WORK"], int(os.environ["RUNS"])
edits = int(os.environ["EDITS"])

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

# The edit loop, in projects of their own (the ones above hold built components).
sources = {"rust": "src/lib.rs", "python": "app.py", "js": "app.js"}
originals = {}
for lang in ("rust", "python", "js"):
    subprocess.run([factbuoy, "plugin", "new", f"loop-{lang}", "--lang", lang], cwd=work,
                   check=True, capture_output=True)
    with open(os.path.join(work, f"loop-{lang}", sources[lang])) as f:
        originals[lang] = f.read()

def edit_loop(lang, extra, times):
    """Median seconds from a one-line edit to its result, over `times` edits (after one run
    that builds what a first run builds); or the error that stopped it."""
    name = f"loop-{lang}"
    project = os.path.join(work, name)
    source = os.path.join(project, sources[lang])
    original = originals[lang]
    args = [factbuoy, "plugin", "run", project, "--grant", f"{name}:host-info", "-o", "json",
            "--cache-dir", os.path.join(work, f"loop-cache-{lang}"), *extra]
    seconds = []
    for i in range(times + 1):
        greeting = f"edit {i} {' '.join(extra)}"
        with open(source, "w") as f:
            f.write(original.replace('default("hello")', f'default("{greeting}")'))
        start = time.perf_counter()
        out = subprocess.run(args, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        try:
            report = json.loads(out.stdout)
            got = next(a["content"]["greeting"] for a in report["artifacts"])
        except (ValueError, KeyError, StopIteration, TypeError):
            got = None
        if out.returncode != 0 or got != greeting:
            return f"edit {i}: exit {out.returncode}, greeting {got!r}: {out.stderr.strip()[-400:]}"
        if i > 0:
            seconds.append(elapsed)
    return statistics.median(seconds)

loops = {}
for lang in ("rust", "python", "js"):
    loops[lang] = {
        "edit -> result, development build (s)": edit_loop(lang, [], edits),
        "edit -> result, --release (s)": edit_loop(lang, ["--release"], max(1, min(edits, 2))),
    }
print()
print(f"{'median of edits':42} {'rust':>10} {'python':>10} {'js':>10}"
      f" {'python/rust':>12} {'js/rust':>8}")
failed = []
for key in loops["rust"]:
    values = [loops[lang][key] for lang in ("rust", "python", "js")]
    errors = [(lang, v) for lang, v in zip(("rust", "python", "js"), values) if isinstance(v, str)]
    if errors:
        failed += [(lang, key, v) for lang, v in errors]
        shown = ["error" if isinstance(v, str) else f"{v:.2f}" for v in values]
        print(f"{key:42} {shown[0]:>10} {shown[1]:>10} {shown[2]:>10}")
        continue
    r, p, j = values
    print(f"{key:42} {r:10.2f} {p:10.2f} {j:10.2f} {p / r:11.1f}x {j / r:7.1f}x")
for lang, key, error in failed:
    print(f"{lang} {key}: {error}")
for lang in ("python", "js"):
    loop = loops[lang]["edit -> result, development build (s)"]
    if not isinstance(loop, str):
        print(f"{lang} edit loop: {loop:.2f} s (target: at most 5 s)")
PY
