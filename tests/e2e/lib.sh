# Helpers shared by the end-to-end tests (after tests/cli/lib.sh).

# kubectl is the one built with the control plane under test (scripts/controlplane-build.sh),
# never the machine's: a v1.37 API server allows kubectl v1.36 to v1.38 only.
PATH="${PODSHAPER_CONTROLPLANE_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/controlplane}:$PATH"
export PATH
quiet() { "$@" >/dev/null; }

# eventually SECONDS WANT CMD...: retry CMD until its output matches WANT (a bash glob;
# plain text matches itself); on timeout, say what it printed last.
eventually() {
  local deadline=$((SECONDS + $1)) want=$2 got
  shift 2
  while :; do
    got=$("$@" 2>&1) || true
    # shellcheck disable=SC2053  # WANT is a pattern on purpose
    [[ $got == $want ]] && return 0
    if [[ $SECONDS -ge $deadline ]]; then
      echo "  wanted: $want" >&2; echo "  got:    ${got:0:2000}" >&2
      return 1
    fi
    sleep 0.3
  done
}
# until_ok SECONDS CMD...: retry CMD until it succeeds
until_ok() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [[ $SECONDS -lt $deadline ]] || return 1; sleep 0.3; done
}

# Free ports below the kernel's ephemeral range (as scripts/cluster.sh chooses them).
free_port() {
  python3 - <<'PY'
import random, socket
while True:
    port = random.randint(20000, 31999)
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", port))
        except OSError: continue
    print(port); break
PY
}

# metric_at URL NAME [LABELS]: the sum of a Prometheus metric's samples at URL (those
# whose labels contain LABELS); fails, saying so, when there is no such sample.
metric_at() {
  curl -sk --max-time 3 "$1" |
    awk -v n="$2" -v m="${3:-}" '
      ($1 == n || index($1, n "{") == 1) && (m == "" || index($1, m)) { s += $2; found = 1 }
      END { if (!found) { print "no sample of " n (m == "" ? "" : " " m); exit 1 } printf "%g\n", s }'
}
# now: the wall clock in seconds with fractions; since T: seconds from T to now, one decimal
now() { date +%s.%N; }
since() { python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }
# wait_until SECONDS CMD...: until_ok, and print how long it took (seconds, one decimal);
# prints "timeout" and fails when it did not happen in time
wait_until() {
  local t0; t0=$(now)
  if until_ok "$@"; then since "$t0"; else echo timeout; return 1; fi
}

# A training pod (as in e2e_test.sh): pod NAME GPUS [podshaper.io/gpu-count nodeSelector].
# POD_SCHEDULER: its schedulerName (a scheduler that does not exist leaves it unbound).
pod() {
  python3 - "$@" <<'PY'
import json, os, sys
name, gpus = sys.argv[1], sys.argv[2]
res = {"nvidia.com/gpu": gpus, "memory": "64Gi", "cpu": "8"}
# one node's job (torchrun's PET_NNODES=1; POD_NNODES for others): the NCCL reserve then
# follows the node's P2P label
nnodes = os.environ.get("POD_NNODES", "1")
spec = {"containers": [{"name": "trainer", "image": "pytorch:2", "resources": {"limits": res, "requests": res},
                        "env": [{"name": "PET_NNODES", "value": nnodes}]}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
if os.environ.get("POD_SCHEDULER"): spec["schedulerName"] = os.environ["POD_SCHEDULER"]
if len(sys.argv) > 3: spec["nodeSelector"] = {"podshaper.io/gpu-count": sys.argv[3]}
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": name, "labels": {"podshaper.io/inject": "true", "app": "e2e"},
    "annotations": {"podshaper.io/dataloader-workers": "8", "podshaper.io/prefetch-factor": "4",
                    "podshaper.io/batch-shape": "32x3x224x224", "podshaper.io/batch-dtype": "float32"}},
  "spec": spec}))
PY
}
# shaped_across NODES NAME GPUS [SELECTOR]: shaped, for a job across NODES nodes (PET_NNODES)
shaped_across() { POD_NNODES=$1 shaped "${@:2}"; }
# shaped NAME GPUS [SELECTOR]: how the webhook shapes the pod (a server-side dry run), in one line:
# "validated=V gpu-count=G nccl=p2p|shm-transport|net|none" from its required node affinity
# and its podshaper.io/shm-formula (the transport its NCCL reserve is for: P2P between all
# pairs, NCCL's SHM transport, or NET), or "denied: MESSAGE"
shaped() {
  local out
  # stderr carries the webhook's warnings
  if out=$(pod "$@" | kc -n training create --dry-run=server -o json -f - 2>"$tmp/shaped.err"); then
    python3 -c '
import json, sys
p = json.load(sys.stdin)
f = p["metadata"].get("annotations", {}).get("podshaper.io/shm-formula", "")
aff = (p["spec"].get("affinity") or {}).get("nodeAffinity") or {}
req = {}
for t in (aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []:
    for e in t.get("matchExpressions") or []:
        if e.get("operator") == "In": req[e["key"]] = ",".join(e.get("values") or [])
nccl = ("none" if "; no NCCL reserve" in f else "p2p" if "(P2P " in f else "shm-transport" if "(SHM " in f
        else "net" if "(NET" in f else "?(" + f + ")")
print("validated=%s gpu-count=%s nccl=%s" % (req.get("podshaper.io/topology-validated", "-"),
      req.get("podshaper.io/gpu-count", "-"), nccl))' <<<"$out"
  else
    echo "denied: $(tr '\n' ' ' <"$tmp/shaped.err")"
  fi
}

# show_failure_state LINES GLOB...: what CI needs to see when a test failed: the last
# LINES lines of $logs/GLOB (the components under test), 15 of every other log, and
# the reports and Events when the API server still answers (kc).
show_failure_state() {
  local lines=$1 f g mine; shift
  for g in "$@"; do for f in "$logs"/$g; do [[ -f $f ]] && { echo "--- $f"; tail -"$lines" "$f"; }; done; done
  for f in "$logs"/*.log; do
    mine=no
    for g in "$@"; do [[ $f == "$logs"/$g ]] && mine=yes; done
    [[ $mine == yes ]] || { echo "--- $f"; tail -15 "$f"; }
  done
  if kc get --raw /readyz >/dev/null 2>&1; then
    echo "--- kubectl get gtr -o wide"; kc get gtr -o wide 2>&1 || true
    echo "--- kubectl get events -n default"; kc get events -n default 2>&1 | tail -40 || true
  fi
}

# The repository's fixtures, and the three GPU nodes cluster.sh makes from them.
e2e_fixtures_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
topo=$e2e_fixtures_root/tests/fixtures/topologies
p2p=$e2e_fixtures_root/tests/fixtures/p2p
p5=p5-48xlarge-h100-0
p4d=p4d-24xlarge-a100-0
g6e=g6e-12xlarge-l40s-0

# node_test_cleanup RC: the EXIT trap of a real-node test: on failure, the node's logs, the
# control plane's and the installed pods'; then the cluster down and $tmp removed.
node_test_cleanup() {
  if [[ $1 -ne 0 || $failures -gt 0 ]]; then  # what CI needs to see
    for f in "$dir"/node/logs/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
    show_failure_state 20 'kube-apiserver.log'
    show_installed_pods
  fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}

# show_installed_pods: for a failed test with podshaper installed as pods (kc): every pod,
# the last lines of each podshaper pod's containers, and podshaper-system's Events.
show_installed_pods() {
  kc get --raw /readyz >/dev/null 2>&1 || return 0
  kc get pods -A -o wide 2>&1 || true
  local p
  for p in $(kc -n podshaper-system get pods -o name 2>/dev/null); do
    echo "--- kubectl logs $p"; kc -n podshaper-system logs "$p" --all-containers --tail 25 2>&1 || true
  done
  for p in $(kc -n podshaper-node get pods -o name 2>/dev/null); do
    echo "--- kubectl -n podshaper-node logs $p"; kc -n podshaper-node logs "$p" --tail 40 2>&1 || true
  done
  kc -n podshaper-system get events --sort-by .lastTimestamp 2>&1 | tail -30 || true
}

# busybox_shaped_pod NAME APP COMMAND: a shaped pod of one GPU on the real node ($node;
# placement: shared, so 161Mi of /dev/shm with these annotations) running COMMAND in
# Debian's busybox image, as YAML. SCHEDULING_GATE=yes holds it unscheduled until the gate
# is removed.
busybox_shaped_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: ml
  labels: {podshaper.io/inject: "true", app: $2}
  annotations:
    podshaper.io/dataloader-workers: "2"
    podshaper.io/prefetch-factor: "2"
    podshaper.io/batch-bytes: 4Mi
    podshaper.io/placement: shared
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  schedulingGates: $([[ ${SCHEDULING_GATE:-no} == yes ]] && echo '[{name: podshaper.io/e2e}]' || echo '[]')
  nodeSelector: {kubernetes.io/hostname: $node}
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - name: trainer
    image: podshaper.test/busybox:1
    command: [sh, -c, '$3']
    resources:
      limits: {nvidia.com/gpu: 1, memory: 128Mi, cpu: 100m}
      requests: {nvidia.com/gpu: 1, memory: 128Mi, cpu: 100m}
YAML
}
