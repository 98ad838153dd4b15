#!/usr/bin/env bash
# factbuoy inspect against tar -tzf on the same generated fleet bundle, same machine, same run.
#
#   bench/inspect.sh                      # 300 nodes, ~1 GB bundle, cached in /var/tmp/factbuoy-bench
#   RUNS=5 NODES=300 JOURNAL_BYTES=22000000 CACHE=/var/tmp/factbuoy-bench bench/inspect.sh
#
# The bundle (see bench/fleet.sh) is made once and reused. Each command reads it from the page
# cache (one warm-up read first) with its output to /dev/null; best wall time of $RUNS runs, and
# that run's peak RSS (GNU time's %M):
#   tar -tzf BUNDLE                                          the floor: list every entry
#   factbuoy inspect summary BUNDLE                          target <= 1.2x tar -tzf, <= 50 MB
#   factbuoy inspect query BUNDLE ansible_distribution_version
#   factbuoy inspect diff BUNDLE                             when this build has it
#   factbuoy inspect verify BUNDLE                           every entry's sha-256, for scale
# A command that fails prints its error and gets no ratio.
#
# Needs: GNU time (/usr/bin/time), tar, gzip, about 8 GB free in $CACHE the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
command -v /usr/bin/time >/dev/null || { echo "missing GNU time (apt-get install time)" >&2; exit 1; }
. bench/fleet.sh

cat "$bundle" >/dev/null
echo "timing, best of $RUNS..." >&2
declare -A result
names=("tar -tzf" "inspect summary" "inspect query" "inspect verify")
result["tar -tzf"]=$(best_of tar -tzf "$bundle")
result["inspect summary"]=$(best_of "$factbuoy" inspect summary "$bundle")
result["inspect query"]=$(best_of "$factbuoy" inspect query "$bundle" ansible_distribution_version)
# `inspect diff` (drift across the bundle's nodes) is measured once the build has it.
if "$factbuoy" inspect diff --help >/dev/null 2>&1; then
  names+=("inspect diff")
  result["inspect diff"]=$(best_of "$factbuoy" inspect diff "$bundle")
else
  echo "inspect diff: not in this build, not measured" >&2
fi
result["inspect verify"]=$(best_of "$factbuoy" inspect verify "$bundle")

read -r floor _ <<<"${result["tar -tzf"]}"
printf '%-18s %10s %12s %14s\n' command "best wall" "peak RSS" "x tar -tzf"
for name in "${names[@]}"; do
  read -r wall rss <<<"${result[$name]}"
  if [ "$wall" = error ] || [ "$floor" = error ]; then
    printf '%-18s %10s %12s %14s\n' "$name" "$wall" "${rss:--}" "-"
    continue
  fi
  awk -v n="$name" -v w="$wall" -v r="$rss" -v f="$floor" \
    'BEGIN { printf "%-18s %9.2fs %9.1f MB %14s\n", n, w, r / 1024,
             (f > 0 ? sprintf("%.2fx", w / f) : "- (too fast)") }'
done

read -r wall rss <<<"${result["inspect summary"]}"
if [ "$wall" != error ] && [ "$floor" != error ] && [ "$floor" != 0.00 ]; then
  awk -v w="$wall" -v r="$rss" -v f="$floor" 'BEGIN {
    printf "summary / tar -tzf: %.2f (target <= 1.20, %s); summary peak RSS %.1f MB (target <= 50, %s)\n",
      w / f, (w / f <= 1.2 ? "met" : "MISSED"), r / 1024, (r <= 50 * 1024 ? "met" : "MISSED") }'
fi
