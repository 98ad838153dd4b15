#!/usr/bin/env bash
# deploy/mkimage.sh ROOTFS_DIR NAME:TAG OUT.tar [ENTRYPOINT...]
#
# Packs a directory as a one-layer container image, offline: no registry, no base image, no
# docker daemon. The output is an OCI image layout archive (oci-layout, index.json, blobs/) that
# `ctr -n k8s.io images import` accepts; `tests/kube/cluster.sh import OUT.tar` loads it into
# every node. Pods then use it with `imagePullPolicy: Never` (or IfNotPresent; avoid the tag
# `latest`, whose default policy is Always).
#
# - Every file in the layer is owned by root (0:0) and dated 1970, and entries are sorted, so the
#   same directory always gives the same image digest.
# - NAME is stored fully qualified, as the kubelet asks for it: `busybox:1` becomes
#   `docker.io/library/busybox:1`; a name whose first component has a dot or a port
#   (`factbuoy.local/agent:dev`) is kept as is.
# - ENTRYPOINT (optional) becomes the image's Entrypoint; a pod's `command:` replaces it.
#
# Example, a static (musl) binary:
#   mkdir -p r/bin r/tmp && cp target/x86_64-unknown-linux-musl/release/app r/bin/ && chmod 1777 r/tmp
#   deploy/mkimage.sh r factbuoy.local/app:dev app.tar /bin/app
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
ROOTFS=$1 REF=$2 OUT=$3
shift 3
[ -d "$ROOTFS" ] || { echo "mkimage.sh: $ROOTFS is not a directory" >&2; exit 2; }
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

# The layer: an uncompressed tar, so its digest is also its diff_id.
tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$ROOTFS" -cf "$W/layer" .
put "$W/layer" application/vnd.oci.image.layer.v1.tar
LAYER=$DESC LAYER_DIGEST=$DIGEST

if [ $# -gt 0 ]; then
  ENTRYPOINT=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
else
  ENTRYPOINT=null
fi
cat > "$W/config" <<EOF
{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z",
 "config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
           "Entrypoint":$ENTRYPOINT,"WorkingDir":"/"},
 "rootfs":{"type":"layers","diff_ids":["$LAYER_DIGEST"]},
 "history":[{"created":"1970-01-01T00:00:00Z","created_by":"factbuoy deploy/mkimage.sh"}]}
EOF
put "$W/config" application/vnd.oci.image.config.v1+json
CONFIG=$DESC

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{%s},"layers":[{%s}]}' \
  "$CONFIG" "$LAYER" > "$W/manifest"
put "$W/manifest" application/vnd.oci.image.manifest.v1+json
MANIFEST=$DESC MANIFEST_DIGEST=$DIGEST

# containerd names the imported image after io.containerd.image.name; other tools read
# org.opencontainers.image.ref.name (the tag).
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}\n' \
  "$MANIFEST" "$REF" "$TAG" > "$W/index.json"
printf '{"imageLayoutVersion":"1.0.0"}\n' > "$W/oci-layout"

tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$W" -cf "$OUT" oci-layout index.json blobs
echo "$OUT: $REF (manifest $MANIFEST_DIGEST)"
