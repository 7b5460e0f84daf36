#!/usr/bin/env bash
# Prints a List of GPU Node objects, one per topology fixture in tests/fixtures/topologies/:
# nvidia.com/gpu capacity from the `nvidia-smi topo -m` matrix, CPUs from its CPU
# affinity, memory from the instance type, and a Ready condition. No kubelet runs;
# the scheduler binds pods to these nodes and that is the point.
#
# --dra: instead, the DeviceClass gpu.nvidia.com and one ResourceSlice per GPU node, as
# NVIDIA's DRA driver publishes them (pool = node name, devices gpu-0..gpu-N-1 with
# type, uuid, productName, index and memory), so the scheduler can allocate GPUs to
# resource claims on these nodes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python3 - "$root/tests/fixtures/topologies" "${1:-}" <<'PY'
import hashlib, json, os, re, sys

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

# Product names and memory as nvidia-smi gives them for the fixtures' GPUs.
PRODUCTS = {"H100": ("NVIDIA H100 80GB HBM3", "80Gi"), "A100": ("NVIDIA A100-SXM4-40GB", "40Gi"),
            "L40S": ("NVIDIA L40S", "48Gi")}

def device_class():
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression":
                "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}

def resource_slice(n):
    name = n["metadata"]["name"]
    product, memory = PRODUCTS.get(n["metadata"]["labels"]["nvidia.com/gpu.product"], ("NVIDIA GPU", "80Gi"))
    devices = []
    for i in range(int(n["status"]["allocatable"]["nvidia.com/gpu"])):
        uuid = hashlib.sha1(f"{name}/{i}".encode()).hexdigest()
        devices.append({"name": f"gpu-{i}", "attributes": {
            "type": {"string": "gpu"}, "index": {"int": i}, "minor": {"int": i}, "productName": {"string": product},
            "uuid": {"string": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}"}},
            "capacity": {"memory": {"value": memory}}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}

docs = [node(os.path.join(sys.argv[1], f)) for f in sorted(os.listdir(sys.argv[1])) if f.endswith(".topo-m.txt")]
if sys.argv[2] == "--dra":
    docs = [device_class()] + [resource_slice(n) for n in docs]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1))
PY
