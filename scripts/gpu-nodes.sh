#!/usr/bin/env bash
# Prints a List of GPU Node objects, one per topology fixture in tests/fixtures/topologies/:
# nvidia.com/gpu capacity from the `nvidia-smi topo -m` matrix, CPUs from its CPU
# affinity, memory from the instance type, and a Ready condition. No kubelet runs;
# the scheduler binds pods to these nodes and that is the point.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python3 - "$root/tests/fixtures/topologies" <<'PY'
import json, os, re, sys

# Memory of the instance types the fixtures were captured on (public specifications).
MEMORY_GIB = {"p5.48xlarge": 2048, "p4d.24xlarge": 1152, "g6e.12xlarge": 384}

def node(path):
    base = os.path.basename(path)
    instance = base.split("-")[0]
    gpu = re.search(r"-(\d+)x([A-Za-z0-9]+)-", base)
    rows = [l for l in open(path) if re.match(r"^GPU\d+\s", l)]
    cpus = 0
    for r in rows:
        for part in re.findall(r"(\d+)-(\d+)", r.split("\t")[-3] if "\t" in r else r):
            cpus = max(cpus, int(part[1]) + 1)
    name = instance.replace(".", "-") + "-" + gpu.group(2).lower() + "-0"
    mem = f"{MEMORY_GIB.get(instance, 1024)}Gi"
    resources = {"cpu": str(cpus or 96), "memory": mem, "nvidia.com/gpu": str(len(rows)),
                 "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": instance,
            "nvidia.com/gpu.product": gpu.group(2), "nvidia.com/gpu.count": str(len(rows))},
            "annotations": {"podshaper.io/topology-fixture": base}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "fake GPU node for podshaper's tests (no kubelet)"}]},
    }

docs = [node(os.path.join(sys.argv[1], f)) for f in sorted(os.listdir(sys.argv[1])) if f.endswith(".topo-m.txt")]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1))
PY
