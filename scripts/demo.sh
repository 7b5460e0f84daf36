#!/usr/bin/env bash
# make demo: a real control plane and a real node, podshaper installed on them as a cluster
# admin installs it (its images in the node's runtime, kubectl apply -k), a training job
# submitted with kubectl, and what podshaper did to it, for a person to read.
set -euo pipefail
shopt -s extglob
root=$(cd "$(dirname "$0")/.." && pwd)
# kubectl built with the control plane (scripts/controlplane-build.sh), not the machine's.
export PATH=$root/build/controlplane:$PATH
dir=${PODSHAPER_CLUSTER_DIR:-$root/.cluster}
kubeconfig=$dir/kubeconfig
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ns=podshaper-system
t0=$SECONDS
# told WHAT CMD...: what the demo tells is true (CMD succeeds); else it is listed at the end
# and the demo fails (.ci/run runs make demo before make test, as README's newcomer does).
untrue=()
told() { local what=$1; shift; "$@" >/dev/null 2>&1 || untrue+=("$what"); }

say "A control plane on loopback and one real node (scripts/cluster.sh, scripts/node.sh), podshaper not yet installed"
# A fresh one each time: the install below is what an admin does on a cluster without podshaper.
# The one an earlier demo left, or any other of this checkout's (one real node per machine),
# is stopped first, a line each.
bash "$root/scripts/cluster.sh" down-all 2>&1 | sed 's/^/  /'
PODSHAPER_WITH_NODE=yes PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no bash "$root/scripts/cluster.sh" up 2>&1 | sed 's/^/  /'

say "Installing podshaper as README says: its images into the node's containerd, kubectl apply -k"
# scripts/cluster.sh install: images.sh --from-build, node.sh load, kubectl apply -k crds/,
# kubectl apply -k examples/real-node/install/ (manifests/ with what this machine's node
# needs: memlock 4Mi, the agent's fake GPU backend fed by a 4×H200 capture, every pod on
# the real node), then every rollout.
bash "$root/scripts/cluster.sh" install 2>&1 | sed 's/^/  /'
kc -n $ns get pods -o wide | cut -c1-120 | sed 's/^/  /'

say "GPU nodes: three Node objects from tests/fixtures/topologies (no kubelet: they show placement) and one real node"
kc get nodes -o custom-columns='NODE:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu,MEMORY:.status.allocatable.memory,TYPE:.metadata.labels.node\.kubernetes\.io/instance-type'

say "podshaper-agent on each node writes its GPUTopologyReport (fake backend: captured nvidia-smi output)"
agent=${PODSHAPER_BIN:-$root/build/bin}/podshaper-agent
fx=$root/tests/fixtures
report() {  # report NODE TOPO P2P
  "$agent" run --once --node "$1" --fixture "$fx/topologies/$2" --p2p-fixture "$fx/p2p/$3" --kubeconfig "$kubeconfig" \
    2>/dev/null
  echo "  $1: $2 + $3"
}
report p5-48xlarge-h100-0 p5.48xlarge-8xH100-nv18.topo-m.txt 8gpu-all-ok.p2p-r.txt
report p4d-24xlarge-a100-0 p4d.24xlarge-8xA100-nv12.topo-m.txt 8gpu-all-ok.p2p-r.txt
# Two PCIe switches without P2P between them: this node fails the default TopologyPolicy.
report g6e-12xlarge-l40s-0 g6e.12xlarge-4xL40S-pcie-node.topo-m.txt 4gpu-ns.p2p-r.txt
# The real node's agent is the installed DaemonSet's pod; its memlock-probe container asks
# 4 MiB through NRI (this machine cannot grant more; see docs/real-node.md).
echo "  real-h200x4-0: by its podshaper-agent pod (tests/fixtures/captures/h200x4-nv18.topo-m-and-p2p-r.txt, memlock probed)"

say "podshaper-operator (installed, leader of 2 replicas) judges them against TopologyPolicy default"
for _ in $(seq 300); do
  [[ $(kc get nodes -l podshaper.io/topology-validated -o name | wc -l) -eq 4 ]] && break
  sleep 0.2
done
kc get gtr | sed 's/^/  /'

say "kubectl describe gtr g6e-12xlarge-l40s-0 (the failing node, in plain words)"
for _ in $(seq 50); do
  kc get events --field-selector involvedObject.name=g6e-12xlarge-l40s-0 -o name | grep -q . && break; sleep 0.2
done
kc describe gtr g6e-12xlarge-l40s-0 | sed -n '/^Status:/,$p' | sed 's/^/  /'

say "Node labels the webhook places pods by"
kc get nodes -L podshaper.io/topology-validated -L podshaper.io/gpu-count -L podshaper.io/interconnect \
  -L podshaper.io/p2p -L podshaper.io/memlock | sed 's/^/  /'

say "Submitting examples/training-job.yaml (2 pods × 8 GPUs, DataLoader annotations)"
# A second run starts over. No kubelet confirms a bound pod's end: no grace period.
kc -n ml-demo delete pod --all --grace-period=0 --force >/dev/null 2>&1 || true
# The namespace first: pods need its default service account, made a moment later.
kc create namespace ml-demo >/dev/null 2>&1 || true
for _ in $(seq 150); do kc -n ml-demo get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
kc apply -f "$root/examples/training-job.yaml" 2>&1 | grep -v last-applied-configuration | sed 's/^/  /'
for _ in $(seq 100); do
  [[ $(kc -n ml-demo get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .) -eq 2 ]] && break
  sleep 0.2
done

say "What the webhook wrote into resnet50-0"
kc -n ml-demo get pod resnet50-0 -o json > "$dir/demo-pod.json"
python3 - "$dir/demo-pod.json" <<'PY'
import json, re, sys
p = json.load(open(sys.argv[1]))
a = p["metadata"]["annotations"]
c = p["spec"]["containers"][0]
ulimit = [k for k in a if k.startswith("ulimits.")]
print("  /dev/shm         " + a["podshaper.io/shm-size"] + " (emptyDir medium Memory, volume podshaper-dshm)")
print("  formula          " + a["podshaper.io/shm-formula"].replace("; ", "\n                   "))
print("  memory limit     100Gi -> " + c["resources"]["limits"]["memory"] + " (pays for /dev/shm, which counts against it)")
print("  hostIPC          " + str(p["spec"].get("hostIPC")))
print("  capabilities     add " + ", ".join(c["securityContext"]["capabilities"]["add"]))
soft = re.search(r"soft: (\d+)", a[ulimit[0]]) if ulimit else None
limit = "unlimited" if soft and soft[1] == "18446744073709551615" else (soft[1] + " bytes" if soft else "?")
print("  memlock          " + (ulimit[0] + ": RLIMIT_MEMLOCK " + limit + " (NRI ulimit-adjuster)" if ulimit else "runtime default"))
print("  env              " + ", ".join(e["name"] + "=" + e.get("value", "") for e in c.get("env", [])))
print("  placement        label podshaper.io/placement=node-exclusive, required anti-affinity per hostname")
print("  shaped-by        " + a["podshaper.io/shaped-by"])
PY

told "the two training pods are shaped (podshaper.io/shm-size) and bound to two nodes" \
  test "$(kc -n ml-demo get pods -o jsonpath='{range .items[*]}{.metadata.annotations.podshaper\.io/shm-size} {.spec.nodeName}{"\n"}{end}' |
          awk '$1 ~ /Mi$/ && $2 != "" {print $2}' | sort -u | wc -l)" = 2

say "Where kube-scheduler bound each pod (one training pod per node)"
kc -n ml-demo get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,GPUS:.spec.containers[0].resources.limits.nvidia\.com/gpu,SHM:.metadata.annotations.podshaper\.io/shm-size'
echo "  (those 8-GPU nodes have no kubelet: the pods stay Pending there; the real node runs pods below)"

say "kubectl describe pod resnet50-0 (podshaper's part)"
kc -n ml-demo describe pod resnet50-0 | sed -n '/^Node:/p;/^Annotations:/,/^Status:/p;/^Events:/,$p' | sed 's/^/  /'

say "A pod with a bad annotation is refused, with what to change"
bad=$(sed -n '/^---$/,$p' "$root/examples/training-job.yaml" | sed -n '2,/^---$/p' | sed '$d' |
  sed 's/resnet50-0/resnet50-bad/; s/float32/fp8/' | kc apply -f - 2>&1) || true
sed 's/^/  /' <<<"$bad"
told "the pod with batch-dtype fp8 is refused, naming the annotation" grep -q "denied.*podshaper.io/batch-dtype" <<<"$bad"

kc delete namespace ml-demo --wait=false >/dev/null 2>&1 || true

say "On the real node: what a container gets, with and without podshaper (examples/real-node/pods.yaml)"
examples=$root/examples/real-node
kc delete namespace ml --wait=true --timeout=60s >/dev/null 2>&1 || true
kc create namespace ml >/dev/null
kc label namespace ml pod-security.kubernetes.io/enforce=privileged >/dev/null
for _ in $(seq 150); do kc -n ml get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
kc -n ml create configmap podshaper-examples --from-file "$examples/container_facts.py" --from-file "$examples/dataloader.py" >/dev/null
kc apply -f "$examples/pods.yaml" 2>&1 | grep -v '^namespace/\|last-applied-configuration' | sed 's/^/  /'
done_() { [[ $(kc -n ml get pod "$1" -o jsonpath='{.status.phase}') == @(Succeeded|Failed) ]]; }
for p in inspect-shaped inspect-nonroot inspect-unshaped dataloader-unshaped; do
  for _ in $(seq 600); do done_ "$p" && break; sleep 0.5; done
done
for p in inspect-shaped inspect-nonroot inspect-unshaped; do kc -n ml logs "$p" >"$dir/demo-$p.log" 2>&1 || true; done
python3 - "$dir" <<'PY'
import os, sys
d = sys.argv[1]
def read(p):
    out = {}
    for line in open(os.path.join(d, f"demo-{p}.log")):
        if "=" in line: k, v = line.rstrip("\n").split("=", 1); out[k] = v
    return out
pods = ["inspect-shaped", "inspect-nonroot", "inspect-unshaped"]
vals = {p: read(p) for p in pods}
host_ipc = os.readlink("/proc/self/ns/ipc")
def mib(v): return f"{int(v) / 1048576:.0f} MiB" if v and v.isdigit() else (v or "?")
rows = [("/dev/shm size (statfs)", lambda v: mib(v.get("shm_bytes"))),
        ("a write into /dev/shm stops at", lambda v: mib(v.get("shm_written")) + " (" + v.get("shm_write_error", "?") + ")"),
        ("memory cgroup limit", lambda v: mib(v.get("memory_limit"))),
        ("uid", lambda v: v.get("uid", "?")),
        ("CAP_IPC_LOCK effective", lambda v: v.get("cap_ipc_lock", "?")),
        ("RLIMIT_MEMLOCK", lambda v: mib(v.get("memlock_hard"))),
        ("mlock 64 MiB", lambda v: v.get("mlock_64mib", "?")),
        ("IPC namespace", lambda v: "host's" if v.get("ipc_ns") == host_ipc else "its own"),
        ("PET_NPROC_PER_NODE", lambda v: v.get("pet_nproc", "?"))]
print("  %-32s %-18s %-18s %-18s" % ("", *pods))
for name, f in rows:
    print("  %-32s %-18s %-18s %-18s" % (name, *(f(vals[p]) for p in pods)))
PY

say "The seed's failure, for real: a PyTorch DataLoader (2 workers x prefetch 4, 32x3x224x224 float32)"
echo "  unshaped (64 MiB /dev/shm), exit code $(kc -n ml get pod dataloader-unshaped -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}'):"
kc -n ml logs dataloader-unshaped 2>&1 | grep -aE "^torch|Bus error|shared memory|training" | cut -c1-150 | sed 's/^/    /'
kc apply -f "$examples/training.yaml" >/dev/null 2>&1
for _ in $(seq 600); do done_ dataloader-shaped && break; sleep 0.5; done
echo "  shaped (examples/real-node/training.yaml: 4 GPUs, node-exclusive, /dev/shm $(kc -n ml get pod dataloader-shaped -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}'), bound to $(kc -n ml get pod dataloader-shaped -o jsonpath='{.spec.nodeName}') by kube-scheduler), $(kc -n ml get pod dataloader-shaped -o jsonpath='{.status.phase}'):"
kc -n ml logs dataloader-shaped 2>&1 | sed 's/^/    /'
say "A shaped pod explains itself (examples/real-node/explain.yaml)"
kc apply -f "$examples/explain.yaml" >/dev/null 2>&1
for _ in $(seq 600); do done_ dataloader-undersized && break; sleep 0.5; done
echo "  dataloader-undersized: told batches of 4x3x224x224, it makes 32x3x224x224; /dev/shm $(kc -n ml get pod dataloader-undersized -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}'), $(kc -n ml get pod dataloader-undersized -o jsonpath='{.status.phase}'):"
kc -n ml logs dataloader-undersized 2>&1 | grep -aE "Bus error|shared memory|training" | cut -c1-150 | sed 's/^/    /' || true
undersized_event() { kc -n ml describe pod dataloader-undersized 2>/dev/null | grep -a ShmExhausted; }
for _ in $(seq 60); do undersized_event >/dev/null && break; sleep 0.5; done
echo "  kubectl -n ml describe pod dataloader-undersized (its Events):"
undersized_event | sed 's/^ *//' | fold -s -w 140 | sed 's/^/    /' || true
told "the undersized DataLoader died and its pod says why (ShmExhausted)" undersized_event
shm=$(kc -n ml get pod inspect-shaped -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size}' 2>/dev/null) || true
shm_bytes="(podshaper.io/shm-size ${shm:-missing})"
[[ $shm =~ ^([0-9]+)Mi$ ]] && shm_bytes=$(( BASH_REMATCH[1] << 20 ))
[[ $shm =~ ^([0-9]+)Gi$ ]] && shm_bytes=$(( BASH_REMATCH[1] << 30 ))
told "inspect-shaped's /dev/shm is its ${shm:-?} (statfs)" \
  test "$(sed -n 's/^shm_bytes=//p' "$dir/demo-inspect-shaped.log")" = "$shm_bytes"
told "inspect-unshaped's /dev/shm is the runtime's 64 MiB" \
  test "$(sed -n 's/^shm_bytes=//p' "$dir/demo-inspect-unshaped.log")" = $((64 << 20))
unshaped_died() {  # (the log read whole first: grep -q would end kubectl with SIGPIPE, a failed pipe)
  [[ $(kc -n ml get pod dataloader-unshaped -o jsonpath='{.status.phase}') == Failed ]] &&
    grep -aqi 'bus error' <<<"$(kc -n ml logs dataloader-unshaped 2>&1)"
}
told "the unshaped DataLoader failed of a Bus error" unshaped_died
told "the shaped DataLoader succeeded" test "$(kc -n ml get pod dataloader-shaped -o jsonpath='{.status.phase}')" = Succeeded

say "The next run sized from what the last one used (examples/real-node/shm-profile.yaml, Job shm-oversized)"
# Its first document: a Job declaring batches 4x what it writes. podshaper-shm measures its
# run, the operator keeps the peak in its ShmProfile, and the Job created again is sized from it.
oversized() { awk '/^---$/ {exit} {print}' "$examples/shm-profile.yaml" | kc apply -f - >/dev/null 2>&1; }
oversized_done() { [[ $(kc -n ml get job shm-oversized -o jsonpath='{.status.succeeded}' 2>/dev/null) == 1 ]]; }
oversized_pod() { kc -n ml get pods -l job-name=shm-oversized -o jsonpath="{.items[0].metadata.annotations.podshaper\.io/$1}" 2>/dev/null; }
profiled() { [[ -n $(kc -n ml get shmprofile job.shm-oversized -o jsonpath='{.status.recommended}' 2>/dev/null) ]]; }
oversized
for _ in $(seq 240); do oversized_done && break; sleep 0.5; done
echo "  run 1: /dev/shm $(oversized_pod shm-size) by the formula; its measured run in kubectl -n ml get shmprofiles:"
for _ in $(seq 120); do profiled && break; sleep 0.5; done
kc -n ml get shmprofiles 2>&1 | sed 's/^/    /'
kc -n ml delete job shm-oversized --cascade=foreground --wait >/dev/null 2>&1
oversized
for _ in $(seq 240); do [[ -n $(oversized_pod shm-size) ]] && break; sleep 0.5; done
echo "  run 2, the Job created again under the same name: /dev/shm $(oversized_pod shm-size)"
oversized_pod shm-formula | cut -c1-400 | fold -s -w 140 | sed 's/^/    /'; echo
told "the Job's second run was sized from its first run's measured peak" grep -q '^measured: ' <<<"$(oversized_pod shm-formula)"

say "Explore"
cat <<TXT
  export KUBECONFIG=$kubeconfig
  kubectl -n ml get pods -o wide; kubectl -n ml logs inspect-shaped
  kubectl -n ml get pod dataloader-shaped -o yaml     # a shaped pod that ran
  kubectl -n ml describe pod too-big; kubectl -n ml describe job nccl-shm   # pods that explain themselves
  kubectl -n ml get shmprofiles; kubectl -n ml describe shmprofile job.shm-oversized   # sizing from measured use
  kubectl describe node real-h200x4-0; less $dir/node/logs/kubelet.log
  kubectl get mutatingwebhookconfiguration podshaper -o yaml
  kubectl -n podshaper-system logs deploy/podshaper-webhook; kubectl -n podshaper-system get pods -o wide
  kubectl get gtr; kubectl describe gtr p5-48xlarge-h100-0; kubectl get topologypolicies
  kubectl -n podshaper-system logs deploy/podshaper-operator   # the installed operator (one leads)

  make cluster-down     # stops everything this started (make test stops it too, first)
TXT
if [[ ${#untrue[@]} -gt 0 ]]; then
  printf 'demo: error: not as told: %s\n' "${untrue[@]}" >&2
  echo "demo: the cluster is left up to look at (logs: $dir/logs/, $dir/node/logs/)" >&2
  exit 1
fi
echo "  (demo: done in $((SECONDS - t0)) s; the cluster stays up)"
