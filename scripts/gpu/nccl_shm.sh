#!/usr/bin/env bash
# Runs on the device machine (see pack.sh), a host of 2 or more GPUs, as root: what NCCL
# puts in /dev/shm per rank per communicator by transport, and real 2-rank DDP jobs with a
# DataLoader inside a /dev/shm of exactly the size `podshaper-webhook review` computes
# (scripts/gpu/nccl_shm.py says how). Everything into $OUT, for docs/hardware/<host>/:
# nccl-shm.json, nccl-shm.md, and nccl-logs.tar.gz (the raw NCCL_DEBUG=INFO logs).
#   bash scripts/gpu/nccl_shm.sh [--jobs-only]
set -uo pipefail
cd "$(dirname "$0")/../.."
# NVLink multicast stays off on these shared hosts, in every program started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi -L
nvidia-smi topo -m
(( gpus >= 2 )) || { echo "nccl_shm.sh: needs 2 GPUs, this host has $gpus" >&2; exit 1; }
python3 -c 'import torch; print("torch", torch.__version__, "NCCL", torch.cuda.nccl.version())'
out=$(mktemp -d)
rc=0
PYTHONUNBUFFERED=1 python3 scripts/gpu/nccl_shm.py run .devcarry/podshaper-webhook "$out" --gpus 2 "$@" || rc=$?
cp "$out"/nccl-shm.json "$out"/nccl-shm.md "${OUT:?}/" 2>/dev/null
tar -C "$out" -czf "$OUT/nccl-logs.tar.gz" logs
exit $rc
