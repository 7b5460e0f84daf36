#!/usr/bin/env bash
# Packs the agent for the device machine: build/bin/podshaper-agent and every shared
# library it links that is not part of a base glibc, into .devcarry/ (git-ignored).
# Then: device run with carry [".devcarry"] and `bash scripts/gpu/capture.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/bin/podshaper-agent
[[ -x $bin ]] || { echo "pack.sh: $bin is missing; run make build first" >&2; exit 1; }
rm -rf .devcarry && mkdir -p .devcarry/lib
cp "$bin" .devcarry/ && strip --strip-debug .devcarry/podshaper-agent
ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" .devcarry/lib/ ;;
  esac
done
mkdir -p "$(git rev-parse --git-dir)/info"
exclude="$(git rev-parse --git-dir)/info/exclude"
grep -qx "/.devcarry/" "$exclude" 2>/dev/null || echo "/.devcarry/" >> "$exclude"
du -sh .devcarry
