#!/usr/bin/env bash
# `podshaper-agent probe`: the fake backend from captures, and a CPU-only node.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
fixtures=$root/tests/fixtures
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$bin" probe 2>"$tmp/err"); rc=$?
check "on a node without a driver probe exits 0" test $rc -eq 0
check "with an empty, valid report" python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["gpus"]==[] and r["pairs"]==[] and "memlockBytes" in r["host"]' "$out"
check "and says why in a log line" grep -q "libnvidia-ml.so.1 not loadable" "$tmp/err"

json=$("$bin" probe --fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt")
check "a fixture gives 8 GPUs and 28 NV18 pairs" python3 -c '
import json,sys; r=json.loads(sys.argv[1]); assert len(r["gpus"])==8 and len(r["pairs"])==28
assert all(p["link"]=="NV18" and p["nvlinks"]==18 for p in r["pairs"])' "$json"
table=$("$bin" probe --fixture "$fixtures/captures/h200x2-nv18.topo-m-and-p2p-r.txt" --format table)
check "the table prints like nvidia-smi topo -m" contains "$table" "GPU0	 X 	NV18	0-31	0"
check "with a verdict" contains "$table" "verdict: 2 GPUs, 1/1 pairs over NVLink, P2P between all pairs"

# --recording of a synthetic GB200 node (tests/fixtures/mnnvl): its GPUs' NVLink domain.
table=$("$bin" probe --recording "$fixtures/mnnvl/gb200-node.json" --format table)
check "a recording with fabric info prints the node's NVLink domain" contains "$table" \
  "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric completed, healthy"
json=$("$bin" probe --recording "$fixtures/mnnvl/gb200-node.json")
check "and reports each GPU's fabric" python3 -c '
import json,sys; r=json.loads(sys.argv[1]); f=r["gpus"][3]["fabric"]
assert f=={"clusterUuid":"9277d399-0674-44a9-b64e-d85bb19ce2b0","cliqueId":32766,"state":"Completed","status":"Success","healthMask":426}, f' "$json"
table=$("$bin" probe --fixture "$fixtures/captures/h200x2-nv18.topo-m-and-p2p-r.txt" --format table)
check "a node without fabric info prints no domain" bash -c '! grep -q "NVLink domain" <<<"$1"' _ "$table"

echo "garbage" > "$tmp/bad.txt"
set +e; "$bin" probe --fixture "$tmp/bad.txt" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
check "a bad capture exits 1" test $rc -eq 1
check "with a clear error naming the file" grep -q "bad.txt: topology: no nvidia-smi matrix" "$tmp/err"
check "and nothing on stdout" test ! -s "$tmp/out"
set +e; "$bin" probe --format yaml 2>/dev/null; rc=$?; set -e
check "an unknown format exits 2" test $rc -eq 2

# --p2p-fixture: the P2P matrix (`nvidia-smi topo -p2p r`) from a second file.
l40s=$fixtures/topologies/g6e.12xlarge-4xL40S-pcie-node.topo-m.txt
pairs_p2p='import json,sys; r=json.loads(sys.argv[1]); p={(q["a"],q["b"]): q["p2p"]["read"] for q in r["pairs"]}'
json=$("$bin" probe --fixture "$l40s")
check "a topo -m fixture alone says U (unknown) for every pair's P2P" python3 -c "$pairs_p2p"'
assert len(p)==6 and set(p.values())=={"U"}, p' "$json"
json=$("$bin" probe --fixture "$l40s" --p2p-fixture "$fixtures/p2p/4gpu-ns.p2p-r.txt")
check "with --p2p-fixture, P2P is read from the second file: NS for GPU0/GPU2, OK for GPU0/GPU1" python3 -c "$pairs_p2p"'
assert p[(0,2)]=="NS" and p[(0,1)]=="OK", p
assert p=={(0,1):"OK",(0,2):"NS",(0,3):"NS",(1,2):"NS",(1,3):"NS",(2,3):"OK"}, p' "$json"
check "the links still come from the topo -m file" python3 -c '
import json,sys; r=json.loads(sys.argv[1]); assert len(r["gpus"])==4 and all(p["link"]=="NODE" for p in r["pairs"])' "$json"
table=$("$bin" probe --fixture "$l40s" --p2p-fixture "$fixtures/p2p/4gpu-ns.p2p-r.txt" --format table)
check "the table shows the P2P matrix" contains "$table" "GPU0	X	OK	NS	NS"
check "and a verdict counting the pairs without P2P" contains "$table" "4/6 pairs without P2P read"
table=$("$bin" probe --fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt" \
  --p2p-fixture "$fixtures/p2p/8gpu-all-ok.p2p-r.txt" --format table)
check "an 8-GPU P2P file with an 8-GPU topo gives P2P between all pairs" \
  contains "$table" "verdict: 8 GPUs, 28/28 pairs over NVLink, P2P between all pairs"
table=$("$bin" probe --fixture "$l40s" --p2p-fixture "$fixtures/p2p/4gpu-all-ok.p2p-r.txt" --format table)
check "a 4-GPU all-OK P2P file likewise" contains "$table" "verdict: 4 GPUs, 0/6 pairs over NVLink, P2P between all pairs"

set +e; "$bin" probe --fixture "$l40s" --p2p-fixture "$fixtures/p2p/8gpu-all-ok.p2p-r.txt" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
check "a P2P file whose size disagrees with the topo -m file (8x8 against 4 GPUs) exits 1" test $rc -eq 1
check "with a clear message naming both files and both sizes" grep -q \
  "8gpu-all-ok.p2p-r.txt: the P2P matrix has 8 GPU columns and 8 GPU rows, but .*g6e.12xlarge-4xL40S-pcie-node.topo-m.txt has 4 GPUs" "$tmp/err"
check "and nothing on stdout" test ! -s "$tmp/out"
set +e; "$bin" probe --fixture "$l40s" --p2p-fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a topo -m file given as the P2P file exits 1, saying so" \
  bash -c '[[ $1 -eq 1 ]] && grep -q "is an nvidia-smi topo -m matrix (it has a CPU Affinity column), not topo -p2p r" "$2"' _ $rc "$tmp/err"
set +e; "$bin" probe --fixture "$fixtures/captures/h200x2-nv18.topo-m-and-p2p-r.txt" \
  --p2p-fixture "$fixtures/p2p/4gpu-all-ok.p2p-r.txt" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a capture that already holds a P2P matrix, given a second one, exits 1, saying so" \
  bash -c '[[ $1 -eq 1 ]] && grep -q "h200x2-nv18.topo-m-and-p2p-r.txt: already holds a P2P matrix" "$2"' _ $rc "$tmp/err"
set +e; "$bin" probe --fixture "$l40s" --p2p-fixture "$tmp/bad.txt" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a P2P file without a matrix exits 1, naming the file" \
  bash -c '[[ $1 -eq 1 ]] && grep -q "bad.txt: no nvidia-smi topo -p2p r matrix" "$2"' _ $rc "$tmp/err"
set +e; "$bin" probe --p2p-fixture "$fixtures/p2p/4gpu-ns.p2p-r.txt" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
check "--p2p-fixture without --fixture is a usage error: probe exits 2" test $rc -eq 2
check "saying what it needs" grep -q -- "--p2p-fixture needs --fixture" "$tmp/err"
set +e; "$bin" run --node gpu-0 --p2p-fixture "$fixtures/p2p/4gpu-ns.p2p-r.txt" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "and run exits 2 too, before reaching for a cluster" test $rc -eq 2
check "with the same message" grep -q -- "--p2p-fixture needs --fixture" "$tmp/err"
check "the usage text names --p2p-fixture" contains "$("$bin" help)" "--p2p-fixture FILE"

# run --listen: probes and /metrics, served while the API server cannot be reached.
cat >"$tmp/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" run --node gpu-0 --fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt" --kubeconfig "$tmp/kubeconfig" --interval 1 \
  --listen "127.0.0.1:$port" --log-format json 2>"$tmp/run.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do curl -sk "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
check "--listen: /healthz answers ok over TLS" test "$(curl -sk "https://127.0.0.1:$port/healthz")" = ok
check "--listen: /readyz is 503 while no report reached the API server" \
  test "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/readyz")" = 503
sleep 2
metrics=$(curl -sk "https://127.0.0.1:$port/metrics")
check "--listen: /metrics counts the failed rounds" python3 -c '
import re, sys
m = re.search(r"podshaper_agent_probes_total\{result=\"error\"\} (\d+)", sys.argv[1])
assert m and int(m.group(1)) >= 1, sys.argv[1]' "$metrics"
check "... every result from 0" contains "$metrics" 'podshaper_agent_probes_total{result="created"} 0'
check "... the API client's requests by verb and code (0: no answer)" contains "$metrics" 'podshaper_kube_client_requests_total{code="0",verb="GET"}'
check "... which build" contains "$metrics" 'podshaper_build_info{component="agent",version="'
check "... and the process" contains "$metrics" 'process_resident_memory_bytes '
kill -TERM $pid; set +e; wait $pid; rc=$?; set -e
check "SIGTERM stops it (exit 0)" test $rc -eq 0
check "its log is JSON lines" python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/run.log"
set +e; "$bin" run --node gpu-0 --fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt" --kubeconfig "$tmp/kubeconfig" --listen nowhere \
  2>"$tmp/err"; rc=$?; set -e
check "a bad --listen exits 2, naming it" test "$rc $(grep -c -- '--listen' "$tmp/err")" = "2 1"
finish
