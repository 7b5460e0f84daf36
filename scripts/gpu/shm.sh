#!/usr/bin/env bash
# Runs on the device machine (see pack.sh): the /dev/shm grid of tests/shm with the
# host's torch and CUDA (the pin_memory cases too): first every case under the size the
# webhook computes (must finish), then the peaks under a roomy /dev/shm.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=$(command -v python3)
nproc; nvidia-smi -L
python3 tests/shm/shm_grid.py .devcarry/podshaper-webhook --python "$py" --cuda
python3 tests/shm/shm_grid.py .devcarry/podshaper-webhook --python "$py" --cuda --bench --json "${OUT:?}/shm-gpu-host.json" ||
  python3 tests/shm/shm_grid.py .devcarry/podshaper-webhook --python "$py" --cuda --bench --no-mount --json "$OUT/shm-gpu-host.json"
