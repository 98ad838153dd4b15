#!/usr/bin/env bash
# Bundle packaging against tar | pigz on the same results tree, same machine, same run.
#
#   bench/package.sh                      # the fleet of bench/inspect.sh (300 nodes, ~6.6 GB tree)
#   RUNS=3 NODES=300 JOURNAL_BYTES=22000000 bench/package.sh
#
# Measures, best wall time of $RUNS runs each, with the tree in the page cache:
#   bench-bundle package   factbuoy_bundle::writer::write, as the aggregator packages a run:
#                          meta/, every file hashed into meta/index.json, gzip level 6 on every
#                          core, the file's own sha-256, fsync, rename
#   tar -c | pigz          tar -c -C TREE . | pigz (level 6, every core) > OUT, then sync OUT
# and prints both throughputs (tree bytes per second), both sizes and the ratio (pigz's time
# over ours; target >= 1.0). Both outputs land beside the cached bundle and are removed after.
# A side that fails prints its error and gets no ratio.
#
# Needs: pigz (apt-get install pigz), GNU time, about 8 GB free in $CACHE the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
for tool in pigz /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
. bench/fleet.sh

out=$fleet/package-bench
rm -rf "$out"
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
# Ours writes a new timestamped name each run: remove the last one before the next.
ours() { rm -f "$out"/ours/*.tar.gz; "$generator" package "$fleet" "$out/ours"; }
peer() { tar -c -C "$fleet/tree" . | pigz >"$out/peer.tar.gz" && sync "$out/peer.tar.gz"; }
export -f ours peer
export generator fleet out

tar -c -C "$fleet/tree" . >/dev/null
echo "timing, best of $RUNS..." >&2
read -r o_time o_rss <<<"$(best_of bash -c ours)"
o_size=$(stat -c %s "$out"/ours/*.tar.gz 2>/dev/null || echo 0)
read -r p_time p_rss <<<"$(best_of bash -c peer)"
p_size=$(stat -c %s "$out/peer.tar.gz" 2>/dev/null || echo 0)

printf '%-16s %10s %12s %12s %12s\n' side "best wall" throughput "output" "peak RSS"
for side in ours peer; do
  if [ "$side" = ours ]; then t=$o_time r=$o_rss s=$o_size n="factbuoy writer"; else t=$p_time r=$p_rss s=$p_size n="tar -c | pigz"; fi
  if [ "$t" = error ]; then
    printf '%-16s %10s\n' "$n" error
    continue
  fi
  awk -v n="$n" -v t="$t" -v r="$r" -v s="$s" -v b="$tree_bytes" \
    'BEGIN { printf "%-16s %9.2fs %8.1f MB/s %9.1f MB %9.1f MB\n", n, t, b / t / 1e6, s / 1e6, r / 1024 }'
done
if [ "$o_time" != error ] && [ "$p_time" != error ]; then
  awk -v o="$o_time" -v p="$p_time" 'BEGIN {
    printf "writer throughput / tar|pigz: %.2f (target >= 1.00, %s)\n", p / o, (p / o >= 1.0 ? "met" : "MISSED") }'
fi
