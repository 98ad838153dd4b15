#!/usr/bin/env bash
# deploy/cross-build.sh [--release] [-- CARGO_ARGS...]
#
# Cross-builds the factbuoy binary for linux/arm64 (Rust target aarch64-unknown-linux-gnu) on an
# x86-64 Debian machine with Debian's cross compiler, and prints the binary's path on stdout.
#
#   (default)  the dev profile without debug info: the cheapest build that runs, for the tests
#              (tests/all/arm64.rs runs it under qemu-aarch64-static) and CI;
#   --release  the release profile, for the image (deploy/build-image.sh --platform linux/arm64=...).
#
# The cargo target directory is kept OUTSIDE the repository, in a persistent cache:
#   ${FACTBUOY_CROSS_TARGET:-/var/cache/factbuoy/cross-target}
# so the dependencies (wasmtime, cranelift, ring, SQLite) are compiled once per machine and a
# second build recompiles only the workspace crates that changed. Cargo's own lock on that
# directory serialises concurrent builds. The bundled wasm plugins, which do not depend on the
# host's target, are built in (or taken from) this checkout's own target/wasm-plugins.
#
# Needs: apt packages gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (ring and the bundled SQLite
# compile C), and `rustup target add aarch64-unknown-linux-gnu`; tests/prerequisites.sh installs
# all three when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=aarch64-unknown-linux-gnu
CACHE=${FACTBUOY_CROSS_TARGET:-/var/cache/factbuoy/cross-target}
PROFILE=dev DIR=debug
if [ "${1:-}" = --release ]; then
  PROFILE=release DIR=release
  shift
fi
[ "${1:-}" != -- ] || shift

command -v aarch64-linux-gnu-gcc >/dev/null || {
  echo "cross-build.sh: aarch64-linux-gnu-gcc is missing: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross (or run tests/prerequisites.sh)" >&2
  exit 2
}
sysroot=$(rustc --print sysroot)
[ -d "$sysroot/lib/rustlib/$TARGET" ] || {
  echo "cross-build.sh: the Rust target $TARGET is missing: rustup target add $TARGET (or run tests/prerequisites.sh)" >&2
  exit 2
}

# The linker and the C compiler for the target; the host's own build scripts keep the host's.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
# Debug info is most of a dev build's link and disk; a backtrace of this build still names
# functions. Incremental state would only grow the cache: CI builds once, then rarely.
export CARGO_PROFILE_DEV_DEBUG=false
export CARGO_INCREMENTAL=0
# The bundled wasm plugins are the same for every host target: build them where the native
# build of this checkout does (host/catalog/build.rs), once for both.
export FACTBUOY_PLUGIN_TARGET_DIR=${FACTBUOY_PLUGIN_TARGET_DIR:-$(realpath -m "${CARGO_TARGET_DIR:-target}")/wasm-plugins}
export CARGO_TARGET_DIR=$CACHE
mkdir -p "$CACHE"

cargo build --locked -p factbuoy --bin factbuoy --target "$TARGET" --profile "$PROFILE" "$@" >&2
echo "$CACHE/$TARGET/$DIR/factbuoy"
