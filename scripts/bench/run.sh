#!/usr/bin/env bash
# make bench: everything that needs no GPU, then one table (scripts/bench/report.py).
#   scripts/bench/run.sh [--quick]   --quick: short runs (a smoke, minutes instead of ~25)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_BIN=${PODSHAPER_BIN:-$root/build/bin}
quick=no
[[ ${1:-} == --quick ]] && quick=yes
mkdir -p "$root/build/bench"
bash "$root/scripts/bench-build.sh" >/dev/null
echo "== in process (Google Benchmark)" >&2
"$PODSHAPER_BIN/admission_bench" --benchmark_min_time=$([[ $quick == yes ]] && echo 0.2 || echo 2) \
  --benchmark_format=json >"$root/build/bench/micro.json"
echo "== the cost of hostile bodies (bench/admission_cost)" >&2
"$PODSHAPER_BIN/admission_cost" --min-seconds $([[ $quick == yes ]] && echo 0.1 || echo 1) >&2 ||
  echo "bench: a hostile body costs more than its bound (marked !)" >&2
echo "== reading a list page item by item (bench/list_page_cost)" >&2
# Pages of the bench's GPU Nodes: 61 (about what a page of about 1 MiB holds of them as
# the API server sends them) and 500 (a page of listPageSize).
for n in 61 500; do
  /usr/bin/python3 -c 'import json, sys; sys.path.insert(0, sys.argv[1]); import operator_bench as o
n = int(sys.argv[2])
print(json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1", "continue": "c"},
                  "items": [o.node_object(f"gpu-{i:05d}") for i in range(n)]}, separators=(",", ":")))' \
    "$root/scripts/bench" "$n" >"$root/build/bench/nodes-$n.json"
done
"$PODSHAPER_BIN/list_page_cost" --min-seconds $([[ $quick == yes ]] && echo 0.1 || echo 1) \
  --page "$root/build/bench/nodes-61.json" --page "$root/build/bench/nodes-500.json" >&2 ||
  echo "bench: reading item by item was not cheaper (marked !)" >&2
echo "== the webhook's ShmProfile watch (bench/shm_profile_cost)" >&2
"$PODSHAPER_BIN/shm_profile_cost" --min-seconds $([[ $quick == yes ]] && echo 0.1 || echo 2) \
  $([[ $quick == yes ]] && echo --profiles 1000) >&2
echo "== multi-node NVLink at scale: 12,528 nodes in domains of 18 (bench/nvlink_cost)" >&2
"$PODSHAPER_BIN/nvlink_cost" --min-seconds $([[ $quick == yes ]] && echo 0.1 || echo 2) >&2 ||
  echo "bench: an admission on NVLink domains was not shaped as expected, or cost over its ceiling" >&2
echo "== webhook against the peer" >&2
if [[ $quick == yes ]]; then
  bash "$root/scripts/bench/webhook.sh" --duration 3 --soak 20
else
  bash "$root/scripts/bench/webhook.sh"
fi
echo "== through the API server" >&2
bash "$root/scripts/bench/apiserver.sh" $([[ $quick == yes ]] && echo --count 200) --json "$root/build/bench/apiserver.json"
# The operator, then the webhook's cluster cache on the same cluster: 5,000 GPU nodes
# with 40,000 ResourceClaims, and the scale run, 12,500 nodes (100,000 GPUs) with 100,000.
echo "== the operator and the webhook's cache" >&2
if [[ $quick == yes ]]; then
  bash "$root/scripts/bench/operator.sh" --nodes 200 --flips 10 --json "$root/build/bench/operator.json" \
    --claims 1000 --claim-namespaces 20 --cache-json "$root/build/bench/cache.json" || true
else
  bash "$root/scripts/bench/operator.sh" --json "$root/build/bench/operator.json" \
    --claims 40000 --cache-json "$root/build/bench/cache.json" || true  # 1: a target missed
  echo "== at scale: 12,500 nodes" >&2
  bash "$root/scripts/bench/operator.sh" --nodes 12500 --json "$root/build/bench/operator-12500.json" \
    --claims 100000 --cache-json "$root/build/bench/cache-12500.json" || true
fi
echo "== /dev/shm formula against PyTorch's DataLoader" >&2
echo "== podshaper-shm: sampling 64 volumes, and a volume of 1,000,000 files (shm/cmd/shm-bench)" >&2
(cd "$root/shm" && GOSUMDB=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
  go run ./cmd/shm-bench -seconds $([[ $quick == yes ]] && echo 5 || echo 20) \
  -files $([[ $quick == yes ]] && echo 100000 || echo 1000000)) >&2 ||
  echo "bench: shm-bench failed (above)" >&2
/usr/bin/python3 "$root/tests/shm/shm_grid.py" "$PODSHAPER_BIN/podshaper-webhook" --bench --json "$root/build/bench/shm.json" >&2 ||
  echo "bench: a /dev/shm case failed (above); the table marks it" >&2
echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
# Debian's python3 has the python3-matplotlib that deps.sh --bench installed (a python3
# earlier on PATH, e.g. pyenv's, may not).
py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" "$root/scripts/bench/report.py" "$root/build/bench/latency-vs-load.png"
