#!/usr/bin/env bash
# factbuoy inspect over a history of bundles (issue 32), against tar -tzf and DuckDB, same
# machine, same run.
#
#   bench/history.sh                       # 60 daily bundles of 500 nodes, cached in /var/tmp/factbuoy-bench
#   RUNS=3 NODES=500 DAYS=60 bench/history.sh
#
# The pile (host/bundle/examples/bench-history.rs): $DAYS daily bundles of a fleet of $NODES
# nodes, each node's real setup and host-facts facts of this machine (bench/template.sh) varied
# per node and per day, and a custom plugin's table of 200 packages; each day about 3 % of the
# nodes change (kernel, memory size, packages), 0.5 % vanish, 0.5 % new ones appear and 1 % miss
# the day. One more day's bundle is kept apart, and every day's setup facts are extracted to
# JSON Lines (a line per node snapshot: its whole facts document, run id, creation, node).
# The index is kept under $XDG_CACHE_HOME/factbuoy/history/, here the work folder's cache/.
# Best wall time of $RUNS runs and that run's peak RSS (GNU time's %M), output to /dev/null:
#   inspect index DIR, with no index yet
#     against tar -tzf of every bundle, one after another; target: within 1.5x.
#   inspect index DIR, one bundle added to an up-to-date index (put back untimed between runs)
#     against tar -tzf of that bundle; target: within 1.5x.
#   inspect history DIR --node node-0042.bench.example ansible_kernel -o json
#     against DuckDB (Python package, in a venv in $CACHE) listing that node's kernel per run by
#     creation, reduced to its changes with lag(), over the JSON Lines; target: under 1 s.
#   inspect sql DIR --as-of $ASOF "SELECT node FROM fact_values WHERE ... ansible_kernel = K"
#     against DuckDB: the nodes of the latest run created by the end of that day with kernel K,
#     over the JSON Lines; target: under 1 s.
#   every factbuoy command's peak RSS <= 200 MB; the index's size on disk against the bundles'.
# The two answers must agree before either is timed. A command that fails prints its error and
# gets no ratio; the script then exits 1.
#
# Needs: GNU time (/usr/bin/time), tar, python3 with venv and pip (PyPI, for duckdb).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
NODES=${NODES:-500}
DAYS=${DAYS:-60}
CACHE=${CACHE:-/var/tmp/factbuoy-bench}
# The as-of question: a date (factbuoy reads it as the end of that day, as the peer is told),
# and a kernel some nodes run on that day (bench-history.rs releases it on day DAYS/6).
ASOF=${ASOF:-2026-04-15}
ASOF_END=${ASOF}T23:59:59Z
KERNEL=${KERNEL:-6.1.0-29-amd64}
# bench-history.rs's watched node: its kernel changes on days DAYS/3 and 5*DAYS/6.
NODE=node-0042.bench.example
command -v /usr/bin/time >/dev/null || { echo "missing GNU time (apt-get install time)" >&2; exit 1; }
. bench/timing.sh

echo "building factbuoy and the generator (release)..." >&2
cargo build --release -q -p factbuoy
cargo build --release -q -p factbuoy-bundle --example bench-history
target=${CARGO_TARGET_DIR:-$PWD/target}
factbuoy=$target/release/factbuoy
mkdir -p "$CACHE"
. bench/template.sh

# The generator and what it shares with the others: a change to either makes new data.
key=$(cat host/bundle/examples/bench-history.rs host/bundle/examples/common/mod.rs | sha256sum | cut -c1-12)
work=$CACHE/history-$key-$NODES-$DAYS
if [ ! -e "$work/done" ]; then
  rm -rf "$CACHE"/history-*
  mkdir -p "$work"
  echo "generating $DAYS days of $NODES nodes into $work..." >&2
  start=$(date +%s)
  # Each day's results tree in memory if there is a tmpfs: creating its files on a disk is
  # most of the time.
  [ -d /dev/shm ] && [ -w /dev/shm ] && tree_tmp=/dev/shm || tree_tmp=${TMPDIR:-/tmp}
  TMPDIR=$tree_tmp "$target/release/examples/bench-history" "$CACHE/template" "$work" "$NODES" "$DAYS" >"$work/paths"
  echo "  $(( $(date +%s) - start )) s" >&2
  touch "$work/done"
fi
dir=$work/bundles
extra=$(tail -n 1 "$work/paths")
added=$dir/$(basename "$extra")
# A run stopped during the measure of adding one left it in the pile.
rm -f "$added"
trap 'rm -f "$added"' EXIT
export XDG_CACHE_HOME=$work/cache
index=$XDG_CACHE_HOME/factbuoy/history

venv=$CACHE/duckdb-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
  echo "installing duckdb (PyPI) into $venv..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q duckdb
fi
# DuckDB is told the four fields it needs: its fastest way to read these files (inferring the
# whole documents' schema costs it more than the question).
snapshots="read_json('$work/extracts/*.jsonl', format = 'newline_delimited',
  columns = {run_id: 'VARCHAR', created: 'VARCHAR', node: 'VARCHAR', ansible_kernel: 'VARCHAR'})"
duck_history="SELECT created, run_id, kernel FROM (
    SELECT created, run_id, ansible_kernel AS kernel,
      lag(ansible_kernel) OVER (ORDER BY created) AS previous
    FROM $snapshots WHERE node = '$NODE')
  WHERE previous IS DISTINCT FROM kernel ORDER BY created"
duck_asof="WITH snapshots AS (SELECT * FROM $snapshots),
    latest AS (SELECT max(created) AS created FROM snapshots WHERE created <= '$ASOF_END')
  SELECT node FROM snapshots JOIN latest USING (created)
  WHERE ansible_kernel = '$KERNEL' ORDER BY node"
sql="SELECT node FROM fact_values WHERE plugin = 'setup' AND path = 'ansible_kernel' AND value = '$KERNEL' ORDER BY node"
duck() { "$venv/bin/python" -c 'import duckdb, json, sys; print(json.dumps(duckdb.sql(sys.argv[1]).fetchall()))' "$1"; }
cat "$dir"/*.tar.gz "$extra" "$work"/extracts/*.jsonl >/dev/null

# best_after PREPARE COMMAND...: best_of, with the function PREPARE run (untimed) before each run.
best_after() {
  local prepare=$1 best="" rss="" result elapsed kib
  shift
  for _ in $(seq "$RUNS"); do
    if ! "$prepare" >&2; then
      echo "error"
      return
    fi
    result=$(RUNS=1 best_of "$@")
    if [ "$result" = error ]; then
      echo "error"
      return
    fi
    read -r elapsed kib <<<"$result"
    if [ -z "$best" ] || awk -v a="$elapsed" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$elapsed rss=$kib
    fi
  done
  echo "$best $rss"
}
no_index() { rm -rf "$XDG_CACHE_HOME/factbuoy"; }
sixty_indexed() {
  rm -f "$added"
  "$factbuoy" inspect index "$dir" >/dev/null && cp "$extra" "$added"
}

failed=0
# agree NAME OURS THEIRS: whether factbuoy's answer and DuckDB's are the same, saying how not.
agree() {
  if [ "$2" != "$3" ]; then
    printf 'the answers to %s differ:\n  factbuoy %s\n  duckdb   %s\n' "$1" "$2" "$3" >&2
    return 1
  fi
}

echo "timing, best of $RUNS..." >&2
index_first=$(best_after no_index "$factbuoy" inspect index "$dir")
list_all=$(best_of sh -c 'for b; do tar -tzf "$b"; done' sh "$dir"/*.tar.gz)

# What changed on the node: DuckDB's (created, run id, kernel) from its first snapshot on,
# against factbuoy's changes read from its JSON, compared as (created, kernel).
theirs_history=$(duck "$duck_history")
if [ "$(python3 -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$theirs_history")" -lt 3 ]; then
  echo "DuckDB finds fewer than two kernel changes on $NODE: $theirs_history" >&2
  exit 1
fi
# factbuoy's and DuckDB's lists of the node's kernel changes, as [created to the second, kernel]
# (factbuoy lists the first kernel too, as the node's first value).
the_changes() {
  python3 - "$1" "$theirs_history" <<'EOF'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
(node,) = ours["nodes"]
(fact,) = node["facts"]
mine = [[c["first_seen"]["created"][:19], c["value"]] for c in fact["changes"]]
print(json.dumps(mine))
print(json.dumps([[created[:19], k] for created, _, k in theirs]))
EOF
}
history_ok=0
if ours_history=$("$factbuoy" inspect history "$dir" --node "$NODE" ansible_kernel -o json) &&
  compared=$(the_changes "$ours_history"); then
  { read -r mine; read -r expected; } <<<"$compared"
  agree "the history of $NODE's kernel" "$mine" "$expected" && history_ok=1
fi
if [ "$history_ok" = 1 ]; then
  history_ours=$(best_of "$factbuoy" inspect history "$dir" --node "$NODE" ansible_kernel -o json)
else
  history_ours=error
fi
history_duck=$(best_of "$venv/bin/python" -c 'import duckdb, sys; duckdb.sql(sys.argv[1]).fetchall()' "$duck_history")

theirs_asof=$(duck "$duck_asof" | python3 -c 'import json, sys; print(json.dumps([r[0] for r in json.load(sys.stdin)]))')
if [ "$theirs_asof" = "[]" ]; then
  echo "no node runs $KERNEL on $ASOF: choose another KERNEL" >&2
  exit 1
fi
asof_ok=1
if ours_asof=$("$factbuoy" inspect sql "$dir" "$sql" --as-of "$ASOF" -o json); then
  mine=$(python3 -c 'import json, sys; print(json.dumps([r[0] for r in json.loads(sys.argv[1])["rows"]]))' "$ours_asof")
  agree "which nodes ran $KERNEL on $ASOF" "$mine" "$theirs_asof" || asof_ok=0
else
  asof_ok=0
fi
if [ "$asof_ok" = 1 ]; then
  asof_ours=$(best_of "$factbuoy" inspect sql "$dir" "$sql" --as-of "$ASOF")
else
  asof_ours=error
fi
asof_duck=$(best_of "$venv/bin/python" -c 'import duckdb, sys; duckdb.sql(sys.argv[1]).fetchall()' "$duck_asof")

bundles_bytes=$(du -sb "$dir" | cut -f1)
index_bytes=$(du -sb "$index" 2>/dev/null | cut -f1) || index_bytes=""

index_one=$(best_after sixty_indexed "$factbuoy" inspect index "$dir")
list_one=$(best_of tar -tzf "$extra")
rm -f "$added"

# no_ratio NAME PEER_SECONDS PEER_KIB PEER_NAME: a side failed; the peer's figures if it did not.
no_ratio() {
  failed=1
  if [ "$2" = error ]; then
    printf '%-44s %s\n' "$1" "error (see above): no ratio"
  else
    awk -v n="$1" -v pw="$2" -v pr="$3" -v p="$4" 'BEGIN {
      printf "%-44s error (see above): no ratio | %s %.2fs %.1f MB\n", n, p, pw, pr / 1024 }'
  fi
}
# ratio NAME OURS PEER TARGET_RATIO: within TARGET_RATIO times the peer, RSS <= 200 MB.
ratio() {
  read -r w r <<<"$2"
  read -r pw pr <<<"$3"
  if [ "$w" = error ] || [ "$pw" = error ]; then
    no_ratio "$1" "$pw" "$pr" peer
    return
  fi
  awk -v n="$1" -v w="$w" -v r="$r" -v pw="$pw" -v pr="$pr" -v t="$4" 'BEGIN {
    printf "%-44s %7.2fs %7.1f MB | peer %7.2fs %7.1f MB | %.2fx (target <= %.1fx, %s), RSS %s\n",
      n, w, r / 1024, pw, pr / 1024, w / pw, t, (w / pw <= t ? "met" : "MISSED"),
      (r <= 200 * 1024 ? "met" : "MISSED") }'
}
# under NAME OURS PEER TARGET_SECONDS: under TARGET_SECONDS, RSS <= 200 MB, the ratio told.
under() {
  read -r w r <<<"$2"
  read -r pw pr <<<"$3"
  if [ "$w" = error ] || [ "$pw" = error ]; then
    no_ratio "$1" "$pw" "$pr" DuckDB
    return
  fi
  awk -v n="$1" -v w="$w" -v r="$r" -v pw="$pw" -v pr="$pr" -v t="$4" 'BEGIN {
    printf "%-44s %7.2fs %7.1f MB | DuckDB %5.2fs %7.1f MB | %.2fx; target < %d s %s, RSS %s\n",
      n, w, r / 1024, pw, pr / 1024, w / pw, t, (w < t ? "met" : "MISSED"),
      (r <= 200 * 1024 ? "met" : "MISSED") }'
}
snapshots_count=$(cat "$work"/extracts/*.jsonl | wc -l)
echo "$DAYS bundles, $snapshots_count node snapshots ($NODES nodes a day to start), $(du -h "$extra" | cut -f1) a bundle"
ratio "index, first time, vs tar -tzf of all" "$index_first" "$list_all" 1.5
ratio "index, one bundle added, vs tar -tzf of it" "$index_one" "$list_one" 1.5
under "history --node N ansible_kernel" "$history_ours" "$history_duck" 1
under "sql --as-of $ASOF" "$asof_ours" "$asof_duck" 1
if [ -n "$index_bytes" ]; then
  awk -v i="$index_bytes" -v b="$bundles_bytes" 'BEGIN {
    printf "%-44s %7.1f MB on disk, bundles %.1f MB: %.1f %%\n", "index", i / 1e6, b / 1e6, 100 * i / b }'
else
  printf '%-44s %s\n' "index" "none in $index: no size"
  failed=1
fi
exit "$failed"
