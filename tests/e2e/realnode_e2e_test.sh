#!/usr/bin/env bash
# End-to-end on a real node, podshaper installed there as pods (scripts/cluster.sh install):
# pods shaped by the installed podshaper-webhook through the API server, placed by kube-scheduler on a real kubelet (containerd with NRI, runc, CNI; scripts/node.sh),
# and read from inside their running containers: /dev/shm, the memory cgroup, CAP_IPC_LOCK,
# RLIMIT_MEMLOCK and mlock, the IPC namespace, PET_NPROC_PER_NODE; the seed's DataLoader
# crash (unshaped) and its cure (shaped); and what happens on a node that cannot grant the
# memlock asked. Then `cluster.sh down` must leave nothing behind.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-realnode-cluster}
export PODSHAPER_WITH_NODE=yes
dir=$PODSHAPER_CLUSTER_DIR
kubeconfig=$dir/kubeconfig
logs=$dir/logs
bin=${PODSHAPER_BIN:-$root/build/bin}
node=real-h200x4-0
capture=$root/tests/fixtures/captures/h200x4-nv18.topo-m-and-p2p-r.txt
tmp=$(mktemp -d)
trap 'node_test_cleanup $?' EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# The webhook asks 4 MiB of locked memory (examples/real-node/install's config): what this
# machine's runtime can grant, as no process here may raise RLIMIT_MEMLOCK past 8 MiB.
# `unlimited` is proven apart, below.
# A cluster of this checkout left running (make demo's, a killed run's, this test's own) is
# stopped first, as `make test` does: its real node's veths and sysctls are not this test's to count.
bash "$root/scripts/cluster.sh" down-all
veths_before=$(ip -o link show type veth | wc -l)
netns_before=$(ip netns list 2>/dev/null | wc -l)
sysctls_before=$(sysctl -n vm.overcommit_memory kernel.panic kernel.panic_on_oops | tr '\n' ' ')
t0=$SECONDS
PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no bash "$root/scripts/cluster.sh" up
echo "cluster and real node up in $((SECONDS - t0)) s"
# podshaper as pods on the node, installed as an admin does (examples/real-node/install/).
bash "$root/scripts/cluster.sh" install
source "$dir/node/env"

phase() { kc -n "${2:-ml}" get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
finished() { [[ $(phase "$@") == Succeeded || $(phase "$@") == Failed ]]; }
ran_on() { finished "$1" && [[ $(kc -n ml get pod "$1" -o jsonpath='{.spec.nodeName}') == "$node" ]]; }
# value POD KEY: KEY's value in the pod's log (container_facts.py's key=value lines)
value() { sed -n "s/^$2=//p" "$tmp/$1.log" | tail -1; }
logs_of() { kc -n ml logs "$1" >"$tmp/$1.log" 2>&1 || true; }

# --- 1. the real node: Ready, GPUs from the device plugin, judged by the operator like any other
check "the real node is Ready with 4 nvidia.com/gpu from the device plugin" \
  eventually 30 'True 4' kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.allocatable.nvidia\.com/gpu}'
check "its kubelet is the pinned release" \
  eventually 5 'v1.*' kc get node "$node" -o jsonpath='{.status.nodeInfo.kubeletVersion}'
check "its runtime is containerd 2" \
  eventually 5 'containerd://2.*' kc get node "$node" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}'
check "its InternalIP is its own bridge's address, not the machine's" \
  eventually 5 "$NODE_IP" kc get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}'

examples=$root/examples/real-node
check "the node's agent pod reports it, its memlock probe granted the 4 MiB asked" \
  eventually 90 'true 4194304' kc get gtr "$node" -o jsonpath='{.spec.host.memlockProbe.granted} {.spec.host.memlockBytes}'
check "the operator validates the real node: 4 GPUs, NVLink, P2P all, memlock 4 MiB" \
  eventually 60 'true 4 nvlink all 4194304' kc get node "$node" -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated} {.metadata.labels.podshaper\.io/gpu-count} {.metadata.labels.podshaper\.io/interconnect} {.metadata.labels.podshaper\.io/p2p} {.metadata.labels.podshaper\.io/memlock}'

# --- 2. inside the containers: three shaped-or-not pods of one GPU each, side by side
# examples/real-node/pods.yaml: the namespace, three inspecting pods and the unshaped
# DataLoader, one GPU each, as a user would apply them.
kc create namespace ml >/dev/null && kc label namespace ml pod-security.kubernetes.io/enforce=privileged >/dev/null
until_ok 30 kc -n ml get serviceaccount default || fail "namespace ml: no default service account"
kc -n ml create configmap podshaper-examples --from-file "$examples/container_facts.py" --from-file "$examples/dataloader.py" >/dev/null
kc apply -f "$examples/pods.yaml" >"$tmp/apply.out" 2>"$tmp/apply.warnings"
cat "$tmp/apply.warnings"
for p in inspect-shaped inspect-nonroot inspect-unshaped dataloader-unshaped; do
  check "$p ran to its end on $node" until_ok 240 ran_on "$p"
  if [[ $p == inspect-* ]]; then check "$p succeeded" eventually 5 Succeeded phase "$p"; fi
  logs_of "$p"
done

shm=$(kc -n ml get pod inspect-shaped -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')
shm_bytes=$(( ${shm%Mi} * 1024 * 1024 ))
limit=$(kc -n ml get pod inspect-shaped -o jsonpath='{.spec.containers[0].resources.limits.memory}')
check "shaped: /dev/shm is its $shm emptyDir (statfs), with hostIPC" test "$(value inspect-shaped shm_bytes)" = "$shm_bytes"
check "shaped: a write into /dev/shm stops at $shm (ENOSPC)" \
  test "$(value inspect-shaped shm_written) $(value inspect-shaped shm_write_error)" = "$shm_bytes ENOSPC"
check "shaped: the memory cgroup's limit is the raised limits.memory ($limit = 256Mi + $shm)" \
  test "$(value inspect-shaped memory_limit)" = "$(( (256 + ${shm%Mi}) * 1024 * 1024 ))"
check "shaped: limits.memory is 256Mi + $shm" test "$limit" = "$((256 + ${shm%Mi}))Mi"
check "shaped (root): CAP_IPC_LOCK is effective" test "$(value inspect-shaped cap_ipc_lock)" = yes
check "shaped: RLIMIT_MEMLOCK is the 4 MiB asked through NRI" \
  test "$(value inspect-shaped memlock_soft)/$(value inspect-shaped memlock_hard)" = "4194304/4194304"
check "shaped (root): mlock of 64 MiB works past the 4 MiB limit (IPC_LOCK)" test "$(value inspect-shaped mlock_64mib)" = ok
check "shaped: the IPC namespace is the host's" test "$(value inspect-shaped ipc_ns)" = "$(readlink /proc/self/ns/ipc)"
check "shaped: PET_NPROC_PER_NODE=1 in the environment" test "$(value inspect-shaped pet_nproc)" = 1

check "non-root: kubectl showed the webhook's warning that IPC_LOCK is not effective" grep -qi "non-root.*IPC_LOCK\|IPC_LOCK.*non-root" "$tmp/apply.warnings"
check "non-root (uid 1000): CAP_IPC_LOCK is not effective" \
  test "$(value inspect-nonroot uid) $(value inspect-nonroot cap_ipc_lock)" = "1000 no"
check "non-root: RLIMIT_MEMLOCK is the 4 MiB asked (what it relies on)" \
  test "$(value inspect-nonroot memlock_soft)" = 4194304
check "non-root: mlock within the limit works, past it fails (ENOMEM)" \
  test "$(value inspect-nonroot mlock_2mib) $(value inspect-nonroot mlock_64mib)" = "ok ENOMEM"
check "non-root: /dev/shm is the emptyDir too" test "$(value inspect-nonroot shm_bytes)" = "$shm_bytes"

check "unshaped: /dev/shm is the runtime's 64 MiB" test "$(value inspect-unshaped shm_bytes)" = $((64 << 20))
check "unshaped: a write into /dev/shm stops at 64 MiB" test "$(value inspect-unshaped shm_written)" = $((64 << 20))
check "unshaped: no CAP_IPC_LOCK" test "$(value inspect-unshaped cap_ipc_lock)" = no
check "unshaped: RLIMIT_MEMLOCK is the runtime default (8 MiB here)" test "$(value inspect-unshaped memlock_hard)" = 8388608
check "unshaped: mlock of 64 MiB fails (ENOMEM)" test "$(value inspect-unshaped mlock_64mib)" = ENOMEM
check "unshaped: its IPC namespace is its own" test "$(value inspect-unshaped ipc_ns)" != "$(readlink /proc/self/ns/ipc)"
check "unshaped: no PET_NPROC_PER_NODE" test "$(value inspect-unshaped pet_nproc)" = unset

# Where NCCL's cuMem host memory goes (docs/webhook.md "Seccomp and NCCL's host memory"):
# the node's runc applies containerd's RuntimeDefault profile, which refuses get_mempolicy
# without CAP_SYS_NICE; with no profile a container runs Unconfined and may call it.
check "inspect-seccomp ran to its end on $node" until_ok 240 ran_on inspect-seccomp
for c in runtime-default runtime-default-sys-nice; do
  kc -n ml logs inspect-seccomp -c "$c" >"$tmp/seccomp-$c.log" 2>&1 || true
done
check "no seccompProfile: Unconfined, get_mempolicy works" \
  test "$(value inspect-shaped seccomp) $(value inspect-shaped get_mempolicy)" = "none ok"
check "RuntimeDefault: a seccomp filter, get_mempolicy refused (EPERM)" \
  test "$(value seccomp-runtime-default seccomp) $(value seccomp-runtime-default get_mempolicy)" = "filter EPERM"
check "RuntimeDefault with CAP_SYS_NICE: get_mempolicy works" \
  test "$(value seccomp-runtime-default-sys-nice seccomp) $(value seccomp-runtime-default-sys-nice get_mempolicy)" = "filter ok"

# --- 3. the seed's failure, for real: a DataLoader (2 workers x prefetch 4, 32x3x224x224 float32)
check "unshaped DataLoader: the pod failed" test "$(phase dataloader-unshaped)" = Failed
code=$(kc -n ml get pod dataloader-unshaped -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
check "unshaped DataLoader: exit code $code (not 0)" test "${code:-0}" != 0
# The worker's SIGBUS handler prints its line; what the rank's main process says after it
# depends on which of its checks sees the death first ("is killed by signal: Bus error",
# "exited unexpectedly"), so only the worker's line and the script's verdict are asserted.
check "unshaped DataLoader: PyTorch says a worker hit a Bus error" \
  grep -aqE "bus error encountered in worker|is killed by signal: Bus error" "$tmp/dataloader-unshaped.log"
check "unshaped DataLoader: ... and the training failed" grep -aq "training failed" "$tmp/dataloader-unshaped.log"
check "unshaped DataLoader: ... and blames shared memory" grep -aqi "shared memory" "$tmp/dataloader-unshaped.log"
sed 's/^/    /' "$tmp/dataloader-unshaped.log" | grep -a -i -m3 "bus error\|shared memory" || true

# The same training, shaped (examples/real-node/training.yaml): node-exclusive, the whole
# node's 4 GPUs, one rank per GPU.
kc apply -f "$examples/training.yaml" >/dev/null
check "shaped DataLoader: kube-scheduler bound it to the real node by the webhook's affinity" \
  eventually 60 "$node" kc -n ml get pod dataloader-shaped -o jsonpath='{.spec.nodeName}'
check "shaped DataLoader: completed (4 ranks)" eventually 300 Succeeded phase dataloader-shaped
logs_of dataloader-shaped
check "shaped DataLoader: every rank finished its 12 batches" test "$(grep -c 'batches of 32x3x224x224' "$tmp/dataloader-shaped.log")" = 4
check "shaped DataLoader: training finished" grep -q "training finished" "$tmp/dataloader-shaped.log"
sed 's/^/    /' "$tmp/dataloader-shaped.log"

# --- 3b. shaped pods explain themselves (examples/real-node/explain.yaml): a DataLoader told a
# smaller batch than it makes, a container that fills /dev/shm and prints NCCL's ENOSPC line,
# restarted in place by its Job, and a pod no node can take; then one that waits for the node a
# node-exclusive pod holds. What a user reads is `kubectl describe`, so that is what is read.
kc apply -f "$examples/explain.yaml" >/dev/null 2>"$tmp/explain.warnings"
described() { kc -n ml describe "$@" 2>&1; }
nccl_pod() { kc -n ml get pods -l job-name=nccl-shm -o jsonpath='{.items[0].metadata.name}'; }
check "undersized DataLoader: it died (Failed)" eventually 240 Failed phase dataloader-undersized
check "undersized DataLoader: its termination message is its log's tail (FallbackToLogsOnError)" \
  eventually 5 '*training failed*' kc -n ml get pod dataloader-undersized -o jsonpath='{.status.containerStatuses[0].state.terminated.message}'
if eventually 60 '*ShmExhausted*' described pod dataloader-undersized 2>/dev/null; then
  pass "kubectl describe pod dataloader-undersized: a ShmExhausted Warning"
else  # what CI needs to see, short: what the operator judged, the pod's Events, what the operator said
  fail "kubectl describe pod dataloader-undersized: a ShmExhausted Warning"
  kc -n ml get pod dataloader-undersized -o jsonpath='{.status.containerStatuses[0].state.terminated}' 2>&1 | tail -c 700 || true; echo
  kc -n ml get events --field-selector involvedObject.name=dataloader-undersized 2>&1 | tail -6 || true
  kc -n podshaper-system get pods -o wide 2>&1 | grep -a operator || true
  kc -n podshaper-system logs deploy/podshaper-operator --tail 400 2>&1 | grep -a -i "pod \|error\|leader\|warn" | tail -15 || true
fi
described pod dataloader-undersized >"$tmp/undersized.describe"
shm_u=$(kc -n ml get pod dataloader-undersized -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')
check "... it says a DataLoader worker ran out of /dev/shm, and the size it had ($shm_u)" \
  grep -aq "Container \"trainer\" ran out of /dev/shm: a PyTorch DataLoader worker could not put its batch there.*/dev/shm was $shm_u," "$tmp/undersized.describe"
check "... and names the annotations to change" \
  grep -aq 'annotations podshaper.io/dataloader-workers, podshaper.io/prefetch-factor and podshaper.io/batch-bytes (or podshaper.io/batch-shape and podshaper.io/batch-dtype) to what its DataLoader runs' "$tmp/undersized.describe"
check "... and the formula's inputs (4x3x224x224 float32)" grep -aq 'The size: 1 rank × ((2 workers × prefetch 4.*4x3x224x224 float32' "$tmp/undersized.describe"
# (kubectl describe prints a value of several lines under its key, each cut to 138 characters)
check "kubectl describe pod: the admission warnings are on the pod (podshaper.io/warnings)" \
  bash -c "grep -a -A3 'podshaper.io/warnings:' '$tmp/undersized.describe' | grep -q 'podshaper.io/nccl-communicators not set'"
sed -n '/^Events:/,$p' "$tmp/undersized.describe" | grep -a ShmExhausted | cut -c1-400 | sed 's/^/    /' || true

check "NCCL's ENOSPC: the Job's pod ran twice and failed twice (restartPolicy OnFailure)" \
  eventually 120 '[2-9]' bash -c "kubectl --kubeconfig $kubeconfig -n ml get pods -l job-name=nccl-shm -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}'"
check "kubectl describe pod: ShmExhausted, NCCL could not make its segment, twice" \
  eventually 30 2 bash -c "kubectl --kubeconfig $kubeconfig -n ml describe pod $(nccl_pod) | grep -c 'ShmExhausted.*NCCL could not make its shared memory segment there'"
described pod "$(nccl_pod)" >"$tmp/nccl.describe"
check "(its termination message, the log's last 2 KiB, holds PyTorch's traceback, not NCCL's line)" bash -c \
  "kubectl --kubeconfig $kubeconfig -n ml get pod $(nccl_pod) -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}' | grep -q ncclSystemError &&
   ! kubectl --kubeconfig $kubeconfig -n ml get pod $(nccl_pod) -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}' | grep -q 'NCCL WARN'"
check "... quoting NCCL's line, read from the log, and naming podshaper.io/nccl-communicators" \
  grep -q 'Error while creating shared memory segment /dev/shm/nccl-4PshbB.*annotation podshaper.io/nccl-communicators to the NCCL communicators the job makes' "$tmp/nccl.describe"
check "... and the second run is told that podshaper-shm cleared what the first left in /dev/shm" \
  grep -q "This was run 2 of the container in this pod; podshaper-shm clears what a dead run left" "$tmp/nccl.describe"
check "... each with what podshaper-shm measured of the run that died" \
  bash -c "test \$(grep -c 'ShmExhausted.*podshaper-shm measured run [0-9]* on the node: peak [0-9]' '$tmp/nccl.describe') -ge 2"
check "kubectl describe pod: podshaper-shm's ShmLeftoversRemoved, before the second run" \
  grep -q 'ShmLeftoversRemoved' "$tmp/nccl.describe"
logs_of "$(nccl_pod)"
check "(its second run found no file of the first run's in /dev/shm)" grep -q '^/dev/shm: 0 files left by earlier runs' "$tmp/$(nccl_pod).log"
check "kubectl describe job nccl-shm: told once, naming the pod" \
  eventually 10 1 bash -c "kubectl --kubeconfig $kubeconfig -n ml describe job nccl-shm | grep -c 'ShmExhausted.*Pod ml/nccl-shm-'"
sed -n '/^Events:/,$p' "$tmp/nccl.describe" | grep -a ShmExhausted | cut -c1-300 | sed 's/^/    /' || true
kc -n ml delete job nccl-shm --wait=false >/dev/null
kc -n ml delete pod dataloader-undersized --wait=false >/dev/null

# The test cluster's other nodes are objects without a kubelet or an agent: two have 8 GPUs,
# never judged by podshaper.
check "too-big (8 GPUs, on a node of 4): admitted and Pending" eventually 10 Pending phase too-big
check "kubectl describe pod too-big: NotPlaceable, what the nodes of 4 GPUs have, the 8-GPU nodes not judged" \
  eventually 60 "*NotPlaceable*It needs a node that has 8 GPUs (podshaper.io/gpu-count=8)*do not have 8 GPUs (4 GPUs: $node*are not validated (not judged by podshaper: p4d-24xlarge-a100-0, p5-48xlarge-h100-0)*podshaper-agent has not reported p4d-24xlarge-a100-0*" \
  described pod too-big
described pod too-big | sed -n '/^Events:/,$p' | grep -a NotPlaceable | cut -c1-400 | sed 's/^/    /' || true
kc -n ml delete pod too-big --wait=false >/dev/null

# A node-exclusive pod holds the node; another of its size waits for it.
for p in hold waiter; do
  python3 - "$p" <<'PY' | kc create -f - >/dev/null
import json, sys
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": sys.argv[1], "namespace": "ml",
  "labels": {"podshaper.io/inject": "true"}, "annotations": {"podshaper.io/dataloader-workers": "0",
  "podshaper.io/nccl-communicators": "0"}},
  "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
           "containers": [{"name": "trainer", "image": "podshaper.test/busybox:1", "command": ["sleep", "3600"],
                           "resources": {"limits": {"nvidia.com/gpu": "4", "memory": "64Mi", "cpu": "100m"}}}]}}))
PY
  [[ $p == hold ]] && check "hold (node-exclusive, 4 GPUs) runs on $node" eventually 120 Running phase hold
done
check "kubectl describe pod waiter: NotPlaceable, the validated node of its size runs node-exclusive pod ml/hold" \
  eventually 60 '*NotPlaceable*1 already runs a node-exclusive pod (real-h200x4-0 runs ml/hold)*It starts when a node-exclusive pod named here ends*' \
  described pod waiter
described pod waiter | sed -n '/^Events:/,$p' | grep -a NotPlaceable | cut -c1-400 | sed 's/^/    /' || true
kc -n ml delete pod hold waiter --wait=false >/dev/null

# --- 4. unlimited memlock: it reaches the container's OCI spec, and this node cannot grant it
# The annotation podshaper writes with its default config (memlock: unlimited).
python3 -c '
import json
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
  "uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
  "namespace": "ml", "operation": "CREATE", "object": {"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "x", "labels": {"podshaper.io/inject": "true"}, "annotations": {"podshaper.io/batch-bytes": "1Mi", "podshaper.io/placement": "shared"}},
    "spec": {"containers": [{"name": "trainer", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}}))' |
  "$bin/podshaper-webhook" review --output pod 2>/dev/null >"$tmp/default-shaped.json"
unlimited_ann=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"], end="")' "$tmp/default-shaped.json")
check "unlimited: podshaper's default annotation asks RLIMIT_MEMLOCK 18446744073709551615" grep -q "hard: 18446744073709551615" <<<"$unlimited_ann"
python3 - "$unlimited_ann" "$node" <<'PY' | kc create -f - >/dev/null
import json, sys
ann, node = sys.argv[1:]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "oci-unlimited", "namespace": "ml",
  "annotations": {"ulimits.noderesource.dev/container.trainer": ann}},
  "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
           "containers": [{"name": "trainer", "image": "podshaper.test/busybox:1", "command": ["true"]}]}}))
PY
check "unlimited: the container cannot start here (StartError: error setting rlimit type 8)" \
  eventually 60 '*error setting rlimit type 8*' kc -n ml get pod oci-unlimited -o jsonpath='{.status.containerStatuses[0].state}'
cid=$(kc -n ml get pod oci-unlimited -o jsonpath='{.status.containerStatuses[0].containerID}')
cid=${cid#containerd://}
"${PODSHAPER_NODE_BIN:-$root/build/node}/ctr" -a "$dir/node/containerd.sock" -n k8s.io containers info "$cid" >"$tmp/oci.json" 2>"$tmp/oci.err" || cat "$tmp/oci.err"
check "unlimited: its OCI spec carries RLIMIT_MEMLOCK soft = hard = 2^64-1 (from the NRI annotation)" \
  python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))["Spec"]
r = [l for l in spec["process"].get("rlimits", []) if l["type"] == "RLIMIT_MEMLOCK"]
sys.exit(0 if r and r[0]["hard"] == r[0]["soft"] == 2**64 - 1 else 1)' "$tmp/oci.json"

# The way out: the installed agent's memlock probe asks unlimited (as manifests/ does, for the
# default `memlock: unlimited`), cannot start, and the report says so.
check "the agent DaemonSet now asks unlimited for its memlock probe" quiet kc -n podshaper-system patch ds podshaper-agent --type json -p '[
  {"op": "test", "path": "/spec/template/spec/containers/0/args/11", "value": "--memlock-requested"},
  {"op": "replace", "path": "/spec/template/spec/containers/0/args/12", "value": "unlimited"},
  {"op": "replace", "path": "/spec/template/metadata/annotations/ulimits.noderesource.dev~1container.memlock-probe",
   "value": "- type: RLIMIT_MEMLOCK\n  soft: 18446744073709551615\n  hard: 18446744073709551615\n"}]'
check "its new pod's memlock probe cannot start" eventually 90 '*rlimit*' bash -c "
  kubectl --kubeconfig $kubeconfig -n podshaper-system get pods -l app.kubernetes.io/name=podshaper-agent \
    -o jsonpath='{.items[*].status.containerStatuses[?(@.name==\"memlock-probe\")]}'"
check "the node is labelled memlock=not-granted and not validated" \
  eventually 90 'false not-granted' kc get node "$node" -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated} {.metadata.labels.podshaper\.io/memlock}'
kc describe gtr "$node" >"$tmp/describe.txt"
check "kubectl describe gtr: MemlockUnlimited False, MemlockNotGranted" grep -q "MemlockNotGranted" "$tmp/describe.txt"
check "kubectl describe gtr: quotes the runtime's error" grep -q "error setting rlimit type 8" "$tmp/describe.txt"
sed -n '/MemlockNotGranted/,/Type:/p' "$tmp/describe.txt" | sed 's/^/    /' | head -12

# --- 5. down leaves nothing behind
kc -n ml delete pod --all --wait=false >/dev/null 2>&1
bash "$root/scripts/cluster.sh" down
# (a pattern that does not match its own command line)
check "down: no kubelet, containerd or shim of this node" bash -c "! pgrep -f -- '[${dir:0:1}]${dir:1}/node' >/dev/null"
check "down: no mount under the node's dir" bash -c "! findmnt -rn -o TARGET | grep -qF '$dir/node'"
check "down: no cgroup $NODE_CGROUP_ROOT" bash -c "! ls -d /sys/fs/cgroup/*$NODE_CGROUP_ROOT 2>/dev/null | grep -q ."
check "down: no bridge $NODE_BRIDGE" bash -c "! ip link show '$NODE_BRIDGE' >/dev/null 2>&1"
check "down: no DNAT rule of the node's for the kubernetes Service" \
  bash -c "! iptables -t nat -S PREROUTING 2>/dev/null | grep -q 'podshaper-node ${NODE_BRIDGE#psn}:'"
check "down: no pod's veth left" test "$(ip -o link show type veth | wc -l)" = "$veths_before"
check "down: no pod network namespace left" test "$(ip netns list 2>/dev/null | wc -l) $(find "$dir" -path '*netns*' 2>/dev/null | wc -l)" = "$netns_before 0"
check "down: the sysctls kubelet changed are restored" \
  test "$(sysctl -n vm.overcommit_memory kernel.panic kernel.panic_on_oops | tr '\n' ' ')" = "$sysctls_before"
check "down: the node's directory is gone" test ! -e "$dir/node"
finish
