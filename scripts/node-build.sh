#!/usr/bin/env bash
# Builds what the real test node runs besides kubelet (scripts/controlplane-build.sh
# builds kubelet with the control plane): containerd, ctr and containerd-shim-runc-v2
# at the release pinned below, from the Go module proxy, and the node's test plugins
# (tests/node: the NRI ulimit plugin and the test GPU device plugin), into build/node/.
# Cached in ~/.cache/podshaper/ per pinned version and per tests/node's sources, so a
# second run (even from a fresh clone) only links them. runc and the CNI plugins come
# from Debian's packages (scripts/deps.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${PODSHAPER_NODE_BIN:-$root/build/node}
containerd_version=v2.4.2
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper
export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "node-build: go is not installed" >&2; exit 1; }
# The module proxy does not serve the checksum database here: tests/node/go.sum pins
# its modules, and containerd is taken at its tag (its go.mod has no replace lines).
export GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

containerd_cache=$cache_root/containerd-$containerd_version
if [[ ! -x $containerd_cache/containerd-shim-runc-v2 ]]; then
  echo "node-build: building containerd $containerd_version (about a minute)" >&2
  rm -rf "$containerd_cache.tmp"; mkdir -p "$containerd_cache.tmp"
  ldflags="-X github.com/containerd/containerd/v2/version.Version=$containerd_version"
  ldflags+=" -X github.com/containerd/containerd/v2/version.Revision=proxy-$containerd_version"
  GOBIN=$containerd_cache.tmp go install -trimpath -tags "urfave_cli_no_docs no_btrfs" -ldflags "$ldflags" \
    "github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
    "github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
  GOBIN=$containerd_cache.tmp go install -trimpath -tags "urfave_cli_no_docs no_btrfs no_grpc" -ldflags "$ldflags" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version"
  rm -rf "$containerd_cache"
  mv "$containerd_cache.tmp" "$containerd_cache"
fi

module=$root/tests/node
stamp=$(cd "$module" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
  sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
plugins_cache=$cache_root/node-plugins-$stamp
if [[ ! -x $plugins_cache/podshaper-nri-ulimit || ! -x $plugins_cache/podshaper-test-deviceplugin ]]; then
  echo "node-build: building tests/node (the NRI ulimit plugin, the test device plugin)" >&2
  rm -rf "$plugins_cache.tmp"; mkdir -p "$plugins_cache.tmp"
  (cd "$module" && GOFLAGS="$GOFLAGS -mod=readonly" go build -trimpath -o "$plugins_cache.tmp/" ./cmd/...)
  rm -rf "$plugins_cache"
  mv "$plugins_cache.tmp" "$plugins_cache"
fi

mkdir -p "$out"
for f in "$containerd_cache"/* "$plugins_cache"/*; do
  b=$(basename "$f")
  [[ $out/$b -ef $f ]] || ln -f "$f" "$out/$b" 2>/dev/null || cp -f "$f" "$out/$b"
done
echo "node-build: ready in $out" >&2
