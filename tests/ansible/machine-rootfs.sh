#!/usr/bin/env bash
# Makes (once) the Debian root file system the Ansible role's test boots as machines
# (tests/all/ansible_role.rs: two `systemd-nspawn --boot --volatile=overlay` machines share it
# read-only), and prints its path. It is what a freshly installed server has that the role relies
# on: systemd as init, an ssh server for Ansible to connect to, python3 for Ansible's modules
# (and python3-apt for its apt module), and Podman for the role's container method (a server
# that runs "just Podman").
#
# Built by debootstrap from Debian's mirror into /var/cache/factbuoy/ansible-rootfs-<hash>,
# outside the repository, the hash being this script's: a changed recipe builds a new tree, an
# unchanged one is reused (about 2 minutes the first time, nothing after). Needs root and the
# packages debootstrap and systemd-container (tests/prerequisites.sh).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/sbin:/sbin"

suite=bookworm # the same Debian as the machine that builds factbuoy: its binary runs there
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${FACTBUOY_CACHE:-/var/cache/factbuoy}
key=$(sha256sum machine-rootfs.sh | cut -c1-16)
rootfs=$cache/ansible-rootfs-$key

if [ ! -e "$rootfs/.complete" ]; then
    mkdir -p "$cache"
    # One builder at a time; a half-made tree from an interrupted build is started again.
    exec 9>"$rootfs.lock"
    flock 9
    if [ ! -e "$rootfs/.complete" ]; then
        rm -rf "$rootfs"
        echo "machine-rootfs.sh: debootstrap $suite into $rootfs" >&2
        # (netavark: debootstrap does not pick a provider of Podman's virtual dependency
        # container-network-stack itself.)
        debootstrap --variant=minbase \
            --include=systemd,systemd-sysv,dbus,openssh-server,python3,python3-apt,podman,netavark \
            "$suite" "$rootfs" "$mirror" >&2
        # Each booted machine makes its own machine id (the overlay over this tree is its own),
        # and takes its host name from `systemd-nspawn --machine`, not from the builder's.
        : >"$rootfs/etc/machine-id"
        rm -f "$rootfs/etc/hostname"
        # sshd's PAM session would set the login uid, which a container may not: optional here.
        sed -i 's/^session\s\+required\s\+pam_loginuid.so/session optional pam_loginuid.so/' \
            "$rootfs/etc/pam.d/sshd"
        # Ansible logs in as root with the key the test makes (bound at /root/.ssh).
        printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\n' \
            >"$rootfs/etc/ssh/sshd_config.d/factbuoy-test.conf"
        # Podman in an nspawn machine on a host like the test's (cgroup v1, root without
        # CAP_SYS_RESOURCE) needs what a server has without asking: cgroup controllers it may
        # write (nspawn mounts them read-only; a unit makes them writable at boot, and Podman
        # manages its cgroups itself, not through the machine's systemd), resource limits left
        # as they are (raising them needs CAP_SYS_RESOURCE), and no session keyring (nspawn's
        # seccomp filter refuses keyctl). The test also gives each machine a tmpfs at
        # /var/lib/containers: its root is an overlay, and Podman's overlay cannot stack on one.
        mkdir -p "$rootfs/etc/containers/containers.conf.d"
        cat >"$rootfs/etc/containers/containers.conf.d/nspawn-machine.conf" <<'CONF'
[containers]
default_ulimits = []
keyring = false

[engine]
cgroup_manager = "cgroupfs"
CONF
        cat >"$rootfs/etc/systemd/system/cgroup-writable.service" <<'UNIT'
[Unit]
Description=Make the cgroup controllers writable, as on a server (for Podman)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target

[Service]
Type=oneshot
# (Only v1 controllers are mounted read-only; $$ is systemd's escape of $.)
ExecStart=/bin/sh -c 'findmnt -rn -t cgroup -o TARGET | while read -r c; do mount -o remount,bind,rw "$$c"; done'

[Install]
WantedBy=sysinit.target
UNIT
        ln -s /etc/systemd/system/cgroup-writable.service \
            "$rootfs/etc/systemd/system/sysinit.target.wants/cgroup-writable.service"
        rm -rf "$rootfs/var/cache/apt/archives/"*.deb
        touch "$rootfs/.complete"
    fi
fi
echo "$rootfs"
