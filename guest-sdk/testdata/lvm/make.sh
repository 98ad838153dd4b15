#!/usr/bin/env bash
# Regenerates the LVM fixtures with the real LVM tools (run as root, lvm2 installed): a volume
# group `fixture` on two loop devices with a linear, a two-way striped and a linear logical
# volume that spans both devices (two segments), its metadata as
# the tools back it up (`fixture.vg`), and what `vgs`, `lvs` and `pvs` print for it as Ansible
# runs them (`fixture.vgs`, `.lvs`, `.pvs`). Nothing is activated, so device-mapper is not
# needed; the loop devices and their files are removed again.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/sbin:/sbin" LVM_SUPPRESS_FD_WARNINGS=1
work="$(mktemp -d)"
trap 'vgremove -y fixture >/dev/null 2>&1 || true
      for d in "${devices[@]:-}"; do [ -n "$d" ] && losetup -d "$d"; done
      rm -rf "$work"' EXIT
devices=()
for n in 1 2; do
  truncate -s 40M "$work/pv$n.img"
  devices+=("$(losetup --find --show "$work/pv$n.img")")
done
nodm=()
grep -qw device-mapper /proc/misc || nodm=(--driverloaded n)
vgcreate -s 4M fixture "${devices[@]}" >/dev/null 2>&1
lvcreate "${nodm[@]}" -y --activate n --zero n -L 12M -n linear fixture >/dev/null 2>&1
lvcreate "${nodm[@]}" -y --activate n --zero n -i 2 -L 16M -n striped fixture >/dev/null 2>&1
lvcreate "${nodm[@]}" -y --activate n --zero n -L 32M -n spanning fixture >/dev/null 2>&1
vgcfgbackup -f fixture.vg fixture >/dev/null 2>&1
options=(--noheadings --nosuffix --units g --separator ',')
vgs "${options[@]}" fixture > fixture.vgs
lvs "${options[@]}" fixture > fixture.lvs
# The loop device names are this machine's; the test matches rows by PV UUID instead.
pvs "${options[@]}" -o +pv_uuid "${devices[@]}" > fixture.pvs
