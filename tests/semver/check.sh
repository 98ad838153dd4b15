#!/usr/bin/env bash
# tests/semver/check.sh: the Rust SDK as a public API (docs/wit-versioning.md, "The Rust SDK's
# API"), run by tests/suite.sh:
#
# 1. `cargo semver-checks` of factbuoy-guest against each released SDK kept here
#    (factbuoy-guest-<version>/, tests/semver/README.md) as a minor release: nothing a released
#    SDK had may be missing or changed, deprecated or not; additions are fine.
# 2. `cargo package` of factbuoy-guest with factbuoy-linux, which it depends on: cargo packages
#    both, resolves the SDK against the Linux parsers' package through a temporary local
#    registry, and builds each from its package, so what a registry would get is complete.
#
# cargo-semver-checks is installed by tests/prerequisites.sh into $FACTBUOY_CARGO_TOOLS
# (default /var/cache/factbuoy/cargo-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { printf 'tests/semver/check.sh: %s\n' "$*" >&2; }
tools=${FACTBUOY_CARGO_TOOLS:-/var/cache/factbuoy/cargo-tools}

for baseline in tests/semver/factbuoy-guest-*/; do
  log "cargo semver-checks factbuoy-guest against ${baseline}"
  # The SDK by its manifest: from the workspace's root the tool would also find the baseline,
  # a second package of the same name, and stop. The host's target: the SDK's API is the same
  # for wasm32-wasip2 (nothing in it depends on the target).
  "$tools/bin/cargo-semver-checks" semver-checks --manifest-path guest-sdk/Cargo.toml \
    --baseline-root "$baseline" --release-type minor
done

log "cargo package factbuoy-linux and factbuoy-guest"
# --allow-dirty: this checks what the packages hold and that they build, not that the tree is
# committed (a suite run on a work in progress must not fail here).
cargo package --locked --allow-dirty --package factbuoy-linux --package factbuoy-guest
