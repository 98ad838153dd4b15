#!/usr/bin/env bash
# tests/suite.sh: the whole test suite, on a fresh machine too (as root, for apt-get, loop devices
# and network namespaces): installs what the tests need (tests/prerequisites.sh), then
#
# 1. the Kubernetes test cluster's own check (tests/kube/smoke.sh, about 85 s);
# 2. the arm64 binary that tests/all/image.rs runs under qemu (deploy/cross-build.sh: a dev build
#    whose target directory is cached in /var/cache/factbuoy/cross-target, so the first run on a
#    machine compiles everything, later ones only the workspace's changed crates);
# 3. `cargo test --workspace --locked`, with an LVM volume group on a loop device where the
#    machine allows one, so that the comparison with Ansible has one to compare;
# 4. a build of the benchmarks (they are not run, but none may stop compiling unnoticed);
# 5. the Rust SDK as a public API: `cargo semver-checks` against the released SDKs and `cargo
#    package` (tests/semver/check.sh, about 2 minutes);
# 6. the setup plugin against real `ansible -m setup` on this machine (tests/ansible/compare.sh:
#    prints the coverage and fails below the bar).
#
# .ci/run is `cargo fmt --check`, clippy, then this. Arguments are passed to `cargo test`
# (`tests/suite.sh -- --test-threads 1`).
set -euo pipefail
cd "$(dirname "$0")/.."
# Where Debian keeps lvm2's, ethtool's and iptables' programs, which tests and the comparison run.
export PATH="$PATH:/usr/sbin:/sbin"
log() { printf 'tests/suite.sh: %s\n' "$*" >&2; }

tests/prerequisites.sh

log "the Kubernetes test cluster's smoke test"
tests/kube/smoke.sh

log "the arm64 binary (deploy/cross-build.sh)"
deploy/cross-build.sh >/dev/null

tests/ansible/lvm-loop.sh up
trap 'tests/ansible/lvm-loop.sh down' EXIT

log "cargo test --workspace --locked $*"
cargo test --workspace --locked "$@"
log "building the benchmarks"
cargo build --workspace --benches --locked

log "the Rust SDK's API and package (tests/semver/check.sh)"
tests/semver/check.sh

log "the setup plugin against ansible -m setup"
tests/ansible/compare.sh
