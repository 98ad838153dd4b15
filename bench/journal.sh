#!/usr/bin/env bash
# systemd-logs against journalctl on the same journal files, in the same run.
#
# Builds a journal of over a million entries with systemd's own writer (systemd-journal-remote),
# in several files whose entries interleave, then measures entries per second of
#   factbuoy plugin run systemd-logs -p since=all   (release build, inside the sandbox)
#   journalctl -D DIR -o json                        (native)
# both writing to /dev/null, best of $RUNS runs each, and prints the ratio and the plugin's peak
# RSS. Both outputs are also counted (lines and bytes) to check they are the same size.
#
#   bench/journal.sh                 # ~1.2 million entries in /tmp, removed afterwards
#   ENTRIES=3000000 KEEP=1 bench/journal.sh
#
# Needs: systemd-journal-remote, journalctl, python3, GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."

ENTRIES=${ENTRIES:-1200000}
FILES=${FILES:-4}
RUNS=${RUNS:-2}
remote=/lib/systemd/systemd-journal-remote
for tool in "$remote" journalctl python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/journal-bench.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
journal="$work/root/var/log/journal/0123456789abcdef0123456789abcdef"
mkdir -p "$journal"

echo "building factbuoy (release)..."
cargo build --release -q -p factbuoy
factbuoy=$PWD/target/release/factbuoy

echo "writing $ENTRIES entries in $FILES files with systemd-journal-remote..."
start=$(date +%s)
for file in $(seq 0 $((FILES - 1))); do
  python3 bench/journal_stream.py "$file" "$FILES" "$ENTRIES" | "$remote" --output="$journal/system-$file.journal" - 2>/dev/null &
done
wait
echo "  $(( $(date +%s) - start )) s; $(du -sh "$work/root" | cut -f1) on disk"

# best_of COMMAND...: the shortest wall time of $RUNS runs in seconds, and that run's peak RSS
# in KiB.
best_of() {
  local best="" rss="" time_file="$work/time"
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -v -o "$time_file" "$@" >/dev/null 2>"$work/stderr" || {
      cat "$work/stderr" >&2; exit 1; }
    local elapsed kib
    elapsed=$(awk -F': ' '/Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$time_file")
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$time_file")
    if [ -z "$best" ] || awk -v a="$elapsed" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$elapsed; rss=$kib
    fi
  done
  echo "$best $rss"
}

export FACTBUOY_CACHE_DIR="$work/cache"
root="$work/root"
# Compile the component once, outside the measurement (the disk cache keeps it).
"$factbuoy" plugin run systemd-logs --root "$root" -p since=now >/dev/null 2>&1 || true

echo "counting both outputs..."
read -r j_lines j_bytes < <(journalctl -D "$root/var/log/journal" -o json --no-pager | wc -lc)
read -r f_lines f_bytes < <("$factbuoy" plugin run systemd-logs --root "$root" -p since=all 2>/dev/null | wc -lc)
echo "  journalctl: $j_lines entries, $j_bytes bytes; systemd-logs: $f_lines entries, $f_bytes bytes"
if [ "$j_lines" != "$f_lines" ] || [ "$j_bytes" != "$f_bytes" ]; then
  echo "the outputs differ in size" >&2
  exit 1
fi

echo "timing, best of $RUNS..."
read -r j_time j_rss < <(best_of journalctl -D "$root/var/log/journal" -o json --no-pager)
read -r f_time f_rss < <(best_of "$factbuoy" plugin run systemd-logs --root "$root" -p since=all)
[ -n "$j_time" ] && [ -n "$f_time" ] || { echo "a timed run failed" >&2; exit 1; }

awk -v n="$j_lines" -v jt="$j_time" -v ft="$f_time" -v jr="$j_rss" -v fr="$f_rss" 'BEGIN {
  printf "journalctl -o json:      %6.2f s  %9.0f entries/s  peak RSS %6.1f MiB\n", jt, n / jt, jr / 1024
  printf "systemd-logs (sandbox):  %6.2f s  %9.0f entries/s  peak RSS %6.1f MiB\n", ft, n / ft, fr / 1024
  printf "ratio (systemd-logs / journalctl entries per second): %.2fx\n", jt / ft
}'
