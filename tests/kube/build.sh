#!/usr/bin/env bash
# tests/kube/build.sh: install what the Kubernetes test cluster needs and build its binaries once.
#
# Kubernetes v1.20.2 from Debian's `kubernetes` source package (1.20.5+really1.20.2), built with
# Debian's Go 1.19: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet,
# kube-proxy, plus a statically linked `pause` from Kubernetes' own build/pause/linux/pause.c.
# etcd, containerd, runc, the CNI plugins and the rest come from Debian's binary packages.
#
# The result is cached OUTSIDE the repository, in
#   ${FACTBUOY_KUBE_CACHE:-/var/cache/factbuoy/kube-v1.20.2}/bin
# and the stamp file `built` in that directory, written last, names the recipe it was built
# with. When the stamp names the current RECIPE and every binary is there, the build is skipped
# (about a second: only the apt packages are checked). A build that was killed leaves no stamp,
# so it is redone; a changed RECIPE rebuilds.
#
# A full build takes about 11 minutes on an idle 2-core machine (30 on one busy with other
# builds); its scratch space (source tree, Go's build cache) sits next to the cache and is
# deleted afterwards. The cache itself is 415 MB.
# Needs root (apt-get). Safe to run concurrently: a lock serialises builds.
set -euo pipefail

# Bump the suffix whenever the steps below change what ends up in bin/: the stamp then no
# longer matches and the next run rebuilds.
RECIPE="kubernetes=1.20.5+really1.20.2 go=1.19 reflect2=debian pause=static recipe=1"
CACHE=${FACTBUOY_KUBE_CACHE:-/var/cache/factbuoy/kube-v1.20.2}
KUBE_BINS="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy"

log() { printf 'kube build: %s\n' "$*" >&2; }

# ------------------------------------------------------------------ apt packages
# What the cluster needs at run time (checked on every run, so a fresh machine with a cache
# copied in still works), and what only the build needs.
RUNTIME_PKGS="etcd-server etcd-client containerd runc containernetworking-plugins busybox-static
  iptables conntrack socat iproute2 util-linux openssl curl ca-certificates python3"
BUILD_PKGS="golang-1.19-go golang-github-modern-go-reflect2-dev rsync make gcc libc6-dev
  dpkg-dev file"

# `apt_updated` set (as tests/prerequisites.sh passes it) means `apt-get update` already ran: skip it.
apt_updated=${apt_updated:-}
apt_install() { # PKG... (installs those that are not installed yet)
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "installing ${missing[*]}"
  # Other jobs may hold the dpkg lock: wait for it instead of failing.
  [ -n "$apt_updated" ] || { apt-get -o DPkg::Lock::Timeout=600 update -q; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}"
}

# shellcheck disable=SC2086
apt_install $RUNTIME_PKGS

cache_complete() {
  [ "$(cat "$CACHE/built" 2>/dev/null)" = "$RECIPE" ] || return 1
  local b
  for b in $KUBE_BINS pause; do [ -x "$CACHE/bin/$b" ] || return 1; done
}

if cache_complete; then
  log "cache complete: $CACHE ($RECIPE)"
  exit 0
fi

# One build at a time (CI and a developer may start one together); whoever waited re-checks.
mkdir -p "$(dirname "$CACHE")"
exec 9>"$CACHE.lock"
flock 9
if cache_complete; then
  log "cache completed by another build: $CACHE"
  exit 0
fi

# shellcheck disable=SC2086
apt_install $BUILD_PKGS

START=$(date +%s)
# Scratch space next to the cache (same filesystem, so the final rename is atomic); a previous
# killed build's scratch is simply thrown away.
WORK=$CACHE.work
rm -rf "$WORK" "$CACHE.new"
mkdir -p "$WORK/apt/lists/partial" "$CACHE.new/bin"
trap 'rm -rf "$WORK" "$CACHE.new"' EXIT

# ------------------------------------------------------------------ source package
# A private apt configuration that knows only bookworm's deb-src index, so the machine's own
# sources and package lists are left as they were. apt still verifies the signed Release file.
cat > "$WORK/apt/sources.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
EOF
APT_SRC=(-o Dir::Etc::sourcelist="$WORK/apt/sources.list" -o Dir::Etc::sourceparts=- -o APT::Sandbox::User=root
         -o Dir::State::Lists="$WORK/apt/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
         -o APT::Get::List-Cleanup=0)
log "downloading Debian's kubernetes source package"
apt-get "${APT_SRC[@]}" update -q
mkdir -p "$WORK/src"
(cd "$WORK/src" && apt-get "${APT_SRC[@]}" source --download-only kubernetes)
ORIG=$(find "$WORK/src" -maxdepth 1 -name 'kubernetes_*.orig.tar.*' | head -1)
case "$ORIG" in
  */kubernetes_1.20.5+really1.20.2.orig.tar.*) ;;
  *) log "unexpected source package $ORIG (this recipe is for 1.20.5+really1.20.2)"; exit 1 ;;
esac
# Debian's patches are not applied: upstream's tree with its vendor/ directory is what builds.
mkdir -p "$WORK/tree"
tar -xf "$ORIG" -C "$WORK/tree" --strip-components=1
TREE=$WORK/tree
[ -f "$TREE/build/pause/linux/pause.c" ] || { log "pause.c not found in $ORIG"; exit 1; }

# ------------------------------------------------------------------ reflect2
# The vendored github.com/modern-go/reflect2 1.0.1 relies on runtime internals that changed in
# Go 1.18: an API server built with it panics on every TokenReview (nil pointer in
# reflect2.(*frozenConfig).Type2) and the client sees an empty reply. Debian's 1.0.2 fixes that;
# it replaces the vendored sources wholesale (stale 1.0.1 files would otherwise still compile).
R2=/usr/share/gocode/src/github.com/modern-go/reflect2
V2=$TREE/vendor/github.com/modern-go/reflect2
find "$V2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
find "$R2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -exec cp -t "$V2" {} +

# ------------------------------------------------------------------ Kubernetes
# `make` (not plain `go build`): the build runs Kubernetes' code generators first.
# GOPROXY=off: everything comes from vendor/, nothing from the network.
log "building $KUBE_BINS (about 11 minutes on 2 cores)"
(
  cd "$TREE"
  # (Kubernetes 1.20's build sets up its own GOPATH under _output/ and builds from vendor/.)
  export PATH=/usr/lib/go-1.19/bin:$PATH GOPROXY=off GOTOOLCHAIN=local
  export GOCACHE=$WORK/gocache GOTMPDIR=$WORK/gotmp   # scratch goes with $WORK, even if killed
  mkdir -p "$GOTMPDIR"
  WHAT=""
  for b in $KUBE_BINS; do WHAT="$WHAT cmd/$b"; done
  make WHAT="${WHAT# }"
)
for b in $KUBE_BINS; do
  install -m 0755 "$TREE/_output/bin/$b" "$CACHE.new/bin/$b"
done

# ------------------------------------------------------------------ pause
# The pod sandbox's init process. Built statically from Kubernetes' own source, so the pause
# image is a single file that needs no libc in the image.
gcc -Os -static -DVERSION=v3.2-factbuoy -o "$CACHE.new/bin/pause" "$TREE/build/pause/linux/pause.c"
strip "$CACHE.new/bin/pause"
file "$CACHE.new/bin/pause" | grep -q 'statically linked' || { log "pause is not static"; exit 1; }

"$CACHE.new/bin/kubectl" version --client --short 2>/dev/null | grep -q 'v1.20.2' ||
  { log "kubectl does not report v1.20.2"; exit 1; }

# ------------------------------------------------------------------ publish
# Stamp last, then swap the whole directory in: readers see the old cache or the new one.
printf '%s\n' "$RECIPE" > "$CACHE.new/built"
rm -rf "$CACHE"
mv "$CACHE.new" "$CACHE"
log "built in $(( $(date +%s) - START )) s: $CACHE ($(du -sh "$CACHE" | cut -f1))"
