#!/usr/bin/env bash
# tests/prerequisites.sh: installs what the whole test suite needs and is not built by cargo,
# each part only when it is missing, so a second run takes seconds. tests/suite.sh runs it first.
#
# - Debian packages (apt-get, as root; Debian 12 and derivatives), listed below with the tests
#   that need them;
# - Python venvs under target/ (PyPI): Ansible for the setup plugin's comparison and fact cache,
#   ansible-lint for the Ansible role,
#   componentize-py, mypy and build for Python plugins and the Python SDK, fusepy for the
#   stuck-file-system test;
# - the JavaScript plugin toolchain under target/ (npm, pinned in toolchains/js/package-lock.json:
#   componentize-js, jco, TypeScript);
# - the Kubernetes test cluster's binaries, built once into /var/cache/factbuoy (tests/kube/,
#   about 11 minutes on an idle 2-core machine the first time, a second after);
# - the Rust target aarch64-unknown-linux-gnu (rustup), for the arm64 build;
# (cargo-semver-checks is built by tests/semver/check.sh itself, only when the check has to run.)
# The Rust toolchain and its wasm32-wasip2 target come from rust-toolchain.toml and the build
# itself (host/catalog/build.rs adds the target through rustup).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
log() { printf 'prerequisites: %s\n' "$*" >&2; }

missing=()
# want CHECK PACKAGE...: the packages, unless the shell command CHECK succeeds.
want() {
  local check=$1
  shift
  if ! bash -c "$check" >/dev/null 2>&1; then missing+=("$@"); fi
}
# pip inside a venv (Debian's python3 has the venv module but not ensurepip without it).
want 'python3 -c "import ensurepip, venv"' python3-venv
# systemd-logs tests: journalctl and systemd-journal-remote write and read real journal files;
# the committed fixtures are zstd-compressed.
want 'command -v journalctl && [ -x /lib/systemd/systemd-journal-remote ]' systemd systemd-journal-remote
want 'command -v zstd' zstd
# Aggregator tests: independent TLS clients that try every refusal.
want 'command -v curl && command -v openssl' curl openssl
# Sandbox test of a plugin stuck in a host call: fusepy loads libfuse.so.2.
want '[ -e /usr/lib/x86_64-linux-gnu/libfuse.so.2 ] || [ -e /usr/lib/aarch64-linux-gnu/libfuse.so.2 ]' libfuse2
# Sandbox budget tests: GNU time measures a child's peak RSS.
want '[ -x /usr/bin/time ]' time
# tests/all/cli_terminal.rs runs the binary on a pseudo-terminal with script(1).
want 'command -v script' bsdutils
# inspect report tests: a real headless browser loads the HTML report.
want 'command -v chromium' chromium
# The comparison with Ansible covers the facts Ansible gets from programs: interface features,
# each disk's controller (lspci and pci.ids), LVM (vgs, lvs, pvs).
want 'command -v ethtool && command -v lspci && command -v vgs' ethtool pciutils lvm2
# Fleet tests: each remote machine is a network namespace whose firewall drops inbound
# connections; socat listens in one to prove it does.
want 'command -v ip && command -v iptables && command -v socat' iproute2 iptables socat
# Registry tests (tests/all/registry.rs): the CNCF distribution registry, skopeo as the client
# nobody here wrote, Apache's htpasswd for the registry's password file.
want 'command -v docker-registry && command -v skopeo && command -v htpasswd' docker-registry skopeo apache2-utils
# factbuoy's image carries the system's CA certificates (deploy/build-image.sh).
want '[ -f /etc/ssl/certs/ca-certificates.crt ]' ca-certificates
# JavaScript plugins: Node.js and npm.
want 'command -v node && command -v npm' nodejs npm
# The arm64 image (tests/all/image.rs): Debian's cross compiler and arm64 C library build the
# arm64 binary (deploy/cross-build.sh) and fill its image; qemu-user runs it here; skopeo (above)
# reads the image as a registry copy would.
want 'command -v aarch64-linux-gnu-gcc && [ -e /usr/aarch64-linux-gnu/lib/crt1.o ]' gcc-aarch64-linux-gnu libc6-dev-arm64-cross
want 'command -v qemu-aarch64-static' qemu-user-static
# ... and gdb finds the image binary's debug file through its debuglink.
want 'command -v gdb' gdb
# A fleet's metrics (tests/all/fleet_metrics.rs): a real Prometheus scrapes them, and promtool
# checks and unit-tests the alert rules deploy/prometheus/ gives.
want 'command -v prometheus && command -v promtool' prometheus
# The fleet agent as a container (tests/all/agent_container.rs): rootful Podman.
want 'command -v podman' podman
# The Ansible role's test (tests/all/ansible_role.rs): machines booted by systemd-nspawn from a
# Debian tree debootstrap makes (tests/ansible/machine-rootfs.sh), reached over ssh.
want 'command -v debootstrap || [ -x /usr/sbin/debootstrap ]' debootstrap
want 'command -v systemd-nspawn' systemd-container
want 'command -v ssh && command -v ssh-keygen' openssh-client

apt_updated=
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update
  apt_updated=1
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# deploy/cross-build.sh's Rust target. rustup adds a toolchain's targets only when it installs
# the toolchain, and a machine may set RUSTUP_AUTO_INSTALL=0: add it here, once.
if ! [ -d "$(rustc --print sysroot)/lib/rustlib/aarch64-unknown-linux-gnu" ]; then
  log "adding the Rust target aarch64-unknown-linux-gnu (rustup target add)"
  rustup target add aarch64-unknown-linux-gnu
fi

log "Python venvs (Ansible, ansible-lint, componentize-py, fusepy) and the JavaScript toolchain under target/"
tests/ansible/venv.sh >/dev/null
tests/ansible/lint-venv.sh >/dev/null
toolchains/python/venv.sh >/dev/null
tests/fuse/venv.sh >/dev/null
toolchains/js/install.sh >/dev/null

# The Kubernetes test cluster (tests/kube/README.md): its own apt packages, then Kubernetes
# v1.20.2 built from Debian's source package once, cached outside the repository.
log "the Kubernetes test cluster's binaries (tests/kube/build.sh)"
apt_updated=$apt_updated tests/kube/build.sh

# The Ansible role's test machines: a Debian tree made by debootstrap once, cached outside the
# repository (about 2 minutes the first time, nothing after).
log "the Ansible role's test machines (tests/ansible/machine-rootfs.sh)"
tests/ansible/machine-rootfs.sh >/dev/null
