#!/usr/bin/env bash
# End-to-end: podshaper installed as a cluster admin installs it, running as pods on the
# real node (scripts/node.sh). The product images are imported into the node's containerd,
# then `kubectl apply -k crds/` and `kubectl apply -k` of manifests/ through the test overlay
# examples/real-node/install/ (memlock 4Mi and the agent's topology capture: what this machine needs).
# Nothing is done here that a kubelet would do, and of kube-proxy's work only the
# `kubernetes` Service's DNAT (scripts/node.sh): the pods run on their own pod-bound
# ServiceAccount tokens, kubelet mounts the webhook's certificate and runs the probes, and
# the API server calls the webhook through its Service. Checked: the install;
# the tokens; the Service; the agent's report and the operator's verdict; a training pod
# shaped by the installed webhook running on the node; the admission policy refusing the
# agent's token another node's report; a forced certificate rotation reaching the served
# certificate (timed); readiness gating the Service (a frozen replica leaves it); a rollout
# restart of the webhook while pods are created (0 failed); the README's uninstall, and
# the same with Helm, leaving nothing behind.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-installed-cluster}
export PODSHAPER_WITH_NODE=yes PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no
dir=$PODSHAPER_CLUSTER_DIR
kubeconfig=$dir/kubeconfig
logs=$dir/logs
bin=${PODSHAPER_BIN:-$root/build/bin}
node=real-h200x4-0
ns=podshaper-system
overlay=$root/examples/real-node/install
capture=$root/tests/fixtures/captures/h200x4-nv18.topo-m-and-p2p-r.txt
examples=$root/examples/real-node
tag=$(sed -n 's/^project(podshaper VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
tmp=$(mktemp -d)
loop=
trap 'rc=$?; [[ -n $loop ]] && kill "$loop" 2>/dev/null; node_test_cleanup $rc' EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

helm_bin=$(bash "$root/scripts/helm.sh")  # built from the module proxy on a cold cache
bash "$root/scripts/cluster.sh" down-all  # this checkout's, its own too, as make test does (one real node per machine)
bash "$root/scripts/cluster.sh" up
source "$dir/node/env"

# --- 1. the images, into the node's runtime as a registry pull would put them
check "the product images, from the binaries the other tests tested" bash "$root/scripts/images.sh" --from-build "$bin"
docker save -o "$tmp/images.tar" "podshaper-webhook:$tag" "podshaper-operator:$tag" "podshaper-agent:$tag" "podshaper-shm:$tag"
check "imported into the node's containerd" bash "$root/scripts/node.sh" load "$tmp/images.tar"

# --- 2. the install, as README's "Install on a cluster" says
t_apply=$(now)
check "kubectl apply -k crds/" quiet kc apply -k "$root/crds/"
check "the CRDs are established" until_ok 30 kc wait --for condition=established --timeout 5s crd/gputopologyreports.podshaper.io crd/topologypolicies.podshaper.io
# podshaper-shm mounts the kubelet's pods and the NRI socket where this node has them (under
# the cluster's dir, not /var/lib/kubelet and /var/run/nri): written over the overlay's.
apply_overlay() {
  kc kustomize "$overlay" | sed -e "s#/var/lib/kubelet#$dir/node/kubelet#g" -e "s#/var/run/nri#$dir/node/run/nri#g" |
    kc apply -f - >/dev/null
}
check "kubectl apply -k manifests/ (through the test overlay, this node's paths for podshaper-shm)" apply_overlay
# The overlay's agent reads the node's topology capture (no GPU here), from a ConfigMap.
kc -n $ns create configmap podshaper-agent-fixture --from-file "topology.txt=$capture" >/dev/null
check "the webhook Deployment rolls out" quiet kc -n $ns rollout status deploy/podshaper-webhook --timeout 240s
check "the operator Deployment rolls out" quiet kc -n $ns rollout status deploy/podshaper-operator --timeout 120s
check "the agent DaemonSet rolls out" quiet kc -n $ns rollout status ds/podshaper-agent --timeout 120s
check "the podshaper-shm DaemonSet rolls out (namespace podshaper-node)" quiet kc -n podshaper-node rollout status ds/podshaper-shm --timeout 120s
t_ready=$(since "$t_apply")
echo "    every podshaper pod ready ${t_ready} s after kubectl apply"
check "2 webhooks, 2 operators and 1 agent run, all on the real node" \
  eventually 10 "podshaper-agent $node Running
podshaper-operator $node Running
podshaper-operator $node Running
podshaper-webhook $node Running
podshaper-webhook $node Running" bash -c "kubectl --kubeconfig $kubeconfig -n $ns get pods -o jsonpath='{range .items[*]}{.metadata.labels.app\.kubernetes\.io/name} {.spec.nodeName} {.status.phase}{\"\n\"}{end}' | sort"

# The token kubelet projected into a pod (its kube-api-access volume), decoded.
claims() {  # claims POD: the JWT's payload
  local uid
  uid=$(kc -n $ns get pod "$1" -o jsonpath='{.metadata.uid}')
  python3 - "$dir"/node/kubelet/pods/"$uid"/volumes/kubernetes.io~projected/kube-api-access-*/token <<'PY'
import base64, json, sys
payload = open(sys.argv[1]).read().split(".")[1]
print(json.dumps(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))))
PY
}
first_pod() { kc -n $ns get pods -l "app.kubernetes.io/name=$1" -o jsonpath='{.items[0].metadata.name}'; }
for c in webhook operator agent; do
  p=$(first_pod "podshaper-$c")
  check "$c: kubelet gave $p a token of its own ServiceAccount, bound to the pod" python3 -c '
import json, sys
c = json.loads(sys.argv[1]); k = c["kubernetes.io"]
assert c["sub"] == "system:serviceaccount:podshaper-system:" + sys.argv[2], c
assert k["pod"]["name"] == sys.argv[3] and k["node"]["name"] == sys.argv[4], c' "$(claims "$p")" "podshaper-$c" "$p" "$node"
done

# --- 3. the API server calls the webhook through its Service (aggregator routing: a ready endpoint)
check "the webhook configuration names the Service, not a URL" \
  test "$(kc get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.service.name}/{.webhooks[0].clientConfig.url}')" = podshaper-webhook/
webhook_ips() { kc -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort | xargs; }
check "its endpoints are the two ready webhook pods" \
  eventually 30 "$(webhook_ips)" bash -c "kubectl --kubeconfig $kubeconfig -n $ns get endpointslices -l kubernetes.io/service-name=podshaper-webhook -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{\"\n\"}{end}' | sort | xargs"
kc create namespace ml >/dev/null
kc label namespace ml pod-security.kubernetes.io/enforce=privileged >/dev/null
until_ok 30 kc -n ml get serviceaccount default || fail "namespace ml: no default service account"
probe='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","namespace":"ml","labels":{"podshaper.io/inject":"true"},
  "annotations":{"podshaper.io/batch-bytes":"1Mi"}},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"4"}}}]}}'
shaped_probe() { kc create --dry-run=server -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}' -f - <<<"$probe" 2>/dev/null | grep -q podshaper-webhook; }
check "a pod is shaped by the installed webhook, through the Service" until_ok 30 shaped_probe

# --- 4. the agent's report, with its own token, and the operator's verdict
check "the agent pod wrote its node's report, its memlock probe granted 4 MiB" \
  eventually 90 'true 4194304' kc get gtr $node -o jsonpath='{.spec.host.memlockProbe.granted} {.spec.host.memlockBytes}'
check "kubectl describe node: condition GPUTopologyValidated True (RequirementsMet)" \
  eventually 60 '*GPUTopologyValidated*True*RequirementsMet*' bash -c "kubectl --kubeconfig $kubeconfig describe node $node | grep GPUTopologyValidated"
check "the operator validated the node: 4 GPUs, NVLink, P2P all, memlock 4 MiB" \
  eventually 60 'true 4 nvlink all 4194304' kc get node $node -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated} {.metadata.labels.podshaper\.io/gpu-count} {.metadata.labels.podshaper\.io/interconnect} {.metadata.labels.podshaper\.io/p2p} {.metadata.labels.podshaper\.io/memlock}'

# --- 5. a training pod, shaped by the installed webhook, runs on the node
kc -n ml create configmap podshaper-examples --from-file "$examples/container_facts.py" --from-file "$examples/dataloader.py" >/dev/null
check "examples/real-node/training.yaml is accepted" quiet kc apply -f "$examples/training.yaml"
check "shaped: /dev/shm 887Mi (one node with P2P: no NCCL reserve), 4 ranks" test "$(kc -n ml get pod dataloader-shaped -o jsonpath='{.metadata.annotations.podshaper\.io/shm-size} {.spec.containers[0].env[?(@.name=="PET_NPROC_PER_NODE")].value}')" = "887Mi 4"
check "it runs on the real node" eventually 120 "Running $node" kc -n ml get pod dataloader-shaped -o jsonpath='{.status.phase} {.spec.nodeName}'
t_first=$(since "$t_apply")
echo "    the first shaped pod running ${t_first} s after kubectl apply"
check "and finishes: every rank's DataLoader through its /dev/shm" eventually 240 Succeeded kc -n ml get pod dataloader-shaped -o jsonpath='{.status.phase}'
kc -n ml logs dataloader-shaped >"$tmp/training.log" 2>&1 || true
check "inside: /dev/shm is 887 MiB, 4 ranks, training finished" \
  bash -c "grep -q '4 rank(s), /dev/shm 887 MiB' '$tmp/training.log' && grep -qx 'training finished' '$tmp/training.log'"

# --- 6. the admission policy keeps the agent's real token to its own node's report
agent_pod=$(first_pod podshaper-agent)
set +e
kc -n $ns exec "$agent_pod" -c agent -- /usr/local/bin/podshaper-agent run --once --node p5-48xlarge-h100-0 \
  --fixture /fixture/topology.txt >"$tmp/exec.out" 2>&1
rc=$?
set -e
check "the agent's token may not write another node's report" test $rc -ne 0
check "the ValidatingAdmissionPolicy says why" \
  grep -q "may write only the GPUTopologyReport of its own node ($node), not p5-48xlarge-h100-0" "$tmp/exec.out"
check "so there is none" bash -c "! kubectl --kubeconfig $kubeconfig get gtr p5-48xlarge-h100-0 >/dev/null 2>&1"
# Nor an update of one that exists (the admin writes p4d's).
"$bin/podshaper-agent" run --once --node p4d-24xlarge-a100-0 --kubeconfig "$kubeconfig" \
  --fixture "$root/tests/fixtures/topologies/p4d.24xlarge-8xA100-nv12.topo-m.txt" 2>/dev/null
set +e
kc -n $ns exec "$agent_pod" -c agent -- /usr/local/bin/podshaper-agent run --once --node p4d-24xlarge-a100-0 \
  --fixture /fixture/topology.txt >"$tmp/exec.out" 2>&1
rc=$?
set -e
check "nor overwrite another node's existing report" \
  bash -c "[[ $rc -ne 0 ]] && grep -q 'may write only the GPUTopologyReport of its own node ($node), not p4d-24xlarge-a100-0' '$tmp/exec.out'"
check "p4d's report is still p4d's (NV12)" \
  test "$(kc get gtr p4d-24xlarge-a100-0 -o jsonpath='{.spec.pairs[0].link}')" = NV12

# --- 7. certificates: made and injected by the operator, mounted by kubelet, rotated
secret_pem() { kc -n $ns get secret podshaper-webhook-tls -o "jsonpath={.data.$1}" | base64 -d; }
secret_pem 'ca\.crt' >"$tmp/ca.crt"
check "the operator injected the Secret's CA as the caBundle" \
  test "$(kc get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d)" = "$(cat "$tmp/ca.crt")"
check "Secret podshaper-webhook-tls is of type kubernetes.io/tls" \
  test "$(kc -n $ns get secret podshaper-webhook-tls -o jsonpath='{.type}')" = kubernetes.io/tls
check "its serving certificate names the Service, signed by its CA" bash -c "
  kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.data.tls\.crt}' | base64 -d >'$tmp/tls.crt'
  openssl x509 -noout -ext subjectAltName <'$tmp/tls.crt' | grep -q 'DNS:podshaper-webhook.podshaper-system.svc' &&
  openssl verify -CAfile '$tmp/ca.crt' '$tmp/tls.crt' >/dev/null"
secret_serial() { secret_pem 'tls\.crt' | openssl x509 -noout -serial; }
served_serial() {  # served_serial IP: the certificate a webhook pod serves, verified against the CA
  openssl s_client -connect "$1:8443" -servername podshaper-webhook.podshaper-system.svc -verify_return_error \
    -CAfile "$tmp/ca.crt" </dev/null 2>/dev/null | openssl x509 -noout -serial
}
all_serve() {  # all_serve SERIAL: every webhook pod serves it
  local ip
  for ip in $(webhook_ips); do [[ $(served_serial "$ip") == "$1" ]] || return 1; done
}
first=$(secret_serial)
check "kubelet mounted the Secret: both webhook pods serve its certificate" all_serve "$first"
pods_before=$(kc -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o jsonpath='{range .items[*]}{.metadata.name}/{.status.containerStatuses[0].restartCount} {end}')
t_rotate=$(now)
kc -n $ns annotate secret podshaper-webhook-tls podshaper.io/renew=now >/dev/null
check "a forced rotation: the operator writes a new certificate" until_ok 30 bash -c "[[ \$(kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -serial) != '$first' ]]"
t_written=$(since "$t_rotate")
second=$(secret_serial)
t_written_at=$(now)
check "kubelet's Secret refresh brings it to both webhook pods, which reload it" until_ok 180 all_serve "$second"
t_served=$(since "$t_written_at")
echo "    rotation: the new certificate in the Secret ${t_written} s after the annotation, served by both webhook pods ${t_served} s after that"
check "with no restart" test "$(kc -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o jsonpath='{range .items[*]}{.metadata.name}/{.status.containerStatuses[0].restartCount} {end}')" = "$pods_before"
check "the API server still calls the webhook" until_ok 30 shaped_probe
check "the caBundle still holds the one CA" \
  test "$(kc get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d | grep -c 'BEGIN CERTIFICATE')" = 1
kc patch mutatingwebhookconfiguration podshaper --type json \
  -p '[{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ""}]' >/dev/null
check "a caBundle someone cleared is injected again" \
  eventually 30 "$(cat "$tmp/ca.crt")" bash -c "kubectl --kubeconfig $kubeconfig get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d"
check "the operators were refused nothing (no 'forbidden' in their logs)" bash -c "
  ! kubectl --kubeconfig $kubeconfig -n $ns logs -l app.kubernetes.io/name=podshaper-operator --tail -1 | grep -qi forbidden"

# --- 8. readiness gates the Service: a frozen webhook pod leaves the endpoints, the other serves
# EndpointSlices (v1 Endpoints are deprecated since v1.33 and kubectl warns of them).
ready_ips() {
  kc -n $ns get endpointslices -l kubernetes.io/service-name=podshaper-webhook \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | sort | xargs
}
frozen_pod=$(first_pod podshaper-webhook)
frozen_ip=$(kc -n $ns get pod "$frozen_pod" -o jsonpath='{.status.podIP}')
other_ip=$(webhook_ips | tr ' ' '\n' | grep -vx "$frozen_ip")
cid=$(kc -n $ns get pod "$frozen_pod" -o jsonpath='{.status.containerStatuses[0].containerID}')
pid=$("${PODSHAPER_NODE_BIN:-$root/build/node}/ctr" -a "$dir/node/containerd.sock" -n k8s.io tasks ls 2>/dev/null |
      awk -v c="${cid#containerd://}" '$1 == c { print $2 }' || true)
check "the webhook container's process, found through containerd ($frozen_pod: pid ${pid:-none})" test -n "$pid"
kill -STOP "${pid:-0}" || fail "could not freeze the webhook"
t_freeze=$(now)
check "frozen (SIGSTOP), kubelet's readiness probe fails and its endpoint goes" eventually 60 "$other_ip" ready_ips
echo "    readiness: the frozen pod left the endpoints $(since "$t_freeze") s after SIGSTOP (probe every 5 s, 3 failures)"
# Out of the endpoints, it gets no new connection; but the API server's kept-alive
# connections to it still take requests, each failing at the webhook's 5 s timeout (and
# then closed), until none is left. Counted: what a hung replica costs after readiness.
t_out=$(now); in_row=0; lost=0
while [[ $in_row -lt 10 && $(since "$t_out" | cut -d. -f1) -lt 90 ]]; do
  if shaped_probe; then in_row=$((in_row + 1)); else lost=$((lost + 1)); in_row=0; fi
done
check "then 10 creates in a row are shaped by the other replica" test $in_row -ge 10
echo "    after that: $lost create(s) failed on connections the API server still held to the frozen pod, then 10 in a row shaped ($(since "$t_out") s)"
kill -CONT "${pid:-0}" || true
check "thawed (SIGCONT), it is ready again and back in the endpoints" eventually 60 "$(webhook_ips)" ready_ips
if [[ $(kc -n $ns get pod "$frozen_pod" -o jsonpath='{.status.containerStatuses[0].restartCount}') == 0 ]]; then
  pass "and kubelet's liveness probe did not restart it"
else
  fail "and kubelet's liveness probe did not restart it"
  kc -n $ns get pod "$frozen_pod" -o jsonpath='{.status.containerStatuses[0].lastState}{"\n"}' >&2 || true
  kc -n $ns get events --field-selector involvedObject.name="$frozen_pod" >&2 || true
  kc -n $ns logs "$frozen_pod" --previous --tail 30 >&2 || true
fi

# --- 9. a rollout restart of the webhook while pods are created: none may fail
# Server-side dry runs: each is a create through the whole admission chain, webhook included.
echo 0 >"$tmp/creates.ok"; : >"$tmp/creates.failed"
(
  ok=0
  while [[ ! -f $tmp/creates.stop ]]; do
    if out=$(kc create --dry-run=server -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}' -f - <<<"$probe" 2>"$tmp/create.err") &&
       [[ $out == podshaper-webhook* ]]; then
      ok=$((ok + 1)); echo $ok >"$tmp/creates.ok"
    else
      echo "$(date +%T.%N | cut -c1-12) ${out:-not shaped}: $(grep -v '^Warning: podshaper' "$tmp/create.err" | tr '\n' ' ')" >>"$tmp/creates.failed"
    fi
  done
) &
loop=$!
sleep 3
t_restart=$(now)
check "kubectl rollout restart deployment/podshaper-webhook" quiet kc -n $ns rollout restart deployment/podshaper-webhook
check "the restart rolls out" quiet kc -n $ns rollout status deploy/podshaper-webhook --timeout 180s
t_rolled=$(since "$t_restart")
# The old pods' shutdown delay and drain, past the rollout's end.
check "the old webhook pods are gone" until_ok 60 bash -c "[[ \$(kubectl --kubeconfig $kubeconfig -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o name | wc -l) == 2 ]]"
sleep 3
touch "$tmp/creates.stop"; wait "$loop" || true; loop=
creates=$(cat "$tmp/creates.ok"); failed=$(wc -l <"$tmp/creates.failed")
echo "    rollout restart: rolled out in ${t_rolled} s; $creates creates shaped, $failed failed"
check "pods were created all along ($creates)" test "$creates" -ge 10
check "0 failed creates" test "$failed" -eq 0
sed 's/^/    /' "$tmp/creates.failed" | head -5
now_pods=$(kc -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o jsonpath='{.items[*].metadata.name}')
for p in $pods_before; do
  check "${p%/*} was replaced" bash -c "! grep -qw '${p%/*}' <<<'$now_pods'"
done

# --- 10. the README's uninstall leaves no podshaper object, label or taint
kc -n ml delete pod dataloader-shaped --wait=false >/dev/null 2>&1 || true
check "kubectl delete -k manifests/ --ignore-not-found (the overlay)" quiet kc delete -k "$overlay" --ignore-not-found --timeout 120s
kc label nodes --all podshaper.io/topology-validated- podshaper.io/gpu-count- \
  podshaper.io/interconnect- podshaper.io/p2p- podshaper.io/memlock- podshaper.io/nvlink-domain- >/dev/null
kc taint nodes --all podshaper.io/topology-not-validated- >/dev/null 2>&1 || true
for n in $(kc get nodes -o name); do
  kc patch "$n" --subresource=status --type=strategic \
    -p '{"status":{"conditions":[{"type":"GPUTopologyValidated","$patch":"delete"}]}}' >/dev/null
done
nothing_left() {  # nothing_left WHAT
  check "$1: no podshaper CRD, namespace, webhook configuration, admission policy or RBAC is left" \
    eventually 60 "" bash -c "kubectl --kubeconfig $kubeconfig get crd,namespace,mutatingwebhookconfiguration,validatingadmissionpolicy,validatingadmissionpolicybinding,clusterrole,clusterrolebinding -o name | grep -i podshaper"
  # (podshaper.io/real-node is the test node's own, from scripts/node.sh)
  check "$1: no node carries a podshaper label, taint or condition" eventually 10 "" python3 -c '
import json, subprocess, sys
nodes = json.loads(subprocess.check_output(["kubectl", "--kubeconfig", sys.argv[1], "get", "nodes", "-o", "json"]))["items"]
for n in nodes:
    for k in n["metadata"].get("labels", {}):
        if k.startswith("podshaper.io/") and k != "podshaper.io/real-node": print(n["metadata"]["name"], k)
    for t in n["spec"].get("taints", []):
        if t["key"].startswith("podshaper.io/"): print(n["metadata"]["name"], t["key"])
    for c in n.get("status", {}).get("conditions", []):
        if c["type"] == "GPUTopologyValidated": print(n["metadata"]["name"], c["type"])' "$kubeconfig"
}
nothing_left "kubectl delete -k"

# --- 11. the chart, on the cluster the uninstall left clean: the previous chart version
# (the last one before 0.2.0, from git), then helm upgrade to this one, helm test, uninstall
helm() { "$helm_bin" --kubeconfig "$kubeconfig" "$@"; }
previous_chart=6bbd5cc  # chart 0.1.0
mkdir -p "$tmp/previous"
if git -C "$root" archive "$previous_chart" charts/podshaper examples/real-node/install 2>/dev/null | tar -x -C "$tmp/previous"; then
  first_chart=$tmp/previous/charts/podshaper first_values=$tmp/previous/examples/real-node/install/values.yaml
  check "the previous chart is version 0.1.0" grep -q '^version: 0.1.0$' "$first_chart/Chart.yaml"
else  # a source tree without its history: install this version, the upgrade changes values only
  echo "    (no git history here: the upgrade starts from this chart version)"
  first_chart=$root/charts/podshaper first_values=$overlay/values.yaml
fi
# A release as chart 0.1.0 made it: stored in default, the chart making $ns (its defaults
# then; this chart's are -n and --create-namespace). Its upgrade keeps those two values
# (docs/admin.md "Upgrade"), or Helm would move podshaper into default.
keep_ns=(--set "namespace=$ns" --set createNamespace=true)
check "helm install podshaper (the previous chart version, examples/real-node/install/values.yaml)" \
  quiet helm install podshaper "$first_chart" -f "$first_values" "${keep_ns[@]}"
check "helm made namespace $ns" until_ok 30 kc get namespace $ns
kc -n $ns create configmap podshaper-agent-fixture --from-file "topology.txt=$capture" >/dev/null
check "helm: the webhook rolls out" quiet kc -n $ns rollout status deploy/podshaper-webhook --timeout 180s
check "helm: the operator rolls out" quiet kc -n $ns rollout status deploy/podshaper-operator --timeout 120s
check "helm: the agent rolls out" quiet kc -n $ns rollout status ds/podshaper-agent --timeout 120s
check "helm: a pod is shaped through the Service" until_ok 60 shaped_probe
check "helm: the agent reported and the operator validated the node" \
  eventually 90 'true 4194304' kc get node $node -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated} {.metadata.labels.podshaper\.io/memlock}'
# docs/admin.md "Upgrade": the CRDs first (Helm never upgrades crds/), then the release.
check "upgrade: kubectl apply -k crds/ over the CRDs Helm installed" quiet kc apply -k "$root/crds/"
check "helm upgrade podshaper charts/podshaper (0.2.0) --set logLevel=debug" \
  quiet helm upgrade podshaper "$root/charts/podshaper" -f "$overlay/values.yaml" "${keep_ns[@]}" --set logLevel=debug \
  --set "shm.kubeletRoot=$dir/node/kubelet" --set "shm.nriSocket=$dir/node/run/nri/nri.sock" --wait --timeout 180s
helm list -o json >"$tmp/helm-list.json"
check "helm list: the release is chart podshaper-0.2.0, revision 2" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))[0]
sys.exit(not (r["chart"] == "podshaper-0.2.0" and str(r["revision"]) == "2"))' "$tmp/helm-list.json"
check "helm upgrade: the operator now runs with --log-level debug" \
  eventually 30 '*--log-level*debug*' kc -n $ns get deploy podshaper-operator -o jsonpath='{.spec.template.spec.containers[0].args}'
check "helm upgrade: the operator rolls out" quiet kc -n $ns rollout status deploy/podshaper-operator --timeout 120s
check "helm upgrade: the webhook rolls out" quiet kc -n $ns rollout status deploy/podshaper-webhook --timeout 180s
check "helm upgrade: a pod is still shaped" until_ok 60 shaped_probe
check "helm upgrade: the node is still validated" \
  eventually 60 true kc get node $node -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated}'
# helm test: the API server really calls the webhook (a dry-run create in test.namespace).
check "helm test podshaper: the API server calls the webhook" quiet helm test podshaper --timeout 120s
check "helm test: its pod and RBAC are gone once it passed" eventually 30 "" bash -c \
  "kubectl --kubeconfig $kubeconfig -n $ns get pod/podshaper-test -o name --ignore-not-found && kubectl --kubeconfig $kubeconfig -n default get role/podshaper-test rolebinding/podshaper-test -o name --ignore-not-found"
# ... and it fails when no webhook answers.
replicas=$(kc -n $ns get deploy podshaper-webhook -o jsonpath='{.spec.replicas}')
kc -n $ns scale deploy/podshaper-webhook --replicas 0 >/dev/null
check "no webhook pod runs" until_ok 60 bash -c "[[ -z \$(kubectl --kubeconfig $kubeconfig -n $ns get pods -l app.kubernetes.io/name=podshaper-webhook -o name) ]]"
if helm test podshaper --timeout 120s >"$tmp/helm-test.out" 2>&1; then
  fail "helm test passed with no webhook running"
else
  pass "helm test fails with no webhook running"
fi
check "... and its pod's log says why" bash -c \
  "kubectl --kubeconfig $kubeconfig -n $ns logs podshaper-test | grep -q 'did not get an answer from the webhook\|did not call the webhook'"
kc -n $ns scale deploy/podshaper-webhook --replicas "$replicas" >/dev/null
check "the webhook is back" quiet kc -n $ns rollout status deploy/podshaper-webhook --timeout 180s
check "helm test passes again, and removes what the failed run left" quiet helm test podshaper --timeout 120s
# The prune hook (pre-delete) stops the operator and removes its labels and taint: no
# `kubectl label` by hand after a helm uninstall.
check "helm uninstall podshaper (its pre-delete hook prunes the nodes)" quiet helm uninstall podshaper --wait --timeout 180s
check "kubectl delete -k crds/ (Helm leaves CRDs in place)" quiet kc delete -k "$root/crds/"
nothing_left "helm uninstall"
finish
