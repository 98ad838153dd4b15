#!/usr/bin/env bash
# tests/kube/cluster.sh: a real Kubernetes v1.20.2 cluster on this machine, for factbuoy's tests.
#
#   cluster.sh up [NODES]        control plane + nodes 1..NODES (default 3); waits until Ready
#   cluster.sh down              stop everything and remove every trace; safe to repeat
#   cluster.sh node-add N        start node N (a node joining mid-run, or a stopped one returning)
#   cluster.sh node-stop N       kill node N's kubelet, containerd and pods at once, like a machine
#                                that died: its Node object stays and turns NotReady (~20 s)
#   cluster.sh import IMAGE.tar  load an image archive (see mkimage.sh) into every node, now and
#                                into nodes added later
#   cluster.sh exec CMD...       run CMD inside the cluster's network namespace, with KUBECONFIG
#                                set and kubectl & co. on PATH
#   cluster.sh node-exec N CMD...  run CMD on node N: inside its network, UTS, mount and PID
#                                namespaces, as a program started on that machine would run
#   cluster.sh ctr N ARGS...     containerd's ctr on node N, namespace k8s.io (say, to kill a
#                                container's task behind the kubelet's back)
#   cluster.sh env               print shell exports (KUBECONFIG, namespace, paths) for `eval`
#   cluster.sh status            nodes, components, memory
#
# Everything runs inside namespaces the script creates. The cluster's network namespace (`ip netns
# add`, name $FACTBUOY_KUBE_NETNS) is the network the machines share: the control plane and a
# bridge every node is plugged into, routing between them, so nothing is reachable from the host's
# network and nothing clashes with it. The cluster's mount namespace holds the control plane's
# mounts. Each node is a machine of its own, as far as the kernel can make one: its own network
# namespace ($FACTBUOY_KUBE_NETNS-node-N: eth0, its pod bridge, its own kube-proxy rules), UTS
# namespace (host name node-N), mount namespace (its /sys shows its own interfaces, its /proc its
# own processes; container root filesystems, volumes and pod network namespaces are mounted
# there) and PID namespace, whose process 1 (`cluster.sh node-init N`) holds the others; only the
# kernel and the file systems are shared. Each daemon runs in its own cgroup under
# /$FACTBUOY_KUBE_NETNS in every cgroup hierarchy, which is how `down` and `node-stop` find every
# process, shims and containers included, and how `status` measures memory.
#
# Binaries come from tests/kube/build.sh's cache (run it first); state, logs and sockets live in
# $FACTBUOY_KUBE_DIR. See tests/kube/README.md for the traps this script avoids.
#
# Environment:
#   FACTBUOY_KUBE_CACHE  build.sh's cache (default /var/cache/factbuoy/kube-v1.20.2)
#   FACTBUOY_KUBE_DIR    runtime state (default /run/factbuoy-kube); deleted by `down`
#   FACTBUOY_KUBE_NETNS  network namespace and cgroup name (default factbuoy-kube)
#   FACTBUOY_KUBE_NODE_GRACE   the node controller's --node-monitor-grace-period (default 20s)
#   FACTBUOY_KUBE_API_QPS      --kube-api-qps of the controller manager and the scheduler (burst
#                              twice that); default: Kubernetes' own (20 and 50)
#   FACTBUOY_KUBE_AUDIT_POLICY an audit policy file: the API server logs what it selects to
#                              $FACTBUOY_KUBE_DIR/logs/audit.log (default: no audit log)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${FACTBUOY_KUBE_CACHE:-/var/cache/factbuoy/kube-v1.20.2}
BIN=$CACHE/bin
STATE=${FACTBUOY_KUBE_DIR:-/run/factbuoy-kube}
NS=${FACTBUOY_KUBE_NETNS:-factbuoy-kube}
NETNS_FILE=/run/netns/$NS
MNTNS_FILE=$STATE/ns/mnt        # the mount namespace, kept alive by a bind mount of its nsfs file
CG=$NS                          # cgroup subtree, relative to each hierarchy's root
LOGS=$STATE/logs
PKI=$STATE/pki
KUBECONFIG_FILE=$STATE/kubeconfig
NODE_GRACE=${FACTBUOY_KUBE_NODE_GRACE:-20s}
API_QPS=${FACTBUOY_KUBE_API_QPS:-}
AUDIT_POLICY=${FACTBUOY_KUBE_AUDIT_POLICY:-}

# Addresses exist only inside the network namespace.
API_IP=10.200.0.1               # on bridge nodes0: the API server's advertised address
API_PORT=6443
API_URL=https://$API_IP:$API_PORT
SERVICE_CIDR=10.96.0.0/24       # the `kubernetes` Service is 10.96.0.1:443
CLUSTER_CIDR=10.244.0.0/16      # node N's pods: 10.244.N.0/24 on bridge cniN
node_ip() { echo "10.200.0.$((10 + $1))"; }
node_netns() { echo "$NS-node-$1"; }    # node N's network namespace, under /run/netns
PAUSE_IMAGE=k8s.gcr.io/pause:3.2

# Paths the kubelet, containerd, libcni and the controller manager hard-code (the kubelet's
# device-plugins socket directory under /var/lib/kubelet whatever its --root-dir; the controller
# manager's FlexVolume directory under /usr/libexec/kubernetes). Inside the mount namespace each
# is a bind mount of a directory under $STATE; on the host it is at most an empty mount point,
# created only if missing and removed by `down`.
HARDCODED_DIRS="/var/log/pods /var/log/containers /var/lib/cni /run/containerd /var/lib/kubelet
  /usr/libexec/kubernetes"
# Those a node's kubelet, containerd and libcni use: each node binds a directory of its own over
# them in its mount namespace, as each machine has its own.
NODE_DIRS="/var/log/pods /var/log/containers /var/lib/cni /run/containerd /var/lib/kubelet"

export PATH=$BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# ------------------------------------------------------------------ namespaces
is_up() { [ -e "$NETNS_FILE" ] && [ -f "$STATE/up" ]; }
# in_net CMD...: CMD inside the cluster's network namespace (host mounts, current directory).
in_net() { nsenter --net="$NETNS_FILE" -- "$@"; }
# in_mnt CMD...: CMD inside the cluster's mount namespace (to mount or unmount there).
in_mnt() { nsenter --mount="$MNTNS_FILE" --wd=/ -- "$@"; }
kctl() { in_net env KUBECONFIG="$KUBECONFIG_FILE" "$BIN/kubectl" "$@"; }

# ------------------------------------------------------------------ cgroups (v1 or hybrid)
# Every hierarchy, the unified (v2) one of a hybrid setup included: runc creates its cgroups
# there too.
hierarchies() {
  local h
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ -f "$h/cgroup.procs" ] && echo "$h"
  done
}
# cg_mk PATH: create PATH (relative) in every hierarchy; cpuset needs cpus and mems before use.
cg_mk() {
  local h p part
  for h in $(hierarchies); do
    p=$h
    for part in ${1//\// }; do
      p=$p/$part
      mkdir -p "$p"
      if [ -f "$p/cpuset.cpus" ] && [ -z "$(cat "$p/cpuset.cpus")" ]; then
        cat "${p%/*}/cpuset.cpus" > "$p/cpuset.cpus"
        cat "${p%/*}/cpuset.mems" > "$p/cpuset.mems"
      fi
    done
  done
}
# cg_procs PATH: every process in PATH or below, in any hierarchy.
cg_procs() {
  local h
  for h in $(hierarchies); do
    [ -d "$h/$1" ] && find "$h/$1" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}
# cg_kill PATH: SIGKILL every process in PATH and below until none is left (a process forking
# while we kill is caught on the next round).
cg_kill() {
  local pids
  for _ in $(seq 1 100); do
    pids=$(cg_procs "$1")
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  log "processes left in cgroup $1: $(cg_procs "$1" | tr '\n' ' ')"
  return 1
}
# cg_rm PATH: remove PATH and below (empty cgroups only).
cg_rm() {
  local h
  for h in $(hierarchies); do
    [ -d "$h/$1" ] || continue
    for _ in $(seq 1 50); do   # a cgroup stays busy for a moment after its last process died
      find "$h/$1" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$h/$1" ] || break
      sleep 0.1
    done
    [ -d "$h/$1" ] && log "could not remove cgroup $h/$1"
  done
  return 0
}
# in_cgroup CGROUP LOGNAME CMD...: start CMD in its own session, in CGROUP (created here),
# stdout and stderr appended to $LOGS/LOGNAME.log.
in_cgroup() {
  local cg=$CG/$1 name=$2 h
  shift 2
  cg_mk "$cg"
  (
    for h in $(hierarchies); do echo "$BASHPID" > "$h/$cg/cgroup.procs"; done
    exec setsid -f "$@"
  ) </dev/null >>"$LOGS/$name.log" 2>&1
}
# spawn CGROUP LOGNAME CMD...: a daemon of the control plane, inside the cluster's namespaces.
spawn() {
  local cg=$1 name=$2
  shift 2
  in_cgroup "$cg" "$name" nsenter --net="$NETNS_FILE" --mount="$MNTNS_FILE" --wd=/ -- "$@"
}
# node_pid N: node N's process 1, as the host numbers it.
node_pid() { cat "$STATE/nodes/node-$1/init.pid"; }
# on_node N: the nsenter arguments that put a command on node N (all of its namespaces).
on_node() { echo "--target $(node_pid "$1") --net --uts --mount --pid"; }
# spawn_on_node N CGROUP LOGNAME CMD...: a daemon of node N, inside its namespaces.
spawn_on_node() {
  local n=$1 cg=$2 name=$3
  shift 3
  # shellcheck disable=SC2046 # on_node's words are separate arguments
  in_cgroup "$cg" "$name" nsenter $(on_node "$n") --wd=/ -- "$@"
}
alive() { [ -n "$(cg_procs "$CG/$1")" ]; }

# wait_for WHAT SECONDS CMD...: poll CMD every 0.2 s.
wait_for() {
  local what=$1 secs=$2 end
  shift 2
  end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.2
  done
}
# show_log NAME: the end of a component's log, after a failure.
show_log() { [ -f "$LOGS/$1.log" ] && { log "--- last lines of $LOGS/$1.log"; tail -n 25 "$LOGS/$1.log" >&2; }; return 0; }

# ------------------------------------------------------------------ PKI
# ECDSA P-256 for TLS (fast to generate); RSA for the service-account signing key (RS256, which
# every JWT library verifies).
cert() { # NAME SUBJECT EXT-LINE...: a key and a certificate signed by the cluster CA
  local name=$1 subj=$2
  shift 2
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "$@" > "$PKI/$name.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$PKI/$name.key" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=factbuoy-kube-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  # The API server is reached at its advertised address (kubelets, tests), at the `kubernetes`
  # Service (pods) and on the namespace's loopback.
  cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:$API_IP,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # The API server's client certificate towards kubelets (logs, exec, port-forward).
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  # Service-account tokens: the key pair behind TokenRequest and TokenReview.
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  # The admin's bearer token (group system:masters), for kubectl, the controllers and the tests.
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$PKI/admin.token"
  printf '%s,admin,admin,"system:masters"\n' "$(cat "$PKI/admin.token")" > "$PKI/tokens.csv"
}
# kubeconfig OUT USER-YAML: a kubeconfig for API_URL with the CA embedded.
kubeconfig() {
  ( umask 077; cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: factbuoy-kube
  cluster:
    server: $API_URL
    certificate-authority-data: $(base64 -w0 < "$PKI/ca.crt")
users:
- name: user
  user:
$2
contexts:
- name: factbuoy-kube
  context: {cluster: factbuoy-kube, user: user, namespace: default}
current-context: factbuoy-kube
EOF
  )
}
cert_user() { # NAME: kubeconfig user lines for a client certificate
  printf '    client-certificate: %s\n    client-key: %s\n' "$PKI/$1.crt" "$PKI/$1.key"
}

# ------------------------------------------------------------------ one node
# Node N: a machine of its own (see the top of this file), plugged into the cluster's bridge
# nodes0 by a veth pair (eth0 inside, address node_ip N, default route through the cluster's
# namespace, which routes each node's pod network to it); its own containerd (+ runc,
# overlayfs), kubelet and kube-proxy, pods on bridge cniN.
start_node() {
  local n=$1 nd=$STATE/nodes/node-$1 ip netns t
  ip=$(node_ip "$n")
  netns=$(node_netns "$n")
  if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then die "node number must be 1..200, not $n"; fi
  alive "node-$n" && die "node-$n is running"
  rm -rf "$nd"
  mkdir -p "$nd/cni" "$nd/kubelet" "$nd/cgroup"

  # Its network: eth0 with a fixed MAC address (02:fb:00:00:00:N, so facts about it can be
  # compared across cluster starts), the cluster's namespace as its router.
  [ -e "/run/netns/$netns" ] && ip netns del "$netns"
  ip netns add "$netns"
  ip -n "$NS" link add "veth-node$n" type veth peer name eth0 netns "$netns"
  ip -n "$NS" link set "veth-node$n" master nodes0 up
  ip -n "$netns" link set lo up
  ip -n "$netns" link set eth0 address "$(printf '02:fb:00:00:00:%02x' "$n")"
  ip -n "$netns" addr add "$ip/24" dev eth0
  ip -n "$netns" link set eth0 up
  ip -n "$netns" route add default via "$API_IP"
  ip -n "$NS" route replace "10.244.$n.0/24" via "$ip"
  nsenter --net="/run/netns/$netns" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'

  # Its process 1, in new UTS, mount and PID namespaces: it sets them up (cmd_node_init) and
  # holds them; every other process of the node enters them (spawn_on_node). The mount
  # namespace is a private copy of the cluster's: what is mounted on the machine later (another
  # test's `ip netns add`, say) does not appear in a node's mount table, as it would not on a
  # machine of its own.
  in_cgroup "node-$n/init" "node-$n-init" nsenter --net="/run/netns/$netns" --mount="$MNTNS_FILE" --wd=/ -- \
    unshare --uts --mount --pid --fork --propagation private -- "$HERE/cluster.sh" node-init "$n"
  wait_for "node-$n's namespaces" 30 test -s "$nd/init.pid" || { show_log "node-$n-init"; return 1; }

  cat > "$nd/cni/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "node-$n",
 "plugins": [
  {"type": "bridge", "bridge": "cni$n", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$nd/cni-ipam",
            "ranges": [[{"subnet": "10.244.$n.0/24", "gateway": "10.244.$n.1"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
 ]}
EOF
  # restrict_oom_score_adj: without CAP_SYS_RESOURCE (as here) runc cannot give the pause
  # process its negative oom_score_adj and every pod sandbox fails ("can't get final child's
  # PID from pipe: EOF"); this clamps the request to what is allowed.
  cat > "$nd/containerd.toml" <<EOF
version = 2
root = "$nd/containerd"
state = "$nd/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$nd/containerd.sock"
[ttrpc]
  address = "$nd/containerd.sock.ttrpc"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    disable_apparmor = true
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$nd/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$nd/cni"
    # Registries the nodes pull from: a hosts.toml per registry (containerd's hosts directory,
    # read at each pull), which tests write when they start one (tests/support/kube.rs).
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "$STATE/registry-hosts"
  [plugins."io.containerd.internal.v1.opt"]
    path = "$nd/containerd-opt"
EOF
  spawn_on_node "$n" "node-$n/containerd" "node-$n-containerd" containerd --config "$nd/containerd.toml"
  wait_for "node-$n's containerd" 30 ctr -a "$nd/containerd.sock" version || { show_log "node-$n-containerd"; return 1; }
  for t in "$STATE"/images/*.tar; do
    ctr -a "$nd/containerd.sock" -n k8s.io images import "$t" >/dev/null
  done

  # The kubelet: a client certificate for system:node:node-N (the Node authorizer and the
  # NodeRestriction admission plugin limit it to its own node), serving on the node's address.
  cert "node-$n" "/O=system:nodes/CN=system:node:node-$n" "extendedKeyUsage=clientAuth"
  kubeconfig "$nd/kubelet.kubeconfig" "$(cert_user "node-$n")"
  : > "$nd/resolv.conf"   # no cluster DNS, and the host's resolvers are unreachable from here
  cat > "$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$CG/node-$n
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
resolvConf: $nd/resolv.conf
serializeImagePulls: false
# Images are imported, never pulled: never garbage-collect them (the pause image included).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute floors, not percentages: on a big, nearly full disk (a CI machine) 1% is gigabytes,
# and the kubelet would evict every test pod for disk pressure.
evictionHard: {memory.available: 100Mi, nodefs.available: 256Mi, imagefs.available: 256Mi, nodefs.inodesFree: "1%"}
# A stopped node is noticed sooner than with the defaults (lease 40 s, grace 40 s).
nodeStatusUpdateFrequency: 5s
nodeLeaseDurationSeconds: 20
podPidsLimit: -1
maxPods: 110
EOF
  spawn_on_node "$n" "node-$n/kubelet" "node-$n-kubelet" kubelet \
    --config "$nd/kubelet.yaml" --kubeconfig "$nd/kubelet.kubeconfig" \
    --container-runtime remote --container-runtime-endpoint "unix://$nd/containerd.sock" \
    --image-service-endpoint "unix://$nd/containerd.sock" --pod-infra-container-image "$PAUSE_IMAGE" \
    --hostname-override "node-$n" --node-ip "$ip" \
    --root-dir "$nd/kubelet" --cert-dir "$nd/kubelet/pki" \
    --volume-plugin-dir "$nd/kubelet/volume-plugins" \
    --node-labels "factbuoy-kube/node=$n" --v 1
  # Service addresses, in the node's own network namespace (conntrack settings 0: leave the
  # host-wide conntrack sysctls alone).
  spawn_on_node "$n" "node-$n/kube-proxy" "node-$n-kube-proxy" kube-proxy \
    --kubeconfig "$STATE/kube-proxy.kubeconfig" --hostname-override "node-$n" --bind-address "$ip" \
    --proxy-mode iptables --cluster-cidr "$CLUSTER_CIDR" \
    --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249 \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
    --conntrack-tcp-timeout-close-wait 0 --profiling=false
}
# cmd_node_init N: process 1 of node N (started by start_node, in the node's new namespaces).
# It names the node, mounts the node's own /sys (a sysfs shows the network namespace of whoever
# mounted it; the cgroup hierarchies are moved over) and /proc (its PID namespace), binds the
# node's own directories over NODE_DIRS, writes its PID as the host numbers it, and then reaps
# the orphans of the node's processes until it is killed.
cmd_node_init() {
  local n=${1:?usage: cluster.sh node-init N} nd pid d
  nd=$STATE/nodes/node-$n
  [ "$$" = 1 ] || die "node-init is process 1 of a node's PID namespace (start_node starts it)"
  read -r pid _ < /proc/self/stat   # still the host's /proc
  hostname "node-$n"
  mount --rbind /sys/fs/cgroup "$nd/cgroup"
  mount -t sysfs sysfs /sys
  mount --rbind "$nd/cgroup" /sys/fs/cgroup
  umount -l "$nd/cgroup"
  mount -t proc proc /proc
  for d in $NODE_DIRS; do
    mkdir -p "$nd/root$d"
    mount --bind "$nd/root$d" "$d"
  done
  echo "$pid" > "$nd/init.pid"
  # Orphans are re-parented to process 1; bash reaps every child that ends while it waits.
  while :; do
    sleep 86400 &
    wait $! || true
  done
}
node_ready() {
  [ "$(kctl get node "node-$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_node_ready() {
  wait_for "node-$1 Ready" 120 node_ready "$1" || { show_log "node-$1-kubelet"; show_log "node-$1-containerd"; return 1; }
}
stop_node() {
  local n=$1 nd=$STATE/nodes/node-$1
  # Killing its process 1 ends every process in its PID namespace; its mounts (container root
  # filesystems, volumes, pod network namespaces) go with its mount namespace.
  cg_kill "$CG/node-$n" || true
  ip netns del "$(node_netns "$n")" 2>/dev/null || true
  ip -n "$NS" route del "10.244.$n.0/24" 2>/dev/null || true
  cg_rm "$CG/node-$n"
  rm -rf "$nd"
}

# ------------------------------------------------------------------ up
cmd_up() {
  local nodes=${1:-3} start n t
  [[ $nodes =~ ^[0-9]+$ ]] || usage
  start=$(date +%s%N)
  is_up && die "already up ($STATE); run 'cluster.sh down' first"
  if [ -e "$NETNS_FILE" ] || [ -d "$STATE" ]; then
    die "leftovers of an earlier cluster ($NETNS_FILE or $STATE): run 'cluster.sh down' first"
  fi
  [ "$(cat "$CACHE/built" 2>/dev/null)" ] || die "no complete build in $CACHE: run tests/kube/build.sh first"
  for t in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy pause; do
    [ -x "$BIN/$t" ] || die "$BIN/$t missing: run tests/kube/build.sh"
  done
  for t in etcd containerd containerd-shim-runc-v2 runc ctr iptables conntrack nsenter unshare openssl curl; do
    command -v "$t" >/dev/null || die "$t missing: run tests/kube/build.sh (it installs the packages)"
  done
  [ -x /usr/lib/cni/bridge ] || die "/usr/lib/cni/bridge missing: run tests/kube/build.sh"
  [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] || die "needs cgroup v1 (or hybrid) hierarchies"
  # From here on, a failure leaves what was started (and its logs) for `down` to remove.
  trap 'log "up failed; logs in $LOGS; run cluster.sh down to clean up"' EXIT

  mkdir -p "$STATE" "$LOGS" "$STATE/images" "$STATE/nodes" "$STATE/ns"
  make_pki
  kubeconfig "$KUBECONFIG_FILE" "    token: $(cat "$PKI/admin.token")"
  kubeconfig "$STATE/kube-proxy.kubeconfig" "$(cert_user kube-proxy)"

  # The cluster's network namespace: loopback, and bridge nodes0 with the API server's address
  # (Service endpoints may not be loopback), into which every node is plugged. It routes
  # between the nodes' pod networks (start_node adds each route).
  ip netns add "$NS"
  ip -n "$NS" link set lo up
  ip -n "$NS" link add nodes0 type bridge
  ip -n "$NS" addr add "$API_IP/24" dev nodes0
  ip -n "$NS" link set nodes0 up
  in_net sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'

  # The mount namespace, kept by a bind mount of its nsfs file. The bind mount must sit on a
  # private mount, so $STATE/ns is made one (as `ip netns` does for /run/netns). Host mounts
  # propagate in (slave); nothing propagates out.
  mount --bind "$STATE/ns" "$STATE/ns"
  mount --make-private "$STATE/ns"
  touch "$MNTNS_FILE"
  unshare --mount="$MNTNS_FILE" --propagation slave true
  : > "$STATE/host-mountpoints"
  for t in $HARDCODED_DIRS; do
    if [ ! -d "$t" ]; then mkdir -p "$t"; echo "$t" >> "$STATE/host-mountpoints"; fi
    mkdir -p "$STATE/hostdirs$t"
    in_mnt mount --bind "$STATE/hostdirs$t" "$t"
  done
  touch "$STATE/up"

  # The pause image, the pod sandbox's only process, for every node.
  local pause_root
  pause_root=$(mktemp -d)
  cp "$BIN/pause" "$pause_root/pause"
  "$HERE/mkimage.sh" "$pause_root" "$PAUSE_IMAGE" "$STATE/images/pause.tar" /pause >/dev/null
  rm -rf "$pause_root"

  # etcd, on the namespace's loopback, its data on a tmpfs in the mount namespace: it is thrown
  # away by `down` anyway, and fsync on a busy disk would slow every API write.
  mkdir -p "$STATE/etcd"
  in_mnt mount -t tmpfs -o size=4g,mode=0700 etcd "$STATE/etcd"
  spawn control/etcd etcd etcd --name default --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster default=http://127.0.0.1:2380 --quota-backend-bytes 4294967296 \
    --log-level warn --logger zap
  wait_for etcd 30 in_net curl -fsS http://127.0.0.1:2379/health || { show_log etcd; return 1; }

  # The API server. It advertises API_IP (the `kubernetes` Service's endpoint, which pods reach
  # through kube-proxy at 10.96.0.1:443). TokenRequest and TokenReview need the issuer and the
  # signing key; audience-bound tokens are checked against the audiences a TokenReview names.
  local audit=() qps=()
  if [ -n "$AUDIT_POLICY" ]; then
    [ -f "$AUDIT_POLICY" ] || die "FACTBUOY_KUBE_AUDIT_POLICY: $AUDIT_POLICY is not a file"
    cp "$AUDIT_POLICY" "$STATE/audit-policy.yaml"
    audit=(--audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$LOGS/audit.log")
  fi
  if [ -n "$API_QPS" ]; then
    [[ $API_QPS =~ ^[0-9]+$ ]] || die "FACTBUOY_KUBE_API_QPS must be a whole number, not $API_QPS"
    qps=(--kube-api-qps "$API_QPS" --kube-api-burst "$((API_QPS * 2))")
  fi
  spawn control/kube-apiserver kube-apiserver kube-apiserver "${audit[@]}" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --advertise-address "$API_IP" --secure-port "$API_PORT" \
    --cert-dir "$STATE/apiserver" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --api-audiences https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false
  wait_for kube-apiserver 90 in_net curl -fsS --cacert "$PKI/ca.crt" \
    -H "Authorization: Bearer $(cat "$PKI/admin.token")" "$API_URL/readyz" || { show_log kube-apiserver; return 1; }

  # Controllers (per-controller service accounts; the token controller signs legacy tokens)
  # and the scheduler. A node is marked NotReady 20 s after its last heartbeat (default 40 s),
  # unless FACTBUOY_KUBE_NODE_GRACE says otherwise (bench/kube-scale.sh: Node objects with no
  # kubelet must stay Ready).
  spawn control/kube-controller-manager kube-controller-manager kube-controller-manager "${qps[@]}" \
    --kubeconfig "$KUBECONFIG_FILE" --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port 10257 --port 0 --cert-dir "$STATE/kcm" \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --service-cluster-ip-range "$SERVICE_CIDR" --node-monitor-grace-period "$NODE_GRACE" --profiling=false
  spawn control/kube-scheduler kube-scheduler kube-scheduler "${qps[@]}" \
    --kubeconfig "$KUBECONFIG_FILE" --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port 10259 --port 0 --cert-dir "$STATE/scheduler" \
    --leader-elect=false --profiling=false
  # Service addresses in the cluster's namespace too, for commands started with `exec` (each
  # node has its own kube-proxy); it is no node. conntrack settings 0: leave the (host-wide)
  # conntrack sysctls alone.
  spawn control/kube-proxy kube-proxy kube-proxy \
    --kubeconfig "$STATE/kube-proxy.kubeconfig" --hostname-override control-plane \
    --bind-address "$API_IP" \
    --proxy-mode iptables --cluster-cidr "$CLUSTER_CIDR" \
    --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249 \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
    --conntrack-tcp-timeout-close-wait 0 --profiling=false

  for n in $(seq 1 "$nodes"); do start_node "$n"; done
  for n in $(seq 1 "$nodes"); do wait_node_ready "$n"; done
  for t in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    alive "control/$t" || { show_log "$t"; die "$t exited"; }
  done
  for n in $(seq 1 "$nodes"); do
    alive "node-$n/kube-proxy" || { show_log "node-$n-kube-proxy"; die "node-$n's kube-proxy exited"; }
  done
  trap - EXIT
  t=$(( ($(date +%s%N) - start) / 100000000 ))
  log "up: $nodes node(s) Ready in $((t / 10)).$((t % 10)) s; API $API_URL in netns $NS"
  log "KUBECONFIG=$KUBECONFIG_FILE; run commands with: $0 exec CMD..."
}

# ------------------------------------------------------------------ down
# ns_pids NSFILE KIND: processes whose KIND (net, mnt) namespace is the one NSFILE names.
ns_pids() {
  local ino p
  ino=$(stat -L -c %i "$1" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/$2" 2>/dev/null)" = "$ino" ] && echo "${p#/proc/}"
  done
  return 0
}
# node_namespaces: the network namespaces of this cluster's nodes, by name.
node_namespaces() {
  ip netns list 2>/dev/null | awk -v p="$NS-node-" 'index($1, p) == 1 && substr($1, length(p) + 1) ~ /^[0-9]+$/ {print $1}'
}
cmd_down() {
  local t pids m other netns
  # 1. Every process of the cluster: daemons, shims and containers are all in its cgroups (and
  #    a node's commands started with `node-exec` end with its process 1).
  cg_kill "$CG" || true
  # 2. Anything else still inside its namespaces (say a command started with `exec`).
  for _ in 1 2 3; do
    pids=$( { ns_pids "$NETNS_FILE" net; ns_pids "$MNTNS_FILE" mnt
              for netns in $(node_namespaces); do ns_pids "/run/netns/$netns" net; done; } | sort -un)
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
  # 3. The mount namespace: dropping its last reference releases every mount in it.
  if mountpoint -q "$STATE/ns" 2>/dev/null; then
    umount "$MNTNS_FILE" 2>/dev/null || true
    umount "$STATE/ns" || umount -l "$STATE/ns"
  fi
  # 4. The network namespaces, with their links, addresses, routes and iptables rules.
  for netns in $(node_namespaces); do ip netns del "$netns"; done
  if [ -e "$NETNS_FILE" ]; then ip netns del "$NS"; fi
  # 5. Cgroups, host mount points we created, state.
  cg_rm "$CG"
  # Removing a directory detaches the mounts on it in every mount namespace: while another
  # cluster of this harness is up (its mount namespace is bound at <its state>/ns/mnt), it
  # inherits the mount points to remove instead.
  if [ -s "$STATE/host-mountpoints" ]; then
    # shellcheck disable=SC2016 # awk's own $5
    other=$(awk '/ - nsfs / && $5 ~ /\/ns\/mnt$/ {print $5; exit}' /proc/self/mountinfo)
    if [ -n "$other" ]; then
      cat "$STATE/host-mountpoints" >> "${other%/ns/mnt}/host-mountpoints"
    else
      while read -r m; do rmdir "$m" 2>/dev/null || log "left $m (not empty)"; done < "$STATE/host-mountpoints"
    fi
  fi
  # Anything still mounted below $STATE on the host (there should be nothing) blocks rm.
  awk -v p="$STATE/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
  rm -rf "$STATE"
  # Check: nothing may be left.
  t=""
  [ -z "$(cg_procs "$CG")" ] || t="$t processes"
  [ ! -e "$NETNS_FILE" ] || t="$t netns"
  [ -z "$(node_namespaces)" ] || t="$t node-netns"
  [ ! -e "$STATE" ] || t="$t $STATE"
  for m in $(hierarchies); do [ ! -d "$m/$CG" ] || t="$t cgroups"; done
  [ -z "$t" ] || die "down: left behind:$t"
  log "down: nothing left"
}

# ------------------------------------------------------------------ the rest
cmd_node_add() {
  local n=${1:?usage: cluster.sh node-add N}
  is_up || die "not up"
  start_node "$n"
  wait_node_ready "$n"
  log "node-$n Ready"
}
cmd_node_stop() {
  local n=${1:?usage: cluster.sh node-stop N}
  is_up || die "not up"
  [ -d "$STATE/nodes/node-$n" ] || die "no node-$n"
  stop_node "$n"
  log "node-$n stopped (its Node object stays and turns NotReady)"
}
cmd_import() {
  local src=${1:?usage: cluster.sh import IMAGE.tar} dst nd
  is_up || die "not up"
  [ -f "$src" ] || die "$src: no such file"
  # A copy, so nodes added later (node-add) get the image too.
  dst=$STATE/images/$(basename "$src")
  cp "$src" "$dst"
  for nd in "$STATE"/nodes/node-*; do
    alive "${nd##*/}/containerd" || continue
    ctr -a "$nd/containerd.sock" -n k8s.io images import "$dst" >/dev/null
    log "imported $(basename "$src") into ${nd##*/}"
  done
}
cmd_exec() {
  [ $# -gt 0 ] || die "usage: cluster.sh exec CMD..."
  is_up || die "not up"
  exec nsenter --net="$NETNS_FILE" -- env KUBECONFIG="$KUBECONFIG_FILE" PATH="$PATH" "$@"
}
cmd_node_exec() {
  local n=${1:?usage: cluster.sh node-exec N CMD...}
  shift
  [ $# -gt 0 ] || die "usage: cluster.sh node-exec N CMD..."
  is_up || die "not up"
  alive "node-$n/init" || die "node-$n is not running"
  # nsenter waits for CMD in the node's PID namespace without passing signals on: CMD gets
  # SIGKILL when nsenter dies (setpriv --pdeathsig), so killing `node-exec` kills CMD.
  # shellcheck disable=SC2046 # on_node's words are separate arguments
  exec nsenter $(on_node "$n") --wd="$PWD" -- \
    setpriv --pdeathsig KILL env KUBECONFIG="$KUBECONFIG_FILE" PATH="$PATH" "$@"
}
cmd_ctr() {
  local n=${1:?usage: cluster.sh ctr N ARGS...}
  shift
  is_up || die "not up"
  [ -S "$STATE/nodes/node-$n/containerd.sock" ] || die "node-$n is not running"
  exec ctr -a "$STATE/nodes/node-$n/containerd.sock" -n k8s.io "$@"
}
cmd_env() {
  cat <<EOF
export KUBECONFIG=$KUBECONFIG_FILE
export FACTBUOY_KUBE_NETNS=$NS
export FACTBUOY_KUBE_NETNS_FILE=$NETNS_FILE
export FACTBUOY_KUBE_DIR=$STATE
export FACTBUOY_KUBE_BIN=$BIN
export FACTBUOY_KUBE_API=$API_URL
EOF
}
cmd_status() {
  local c rss
  is_up || { echo "down"; return 0; }
  kctl get nodes -o wide || true
  for c in $(cd "/sys/fs/cgroup/memory/$CG" && find . -mindepth 2 -maxdepth 2 -type d | sort); do
    c=${c#./}
    rss=$(awk '$1 == "total_rss" {print int($2 / 1048576)}' "/sys/fs/cgroup/memory/$CG/$c/memory.stat")
    printf '%-32s %s MiB rss%s\n' "$c" "$rss" "$(alive "$c" || echo ' (no processes)')"
  done
  awk '$1 == "total_rss" {printf "total rss %d MiB\n", $2 / 1048576}' "/sys/fs/cgroup/memory/$CG/memory.stat"
}

[ "$(id -u)" = 0 ] || die "must run as root"
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  node-add) cmd_node_add "$@" ;;
  node-stop) cmd_node_stop "$@" ;;
  import) cmd_import "$@" ;;
  exec) cmd_exec "$@" ;;
  node-exec) cmd_node_exec "$@" ;;
  node-init) cmd_node_init "$@" ;;
  ctr) cmd_ctr "$@" ;;
  env) cmd_env ;;
  status) cmd_status ;;
  *) usage ;;
esac
