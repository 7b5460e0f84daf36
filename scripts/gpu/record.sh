#!/usr/bin/env bash
# Runs on the device machine (see pack.sh): what NVML, CUDA and sysfs answer
# (podshaper-agent record) beside the probe that read the same answers, for
# docs/hardware/<machine>/gpu-recording.json and probe-recorded.json, which the unit
# tests replay (tests/unit/agent/nvml_backend_test.cc). Then the replay is compared
# with the live probe here, so a recording that misses an answer shows at once.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
agent=.devcarry/podshaper-agent
out=${OUT:?}
nvidia-smi -L | tee "$out/nvidia-smi-L.txt"
nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt"
$agent record --output "$out/gpu-recording.json" || echo "record failed: $?"
$agent probe --format json > "$out/probe-recorded.json" 2> "$out/probe-recorded.err"
$agent probe --recording "$out/gpu-recording.json" --format json > "$out/probe-replayed.json" 2>> "$out/probe-recorded.err"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
live = json.load(open(f"{out}/probe-recorded.json"))
replayed = json.load(open(f"{out}/probe-replayed.json"))
for key in ("gpus", "pairs"):
    print(key, "same" if live[key] == replayed[key] else "DIFFERENT")
for key in ("driverVersion", "cudaVersion"):
    print(key, live["host"][key], replayed["host"][key])
PY
cat "$out/nvidia-smi-topo-m.txt" "$out/probe-recorded.err"
