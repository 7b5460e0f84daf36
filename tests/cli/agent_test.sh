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

echo "garbage" > "$tmp/bad.txt"
set +e; "$bin" probe --fixture "$tmp/bad.txt" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
check "a bad capture exits 1" test $rc -eq 1
check "with a clear error naming the file" grep -q "bad.txt: topology: no nvidia-smi matrix" "$tmp/err"
check "and nothing on stdout" test ! -s "$tmp/out"
set +e; "$bin" probe --format yaml 2>/dev/null; rc=$?; set -e
check "an unknown format exits 2" test $rc -eq 2
finish
