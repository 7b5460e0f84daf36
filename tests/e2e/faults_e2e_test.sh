#!/usr/bin/env bash
# End-to-end faults, on one real control plane (scripts/cluster.sh): podshaper keeps its
# promises when things break. Two operator replicas (Lease 4s/3s/1s) manage the webhook's
# certificate, as installed; the webhook runs as local replicas on the cluster's webhook
# port with the operator's certificate files.
#   6. the webhook changes nothing it was not asked to: the MutatingWebhookConfiguration is
#      widened (no objectSelector, CREATE and UPDATE, pods and ConfigMaps) so that the API
#      server sends it everything, and what it stores is compared with controls it never saw
#   1. kube-apiserver stopped and started under the operators', the webhook's and an agent's
#      feet: the informers get 410 Gone and relist, a report written as the API server
#      returns and one written just after are judged, the label change reaches the
#      webhook's placement, and each transition is told by exactly one set of Events
#   3. podshaper-agent killed -9 at random moments of 30 runs over changing fixtures, then
#      restarted: the report is complete, valid, the latest fixture's, and judged
#   2. the leader killed -9; frozen (SIGSTOP) past its lease while the standby takes over
#      and judges a change, then resumed; cut off from the API server by a proxy that holds
#      what it sends, with a status write in flight: that write arrives after the standby
#      took over, carrying the resourceVersion it was computed from, and gets a 409
#   5. the webhook's serving certificate rotated by the operator while pods are created
#   4. webhook replicas (two on one port, SO_REUSEPORT) SIGTERMed, killed -9, hung and
#      killed, while pods are created; then none running (failurePolicy Fail)
# Where this podshaper-webhook cannot share its port (no SO_REUSEPORT), 5 runs with one
# replica and 4's replica faults are skipped (said so with SKIP). Measured numbers are
# printed as "measure: ..." lines, and again at the end.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-faults-cluster}
dir=$PODSHAPER_CLUSTER_DIR
kubeconfig=$dir/kubeconfig
logs=$dir/logs
bin=${PODSHAPER_BIN:-$root/build/bin}
operator=$bin/podshaper-operator
agent=$bin/podshaper-agent
webhook=$bin/podshaper-webhook
p5_topo=$topo/p5.48xlarge-8xH100-nv18.topo-m.txt
p4d_topo=$topo/p4d.24xlarge-8xA100-nv12.topo-m.txt
g6e_topo=$topo/g6e.12xlarge-4xL40S-pcie-node.topo-m.txt
lease_duration=4  # seconds (the operator config below: renewDeadline 3 s, retryPeriod 1 s)
sys=podshaper-system
tmp=$(mktemp -d)
tls=$tmp/tls        # the webhook's certificate files, as the kubelet mounts a Secret
declare -A pid_of=() op_port=()

measure() { echo "measure: $*"; echo "$*" >>"$tmp/measures"; }
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

# --- our processes: spawn NAME LOG CMD...; halt NAME [SIGNAL] (then SIGKILL after 10 s)
spawn() {
  local name=$1 log=$2; shift 2
  echo "=== $(date -u +%FT%TZ) $name: $*" >>"$log"
  "$@" >>"$log" 2>&1 &
  pid_of[$name]=$!
}
halt() {
  local pid=${pid_of[$1]:-}
  [[ -n $pid ]] || return 0
  kill -"${2:-TERM}" "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  { wait "$pid"; } 2>/dev/null || true  # (no "Killed" line from the shell)
  unset "pid_of[$1]"
}
cleanup() {
  local rc=$?
  for name in "${!pid_of[@]}"; do halt "$name"; done
  if [[ $rc -ne 0 || $failures -gt 0 ]]; then  # what CI needs to see
    show_failure_state 40 'operator-*.log' 'webhook-*.log'
  fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- operator replicas
config=$tmp/operator.yaml
cat >"$config" <<YAML
eventNamespace: default
leaderElection:
  namespace: $sys
  name: podshaper-operator
  leaseDuration: ${lease_duration}s
  renewDeadline: 3s
  retryPeriod: 1s
webhookCertificate:
  mode: operator
  namespace: $sys
  secretName: podshaper-webhook-tls
  webhookConfiguration: podshaper
  service: podshaper-webhook
  ipAddresses: [127.0.0.1]
  checkInterval: 1s
YAML
start_operator() {  # start_operator NAME [KUBECONFIG]: identity op-NAME, log logs/operator-NAME.log
  op_port[$1]=$(free_port)
  spawn "op-$1" "$logs/operator-$1.log" "$operator" run --kubeconfig "${2:-$kubeconfig}" --config "$config" \
    --listen "127.0.0.1:${op_port[$1]}" --identity "op-$1"
}
op_metric() { metric_at "https://127.0.0.1:${op_port[$1]}/metrics" "${@:2}"; }
grown() {  # grown REPLICA BEFORE NAME [LABELS]: how much the metric rose since BEFORE
  local v; v=$(op_metric "$1" "${@:3}") || return 1
  python3 -c 'import sys; print(int(float(sys.argv[1]) - float(sys.argv[2])))' "$v" "$2"
}
op_ready() { curl -sfk --max-time 3 -o /dev/null "https://127.0.0.1:${op_port[$1]}/readyz"; }
holder() { kc -n $sys get lease podshaper-operator -o jsonpath='{.spec.holderIdentity}'; }
leader() { local h; h=$(holder); echo "${h#op-}"; }

# --- reports, verdicts, labels, Events (as in operator_e2e_test.sh)
cond() {
  kc get gtr "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status} {.status.conditions[?(@.type==\"$2\")].reason}"
}
label() { kc get node "$1" -o jsonpath="{.metadata.labels.podshaper\.io/$2}"; }
agent_once() {  # agent_once NODE TOPOLOGY [P2P FILE] [agent flags...]
  "$agent" run --node "$1" --fixture "$2" ${3:+--p2p-fixture "$3"} --kubeconfig "$kubeconfig" --once "${@:4}" \
    >>"$logs/agent.log" 2>&1
}
# events_json: the operator's Events in namespace default, one line each:
# "KIND NAME REASON INSTANCE COUNT"
events_lines() {
  kc get events -n default -o json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    if e.get("reportingComponent") != "podshaper-operator": continue
    o = e["involvedObject"]
    print(o["kind"], o["name"], e["reason"], e.get("reportingInstance", "-"), max(e.get("count") or 1, 1))'
}
events_total() { events_lines | awk '{s += $5} END {print s + 0}'; }
# events_settled: events_total once it has not changed for 2 s (Events follow status writes)
events_settled() {
  local a b; a=$(events_total)
  for _ in $(seq 20); do sleep 2; b=$(events_total); [[ $a == "$b" ]] && break; a=$b; done
  echo "$b"
}
events_since() {  # events_since TIME IDENTITY: Events the replica IDENTITY created at TIME or later (1 s resolution)
  kc get events -n default -o json | python3 -c '
import datetime, json, sys
since, who = float(sys.argv[1]), sys.argv[2]
n = 0
for e in json.load(sys.stdin)["items"]:
    if e.get("reportingInstance") != who: continue
    t = datetime.datetime.strptime(e["firstTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    n += t >= int(since)
print(n)' "$1" "$2"
}
events() {  # events KIND NAME REASON: how many times the operator told it
  events_lines | awk -v k="$1" -v n="$2" -v r="$3" '$1 == k && $2 == n && $3 == r {s += $5} END {print s + 0}'
}

# --- the webhook: replicas on one port (SO_REUSEPORT), certificate files from the operator's Secret
secret_field() { kc -n $sys get secret podshaper-webhook-tls -o "jsonpath={.data.$1}" | base64 -d; }
sync_tls() {  # what the kubelet does with a mounted Secret: new files in a new directory, ..data swapped at once
  local d=..$(date +%s%N)
  mkdir -p "$tls/$d"
  secret_field 'tls\.crt' >"$tls/$d/tls.crt"
  secret_field 'tls\.key' >"$tls/$d/tls.key"
  secret_field 'ca\.crt' >"$tls/$d/ca.crt"
  ln -sfn "$d" "$tls/..data_tmp"
  mv -T "$tls/..data_tmp" "$tls/..data"
  for f in tls.crt tls.key ca.crt; do [[ -L $tls/$f ]] || ln -s "..data/$f" "$tls/$f"; done
}
drain_flags=()
start_webhook() {  # start_webhook NAME: a replica on the cluster's webhook port
  spawn "wh-$1" "$logs/webhook-$1.log" "$webhook" serve --listen "127.0.0.1:$WEBHOOK_PORT" \
    --tls-cert "$tls/tls.crt" --tls-key "$tls/tls.key" --kubeconfig "$dir/webhook.kubeconfig" "${drain_flags[@]}"
}
wh_ready() { curl -sf --max-time 3 --cacert "$tls/ca.crt" -o /dev/null "https://127.0.0.1:$WEBHOOK_PORT/readyz"; }
wh_metric() { metric_at "https://127.0.0.1:$WEBHOOK_PORT/metrics" "$@"; }
served_serial() {
  openssl s_client -connect "127.0.0.1:$WEBHOOK_PORT" -CAfile "$tls/ca.crt" -verify_return_error </dev/null 2>/dev/null |
    openssl x509 -noout -serial 2>/dev/null
}
# the API server's open connections to each webhook process: "PID:N ..."
webhook_connections() {
  ss -tnpH state established "( sport = :$WEBHOOK_PORT )" 2>/dev/null |
    grep -o 'pid=[0-9]*' | sort | uniq -c | awk '{sub("pid=", "", $2); printf "%s:%s ", $2, $1}'
}

busiest_replica() {  # the replica (1 or 2) holding most of the API server's connections
  if [[ $(victim_connections 2) -gt $(victim_connections 1) ]]; then echo 2; else echo 1; fi
}
victim_connections() {  # victim_connections N: the API server's connections to replica N
  local pid=${pid_of[wh-$1]}
  webhook_connections | tr ' ' '\n' | awk -F: -v p="$pid" '$1 == p {n = $2} END {print n + 0}'
}

# Pods and dry runs (lib.sh's pod and shaped). No scheduler takes them: they would fill
# the nodes' GPUs, and a bound pod's nodeName would differ from an unbound one's in the
# comparisons of part 6.
export POD_SCHEDULER=faults-test-nobody
namespace() {  # namespace NAME [label=value ...]: created, with its default ServiceAccount
  local name=$1; shift
  kc create namespace "$name" >/dev/null
  [[ $# -gt 0 ]] && kc label namespace "$name" "$@" >/dev/null
  until_ok 30 kc -n "$name" get serviceaccount default
}

# --- pod creates under load: podload.py (one create after another on each of --threads
# connections to the API server, --rate in all, until the stop file appears)
cat >"$tmp/podload.py" <<'PY'
import argparse, http.client, json, os, ssl, threading, time
ap = argparse.ArgumentParser()
for a in ("server", "ca", "cert", "key", "namespace", "prefix", "stop", "out"): ap.add_argument("--" + a, required=True)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rate", type=float, default=10)
a = ap.parse_args()
ctx = ssl.create_default_context(cafile=a.ca)
ctx.load_cert_chain(a.cert, a.key)
host, port = a.server.rsplit(":", 1)
records, lock = [], threading.Lock()

def pod(name):
    res = {"nvidia.com/gpu": "8", "memory": "64Gi", "cpu": "8"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"podshaper.io/inject": "true", "app": "faults-load"},
                         "annotations": {"podshaper.io/dataloader-workers": "8", "podshaper.io/prefetch-factor": "4",
                                         "podshaper.io/batch-shape": "32x3x224x224"}},
            # no scheduler takes them: the load is admission, not scheduling
            "spec": {"schedulerName": "faults-test-nobody",
                     "containers": [{"name": "trainer", "image": "pytorch:2",
                                     "resources": {"limits": res, "requests": res}}],
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}

def worker(t):
    conn, i, period, next_at = None, 0, a.threads / a.rate, time.monotonic()
    while not os.path.exists(a.stop):
        name = "%s-%d-%d" % (a.prefix, t, i)
        i += 1
        rec = {"name": name, "t0": time.time()}
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
            conn.request("POST", "/api/v1/namespaces/%s/pods" % a.namespace, json.dumps(pod(name)),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            rec["code"] = r.status
            if r.status == 201:
                if "podshaper.io/shaped-by" not in json.loads(data)["metadata"].get("annotations", {}):
                    rec["error"] = "created, not shaped"
            else:
                try:
                    rec["error"] = json.loads(data).get("message", "")
                except ValueError:
                    rec["error"] = data[:300].decode(errors="replace")
        except Exception as e:  # the API server's connection: not what is measured, but counted
            rec["code"], rec["error"], conn = 0, "transport: %r" % e, None
        rec["t1"] = time.time()
        with lock:
            records.append(rec)
        next_at += period
        if next_at > time.monotonic():
            time.sleep(next_at - time.monotonic())
        else:
            next_at = time.monotonic()

threads = [threading.Thread(target=worker, args=(t,)) for t in range(a.threads)]
for t in threads: t.start()
for t in threads: t.join()
records.sort(key=lambda r: r["t0"])
failed = [r for r in records if "error" in r]
json.dump({"total": len(records), "ok": len(records) - len(failed), "failed": len(failed), "failures": failed,
           "start": records[0]["t0"] if records else 0, "end": records[-1]["t1"] if records else 0},
          open(a.out, "w"), indent=1)
PY
load_start() {  # load_start NAME: opted-in pods into namespace load, 10/s on 2 connections
  rm -f "$tmp/load-$1.stop"
  spawn "load-$1" "$logs/load.log" python3 "$tmp/podload.py" --server "127.0.0.1:$API_PORT" --ca "$dir/pki/ca.crt" \
    --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" --namespace load --prefix "$1" \
    --threads 2 --rate 10 --stop "$tmp/load-$1.stop" --out "$tmp/load-$1.json"
}
load_stop() {  # load_stop NAME (not in a subshell: it waits for its child); then load_result NAME
  touch "$tmp/load-$1.stop"
  wait "${pid_of[load-$1]}" 2>/dev/null || true
  unset "pid_of[load-$1]"
}
load_result() {  # load_result NAME: "TOTAL FAILED"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["total"], r["failed"])' "$tmp/load-$1.json"
}
load_failures() {  # load_failures NAME: one line per failed create: "END_TIME CODE MESSAGE"
  python3 -c '
import json, sys
for f in json.load(open(sys.argv[1]))["failures"]: print("%.3f %s %s" % (f["t1"], f["code"], f["error"][:240]))' "$tmp/load-$1.json"
}

# --- the proxy that cuts an operator off from the API server: SIGUSR1 holds every byte
# it sends (the answers still come), SIGUSR2 lets them through
cat >"$tmp/proxy.py" <<'PY'
import asyncio, signal, sys, time
port_file, target = sys.argv[1], int(sys.argv[2])
open_gate = asyncio.Event()
held = {"bytes": 0, "chunks": 0}

async def pump(reader, writer, gated):
    try:
        while data := await reader.read(65536):
            if gated and not open_gate.is_set():
                held["bytes"] += len(data); held["chunks"] += 1
                await open_gate.wait()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()

async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        cw.close(); return
    await asyncio.gather(pump(cr, sw, True), pump(sr, cw, False))

def stamp():
    return time.strftime("%H:%M:%S", time.localtime()) + ".%03d" % (time.time() % 1 * 1000)

def freeze():
    open_gate.clear(); held.update(bytes=0, chunks=0); print(stamp(), "proxy: holding", flush=True)

def thaw():
    print(stamp(), "proxy: releasing %(bytes)d bytes held in %(chunks)d chunks" % held, flush=True); open_gate.set()

async def main():
    open_gate.set()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, freeze)
    loop.add_signal_handler(signal.SIGUSR2, thaw)
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f: f.write(str(server.sockets[0].getsockname()[1]))
    import os; os.rename(port_file + ".tmp", port_file)
    async with server: await server.serve_forever()
asyncio.run(main())
PY

#####################################################################################
# A cluster left by a killed run is not reused.
bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
rm -rf "$logs"  # this run's logs only
bash "$root/scripts/cluster.sh" up
source "$dir/env"
for b in "$operator" "$agent" "$webhook"; do [[ -x $b ]] || { echo "$b is missing: build it first" >&2; exit 1; }; done

kc create namespace $sys >/dev/null
kc apply -f "$root/manifests/base/topologypolicy-default.yaml" >/dev/null
start_operator a
start_operator b
check "op-a is ready" until_ok 40 op_ready a
check "op-b is ready" until_ok 40 op_ready b
check "one of them holds the Lease" eventually 20 "op-[ab]" holder
# The webhook's certificate comes from the operator (as installed): the CA into the
# MutatingWebhookConfiguration, the serving certificate into its Secret.
check "the operator makes the webhook's Secret" until_ok 30 kc -n $sys get secret podshaper-webhook-tls
check "and injects its CA" until_ok 30 bash -c "test \"\$(kubectl --kubeconfig $kubeconfig get mutatingwebhookconfiguration podshaper \
  -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d)\" = \"\$(kubectl --kubeconfig $kubeconfig -n $sys get secret \
  podshaper-webhook-tls -o jsonpath='{.data.ca\.crt}' | base64 -d)\""
sync_tls
# cluster.sh's webhook serves the cluster CA's certificate: ours replace it.
bash "$root/scripts/cluster.sh" stop-webhook
# Does this webhook drain on SIGTERM (--shutdown-delay, --drain-timeout)?
if [[ $("$webhook" serve --shutdown-delay 1s --drain-timeout 10s 2>&1) == *"unknown flag"* ]]; then
  echo "note: podshaper-webhook serve has no --shutdown-delay/--drain-timeout yet"
else
  drain_flags=(--shutdown-delay 1s --drain-timeout 10s)
fi
namespace training
namespace load
start_webhook 1
check "webhook replica 1 serves the operator's certificate, cluster cache synced" until_ok 30 wh_ready
check "the API server calls it" eventually 30 "validated=*" shaped probe 8

check "the p5 agent reports" agent_once $p5 "$p5_topo" "$p2p/8gpu-all-ok.p2p-r.txt"
check "the p4d agent reports" agent_once $p4d "$p4d_topo" "$p2p/8gpu-all-ok.p2p-r.txt"
check "the g6e agent reports" agent_once $g6e "$g6e_topo" "$p2p/4gpu-all-ok.p2p-r.txt"
for n in $p5 $p4d $g6e; do check "$n is validated" eventually 30 "True RequirementsMet" cond $n Validated; done
check "g6e's labels: p2p=all" eventually 15 all label $g6e p2p
check "a 4-GPU pod for 4-GPU nodes: the P2P NCCL reserve (g6e has P2P everywhere)" \
  eventually 30 "validated=true gpu-count=4 nccl=p2p" shaped t4 4 4

#####################################################################################
echo "=== 6. the webhook changes nothing it was not asked to change"
namespace faults-plain
namespace faults-optout podshaper.io/inject=disabled
pod shaped-0 8 | kc -n faults-plain create -f - >/dev/null
check "an opted-in pod is shaped (the baseline)" \
  test -n "$(kc -n faults-plain get pod shaped-0 -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}')"
plain_pod() { pod "$1" 8 | python3 -c 'import json, sys; p = json.load(sys.stdin); p["metadata"]["labels"] = {"app": "e2e"}; print(json.dumps(p))'; }
configmap() {
  printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","labels":{"podshaper.io/inject":"true"},"annotations":{"podshaper.io/batch-bytes":"1Mi"}},"data":{"a":"b"}}' "$1"
}
# Controls: the same objects created while the MutatingWebhookConfiguration does not send
# them to the webhook (no label; an opted-out namespace; a ConfigMap).
plain_pod control-plain | kc -n faults-plain create -f - >/dev/null
pod control-optout 8 | kc -n faults-optout create -f - >/dev/null
configmap control-cm | kc -n faults-plain create -f - >/dev/null
# Now the API server sends the webhook everything in these two namespaces: pods and
# ConfigMaps, CREATE and UPDATE, no objectSelector. The webhook must hold back on its own.
kc get mutatingwebhookconfiguration podshaper -o json >"$tmp/mwc-saved.json"
python3 - "$tmp/mwc-saved.json" >"$tmp/mwc-wide.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
w = m["webhooks"][0]
w.pop("objectSelector", None)
w["namespaceSelector"] = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                "values": ["faults-plain", "faults-optout"]}]}
w["rules"] = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
               "resources": ["pods", "configmaps"], "scope": "Namespaced"}]
print(json.dumps(m))
PY
check "the MutatingWebhookConfiguration is widened" quiet kc replace -f "$tmp/mwc-wide.json"
allowed0=$(wh_metric podshaper_admission_reviews_total 'result="allowed"' || echo 0)
# The API server learns the new configuration through a watch: wait until a dry run reaches the webhook.
probe_wide() {
  plain_pod probe | kc -n faults-plain create --dry-run=server -f - >/dev/null 2>&1
  [[ $(wh_metric podshaper_admission_reviews_total 'result="allowed"') != "$allowed0" ]]
}
check "the API server sends the webhook unlabelled pods now" until_ok 30 probe_wide
mutated0=$(wh_metric podshaper_admission_reviews_total 'result="mutated"')
allowed0=$(wh_metric podshaper_admission_reviews_total 'result="allowed"')
denied0=$(wh_metric podshaper_admission_reviews_total 'result="denied"')
kc -n faults-plain get pod shaped-0 -o json >"$tmp/shaped-before.json"
plain_pod wide-plain | kc -n faults-plain create -f - >/dev/null
pod wide-optout 8 | kc -n faults-optout create -f - >/dev/null
configmap wide-cm | kc -n faults-plain create -f - >/dev/null
kc -n faults-plain label pod shaped-0 team=vision >/dev/null
kc -n faults-plain annotate pod shaped-0 example.com/note=relabelled >/dev/null
kc -n faults-plain get pod shaped-0 -o json >"$tmp/shaped-after.json"
mutated1=$(wh_metric podshaper_admission_reviews_total 'result="mutated"')
allowed1=$(wh_metric podshaper_admission_reviews_total 'result="allowed"')
denied1=$(wh_metric podshaper_admission_reviews_total 'result="denied"')
measure "fault 6: webhook answers while widened: allowed +$((allowed1 - allowed0)), mutated +$((mutated1 - mutated0)), denied +$((denied1 - denied0))"
check "the webhook was asked about all 5 (2 pod creates, 2 pod updates, 1 ConfigMap) and allowed each unchanged" \
  test $((allowed1 - allowed0)) -eq 5
check "and changed none" test $((mutated1 - mutated0)) -eq 0
check "nor denied any" test $((denied1 - denied0)) -eq 0
# stored OBJECT_A OBJECT_B: the two stored objects are the same but for their identity
# (name, uid, times) and the service-account token volume's generated name
same_stored() {
  python3 - "$(kc get "$@" -o json)" <<'PY'
import json, re, sys
a, b = json.loads(sys.argv[1])["items"]
def norm(o):
    m = o["metadata"]
    for k in ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"): m.pop(k, None)
    o.pop("status", None)
    return json.loads(re.sub(r"kube-api-access-[a-z0-9]+", "kube-api-access", json.dumps(o)))
if norm(a) != norm(b):
    print(json.dumps(norm(a), indent=1, sort_keys=True)); print(json.dumps(norm(b), indent=1, sort_keys=True)); sys.exit(1)
PY
}
check "an unlabelled pod sent to the webhook is stored exactly as one it never saw" \
  same_stored -n faults-plain pod control-plain wide-plain
check "so is an opted-in pod of a namespace labelled podshaper.io/inject=disabled" \
  same_stored -n faults-optout pod control-optout wide-optout
check "and a ConfigMap (another kind) labelled podshaper.io/inject=true" same_stored -n faults-plain configmap control-cm wide-cm
check "no podshaper volume, hostIPC or annotation on them" bash -c "! kubectl --kubeconfig $kubeconfig get pod -n faults-plain wide-plain -o json |
  grep -q -e podshaper-dshm -e hostIPC -e shaped-by; ! kubectl --kubeconfig $kubeconfig get pod -n faults-optout wide-optout -o json | grep -q -e podshaper-dshm -e hostIPC -e shaped-by"
check "labelling and annotating a shaped pod (UPDATE, sent to the webhook) leave its spec as it was" python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["spec"] == b["spec"], "spec changed"
ann = dict(a["metadata"]["annotations"]); ann["example.com/note"] = "relabelled"
assert b["metadata"]["annotations"] == ann, "annotations: %s" % b["metadata"]["annotations"]
lab = dict(a["metadata"]["labels"]); lab["team"] = "vision"
assert b["metadata"]["labels"] == lab, "labels: %s" % b["metadata"]["labels"]' "$tmp/shaped-before.json" "$tmp/shaped-after.json"
python3 - "$tmp/mwc-saved.json" "$(kc get mutatingwebhookconfiguration podshaper -o json)" >"$tmp/mwc-restore.json" <<'PY'
import json, sys
saved, now = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
for k in ("rules", "objectSelector", "namespaceSelector"):
    now["webhooks"][0][k] = saved["webhooks"][0][k]
print(json.dumps(now))
PY
check "the MutatingWebhookConfiguration is restored" quiet kc replace -f "$tmp/mwc-restore.json"

#####################################################################################
echo "=== 1. kube-apiserver restarted under the watches"
# The g6e agent keeps running, and its node's P2P breaks while the API server is down.
cp "$p2p/4gpu-all-ok.p2p-r.txt" "$tmp/g6e.p2p"
spawn agent-g6e "$logs/agent-g6e.log" "$agent" run --node $g6e --fixture "$g6e_topo" --p2p-fixture "$tmp/g6e.p2p" \
  --kubeconfig "$kubeconfig" --interval 1
sleep 2
check "the looping agent has nothing to write (its report is current)" bash -c "grep -q 'unchanged' $logs/agent-g6e.log"
ev_before=$(events_settled)
for f in "$logs"/operator-*.log "$logs"/webhook-*.log; do wc -l <"$f" >"$f.mark"; done
lines_after_mark() { tail -n +"$(( $(cat "$1.mark") + 1 ))" "$1"; }
down_at=$(now)
# SIGTERM; it stops listening at once, and is SIGKILLed if still running after 5 s
# (with watches open it is: the watches then break instead of ending cleanly).
check "kube-apiserver stops" bash "$root/scripts/cluster.sh" stop-apiserver
cp "$p2p/4gpu-ns.p2p-r.txt" "$tmp/g6e.p2p.new" && mv "$tmp/g6e.p2p.new" "$tmp/g6e.p2p"
sleep 4  # longer than renewDeadline: the leader steps down by its own clock
check "the leader stepped down by its clock while the API server was away" \
  bash -c "$(declare -f lines_after_mark); { lines_after_mark $logs/operator-a.log; lines_after_mark $logs/operator-b.log; } |
    grep -q 'lost the lease: not renewed within renewDeadline'"
check "kube-apiserver starts again over the same etcd" bash "$root/scripts/cluster.sh" start-apiserver
up_at=$(now)
measure "fault 1: API server away $(python3 -c "print(f'{$up_at - $down_at:.1f}')") s (from SIGTERM to /readyz after the restart)"
# A change right after it is back: p4d loses its P2P matrix; and a new report, of no Node.
check "just after the restart, p4d's agent reports without a P2P matrix" agent_once $p4d "$p4d_topo"
"$agent" probe --fixture "$g6e_topo" --p2p-fixture "$p2p/4gpu-all-ok.p2p-r.txt" --format json | python3 -c '
import datetime, json, sys
s = json.load(sys.stdin)
s["observedAt"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"apiVersion": "podshaper.io/v1alpha1", "kind": "GPUTopologyReport", "metadata": {"name": "ghost-node"}, "spec": s}))' \
  >"$tmp/ghost.json"
check "and a report is created (of a node that does not exist)" quiet kc create -f "$tmp/ghost.json"
t=$(wait_until 90 bash -c "[[ \$(kubectl --kubeconfig $kubeconfig get gtr $g6e -o jsonpath='{.status.conditions[?(@.type==\"Validated\")].reason}') == P2PUnavailable ]]")
check "the report changed while the API server was down is judged: g6e P2PUnavailable" test "$t" != timeout
measure "fault 1: g6e (written by its agent when the API server came back) judged $(since "$up_at") s after /readyz"
t=$(wait_until 60 bash -c "[[ \$(kubectl --kubeconfig $kubeconfig get gtr $p4d -o jsonpath='{.status.conditions[?(@.type==\"Validated\")].reason}') == P2PNotMeasured ]]")
check "the report changed just after the restart is judged: p4d P2PNotMeasured" test "$t" != timeout
measure "fault 1: p4d judged $(since "$up_at") s after /readyz"
check "the report created just after the restart is judged: ghost-node NodeNotFound" \
  eventually 60 "False NodeNotFound" cond ghost-node GPUCountMatchesNode
check "g6e's label p2p=partial" eventually 30 partial label $g6e p2p
measure "fault 1: g6e labelled p2p=partial $(since "$up_at") s after /readyz"
check "the webhook's cache sees the label: a 4-GPU pod now gets the SHM-transport NCCL /dev/shm reserve" \
  eventually 60 "validated=true gpu-count=4 nccl=shm-transport" shaped t4 4 4
measure "fault 1: the webhook placed by the new label $(since "$up_at") s after /readyz"
check "a leader again" eventually 30 "op-[ab]" holder
check "op-a is ready" until_ok 30 op_ready a
check "op-b is ready" until_ok 30 op_ready b
gone=$(for f in "$logs"/operator-*.log "$logs"/webhook-*.log; do lines_after_mark "$f"; done | grep -c 'expired' || true)
relisted=$(for f in "$logs"/operator-*.log "$logs"/webhook-*.log; do lines_after_mark "$f"; done | grep -c 'relisted' || true)
rewatched=$(for f in "$logs"/operator-*.log "$logs"/webhook-*.log; do lines_after_mark "$f"; done | grep -c 'watch failed' || true)
measure "fault 1: after the restart the informers logged $gone 410 Gone (resourceVersion expired), $relisted relists, $rewatched failed watches (retried)"
check "a watch got 410 Gone after the restart, and that informer relisted" test "$gone" -gt 0 -a "$relisted" -ge "$gone"
for f in "$logs"/operator-*.log "$logs"/webhook-*.log; do
  { lines_after_mark "$f" | grep -E 'expired|relisted' | head -3 | sed "s|^|  $(basename "$f"): |"; } || true
done
# Events: one per real transition, on the report and (Warnings) on the Node.
ev_after=$(events_settled)
measure "fault 1: operator Events $ev_before -> $ev_after"
check "10 Events: g6e and p4d each TopologyNotValidated and a P2P warning, on report and Node; ghost-node 2 warnings" \
  test $((ev_after - ev_before)) -eq 10
check "g6e: one TopologyNotValidated on its report" eventually 1 1 events GPUTopologyReport $g6e TopologyNotValidated
check "one P2PUnavailable on its Node" eventually 1 1 events Node $g6e P2PUnavailable
check "p4d: one P2PNotMeasured on its report" eventually 1 1 events GPUTopologyReport $p4d P2PNotMeasured
# Back to healthy for what follows.
kc delete gtr ghost-node >/dev/null
cp "$p2p/4gpu-all-ok.p2p-r.txt" "$tmp/g6e.p2p.new" && mv "$tmp/g6e.p2p.new" "$tmp/g6e.p2p"
agent_once $p4d "$p4d_topo" "$p2p/8gpu-all-ok.p2p-r.txt"
check "g6e validated again" eventually 30 "True RequirementsMet" cond $g6e Validated
check "p4d validated again" eventually 30 "True RequirementsMet" cond $p4d Validated
halt agent-g6e

#####################################################################################
echo "=== 3. the agent killed -9 while it writes"
# Variants of g6e's P2P matrix, each with some pairs NS (so Validated stays False for
# the same reason: no Event after the first transition), the last one unlike any other.
python3 - "$p2p/4gpu-all-ok.p2p-r.txt" "$tmp" <<'PY'
import random, sys
src, out = sys.argv[1], sys.argv[2]
lines = open(src).read().split("\n")
pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
rng = random.Random(7)
for v in range(31):
    ns = {(0, 3)} if v == 30 else set(rng.sample([p for p in pairs if p != (0, 3)], rng.randint(1, 4)))
    rows = []
    for l in lines:
        cells = l.split("\t")
        if l.startswith(" GPU") and len(cells) >= 5:
            i = int(cells[0].strip()[3:])
            for j in range(4):
                if (min(i, j), max(i, j)) in ns: cells[1 + j] = "NS"
        rows.append("\t".join(cells))
    open("%s/variant-%d.p2p" % (out, v), "w").write("\n".join(rows))
PY
ev_before=$(events_settled)
rv_of() { kc get gtr $g6e -o jsonpath='{.metadata.resourceVersion}'; }
kills=0; landed=0; variants=30
for v in $(seq 0 $((variants - 1))); do
  cp "$tmp/variant-$v.p2p" "$tmp/g6e.p2p.new" && mv "$tmp/g6e.p2p.new" "$tmp/g6e.p2p"
  rv=$(rv_of)
  "$agent" run --node $g6e --fixture "$g6e_topo" --p2p-fixture "$tmp/g6e.p2p" --kubeconfig "$kubeconfig" \
    --interval 1 >>"$logs/agent-kill.log" 2>&1 &
  apid=$!
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  kill -9 $apid 2>/dev/null && kills=$((kills + 1))
  wait $apid 2>/dev/null || true
  [[ $(rv_of) != "$rv" ]] && landed=$((landed + 1))
done
measure "fault 3: $kills agents killed -9 at random 0-400 ms after start; the report changed before the kill in $landed of $variants runs"
check "the kills landed both before and after writes" test "$landed" -gt 0 -a "$landed" -lt $variants
# The last fixture: only GPU0-GPU3 without P2P. The restarted agent must make the report say so.
cp "$tmp/variant-30.p2p" "$tmp/g6e.p2p.new" && mv "$tmp/g6e.p2p.new" "$tmp/g6e.p2p"
"$agent" probe --fixture "$g6e_topo" --p2p-fixture "$tmp/g6e.p2p" --format json >"$tmp/want.json"
restarted_at=$(date +%s)
spawn agent-g6e "$logs/agent-g6e.log" "$agent" run --node $g6e --fixture "$g6e_topo" --p2p-fixture "$tmp/g6e.p2p" \
  --kubeconfig "$kubeconfig" --interval 1
current() {
  python3 - "$tmp/want.json" "$(kc get gtr $g6e -o json)" "$restarted_at" <<'PY'
import datetime, json, sys
want, got, since = json.load(open(sys.argv[1])), json.loads(sys.argv[2])["spec"], int(sys.argv[3])
observed = datetime.datetime.strptime(got.pop("observedAt"), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
want.pop("observedAt", None)
assert got == want, "the report is not the latest fixture"
assert observed.timestamp() >= since - 1, "observedAt %s is older than the restart" % observed
PY
}
check "restarted, the agent makes the report the latest fixture's, observedAt fresh" until_ok 30 current
check "complete: 4 GPUs, all 6 pairs, each pair with its link and P2P status" python3 -c '
import json, sys
s = json.loads(sys.argv[1])["spec"]
assert sorted(g["index"] for g in s["gpus"]) == [0, 1, 2, 3], s["gpus"]
assert sorted((p["a"], p["b"]) for p in s["pairs"]) == [(a, b) for a in range(4) for b in range(a + 1, 4)], s["pairs"]
assert all(p["link"] and p["p2p"]["read"] in ("OK", "NS") for p in s["pairs"]), s["pairs"]' "$(kc get gtr $g6e -o json)"
kc get gtr $g6e -o json >"$tmp/stored.json"
check "and valid against the CRD's schema (a server-side dry run of the stored object)" \
  quiet kc replace --dry-run=server -f "$tmp/stored.json"
check "the operator's verdict follows: P2PUnavailable naming only GPU0-GPU3" eventually 30 \
  "False P2PUnavailable*1 of 6*GPU0-GPU3*" bash -c "kubectl --kubeconfig $kubeconfig get gtr $g6e -o jsonpath='{.status.conditions[?(@.type==\"P2PComplete\")].status} {.status.conditions[?(@.type==\"P2PComplete\")].reason} {.status.conditions[?(@.type==\"P2PComplete\")].message}'"
check "g6e's label p2p=partial" eventually 15 partial label $g6e p2p
ev_after=$(events_settled)
measure "fault 3: operator Events $ev_before -> $ev_after over $variants agent runs"
check "one transition, told once: 4 Events (TopologyNotValidated and P2PUnavailable, on report and Node)" \
  test $((ev_after - ev_before)) -eq 4
halt agent-g6e
agent_once $g6e "$g6e_topo" "$p2p/4gpu-all-ok.p2p-r.txt"
check "g6e validated again" eventually 30 "True RequirementsMet" cond $g6e Validated

#####################################################################################
echo "=== 2. the leader killed, frozen, cut off"
L=$(leader); S=$([[ $L == a ]] && echo b || echo a)
echo "leader: op-$L, standby: op-$S"
killed_at=$(now)
halt "op-$L" 9
t=$(wait_until $((lease_duration + 10)) bash -c "[[ \$(kubectl --kubeconfig $kubeconfig -n $sys get lease podshaper-operator -o jsonpath='{.spec.holderIdentity}') == op-$S ]]")
check "kill -9: op-$S takes over within leaseDuration + 10 s" test "$t" != timeout
measure "fault 2: takeover after kill -9 of the leader: $t s (leaseDuration ${lease_duration} s)"
start_operator "$L"
check "op-$L restarted is ready" until_ok 40 op_ready "$L"
check "and stands by" eventually 10 0 op_metric "$L" podshaper_operator_leader

# SIGSTOP: frozen longer than the lease. The standby takes over and judges a change;
# the old leader, resumed, must see by its own clock that it no longer leads.
L=$S; S=$([[ $L == a ]] && echo b || echo a)
writes_before=$(op_metric "$L" podshaper_operator_writes_total)
skipped_before=$(op_metric "$L" podshaper_operator_reconciles_total 'controller="report",result="not_leader"' || echo 0)
ev_before=$(events_settled)
stopped_at=$(now)
kill -STOP "${pid_of[op-$L]}"
t=$(wait_until $((lease_duration + 10)) bash -c "[[ \$(kubectl --kubeconfig $kubeconfig -n $sys get lease podshaper-operator -o jsonpath='{.spec.holderIdentity}') == op-$S ]]")
check "SIGSTOP: op-$S takes over from the frozen op-$L" test "$t" != timeout
measure "fault 2: takeover from a frozen leader: $t s"
check "a change while op-$L is frozen: g6e's agent reports P2P NS" agent_once $g6e "$g6e_topo" "$p2p/4gpu-ns.p2p-r.txt"
check "op-$S judges it" eventually 20 "False P2PUnavailable" cond $g6e Validated
check "and labels g6e p2p=partial" eventually 15 partial label $g6e p2p
sleep 1  # op-$S's writes done
rv_before_cont=$(kc get gtr $g6e -o jsonpath='{.metadata.resourceVersion}')
node_rv_before_cont=$(kc get node $g6e -o jsonpath='{.metadata.resourceVersion}')
kill -CONT "${pid_of[op-$L]}"
resumed_at=$(date +%s)
check "op-$L, resumed, says it lost the lease" eventually 15 "*lost the lease*" bash -c "tail -n 30 $logs/operator-$L.log"
check "its podshaper_operator_leader is 0" eventually 10 0 op_metric "$L" podshaper_operator_leader
check "it saw the change and refused to judge it as leader (not_leader reconciles)" \
  eventually 10 "[1-9]*" grown "$L" "$skipped_before" podshaper_operator_reconciles_total 'controller="report",result="not_leader"'
sleep 3
writes_after=$(op_metric "$L" podshaper_operator_writes_total)
measure "fault 2: the resumed op-$L's writes_total $writes_before -> $writes_after"
check "the resumed old leader wrote nothing" test "$writes_before" = "$writes_after"
check "the report holds the new leader's verdict" eventually 1 "False P2PUnavailable" cond $g6e Validated
check "nothing written to g6e's report or Node since op-$L resumed (resourceVersions unchanged)" \
  test "$(kc get gtr $g6e -o jsonpath='{.metadata.resourceVersion}') $(kc get node $g6e -o jsonpath='{.metadata.resourceVersion}')" = \
  "$rv_before_cont $node_rv_before_cont"
check "no Event from op-$L since it was frozen" test "$(events_since "$stopped_at" "op-$L")" = 0
ev_after=$(events_settled)
check "the transition told once: 4 Events" test $((ev_after - ev_before)) -eq 4
agent_once $g6e "$g6e_topo" "$p2p/4gpu-all-ok.p2p-r.txt"
check "g6e validated again" eventually 30 "True RequirementsMet" cond $g6e Validated

# Cut off with a write in flight: op-c talks to the API server through a proxy that
# holds everything op-c sends. op-c sends a status write; its renewals are held too, so
# it steps down; op-d takes over and judges newer changes; then the held write arrives,
# with the resourceVersion op-c read: a 409, and nothing stale lands.
halt op-a; halt op-b  # SIGTERM releases the lease
spawn proxy "$logs/proxy.log" python3 "$tmp/proxy.py" "$tmp/proxy.port" "$API_PORT"
until_ok 10 test -s "$tmp/proxy.port"
sed "s|https://127.0.0.1:$API_PORT|https://127.0.0.1:$(cat "$tmp/proxy.port")|" "$kubeconfig" >"$tmp/proxied.kubeconfig"
start_operator c "$tmp/proxied.kubeconfig"
check "op-c (through the proxy) takes the free lease" eventually $((lease_duration + 10)) op-c holder
check "op-c is ready" until_ok 40 op_ready c
start_operator d
check "op-d stands by" until_ok 40 op_ready d
check "op-c's queue is drained" eventually 20 0 op_metric c podshaper_operator_queue_depth
c_status_writes=$(op_metric c podshaper_operator_writes_total 'kind="status"')
c_conflicts=$(op_metric c podshaper_operator_conflicts_total)
kill -USR1 "${pid_of[proxy]}"
sleep 0.3
cut_at=$(now)
check "cut off: g6e's agent reports P2P NS (op-c hears it, its write is held)" \
  agent_once $g6e "$g6e_topo" "$p2p/4gpu-ns.p2p-r.txt"
t=$(wait_until $((lease_duration + 15)) bash -c "[[ \$(kubectl --kubeconfig $kubeconfig -n $sys get lease podshaper-operator -o jsonpath='{.spec.holderIdentity}') == op-d ]]")
check "op-d takes over from the cut-off op-c" test "$t" != timeout
measure "fault 2: takeover from a leader cut off from the API server: $t s"
check "op-c stepped down by its own clock" eventually 10 0 op_metric c podshaper_operator_leader
# log_time FILE PATTERN: the time (epoch seconds) of the last log line matching PATTERN
log_time() {
  grep -- "$2" "$1" | tail -1 | python3 -c '
import datetime, sys
print(datetime.datetime.strptime(sys.stdin.read()[1:24], "%Y-%m-%d %H:%M:%S.%f").timestamp())'
}
stepped=$(log_time "$logs/operator-c.log" "lost the lease")
took=$(log_time "$logs/operator-d.log" "took over from op-c")
lead=$(python3 -c "print(f'{$took - $stepped:.2f}')")
measure "fault 2: op-c stepped down (onStoppedLeading) $lead s before op-d took over"
check "op-c stepped down before op-d took over" python3 -c "assert $took > $stepped"
check "op-d judges g6e: P2PUnavailable" eventually 20 "False P2PUnavailable" cond $g6e Validated
check "then g6e recovers and op-d judges that too" agent_once $g6e "$g6e_topo" "$p2p/4gpu-all-ok.p2p-r.txt"
check "g6e Validated True (op-d)" eventually 20 "True RequirementsMet" cond $g6e Validated
rv_before_thaw=$(kc get gtr $g6e -o jsonpath='{.metadata.resourceVersion}')
kill -USR2 "${pid_of[proxy]}"
measure "fault 2: op-c cut off for $(since "$cut_at") s; $(tail -1 "$logs/proxy.log")"
check "op-c's held status write is refused: a 409 (conflicts_total +1 or more)" \
  eventually 20 "[1-9]*" grown c "$c_conflicts" podshaper_operator_conflicts_total
check "op-c says so in its log" eventually 5 "*report $g6e: changed since read*" cat "$logs/operator-c.log"
sleep 3
check "none of op-c's status writes landed" eventually 1 "$c_status_writes" op_metric c podshaper_operator_writes_total 'kind="status"'
check "g6e still holds op-d's verdict (True), not op-c's stale False" eventually 1 "True RequirementsMet" cond $g6e Validated
check "nothing was written to the report after the held write was let through (resourceVersion unchanged)" \
  test "$(kc get gtr $g6e -o jsonpath='{.metadata.resourceVersion}')" = "$rv_before_thaw"
check "no Event from op-c since it was cut off" test "$(events_since "$cut_at" op-c)" = 0
check "and its label p2p=all" eventually 1 all label $g6e p2p
measure "fault 2: op-c conflicts_total $c_conflicts -> $(op_metric c podshaper_operator_conflicts_total), status writes $c_status_writes -> $(op_metric c podshaper_operator_writes_total 'kind="status"')"
halt op-c; halt proxy
start_operator a
check "op-a stands by behind op-d" until_ok 40 op_ready a

#####################################################################################
echo "=== 5. the webhook's certificate rotated under load"
start_webhook 2
if ! until_ok 30 kill -0 "${pid_of[wh-2]}" || ! sleep 2 || ! kill -0 "${pid_of[wh-2]}" 2>/dev/null; then
  echo "note: a second webhook replica cannot share the port (no SO_REUSEPORT): one replica"
  tail -1 "$logs/webhook-2.log"
  unset "pid_of[wh-2]"
  replicas=1
else
  replicas=2
fi
check "the webhook answers" until_ok 30 wh_ready
first=$(served_serial)
load_start rotate
sleep 3
kc -n $sys annotate secret podshaper-webhook-tls podshaper.io/renew=now >/dev/null
check "the operator issues a new serving certificate" until_ok 30 bash -c \
  "test -z \"\$(kubectl --kubeconfig $kubeconfig -n $sys get secret podshaper-webhook-tls -o jsonpath='{.metadata.annotations.podshaper\.io/renew}')\""
sync_tls
all_new() { for _ in $(seq 12); do [[ $(served_serial) != "$first" && -n $(served_serial) ]] || return 1; done; }
t=$(wait_until 30 all_new)
check "every replica serves it" test "$t" != timeout
measure "fault 5: the new certificate served by all $replicas replicas $t s after the files changed"
sleep 3
load_stop rotate
read -r total failed <<<"$(load_result rotate)"
measure "fault 5: $total pod creates during the rotation, $failed failed"
load_failures rotate | head -5
check "no create failed during the rotation" test "$failed" = 0 -a "$total" -gt 20
check "the webhook reloaded its files without an error" eventually 5 0 wh_metric podshaper_tls_certificate_reload_errors_total

#####################################################################################
echo "=== 4. a webhook replica stopped and killed under load"
if [[ $replicas -lt 2 ]]; then
  echo "SKIP: SIGTERM and kill -9 of one of two replicas (SO_REUSEPORT not available)"
else
  # SIGTERM (the drain: --shutdown-delay, then --drain-timeout), twice, each time the
  # replica holding most of the API server's connections
  load_start sigterm
  sleep 2
  for round in 1 2; do
    victim=$(busiest_replica)
    conns=$(victim_connections "$victim")
    echo "SIGTERM to replica $victim (pid ${pid_of[wh-$victim]}; API server connections per pid: $(webhook_connections))"
    check "the replica stopped was serving: $conns of the API server's connections" test "$conns" -gt 0
    term_at=$(now)
    halt "wh-$victim"
    measure "fault 4: the SIGTERMed replica exited after $(since "$term_at") s"
    sleep 1
    start_webhook "$victim"
    check "replica $victim back" until_ok 30 wh_ready
    sleep 1
  done
  load_stop sigterm
  read -r total failed <<<"$(load_result sigterm)"
  measure "fault 4: 2 × SIGTERM of a replica under load: $total creates, $failed failed"
  load_failures sigterm | head -5
  check "SIGTERM (drain): no create failed" test "$failed" = 0 -a "$total" -gt 20

  # kill -9, three times, each time the replica holding most of the API server's connections
  load_start kill
  sleep 2
  kills=(); conns_total=0
  for round in 1 2 3; do
    victim=$(busiest_replica)
    conns=$(victim_connections "$victim")
    conns_total=$((conns_total + conns))
    echo "kill -9 of replica $victim (pid ${pid_of[wh-$victim]}; API server connections per pid: $(webhook_connections))"
    kills+=("$(now)")
    halt "wh-$victim" 9
    sleep 1.5
    start_webhook "$victim"
    until_ok 30 wh_ready
    sleep 1
  done
  load_stop kill
  read -r total failed <<<"$(load_result kill)"
  measure "fault 4: 3 × kill -9 of a replica under load: $total creates, $failed failed (the killed replicas held $conns_total of the API server's connections)"
  load_failures kill | head -10
  near_a_kill() {  # failures that did not end within 2 s after a kill
    load_failures "$1" | awk -v ks="${kills[*]}" 'BEGIN {n = split(ks, k, " ")}
      {ok = 0; for (i = 1; i <= n; i++) if ($1 >= k[i] && $1 <= k[i] + 2) ok = 1; if (!ok) print}' | wc -l
  }
  check "kill -9: no failure but right after a kill (within 2 s)" test "$(near_a_kill kill)" = 0
  check "and none for a reason other than the webhook call" \
    test "$(load_failures kill | grep -vc 'failed calling webhook' || true)" = 0
  check "at most one per connection the killed replicas held (the requests in flight there)" test "$failed" -le "$conns_total"

  # A replica that hangs (SIGSTOP) with requests in flight, then is killed: exactly those fail.
  load_start hang
  sleep 2
  victim=$(busiest_replica)
  echo "SIGSTOP, 1 s, kill -9 of replica $victim (pid ${pid_of[wh-$victim]}; API server connections per pid: $(webhook_connections))"
  kills=("$(now)")
  kill -STOP "${pid_of[wh-$victim]}"
  sleep 1
  halt "wh-$victim" 9
  sleep 1
  start_webhook "$victim"
  until_ok 30 wh_ready
  sleep 1
  load_stop hang
  read -r total failed <<<"$(load_result hang)"
  measure "fault 4: a replica hung 1 s then killed -9 under load: $total creates, $failed failed"
  load_failures hang | head -10
  check "hung then killed: the requests it held fail (at least one)" test "$failed" -gt 0
  check "only those: every failure ended within 3 s after the hang began" \
    test "$(load_failures hang | awk -v k="${kills[0]}" '$1 < k || $1 > k + 3' | wc -l)" = 0
  check "each a failed webhook call" test "$(load_failures hang | grep -vc 'failed calling webhook' || true)" = 0
fi

# No replica at all: failurePolicy Fail refuses opted-in pods, and nothing else is touched.
for n in 1 2; do halt "wh-$n"; done
set +e; pod down-0 8 | kc -n training create -f - >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "with no webhook running an opted-in pod is refused" test $rc -ne 0
check "saying which webhook failed" grep -q 'failed calling webhook "pods.podshaper.io"' "$tmp/err"
cat "$tmp/err"
check "a pod without the label is created" quiet bash -c "$(declare -f plain_pod pod); plain_pod down-plain | kubectl --kubeconfig $kubeconfig -n training create -f -"
check "an opted-in pod in a namespace labelled podshaper.io/inject=disabled is created" \
  quiet bash -c "$(declare -f pod); pod down-optout 8 | kubectl --kubeconfig $kubeconfig -n faults-optout create -f -"
check "and one in kube-system" quiet bash -c "$(declare -f pod); pod down-system 8 | kubectl --kubeconfig $kubeconfig -n kube-system create -f -"
echo "--- measured"
cat "$tmp/measures"
finish
