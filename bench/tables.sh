#!/usr/bin/env bash
# factbuoy inspect over custom tables, against DuckDB and tar -tzf, same machine, same run.
#
#   bench/tables.sh                        # 1,000 nodes x 1,000 rows, cached in /var/tmp/factbuoy-bench
#   RUNS=3 NODES=1000 ROWS=1000 bench/tables.sh
#
# Two bundles of one fleet a day apart (host/bundle/examples/bench-tables.rs): each node's custom
# plugin `inventory` wrote a table of $ROWS packages keyed by name and a facts document whose
# mounts are keyed by mount point; day 2 has a few upgrades, removals and installs per node.
# Best wall time of $RUNS runs and that run's peak RSS (GNU time's %M), output to /dev/null:
#   inspect sql DAY1 'SELECT section, count(*), sum(installed_kb) FROM inventory_packages GROUP BY section'
#     against DuckDB (Python package, in a venv in $CACHE) running the same GROUP BY over the
#     same rows already extracted to JSON Lines files (the results tree the bundle was made of);
#     target: within 2x of DuckDB, peak RSS <= 200 MB.
#   inspect diff DAY1 DAY2
#     against tar -tzf DAY1 plus tar -tzf DAY2; target: within 1.5x, peak RSS <= 100 MB.
# A command that fails prints its error and gets no ratio.
#
# Needs: GNU time (/usr/bin/time), tar, python3 with venv and pip (PyPI, for duckdb).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
NODES=${NODES:-1000}
ROWS=${ROWS:-1000}
CACHE=${CACHE:-/var/tmp/factbuoy-bench}
command -v /usr/bin/time >/dev/null || { echo "missing GNU time (apt-get install time)" >&2; exit 1; }
. bench/timing.sh

echo "building factbuoy and the generator (release)..." >&2
cargo build --release -q -p factbuoy
cargo build --release -q -p factbuoy-bundle --example bench-tables
target=${CARGO_TARGET_DIR:-$PWD/target}
factbuoy=$target/release/factbuoy

key=$(sha256sum host/bundle/examples/bench-tables.rs | cut -c1-12)
work=$CACHE/tables-$key-$NODES-$ROWS
if [ ! -e "$work/done" ]; then
  echo "generating $NODES nodes x $ROWS rows, two days, into $work..." >&2
  rm -rf "$CACHE"/tables-*
  mkdir -p "$work"
  "$target/release/examples/bench-tables" "$work" "$NODES" "$ROWS" >"$work/bundles"
  touch "$work/done"
fi
{ read -r day1; read -r day2; } <"$work/bundles"

venv=$CACHE/duckdb-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
  echo "installing duckdb (PyPI) into $venv..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q duckdb
fi

columns='section, count(*) AS packages, sum(installed_kb) AS kb'
sql="SELECT $columns FROM inventory_packages GROUP BY section ORDER BY section"
duck="SELECT $columns FROM read_json_auto('$work/day1/tree/plugins/inventory/results/*/packages.jsonl', format = 'newline_delimited') GROUP BY section ORDER BY section"
cat "$day1" "$day2" >/dev/null

# Both must give the same answer before either is timed.
ours=$("$factbuoy" inspect sql "$day1" "$sql" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["rows"])')
theirs=$("$venv/bin/python" -c "import duckdb,sys; print([list(r) for r in duckdb.sql(sys.argv[1]).fetchall()])" "$duck")
if [ "$ours" != "$theirs" ]; then
  echo "the answers differ: factbuoy $ours, duckdb $theirs" >&2
  exit 1
fi

echo "timing, best of $RUNS..." >&2
sql_ours=$(best_of "$factbuoy" inspect sql "$day1" "$sql")
sql_duck=$(best_of "$venv/bin/python" -c "import duckdb,sys; duckdb.sql(sys.argv[1]).fetchall()" "$duck")
diff_ours=$(best_of "$factbuoy" inspect diff "$day1" "$day2")
list_both=$(best_of sh -c 'tar -tzf "$1" && tar -tzf "$2"' sh "$day1" "$day2")

# ratio NAME OURS PEER TARGET_RATIO TARGET_MB
ratio() {
  read -r w r <<<"$2"
  read -r pw pr <<<"$3"
  if [ "$w" = error ] || [ "$pw" = error ]; then
    printf '%-40s %s\n' "$1" "error (see above): no ratio"
    return
  fi
  awk -v n="$1" -v w="$w" -v r="$r" -v pw="$pw" -v pr="$pr" -v t="$4" -v m="$5" 'BEGIN {
    printf "%-40s %7.2fs %7.1f MB | peer %7.2fs %7.1f MB | %.2fx (target <= %.1fx, %s), RSS %s\n",
      n, w, r / 1024, pw, pr / 1024, w / pw, t, (w / pw <= t ? "met" : "MISSED"),
      (r <= m * 1024 ? "met" : "MISSED") }'
}
echo "$NODES nodes x $ROWS rows; bundles $(du -h "$day1" | cut -f1) and $(du -h "$day2" | cut -f1)"
ratio "inspect sql GROUP BY vs DuckDB" "$sql_ours" "$sql_duck" 2 200
ratio "inspect diff vs tar -tzf of both" "$diff_ours" "$list_both" 1.5 100
