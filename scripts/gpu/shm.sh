#!/usr/bin/env bash
# Runs on the device machine (see pack.sh): the /dev/shm grid of tests/shm with the
# host's torch and CUDA (the pin_memory cases too): every case under the size the webhook
# computes (must finish), then the peaks under a roomy /dev/shm into $OUT. Where no tmpfs
# can be mounted, only the peaks, measured on the host's /dev/shm.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
grid=(python3 tests/shm/shm_grid.py .devcarry/podshaper-webhook --python "$(command -v python3)" --cuda)
nproc; nvidia-smi -L
rc=0
if unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1M probe /dev/shm' 2>/dev/null; then
  "${grid[@]}" || rc=$?
  "${grid[@]}" --bench --json "${OUT:?}/shm-gpu-host.json" || rc=$?
else
  echo "shm.sh: no tmpfs can be mounted here: peaks on the host's /dev/shm only" >&2
  "${grid[@]}" --bench --no-mount --json "${OUT:?}/shm-gpu-host.json" || rc=$?
fi
exit $rc
