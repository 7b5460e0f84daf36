#!/usr/bin/env bash
# helm for podshaper's chart (charts/podshaper/), built from the Go module proxy at the
# release pinned in tests/helm/go.mod, into build/tools/helm. The binary is cached per
# go.mod/go.sum in ~/.cache/podshaper/, so a second run (even from a fresh clone) only
# links it into place.
#
#   scripts/helm.sh                   build helm if needed; print its path
#   scripts/helm.sh sync-crds         copy the CRDs of crds/ (the single source) into charts/podshaper/crds/
#   scripts/helm.sh template-default  the chart rendered as kustomize's install (-n podshaper-system,
#                                     createNamespace=true), CRDs included: what `kubectl kustomize
#                                     manifests/` gives (tests/install/chart_test.sh)
#   scripts/helm.sh ARGS...           helm ARGS... (lint charts/podshaper, template ..., version)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module=$root/tests/helm
out=${PODSHAPER_HELM_BIN:-$root/build/tools}

helm_version=$(grep -oE 'helm\.sh/helm/v3 v[0-9][^ ]*' "$module/go.mod" | cut -d' ' -f2)
# The Kubernetes version helm assumes without a cluster (.Capabilities.KubeVersion, lint's
# deprecation check): that of its client-go, as helm's own Makefile sets it.
k8s_minor=$(grep -oE 'k8s\.io/client-go v0\.[0-9]+' "$module/go.mod" | cut -d. -f3)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
done
[[ -n $helm_version && -n $k8s_minor ]] || { echo "helm: no helm.sh/helm/v3 or k8s.io/client-go version in $module/go.mod" >&2; exit 1; }
stamp=$( { cat "$module/go.mod" "$module/go.sum"; echo "$ldflags"; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/helm-$stamp

build() {
  [[ -x $cache/helm ]] && return
  local go=go
  command -v go >/dev/null || go=/usr/local/go/bin/go
  command -v "$go" >/dev/null || { echo "helm: go is not installed" >&2; exit 1; }
  echo "helm: building helm $helm_version from the Go module proxy (cold: about two minutes on two cores)" >&2
  local tmp=$cache.tmp.$$
  mkdir -p "$tmp"
  # The module proxy does not serve the checksum database here; go.sum, committed, pins
  # every module's hash instead.
  (cd "$module" &&
    GOSUMDB=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0 \
      "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm) ||
    { rm -rf "$tmp"; exit 1; }
  # Another build may have finished first: either result is the same binary.
  mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
}

place() {
  build
  mkdir -p "$out"
  [[ $out/helm -ef $cache/helm ]] || ln -f "$cache/helm" "$out/helm" 2>/dev/null || cp -f "$cache/helm" "$out/helm"
}

case ${1:-} in
  "" | path)
    place
    echo "$out/helm"
    ;;
  sync-crds)
    # Every CRD of crds/ (not its kustomization.yaml: Helm would install it as an object),
    # and none that crds/ no longer has.
    dst=$root/charts/podshaper/crds
    mkdir -p "$dst"
    rm -f "$dst"/*.yaml
    for f in "$root"/crds/*.yaml; do
      [[ $(basename "$f") == kustomization.yaml ]] || cp "$f" "$dst/"
    done
    echo "helm: charts/podshaper/crds/ now holds: $(cd "$dst" && echo *.yaml)" >&2
    ;;
  template-default)
    place
    exec "$out/helm" template podshaper "$root/charts/podshaper" --namespace podshaper-system --include-crds \
      --set createNamespace=true
    ;;
  *)
    place
    exec "$out/helm" "$@"
    ;;
esac
