# Sourced by bench/inspect.sh and bench/package.sh: builds factbuoy and the generator (release),
# and makes (or finds in the cache) a generated fleet: a results tree of $NODES nodes, each with
# setup's and host-facts' facts, its reports and a journal.jsonl of $JOURNAL_BYTES, and its
# bundle written by the real writer (factbuoy_bundle::writer::write, through
# host/bundle/examples/bench-bundle.rs). The facts come from one real local run of this machine
# (factbuoy run --plugin host-facts --plugin setup), varied per node.
#
# The cache, $CACHE (default /var/tmp/factbuoy-bench), keeps the tree and the bundle between
# runs; it is keyed by the generator's source, the node count and the journal size, and a new
# key removes the other fleets there (each is several GB). Sets: factbuoy, generator, fleet
# (the folder holding tree/ and meta/), bundle (the .tar.gz), tree_bytes.
set -euo pipefail

NODES=${NODES:-300}
# 300 journals of 22 MB compress to about 1 GB (journal lines shrink about 6.7 times).
JOURNAL_BYTES=${JOURNAL_BYTES:-22000000}
CACHE=${CACHE:-/var/tmp/factbuoy-bench}

echo "building factbuoy and the generator (release)..." >&2
cargo build --release -q -p factbuoy
cargo build --release -q -p factbuoy-bundle --example bench-bundle
target=${CARGO_TARGET_DIR:-$PWD/target}
factbuoy=$target/release/factbuoy
generator=$target/release/examples/bench-bundle

# The generator and what it shares with the others: a change to either makes new data.
key=$(cat host/bundle/examples/bench-bundle.rs host/bundle/examples/common/mod.rs | sha256sum | cut -c1-12)
fleet=$CACHE/fleet-$key-$NODES-$JOURNAL_BYTES
mkdir -p "$CACHE"

. bench/template.sh

if [ ! -e "$fleet/generated" ]; then
  for other in "$CACHE"/fleet-*; do
    [ -e "$other" ] && [ "$other" != "$fleet" ] && rm -rf "$other"
  done
  rm -rf "$fleet"
  echo "generating $NODES nodes with $JOURNAL_BYTES-byte journals in $fleet..." >&2
  start=$(date +%s)
  "$generator" generate "$CACHE/template" "$fleet" "$NODES" "$JOURNAL_BYTES"
  touch "$fleet/generated"
  echo "  $(( $(date +%s) - start )) s" >&2
fi

if ! bundle=$(ls "$fleet"/bundle/*.tar.gz 2>/dev/null) || [ -z "$bundle" ]; then
  echo "writing its bundle with factbuoy_bundle::writer..." >&2
  start=$(date +%s)
  "$generator" package "$fleet" "$fleet/bundle" >/dev/null
  bundle=$(ls "$fleet"/bundle/*.tar.gz)
  echo "  $(( $(date +%s) - start )) s" >&2
fi
tree_bytes=$(du -sb "$fleet/tree" | cut -f1)
echo "fleet: $NODES nodes, tree $((tree_bytes / 1000000)) MB, bundle $(( $(stat -c %s "$bundle") / 1000000 )) MB ($bundle)" >&2

. bench/timing.sh
