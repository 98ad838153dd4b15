#!/usr/bin/env bash
# Makes (once) an LVM volume group on a loop device, so that the comparison with Ansible has a
# volume group, a logical volume and a physical volume to compare; prints what it did.
# Usage: tests/ansible/lvm-loop.sh [up|down]
# The backing file lives in target/. Where loop devices or LVM are not allowed (an unprivileged
# container), it says so and exits 0: the comparison then runs without a volume group, and
# ansible_lvm is compared as the empty lists both report.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export PATH="$PATH:/usr/sbin:/sbin"
# The tools complain about every descriptor they inherit (cargo's, CI's).
export LVM_SUPPRESS_FD_WARNINGS=1

vg=factbuoy_ci
image="$PWD/target/lvm-loop.img"

attached() { losetup -j "$image" 2>/dev/null | cut -d: -f1 | head -n1; }

# Loop devices a killed run left attached to a checkout's image that has since been deleted
# (a CI clone removed): their physical volumes would show in both tools' lists and in no
# comparison's expectations, so they go, with any volume group on them.
remove_orphans() {
  local dev back vg
  losetup -nO NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
    case "$back" in
      */target/lvm-loop.img*"(deleted)") ;;
      *) continue ;;
    esac
    vg="$(pvs --noheadings -o vg_name "$dev" 2>/dev/null | tr -d ' ')"
    [ -z "$vg" ] || vgremove -y "$vg" >/dev/null 2>&1
    pvremove -y "$dev" >/dev/null 2>&1
    losetup -d "$dev" && echo "lvm-loop: removed $dev, left attached to a deleted $back"
  done
}

case "${1:-up}" in
up)
  remove_orphans
  if vgs "$vg" >/dev/null 2>&1; then
    echo "lvm-loop: volume group $vg is already there"
    exit 0
  fi
  mkdir -p target
  truncate -s 64M "$image" || { echo "lvm-loop: cannot create $image; no LVM volume"; exit 0; }
  device="$(attached)"
  if [ -z "$device" ] && ! device="$(losetup --find --show "$image" 2>&1)"; then
    echo "lvm-loop: this machine does not allow loop devices ($device); no LVM volume"
    exit 0
  fi
  # Without device-mapper (some kernels, most containers) nothing can be activated: the
  # logical volumes are made without activation or zeroing, and the tools are told so.
  nodm=()
  grep -qw device-mapper /proc/misc || nodm=(--driverloaded n)
  if ! out="$(pvcreate -y "$device" 2>&1 && vgcreate "$vg" "$device" 2>&1 &&
              lvcreate "${nodm[@]}" -y --activate n --zero n -L 20M -n data "$vg" 2>&1 &&
              lvcreate "${nodm[@]}" -y --activate n --zero n -L 8M -n logs "$vg" 2>&1)"; then
    echo "lvm-loop: LVM refused on $device: $out"
    "$0" down
    exit 0
  fi
  echo "lvm-loop: volume group $vg with logical volumes data and logs on $device"
  ;;
down)
  vgremove -y "$vg" >/dev/null 2>&1
  device="$(attached)"
  if [ -n "$device" ]; then
    pvremove -y "$device" >/dev/null 2>&1
    losetup -d "$device"
  fi
  rm -f "$image"
  ;;
esac
