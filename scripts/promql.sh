#!/usr/bin/env bash
# promql-check (tests/promql/): Prometheus' own PromQL parser over podshaper's alert rules,
# built from the Go module proxy at the release pinned in tests/promql/go.mod. Cached per
# go.mod/go.sum in ~/.cache/podshaper/, like scripts/helm.sh.
#
#   scripts/promql.sh              build it if needed; print its path
#   scripts/promql.sh FILE...      check the rule files (exit 1 naming each rule that does not parse)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
module=$root/tests/promql
stamp=$(cat "$module/go.mod" "$module/go.sum" "$module/main.go" | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/promql-$stamp

if [[ ! -x $cache/promql-check ]]; then
  go=go
  command -v go >/dev/null || go=/usr/local/go/bin/go
  command -v "$go" >/dev/null || { echo "promql: go is not installed" >&2; exit 1; }
  echo "promql: building promql-check from the Go module proxy (cold: about a minute)" >&2
  tmp=$cache.tmp.$$
  mkdir -p "$tmp"
  (cd "$module" &&
    GOSUMDB=off GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0 \
      "$go" build -trimpath -ldflags "-s -w" -o "$tmp/promql-check" .) ||
    { rm -rf "$tmp"; exit 1; }
  mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
fi
if [[ $# -eq 0 ]]; then echo "$cache/promql-check"; else exec "$cache/promql-check" "$@"; fi
