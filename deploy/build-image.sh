#!/usr/bin/env bash
# deploy/build-image.sh [BINARY] [NAME:TAG] [OUT.tar]
# deploy/build-image.sh --platform linux/amd64=BINARY --platform linux/arm64=BINARY [NAME:TAG] [OUT.tar]
#
# Builds factbuoy's one container image, offline: the factbuoy binary (the CLI, the aggregator and
# the agent; the bundled plugins are inside it) plus the shared libraries it needs (the C library
# and its loader), packed by deploy/mkimage.sh as an OCI image archive with gzip-compressed
# layers. No registry, no base image, no docker daemon; `ctr -n k8s.io images import OUT.tar` on
# each node loads it (deploy/README.md).
#
#   BINARY   default target/release/factbuoy; its ELF header says its platform (x86-64: linux/amd64,
#            AArch64: linux/arm64)
#   --platform linux/ARCH=BINARY (repeatable): one binary per platform; two make one image index
#            (amd64 and arm64), from which each node takes its own
#   NAME:TAG default factbuoy.local/factbuoy:<the binary's version>
#   OUT.tar  default factbuoy-image.tar
#
# The image carries no debug info: a binary with debug sections is copied without them and
# without its symbol table, which both go (compressed) to OUT-without-.tar.ARCH.debug beside
# OUT.tar, to symbolise a backtrace or a core later; the binary's .gnu_debuglink names it
# factbuoy.debug (deploy/README.md says how to use it). A binary without debug sections is
# copied as it is.
# An arm64 binary's libraries come from Debian's cross C library (/usr/aarch64-linux-gnu/lib,
# package libc6-dev-arm64-cross) and go where the arm64 loader looks (/lib/aarch64-linux-gnu).
#
# The layout suits a non-root user (uid/gid 65532, `nonroot`) and a read-only root file system:
# every file is root-owned and read-only to others, and the directories factbuoy writes to
# (/tmp, /var/lib/factbuoy, /var/spool/factbuoy) are empty mount points for emptyDir volumes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "build-image.sh: $*" >&2; exit 2; }

# arch_of BINARY: the OCI architecture its ELF header names.
arch_of() {
  case "$(LC_ALL=C readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p')" in
    *X86-64*) echo amd64 ;;
    AArch64) echo arm64 ;;
    '') die "$1 is not an ELF file" ;;
    *) die "$1 is built for $(LC_ALL=C readelf -h "$1" | sed -n 's/^ *Machine: *//p'), not x86-64 or AArch64" ;;
  esac
}

PLATFORMS=() BINARIES=()
while [ "${1:-}" = --platform ]; do
  [ $# -ge 2 ] || die "--platform needs linux/ARCH=BINARY"
  case "$2" in
    linux/amd64=?* | linux/arm64=?*) PLATFORMS+=("${2%%=*}") BINARIES+=("${2#*=}") ;;
    *) die "--platform takes linux/amd64=BINARY or linux/arm64=BINARY, not $2" ;;
  esac
  shift 2
done
if [ ${#PLATFORMS[@]} -eq 0 ]; then
  BINARIES=("${1:-target/release/factbuoy}")
  [ $# -eq 0 ] || shift
fi
for i in "${!BINARIES[@]}"; do
  b=${BINARIES[$i]}
  [ -f "$b" ] && [ -x "$b" ] || die "$b is not an executable; build it with cargo build --release (deploy/cross-build.sh --release for arm64)"
  arch=$(arch_of "$b")
  if [ -z "${PLATFORMS[$i]:-}" ]; then
    PLATFORMS[i]=linux/$arch
  elif [ "${PLATFORMS[$i]}" != "linux/$arch" ]; then
    die "$b is an $arch binary, given for ${PLATFORMS[$i]}"
  fi
done

# The version names the default tag: ask a binary this machine runs (natively, or an arm64 one
# through qemu-user when installed).
version() {
  local i b
  for i in "${!BINARIES[@]}"; do
    b=${BINARIES[$i]}
    case "${PLATFORMS[$i]}/$(uname -m)" in
      linux/amd64/x86_64 | linux/arm64/aarch64) "$b" --version | awk '{print $2}'; return ;;
      linux/arm64/*) if command -v qemu-aarch64-static >/dev/null; then
          qemu-aarch64-static -L /usr/aarch64-linux-gnu "$b" --version | awk '{print $2}'; return
        fi ;;
    esac
  done
  die "no binary runs on this machine to tell its version: give NAME:TAG"
}
if [ -n "${1:-}" ]; then REF=$1; else REF=factbuoy.local/factbuoy:$(version); fi
OUT=${2:-factbuoy-image.tar}
[ $# -le 2 ] || die "too many arguments: $*"

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# libs ROOT BINARY TRIPLET: copies the binary's loader and every library it needs, recursively,
# from this machine (its own architecture's directories, or Debian's cross packages' for another),
# to the paths that architecture's loader reads (its PT_INTERP path, /lib/TRIPLET).
libs() {
  local root=$1 bin=$2 triplet=$3 interp queue=() seen=" " name dir found
  interp=$(LC_ALL=C readelf -l "$bin" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')
  [ -n "$interp" ] || die "$bin has no program interpreter (a static binary needs no libraries: use deploy/mkimage.sh)"
  queue=("$bin")
  while [ ${#queue[@]} -gt 0 ]; do
    for name in $(LC_ALL=C readelf -d "${queue[0]}" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      # The loader is copied once, at its own path, below.
      [ "$name" != "$(basename "$interp")" ] || continue
      case "$seen" in *" $name "*) continue ;; esac
      seen="$seen$name "
      found=
      for dir in "/lib/$triplet" "/usr/lib/$triplet" "/usr/$triplet/lib"; do
        if [ -e "$dir/$name" ]; then found=$dir/$name; break; fi
      done
      [ -n "$found" ] || die "$name, which $bin needs, is not in /lib/$triplet, /usr/lib/$triplet or /usr/$triplet/lib (for arm64: apt-get install libc6-dev-arm64-cross)"
      mkdir -p "$root/lib/$triplet"
      cp -L "$found" "$root/lib/$triplet/$name"
      queue+=("$found")
    done
    queue=("${queue[@]:1}")
  done
  found=
  for dir in "$(dirname "$interp")" "/lib/$triplet" "/usr/$triplet/lib"; do
    if [ -e "$dir/$(basename "$interp")" ]; then found=$dir/$(basename "$interp"); break; fi
  done
  [ -n "$found" ] || die "the loader $interp of $bin is not on this machine (for arm64: apt-get install libc6-dev-arm64-cross)"
  mkdir -p "$root$(dirname "$interp")"
  cp -L "$found" "$root$interp"
}

ARGS=()
for i in "${!BINARIES[@]}"; do
  b=${BINARIES[$i]} arch=${PLATFORMS[$i]#linux/}
  case $arch in
    amd64) triplet=x86_64-linux-gnu objcopy=objcopy ;;
    arm64) triplet=aarch64-linux-gnu objcopy=aarch64-linux-gnu-objcopy ;;
  esac
  command -v "$objcopy" >/dev/null || objcopy=objcopy
  R=$W/$arch
  mkdir -p "$R/bin" "$R/etc/factbuoy" "$R/tmp" "$R/host" "$R/var/lib/factbuoy" "$R/var/spool/factbuoy" \
    "$R/proc" "$R/sys" "$R/dev"
  chmod 0755 "$R"   # the image's / : a non-root user must be able to enter it
  if LC_ALL=C readelf -S "$b" | grep -q ' \.debug_\(info\|line\) '; then
    debug=${OUT%.tar}.$arch.debug
    # The debuglink names factbuoy.debug whatever OUT is called, so the image's digest depends
    # on the binary alone.
    mkdir "$W/$arch.debug"
    "$objcopy" --only-keep-debug --compress-debug-sections=zlib "$b" "$W/$arch.debug/factbuoy.debug"
    # The symbol table goes too (12 MB, 2.3 MB of the compressed layer on amd64): the debug file
    # keeps it, and the layer stays under 20 MB.
    "$objcopy" --strip-all --add-gnu-debuglink="$W/$arch.debug/factbuoy.debug" "$b" "$R/bin/factbuoy"
    chmod 0755 "$R/bin/factbuoy"
    mv "$W/$arch.debug/factbuoy.debug" "$debug"
    echo "$debug: the debug info of ${PLATFORMS[$i]}'s /bin/factbuoy" >&2
  else
    install -m 0755 "$b" "$R/bin/factbuoy"
  fi
  libs "$R" "$b" "$triplet"
  # The system's CA certificates: the aggregator pulls plugins from registries over TLS, and a
  # public registry's certificate is signed by one of these.
  mkdir -p "$R/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$R/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$R/etc/group"
  chmod 1777 "$R/tmp"
  ARGS+=(--platform "${PLATFORMS[$i]}=$R")
done
"$HERE/mkimage.sh" "${ARGS[@]}" "$REF" "$OUT" /bin/factbuoy
