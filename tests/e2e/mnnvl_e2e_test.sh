#!/usr/bin/env bash
# End-to-end on simulated multi-node NVLink (an NVL72-class fabric; docs/webhook.md
# "Multi-node NVLink"): 18 Node objects of 4 GPUs in two NVLink domains of 9, each reported
# by podshaper-agent replaying a synthetic NVML recording (tests/fixtures/mnnvl/), judged
# and labelled by podshaper-operator; pods shaped by podshaper-webhook and placed by the
# real kube-scheduler, their ComputeDomain channels allocated by the scheduler from
# ResourceSlices as NVIDIA's DRA driver publishes them. No kubelet runs: binding is the point.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-mnnvl-cluster}
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
logs=$PODSHAPER_CLUSTER_DIR/logs
bin=${PODSHAPER_BIN:-$root/build/bin}
tmp=$(mktemp -d)
operator_pid=
cleanup() {
  local rc=$?
  [[ -n $operator_pid ]] && { kill "$operator_pid" 2>/dev/null; wait "$operator_pid" 2>/dev/null; }
  if [[ $rc -ne 0 || $failures -gt 0 ]]; then show_failure_state 60 'operator.log' 'podshaper-webhook.log'; fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
bash "$root/scripts/cluster.sh" up

# --- the rack: 18 nodes, two NVLink domains of 9 (nvl-0..8 and nvl-9..17), one ComputeDomain
# channel on each node as the DRA driver's kubelet plugin publishes it
python3 - >"$tmp/rack.json" <<'PY'
import json
mem = {"cpu": "144", "memory": "960Gi", "nvidia.com/gpu": "4", "pods": "110", "ephemeral-storage": "1Ti"}
items = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
          "metadata": {"name": "compute-domain-default-channel.nvidia.com"},
          "spec": {"selectors": [{"cel": {"expression":
              "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == 'channel'"}}]}}]
for i in range(18):
    name = f"nvl-{i}"
    items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
        "nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/gpu.count": "4"}},
        "status": {"capacity": mem, "allocatable": mem, "conditions": [{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "message": "fake GB200 node for podshaper's tests (no kubelet)"}]}})
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-compute-domain.nvidia.com"},
        "spec": {"driver": "compute-domain.nvidia.com", "nodeName": name,
                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}]}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
kc apply -f "$tmp/rack.json" >/dev/null
# recording I [HEALTH_MASK]: nvl-I's recording, the rack's template (tests/fixtures/mnnvl/) with
# its GPUs' UUIDs and its clique (1 for nvl-0..8, 2 for nvl-9..17) as the rack two-cliques has them
recording() {
  python3 - "$root/tests/fixtures/mnnvl" "$@" <<'PY'
import json, os, sys
fixtures, node, mask = sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None
rack = next(r for r in json.load(open(os.path.join(fixtures, "racks.json")))["racks"] if r["name"] == "two-cliques")
r = json.load(open(os.path.join(fixtures, "gb200-node.json")))
for g, gpu in enumerate(r["nvml"]["gpus"]):
    gpu["uuid"] = f"GPU-00000001-0000-4000-8000-{node * 4 + g:012x}"
    gpu["fabric"].update(clusterUuid=rack["clusterUuid"], cliqueId=1 if node < 9 else 2)
    if mask is not None and g == 1: gpu["fabric"]["healthMask"] = int(mask)
print(json.dumps(r))
PY
}
# What each node's memlock-probe container would write on nodes that grant unlimited memlock
# (the agent's own getrlimit is this test's shell's).
echo '{"soft": null, "hard": null}' >"$tmp/memlock.json"
agent_once() {  # agent_once NODE RECORDING
  "$bin/podshaper-agent" run --node "$1" --recording "$2" --memlock-probe-file "$tmp/memlock.json" \
    --kubeconfig "$kubeconfig" --once
}
for i in $(seq 0 17); do
  recording "$i" >"$tmp/nvl-$i.json"
  check "nvl-$i's agent reports from its recording" \
    quiet agent_once "nvl-$i" "$tmp/nvl-$i.json"
done

kc create namespace podshaper-system >/dev/null
kc apply -f "$root/manifests/base/topologypolicy-default.yaml" >/dev/null
printf 'eventNamespace: default\npendingGrace: 3s\n' >"$tmp/operator.yaml"
"$bin/podshaper-operator" run --kubeconfig "$kubeconfig" --config "$tmp/operator.yaml" --listen "127.0.0.1:$(free_port)" \
  --identity op-mnnvl >>"$logs/operator.log" 2>&1 &
operator_pid=$!

domain() { kc get node "$1" -o jsonpath='{.metadata.labels.podshaper\.io/nvlink-domain}'; }
validated() { kc get node "$1" -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated}'; }
check "nvl-0 is validated" eventually 60 true validated nvl-0
check "nvl-17 is validated" eventually 60 true validated nvl-17
a=$(domain nvl-0); b=$(domain nvl-9)
check "nvl-0 is labelled with its NVLink domain <clusterUUID>.<cliqueId>" \
  test -n "$a" -a "$(domain nvl-8)" = "$a"
check "nvl-9..17 are in another domain" test -n "$b" -a "$b" != "$a" -a "$(domain nvl-17)" = "$b"
kc describe gtr nvl-0 >"$tmp/describe-gtr"
check "kubectl describe gtr says the domain in words" \
  grep -q "NVLink domain $a: 4 GPUs here, fabric completed, healthy" "$tmp/describe-gtr"

# --- a job of 8 pods with a ComputeDomain channel each: kept in one NVLink domain, with P2P's reserve
kc create namespace train >/dev/null
until_ok 30 kc -n train get serviceaccount default || fail "namespace train: no default service account"
# job NAME [CLAIM]: an indexed Job of 8 node-exclusive pods of 4 GPUs, torchrun across 8 nodes,
# each with the IMEX channel of the ResourceClaimTemplate `channel` unless CLAIM is "none"
job() {
  python3 - "$@" <<'PY'
import json, sys
name, claim = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "channel"
res = {"nvidia.com/gpu": "4", "memory": "64Gi", "cpu": "8"}
container = {"name": "trainer", "image": "pytorch:2", "resources": {"limits": res, "requests": res},
             "env": [{"name": "PET_NNODES", "value": "8"}]}
spec = {"restartPolicy": "Never", "containers": [container],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
if claim != "none":
    container["resources"]["claims"] = [{"name": "imex"}]
    spec["resourceClaims"] = [{"name": "imex", "resourceClaimTemplateName": claim}]
print(json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "train"},
  "spec": {"completionMode": "Indexed", "completions": 8, "parallelism": 8, "backoffLimit": 0,
           "template": {"metadata": {"labels": {"podshaper.io/inject": "true"},
                                     "annotations": {"podshaper.io/dataloader-workers": "4",
                                                     "podshaper.io/batch-bytes": "16Mi"}},
                        "spec": spec}}}))
PY
}
kc apply -f - >/dev/null <<'YAML'
# What a ComputeDomain's spec.channel.resourceClaimTemplate makes (NVIDIA's DRA driver).
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: channel, namespace: train}
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly: {deviceClassName: compute-domain-default-channel.nvidia.com}
YAML
job llama >"$tmp/llama.json"
kc create -f "$tmp/llama.json" >/dev/null 2>"$tmp/llama.warnings"
bound() { kc -n train get pods -l batch.kubernetes.io/job-name="$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c . ; }
check "the Job's 8 pods are bound to nodes" eventually 90 8 bound llama
kc -n train get pods -l batch.kubernetes.io/job-name=llama -o json >"$tmp/llama-pods.json"
python3 - "$tmp/llama-pods.json" >"$tmp/llama-nodes" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["items"]: print(p["spec"].get("nodeName", "(none)"))
PY
domains=$(while read -r n; do domain "$n"; echo; done <"$tmp/llama-nodes" | sort -u)
echo "  the Job's nodes: $(sort "$tmp/llama-nodes" | tr '\n' ' ')"
check "all 8 on 8 nodes (one pod per node)" test "$(sort -u "$tmp/llama-nodes" | wc -l)" = 8
check "all 8 in one NVLink domain ($domains)" test "$(echo "$domains" | wc -l)" = 1
pod0=$(kc -n train get pods -l batch.kubernetes.io/job-completion-index=0 -o jsonpath='{.items[0].metadata.name}')
annotation() { kc -n train get pod "$1" -o jsonpath="{.metadata.annotations.podshaper\.io/$2}"; }
check "its pods carry a required podAffinity on podshaper.io/nvlink-domain" test "$(
  kc -n train get pod "$pod0" -o jsonpath='{.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey}')" = podshaper.io/nvlink-domain
check "the formula reserves P2P over the NVLink fabric, 0 B a communicator" \
  grep -q "0 B per rank per communicator = 0Mi (P2P: NCCL's P2P transport over the NVLink fabric" <(annotation "$pod0" shm-formula)
check "its warnings say that no gang scheduling was recognised" grep -q "no gang scheduling recognised" <(annotation "$pod0" warnings)

# --- a second job whose first pod takes the one node left in that domain: its other pod
# waits for the domain, and kubectl describe says why (what holds the domain's nodes, which
# domain has room). The first pod is drawn there by a preferred nodeAffinity: without gang
# scheduling, that is what a first pod may do (the webhook's warning above).
set -- $domains; job_domain=$1
left=$(for i in $(seq 0 17); do
  if [[ $(domain "nvl-$i") == "$job_domain" ]] && ! grep -qx "nvl-$i" "$tmp/llama-nodes"; then echo "nvl-$i"; fi
done)
job tail >"$tmp/tail.json"
python3 - "$tmp/tail.json" "$left" <<'PY'
import json, sys
path, node = sys.argv[1:3]
j = json.load(open(path))
j["spec"]["completions"] = j["spec"]["parallelism"] = 2
spec = j["spec"]["template"]["spec"]
spec["containers"][0]["env"] = [{"name": "PET_NNODES", "value": "2"}]
spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
    "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}
json.dump(j, open(path, "w"))
PY
kc create -f "$tmp/tail.json" >/dev/null 2>&1
check "the tail Job's first pod takes $left, the last free node of $job_domain" eventually 60 "$left" \
  kc -n train get pods -l batch.kubernetes.io/job-name=tail -o jsonpath='{.items[*].spec.nodeName}'
waiting=$(kc -n train get pods -l batch.kubernetes.io/job-name=tail -o json |
  python3 -c 'import json, sys; print(*[p["metadata"]["name"] for p in json.load(sys.stdin)["items"] if not p["spec"].get("nodeName")])')
notplaceable() { kc -n train get events --field-selector "involvedObject.name=$1,reason=NotPlaceable" -o jsonpath='{.items[0].message}'; }
# (An Event says at most 1024 bytes: here, after this cluster's other nodes, the rest is cut;
# on nodes of one kind it goes on with the free domains, tests/unit/contract.)
check "$waiting's NotPlaceable Event: its job's domain, all taken" \
  eventually 60 "*in NVLink domain $job_domain with its job's other pods*9 are not in the job's NVLink domain*In the job's NVLink domain, all 9 nodes are taken (1 by this job, 8 by train/llama-*" \
  notplaceable "$waiting"
check "kubectl describe pod $waiting shows it" grep -q NotPlaceable <(kc -n train describe pod "$waiting")
notplaceable "$waiting" | fold -s -w 150 | sed 's/^/    /'; echo

# --- a job without the IMEX channel is refused at admission, with its fix
job no-channel none >"$tmp/no-channel.json"
set +e; kc create -f "$tmp/no-channel.json" >/dev/null 2>"$tmp/no-channel.err"; set -e
check "a Job without a channel claim is created (its pods are what is refused)" \
  eventually 30 "*FailedCreate*" kc -n train get events --field-selector involvedObject.name=no-channel -o jsonpath='{.items[*].reason}'
kc -n train get events --field-selector involvedObject.name=no-channel,reason=FailedCreate -o jsonpath='{.items[0].message}' >"$tmp/no-channel.msg"
sed 's/^/    /' "$tmp/no-channel.msg"; echo
check "its pods are denied naming the ResourceClaimTemplate to add" grep -q "ResourceClaimTemplate" "$tmp/no-channel.msg"
check "and NCCL's init failure it avoids" grep -q "IMEX channel" "$tmp/no-channel.msg"

# --- a fabric that turns unhealthy: the node is not validated, and says why
recording 17 425 >"$tmp/nvl-17-unhealthy.json"
check "nvl-17's agent reports a GPU with degraded bandwidth" \
  quiet agent_once nvl-17 "$tmp/nvl-17-unhealthy.json"
check "nvl-17 is no longer validated" eventually 60 false validated nvl-17
kc describe gtr nvl-17 >"$tmp/describe-17"
check "kubectl describe gtr says which GPU and what" grep -q "FabricUnhealthy" "$tmp/describe-17"
kc get gtr nvl-17 -o jsonpath='{.status.conditions[?(@.type=="NVLinkDomain")].message}' >"$tmp/condition-17"
sed 's/^/    /' "$tmp/condition-17"; echo
check "the NVLinkDomain condition names the GPU and its fault" grep -q "degraded bandwidth" "$tmp/condition-17"

finish
