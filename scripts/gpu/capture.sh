#!/usr/bin/env bash
# Runs on the device machine (see pack.sh): the agent's probe beside nvidia-smi's own
# matrices and a torch copy, every output into $OUT for docs/hardware/<host>/.
set -uo pipefail
cd "$(dirname "$0")/../.."
# NVLink multicast stays off on these shared hosts, in every program started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
agent=.devcarry/podshaper-agent
out=$(mktemp -d)
nvidia-smi -L
nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt"
nvidia-smi nvlink --status -i 0 > "$out/nvidia-smi-nvlink-status-gpu0.txt"
for m in r w a n; do nvidia-smi topo -p2p $m > "$out/nvidia-smi-topo-p2p-$m.txt"; done
# Two runs of each: the first pays for the driver's start, the second is what a
# DaemonSet sees on its next interval.
for i in 1 2; do
  { time $agent probe --format json > "$out/probe.json" 2> "$out/probe.err"; } 2> "$out/probe-time-$i.txt"
done
for i in 1 2; do
  { time $agent probe --format table --measure-bandwidth > "$out/probe-table-bandwidth.txt" 2>> "$out/probe.err"; } 2>> "$out/probe-table-bandwidth.txt"
done
$agent probe --format json --measure-bandwidth > "$out/probe-bandwidth.json" 2>> "$out/probe.err"
# What NVML, CUDA and sysfs answered, beside the probe that read it: the unit tests replay
# the one against the other (scripts/gpu/record.sh does this step alone).
$agent record --output "$out/gpu-recording.json" 2>> "$out/probe.err"
$agent probe --format json > "$out/probe-recorded.json" 2>> "$out/probe.err"
python3 scripts/gpu/torch_copy.py > "$out/torch-copy.txt" 2>&1
tail -n +1 "$out"/nvidia-smi-topo-m.txt "$out"/nvidia-smi-topo-p2p-r.txt "$out"/probe-table-bandwidth.txt \
  "$out"/probe-time-*.txt "$out"/torch-copy.txt "$out"/probe.err
# The device tool returns at most 8 files: everything travels as one tar.
tar -C "$out" -cf "${OUT:?}/capture.tar" .
