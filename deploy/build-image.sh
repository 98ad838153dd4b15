#!/usr/bin/env bash
# deploy/build-image.sh [BINARY] [NAME:TAG] [OUT.tar]
#
# Builds factbuoy's one container image, offline: the factbuoy binary (the CLI, the aggregator and
# the agent; the bundled plugins are inside it) plus the shared libraries `ldd` lists for it (the
# C library and its loader), packed by deploy/mkimage.sh as an OCI image archive. No registry, no
# base image, no docker daemon; `ctr -n k8s.io images import OUT.tar` on each node loads it
# (deploy/README.md).
#
#   BINARY   default target/release/factbuoy
#   NAME:TAG default factbuoy.local/factbuoy:<the binary's version>
#   OUT.tar  default factbuoy-image.tar
#
# The layout suits a non-root user (uid/gid 65532, `nonroot`) and a read-only root file system:
# every file is root-owned and read-only to others, and the directories factbuoy writes to
# (/tmp, /var/lib/factbuoy, /var/spool/factbuoy) are empty mount points for emptyDir volumes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BINARY=${1:-target/release/factbuoy}
[ -x "$BINARY" ] || { echo "build-image.sh: $BINARY is not an executable; build it with cargo build --release" >&2; exit 2; }
VERSION=$("$BINARY" --version | awk '{print $2}')
REF=${2:-factbuoy.local/factbuoy:$VERSION}
OUT=${3:-factbuoy-image.tar}

R=$(mktemp -d)
chmod 0755 "$R"   # the image's / : mktemp made it 0700, which a non-root user cannot enter
trap 'rm -rf "$R"' EXIT
mkdir -p "$R/bin" "$R/etc/factbuoy" "$R/tmp" "$R/host" "$R/var/lib/factbuoy" "$R/var/spool/factbuoy" \
  "$R/proc" "$R/sys" "$R/dev"
install -m 0755 "$BINARY" "$R/bin/factbuoy"
# The dynamic loader and every library the binary links, at the paths the binary looks for.
ldd "$BINARY" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' | while read -r lib; do
  mkdir -p "$R$(dirname "$lib")"
  cp -L "$lib" "$R$lib"
done
# The system's CA certificates: the aggregator pulls plugins from registries over TLS, and a
# public registry's certificate is signed by one of these.
mkdir -p "$R/etc/ssl/certs"
cp -L /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$R/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$R/etc/group"
chmod 1777 "$R/tmp"
"$HERE/mkimage.sh" "$R" "$REF" "$OUT" /bin/factbuoy
