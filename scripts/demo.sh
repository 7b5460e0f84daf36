#!/usr/bin/env bash
# make demo: a real control plane with podshaper-webhook, a 2-pod training job submitted
# with kubectl, and what podshaper did to it, for a person to read.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${PODSHAPER_CLUSTER_DIR:-$root/.cluster}
kubeconfig=$dir/kubeconfig
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "GPU nodes (Node objects from tests/fixtures/topologies; no kubelet runs)"
kc get nodes -L node.kubernetes.io/instance-type -L nvidia.com/gpu.product \
  -o custom-columns='NODE:.metadata.name,GPUS:.status.allocatable.nvidia\.com/gpu,MEMORY:.status.allocatable.memory,TYPE:.metadata.labels.node\.kubernetes\.io/instance-type'

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

say "podshaper-operator judges them against TopologyPolicy default"
bash "$root/scripts/cluster.sh" start-operator 2>&1 | sed 's/^/  /'
for _ in $(seq 100); do
  [[ $(kc get nodes -l podshaper.io/topology-validated -o name | wc -l) -eq 3 ]] && break
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
kc apply -f "$root/examples/training-job.yaml" 2>&1 | sed 's/^/  /'
for _ in $(seq 100); do
  [[ $(kc -n ml-demo get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .) -eq 2 ]] && break
  sleep 0.2
done

say "What the webhook wrote into resnet50-0"
kc -n ml-demo get pod resnet50-0 -o json > "$dir/demo-pod.json"
python3 - "$dir/demo-pod.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
a = p["metadata"]["annotations"]
c = p["spec"]["containers"][0]
ulimit = [k for k in a if k.startswith("ulimits.")]
print("  /dev/shm         " + a["podshaper.io/shm-size"] + " (emptyDir medium Memory, volume podshaper-dshm)")
print("  formula          " + a["podshaper.io/shm-formula"].replace("; ", "\n                   "))
print("  memory limit     100Gi -> " + c["resources"]["limits"]["memory"] + " (pays for /dev/shm, which counts against it)")
print("  hostIPC          " + str(p["spec"].get("hostIPC")))
print("  capabilities     add " + ", ".join(c["securityContext"]["capabilities"]["add"]))
print("  memlock          " + (ulimit[0] + ": RLIMIT_MEMLOCK unlimited (NRI ulimit-adjuster)" if ulimit else "runtime default"))
print("  env              " + ", ".join(e["name"] + "=" + e.get("value", "") for e in c.get("env", [])))
print("  placement        label podshaper.io/placement=node-exclusive, required anti-affinity per hostname")
print("  shaped-by        " + a["podshaper.io/shaped-by"])
PY

say "Where kube-scheduler bound each pod (one training pod per node)"
kc -n ml-demo get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,GPUS:.spec.containers[0].resources.limits.nvidia\.com/gpu,SHM:.metadata.annotations.podshaper\.io/shm-size'

say "kubectl describe pod resnet50-0 (podshaper's part)"
kc -n ml-demo describe pod resnet50-0 | sed -n '/^Node:/p;/^Annotations:/,/^Status:/p;/^Events:/,$p' | sed 's/^/  /'

say "A pod with a bad annotation is refused, with what to change"
sed -n '/^---$/,$p' "$root/examples/training-job.yaml" | sed -n '2,/^---$/p' | sed '$d' |
  sed 's/resnet50-0/resnet50-bad/; s/float32/fp8/' | kc apply -f - 2>&1 | sed 's/^/  /' || true

say "Explore"
cat <<TXT
  export KUBECONFIG=$kubeconfig
  kubectl -n ml-demo get pods -o wide
  kubectl -n ml-demo get pod resnet50-0 -o yaml        # the shaped pod
  kubectl get mutatingwebhookconfiguration podshaper -o yaml
  less $dir/logs/podshaper-webhook.log
  kubectl get gtr; kubectl describe gtr p5-48xlarge-h100-0; kubectl get topologypolicies
  less $dir/logs/podshaper-operator.log

  make cluster-down     # stops everything this started
TXT
