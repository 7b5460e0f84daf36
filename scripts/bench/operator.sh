#!/usr/bin/env bash
# The operator benchmark (issue 7): N GPU Nodes and their GPUTopologyReports on the real
# loopback control plane (scripts/cluster.sh, without the webhook), judged by one
# podshaper-operator replica with leader election. Prints a table (and, with --json, every
# number): catch-up time with the operator running while the reports are written (target
# <= 60 s from the last report) and on a cold start over N unjudged reports, the operator's
# API writes/s during catch-up and at steady state (target 0), its RSS (target <= 150 MiB),
# and the time from a report's change to its Node's label flipping (target p99 <= 1 s).
# Not part of `make test`; `--nodes 200 --flips 10` is a smoke run (~1 minute).
#
#   scripts/bench/operator.sh [--nodes N] [--flips K] [--json FILE] [--steady S]
#                             [--heartbeat S] [--no-live] [--workers W] [--keep-cluster]
#                             [--claims C [--claim-namespaces M] [--cache-json FILE]]
#
# --claims: then, on the same cluster (its N GPU Nodes labelled), C ResourceClaims in M
# namespaces (default 300) and one podshaper-webhook replica watching them all: its time
# to ready, RSS and admission latency with that cache (scripts/bench/cache_bench.py;
# targets: ready <= 30 s, <= 128 MiB). The scale run: --nodes 12500 --claims 100000.
#
# The soak (docs/RELIABILITY.md): --steady 600 --heartbeat 300 holds each steady window
# for 10 minutes while every report gets the agent's heartbeat, with RSS every 10 s;
# --no-live stops after the cold start's window and the flips.
#
# Binaries from $PODSHAPER_BIN (default build/bin: podshaper-operator, podshaper-agent), the
# control plane from $PODSHAPER_CONTROLPLANE_BIN (default build/controlplane). Its own
# cluster dir: $PODSHAPER_BENCH_CLUSTER_DIR (default build/bench-operator-cluster), torn
# down on exit unless --keep-cluster. Exit status 1 when a target is missed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=${PODSHAPER_CONTROLPLANE_BIN:-$root/build/controlplane}:$PATH  # its kubectl
nodes=5000 flips=50 json="" steady="" heartbeat="" nolive="" workers="" keep=no claims=0 claim_ns=300 cache_json=""
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --flips) flips=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --steady) steady=$2; shift 2 ;;
    --heartbeat) heartbeat=$2; shift 2 ;;
    --no-live) nolive=--no-live; shift ;;
    --workers) workers=$2; shift 2 ;;
    --keep-cluster) keep=yes; shift ;;
    --claims) claims=$2; shift 2 ;;
    --claim-namespaces) claim_ns=$2; shift 2 ;;
    --cache-json) cache_json=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "operator.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $nodes =~ ^[1-9][0-9]*$ && $flips =~ ^[0-9]+$ ]] || { echo "operator.sh: --nodes and --flips take numbers" >&2; exit 2; }
[[ $flips -le $nodes ]] || { echo "operator.sh: --flips must not exceed --nodes" >&2; exit 2; }
[[ $claims =~ ^[0-9]+$ && $claim_ns =~ ^[1-9][0-9]*$ ]] || { echo "operator.sh: --claims and --claim-namespaces take numbers" >&2; exit 2; }

bin=${PODSHAPER_BIN:-$root/build/bin}
for b in podshaper-operator podshaper-agent; do
  [[ -x $bin/$b ]] || { echo "operator.sh: $bin/$b is missing: run make build, or set PODSHAPER_BIN" >&2; exit 1; }
done
export PODSHAPER_BIN=$bin
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_BENCH_CLUSTER_DIR:-$root/build/bench-operator-cluster}
export PODSHAPER_WITH_WEBHOOK=no
dir=$PODSHAPER_CLUSTER_DIR
[[ -n $json ]] && json=$(realpath -m "$json")
[[ -n $cache_json ]] && cache_json=$(realpath -m "$cache_json")

cleanup() {
  local rc=$?
  # The operator the bench started, if the bench itself was killed: only that pid.
  local f=$dir/pids/bench-operator.pid
  if [[ -f $f ]]; then
    local pid; pid=$(cat "$f")
    if [[ $(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1) == */podshaper-operator ]]; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  fi
  if [[ $rc -ne 0 && $rc -ne 1 && -f $dir/logs/bench-operator.log ]]; then
    echo "--- $dir/logs/bench-operator.log (tail)" >&2; tail -30 "$dir/logs/bench-operator.log" >&2
  fi
  if [[ $keep == yes ]]; then
    echo "operator.sh: cluster left up: kubectl --kubeconfig $dir/kubeconfig" >&2
  else
    bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# A cluster left by a killed run is not reused: every run starts from an empty etcd.
bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
rm -f "$dir/logs/bench-operator.log"
# The binaries as they are now: a rebuild of $bin during the run must not change them.
mkdir -p "$dir/bin"
cp "$bin/podshaper-operator" "$bin/podshaper-agent" "$dir/bin/"
if [[ $claims -gt 0 ]]; then
  [[ -x $bin/podshaper-webhook ]] || { echo "operator.sh: $bin/podshaper-webhook is missing: run make build" >&2; exit 1; }
  cp "$bin/podshaper-webhook" "$dir/bin/"
  [[ -x $bin/podshaper-loadgen ]] && cp "$bin/podshaper-loadgen" "$dir/bin/"
fi
echo "operator.sh: $bin/podshaper-operator built $(date -u -r "$bin/podshaper-operator" +%FT%TZ)" >&2
bash "$root/scripts/cluster.sh" up

rc=0
python3 "$root/scripts/bench/operator_bench.py" --cluster-dir "$dir" --bin "$dir/bin" --source-bin "$bin" --root "$root" \
  --nodes "$nodes" --flips "$flips" ${json:+--json "$json"} ${steady:+--steady "$steady"} ${heartbeat:+--heartbeat "$heartbeat"} $nolive \
  ${workers:+--workers "$workers"} || rc=$?
[[ $rc -le 1 ]] || exit "$rc"
if [[ $claims -gt 0 ]]; then
  python3 "$root/scripts/bench/cache_bench.py" --cluster-dir "$dir" --webhook "$dir/bin/podshaper-webhook" \
    --loadgen "$dir/bin/podshaper-loadgen" --claims "$claims" --namespaces "$claim_ns" ${cache_json:+--json "$cache_json"} || rc=$?
fi
exit "$rc"
