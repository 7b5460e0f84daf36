#!/usr/bin/env bash
# End-to-end: podshaper-webhook behind a real kube-apiserver, pods placed by the real
# kube-scheduler, everything checked with the real kubectl.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-cluster}
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
bin=${PODSHAPER_BIN:-$root/build/bin}/podshaper-webhook
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  if [[ $rc -ne 0 || $failures -gt 0 ]]; then  # what CI needs to see
    for f in "$PODSHAPER_CLUSTER_DIR"/logs/*.log; do echo "--- $f"; tail -30 "$f"; done
  fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# A cluster left by a killed run is not reused.
bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
bash "$root/scripts/cluster.sh" up

# A training pod manifest: NAME NAMESPACE GPUS [extra labels json]
pod() {
  python3 - "$@" <<'PY'
import json, sys
name, ns, gpus = sys.argv[1], sys.argv[2], sys.argv[3]
labels = {"podshaper.io/inject": "true", "app": "e2e"}
if len(sys.argv) > 4: labels = json.loads(sys.argv[4])
res = {"nvidia.com/gpu": gpus, "memory": "64Gi", "cpu": "8"}
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": name, "namespace": ns, "labels": labels,
    "annotations": {"podshaper.io/dataloader-workers": "8", "podshaper.io/prefetch-factor": "4",
                    "podshaper.io/batch-shape": "32x3x224x224", "podshaper.io/batch-dtype": "float32"}},
  "spec": {"containers": [{"name": "trainer", "image": "pytorch:2", "resources": {"limits": res, "requests": res}}],
           "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}))
PY
}
namespace() {  # namespace NAME [label=value ...]
  local name=$1; shift
  kc create namespace "$name" >/dev/null
  [[ $# -gt 0 ]] && kc label namespace "$name" "$@" >/dev/null
  for _ in $(seq 150); do kc -n "$name" get serviceaccount default >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "namespace $name: no default service account after 30s" >&2
  return 1
}

# --- 1. shaped exactly as the offline review says; unlabelled pods untouched
namespace ml
pod trainer-0 ml 8 > "$tmp/trainer-0.json"
kc create -f "$tmp/trainer-0.json" >/dev/null 2>"$tmp/warnings"
kc -n ml get pod trainer-0 -o json > "$tmp/stored.json"
kc get namespaces,nodes -o json > "$tmp/cluster.json"
python3 -c '
import json, sys
pod = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
  "uid": "e2e", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "ml",
  "operation": "CREATE", "object": pod}}))' "$tmp/trainer-0.json" > "$tmp/review.json"
"$bin" review --cluster "$tmp/cluster.json" --output pod < "$tmp/review.json" > "$tmp/offline.json" 2>/dev/null
projection='
import json, sys
def shaped(p):
    c = p["spec"]["containers"][0]
    return {
      "annotations": {k: v for k, v in p["metadata"]["annotations"].items() if "podshaper.io/" in k or "ulimits." in k},
      "labels": p["metadata"]["labels"], "hostIPC": p["spec"].get("hostIPC"), "affinity": p["spec"].get("affinity"),
      "volumes": [v for v in p["spec"].get("volumes", []) if v["name"] == "podshaper-dshm"],
      "resources": c["resources"], "capabilities": c.get("securityContext", {}).get("capabilities"),
      "env": c.get("env"), "mounts": [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]}
a, b = (shaped(json.load(open(f))) for f in sys.argv[1:3])
if a != b:
    print(json.dumps(a, indent=1, sort_keys=True)); print(json.dumps(b, indent=1, sort_keys=True)); sys.exit(1)
'
check "the API server stores the pod exactly as review shapes it" python3 -c "$projection" "$tmp/stored.json" "$tmp/offline.json"
# review -f: the pod's manifest and the cluster's objects in one input decide as the webhook did.
first_item='import json, sys; print(json.dumps(json.load(sys.stdin)["items"][0]))'
"$bin" review -f "$tmp/trainer-0.json" -f "$tmp/cluster.json" -o json 2>/dev/null | python3 -c "$first_item" > "$tmp/offline-f.json"
check "... and as review -f shapes it with the Namespaces and Nodes in its input" \
  python3 -c "$projection" "$tmp/stored.json" "$tmp/offline-f.json"
check "shm is 8231Mi (no validated P2P yet: the NCCL reserve counts on its SHM transport)" \
  test "$(kc -n ml get pod trainer-0 -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')" = 8231Mi
check "hostIPC is set" test "$(kc -n ml get pod trainer-0 -o jsonpath='{.spec.hostIPC}')" = true
check "kubectl shows the webhook's warnings" grep -q "Warning: podshaper: no node carries podshaper.io/topology-validated yet" "$tmp/warnings"
check "kubectl describe shows the explanation" bash -c "kubectl --kubeconfig $kubeconfig -n ml describe pod trainer-0 | grep -A1 'podshaper.io/shm-formula' | grep -q '8 ranks × ((8 workers × prefetch 4 + 2 held'"

pod plain ml 8 '{"app":"e2e"}' | kc create -f - >/dev/null
check "a pod without the opt-in label is untouched" \
  test -z "$(kc -n ml get pod plain -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}{.spec.hostIPC}')"

set +e; pod bad ml 8 | sed 's/"float32"/"fp8"/' | kc create -f - 2>"$tmp/err" >/dev/null; rc=$?; set -e
check "a bad annotation is refused" test $rc -ne 0
check "with a message that says what to change" grep -q 'denied the request: podshaper: annotation podshaper.io/batch-dtype: unknown dtype "fp8"' "$tmp/err"

# The API server checks its 256 KiB annotation limit after the mutating webhooks: a pod with
# room for its own annotations but not for podshaper's is refused by podshaper, in its words,
# not by the API server for what podshaper added.
set +e
pod full ml 8 | python3 -c '
import json, sys
p = json.load(sys.stdin)
p["metadata"]["annotations"]["example.com/model-card"] = "x" * (256 * 1024 - 600)
print(json.dumps(p))' | kc create -f - 2>"$tmp/err" >/dev/null; rc=$?
set -e
check "a pod whose annotations leave no room for podshaper's is refused" test $rc -ne 0
check "by podshaper, naming its annotations and the API server's limit" \
  grep -q "denied the request: podshaper: the annotations podshaper adds (podshaper.io/shm-formula .*above the API server's limit of 256Ki" "$tmp/err"

# --- 2. Pod Security baseline: a clear denial
namespace restricted-ml pod-security.kubernetes.io/enforce=baseline
pod t restricted-ml 8 > "$tmp/t.json"
# The webhook learns the label through its watch: wait until its own denial comes.
until_ok 30 bash -c "kubectl --kubeconfig $kubeconfig create --dry-run=server -f $tmp/t.json 2>&1 | grep -q 'enforces Pod Security level'" || true
set +e; kc create -f "$tmp/t.json" 2>"$tmp/err" >/dev/null; rc=$?; set -e
check "a baseline namespace refuses the pod" test $rc -ne 0
check "naming the namespace label to change" grep -q 'label the namespace pod-security.kubernetes.io/enforce=privileged' "$tmp/err"

# --- 3. placement by the real scheduler
bound() { kc -n "$1" get pod "$2" -o jsonpath='{.spec.nodeName}'; }
wait_bound() { for _ in $(seq 100); do [[ -n $(bound "$1" "$2") ]] && return 0; sleep 0.2; done; return 1; }
# No kubelet confirms a bound pod's end: delete with no grace period.
kc -n ml delete pod --all --grace-period=0 --force >/dev/null 2>&1
namespace jobs
pod big-0 jobs 8 | kc create -f - >/dev/null
pod big-1 jobs 8 | kc create -f - >/dev/null
check "first 8-GPU pod is bound" wait_bound jobs big-0
check "second 8-GPU pod is bound" wait_bound jobs big-1
check "to two different nodes (the 8-GPU ones)" test "$(bound jobs big-0)" != "$(bound jobs big-1)"
big_shm=$(kc -n jobs get pod big-0 -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')
kc -n jobs get pod big-0 -o json > "$tmp/big-0.json"
kc -n jobs delete pod --all --grace-period=0 --force >/dev/null 2>&1

# Pods made by a controller: an Indexed Job of two 8-GPU workers, the opt-in label in its
# pod template. The job controller creates the pods; each is shaped as its twin made by
# hand, and they land one per node.
pod worker jobs 8 | python3 -c '
import json, sys
pod = json.load(sys.stdin)
template = {"metadata": {k: pod["metadata"][k] for k in ("labels", "annotations")},
            "spec": dict(pod["spec"], restartPolicy="Never")}
print(json.dumps({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "jobs"},
                  "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
                           "template": template}}))' | kc create -f - >/dev/null
job_pods() { kc -n jobs get pods -l batch.kubernetes.io/job-name=train -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
check "the job controller makes both pods" until_ok 30 test "$(job_pods | grep -c .)" = 2
for p in $(job_pods); do
  check "job pod $p has the /dev/shm of its twin ($big_shm)" \
    test "$(kc -n jobs get pod "$p" -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')" = "$big_shm"
  check "job pod $p has hostIPC and the shm volume" test "$(kc -n jobs get pod "$p" \
    -o jsonpath='{.spec.hostIPC} {.spec.volumes[?(@.name=="podshaper-dshm")].emptyDir.medium}')" = "true Memory"
  check "job pod $p is bound" wait_bound jobs "$p"
done
check "one job pod per node" test "$(for p in $(job_pods); do bound jobs "$p"; echo; done | grep . | sort -u | wc -l)" = 2
kc -n jobs delete job train --cascade=orphan >/dev/null
kc -n jobs delete pod --all --grace-period=0 --force >/dev/null 2>&1

# GPUs through DRA: the GPU nodes publish their GPUs as NVIDIA's DRA driver does; a
# pod asks 8 through a ResourceClaimTemplate (no nvidia.com/gpu). The webhook shapes it
# as its nvidia.com/gpu twin, the resourceclaim controller makes its claim, and the
# scheduler allocates 8 GPUs of one node: two such pods land on two nodes.
bash "$root/scripts/gpu-nodes.sh" --dra | kc apply -f - >/dev/null
namespace dra
kc apply -f - >/dev/null <<'YAML'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight-gpus, namespace: dra}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, count: 8}
YAML
dra_pod() {  # dra_pod NAME TEMPLATE: the twin's manifest, its GPUs from a claim
  pod "$1" dra 8 | python3 -c '
import json, sys
pod = json.load(sys.stdin)
c = pod["spec"]["containers"][0]
for f in ("limits", "requests"): del c["resources"][f]["nvidia.com/gpu"]
c["resources"]["claims"] = [{"name": "gpus"}]
pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": sys.argv[1]}]
print(json.dumps(pod))' "$2"
}
# Created at once after its template: the webhook reads what its watch has not seen yet.
dra_pod dra-0 eight-gpus | kc create -f - >/dev/null
dra_pod dra-1 eight-gpus | kc create -f - >/dev/null
kc -n dra get pod dra-0 -o json > "$tmp/dra-0.json"
dra_pod dra-0 eight-gpus > "$tmp/dra-0-manifest.json"
kc get namespaces,nodes,resourceclaimtemplates -A -o json > "$tmp/dra-cluster.json"
"$bin" review -f "$tmp/dra-0-manifest.json" -f "$tmp/dra-cluster.json" -o json 2>/dev/null | python3 -c "$first_item" > "$tmp/dra-0-offline.json"
check "review -f with the DRA pod, its ResourceClaimTemplate and the Nodes in one input decides as the webhook did" \
  python3 -c "$projection" "$tmp/dra-0.json" "$tmp/dra-0-offline.json"
check "a DRA pod is shaped as its nvidia.com/gpu twin (shm, memory, hostIPC, IPC_LOCK, memlock, placement)" python3 -c '
import json, sys
def shaped(p):
    c = p["spec"]["containers"][0]
    res = {f: {k: v for k, v in c["resources"].get(f, {}).items() if k != "nvidia.com/gpu"} for f in ("limits", "requests")}
    return {
      # (the warnings name the GPUs as each pod asks them)
      "annotations": {k.replace("shaped-by", ""): v for k, v in p["metadata"]["annotations"].items()
                      if ("podshaper.io/" in k or "ulimits." in k) and k != "podshaper.io/warnings"},
      "hostIPC": p["spec"].get("hostIPC"), "affinity": p["spec"].get("affinity"),
      "volumes": [v for v in p["spec"].get("volumes", []) if v["name"] == "podshaper-dshm"],
      "resources": res, "capabilities": c.get("securityContext", {}).get("capabilities"), "env": c.get("env"),
      "mounts": [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]}
a, b = (shaped(json.load(open(f))) for f in sys.argv[1:3])
if a != b:
    print(json.dumps(a, indent=1, sort_keys=True)); print(json.dumps(b, indent=1, sort_keys=True)); sys.exit(1)
' "$tmp/dra-0.json" "$tmp/big-0.json"
check "the DRA pod has the /dev/shm of its twin ($big_shm)"   test "$(kc -n dra get pod dra-0 -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}')" = "$big_shm"
check "the first DRA pod is bound" wait_bound dra dra-0
check "the second DRA pod is bound" wait_bound dra dra-1
check "to two different nodes" test "$(bound dra dra-0)" != "$(bound dra dra-1)"
claim_of() { kc -n dra get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
for p in dra-0 dra-1; do
  check "$p: its claim holds 8 GPUs of the node it is bound to" bash -c "
    kubectl --kubeconfig $kubeconfig -n dra get resourceclaim $(claim_of $p) -o json | python3 -c '
import json, sys
r = json.load(sys.stdin)[\"status\"][\"allocation\"][\"devices\"][\"results\"]
assert len(r) == 8 and {d[\"pool\"] for d in r} == {sys.argv[1]}, r' $(bound dra $p)"
done
set +e; dra_pod dra-missing no-such-template | kc create -f - 2>"$tmp/err" >/dev/null; rc=$?; set -e
check "a pod naming a template that does not exist is refused" test $rc -ne 0
check "naming it" grep -q 'ResourceClaimTemplate "no-such-template" (spec.resourceClaims\["gpus"\]) was not found in namespace "dra"' "$tmp/err"
kc -n dra delete pod --all --grace-period=0 --force >/dev/null 2>&1

# Four 4-GPU node-exclusive pods on 8+8+4 GPUs: resources alone would fit two on an
# 8-GPU node; the anti-affinity keeps one per node, so the fourth waits.
namespace quad
for i in 0 1 2 3; do pod quad-$i quad 4 | kc create -f - >/dev/null; done
quad_bound() { for i in 0 1 2 3; do bound quad quad-$i; echo; done | grep -c . || true; }
check "three of four 4-GPU exclusive pods are bound" until_ok 30 test "$(quad_bound)" -ge 3
sleep 2  # the scheduler retries the fourth; it must stay unbound
check "exactly three" test "$(quad_bound)" = 3
check "each on its own node" test "$(for i in 0 1 2 3; do bound quad quad-$i; echo; done | grep . | sort -u | wc -l)" = 3
pending=$(for i in 0 1 2 3; do [[ -z $(bound quad quad-$i) ]] && echo quad-$i; done | head -1)
event=""
for _ in $(seq 100); do
  event=$(kc -n quad get events --field-selector "involvedObject.name=$pending,reason=FailedScheduling" -o jsonpath='{.items[*].message}')
  [[ -n $event ]] && break; sleep 0.2
done
echo "scheduler on $pending: $event"
check "the pending one has a scheduler event that names the anti-affinity" contains "$event" "didn't match pod anti-affinity rules"

# --- 4. webhook down, failurePolicy Fail
webhook_pid=$(cat "$PODSHAPER_CLUSTER_DIR/pids/podshaper-webhook.pid")
kill "$webhook_pid"
for _ in $(seq 50); do kill -0 "$webhook_pid" 2>/dev/null || break; sleep 0.1; done
set +e; pod down-0 ml 8 | kc create -f - 2>"$tmp/err" >/dev/null; rc=$?; set -e
check "with the webhook down an opted-in pod is refused" test $rc -ne 0
check "with a clear message" grep -q 'failed calling webhook "pods.podshaper.io"' "$tmp/err"
namespace other
check "a pod without the label is not affected" kc -n other run web --image=nginx --restart=Never
check "nor are other kinds" kc -n other create configmap c --from-literal=a=b
namespace optout podshaper.io/inject=disabled
pod skipped optout 8 > "$tmp/skipped.json"
check "nor opted-in pods of a namespace labelled podshaper.io/inject=disabled" kc create -f "$tmp/skipped.json"
bash "$root/scripts/cluster.sh" restart-webhook
pod again ml 8 > "$tmp/again.json"
check "restarted, it shapes again" test -n "$(kc create -f "$tmp/again.json" -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}' 2>/dev/null)"
finish
