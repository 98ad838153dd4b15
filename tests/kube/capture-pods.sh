#!/usr/bin/env bash
# tests/kube/capture-pods.sh: captures real pod statuses (v1.20.2, real kubelets) for the unit
# tests of host/dispatch/src/pods.rs, into tests/fixtures/pods/*.json.
#
# On a cluster of its own (netns factbuoy-kube-capture), it starts one pod per problem an agent
# pod can have, waits until the kubelet or scheduler reports it, and saves `kubectl get pod -o
# json` (managedFields dropped). Re-run it to refresh the fixtures; about 2 minutes.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export FACTBUOY_KUBE_NETNS=factbuoy-kube-capture FACTBUOY_KUBE_DIR=/run/factbuoy-kube-capture
CLUSTER=$HERE/cluster.sh
OUT=$HERE/../fixtures/pods
k() { "$CLUSTER" exec kubectl "$@"; }
W=$(mktemp -d)
trap '"$CLUSTER" down >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
"$CLUSTER" down >/dev/null 2>&1 || true
"$CLUSTER" up 2

R=$W/rootfs
mkdir -p "$R/bin" "$R/tmp"
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
"$HERE/mkimage.sh" "$R" factbuoy.local/capture-busybox:1 "$W/busybox.tar" /bin/sh
"$CLUSTER" import "$W/busybox.tar"

# pod NAME NODE IMAGE COMMAND [EXTRA-SPEC-JSON]
pod() {
  k apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "namespace": "default",
              "labels": {"factbuoy/run": "capture", "app.kubernetes.io/component": "agent"}},
 "spec": {"terminationGracePeriodSeconds": 1, $2
          "containers": [{"name": "agent", "image": "$3", "imagePullPolicy": "Never",
                          "command": ["/bin/sh", "-c", "$4"] ${5:-}}]}}
JSON
}
# save NAME JSONPATH-CONDITION VALUE-PATTERN: waits until the pod's jsonpath matches, then saves it.
save() {
  local end=$(( $(date +%s) + 150 ))
  until k get pod "$1" -o "jsonpath=$2" | grep -Eq "$3"; do
    [ "$(date +%s)" -lt "$end" ] || { echo "capture: $1 never matched $3" >&2; k get pod "$1" -o yaml >&2; exit 1; }
    sleep 1
  done
  k get pod "$1" -o json | python3 -c '
import json, sys
pod = json.load(sys.stdin)
pod["metadata"].pop("managedFields", None)
json.dump(pod, sys.stdout, indent=1, sort_keys=True)
print()' > "$OUT/$1.json"
  echo "captured $1"
}
B=factbuoy.local/capture-busybox:1
pod running '"nodeName": "node-1",' "$B" "sleep 3600"
pod missing-image '"nodeName": "node-1",' factbuoy.local/not-imported:1 "true"
pod crash-loop '"nodeName": "node-2",' "$B" "echo bye; exit 3"
pod oom '"nodeName": "node-2",' "$B" "x=a; while true; do x=\$x\$x; done" \
  ', "resources": {"limits": {"memory": "16Mi"}}'
pod no-configmap '"nodeName": "node-1",' "$B" "sleep 3600" \
  ', "envFrom": [{"configMapRef": {"name": "no-such-configmap"}}]'
pod no-node '"nodeSelector": {"factbuoy.test/none": "x"},' "$B" "sleep 3600"
pod too-big '' "$B" "sleep 3600" ', "resources": {"requests": {"memory": "1Ti"}}'

save running '{.status.phase}' '^Running$'
save missing-image '{.status.containerStatuses[0].state.waiting.reason}' 'ErrImageNeverPull'
save crash-loop '{.status.containerStatuses[0].state.waiting.reason}' 'CrashLoopBackOff'
save oom '{.status.containerStatuses[0].lastState.terminated.reason}' 'OOMKilled'
save no-configmap '{.status.containerStatuses[0].state.waiting.reason}' 'CreateContainerConfigError'
save no-node '{.status.conditions[0].reason}' 'Unschedulable'
save too-big '{.status.conditions[0].reason}' 'Unschedulable'

# A container killed behind the kubelet's back: its status after the kubelet restarted it.
id=$(k get pod running -o 'jsonpath={.status.containerStatuses[0].containerID}')
"$CLUSTER" ctr 1 tasks kill -s SIGKILL "${id#containerd://}"
cp "$OUT/running.json" "$W/running.json"
save running '{.status.containerStatuses[0].restartCount}' '^1$'
mv "$OUT/running.json" "$OUT/killed-restarted.json"
mv "$W/running.json" "$OUT/running.json"
