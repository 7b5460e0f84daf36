#!/usr/bin/env bash
# `podshaper-webhook review`: an AdmissionReview on stdin, the response on stdout.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
cases=$root/tests/golden/cases
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$bin" review < "$cases/seed-no-cluster-nccl-reserve/review.json"); rc=$?
check "review exits 0 for a shaped pod" test $rc -eq 0
check "response is an AdmissionReview with a JSON patch" \
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])["response"]; assert r["allowed"] and r["patchType"]=="JSONPatch" and r["patch"]' "$out"

pod=$("$bin" review --output pod < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>"$tmp/err")
check "--output pod prints the shaped pod" contains "$pod" '"podshaper.io/shm-size": "8231Mi"'
check "--output pod prints warnings like kubectl" contains "$(cat "$tmp/err")" "Warning: podshaper: podshaper.io/ranks-per-pod not set"

printf 'defaults:\n  ncclCommunicators: 0\n' > "$tmp/config.yaml"
pod=$("$bin" review --config "$tmp/config.yaml" --output pod < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>/dev/null)
check "the seed example with no reserve is 6008Mi" contains "$pod" '"podshaper.io/shm-size": "6008Mi"'

out=$("$bin" review < "$cases/denied-unknown-dtype/review.json"); rc=$?
check "a denial still exits 0" test $rc -eq 0
check "a denial says allowed false and why" \
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])["response"]; assert not r["allowed"] and "unknown dtype" in r["status"]["message"]' "$out"

python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps({"apiVersion":"v1","kind":"List","items":c["namespaces"]+c["nodes"]}))' \
  "$cases/seed-8xh100-validated-p2p/cluster.json" > "$tmp/cluster.json"
pod=$("$bin" review --cluster "$tmp/cluster.json" --output pod < "$cases/seed-8xh100-validated-p2p/review.json" 2>/dev/null)
check "--cluster decides as serve would on that cluster (validated P2P, torchrun --nnodes=2: NET, 7053Mi)" contains "$pod" '"podshaper.io/shm-size": "7053Mi"'
# Pods asking GPUs through DRA: --cluster also takes the ResourceClaimTemplates and ResourceClaims.
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps({"apiVersion":"v1","kind":"List","items":c["namespaces"]+c["nodes"]+c["resourceClaims"]}))' \
  "$cases/dra-template-8-gpus/cluster.json" > "$tmp/dra-cluster.json"
pod=$("$bin" review --cluster "$tmp/dra-cluster.json" --output pod < "$cases/dra-template-8-gpus/review.json" 2>/dev/null)
check "--cluster reads the templates a DRA pod names (8 GPUs: 7053Mi)" contains "$pod" '"podshaper.io/shm-size": "7053Mi"'
"$bin" review --cluster "$tmp/cluster.json" --output pod < "$cases/dra-template-8-gpus/review.json" >/dev/null 2>"$tmp/err"
check "a DRA pod whose template --cluster lacks is denied, naming it" \
  contains "$(cat "$tmp/err")" 'Error: denied: podshaper: ResourceClaimTemplate "eight-h100" (spec.resourceClaims["gpus"]) was not found'
"$bin" review --output pod < "$cases/dra-template-8-gpus/review.json" >/dev/null 2>"$tmp/err"
check "without --cluster its claims are not read, and it says so" contains "$(cat "$tmp/err")" 'resource claims were not read'
echo '{"kind":"Pod"}' > "$tmp/notalist.json"
set +e; "$bin" review --cluster "$tmp/notalist.json" < "$cases/seed-8xh100-validated-p2p/review.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a --cluster file that is not a List exits 2" test $rc -eq 2
check "saying what it expected" contains "$(cat "$tmp/err")" "expected a List"

for input in 'not json' '{"kind":"Pod","apiVersion":"v1"}' '' '[1,2]'; do
  set +e; "$bin" review <<<"$input" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
  check "non-AdmissionReview '$input' exits 2" test $rc -eq 2
  check "with one line on stderr" test "$(wc -l < "$tmp/err")" -eq 1
  check "and nothing on stdout" test ! -s "$tmp/out"
done

printf 'defaults:\n  workers: many\n' > "$tmp/bad.yaml"
set +e; "$bin" review --config "$tmp/bad.yaml" < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>"$tmp/err"; rc=$?; set -e
check "a bad config exits 2" test $rc -eq 2
check "naming the key" contains "$(cat "$tmp/err")" "defaults.workers"
set +e; "$bin" review --config "$tmp/missing.yaml" </dev/null 2>"$tmp/err"; rc=$?; set -e
check "a missing config file exits 2" test $rc -eq 2
set +e; "$bin" frobnicate 2>/dev/null; rc=$?; set -e
check "an unknown command exits 2" test $rc -eq 2
finish
