#!/usr/bin/env bash
# End-to-end: podshaper installed from manifests/ (and rendered from the Helm chart) on a
# real control plane: every object created, least-privilege RBAC proven with
# `kubectl auth can-i` and with the components' own ServiceAccount tokens, the
# ValidatingAdmissionPolicy keeping agents to their own node's report, and the webhook's
# certificate made, injected and rotated by podshaper-operator while the API server keeps
# calling the webhook.
#
# What a kubelet would do here is done by the test: no kubelet runs, so the webhook and
# the operator run as local processes with their ServiceAccounts' tokens, the Secret's
# tls.crt/tls.key are copied to files as the kubelet updates a mounted Secret, and the
# MutatingWebhookConfiguration points at the local webhook by URL (no Service routing).
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-install-cluster}
export PODSHAPER_WITH_WEBHOOK=no
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
bin=${PODSHAPER_BIN:-$root/build/bin}
fixtures=$root/tests/fixtures
ns=podshaper-system
tmp=$(mktemp -d)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $rc -ne 0 || $failures -gt 0 ]]; then
    for f in "$PODSHAPER_CLUSTER_DIR"/logs/*.log "$tmp"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -25 "$f"; }; done
  fi
  bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true
bash "$root/scripts/cluster.sh" up
source "$PODSHAPER_CLUSTER_DIR/env"

# --- 1. the kustomize install (cluster.sh installed the CRDs: CRs need them established first).
# A server-side dry run creates nothing, the namespace included: namespaced objects need it first.
quiet kc apply -f "$root/manifests/base/namespace.yaml"
check "kubectl apply --dry-run=server -k manifests/ succeeds" quiet kc apply --dry-run=server -k "$root/manifests/"
check "kubectl apply -k manifests/ succeeds" quiet kc apply -k "$root/manifests/"
want=$(kubectl kustomize "$root/manifests/" | grep -c '^kind:')
check "every object it holds exists ($want)" test "$(kc get -k "$root/manifests/" -o name | wc -l)" = "$want"
check "podshaper-system enforces Pod Security restricted" \
  test "$(kc get namespace $ns -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted
check "the webhook Deployment has 2 replicas" test "$(kc -n $ns get deploy podshaper-webhook -o jsonpath='{.spec.replicas}')" = 2
check "the operator Deployment has 2 replicas" test "$(kc -n $ns get deploy podshaper-operator -o jsonpath='{.spec.replicas}')" = 2
check "every container runs as non-root, read-only, without privilege escalation, seccomp RuntimeDefault, with limits" \
  python3 - "$(kc -n $ns get deploy,daemonset -o json)" <<'PY'
import json, sys
for o in json.loads(sys.argv[1])["items"]:
    spec = o["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True, o["metadata"]["name"]
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]
        assert c["resources"]["requests"] and c["resources"]["limits"], c["name"]
PY
check "the agent DaemonSet requests no GPU and tolerates podshaper's taint" python3 - "$(kc -n $ns get ds podshaper-agent -o json)" <<'PY'
import json, sys
d = json.loads(sys.argv[1])["spec"]["template"]["spec"]
assert all("nvidia.com/gpu" not in json.dumps(c["resources"]) for c in d["containers"])
assert {"key": "podshaper.io/topology-not-validated", "operator": "Exists"} in d["tolerations"]
assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in d["containers"][0]["env"]
PY
check "the cert-manager overlay renders a Certificate and the inject-ca-from annotation" bash -c \
  "kubectl kustomize '$root/manifests/overlays/cert-manager/' | grep -q 'cert-manager.io/inject-ca-from: podshaper-system/podshaper-webhook'"

# --- 2. the Helm chart, against the same API server
if [[ -x $root/scripts/helm.sh ]] || [[ -f $root/scripts/helm.sh ]]; then
  check "helm template | kubectl apply --dry-run=server succeeds" \
    bash -c "bash '$root/scripts/helm.sh' template-default | kubectl --kubeconfig '$kubeconfig' apply --dry-run=server -f - >/dev/null"
fi

# --- 3. RBAC: what each component needs, and a few things it must not do
can() { kc auth can-i --as="system:serviceaccount:$ns:$1" "${@:2}" 2>/dev/null; }
cannot() { ! can "$@"; }
check "webhook: watch Nodes" can podshaper-webhook watch nodes
check "webhook: watch Namespaces" can podshaper-webhook watch namespaces
check "webhook: no Secrets" cannot podshaper-webhook get secrets -n $ns
check "webhook: no Pods" cannot podshaper-webhook create pods -n default
check "operator: write report status" can podshaper-operator patch gputopologyreports.podshaper.io --subresource=status
check "operator: not report specs" cannot podshaper-operator update gputopologyreports.podshaper.io
check "operator: label Nodes" can podshaper-operator patch nodes
check "operator: record Events" can podshaper-operator create events -n default
check "operator: its Lease" can podshaper-operator update leases.coordination.k8s.io/podshaper-operator -n $ns
check "operator: the webhook's Secret" can podshaper-operator update secrets/podshaper-webhook-tls -n $ns
check "operator: no other Secret" cannot podshaper-operator get secrets/other -n $ns
check "operator: no Secrets elsewhere" cannot podshaper-operator get secrets -n default
check "operator: its own MutatingWebhookConfiguration" can podshaper-operator patch mutatingwebhookconfigurations/podshaper
check "operator: no other" cannot podshaper-operator patch mutatingwebhookconfigurations/other
check "operator: no Pods" cannot podshaper-operator delete pods -n default
check "agent: create reports" can podshaper-agent create gputopologyreports.podshaper.io
check "agent: update reports" can podshaper-agent update gputopologyreports.podshaper.io
check "agent: not delete them" cannot podshaper-agent delete gputopologyreports.podshaper.io
check "agent: not their status" cannot podshaper-agent patch gputopologyreports.podshaper.io --subresource=status
check "agent: no Secrets anywhere" cannot podshaper-agent get secrets --all-namespaces
check "agent: not label Nodes" cannot podshaper-agent patch nodes
check "agent: get Pods in its namespace (its memlock-probe's status)" can podshaper-agent get pods -n $ns
check "agent: not list them" cannot podshaper-agent list pods -n $ns
check "agent: no Pods elsewhere" cannot podshaper-agent get pods -n default

# A kubeconfig for a ServiceAccount token: token_kubeconfig FILE TOKEN
token_kubeconfig() {
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$PODSHAPER_CLUSTER_DIR/pki/ca.crt"}}]
users: [{name: u, user: {token: "$2"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KC
}

# --- 4. an agent writes only its own node's report (ValidatingAdmissionPolicy)
p5=p5-48xlarge-h100-0; p4d=p4d-24xlarge-a100-0
# The agent's pod on p5 (no kubelet runs it); its token is bound to it and carries the node's name.
kc -n $ns apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: agent-on-p5, namespace: $ns}
spec:
  nodeName: $p5
  serviceAccountName: podshaper-agent
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: agent
    image: podshaper-agent:0.1.0
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
YAML
token=$(kc -n $ns create token podshaper-agent --bound-object-kind Pod --bound-object-name agent-on-p5 --duration 1h)
token_kubeconfig "$tmp/agent.kubeconfig" "$token"
agent_run() {  # agent_run NODE [FLAGS]: one write with the agent pod's token
  "$bin/podshaper-agent" run --once --node "$1" --fixture "$fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt" \
    --p2p-fixture "$fixtures/p2p/8gpu-all-ok.p2p-r.txt" --kubeconfig "$tmp/agent.kubeconfig" "${@:2}"
}
check "with its pod's token, the agent writes its own node's report" agent_run $p5
check "and updates it" agent_run $p5 --heartbeat 0
set +e; agent_run $p4d 2>"$tmp/err"; rc=$?; set -e
check "another node's report is refused" test $rc -ne 0
check "by the ValidatingAdmissionPolicy, which says why" \
  grep -q "may write only the GPUTopologyReport of its own node ($p5), not $p4d" "$tmp/err"
check "so it does not exist" bash -c "! kubectl --kubeconfig $kubeconfig get gtr $p4d 2>/dev/null"
"$bin/podshaper-agent" run --once --node $p4d --fixture "$fixtures/topologies/p4d.24xlarge-8xA100-nv12.topo-m.txt" \
  --kubeconfig "$kubeconfig" 2>/dev/null   # the admin writes p4d's
set +e; agent_run $p4d 2>"$tmp/err"; rc=$?; set -e
check "nor may it overwrite another node's existing report" test $rc -ne 0
check "p4d's report is still p4d's (NV12)" test "$(kc get gtr $p4d -o jsonpath='{.spec.pairs[0].link}')" = NV12

# --- 5. the webhook's certificate, by podshaper-operator under its own ServiceAccount
webhook_port=$(free_port); operator_port=$(free_port)
# The test cluster has no Service routing: point the webhook configuration at the local webhook.
kc patch mutatingwebhookconfiguration podshaper --type json -p "[
  {\"op\": \"remove\", \"path\": \"/webhooks/0/clientConfig/service\"},
  {\"op\": \"add\", \"path\": \"/webhooks/0/clientConfig/url\", \"value\": \"https://127.0.0.1:$webhook_port/mutate-v1-pod\"}]" >/dev/null
token_kubeconfig "$tmp/operator.kubeconfig" "$(kc -n $ns create token podshaper-operator --duration 1h)"
token_kubeconfig "$tmp/webhook.kubeconfig" "$(kc -n $ns create token podshaper-webhook --duration 1h)"
# The install's operator config, plus this cluster's address as a name in the certificate.
kc -n $ns get configmap podshaper-operator-config -o jsonpath='{.data.config\.yaml}' | python3 -c '
import re, sys
text = sys.stdin.read()
text = text.replace("listen: \":8443\"", "listen: \"127.0.0.1:'$operator_port'\"")
text, n = re.subn(r"(\nwebhookCertificate:\n)", r"\1  ipAddresses: [127.0.0.1]\n  checkInterval: 1s\n", text)
assert n == 1, text
print(text)' >"$tmp/operator.yaml"
"$bin/podshaper-operator" run --kubeconfig "$tmp/operator.kubeconfig" --config "$tmp/operator.yaml" \
  --identity install-test >"$tmp/operator.log" 2>&1 &
pids+=($!)
secret_field() { kc -n $ns get secret podshaper-webhook-tls -o "jsonpath={.data.$1}" 2>/dev/null | base64 -d; }
check "the operator creates Secret podshaper-webhook-tls" until_ok 30 kc -n $ns get secret podshaper-webhook-tls
check "of type kubernetes.io/tls" test "$(kc -n $ns get secret podshaper-webhook-tls -o jsonpath='{.type}')" = kubernetes.io/tls
check "and injects its CA as the caBundle" \
  until_ok 30 bash -c "test \"\$(kubectl --kubeconfig $kubeconfig get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d)\" = \"\$(kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.data.ca\.crt}' | base64 -d)\""
secret_field ca\\.crt >"$tmp/ca.crt"
check "the serving certificate names the Service and this address" bash -c \
  "kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.data.tls\.crt}' | base64 -d |
   openssl x509 -noout -ext subjectAltName | grep -q 'DNS:podshaper-webhook.podshaper-system.svc.*IP Address:127.0.0.1'"
check "signed by that CA" bash -c "kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl verify -CAfile $tmp/ca.crt"

# The kubelet's part: the mounted Secret's files, replaced atomically.
mkdir -p "$tmp/tls"
sync_files() {
  secret_field tls\\.crt >"$tmp/tls/tls.crt.new"; secret_field tls\\.key >"$tmp/tls/tls.key.new"
  mv "$tmp/tls/tls.key.new" "$tmp/tls/tls.key"; mv "$tmp/tls/tls.crt.new" "$tmp/tls/tls.crt"
}
sync_files
"$bin/podshaper-webhook" serve --listen "127.0.0.1:$webhook_port" --tls-cert "$tmp/tls/tls.crt" \
  --tls-key "$tmp/tls/tls.key" --kubeconfig "$tmp/webhook.kubeconfig" >"$tmp/webhook.log" 2>&1 &
webhook_pid=$!; pids+=($webhook_pid)
kc create namespace ml >/dev/null
probe='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","namespace":"ml","labels":{"podshaper.io/inject":"true"},
  "annotations":{"podshaper.io/batch-bytes":"1Mi"}},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"8"}}}]}}'
shaped() { kc create --dry-run=server -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}' -f - <<<"$probe" 2>/dev/null | grep -q podshaper-webhook; }
check "the API server calls the webhook over TLS, trusting the operator's CA" until_ok 60 shaped
serial() { openssl s_client -connect "127.0.0.1:$webhook_port" -CAfile "$tmp/ca.crt" </dev/null 2>/dev/null | openssl x509 -noout -serial; }
first=$(serial)
check "the webhook serves the operator's certificate (verified against its CA)" test -n "$first"

# A forced rotation: a new serving certificate, the same CA, no webhook restart.
kc -n $ns annotate secret podshaper-webhook-tls podshaper.io/renew=now >/dev/null
check "the operator issues a new serving certificate" \
  until_ok 30 bash -c "test -z \"\$(kubectl --kubeconfig $kubeconfig -n $ns get secret podshaper-webhook-tls -o jsonpath='{.metadata.annotations.podshaper\.io/renew}')\""
sync_files
check "the webhook reloads it" until_ok 30 bash -c "test \"\$(openssl s_client -connect 127.0.0.1:$webhook_port -CAfile $tmp/ca.crt </dev/null 2>/dev/null | openssl x509 -noout -serial)\" != '$first'"
check "the API server still calls it" until_ok 30 shaped
check "with no webhook restart" kill -0 $webhook_pid
check "the caBundle still holds the one CA" test "$(kc get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d | grep -c 'BEGIN CERTIFICATE')" = 1
check "a caBundle someone cleared is injected again" bash -c "
  kubectl --kubeconfig $kubeconfig patch mutatingwebhookconfiguration podshaper --type json \
    -p '[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"\"}]' >/dev/null
  for _ in \$(seq 100); do
    [[ -n \$(kubectl --kubeconfig $kubeconfig get mutatingwebhookconfiguration podshaper -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]] && exit 0
    sleep 0.3
  done; exit 1"
check "the operator wrote nothing with the admin's rights: no errors in its log" bash -c "! grep -q 'forbidden' $tmp/operator.log"
finish
