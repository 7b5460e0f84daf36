#!/usr/bin/env bash
# The agent's memlock-probe, as the DaemonSet runs it: `podshaper-agent memlock-probe`
# writes its RLIMIT_MEMLOCK and waits for SIGTERM; `podshaper-agent run --once
# --memlock-probe-*` puts what it found into the GPUTopologyReport it writes (to a fake
# API server, tests/cli/fake_api.py): granted with the probe's limit, not granted with
# the runtime's words from the Pod's status, or nothing while it has not been heard from.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
fixture=$root/tests/fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt
tmp=$(mktemp -d)
api=
trap '[[ -n $api ]] && kill "$api" 2>/dev/null; rm -rf "$tmp"' EXIT

# --- memlock-probe: its limit, in a file renamed into place, then it waits for SIGTERM.
probe_file=$tmp/run/limits
mkdir -p "$tmp/run"
# A soft limit of 4 MiB, as the NRI annotation would set it (lowering needs no privilege).
(ulimit -S -l 4096 && exec "$bin" memlock-probe --output "$probe_file") 2>"$tmp/probe.err" &
probe=$!
for _ in $(seq 100); do [[ -s $probe_file ]] && break; sleep 0.1; done
hard=$(python3 -c 'import resource; h = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]; print("null" if h == resource.RLIM_INFINITY else h)')
check "memlock-probe writes the RLIMIT_MEMLOCK it got" \
  test "$(cat "$probe_file" 2>/dev/null)" == "{\"hard\":$hard,\"soft\":4194304}"
check "through a temporary file that is gone" test ! -e "$probe_file.tmp"
check "and says so on stderr" grep -q "memlock-probe: RLIMIT_MEMLOCK soft 4194304 hard" "$tmp/probe.err"
check "then keeps running" kill -0 $probe
kill -TERM $probe
set +e; wait $probe; rc=$?; set -e
check "SIGTERM: it exits 0" test $rc -eq 0
set +e; "$bin" memlock-probe 2>"$tmp/err"; rc=$?; set -e
check "without --output: exit 2, naming it" bash -c "[[ $rc -eq 2 ]] && grep -q -- '--output is required' '$tmp/err'"
set +e; "$bin" memlock-probe --output "$tmp/missing/dir/limits" 2>"$tmp/err"; rc=$?; set -e
check "an output it cannot write: exit 2, naming the file" bash -c "[[ $rc -eq 2 ]] && grep -q 'missing/dir/limits.tmp' '$tmp/err'"

# --- run's flags are checked before it reaches for a cluster.
refuses() {  # refuses "what" "message" FLAGS...
  local what=$1 msg=$2; shift 2
  set +e; "$bin" run --node gpu-0 --kubeconfig /nonexistent "$@" >/dev/null 2>"$tmp/err"; local rc=$?; set -e
  check "$what: exit 2" test $rc -eq 2
  check "$what: says why" grep -qF -- "$msg" "$tmp/err"
}
refuses "--memlock-probe-pod alone" "--memlock-probe-pod needs --memlock-probe-file" --memlock-probe-pod a/b
refuses "--memlock-requested alone" "--memlock-requested needs --memlock-probe-file" --memlock-requested 4Mi
refuses "a bad --memlock-requested" '--memlock-requested: "lots" is neither unlimited nor a quantity of bytes' \
  --memlock-probe-file "$probe_file" --memlock-requested lots
refuses "a pod that is not NAMESPACE/NAME" '--memlock-probe-pod "agent-0": expected NAMESPACE/NAME' \
  --memlock-probe-file "$probe_file" --memlock-probe-pod agent-0
check "the usage text names the memlock-probe" contains "$("$bin" help)" "podshaper-agent memlock-probe --output FILE"

# --- run against a fake API server.
state=$tmp/api
mkdir -p "$state"
echo '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "uid": "uid-0"}}' >"$state/node.json"
python3 "$root/tests/cli/fake_api.py" "$state" >"$tmp/port" &
api=$!
for _ in $(seq 50); do [[ -s $tmp/port ]] && break; sleep 0.1; done
cat >"$tmp/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "http://127.0.0.1:$(cat "$tmp/port")"}}]
contexts: [{name: fake, context: {cluster: fake, user: ""}}]
current-context: fake
EOF
agent() {  # agent FLAGS...: one report, from the 8-GPU fixture
  rm -f "$state/report.json" "$state/requests"
  "$bin" run --once --node gpu-0 --fixture "$fixture" --kubeconfig "$tmp/kubeconfig" "$@" 2>"$tmp/agent.err"
}
host() { python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["spec"]["host"], sort_keys=True))' "$state/report.json"; }

check "without the memlock flags: a report" agent
check "and no memlockProbe in it" bash -c "! grep -q memlockProbe '$state/report.json'"

check "the probe's file: a report" agent --memlock-probe-file "$probe_file" --memlock-requested 4Mi \
  --memlock-probe-pod podshaper-system/agent-0
check "with the probe's limit as the node's, granted" python3 -c '
import json, sys; h = json.loads(sys.argv[1])
assert h["memlockBytes"] == 4194304, h
assert h["memlockProbe"] == {"requested": "4194304", "granted": True, "message": ""}, h' "$(host)"
check "and the Pod was not read" bash -c "! grep -q /pods/ '$state/requests'"

# The runtime could not start the probe: its Pod says so, and the file never came.
refused="failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimit type 8: operation not permitted: unknown"
cat >"$state/pod.json" <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-0", "namespace": "podshaper-system"},
 "status": {"phase": "Running", "containerStatuses": [
   {"name": "agent", "ready": true, "state": {"running": {}}},
   {"name": "memlock-probe", "ready": false, "restartCount": 2,
    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container=memlock-probe"}},
    "lastState": {"terminated": {"exitCode": 128, "reason": "StartError", "message": "$refused"}}}]}}
EOF
check "the probe refused: a report" agent --memlock-probe-file "$tmp/run/never" \
  --memlock-probe-pod podshaper-system/agent-0
check "saying not granted, with the runtime's words" python3 -c '
import json, sys; h = json.loads(sys.argv[1])
assert h["memlockProbe"] == {"requested": "unlimited", "granted": False, "message": sys.argv[2]}, h' "$(host)" "$refused"
check "from the agent's own Pod" grep -q "GET /api/v1/namespaces/podshaper-system/pods/agent-0" "$state/requests"

# Not heard from within --memlock-probe-wait: the report goes without it.
python3 - "$state/pod.json" <<'EOF'
import json, sys
pod = json.load(open(sys.argv[1]))
pod["status"]["containerStatuses"][1] = {"name": "memlock-probe", "state": {"waiting": {"reason": "ContainerCreating"}}}
json.dump(pod, open(sys.argv[1], "w"))
EOF
start=$(date +%s)
check "the probe not started yet: a report" agent --memlock-probe-file "$tmp/run/never" \
  --memlock-probe-pod podshaper-system/agent-0 --memlock-probe-wait 2
check "after --memlock-probe-wait (2 s), not before" test $(($(date +%s) - start)) -ge 2
check "without memlockProbe" bash -c "! grep -q memlockProbe '$state/report.json'"
check "saying why in a log line" grep -q "the memlock-probe has neither written $tmp/run/never nor failed within 2 s" "$tmp/agent.err"
finish
