#!/usr/bin/env bash
# deploy/mkimage.sh ROOTFS_DIR NAME:TAG OUT.tar [ENTRYPOINT...]
# deploy/mkimage.sh --platform OS/ARCH=ROOTFS_DIR [--platform ...] NAME:TAG OUT.tar [ENTRYPOINT...]
#
# Packs directories as a container image of one layer per platform, offline: no registry, no base
# image, no docker daemon. The output is an OCI image layout archive (oci-layout, index.json,
# blobs/) that `ctr -n k8s.io images import` and `skopeo copy --all oci-archive:OUT.tar ...`
# accept; `tests/kube/cluster.sh import OUT.tar` loads it into every node. Pods then use it with
# `imagePullPolicy: Never` (or IfNotPresent; avoid the tag `latest`, whose default policy is Always).
#
# - The first form packs ROOTFS_DIR as a linux/amd64 image. With --platform (repeatable:
#   linux/amd64, linux/arm64), each directory becomes one platform's image; two or more are
#   named together by an image index, from which containerd and the kubelet take their own.
# - Each layer is a gzip-compressed tar (application/vnd.oci.image.layer.v1.tar+gzip); the
#   config's diff_id is the digest of the uncompressed tar.
# - Every file in a layer is owned by root (0:0) and dated 1970, entries are sorted and gzip
#   stores no name or time, so the same directories always give the same image digests.
# - NAME is stored fully qualified, as the kubelet asks for it: `busybox:1` becomes
#   `docker.io/library/busybox:1`; a name whose first component has a dot or a port
#   (`factbuoy.local/agent:dev`) is kept as is.
# - ENTRYPOINT (optional) becomes the image's Entrypoint; a pod's `command:` replaces it.
#
# Example, a static (musl) binary:
#   mkdir -p r/bin r/tmp && cp target/x86_64-unknown-linux-musl/release/app r/bin/ && chmod 1777 r/tmp
#   deploy/mkimage.sh r factbuoy.local/app:dev app.tar /bin/app
set -euo pipefail
usage() { sed -n '2,27p' "$0" >&2; exit 2; }
PLATFORMS=() ROOTS=()
while [ "${1:-}" = --platform ]; do
  [ $# -ge 2 ] || usage
  case "$2" in
    linux/amd64=?* | linux/arm64=?*) PLATFORMS+=("${2%%=*}") ROOTS+=("${2#*=}") ;;
    *) echo "mkimage.sh: --platform takes linux/amd64=DIR or linux/arm64=DIR, not $2" >&2; exit 2 ;;
  esac
  shift 2
done
if [ ${#PLATFORMS[@]} -eq 0 ]; then
  [ $# -ge 3 ] || usage
  PLATFORMS=(linux/amd64) ROOTS=("$1")
  shift
fi
[ $# -ge 2 ] || usage
REF=$1 OUT=$2
shift 2
for root in "${ROOTS[@]}"; do
  [ -d "$root" ] || { echo "mkimage.sh: $root is not a directory" >&2; exit 2; }
done
if [ "$(printf '%s\n' "${PLATFORMS[@]}" | sort | uniq -d)" ]; then
  echo "mkimage.sh: each platform may be given once: ${PLATFORMS[*]}" >&2
  exit 2
fi
case "$REF" in
  *:*) ;;
  *) echo "mkimage.sh: give NAME:TAG, not $REF" >&2; exit 2 ;;
esac

# Normalise the reference the way containerd's CRI plugin looks images up.
first=${REF%%/*}
if [ "$first" = "$REF" ]; then
  REF=docker.io/library/$REF
elif ! [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then
  REF=docker.io/$REF
fi
TAG=${REF##*:}

if [ $# -gt 0 ]; then
  ENTRYPOINT=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
else
  ENTRYPOINT=null
fi

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/blobs/sha256"

# put FILE MEDIATYPE: moves FILE into blobs/ under its digest; sets DIGEST, and DESC to the JSON
# fields of a descriptor pointing at it.
put() {
  DIGEST=sha256:$(sha256sum "$1" | cut -d' ' -f1)
  DESC=$(printf '"mediaType":"%s","digest":"%s","size":%s' "$2" "$DIGEST" "$(stat -c %s "$1")")
  mv "$1" "$W/blobs/sha256/${DIGEST#sha256:}"
}

# image ROOTFS ARCH: one platform's layer, config and manifest; sets MANIFEST (its descriptor
# fields) and MANIFEST_DIGEST.
image() {
  local root=$1 arch=$2 diff_id layer config
  tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$root" -cf "$W/layer.tar" .
  diff_id=sha256:$(sha256sum "$W/layer.tar" | cut -d' ' -f1)
  # -n: no file name or time in the gzip header, which would change the digest.
  gzip -n -6 -c "$W/layer.tar" > "$W/layer"
  rm "$W/layer.tar"
  put "$W/layer" application/vnd.oci.image.layer.v1.tar+gzip
  layer=$DESC
  cat > "$W/config" <<JSON
{"architecture":"$arch","os":"linux","created":"1970-01-01T00:00:00Z",
 "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
           "Entrypoint":$ENTRYPOINT,"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["$diff_id"]},
 "history":[{"created":"1970-01-01T00:00:00Z","created_by":"factbuoy deploy/mkimage.sh"}]}
JSON
  put "$W/config" application/vnd.oci.image.config.v1+json
  config=$DESC
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{%s},"layers":[{%s}]}' \
    "$config" "$layer" > "$W/manifest"
  put "$W/manifest" application/vnd.oci.image.manifest.v1+json
  MANIFEST=$DESC MANIFEST_DIGEST=$DIGEST
}

ENTRIES=()
for i in "${!PLATFORMS[@]}"; do
  arch=${PLATFORMS[$i]#linux/}
  image "${ROOTS[$i]}" "$arch"
  ENTRIES+=("$(printf '{%s,"platform":{"architecture":"%s","os":"linux"}}' "$MANIFEST" "$arch")")
done

if [ ${#ENTRIES[@]} -eq 1 ]; then
  # One platform: index.json names its manifest directly, as single-platform images always did.
  TOP=${ENTRIES[0]%\}} TOP_DIGEST=$MANIFEST_DIGEST
else
  # Several: index.json names an image index listing each platform's manifest (what registries
  # serve as a multi-platform tag); containerd and the kubelet take their platform's entry.
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' \
    "$(IFS=,; echo "${ENTRIES[*]}")" > "$W/index"
  put "$W/index" application/vnd.oci.image.index.v1+json
  TOP="{$DESC" TOP_DIGEST=$DIGEST
fi

# containerd names the imported image after io.containerd.image.name; other tools read
# org.opencontainers.image.ref.name (the tag).
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}\n' \
  "$TOP" "$REF" "$TAG" > "$W/index.json"
printf '{"imageLayoutVersion":"1.0.0"}\n' > "$W/oci-layout"

tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$W" -cf "$OUT" oci-layout index.json blobs
if [ ${#ENTRIES[@]} -eq 1 ]; then
  echo "$OUT: $REF (manifest $TOP_DIGEST, ${PLATFORMS[0]})"
else
  echo "$OUT: $REF (index $TOP_DIGEST: ${PLATFORMS[*]})"
fi
