#!/usr/bin/env bash
# Packs the agent and the webhook for the device machine: build/bin/podshaper-agent,
# build/bin/podshaper-webhook and every shared library they link that is not part of a
# base glibc, into .devcarry/ (git-ignored). Then: device run with carry [".devcarry"] and
# `bash scripts/gpu/capture.sh` (the agent), `bash scripts/gpu/shm.sh` (the /dev/shm grid) or, on
# 2 GPUs, `bash scripts/gpu/nccl_shm.sh` (NCCL's /dev/shm by transport, and real DDP jobs).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .devcarry && mkdir -p .devcarry/lib
for name in podshaper-agent podshaper-webhook; do
  bin=build/bin/$name
  [[ -x $bin ]] || { echo "pack.sh: $bin is missing; run make build first" >&2; exit 1; }
  cp "$bin" .devcarry/ && strip --strip-debug ".devcarry/$name"
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
      *) cp -L "$lib" .devcarry/lib/ ;;
    esac
  done
done
mkdir -p "$(git rev-parse --git-dir)/info"
exclude="$(git rev-parse --git-dir)/info/exclude"
grep -qx "/.devcarry/" "$exclude" 2>/dev/null || echo "/.devcarry/" >> "$exclude"
du -sh .devcarry
