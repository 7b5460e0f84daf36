#!/usr/bin/env bash
# Builds the benchmark's Go tools from tests/bench (module podshaper.io/bench) into
# build/bin/: peer-webhook (the controller-runtime peer of podshaper-webhook),
# podshaper-loadgen (the AdmissionReview load generator) and podshaper-podcreate (pod
# creates through a real API server, timed). Binaries are cached per hash
# of the module's go.mod, go.sum and sources in ~/.cache/podshaper/, so a second run
# (even from a fresh clone) only copies them. Prints the paths.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module=$root/tests/bench
out=${PODSHAPER_BENCH_BIN:-$root/build/bin}
stamp=$(cd "$module" && cat go.mod go.sum $(find peerwebhook loadgen podcreate -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/bench-$stamp
binaries=(peer-webhook podshaper-loadgen podshaper-podcreate)
export PATH=$PATH:/usr/local/go/bin

have_all() { for b in "${binaries[@]}"; do [[ -x $1/$b ]] || return 1; done; }

if ! have_all "$cache"; then
  command -v go >/dev/null || { echo "bench: go is not installed" >&2; exit 1; }
  echo "bench: building ${binaries[*]} (controller-runtime $(grep -o 'sigs.k8s.io/controller-runtime v[0-9.]*' "$module/go.mod" | cut -d' ' -f2))" >&2
  rm -rf "$cache.tmp"
  mkdir -p "$cache.tmp"
  # The module proxy does not serve the checksum database here; go.sum, committed,
  # pins every module's hash instead.
  export GOSUMDB=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  (cd "$module" &&
    go build -trimpath -o "$cache.tmp/peer-webhook" ./peerwebhook &&
    go build -trimpath -o "$cache.tmp/podshaper-loadgen" ./loadgen &&
    go build -trimpath -o "$cache.tmp/podshaper-podcreate" ./podcreate)
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
fi
mkdir -p "$out"
for b in "${binaries[@]}"; do
  [[ $out/$b -ef $cache/$b ]] || ln -f "$cache/$b" "$out/$b" 2>/dev/null || cp -f "$cache/$b" "$out/$b"
  echo "$out/$b"
done
