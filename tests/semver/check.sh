#!/usr/bin/env bash
# tests/semver/check.sh: the Rust SDK as a public API (docs/wit-versioning.md, "The Rust SDK's
# API"), run by tests/suite.sh:
#
# 1. `cargo semver-checks` of factbuoy-guest against each released SDK kept here
#    (factbuoy-guest-<version>/, tests/semver/README.md) as a minor release: nothing a released
#    SDK had may be missing or changed, deprecated or not; additions are fine. Its verdict is
#    kept by content: tests/semver/checked holds the digest of everything the check reads (the
#    tool's version, the SDK, factbuoy-linux, the baselines) as of its last pass, and the check
#    runs whenever that digest differs, after which this script records the new one (commit
#    it). So a change to the SDK is checked, here or in CI, and a machine where nothing of it
#    changed does not build the tool (10 minutes of CPU) to say so again.
# 2. `cargo package` of factbuoy-guest with factbuoy-linux, which it depends on: cargo packages
#    both, resolves the SDK against the Linux parsers' package through a temporary local
#    registry, and builds each from its package, so what a registry would get is complete.
#
# cargo-semver-checks is installed, when the check runs and it is missing, into
# $FACTBUOY_CARGO_TOOLS (default /var/cache/factbuoy/cargo-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { printf 'tests/semver/check.sh: %s\n' "$*" >&2; }
tools=${FACTBUOY_CARGO_TOOLS:-/var/cache/factbuoy/cargo-tools}
semver_checks_version=0.51.0

# Everything the check reads, in path order, with the tool's version.
digest() {
  {
    echo "cargo-semver-checks $semver_checks_version"
    find guest-sdk/Cargo.toml guest-sdk/src guest-sdk/wit linux/Cargo.toml linux/src \
      tests/semver \( -path tests/semver/checked -o -name target \) -prune -o \
      \( -type f -o -type l \) -print |
      LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -d' ' -f1
}
now=$(digest)
if [ "$now" = "$(cat tests/semver/checked 2>/dev/null)" ]; then
  log "the SDK, factbuoy-linux and the baselines are as cargo semver-checks last passed them" \
    "(tests/semver/checked); not checked again"
else
  if ! "$tools/bin/cargo-semver-checks" --version 2>/dev/null |
    grep -qx "cargo-semver-checks $semver_checks_version"; then
    log "cargo-semver-checks $semver_checks_version into $tools (once; about 14 minutes of CPU)"
    # A debug build: the tool checks one small crate in a fraction of a second, and a release
    # build would cost more CPU than it ever saves. In a temporary target directory, removed
    # after, not the tests' (CARGO_TARGET_DIR may say).
    env -u CARGO_TARGET_DIR cargo install --debug --locked --version "$semver_checks_version" \
      --root "$tools" cargo-semver-checks
  fi
  for baseline in tests/semver/factbuoy-guest-*/; do
    log "cargo semver-checks factbuoy-guest against ${baseline}"
    # The SDK by its manifest: from the workspace's root the tool would also find the baseline,
    # a second package of the same name, and stop. The host's target: the SDK's API is the same
    # for wasm32-wasip2 (nothing in it depends on the target).
    "$tools/bin/cargo-semver-checks" semver-checks --manifest-path guest-sdk/Cargo.toml \
      --baseline-root "$baseline" --release-type minor
  done
  echo "$now" >tests/semver/checked
  log "passed; recorded in tests/semver/checked (commit it with the change)"
fi

log "cargo package factbuoy-linux and factbuoy-guest"
# --allow-dirty: this checks what the packages hold and that they build, not that the tree is
# committed (a suite run on a work in progress must not fail here).
cargo package --locked --allow-dirty --package factbuoy-linux --package factbuoy-guest
