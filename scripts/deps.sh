#!/usr/bin/env bash
# Installs podshaper's build and test dependencies from Debian's packages.
# Idempotent: when every package is already installed it only checks and returns.
#   scripts/deps.sh           build and test
#   scripts/deps.sh --bench   also what make bench needs (Google Benchmark, matplotlib)
#   scripts/deps.sh --fuzz    also what scripts/fuzz.sh needs (clang and its libFuzzer/sanitizer runtimes)
set -euo pipefail

packages=(
  build-essential cmake pkg-config make
  libcpprest-dev nlohmann-json3-dev libyaml-cpp-dev libssl-dev libspdlog-dev zlib1g-dev libsimdjson-dev
  libboost-dev libboost-system-dev libgoogle-perftools-dev
  libgtest-dev libgmock-dev googletest
  openssl curl ca-certificates python3 python3-yaml
  # review -o diff's test applies the diff
  patch
  # the /dev/shm formula against a real DataLoader (tests/shm)
  python3-torch
  # the real test node (scripts/node.sh): runc, the CNI plugins, ip, iptables (its one Service rule)
  runc containernetworking-plugins iproute2 iptables
  # the images' base (scripts/images.sh): a minimal Debian made here
  debootstrap
)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(libbenchmark-dev python3-matplotlib nginx-light) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "deps: unknown option $arg (use --bench or --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
