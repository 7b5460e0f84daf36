#!/usr/bin/env bash
# Builds the container images podshaper-webhook, podshaper-operator, podshaper-agent
# and podshaper-shm (tag: the project version, 0.1.0) from images/Dockerfile with the
# local Docker engine. There is no image registry: the build stage starts from
# podshaper-base:<release>, a minimal Debian made here with debootstrap from the
# host's apt mirror and `docker import`ed. Its tarball is cached in
# ~/.cache/podshaper/images/, so a fresh clone (or an engine that lost its images)
# only imports it; the engine's layer cache makes an unchanged rebuild take seconds.
#
# Environment: PODSHAPER_IMAGE_TAG (default: the version in CMakeLists.txt),
# PODSHAPER_IMAGE_RELEASE (default: the host's Debian codename, else bookworm),
# PODSHAPER_APT_MIRROR (default: the host's Debian mirror, else deb.debian.org).
#
#   --from-build [BINDIR]  the same four images from binaries already built on this host
#                 (default build/bin, what `make build` tested), each laid out by
#                 images/rootfs.sh here: no base image, no compile in Docker; seconds.
#                 The end-to-end tests install these on the real node (scripts/node.sh).
#
#   --build-stage  the build stage only (podshaper-build:<tag>, the compile): what .ci/run
#                 builds early, so that the images test finds it in the layer cache.
# PODSHAPER_IMAGE_CPU_SHARES: the builds' CPU weight (docker build --cpu-shares; 1024
# is a process's): .ci/run gives its early build 2, so that it takes the cores only
# while nothing else wants them. Two runs at once: the second waits for the first
# (a lock in the cache), then finds its layers cached.
#
# For other scripts (scripts/node-images.sh) that build on the same base:
#   --base-only   make and import podshaper-base:<release> only; print its name on stdout
#   --base-stamp  print the base's stamp (a hash of its recipe) on stdout; no Docker, no build
set -euo pipefail
mode=all
case ${1:-} in
  "") ;;
  --base-only) mode=base ;;
  --build-stage) mode=build-stage ;;
  --base-stamp) mode=stamp ;;
  --from-build)
    mode=prebuilt
    # BINDIR as the caller meant it (relative to where it was run), before the cd below.
    bindir=${2:-$(dirname "$0")/../build/bin}
    [[ -d $bindir ]] || { echo "images: $bindir: no such directory (run make build)" >&2; exit 2; }
    bindir=$(cd "$bindir" && pwd) ;;
  *) echo "usage: $0 [--from-build [BINDIR] | --build-stage | --base-only | --base-stamp]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { echo "images: $*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }

version=$(sed -n 's/^project(podshaper VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
tag=${PODSHAPER_IMAGE_TAG:-$version}
host_id=$(. /etc/os-release && echo "${ID:-}")
host_codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [[ $host_id == debian && -n $host_codename ]]; then
  release=${PODSHAPER_IMAGE_RELEASE:-$host_codename}
else
  release=${PODSHAPER_IMAGE_RELEASE:-bookworm}
fi
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/images
log=$cache/build.log
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)

# The Debian mirror the host's apt uses for $release (deb822 or one-line sources).
host_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v rel="$release" '
      /^[[:space:]]*$/ { if (uri != "" && hit) { print uri; exit } uri = ""; hit = 0; next }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == rel) hit = 1 }
      END { if (uri != "" && hit) print uri }' "$f" | head -n1
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    awk -v rel="$release" '$1 == "deb" { for (i = 2; i < NF; i++) if ($i ~ /^[a-z]+:\/\// && $(i+1) == rel) print $i }' "$f"
  done
}
mirror=${PODSHAPER_APT_MIRROR:-$(host_mirror | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}

# The images from this host's binaries: the final stages of images/Dockerfile, with the
# root file systems laid out here by the same images/rootfs.sh.
from_build() { # BINDIR
  local bindir=$1 b ctx out t=$(now)
  bash "$root/scripts/docker-up.sh" || die "no Docker engine answers (docker info failed)"
  docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
  for b in webhook operator agent shm; do
    [[ -x $bindir/podshaper-$b ]] || die "$bindir/podshaper-$b is missing: run make build"
    user=65532:65532
    [[ $b != shm ]] || user=0:0  # docs/shm.md: root, with two capabilities and nothing else
    ctx=$(mktemp -d)
    bash "$root/images/rootfs.sh" "$bindir/podshaper-$b" "$ctx/rootfs" >/dev/null || { rm -rf "$ctx"; die "rootfs.sh failed for podshaper-$b"; }
    cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
LABEL io.podshaper.images="1" org.opencontainers.image.title="podshaper-$b"
COPY rootfs/ /
USER $user
ENTRYPOINT ["/usr/local/bin/podshaper-$b"]
DOCKERFILE
    if ! out=$(docker build --force-rm -q -t "podshaper-$b:$tag" "$ctx" 2>&1); then
      rm -rf "$ctx"; echo "$out" >&2; die "docker build of podshaper-$b:$tag failed"
    fi
    rm -rf "$ctx"
    # Its earlier builds that lost the tag (only its own: other builds may be running).
    docker image prune -f --filter "label=org.opencontainers.image.title=podshaper-$b" >/dev/null 2>&1 || true
  done
  say "podshaper-{webhook,operator,agent,shm}:$tag from $bindir in $(($(now) - t)) s"
}
if [[ $mode == prebuilt ]]; then
  from_build "$bindir"
  exit 0
fi

base=podshaper-base:$release
base_recipe=2 # bump when make_base_tar below changes what goes into the tarball
base_stamp=$(printf '%s\n' "$release" "$arch" "$mirror" "$base_recipe" | sha256sum | cut -c1-16)
base_tar=$cache/debian-$release-$arch-minbase-$base_stamp.tar
if [[ $mode == stamp ]]; then
  echo "$base_stamp"
  exit 0
fi

bash "$root/scripts/docker-up.sh" || die "no Docker engine answers (docker info failed)"
mkdir -p "$cache"

# debootstrap --variant=minbase into a scratch folder, point its apt at the host's
# sources, tar it into the cache.
make_base_tar() {
  local rootfs=$cache/rootfs-$base_stamp
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 || {
      "${sudo_cmd[@]}" apt-get update -qq
      DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
  fi
  cleanup_rootfs() {
    # debootstrap mounts /proc and /sys inside the target; never recurse into a mount.
    local m
    for m in $(findmnt -rn -o TARGET 2>/dev/null | grep "^$rootfs/" | sort -r); do
      "${sudo_cmd[@]}" umount -l "$m" 2>/dev/null || true
    done
    "${sudo_cmd[@]}" rm -rf --one-file-system "$rootfs"
  }
  cleanup_rootfs
  trap cleanup_rootfs EXIT
  say "debootstrap --variant=minbase $release ($arch) from $mirror (log: $log)"
  if ! "${sudo_cmd[@]}" debootstrap --variant=minbase --arch="$arch" --components=main \
      "$release" "$rootfs" "$mirror" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "debootstrap failed"
  fi
  # The host's sources for this release (updates and security too) when it is the
  # same Debian release, so that the build stage gets the host's package versions.
  if [[ $host_id == debian && $host_codename == "$release" && -f /etc/apt/sources.list.d/debian.sources ]]; then
    "${sudo_cmd[@]}" cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/debian.sources"
    "${sudo_cmd[@]}" rm -f "$rootfs/etc/apt/sources.list"
  fi
  # A snapshot mirror serves Release files past their Valid-Until: follow the host.
  if apt-config dump 2>/dev/null | grep -q '^Acquire::Check-Valid-Until "false"'; then
    echo 'Acquire::Check-Valid-Until "false";' | "${sudo_cmd[@]}" tee "$rootfs/etc/apt/apt.conf.d/99podshaper-mirror" >/dev/null
  fi
  "${sudo_cmd[@]}" rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/log/* "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  "${sudo_cmd[@]}" tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
  "${sudo_cmd[@]}" chown "$(id -u):$(id -g)" "$base_tar.tmp"
  mv "$base_tar.tmp" "$base_tar"
  cleanup_rootfs
  trap - EXIT
}

image_label() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }

# One run at a time makes the base (two would debootstrap into the same folder) and one
# builds the images (two would compile the same layers): a second waits, then finds them.
lock() { # FD WHAT (FD open on the lock file)
  flock -n "$1" || { say "waiting for another scripts/images.sh to finish $2"; flock "$1"; }
}

start=$(now)
exec 8>"$cache/.base.lock"
lock 8 "the base image"
: >"$log"
if [[ $(image_label "$base" io.podshaper.base-stamp) != "$base_stamp" ]]; then
  if [[ ! -f $base_tar ]]; then
    t=$(now)
    make_base_tar
    say "base tarball made in $(($(now) - t)) s: $base_tar"
  fi
  t=$(now)
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL io.podshaper.base-stamp=$base_stamp io.podshaper.images=1" \
    "$base_tar" "$base" >/dev/null
  say "imported $base in $(($(now) - t)) s"
fi
exec 8>&-
if [[ $mode == base ]]; then
  echo "$base"
  exit 0
fi

# The build context: src/ (the root CMakeLists.txt and every directory it adds, but
# tests/, which the build stage replaces with an empty one) and images/, taken once so
# that all four builds see the same sources even while someone edits them. Fixed
# owners and modes, so that a fresh clone hits the engine's layer cache.
mapfile -t source_dirs < <(sed -n 's/^[[:space:]]*add_subdirectory(\([^ )]*\).*/\1/p' CMakeLists.txt | grep -vx tests)
context=$(mktemp "$cache/context.XXXXXX.tar")
trap 'rm -f "$context"' EXIT
tar_opts=(-C "$root" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0
  --mode='u+rwX,go+rX,go-w' --exclude='*.swp' --exclude='*~')
tar "${tar_opts[@]}" --transform='s,^,src/,S' -cf "$context" CMakeLists.txt "${source_dirs[@]}"
tar "${tar_opts[@]}" -rf "$context" images
# podshaper-shm is Go: built here with the host's toolchain (Debian's golang is older than
# its NRI SDK needs), static, and laid out by the shm stage like the others.
shm_bin=$(mktemp -d)
trap 'rm -f "$context"; rm -rf "$shm_bin"' EXIT
(cd shm && GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
  go build -trimpath -ldflags "-s -w" -o "$shm_bin/shm-bin/podshaper-shm" ./cmd/podshaper-shm) ||
  die "go build of podshaper-shm failed"
touch -d @0 "$shm_bin/shm-bin/podshaper-shm" "$shm_bin/shm-bin"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$shm_bin" -rf "$context" shm-bin

# This engine (20.10, no buildx) has only the legacy builder; say so, rather than have
# a newer client look for BuildKit.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
weight=()
[[ -z ${PODSHAPER_IMAGE_CPU_SHARES:-} ]] || weight=(--cpu-shares "$PODSHAPER_IMAGE_CPU_SHARES")
exec 9>"$cache/.build.lock"
lock 9 "its build"

build() { # TARGET IMAGE
  local t
  t=$(now)
  if ! docker build --force-rm --network host "${weight[@]}" --build-arg "BASE_IMAGE=$base" \
      -f images/Dockerfile --target "$1" -t "$2" - <"$context" >>"$log" 2>&1; then
    tail -n 60 "$log" >&2
    die "docker build --target $1 failed (log: $log)"
  fi
  say "built $2 in $(($(now) - t)) s"
}

# The build stage gets a tag of its own, so that neither `docker image prune` nor a
# later build of ours drops the layers a rebuild reuses.
if ! docker image inspect "podshaper-build:$tag" >/dev/null 2>&1; then
  say "building the build stage (cold: apt, then the compile; several minutes)"
fi
build build "podshaper-build:$tag"
[[ $mode != build-stage ]] || exit 0
for b in webhook operator agent shm; do
  build "$b" "podshaper-$b:$tag"
done
# Earlier builds' images of ours that lost their tag.
docker image prune -f --filter label=io.podshaper.images=1 >/dev/null 2>&1 || true

for b in webhook operator agent shm; do
  size=$(docker image inspect -f '{{.Size}}' "podshaper-$b:$tag")
  awk -v n="podshaper-$b:$tag" -v s="$size" 'BEGIN { printf "images: %-28s %6.1f MB\n", n, s / 1e6 }'
done
say "done in $(($(now) - start)) s"
