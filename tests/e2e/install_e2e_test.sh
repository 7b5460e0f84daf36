#!/usr/bin/env bash
# End-to-end: podshaper's install objects against a real control plane: server-side dry
# runs of manifests/ and of the Helm chart, every object created by `kubectl apply -k`,
# the security settings of every pod, and least-privilege RBAC (`kubectl auth can-i`).
# The install running as pods (tokens, the Service, certificates, the admission policy,
# rollout, uninstall) is tests/e2e/installed_e2e_test.sh, on the real node.
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-install-cluster}
export PODSHAPER_WITH_WEBHOOK=no
kubeconfig=$PODSHAPER_CLUSTER_DIR/kubeconfig
ns=podshaper-system
tmp=$(mktemp -d)
cleanup() {
  local rc=$?
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

# --- 1. the kustomize install (cluster.sh installed the CRDs: CRs need them established first).
# A server-side dry run creates nothing, the namespace included: namespaced objects need it first.
quiet kc apply -f "$root/manifests/base/namespace.yaml"
check "kubectl apply --dry-run=server -k manifests/ succeeds" quiet kc apply --dry-run=server -k "$root/manifests/"
check "kubectl apply -k manifests/ succeeds" quiet kc apply -k "$root/manifests/"
want=$(kubectl kustomize "$root/manifests/" | grep -c '^kind:')
check "every object it holds exists ($want)" test "$(kc get -k "$root/manifests/" -o name | wc -l)" = "$want"
check "podshaper-system enforces Pod Security restricted" \
  test "$(kc get namespace $ns -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted
check "podshaper-node, podshaper-shm's alone, is Pod Security privileged" \
  test "$(kc get namespace podshaper-node -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = privileged
check "podshaper-shm: root with SYS_PTRACE and DAC_OVERRIDE only, host PID, read-only root, no escalation, and nothing else runs in podshaper-node" \
  python3 - "$(kc -n podshaper-node get deploy,daemonset,statefulset -o json)" <<'PY'
import json, sys
items = json.loads(sys.argv[1])["items"]
assert [o["metadata"]["name"] for o in items] == ["podshaper-shm"], [o["metadata"]["name"] for o in items]
spec = items[0]["spec"]["template"]["spec"]
assert spec["hostPID"] is True and not spec.get("hostNetwork") and not spec.get("hostIPC"), spec
for c in spec["containers"]:
    sc = c["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE", "DAC_OVERRIDE"]} and not sc.get("privileged"), sc
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert c["resources"]["requests"] and c["resources"]["limits"], c["name"]
assert sorted(v["hostPath"]["path"] for v in spec["volumes"]) == ["/var/lib/kubelet/pods", "/var/run/nri"], spec["volumes"]
PY
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
  # (--skip-tests: helm test's pod names a ServiceAccount that a dry run does not make;
  # e2e_installed runs helm test for real)
  if bash "$root/scripts/helm.sh" template podshaper "$root/charts/podshaper" --namespace podshaper-system \
      --include-crds --skip-tests | kc apply --dry-run=server -f - >/dev/null 2>"$tmp/helm-dry-run.err"; then
    pass "helm template | kubectl apply --dry-run=server succeeds"
  else
    fail "helm template | kubectl apply --dry-run=server succeeds"; sed 's/^/    /' "$tmp/helm-dry-run.err" | tail -5
  fi
fi

# --- 3. RBAC: what each component needs, and a few things it must not do
can() { kc auth can-i --as="system:serviceaccount:$ns:$1" "${@:2}" 2>/dev/null; }
cannot() { ! can "$@"; }
check "webhook: watch Nodes" can podshaper-webhook watch nodes
check "webhook: watch Namespaces" can podshaper-webhook watch namespaces
check "webhook: no Secrets" cannot podshaper-webhook get secrets -n $ns
check "webhook: no Pods" cannot podshaper-webhook create pods -n default
check "webhook: watch ShmProfiles" can podshaper-webhook watch shmprofiles.podshaper.io --all-namespaces
check "webhook: not write them" cannot podshaper-webhook create shmprofiles.podshaper.io -n default
check "operator: write report status" can podshaper-operator patch gputopologyreports.podshaper.io --subresource=status
check "operator: not report specs" cannot podshaper-operator update gputopologyreports.podshaper.io
check "operator: label Nodes" can podshaper-operator patch nodes
check "operator: its Node condition" can podshaper-operator patch nodes --subresource=status
check "operator: not delete Nodes" cannot podshaper-operator delete nodes
check "operator: record Events" can podshaper-operator create events -n default
check "operator: not change Events" cannot podshaper-operator patch events -n default
check "operator: read the pods it explains" can podshaper-operator watch pods -n default
check "operator: not change pods" cannot podshaper-operator delete pods -n default
check "operator: watch ShmUsages" can podshaper-operator watch shmusages.podshaper.io --all-namespaces
check "operator: not write them" cannot podshaper-operator create shmusages.podshaper.io -n default
check "operator: watch ShmProfiles" can podshaper-operator watch shmprofiles.podshaper.io --all-namespaces
check "operator: create them" can podshaper-operator create shmprofiles.podshaper.io -n default
check "operator: their status" can podshaper-operator update shmprofiles.podshaper.io --subresource=status -n default
check "operator: delete them" can podshaper-operator delete shmprofiles.podshaper.io -n default
# Users: the built-in view role (by aggregation) reads reports, policies, ShmUsages and
# ShmProfiles, no more; edit adds nothing of podshaper's: a namespace's editors cannot forge
# the ShmProfile that sizes their workload's next pods from what podshaper-shm measured.
quiet kc create clusterrolebinding podshaper-test-viewer --clusterrole=view --user=viewer
quiet kc -n default create rolebinding podshaper-test-editor --clusterrole=edit --user=editor
viewer_can() { kc auth can-i "$@" --as=viewer 2>/dev/null; }  # (kubectl warns that the CRDs are cluster-scoped)
editor_can() { kc auth can-i "$@" --as=editor -n default 2>/dev/null; }
check "a user with view: kubectl get gtr (podshaper-view aggregated into view)" \
  eventually 30 yes viewer_can list gputopologyreports.podshaper.io
check "... and topologypolicies" test "$(viewer_can get topologypolicies.podshaper.io)" = yes
check "... but not change a TopologyPolicy" test "$(viewer_can update topologypolicies.podshaper.io)" = no
check "... and a namespace's ShmUsages (kubectl get shmu)" test "$(viewer_can list shmusages.podshaper.io -n default)" = yes
check "... and its ShmProfiles (kubectl get shmp)" test "$(viewer_can list shmprofiles.podshaper.io -n default)" = yes
check "a namespace's editor: kubectl get shmp (view aggregated into edit)" \
  eventually 30 yes editor_can list shmprofiles.podshaper.io
check "... but not create a ShmProfile" test "$(editor_can create shmprofiles.podshaper.io)" = no
check "... nor change one" test "$(editor_can patch shmprofiles.podshaper.io)" = no
check "... nor its status" test "$(editor_can update shmprofiles.podshaper.io --subresource=status)" = no
check "... but creates pods there (the role is edit)" test "$(editor_can create pods)" = yes
quiet kc delete clusterrolebinding podshaper-test-viewer
quiet kc -n default delete rolebinding podshaper-test-editor
check "operator: its Lease" can podshaper-operator update leases.coordination.k8s.io/podshaper-operator -n $ns
check "operator: the webhook's Secret" can podshaper-operator update secrets/podshaper-webhook-tls -n $ns
check "operator: no other Secret" cannot podshaper-operator get secrets/other -n $ns
check "operator: no Secrets elsewhere" cannot podshaper-operator get secrets -n default
check "operator: its own MutatingWebhookConfiguration" can podshaper-operator patch mutatingwebhookconfigurations/podshaper
check "operator: no other" cannot podshaper-operator patch mutatingwebhookconfigurations/other
check "operator: watch Pods (the shaped ones, by label)" can podshaper-operator watch pods -n default
check "operator: not change them" cannot podshaper-operator patch pods -n default
check "operator: no Pods" cannot podshaper-operator delete pods -n default
check "operator: read their logs (a cut termination message)" can podshaper-operator get pods --subresource=log -n default
check "operator: not exec into them" cannot podshaper-operator create pods --subresource=exec -n default
check "agent: create reports" can podshaper-agent create gputopologyreports.podshaper.io
check "agent: update reports" can podshaper-agent update gputopologyreports.podshaper.io
check "agent: not delete them" cannot podshaper-agent delete gputopologyreports.podshaper.io
check "agent: not their status" cannot podshaper-agent patch gputopologyreports.podshaper.io --subresource=status
check "agent: no Secrets anywhere" cannot podshaper-agent get secrets --all-namespaces
check "agent: not label Nodes" cannot podshaper-agent patch nodes
check "agent: get Pods in its namespace (its memlock-probe's status)" can podshaper-agent get pods -n $ns
check "agent: not list them" cannot podshaper-agent list pods -n $ns
check "agent: no Pods elsewhere" cannot podshaper-agent get pods -n default
# podshaper-shm (node-root on its node): Events and ShmUsages, nothing else.
shm_can() { kc auth can-i --as=system:serviceaccount:podshaper-node:podshaper-shm "$@" 2>/dev/null; }
shm_cannot() { ! shm_can "$@"; }
check "shm: Events on pods" shm_can create events -n default
check "shm: ShmUsages" shm_can create shmusages.podshaper.io -n default
check "shm: their status" shm_can patch shmusages.podshaper.io --subresource=status -n default
check "shm: delete an earlier pod's" shm_can delete shmusages.podshaper.io -n default
check "shm: no Pods" shm_cannot get pods -n default
check "shm: not exec into them" shm_cannot create pods --subresource=exec -n default
check "shm: no Secrets anywhere" shm_cannot get secrets --all-namespaces
check "shm: no Nodes" shm_cannot get nodes
check "shm: no ConfigMaps" shm_cannot get configmaps -n default
check "shm: no reports" shm_cannot get gputopologyreports.podshaper.io
check "shm: no service account tokens" shm_cannot create serviceaccounts --subresource=token -n podshaper-node

finish
