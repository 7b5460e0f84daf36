#!/usr/bin/env bash
# End-to-end: podshaper-agent writes GPUTopologyReports to a real kube-apiserver.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
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

# --- The memlock probe (the DaemonSet's second container) in the report: granted with the
# limit the probe found, not granted with the runtime's words from the agent's Pod, or left
# out while the probe has not been heard from.
probe_file=$tmp/run/limits
mkdir -p "$tmp/run"
# A soft limit of 4 MiB, as the NRI annotation would set it (lowering needs no privilege).
(ulimit -S -l 4096 && exec "$agent" memlock-probe --output "$probe_file") 2>/dev/null &
probe=$!
for _ in $(seq 100); do [[ -s $probe_file ]] && break; sleep 0.1; done
host() { kc get gtr $node -o jsonpath='{.spec.host}'; }
check "the probe's file: a report" run_once $node "$fixtures/p4d.24xlarge-8xA100-nv12.topo-m.txt" \
  --memlock-probe-file "$probe_file" --memlock-requested 4Mi --memlock-probe-pod podshaper-system/agent-0
check "with the probe's limit as the node's, granted" python3 -c '
import json, sys; h = json.loads(sys.argv[1])
assert h["memlockBytes"] == 4194304, h
assert h["memlockProbe"] == {"requested": "4194304", "granted": True, "message": ""}, h' "$(host)"
kill -TERM $probe; wait $probe || true

# The runtime could not start the probe: the agent's Pod says so (its status written here as
# a kubelet would), and the file never came.
refused="failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimit type 8: operation not permitted: unknown"
kc create namespace podshaper-system >/dev/null 2>&1 || true
until_ok 30 kc -n podshaper-system get serviceaccount default || fail "namespace podshaper-system: no default service account"
kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: agent-0, namespace: podshaper-system}
spec:
  nodeName: $node
  containers:
  - {name: agent, image: podshaper-agent:0.1.0}
  - {name: memlock-probe, image: podshaper-agent:0.1.0}
EOF
probe_status() {  # probe_status JSON: the memlock-probe container's status
  kc patch pod agent-0 -n podshaper-system --subresource=status --type=merge -p "{\"status\": {\"phase\": \"Running\",
    \"containerStatuses\": [{\"name\": \"agent\", \"image\": \"podshaper-agent:0.1.0\", \"imageID\": \"\", \"ready\": true, \"restartCount\": 0, \"state\": {\"running\": {}}},
                           $1]}}" >/dev/null
}
probe_status "{\"name\": \"memlock-probe\", \"image\": \"podshaper-agent:0.1.0\", \"imageID\": \"\", \"ready\": false, \"restartCount\": 2,
  \"state\": {\"waiting\": {\"reason\": \"CrashLoopBackOff\", \"message\": \"back-off 20s restarting failed container=memlock-probe\"}},
  \"lastState\": {\"terminated\": {\"exitCode\": 128, \"reason\": \"StartError\", \"message\": \"$refused\"}}}"
check "the probe refused: a report" run_once $node "$fixtures/p4d.24xlarge-8xA100-nv12.topo-m.txt" \
  --memlock-probe-file "$tmp/run/never" --memlock-probe-pod podshaper-system/agent-0
check "saying not granted, with the runtime's words from the agent's Pod" python3 -c '
import json, sys; h = json.loads(sys.argv[1])
assert h["memlockProbe"] == {"requested": "unlimited", "granted": False, "message": sys.argv[2]}, h' "$(host)" "$refused"

# Not heard from within --memlock-probe-wait: the report goes without it.
probe_status "{\"name\": \"memlock-probe\", \"image\": \"podshaper-agent:0.1.0\", \"imageID\": \"\", \"ready\": false, \"restartCount\": 0,
  \"state\": {\"waiting\": {\"reason\": \"ContainerCreating\"}}}"
start=$(date +%s)
check "the probe not started yet: a report" run_once $node "$fixtures/p4d.24xlarge-8xA100-nv12.topo-m.txt" \
  --memlock-probe-file "$tmp/run/never" --memlock-probe-pod podshaper-system/agent-0 --memlock-probe-wait 2 2>"$tmp/agent.err"
check "after --memlock-probe-wait (2 s), not before" test $(($(date +%s) - start)) -ge 2
check "without memlockProbe" bash -c "! kubectl --kubeconfig $kubeconfig get gtr $node -o jsonpath='{.spec.host}' | grep -q memlockProbe"
check "saying why in a log line" grep -q "the memlock-probe has neither written $tmp/run/never nor failed within 2 s" "$tmp/agent.err"
kc delete pod agent-0 -n podshaper-system --grace-period=0 --force >/dev/null 2>&1 || true

kc delete node $node >/dev/null
gone=no
for _ in $(seq 150); do kc get gtr $node >/dev/null 2>&1 || { gone=yes; break; }; sleep 0.2; done
check "deleting the Node garbage-collects its report" test $gone = yes
finish
