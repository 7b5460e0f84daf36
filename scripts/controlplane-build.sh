#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubelet (for
# the real test node, scripts/node.sh) and kubectl (what every script and test calls)
# from the Go module proxy at the release pinned in tests/controlplane/go.mod, into
# build/controlplane/. PODSHAPER_CONTROLPLANE_MODULE and PODSHAPER_CONTROLPLANE_BIN pick
# another pinned release and where it goes (tests/controlplane-v1.35 → build/controlplane-v1.35).
# Binaries are cached per go.sum in ~/.cache/podshaper/, so a second run (even from a
# fresh clone) only copies them; one started while another builds the same release waits
# for it (a lock beside the cache), saying so. Built without symbol table and DWARF
# (-s -w: the test cluster's binaries are not debugged; panics still name functions),
# which links faster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module=${PODSHAPER_CONTROLPLANE_MODULE:-$root/tests/controlplane}
out=${PODSHAPER_CONTROLPLANE_BIN:-$root/build/controlplane}
stamp=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/controlplane-$stamp
binaries=(etcd kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl)
export PATH=$PATH:/usr/local/go/bin

# The release's own version in the binaries (a module build would say v0.0.0-master, and
# the Node would report that as its kubeletVersion).
version_ldflags() {
  local v; v=$(grep -o 'k8s.io/kubernetes v[0-9.]*' "$module/go.mod" | cut -d' ' -f2)
  local minor=${v#v*.}; minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  echo "-X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

have_all() { for b in "${binaries[@]}"; do [[ -x $1/$b ]] || return 1; done; }
release=$(grep -o 'k8s.io/kubernetes v[0-9.]*' "$module/go.mod" | cut -d' ' -f2)

if ! have_all "$cache"; then
  mkdir -p "$(dirname "$cache")"
  exec 9>"$cache.lock"
  if ! flock -n 9; then
    echo "controlplane: waiting for another build of Kubernetes $release to finish (lock: $cache.lock)" >&2
    flock 9
  fi
fi
if ! have_all "$cache"; then
  command -v go >/dev/null || { echo "controlplane: go is not installed" >&2; exit 1; }
  echo "controlplane: building ${binaries[*]} (Kubernetes $release); a cold build takes several minutes" >&2
  mkdir -p "$cache.tmp"
  # The module proxy does not serve the checksum database here; go.sum, committed,
  # pins every module's hash instead.
  export GOSUMDB=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  (cd "$module" &&
    go build -trimpath -ldflags "-s -w" -o "$cache.tmp/etcd" go.etcd.io/etcd/server/v3 &&
    go build -trimpath -ldflags "-s -w $(version_ldflags)" -o "$cache.tmp/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
fi
mkdir -p "$out"
for b in "${binaries[@]}"; do
  [[ $out/$b -ef $cache/$b ]] || ln -f "$cache/$b" "$out/$b" 2>/dev/null || cp -f "$cache/$b" "$out/$b"
done
echo "controlplane: ready in $out" >&2
