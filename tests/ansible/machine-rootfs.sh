#!/usr/bin/env bash
# Makes (once) the Debian root file system the Ansible role's test boots as machines
# (tests/all/ansible_role.rs: two `systemd-nspawn --boot --volatile=overlay` machines share it
# read-only), and prints its path. It is what a freshly installed server has that the role relies
# on: systemd as init, an ssh server for Ansible to connect to, python3 for Ansible's modules.
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
        debootstrap --variant=minbase \
            --include=systemd,systemd-sysv,dbus,openssh-server,python3 \
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
        rm -rf "$rootfs/var/cache/apt/archives/"*.deb
        touch "$rootfs/.complete"
    fi
fi
echo "$rootfs"
