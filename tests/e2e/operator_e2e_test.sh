#!/usr/bin/env bash
# End-to-end: two podshaper-operator replicas (one leader, by a Lease) judge the
# GPUTopologyReports that podshaper-agent writes against the TopologyPolicies, on a real
# control plane (scripts/cluster.sh): report status, Events, node labels and taints;
# podshaper-webhook places pods by those labels. Everything is checked with kubectl.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-operator-cluster}
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
logs=$PODSHAPER_CLUSTER_DIR/logs
bin=${PODSHAPER_BIN:-$root/build/bin}
operator=$bin/podshaper-operator
agent=$bin/podshaper-agent
lease_duration=4  # seconds; the config below
tmp=$(mktemp -d)
declare -A op_pid=() op_port=()  # replica (a, b) -> pid, HTTPS port

stop_operator() {  # stop_operator REPLICA: SIGTERM, then SIGKILL after 5 s; only the pid we started
  local pid=${op_pid[$1]:-}
  [[ -n $pid ]] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "op_pid[$1]"
}
cleanup() {
  local rc=$?
  for r in "${!op_pid[@]}"; do stop_operator "$r"; done
  if [[ $rc -ne 0 || $failures -gt 0 ]]; then  # what CI needs to see
    show_failure_state 60 'operator-*.log'
  fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
config=$PODSHAPER_CLUSTER_DIR/operator.yaml
start_operator() {  # start_operator a|b|c: identity op-a|op-b|op-c, log logs/operator-a|b|c.log
  op_port[$1]=$(free_port)
  echo "=== $(date -u +%FT%TZ) starting op-$1 on 127.0.0.1:${op_port[$1]}" >>"$logs/operator-$1.log"
  "$operator" run --kubeconfig "$kubeconfig" --config "$config" --listen "127.0.0.1:${op_port[$1]}" \
    --identity "op-$1" >>"$logs/operator-$1.log" 2>&1 &
  op_pid[$1]=$!
}
http_code() {  # http_code REPLICA PATH
  curl -sk --max-time 3 -o /dev/null -w '%{http_code}' "https://127.0.0.1:${op_port[$1]}$2" || true
}
# metric REPLICA NAME [LABELS]: the sum of NAME's samples (those whose labels contain LABELS)
metric() {
  curl -sk --max-time 3 "https://127.0.0.1:${op_port[$1]}/metrics" |
    awk -v n="$2" -v m="${3:-}" '
      ($1 == n || index($1, n "{") == 1) && (m == "" || index($1, m)) { s += $2; found = 1 }
      END { if (!found) { print "no sample of " n (m == "" ? "" : " " m); exit 1 } printf "%g\n", s }'
}
holder() { kc -n podshaper-system get lease podshaper-operator -o jsonpath='{.spec.holderIdentity}'; }
replica_of() { case $1 in op-a) echo a ;; op-b) echo b ;; *) echo "?" ;; esac; }

# cond REPORT TYPE: "STATUS REASON" of the report's condition TYPE
cond() {
  kc get gtr "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status} {.status.conditions[?(@.type==\"$2\")].reason}"
}
field() { kc get gtr "$1" -o jsonpath="{.status.$2}"; }
label() { kc get node "$1" -o jsonpath="{.metadata.labels.podshaper\.io/$2}"; }
labels() {  # labels NODE: the podshaper.io labels, "key=value ..." sorted
  kc get node "$1" -o json | python3 -c '
import json, sys
l = json.load(sys.stdin)["metadata"].get("labels", {})
print(" ".join(k[len("podshaper.io/"):] + "=" + v for k, v in sorted(l.items()) if k.startswith("podshaper.io/")))'
}
taints() { kc get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect} {end}'; }
row() { kc get gtr "$1" --no-headers | awk '{print $2, $3, $4, $6}'; }
# events KIND NAME REASON: how many times that Event was emitted in namespace default
# (its objects, each counted `count` times)
events() {
  kc get events -n default --field-selector "involvedObject.kind=$1,involvedObject.name=$2,reason=$3" -o json |
    python3 -c '
import json, sys
print(sum(max(e.get("count") or 0, (e.get("series") or {}).get("count") or 0, 1) for e in json.load(sys.stdin)["items"]))'
}
described_events() {  # described_events gtr|node NAME: the Events section of kubectl describe
  kc describe "$1" "$2" | sed -n '/^Events:/,$p'
}

agent_once() {  # agent_once NODE TOPOLOGY [P2P] [agent flags...]: one probe and write
  local node=$1 fixture=$2 p2pfile=${3:-}
  "$agent" run --node "$node" --fixture "$topo/$fixture" ${p2pfile:+--p2p-fixture "$p2p/$p2pfile"} \
    --kubeconfig "$kubeconfig" --once "${@:4}" >>"$logs/agent.log" 2>&1
}
p5_topo=p5.48xlarge-8xH100-nv18.topo-m.txt
p4d_topo=p4d.24xlarge-8xA100-nv12.topo-m.txt
g6e_topo=g6e.12xlarge-4xL40S-pcie-node.topo-m.txt

# report NAME [PYTHON]: a GPUTopologyReport of the g6e fixture with observedAt now;
# PYTHON may edit the spec `s` first
report() {
  "$agent" probe --fixture "$topo/$g6e_topo" --p2p-fixture "$p2p/4gpu-all-ok.p2p-r.txt" --format json >"$tmp/probe.json"
  python3 - "$1" "$tmp/probe.json" "${2:-}" <<'PY'
import datetime, json, sys
name, probe, edit = sys.argv[1:4]
s = json.load(open(probe))
s["observedAt"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
exec(edit)
print(json.dumps({"apiVersion": "podshaper.io/v1alpha1", "kind": "GPUTopologyReport",
                  "metadata": {"name": name}, "spec": s}))
PY
}

# A cluster left by a killed run is not reused.
bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
bash "$root/scripts/cluster.sh" up
[[ -x $operator ]] || { echo "$operator is missing: build it first" >&2; exit 1; }

# --- the CRDs' schemas, enforced by the real API server
kc wait --for condition=established --timeout 30s \
  crd/gputopologyreports.podshaper.io crd/topologypolicies.podshaper.io >/dev/null
report crd-check >"$tmp/valid.json"
check "a report as the agent probes it passes the API server's validation" \
  quiet kc apply --dry-run=server -f "$tmp/valid.json"
report crd-check 's["pairs"][0]["link"] = "XYZ"' >"$tmp/bad-link.json"
set +e; kc apply --dry-run=server -f "$tmp/bad-link.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a report with pairs[0].link XYZ is refused" test $rc -ne 0
check "naming the field" grep -q 'spec.pairs\[0\].link' "$tmp/err"
cat >"$tmp/bad-policy.yaml" <<'YAML'
apiVersion: podshaper.io/v1alpha1
kind: TopologyPolicy
metadata: {name: bad}
spec:
  requirements: {minLink: fast}
YAML
set +e; kc apply --dry-run=server -f "$tmp/bad-policy.yaml" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a TopologyPolicy with minLink fast is refused" test $rc -ne 0
check "naming the field and the value" grep -q 'spec.requirements.minLink: Unsupported value: "fast"' "$tmp/err"

# --- two replicas
printf 'eventNamespace: default\nleaderElection: {namespace: podshaper-system, name: podshaper-operator, leaseDurationn: 4s}\n' \
  >"$tmp/bad-config.yaml"
set +e
timeout 20 "$operator" run --kubeconfig "$kubeconfig" --config "$tmp/bad-config.yaml" \
  --listen "127.0.0.1:$(free_port)" --identity op-bad >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
check "a config with an unknown key is refused (exit 2)" test $rc -eq 2
check "naming the key" grep -q 'leaseDurationn' "$tmp/err"

kc create namespace podshaper-system >/dev/null
kc apply -f "$root/manifests/base/topologypolicy-default.yaml" >/dev/null
cat >"$config" <<YAML
eventNamespace: default
pendingGrace: 3s
leaderElection:
  namespace: podshaper-system
  name: podshaper-operator
  leaseDuration: ${lease_duration}s
  renewDeadline: 3s
  retryPeriod: 1s
YAML
start_operator a
start_operator b
check "op-a is healthy" eventually 30 200 http_code a /healthz
check "op-b is healthy" eventually 30 200 http_code b /healthz
check "one of them holds the Lease" eventually 20 "op-[ab]" holder
leader=$(replica_of "$(holder)"); standby=$([[ $leader == a ]] && echo b || echo a)
echo "leader: op-$leader, standby: op-$standby"
check "the leader is ready (informers synced)" eventually 30 200 http_code "$leader" /readyz
check "the leader's podshaper_operator_leader is 1" eventually 10 1 metric "$leader" podshaper_operator_leader
check "the standby's is 0" eventually 10 0 metric "$standby" podshaper_operator_leader

# --- the agents report; the operator judges
check "the p5 agent writes its report" agent_once $p5 $p5_topo 8gpu-all-ok.p2p-r.txt
check "the p4d agent writes its report" agent_once $p4d $p4d_topo 8gpu-all-ok.p2p-r.txt
check "the g6e agent writes its report" agent_once $g6e $g6e_topo 4gpu-all-ok.p2p-r.txt
for n in $p5 $p4d $g6e; do
  check "$n is validated" eventually 20 "True RequirementsMet" cond $n Validated
done
kc get gtr | tee "$tmp/get.txt"
check "kubectl get gtr shows NAME GPUS INTERCONNECT P2P MEMLOCK VALIDATED REASON AGE" \
  test "$(head -1 "$tmp/get.txt" | awk '{$1 = $1; print}')" = "NAME GPUS INTERCONNECT P2P MEMLOCK VALIDATED REASON AGE"
check "p5: 8 GPUs, nvlink, P2P all, validated" eventually 5 "8 nvlink all True" row $p5
check "p4d: 8 GPUs, nvlink, P2P all, validated" eventually 5 "8 nvlink all True" row $p4d
check "g6e: 4 GPUs, pcie, P2P all, validated" eventually 5 "4 pcie all True" row $g6e
check "kubectl get gtr: MEMLOCK unlimited, REASON RequirementsMet" eventually 5 "unlimited RequirementsMet" \
  bash -c "kubectl --kubeconfig $kubeconfig get gtr $p5 --no-headers | awk '{print \$5, \$7}'"
check "the status says memlock unlimited" eventually 5 unlimited field $p5 memlock
check "and the policy that applies" eventually 5 default field $p5 'policies[*]'
for c in "P2PComplete True AllPairsP2P" "MemlockUnlimited True Unlimited" "GPUCountMatchesNode True CountMatches" \
         "Fresh True ReportCurrent"; do
  set -- $c
  check "p5: $1 $2 ($3)" eventually 5 "$2 $3" cond $p5 "$1"
done
check "kubectl describe gtr shows the conditions" \
  eventually 5 "*Conditions:*Reason:*RequirementsMet*Type:*Validated*" kc describe gtr $p5
check "and a Normal TopologyValidated Event" \
  eventually 15 "*Normal*TopologyValidated*" described_events gtr $p5
check "p5's node labels" eventually 15 \
  "gpu-count=8 interconnect=nvlink memlock=unlimited p2p=all topology-validated=true" labels $p5
check "p4d's node labels" eventually 15 \
  "gpu-count=8 interconnect=nvlink memlock=unlimited p2p=all topology-validated=true" labels $p4d
check "g6e's node labels" eventually 15 \
  "gpu-count=4 interconnect=pcie memlock=unlimited p2p=all topology-validated=true" labels $g6e

# --- the webhook places pods by the labels (it learns them through a watch)
kc create namespace training >/dev/null
check "namespace training has its default service account" until_ok 30 kc -n training get serviceaccount default
check "an 8-GPU pod requires a validated 8-GPU node, with the P2P NCCL /dev/shm reserve (P2P everywhere)" \
  eventually 30 "validated=true gpu-count=8 nccl=p2p" shaped train-8 8
check "an 8-GPU pod of a job across 4 nodes (PET_NNODES=4) gets the NET reserve (NCCL's proxy pool per rank per communicator)" \
  eventually 30 "validated=true gpu-count=8 nccl=net" shaped_across 4 train-8 8
check "a 4-GPU pod requires a validated 4-GPU node, with the P2P NCCL reserve" \
  eventually 30 "validated=true gpu-count=4 nccl=p2p" shaped train-4 4

# --- a node without P2P between some GPU pairs
check "the g6e agent reports P2P NS between its two PCIe halves" agent_once $g6e $g6e_topo 4gpu-ns.p2p-r.txt
check "g6e: Validated False (P2PUnavailable)" eventually 20 "False P2PUnavailable" cond $g6e Validated
check "g6e: P2PComplete False" eventually 5 "False P2PUnavailable" cond $g6e P2PComplete
check "g6e: P2P partial" eventually 5 "4 pcie partial False" row $g6e
check "kubectl get gtr: REASON P2PUnavailable" eventually 5 "P2PUnavailable" \
  bash -c "kubectl --kubeconfig $kubeconfig get gtr $g6e --no-headers | awk '{print \$7}'"
check "g6e's node labels: topology-validated=false, p2p=partial" eventually 15 \
  "gpu-count=4 interconnect=pcie memlock=unlimited p2p=partial topology-validated=false" labels $g6e
check "a Warning P2PUnavailable Event on the report names GPU0-GPU2 and /dev/shm" eventually 15 \
  "*Warning*P2PUnavailable*GPU0-GPU2*NCCL falls back to shared memory (/dev/shm)*" described_events gtr $g6e
check "and a Warning TopologyNotValidated" eventually 15 "*Warning*TopologyNotValidated*" described_events gtr $g6e
check "kubectl describe node shows the P2PUnavailable Event too" eventually 15 \
  "*Warning*P2PUnavailable*GPU0-GPU2*" described_events node $g6e
kc describe gtr $g6e | tee "$tmp/describe-g6e.txt"
[[ -n ${PODSHAPER_DESCRIBE_OUT:-} ]] && cp "$tmp/describe-g6e.txt" "$PODSHAPER_DESCRIBE_OUT"
# A 4-GPU node exists but is not validated now: a 4-GPU pod is admitted to wait for it, told why.
check "with g6e failing, a 4-GPU node-exclusive pod is admitted for a 4-GPU node (one exists), to wait" \
  eventually 30 "validated=true gpu-count=4 nccl=shm-transport" shaped train-4 4
check "... warned that no 4-GPU node can take it now, naming g6e" grep -q \
  "no node with 4 GPUs can take the pod now: $g6e (not validated (kubectl describe gtr $g6e)): it waits Pending" "$tmp/shaped.err"
pod waiting-4 4 | kc -n training create -f - >/dev/null 2>&1
check "created, it stays Pending (unbound)" eventually 10 "Pending " \
  kc -n training get pod waiting-4 -o jsonpath='{.status.phase} {.spec.nodeName}'
check "kubectl describe pod: NotPlaceable, how many nodes fail which requirement, and the report's reason" \
  eventually 30 "*NotPlaceable*It needs a node that has 4 GPUs (podshaper.io/gpu-count=4), is validated by podshaper*2 do not have 4 GPUs (8 GPUs: $p4d, $p5); 1 is not validated (P2PUnavailable: $g6e)*kubectl describe gtr $g6e (podshaper's report of that node's GPUs) says why it is not validated*" \
  kc -n training describe pod waiting-4
check "kubectl describe pod: the admission warnings (podshaper.io/warnings)" \
  eventually 5 "*podshaper.io/warnings:*no node with 4 GPUs can take the pod now*" kc -n training describe pod waiting-4
kc -n training describe pod waiting-4 | sed -n '/^Events:/,$p' | grep -a NotPlaceable | cut -c1-400 | sed 's/^/    /' || true
check "a pod that asks for 4-GPU nodes gets the SHM-transport NCCL /dev/shm reserve (no 4-GPU node has P2P everywhere)" \
  eventually 30 "validated=true gpu-count=4 nccl=shm-transport" shaped train-4 4 4
check "8-GPU pods still have the P2P reserve" eventually 5 "validated=true gpu-count=8 nccl=p2p" shaped train-8 8

check "the g6e agent reports P2P OK again" agent_once $g6e $g6e_topo 4gpu-all-ok.p2p-r.txt
check "g6e: Validated True again" eventually 20 "True RequirementsMet" cond $g6e Validated
check "its labels: topology-validated=true, p2p=all" eventually 15 \
  "gpu-count=4 interconnect=pcie memlock=unlimited p2p=all topology-validated=true" labels $g6e
check "a second Normal TopologyValidated Event, after the warning" \
  eventually 15 2 events GPUTopologyReport $g6e TopologyValidated
check "and a Normal AllPairsP2P (P2PComplete recovered)" \
  eventually 15 1 events GPUTopologyReport $g6e AllPairsP2P
check "exactly one TopologyNotValidated Event on the report, from two replicas" \
  eventually 1 1 events GPUTopologyReport $g6e TopologyNotValidated
check "exactly one on the Node" eventually 1 1 events Node $g6e TopologyNotValidated
check "exactly one P2PUnavailable on the report" eventually 1 1 events GPUTopologyReport $g6e P2PUnavailable
check "the waiting pod is bound to g6e once it is validated again" \
  eventually 30 "$g6e" kc -n training get pod waiting-4 -o jsonpath='{.spec.nodeName}'
check "it was told NotPlaceable once, by one of two replicas" \
  eventually 1 1 bash -c "kubectl --kubeconfig $kubeconfig -n training get events --field-selector involvedObject.name=waiting-4,reason=NotPlaceable -o name | wc -l"
check "the leader counts it: podshaper_operator_pod_events_total{reason=NotPlaceable,cause=validated}" \
  eventually 5 1 metric "$(replica_of "$(holder)")" podshaper_operator_pod_events_total 'cause="validated",reason="NotPlaceable"'
kc -n training delete pod waiting-4 --grace-period=0 --force >/dev/null 2>&1  # no kubelet to see it go

# --- a policy that taints the nodes it fails
cat >"$tmp/nvlink-policy.yaml" <<'YAML'
apiVersion: podshaper.io/v1alpha1
kind: TopologyPolicy
metadata: {name: g6e-needs-nvlink}
spec:
  nodeSelector: {matchLabels: {node.kubernetes.io/instance-type: g6e.12xlarge}}
  requirements: {minLink: NVLink}
  taintOnFailure: {effect: NoSchedule}
YAML
kc apply -f "$tmp/nvlink-policy.yaml" >/dev/null
check "a policy asking NVLink fails g6e: Validated False (LinkTooSlow)" \
  eventually 20 "False LinkTooSlow" cond $g6e Validated
check "both policies apply to it" eventually 5 "default g6e-needs-nvlink" field $g6e 'policies[*]'
check "kubectl describe node $g6e: condition GPUTopologyValidated False (LinkTooSlow)" \
  eventually 15 '*GPUTopologyValidated*False*LinkTooSlow*slower than NVLink*' bash -c "kubectl --kubeconfig $kubeconfig describe node $g6e | grep GPUTopologyValidated"
check "g6e is tainted podshaper.io/topology-not-validated=LinkTooSlow:NoSchedule" \
  eventually 15 "podshaper.io/topology-not-validated=LinkTooSlow:NoSchedule " taints $g6e
check "the Warning names the slow links" eventually 15 \
  "*Warning*TopologyNotValidated*slower than NVLink*" described_events gtr $g6e
check "p5 is not selected by it" eventually 5 "True RequirementsMet" cond $p5 Validated
check "and not tainted" eventually 1 "" taints $p5
check "the policy's status: Accepted, it selects 1 node, 0 validated, 1 failing ($g6e, LinkTooSlow)" \
  eventually 20 "True 1 0 1 $g6e LinkTooSlow" kc get tpol g6e-needs-nvlink -o jsonpath='{.status.conditions[?(@.type=="Accepted")].status} {.status.selectedNodes} {.status.validatedNodes} {.status.failingNodes} {.status.failing[0].name} {.status.failing[0].reason}'
check "kubectl get tpol shows it: ACCEPTED True, SELECTED 1, VALIDATED 0, FAILING 1" \
  eventually 5 "*ACCEPTED*SELECTED*VALIDATED*FAILING*g6e-needs-nvlink*True*1*0*1*" kc get tpol g6e-needs-nvlink
# A policy the CRD lets through but the operator cannot read (the duration overflows).
kc apply -f - >/dev/null <<'YAML'
apiVersion: podshaper.io/v1alpha1
kind: TopologyPolicy
metadata: {name: ages-overflow}
spec:
  requirements: {maxReportAge: 9999999999999999h}
YAML
check "a policy the operator cannot read: Accepted False (Invalid), naming the field" \
  eventually 20 '*False Invalid*spec.requirements.maxReportAge*expected a duration*leaves this policy out*' \
  kc get tpol ages-overflow -o jsonpath='{.status.conditions[0].status} {.status.conditions[0].reason} {.status.conditions[0].message}'
check "... and it counts no nodes" eventually 1 "" kc get tpol ages-overflow -o jsonpath='{.status.selectedNodes}'
check "the default policy selects every node, its status says" eventually 10 "True $(kc get nodes -o name | wc -l)" \
  kc get tpol default -o jsonpath='{.status.conditions[0].status} {.status.selectedNodes}'
kc delete tpol ages-overflow >/dev/null
kc delete -f "$tmp/nvlink-policy.yaml" >/dev/null
check "deleting the policy removes the taint" eventually 20 "" taints $g6e
check "and validates g6e again" eventually 20 "True RequirementsMet" cond $g6e Validated
check "its Node condition is True again" eventually 15 "True RequirementsMet" \
  kc get node $g6e -o jsonpath='{.status.conditions[?(@.type=="GPUTopologyValidated")].status} {.status.conditions[?(@.type=="GPUTopologyValidated")].reason}'

# --- a stale report
kc patch gtr $p4d --type merge -p '{"spec":{"observedAt":"2020-01-01T00:00:00Z"}}' >/dev/null
check "a report last observed in 2020: Fresh False (ReportStale)" eventually 20 "False ReportStale" cond $p4d Fresh
check "Validated False (ReportStale)" eventually 5 "False ReportStale" cond $p4d Validated
check "label topology-validated=false" eventually 15 false label $p4d topology-validated
check "the agent's heartbeat (--heartbeat 0) writes observedAt" agent_once $p4d $p4d_topo 8gpu-all-ok.p2p-r.txt --heartbeat 0
check "Fresh True again" eventually 20 "True ReportCurrent" cond $p4d Fresh
check "Validated True again" eventually 5 "True RequirementsMet" cond $p4d Validated
check "label topology-validated=true again" eventually 15 true label $p4d topology-validated
# Going stale is no API event: the operator must judge again when the age passes.
check "a heartbeat just before a policy with maxReportAge 8s" agent_once $p4d $p4d_topo 8gpu-all-ok.p2p-r.txt --heartbeat 0
kc apply -f - >/dev/null <<'YAML'
apiVersion: podshaper.io/v1alpha1
kind: TopologyPolicy
metadata: {name: p4d-fresh-8s}
spec:
  nodeSelector: {matchLabels: {node.kubernetes.io/instance-type: p4d.24xlarge}}
  requirements: {maxReportAge: 8s}
YAML
check "with maxReportAge 8s the fresh p4d report is Fresh" \
  eventually 10 "*within the last 8s*" kc get gtr $p4d -o jsonpath='{.status.conditions[?(@.type=="Fresh")].message}'
check "and goes stale by itself 8 s after its heartbeat, with nothing written" \
  eventually 20 "False ReportStale" cond $p4d Fresh
check "then p4d loses topology-validated=true" eventually 15 false label $p4d topology-validated
kc delete topologypolicy p4d-fresh-8s >/dev/null
check "without that policy it is Fresh again (10m)" eventually 20 "True ReportCurrent" cond $p4d Fresh
check "and validated" eventually 15 true label $p4d topology-validated

# --- leader failover
leader=$(replica_of "$(holder)"); standby=$([[ $leader == a ]] && echo b || echo a)
echo "leader: op-$leader (pid ${op_pid[$leader]:-?}), standby: op-$standby"
check "the Lease names a running replica" test "$leader" != "?"
killed_at=$(date +%s.%N)
kill -9 "${op_pid[$leader]}"
wait "${op_pid[$leader]}" 2>/dev/null || true
unset "op_pid[$leader]"
# A change while no replica leads: p5's agent loses its P2P matrix (P2P unknown).
check "while no replica leads, the p5 agent reports without a P2P matrix" agent_once $p5 $p5_topo
before_takeover=$(cond $p5 Validated || true)
if [[ $(holder) == "op-$leader" ]]; then
  check "nobody judges a change while no replica leads" test "$before_takeover" = "True RequirementsMet"
else
  echo "note: the standby took over before the change was written; the leaderless-window check is skipped"
fi
check "op-$standby takes the Lease within leaseDuration + 5 s" \
  eventually $((lease_duration + 5)) "op-$standby" holder
echo "takeover after $(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$killed_at") s"
check "op-$standby's podshaper_operator_leader is 1" eventually 10 1 metric "$standby" podshaper_operator_leader
check "the change made while no replica led is judged: p5 Validated False (P2PNotMeasured)" \
  eventually 20 "False P2PNotMeasured" cond $p5 Validated
check "p5: P2PComplete Unknown" eventually 5 "Unknown P2PNotMeasured" cond $p5 P2PComplete
check "p5: labels p2p=unknown, topology-validated=false" eventually 15 \
  "gpu-count=8 interconnect=nvlink memlock=unlimited p2p=unknown topology-validated=false" labels $p5
check "a change after the takeover: the g6e agent reports P2P NS" agent_once $g6e $g6e_topo 4gpu-ns.p2p-r.txt
check "the new leader judges it: g6e Validated False (P2PUnavailable)" \
  eventually 20 "False P2PUnavailable" cond $g6e Validated
check "label topology-validated=false" eventually 15 false label $g6e topology-validated
check "one more TopologyNotValidated Event on the report (3 in all: P2P, NVLink, P2P)" \
  eventually 15 3 events GPUTopologyReport $g6e TopologyNotValidated
check "and on the Node" eventually 15 3 events Node $g6e TopologyNotValidated
start_operator "$leader"
check "op-$leader restarted is healthy" eventually 30 200 http_code "$leader" /healthz
check "and stands by" eventually 10 0 metric "$leader" podshaper_operator_leader
check "op-$standby keeps the Lease" eventually 1 "op-$standby" holder
leader_was=$leader; leader=$standby; standby=$leader_was

# --- a deleted report: its node loses podshaper's labels
kc delete gtr $g6e >/dev/null
check "deleting g6e's report removes its node's podshaper labels" eventually 20 "" labels $g6e
check "the agent writes it again" agent_once $g6e $g6e_topo 4gpu-all-ok.p2p-r.txt
check "and it is judged: validated" eventually 20 "True RequirementsMet" cond $g6e Validated
check "labels back" eventually 15 \
  "gpu-count=4 interconnect=pcie memlock=unlimited p2p=all topology-validated=true" labels $g6e

# --- a deleted Node: its report is garbage-collected (ownerReference)
kc delete node $p5 >/dev/null
check "deleting Node $p5 removes its report" until_ok 30 bash -c "! kubectl --kubeconfig $kubeconfig get gtr $p5"
check "without a NodeNotFound alarm in between (the garbage collector is given time)" \
  eventually 1 0 events GPUTopologyReport $p5 NodeNotFound

# --- a report of no Node
report ghost-node >"$tmp/ghost.json"
check "a report named ghost-node (no such Node) is created" quiet kc create -f "$tmp/ghost.json"
check "ghost-node: GPUCountMatchesNode False (NodeNotFound)" \
  eventually 20 "False NodeNotFound" cond ghost-node GPUCountMatchesNode
check "ghost-node: Validated False" eventually 5 "False NodeNotFound" cond ghost-node Validated
check "the leader is still healthy" eventually 5 200 http_code "$leader" /healthz
check "and running" kill -0 "${op_pid[$leader]}"
check "the standby too" kill -0 "${op_pid[$standby]}"

# --- a steady cluster: no writes
check "the leader's queue drains" eventually 20 0 metric "$leader" podshaper_operator_queue_depth
check "the leader reports 2 validated nodes" eventually 10 2 metric "$leader" podshaper_operator_reports 'verdict="validated"'
check "and 1 not validated (ghost-node)" eventually 10 1 metric "$leader" podshaper_operator_reports 'verdict="not_validated"'
check "reconciles succeed" eventually 1 "[1-9]*" metric "$leader" podshaper_operator_reconciles_total 'result="ok"'
# The policies' status follows within 2 s of the last verdict: it must agree with the
# Nodes' labels before the quiet window (ghost-node's report has no Node: policies select Nodes).
policy_agrees() {
  local want have
  want="$(kc get nodes -l podshaper.io/topology-validated=true -o name | wc -l) $(kc get nodes -l podshaper.io/topology-validated=false -o name | wc -l)"
  have=$(kc get tpol default -o jsonpath='{.status.validatedNodes} {.status.failingNodes}')
  [[ $want == "$have" ]]
}
check "the default policy's status agrees with the Nodes' labels (validated, failing)" until_ok 15 policy_agrees
check "... 2 validated" eventually 1 2 kc get tpol default -o jsonpath='{.status.validatedNodes}'
writes_by_kind() { curl -sk --max-time 3 "https://127.0.0.1:${op_port[$1]}/metrics" | grep '^podshaper_operator_writes_total' | tr '\n' ' '; }
writes=$(metric "$leader" podshaper_operator_writes_total || echo "?")
by_kind=$(writes_by_kind "$leader")
errors=$(metric "$leader" podshaper_operator_reconciles_total 'result="error"' || echo 0)
sleep 5
writes_after=$(metric "$leader" podshaper_operator_writes_total || echo "?")
[[ $writes == "$writes_after" ]] || echo "    writes by kind: $by_kind -> $(writes_by_kind "$leader")"
errors_after=$(metric "$leader" podshaper_operator_reconciles_total 'result="error"' || echo 0)
echo "leader writes_total: $writes -> $writes_after in 5 s; reconcile errors: $errors -> $errors_after"
check "a steady cluster causes no writes" test "$writes" != "?" -a "$writes" = "$writes_after"
check "nor failing reconciles" test "$errors" = "$errors_after"
check "the standby has written nothing" eventually 1 0 metric "$standby" podshaper_operator_writes_total
# Over the whole run g6e failed three times (P2P NS, NVLink policy, P2P NS after the failover),
# with two replicas and a leader change: one Warning each, on the report and on the Node.
check "over the whole run: 3 TopologyNotValidated Events on g6e's report, one per failure" \
  eventually 1 3 events GPUTopologyReport $g6e TopologyNotValidated
check "and 3 on its Node" eventually 1 3 events Node $g6e TopologyNotValidated

# --- SIGTERM: the leader stops cleanly and the standby takes over
pid=${op_pid[$leader]}
kill -TERM "$pid"
stopped=no
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || { stopped=yes; break; }; sleep 0.1; done
check "SIGTERM stops the leader within 10 s" test $stopped = yes
set +e; wait "$pid"; rc=$?; set -e
unset "op_pid[$leader]"
check "cleanly (exit 0)" test $rc -eq 0
check "the standby takes over" eventually $((lease_duration + 5)) "op-$standby" holder

# --- a cold start over a judged cluster: nothing to write, no Event told twice
kill -TERM "${op_pid[$standby]}"; wait "${op_pid[$standby]}" 2>/dev/null || true; unset "op_pid[$standby]"
events_before=$(kc get events -n default -o name | wc -l)
start_operator c
check "a fresh replica takes the free Lease" eventually $((lease_duration + 5)) "op-c" holder
check "and judges everything: its queue drains" eventually 20 0 metric c podshaper_operator_queue_depth
check "having judged every report" eventually 10 3 metric c podshaper_operator_reports
check "a cold start over a judged cluster writes nothing" eventually 1 0 metric c podshaper_operator_writes_total
sleep 1  # a heartbeat in a new second: a new observedAt, a new generation
check "the agent's heartbeat (a new generation, the same verdict)" agent_once $p4d $p4d_topo 8gpu-all-ok.p2p-r.txt --heartbeat 0
sleep 2
check "is judged and writes nothing either" eventually 1 0 metric c podshaper_operator_writes_total
check "and no Event was added" test "$(kc get events -n default -o name | wc -l)" = "$events_before"

echo "--- kubectl get gtr"
kc get gtr
finish
