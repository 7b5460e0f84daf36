#!/usr/bin/env bash
# End-to-end: podshaper-agent writes GPUTopologyReports to a real kube-apiserver.
source "$(dirname "$0")/../cli/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-agent-cluster}
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
agent=${PODSHAPER_BIN:-$root/build/bin}/podshaper-agent
fixtures=$root/tests/fixtures/topologies
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  [[ $rc -ne 0 || $failures -gt 0 ]] && for f in "$PODSHAPER_CLUSTER_DIR"/logs/*.log; do echo "--- $f"; tail -20 "$f"; done
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
rv() { kc get gtr "$1" -o jsonpath='{.metadata.resourceVersion}'; }

bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
bash "$root/scripts/cluster.sh" up

node=p5-48xlarge-h100-0
run_once() { "$agent" run --node "$1" --fixture "$2" --kubeconfig "$kubeconfig" --once "${@:3}"; }

check "the agent writes its node's report" run_once $node "$fixtures/p5.48xlarge-8xH100-nv18.topo-m.txt"
kc get gtr $node -o json > "$tmp/report.json"
check "kubectl get gtr lists it" kc get gtr $node
check "its spec is the measured topology: 8 GPUs, 28 NV18 pairs" python3 -c '
import json,sys; s=json.load(open(sys.argv[1]))["spec"]
assert len(s["gpus"])==8 and len(s["pairs"])==28 and all(p["link"]=="NV18" for p in s["pairs"]) and s["observedAt"]' "$tmp/report.json"
check "owned by its Node" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["ownerReferences"][0]["uid"])' "$tmp/report.json")" = "$(kc get node $node -o jsonpath='{.metadata.uid}')"

before=$(rv $node)
run_once $node "$fixtures/p5.48xlarge-8xH100-nv18.topo-m.txt" 2>"$tmp/log"
check "nothing changed: no write" test "$(rv $node)" = "$before"
check "and it says so" grep -q "unchanged" "$tmp/log"
sleep 1  # observedAt has whole seconds: a heartbeat in the same second would change nothing
run_once $node "$fixtures/p5.48xlarge-8xH100-nv18.topo-m.txt" --heartbeat 0 2>/dev/null
check "a due heartbeat writes observedAt" test "$(rv $node)" != "$before"
after=$(rv $node)
run_once $node "$fixtures/p5.48xlarge-8xH100-nv18.topo-m.txt" 2>/dev/null
check "after the heartbeat, the next run writes nothing (the stored spec keeps its nulls)" test "$(rv $node)" = "$after"
check "memlockBytes is still null: unlimited, not missing" test "$(kc get gtr $node -o jsonpath='{.spec.host}' | python3 -c 'import json,sys; h=json.load(sys.stdin); print("memlockBytes" in h and h["memlockBytes"] is None)')" = True
run_once $node "$fixtures/p4d.24xlarge-8xA100-nv12.topo-m.txt" 2>/dev/null
check "a changed topology is written" test "$(kc get gtr $node -o jsonpath='{.spec.pairs[0].link}')" = NV12

set +e; run_once no-such-node "$fixtures/p5.48xlarge-8xH100-nv18.topo-m.txt" 2>"$tmp/err"; rc=$?; set -e
check "a node that does not exist is an error" test $rc -eq 1
check "that names it" grep -q 'Node no-such-node' "$tmp/err"
check "and writes nothing" bash -c "! kubectl --kubeconfig $kubeconfig get gtr no-such-node >/dev/null 2>&1"

"$agent" run --node g6e-12xlarge-l40s-0 --fixture "$fixtures/g6e.12xlarge-4xL40S-pcie-node.topo-m.txt" \
  --kubeconfig "$kubeconfig" --interval 1 2>"$tmp/loop.log" &
loop=$!
for _ in $(seq 50); do kc get gtr g6e-12xlarge-l40s-0 >/dev/null 2>&1 && break; sleep 0.2; done
check "the looping agent wrote its report" kc get gtr g6e-12xlarge-l40s-0
kill -TERM $loop
stopped=no
for _ in $(seq 50); do kill -0 $loop 2>/dev/null || { stopped=yes; break; }; sleep 0.1; done
check "SIGTERM stops it" test $stopped = yes
wait $loop; rc=$?
check "cleanly" test $rc -eq 0

kc delete node $node >/dev/null
gone=no
for _ in $(seq 150); do kc get gtr $node >/dev/null 2>&1 || { gone=yes; break; }; sleep 0.2; done
check "deleting the Node garbage-collects its report" test $gone = yes
finish
