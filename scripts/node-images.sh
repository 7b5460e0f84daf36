#!/usr/bin/env bash
# Builds the three images the test node's pods run (there is no image registry) and
# writes each one as a `docker save` tarball for `ctr -n k8s.io images import`:
#
#   podshaper.test/pause:1    the sandbox image: /pause (images/node/pause.c, static)
#   podshaper.test/busybox:1  busybox-static, its applets in /bin, root/1000/nobody
#   podshaper.test/torch:1    podshaper-base + Debian's python3, python3-torch, numpy
#
# Recipes: images/node/<name>.Dockerfile (+ pause.c), on podshaper-base:<release>,
# which `scripts/images.sh --base-only` makes (debootstrap, cached tarball) and imports.
# Tarballs: ${XDG_CACHE_HOME:-~/.cache}/podshaper/node-images/<name>-<stamp>.tar, the
# stamp a hash of the image's recipe files, the base's stamp and this script's recipe
# number. A tarball of the current stamp is never rebuilt (not even when the Docker
# engine lost the image); those of older stamps are removed.
#
# Output (stdout, one line per image, in this order; logs go to stderr):
#   IMAGE TARBALL
# Usage:
#   scripts/node-images.sh          build what is missing, then print the lines
#   scripts/node-images.sh --list   print the lines without building; exit 1, printing
#                                   nothing on stdout, if any tarball is missing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
say() { echo "node-images: $*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }

mode=build
case ${1:-} in
  "") ;;
  --list) mode=list ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--list]" >&2; exit 2 ;;
esac
[[ $# -le 1 ]] || { echo "usage: $0 [--list]" >&2; exit 2; }

recipe=1 # bump when the build below changes what goes into a tarball
names=(pause busybox torch)
context_dir=images/node
cache=${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/node-images

ref_of() { echo "podshaper.test/$1:1"; }
# The files of the build context each image's recipe reads.
files_of() {
  case $1 in
    pause) echo pause.Dockerfile pause.c ;;
    busybox) echo busybox.Dockerfile ;;
    torch) echo torch.Dockerfile ;;
  esac
}

base_stamp=$(scripts/images.sh --base-stamp) || die "scripts/images.sh --base-stamp failed"
declare -A stamp tarball
for n in "${names[@]}"; do
  s=$({
    printf '%s\n' "recipe $recipe" "base $base_stamp" "image $(ref_of "$n")"
    for f in $(files_of "$n"); do
      [[ -f $context_dir/$f ]] || die "missing $context_dir/$f"
      printf '== %s\n' "$f"
      cat "$context_dir/$f"
    done
  } | sha256sum | cut -c1-16)
  stamp[$n]=$s
  tarball[$n]=$cache/$n-$s.tar
done

size_mb() { awk -v s="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MB", s / 1e6 }'; }
print_lines() {
  local n
  for n in "${names[@]}"; do
    echo "$(ref_of "$n") ${tarball[$n]}"
  done
}

if [[ $mode == list ]]; then
  missing=()
  for n in "${names[@]}"; do
    [[ -f ${tarball[$n]} ]] || missing+=("$(ref_of "$n") (${tarball[$n]})")
  done
  if ((${#missing[@]})); then
    for m in "${missing[@]}"; do say "not built: $m"; done
    die "run scripts/node-images.sh to build them"
  fi
  print_lines
  exit 0
fi

mkdir -p "$cache"
# One build at a time per cache (two would debootstrap, build and save the same things).
exec 9>"$cache/.lock"
if ! flock -n 9; then
  say "waiting for another scripts/node-images.sh (lock: $cache/.lock)"
  flock 9
fi

start=$(now)
todo=()
for n in "${names[@]}"; do
  [[ -f ${tarball[$n]} ]] || todo+=("$n")
done
declare -A how
for n in "${names[@]}"; do how[$n]="cached"; done

if ((${#todo[@]})); then
  bash scripts/docker-up.sh || die "no Docker engine answers (docker info failed); needed to build ${todo[*]}"
  log=$cache/build.log
  : >"$log"
  t=$(now)
  base=$(scripts/images.sh --base-only) || die "scripts/images.sh --base-only failed (its log: ${XDG_CACHE_HOME:-$HOME/.cache}/podshaper/images/build.log)"
  [[ -n $base ]] || die "scripts/images.sh --base-only printed no image name"
  say "base $base ready in $(($(now) - t)) s"

  # The build context: images/node/ alone, fixed owners, modes and times (so that a
  # fresh clone hits the engine's layer cache), taken once for all builds.
  context=$(mktemp "$cache/context.XXXXXX.tar")
  trap 'rm -f "$context" "$cache"/*.tar.tmp.$$' EXIT
  tar -C "$context_dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    --mode='u+rwX,go+rX,go-w' --exclude='*.swp' --exclude='*~' -cf "$context" .
  # This engine (20.10, no buildx) has only the legacy builder.
  docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0

  build() { # DOCKERFILE IMAGE [TARGET]
    local target=()
    [[ -z ${3:-} ]] || target=(--target "$3")
    echo "=== docker build -f $1 ${target[*]} -t $2" >>"$log"
    if ! docker build --force-rm --network host --build-arg "BASE_IMAGE=$base" \
        -f "$1" "${target[@]}" -t "$2" - <"$context" >>"$log" 2>&1; then
      tail -n 60 "$log" >&2
      die "docker build -f $context_dir/$1 ${target[*]} failed (log: $log)"
    fi
  }

  for n in "${todo[@]}"; do
    ref=$(ref_of "$n")
    t=$(now)
    [[ $n == torch ]] && ! docker image inspect "$ref" >/dev/null 2>&1 &&
      say "building $ref (cold: apt installs python3-torch; minutes)"
    # The build stage of pause and busybox gets a tag of its own, so that neither
    # `docker image prune` nor images.sh's prune drops the layers a rebuild reuses.
    if grep -q '^FROM .* AS build$' "$context_dir/$n.Dockerfile"; then
      build "$n.Dockerfile" "podshaper.test/$n-build:1" build
    fi
    build "$n.Dockerfile" "$ref"
    tb=$(now)
    tmp=${tarball[$n]}.tmp.$$
    if ! docker save -o "$tmp" "$ref" 2>>"$log"; then
      rm -f "$tmp"
      die "docker save $ref failed (log: $log)"
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "${tarball[$n]}"
    how[$n]="built in $((tb - t)) s, saved in $(($(now) - tb)) s"
    say "$ref: ${how[$n]}"
  done
  # Earlier builds' images of ours that lost their tag.
  docker image prune -f --filter label=io.podshaper.images=1 >/dev/null 2>&1 || true
fi

# Tarballs of older stamps, and temporary files of runs that were killed (the lock is
# ours, so no other run is writing one now).
for n in "${names[@]}"; do
  for f in "$cache/$n"-*.tar "$cache/$n"-*.tar.tmp.*; do
    [[ -e $f && $f != "${tarball[$n]}" ]] || continue
    rm -f "$f"
    say "removed stale $f"
  done
done
rm -f "$cache"/context.*.tar 2>/dev/null || true

for n in "${names[@]}"; do
  say "$(printf '%-26s %10s  %s  (%s)' "$(ref_of "$n")" "$(size_mb "${tarball[$n]}")" "${tarball[$n]}" "${how[$n]}")"
done
print_lines
say "done in $(($(now) - start)) s"
