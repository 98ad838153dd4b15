#!/usr/bin/env bash
# tests/fresh-machine.sh: the README's first two commands as a newcomer runs them, on the
# closest thing to a fresh machine this one can make, timed.
#
# Usage: tests/fresh-machine.sh [run|suite] [WORKDIR]
#   run    (default) `cargo run --release -- run`: builds and collects this host's facts; checks
#          that the wasm32-wasip2 target was added and that a bundle was written.
#   suite  tests/suite.sh: installs what the tests need and runs the whole suite.
#
# In WORKDIR (default: a new directory under /tmp, removed afterwards unless it failed):
# - a rustup home holding a copy of this machine's toolchain of rust-toolchain.toml without the
#   wasm32-wasip2 target (as a machine has it whose toolchain was installed before the target
#   was named, or by an image), and RUSTUP_AUTO_INSTALL=0, as CI machines set it;
# - an empty cargo home (no crates downloaded yet) with rustup's proxies, and a HOME of its own
#   (no compilation cache, no state);
# - a clean clone of this checkout's HEAD (commit first: what is not committed is not tested).
# What it cannot make: a machine without this one's Debian packages (the `suite` step installs
# the missing ones, so here it finds them) and without the Kubernetes test cluster's build
# cache in /var/cache/factbuoy (rebuilt only when its recipe changed; 11 minutes on an idle
# 2-core machine otherwise).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}
case "$mode" in run | suite) ;; *) echo "usage: $0 [run|suite] [WORKDIR]" >&2; exit 2 ;; esac
work=${2:-$(mktemp -d /tmp/factbuoy-fresh.XXXXXX)}
mkdir -p "$work"
log() { printf 'fresh machine: %s\n' "$*" >&2; }

channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$HERE/rust-toolchain.toml")
host=$(rustc -vV | sed -n 's/^host: //p')
toolchain="$channel-$host"
source_toolchain=$(rustup toolchain list -v | awk -v t="$toolchain" '$1 == t { print $NF }')
[ -d "$source_toolchain" ] || { log "this machine has no rustup toolchain $toolchain to copy"; exit 2; }

export RUSTUP_HOME="$work/rustup" CARGO_HOME="$work/cargo" HOME="$work/home"
export RUSTUP_AUTO_INSTALL=0
unset CARGO_TARGET_DIR RUSTUP_TOOLCHAIN RUSTC RUSTDOC CARGO
mkdir -p "$RUSTUP_HOME/toolchains" "$CARGO_HOME/bin" "$HOME"
log "copying the $toolchain toolchain into $RUSTUP_HOME, without wasm32-wasip2"
cp -a "$(readlink -f "$source_toolchain")" "$RUSTUP_HOME/toolchains/$toolchain"
lib="$RUSTUP_HOME/toolchains/$toolchain/lib/rustlib"
rm -rf "$lib/wasm32-wasip2" "$lib/manifest-rust-std-wasm32-wasip2"
sed -i '/^rust-std-wasm32-wasip2$/d' "$lib/components"
# rustup's record of the installed components: drop the wasm target's entry.
python3 - "$lib/multirust-config.toml" <<'EOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r'\[\[components\]\]\npkg = "rust-std"\ntarget = "wasm32-wasip2"\n[^\[]*', '', text)
open(path, "w").write(text)
EOF
printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$toolchain" \
  > "$RUSTUP_HOME/settings.toml"
rustup_bin=$(command -v rustup)
cp "$rustup_bin" "$CARGO_HOME/bin/rustup"
for proxy in cargo rustc rustdoc cargo-clippy clippy-driver rustfmt cargo-fmt; do
  ln -sf rustup "$CARGO_HOME/bin/$proxy"
done
export PATH="$CARGO_HOME/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
if rustup target list --installed | grep -qx wasm32-wasip2; then
  log "the copied toolchain still has wasm32-wasip2"; exit 1
fi

log "cloning $(git -C "$HERE" rev-parse --short HEAD) into $work/factbuoy"
git clone --quiet "$HERE" "$work/factbuoy"
cd "$work/factbuoy"
# GNU time: the wall-clock time, and the CPU time, which says more on a machine that is busy
# with other work than wall-clock time does.
timed() { /usr/bin/time -f "fresh machine: $* took %e s (%U s user, %S s system) on $(nproc) cores" "$@"; }
if [ "$mode" = run ]; then
  log "cargo run --release -- run"
  timed cargo run --release -- run
  ls ./*_factbuoy_*.tar.gz >/dev/null
  rustup target list --installed | grep -qx wasm32-wasip2 ||
    { log "the build did not add wasm32-wasip2"; exit 1; }
else
  log "tests/suite.sh"
  timed tests/suite.sh
fi
[ -n "${2:-}" ] || rm -rf "$work"
