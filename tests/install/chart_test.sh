#!/usr/bin/env bash
# The Helm chart charts/podshaper/: its CRDs are crds/'s, `helm lint --strict` is clean,
# it renders, and it installs the same objects as the kustomize install: manifests/ with
# default values, manifests/overlays/cert-manager/ with certificates.mode=cert-manager.
# Needs kubectl (for kustomize), python3 with PyYAML, and helm, which scripts/helm.sh
# builds from the Go module proxy the first time (cached in ~/.cache/podshaper/ after).
#   bash tests/install/chart_test.sh [SOURCE_DIR]
source "$(dirname "$0")/../cli/lib.sh"
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$root"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
chart=charts/podshaper
compare=tests/install/compare_manifests.py
# helm reads no repositories or plugins of the user's.
export HELM_CONFIG_HOME=$tmp/helm/config HELM_CACHE_HOME=$tmp/helm/cache HELM_DATA_HOME=$tmp/helm/data

# kubectl built with the control plane (make controlplane), else the machine's.
export PATH=$root/build/controlplane:$PATH
command -v kubectl >/dev/null || { echo "FAIL: kubectl is not installed (kubectl kustomize renders manifests/)" >&2; exit 1; }
python3 -c 'import yaml' 2>/dev/null || { echo "FAIL: python3 cannot import yaml (apt-get install python3-yaml)" >&2; exit 1; }
helm=$(scripts/helm.sh) || { echo "FAIL: scripts/helm.sh could not build helm" >&2; exit 1; }
echo "using $("$helm" version --short) ($helm)"

# --- The CRDs: crds/ is the single source; the chart's crds/ holds byte copies.
crd_fix="run scripts/helm.sh sync-crds (it copies the CRDs of crds/, not its kustomization.yaml, into $chart/crds/)"
for f in crds/*.yaml; do
  name=$(basename "$f")
  [[ $name == kustomization.yaml ]] && continue
  if [[ ! -f $chart/crds/$name ]]; then
    fail "$chart/crds/$name is missing: $crd_fix"
  elif ! cmp -s "$f" "$chart/crds/$name"; then
    fail "$chart/crds/$name differs from crds/$name: $crd_fix"
  else
    pass "$chart/crds/$name is crds/$name"
  fi
done
for f in "$chart"/crds/*; do
  [[ -f crds/$(basename "$f") && $(basename "$f") != kustomization.yaml ]] ||
    fail "$f is not a CRD of crds/ (Helm would install it): $crd_fix"
done

# --- helm lint --strict: no [WARNING] or [ERROR], in either certificate mode.
lint() {  # lint NAME HELM-ARGS...
  local name=$1; shift
  if "$helm" lint --strict "$chart" "$@" >"$tmp/lint-$name" 2>&1 && ! grep -qE '\[(WARNING|ERROR)\]' "$tmp/lint-$name"; then
    pass "helm lint --strict ($name) is clean"
  else
    fail "helm lint --strict ($name):"; sed 's/^/    /' "$tmp/lint-$name" >&2
  fi
}
lint default
lint cert-manager --set certificates.mode=cert-manager

# --- It renders, and gives kustomize's objects.
render() {  # render FILE HELM-ARGS...: helm template as the README installs it, CRDs included
  local file=$1; shift
  "$helm" template podshaper "$chart" --namespace podshaper-system --include-crds "$@" >"$tmp/$file" 2>"$tmp/$file.err"
}
check "helm template renders with default values" render helm-default.yaml
# kustomize's install makes its namespace; README's helm install leaves that to
# --create-namespace. With createNamespace=true the chart's objects are kustomize's.
check "helm template renders with createNamespace=true" render helm-kustomize.yaml --set createNamespace=true
check "helm template renders with certificates.mode=cert-manager" \
  render helm-cm.yaml --set createNamespace=true --set certificates.mode=cert-manager
check "scripts/helm.sh template-default is the render that is kustomize's install" \
  bash -c "scripts/helm.sh template-default | cmp -s - '$tmp/helm-kustomize.yaml'"
check "kubectl kustomize manifests/ renders" bash -c "kubectl kustomize manifests/ >'$tmp/kustomize-default.raw.yaml'"
check "kubectl kustomize manifests/overlays/cert-manager/ renders" \
  bash -c "kubectl kustomize manifests/overlays/cert-manager/ >'$tmp/kustomize-cm.raw.yaml'"
# kustomize names each config's ConfigMap by a hash of its content (the chart rolls the
# pods with a checksum annotation instead): a changed config is a new name in the
# Deployment, which rolls its pods. The parity below compares them without the hash.
hashed='podshaper-\(webhook\|operator\)-config-[a-z0-9]\{10\}'
check "kustomize: each config's ConfigMap is named by its content's hash, and mounted by that name" \
  test "$(grep -c "name: $hashed\$" "$tmp/kustomize-default.raw.yaml")" = 4
config_names() { kubectl kustomize "$1" | grep -o "$hashed" | sort -u | tr '\n' ' '; }
mkdir -p "$tmp/edited/manifests"
cp -r manifests/base "$tmp/edited/manifests/"; cp -r crds "$tmp/edited/"
sed -i 's/^  workers: 4$/  workers: 6/' "$tmp/edited/manifests/base/config/webhook.yaml"
check "kustomize: an edited webhook config is a new ConfigMap name, the operator's stays" python3 - \
  "$(config_names manifests/base)" "$(config_names "$tmp/edited/manifests/base")" <<'EOF'
import sys
before, after = sys.argv[1].split(), sys.argv[2].split()
assert len(before) == len(after) == 2, (before, after)
assert before[0] == after[0] and before[1] != after[1], (before, after)   # operator's sorts first
EOF
for v in default cm; do
  sed 's/\(podshaper-\(webhook\|operator\)-config\)-[a-z0-9]\{10\}/\1/' "$tmp/kustomize-$v.raw.yaml" >"$tmp/kustomize-$v.yaml"
done

parity() {  # parity NAME KUSTOMIZE HELM [compare_manifests.py options]
  local name=$1 k=$2 h=$3; shift 3
  if python3 "$compare" "$tmp/$k" "$tmp/$h" "$@" >"$tmp/parity-$name" 2>&1; then
    pass "helm's objects are kustomize's ($name): $(tail -1 "$tmp/parity-$name")"
  else
    fail "helm's objects differ from kustomize's ($name):"; grep -v '^ok:' "$tmp/parity-$name" | sed 's/^/    /' >&2
  fi
}
parity default kustomize-default.yaml helm-kustomize.yaml
# The overlay's operator config leaves the leader-election durations to the operator's
# defaults; the chart always writes them (operator.leaderElection.* in values.yaml).
parity cert-manager kustomize-cm.yaml helm-cm.yaml \
  --allow-extra ConfigMap/podshaper-operator-config:data.config.yaml.leaderElection.leaseDuration \
  --allow-extra ConfigMap/podshaper-operator-config:data.config.yaml.leaderElection.renewDeadline \
  --allow-extra ConfigMap/podshaper-operator-config:data.config.yaml.leaderElection.retryPeriod

# --- Spot checks of the fields that matter most, by name (the parity check above
# compares every field; these say what broke in words).
field() {  # field FILE KIND NAME PYTHON-EXPR-OF-o: prints the value as JSON
  python3 - "$tmp/$1" "$2" "$3" "$4" <<'EOF'
import json, sys, yaml
path, kind, name, expr = sys.argv[1:]
def ws(x):  # every string's runs of whitespace made one space (CEL, folded YAML)
    if isinstance(x, dict): return {k: ws(v) for k, v in x.items()}
    if isinstance(x, list): return [ws(v) for v in x]
    return " ".join(x.split()) if isinstance(x, str) else x
for o in yaml.safe_load_all(open(path)):
    if o and o["kind"] == kind and o["metadata"]["name"] == name:
        print(json.dumps(eval(expr, {"yaml": yaml, "ws": ws}, {"o": o}), sort_keys=True))
        break
else:
    sys.exit(f"no {kind} {name}")
EOF
}
same() {  # same "what" KIND NAME EXPR [variant]: the field is the same in kustomize's and helm's render
  local what=$1 kind=$2 name=$3 expr=$4 v=${5:-default} a b
  a=$(field "kustomize-$v.yaml" "$kind" "$name" "$expr" 2>&1) || true
  b=$(field "helm-$v.yaml" "$kind" "$name" "$expr" 2>&1) || true
  if [[ -n $a && $a == "$b" ]]; then pass "$what ($v)"; else fail "$what ($v): kustomize $a, helm $b"; fi
}
for v in default cm; do
  same "the MutatingWebhookConfiguration's webhooks" MutatingWebhookConfiguration podshaper 'o["webhooks"]' $v
  same "the MutatingWebhookConfiguration's annotations" MutatingWebhookConfiguration podshaper 'o["metadata"].get("annotations")' $v
  same "the ValidatingAdmissionPolicy (CEL whitespace aside)" ValidatingAdmissionPolicy podshaper-agent-own-node 'ws(o["spec"])' $v
  same "podshaper-shm's ValidatingAdmissionPolicy (CEL whitespace aside)" ValidatingAdmissionPolicy podshaper-shm-own-node 'ws(o["spec"])' $v
  same "podshaper-shm's pod: host PID, tolerations, nodeSelector, containers, volumes" DaemonSet podshaper-shm \
    '[o["spec"]["template"]["spec"].get(k) for k in ("hostPID", "tolerations", "nodeSelector", "containers", "volumes")]' $v
  same "the DaemonSet's tolerations and nodeSelector" DaemonSet podshaper-agent \
    '[o["spec"]["template"]["spec"].get(k) for k in ("tolerations", "nodeSelector", "runtimeClassName")]' $v
  same "the DaemonSet's containers" DaemonSet podshaper-agent 'o["spec"]["template"]["spec"]["containers"]' $v
  for d in webhook operator; do
    same "podshaper-$d's securityContexts" Deployment podshaper-$d \
      '[o["spec"]["template"]["spec"]["securityContext"]] + [c["securityContext"] for c in o["spec"]["template"]["spec"]["containers"]]' $v
  done
  same "the webhook's config.yaml" ConfigMap podshaper-webhook-config 'yaml.safe_load(o["data"]["config.yaml"])' $v
done
same "the operator's config.yaml" ConfigMap podshaper-operator-config 'yaml.safe_load(o["data"]["config.yaml"])'
same "the operator's webhookCertificate" ConfigMap podshaper-operator-config \
  'yaml.safe_load(o["data"]["config.yaml"])["webhookCertificate"]' cm
same "the cert-manager Certificate" Certificate podshaper-webhook 'o["spec"]' cm

# --- The namespace: the release's (helm install -n), unless `namespace` says another.
# namespace_is FILE NS [namespace]: every object and every reference to podshaper's
# namespace says NS (helm test's Role and RoleBinding go to test.namespace), podshaper-shm's
# say podshaper-node (its own, Pod Security privileged, always made); with a third argument
# the chart's Namespace object NS is there too, with the restricted labels.
namespace_is() {
  python3 - "$tmp/$1" "$2" "${3:-}" <<'EOF'
import sys, yaml
path, ns, want_namespace = sys.argv[1], sys.argv[2], sys.argv[3] == "namespace"
shm_ns = "podshaper-node"
objs = [o for o in yaml.safe_load_all(open(path)) if o]
get = lambda kind, name: next((o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name), None)
bad = []
def want(what, got, expected):
    if got != expected: bad.append(f"{what}: {got!r}, not {expected!r}")
mwc = get("MutatingWebhookConfiguration", "podshaper")
w = mwc["webhooks"][0]
want("the webhook's Service", w["clientConfig"]["service"]["namespace"], ns)
excluded = next(e["values"] for e in w["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name")
want("the namespaces the webhook leaves alone", excluded, ["kube-system", "kube-node-lease", ns, shm_ns])
vap = get("ValidatingAdmissionPolicy", "podshaper-agent-own-node")
want("the admission policy's agent", vap["spec"]["matchConditions"][0]["expression"],
     f'request.userInfo.username == "system:serviceaccount:{ns}:podshaper-agent"')
want("podshaper-shm's admission policy", get("ValidatingAdmissionPolicy", "podshaper-shm-own-node")["spec"]["matchConditions"][0]["expression"],
     f'request.userInfo.username == "system:serviceaccount:{shm_ns}:podshaper-shm"')
cfg = yaml.safe_load(get("ConfigMap", "podshaper-operator-config")["data"]["config.yaml"])
want("the operator's leader-election Lease", cfg["leaderElection"]["namespace"], ns)
cert = get("Certificate", "podshaper-webhook")
if cert:  # cert-manager's certificate and the cainjector's annotation
    want("the Certificate's dnsNames", cert["spec"]["dnsNames"], [f"podshaper-webhook.{ns}.svc", f"podshaper-webhook.{ns}.svc.cluster.local"])
    want("the cainjector's annotation", mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], f"{ns}/podshaper-webhook")
else:  # the operator names the certificate podshaper-webhook.<namespace>.svc and writes its Secret there
    want("the operator's certificate Secret and DNS names",
         [cfg["webhookCertificate"][k] for k in ("namespace", "service", "secretName")], [ns, "podshaper-webhook", "podshaper-webhook-tls"])
job = get("Job", "podshaper-prune")["spec"]["template"]["spec"]["containers"][0]["args"]
want("the prune hook's --namespace", job[job.index("--namespace") + 1], ns)
cluster_scoped = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TopologyPolicy", "Namespace"}
for o in objs:
    label = f'{o["kind"]} {o["metadata"]["name"]}'
    for s in o.get("subjects", []):
        want(f"{label}'s subject {s['name']}", s.get("namespace"), shm_ns if s["name"] == "podshaper-shm" else ns)
    test_rbac = (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test" and o["kind"] in ("Role", "RoleBinding")
    if o["kind"] not in cluster_scoped and not test_rbac:  # (helm test's: in test.namespace, where its pod goes)
        want(label, o["metadata"].get("namespace"), shm_ns if o["metadata"]["name"].startswith("podshaper-shm") else ns)
namespaces = [(o["metadata"]["name"], o["metadata"]["labels"].get("pod-security.kubernetes.io/enforce"))
              for o in objs if o["kind"] == "Namespace"]
want("the Namespaces the chart makes", namespaces, ([(ns, "restricted")] if want_namespace else []) + [(shm_ns, "privileged")])
if bad: print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}
nsrender() {  # nsrender FILE HELM-ARGS...
  local file=$1; shift
  "$helm" template podshaper "$chart" "$@" >"$tmp/$file" 2>"$tmp/$file.err" || { cat "$tmp/$file.err" >&2; return 1; }
}
check "renders with -n ml-infra" nsrender helm-ml.yaml --namespace ml-infra
check "-n ml-infra: every object, the webhook's Service and excluded namespace, the Lease, the certificate, RBAC subjects and the admission policy say ml-infra (podshaper-shm's podshaper-node); no Namespace but podshaper-node" \
  namespace_is helm-ml.yaml ml-infra
check "-n ml-infra: podshaper-system is nowhere" bash -c "! grep -n podshaper-system '$tmp/helm-ml.yaml'"
check "-n podshaper-system, the README's install: all in podshaper-system (podshaper-shm in podshaper-node, which the chart makes); no other Namespace (--create-namespace makes it)" \
  namespace_is helm-default.yaml podshaper-system
check "renders with -n ml-infra and certificates.mode=cert-manager" nsrender helm-ml-cm.yaml --namespace ml-infra --set certificates.mode=cert-manager
check "... the Certificate's dnsNames and the cainjector's annotation say ml-infra" namespace_is helm-ml-cm.yaml ml-infra
check "renders with -n ml-infra and namespace=other" nsrender helm-other.yaml --namespace ml-infra --set namespace=other
check "namespace=other: everything says other" namespace_is helm-other.yaml other
check "namespace=other: ml-infra, the release's, is nowhere" bash -c "! grep -n ml-infra '$tmp/helm-other.yaml'"
check "renders with -n ml-infra, namespace=other and certificates.mode=cert-manager" \
  nsrender helm-other-cm.yaml --namespace ml-infra --set namespace=other --set certificates.mode=cert-manager
check "... the Certificate's dnsNames and the cainjector's annotation say other" namespace_is helm-other-cm.yaml other
check "renders with namespace=other and createNamespace=true" \
  nsrender helm-other-ns.yaml --namespace ml-infra --set namespace=other --set createNamespace=true
check "createNamespace=true: the chart makes namespace other, Pod Security restricted (and podshaper-node)" \
  namespace_is helm-other-ns.yaml other namespace
check "renders with -n ml-infra and createNamespace=true (helm template | kubectl apply)" \
  nsrender helm-ml-ns.yaml --namespace ml-infra --set createNamespace=true
check "createNamespace=true without namespace: the chart makes ml-infra" namespace_is helm-ml-ns.yaml ml-infra namespace
check "createNamespace=true, as kustomize's install: podshaper-system, Pod Security restricted" \
  namespace_is helm-kustomize.yaml podshaper-system namespace

# --- Values: the rest change what they say.
"$helm" template podshaper "$chart" --set webhook.replicas=1 --set operator.replicas=3 \
  --set createNamespace=false --set installDefaultPolicy=false --set webhook.failurePolicy=Ignore \
  --set webhook.timeoutSeconds=10 --set 'webhook.excludeNamespaces={monitoring}' \
  --set agent.runtimeClassName=nvidia --set agent.interval=30 --set webhook.image.registry=registry.example.com/ps \
  --set operator.image.tag=0.2.0 --set 'imagePullSecrets={regcred}' --set webhook.config.partialNode=warn \
  --set operator.leaderElection.leaseDuration=30s --set operator.eventNamespace=podshaper-events >"$tmp/helm-values.yaml"
v=$tmp/helm-values.yaml
objects() {  # objects FILE: "Kind name" of each object
  python3 -c 'import sys, yaml
for o in yaml.safe_load_all(open(sys.argv[1])):
    if o: print(o["kind"], o["metadata"]["name"])' "$1"
}
objects "$v" >"$tmp/values-objects"
check "one webhook replica: no webhook PDB" bash -c "! grep -qx 'PodDisruptionBudget podshaper-webhook' '$tmp/values-objects'"
check "three operator replicas, and the operator's PDB" bash -c \
  "grep -q 'replicas: 3' '$v' && grep -qx 'PodDisruptionBudget podshaper-operator' '$tmp/values-objects'"
check "createNamespace=false: no Namespace but podshaper-shm's" \
  bash -c "test \"\$(grep '^Namespace ' '$tmp/values-objects')\" = 'Namespace podshaper-node'"
check "installDefaultPolicy=false: no TopologyPolicy" bash -c "! grep -q '^TopologyPolicy ' '$tmp/values-objects'"
check "failurePolicy and timeoutSeconds" bash -c "grep -q 'failurePolicy: Ignore' '$v' && grep -q 'timeoutSeconds: 10' '$v'"
check "excludeNamespaces, with podshaper's own added" grep -q '"monitoring"' "$v"
check "the agent's runtimeClassName and interval" bash -c "grep -q 'runtimeClassName: nvidia' '$v' && grep -q -- '--interval, \"30\"' '$v'"
check "images: registry and tag" bash -c "grep -q 'image: registry.example.com/ps/podshaper-webhook:0.1.0' '$v' &&
  grep -q 'image: podshaper-operator:0.2.0' '$v' && grep -q -- '- name: regcred' '$v'"
check "the webhook config" grep -q 'partialNode: warn' "$v"
check "the operator config" bash -c "grep -q 'leaseDuration: 30s' '$v' && grep -q 'eventNamespace: \"podshaper-events\"' '$v'"
"$helm" template podshaper "$chart" --set certificates.mode=cert-manager \
  --set certificates.certManager.issuerRef.kind=ClusterIssuer --set certificates.certManager.issuerRef.name=corp-ca >"$tmp/helm-issuer.yaml"
"$helm" template podshaper "$chart" --set 'webhook.configText=partialNode: expand' >"$tmp/helm-configtext.yaml"
check "webhook.configText replaces webhook.config" bash -c \
  "grep -q '^    partialNode: expand$' '$tmp/helm-configtext.yaml' && ! grep -q 'prefetchFactor' '$tmp/helm-configtext.yaml'"
objects "$tmp/helm-issuer.yaml" >"$tmp/issuer-objects"
check "certManager.issuerRef: no self-signed Issuer, the Certificate uses it" bash -c \
  "! grep -q '^Issuer ' '$tmp/issuer-objects' && grep -q 'name: corp-ca' '$tmp/helm-issuer.yaml'"

# --- memlock: one value for the webhook's config, the agent's memlock-probe and the default policy.
"$helm" template podshaper "$chart" --set memlock=4Mi >"$tmp/helm-memlock.yaml"
check "memlock=4Mi: the webhook asks 4Mi, the probe's annotation 4194304 bytes, the agent reports it" \
  python3 - "$tmp/helm-memlock.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
get = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
assert yaml.safe_load(get("ConfigMap", "podshaper-webhook-config")["data"]["config.yaml"])["memlock"] == "4Mi"
pod = get("DaemonSet", "podshaper-agent")["spec"]["template"]
ulimits = yaml.safe_load(pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.memlock-probe"])
assert ulimits == [{"type": "RLIMIT_MEMLOCK", "soft": 4194304, "hard": 4194304}], ulimits
args = pod["spec"]["containers"][0]["args"]
assert args[args.index("--memlock-requested") + 1] == "4Mi", args
assert get("TopologyPolicy", "default")["spec"]["requirements"]["requireMemlockUnlimited"] is False
EOF
"$helm" template podshaper "$chart" -f - >"$tmp/helm-memlock-number.yaml" <<<'memlock: 68719476736'
check "memlock as a number in a values file: written whole" bash -c \
  "grep -q 'soft: 68719476736' '$tmp/helm-memlock-number.yaml' && grep -q '^    memlock: 68719476736' '$tmp/helm-memlock-number.yaml'"
"$helm" template podshaper "$chart" --set memlock=64Gi --set 'webhook.configText=partialNode: warn' >"$tmp/helm-memlock-text.yaml"
check "with webhook.configText, memlock is added to it" bash -c \
  "grep -q '^    partialNode: warn' '$tmp/helm-memlock-text.yaml' && grep -q '^    memlock: 64Gi' '$tmp/helm-memlock-text.yaml' &&
   grep -q 'soft: 68719476736' '$tmp/helm-memlock-text.yaml'"

# --- Per component: more flags and environment variables.
"$helm" template podshaper "$chart" --set 'webhook.extraArgs={--threads,4}' --set 'operator.extraArgs={--identity,x}' \
  --set 'webhook.extraEnv[0].name=A' --set-string 'webhook.extraEnv[0].value=1' --set 'operator.extraEnv[0].name=B' \
  --set-string 'operator.extraEnv[0].value=2' --set 'agent.extraEnv[0].name=C' --set-string 'agent.extraEnv[0].value=3' >"$tmp/helm-extra.yaml"
check "extraArgs and extraEnv reach each component's container" python3 - "$tmp/helm-extra.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
c = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)["spec"]["template"]["spec"]["containers"][0]
w, o, a = c("Deployment", "podshaper-webhook"), c("Deployment", "podshaper-operator"), c("DaemonSet", "podshaper-agent")
assert w["args"][-2:] == ["--threads", "4"] and o["args"][-2:] == ["--identity", "x"], (w["args"], o["args"])
assert {"name": "A", "value": "1"} in w["env"], w.get("env")
assert {"name": "B", "value": "2"} in o["env"] and o["env"][0]["name"] == "POD_NAME", o["env"]
assert {"name": "C", "value": "3"} in a["env"] and a["env"][0]["name"] == "NODE_NAME", a["env"]
EOF

# --- Monitoring: off by default; on, a ServiceMonitor per component and the alerts.
check "monitoring off by default: no ServiceMonitor, no PrometheusRule" \
  bash -c "! grep -q 'kind: ServiceMonitor\|kind: PrometheusRule' '$tmp/helm-default.yaml'"
"$helm" template podshaper "$chart" --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true \
  --set monitoring.serviceMonitor.labels.release=prom >"$tmp/helm-monitoring.yaml"
check "monitoring on: each ServiceMonitor selects a Service that exists, on its port (https; podshaper-shm's plain metrics); the alerts are all there" \
  python3 - "$tmp/helm-monitoring.yaml" "$chart/alerts.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
services = [o for o in objs if o["kind"] == "Service"]
monitors = [o for o in objs if o["kind"] == "ServiceMonitor"]
assert sorted(m["metadata"]["name"] for m in monitors) == ["podshaper-agent", "podshaper-operator", "podshaper-shm", "podshaper-webhook"]
for m in monitors:
    want = m["spec"]["selector"]["matchLabels"]
    hits = [s for s in services if all(s["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
            and s["metadata"]["namespace"] == m["metadata"]["namespace"]]
    assert len(hits) == 1, (m["metadata"]["name"], [s["metadata"]["name"] for s in hits])
    port = "metrics" if m["metadata"]["name"] == "podshaper-shm" else "https"
    assert [p["name"] for p in hits[0]["spec"]["ports"]] == [port] and m["spec"]["endpoints"][0]["port"] == port, m
    assert m["metadata"]["labels"]["release"] == "prom"
shm = next(m for m in monitors if m["metadata"]["name"] == "podshaper-shm")["spec"]["endpoints"][0]
assert shm["scheme"] == "http" and shm["honorLabels"] is True, shm  # the shaped pod's namespace and pod labels
rule = next(o for o in objs if o["kind"] == "PrometheusRule")
rules = rule["spec"]["groups"][0]["rules"]
assert rules == yaml.safe_load(open(sys.argv[2])), "the PrometheusRule holds alerts.yaml as it is"
names = [r["alert"] for r in rules]
assert len(names) == len(set(names)) >= 10, names
for r in rules:
    assert r["expr"] and r["labels"]["severity"] in ("critical", "warning", "info"), r
    assert r["annotations"]["runbook"] == "docs/admin.md#" + r["alert"].lower(), r
EOF
check "every alert's expr is PromQL (Prometheus' own parser, scripts/promql.sh)" \
  bash -c "bash '$root/scripts/promql.sh' '$chart/alerts.yaml' >/dev/null"
printf -- '- alert: Broken\n  expr: sum(rate(x[5m]) > 0\n' >"$tmp/broken-rules.yaml"
check "... and a rule that is not, fails it" bash -c "! bash '$root/scripts/promql.sh' '$tmp/broken-rules.yaml' >/dev/null"
check "docs/admin.md explains every alert" python3 - "$chart/alerts.yaml" "$root/docs/admin.md" <<'EOF'
import sys, yaml
doc = open(sys.argv[2]).read()
missing = [r["alert"] for r in yaml.safe_load(open(sys.argv[1])) if "### " + r["alert"] + "\n" not in doc]
assert not missing, missing
EOF

# --- Logging: every component gets the flags, only where they are not the defaults.
"$helm" template podshaper "$chart" --set logLevel=debug --set logFormat=json >"$tmp/helm-log.yaml"
check "logLevel=debug logFormat=json: the webhook, the operator and the agent log so" python3 - "$tmp/helm-log.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
for kind, name in [("Deployment", "podshaper-webhook"), ("Deployment", "podshaper-operator"), ("DaemonSet", "podshaper-agent")]:
    o = next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
    args = o["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--log-level") + 1] == "debug" and args[args.index("--log-format") + 1] == "json", (name, args)
EOF
check "at the defaults, no logging flags" bash -c "! grep -q -- '--log-' '$tmp/helm-default.yaml'"
check "recommended labels: each workload and its pods say their app.kubernetes.io/component" python3 - "$tmp/helm-default.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
for kind, name, comp in [("Deployment", "podshaper-webhook", "webhook"), ("Deployment", "podshaper-operator", "operator"),
                         ("DaemonSet", "podshaper-agent", "agent"), ("DaemonSet", "podshaper-shm", "shm")]:
    o = next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
    for labels in (o["metadata"]["labels"], o["spec"]["template"]["metadata"]["labels"]):
        assert labels["app.kubernetes.io/component"] == comp and labels["app.kubernetes.io/part-of"] == "podshaper", labels
EOF
check "helm uninstall's prune hook: a pre-delete Job that stops the operator, then cleans the nodes" python3 - "$tmp/helm-default.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
hooks = {(o["kind"], o["metadata"]["name"]): o["metadata"]["annotations"] for o in objs
         if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"}
assert set(hooks) == {(k, "podshaper-prune") for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                                      "RoleBinding", "Job")}, hooks
assert all(a["helm.sh/hook"] == "pre-delete" for a in hooks.values()), hooks
assert all(int(a["helm.sh/hook-weight"]) < int(hooks[("Job", "podshaper-prune")]["helm.sh/hook-weight"])
           for k, a in hooks.items() if k[0] != "Job"), hooks
job = next(o for o in objs if o["kind"] == "Job")
pod = job["spec"]["template"]["spec"]
assert pod["containers"][0]["args"][:6] == ["prune", "--in-cluster", "--namespace", "podshaper-system", "--stop",
                                            "podshaper-operator"], pod
assert pod["securityContext"]["runAsNonRoot"] and pod["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]
role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "podshaper-prune")
assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["podshaper-operator"],
                          "verbs": ["get", "delete"]}], role
EOF
check "helm test: a pod that runs podshaper-webhook check, allowed to create pods in test.namespace only" python3 - "$tmp/helm-default.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
tests = {(o["kind"], o["metadata"]["namespace"]): o for o in objs
         if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"}
assert set(tests) == {("ServiceAccount", "podshaper-system"), ("Role", "default"), ("RoleBinding", "default"),
                      ("Pod", "podshaper-system")}, set(tests)
pod = tests[("Pod", "podshaper-system")]
assert pod["spec"]["containers"][0]["args"] == ["check", "--in-cluster", "--namespace", "default"], pod
assert pod["spec"]["containers"][0]["image"].startswith("podshaper-webhook:"), pod
assert tests[("Role", "default")]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
assert all("hook-succeeded" in o["metadata"]["annotations"]["helm.sh/hook-delete-policy"] for o in tests.values())
EOF
"$helm" template podshaper "$chart" --set pruneOnUninstall=false >"$tmp/helm-noprune.yaml"
check "pruneOnUninstall=false: it renders, without the prune hook" \
  bash -c "grep -q 'name: podshaper-operator' '$tmp/helm-noprune.yaml' && ! grep -q podshaper-prune '$tmp/helm-noprune.yaml'"

# --- podshaper-shm: its values, and none of it when off.
"$helm" template podshaper "$chart" --set shm.kubeletRoot=/data/kubelet/ --set shm.nriSocket=/run/containerd/nri/nri.sock \
  --set shm.interval=500ms --set shm.clean=false --set shm.cleanUserVolumes=true --set shm.namespace=gpu-node \
  --set 'shm.extraArgs={--max-files,1000}' >"$tmp/helm-shm.yaml"
check "shm.*: the kubelet's pods and the NRI socket's directory at their host paths, the flags, the namespace" \
  python3 - "$tmp/helm-shm.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
get = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
ds = get("DaemonSet", "podshaper-shm")
pod = ds["spec"]["template"]["spec"]
c = pod["containers"][0]
assert c["args"] == ["--node=$(NODE_NAME)", "--kubelet-root=/data/kubelet", "--nri-socket=/run/containerd/nri/nri.sock",
                     "--interval=500ms", "--clean=false", "--clean-user-volumes=true", "--metrics-address=:8080",
                     "--max-files", "1000"], c["args"]
assert [(m["name"], m["mountPath"]) for m in c["volumeMounts"]] == [("kubelet-pods", "/data/kubelet/pods"), ("nri", "/run/containerd/nri")]
assert [v["hostPath"]["path"] for v in pod["volumes"]] == ["/data/kubelet/pods", "/run/containerd/nri"], pod["volumes"]
assert ds["metadata"]["namespace"] == "gpu-node" and get("Namespace", "gpu-node")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
assert get("ClusterRoleBinding", "podshaper-shm")["subjects"] == [{"kind": "ServiceAccount", "name": "podshaper-shm", "namespace": "gpu-node"}]
assert "system:serviceaccount:gpu-node:podshaper-shm" in get("ValidatingAdmissionPolicy", "podshaper-shm-own-node")["spec"]["matchConditions"][0]["expression"]
sel = get("MutatingWebhookConfiguration", "podshaper")["webhooks"][0]["namespaceSelector"]["matchExpressions"]
assert "gpu-node" in next(e["values"] for e in sel if e["key"] == "kubernetes.io/metadata.name"), sel
EOF
check "podshaper-shm's powers: root with SYS_PTRACE and DAC_OVERRIDE only, host PID, read-only root; no API rights but Events and ShmUsages" \
  python3 - "$tmp/helm-default.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
get = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
pod = get("DaemonSet", "podshaper-shm")["spec"]["template"]["spec"]
sc = pod["containers"][0]["securityContext"]
assert pod["hostPID"] is True and "hostNetwork" not in pod and "hostIPC" not in pod, pod
assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE", "DAC_OVERRIDE"]} and "privileged" not in sc, sc
assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, sc
assert [v["hostPath"]["path"] for v in pod["volumes"]] == ["/var/lib/kubelet/pods", "/var/run/nri"], pod["volumes"]
rules = get("ClusterRole", "podshaper-shm")["rules"]
assert rules == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
                 {"apiGroups": ["podshaper.io"], "resources": ["shmusages"], "verbs": ["get", "create", "delete"]},
                 {"apiGroups": ["podshaper.io"], "resources": ["shmusages/status"], "verbs": ["patch"]}], rules
bound = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
         and any(s["name"] == "podshaper-shm" for s in o.get("subjects", []))]
assert [o["metadata"]["name"] for o in bound] == ["podshaper-shm"], bound
assert "shmusages" in get("ClusterRole", "podshaper-view")["rules"][0]["resources"]
EOF
check "ShmProfiles: the operator writes them (status too), the webhook and view read them, edit and admin get nothing more" \
  python3 - "$tmp/helm-default.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
def grants(role, resource):
    return sorted(v for r in role["rules"] if "podshaper.io" in r["apiGroups"] and resource in r["resources"] for v in r["verbs"])
get = lambda kind, name: next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)
operator = get("ClusterRole", "podshaper-operator")
assert grants(operator, "shmprofiles") == sorted(["get", "list", "watch", "create", "update", "patch", "delete"]), operator
assert grants(operator, "shmprofiles/status") == ["get", "patch", "update"], operator
assert grants(operator, "shmusages") == ["get", "list", "watch"], operator
assert grants(get("ClusterRole", "podshaper-webhook"), "shmprofiles") == ["get", "list", "watch"]
assert grants(get("ClusterRole", "podshaper-view"), "shmprofiles") == ["get", "list", "watch"]
# A namespace's editors must not forge the profile that sizes their next pods.
for o in objs:
    labels = o["metadata"].get("labels") or {}
    if o["kind"] == "ClusterRole" and any(labels.get("rbac.authorization.k8s.io/aggregate-to-" + r) == "true" for r in ("edit", "admin")):
        assert not [r for r in o["rules"] if "podshaper.io" in r.get("apiGroups", [])], o["metadata"]["name"]
writers = [o["metadata"]["name"] for o in objs if o["kind"] in ("ClusterRole", "Role")
           and any(set(r["verbs"]) - {"get", "list", "watch"} for r in o.get("rules", [])
                   if "podshaper.io" in r.get("apiGroups", []) and any(x.startswith("shmprofiles") for x in r["resources"]))]
assert writers == ["podshaper-operator"], writers
EOF
"$helm" template podshaper "$chart" --set shm.enabled=false --set monitoring.serviceMonitor.enabled=true >"$tmp/helm-noshm.yaml"
check "shm.enabled=false: no podshaper-shm, no podshaper-node" \
  bash -c "! grep -q 'podshaper-shm\\|podshaper-node' '$tmp/helm-noshm.yaml'"

# --- Values that would break the install fail the render, naming the value.
refuses() {  # refuses "what" "message" HELM-ARGS...
  local what=$1 msg=$2; shift 2
  if "$helm" template podshaper "$chart" "$@" >/dev/null 2>"$tmp/err"; then
    fail "$what: rendered"
  else
    check "$what: refused, naming it" grep -qF -- "$msg" "$tmp/err"
  fi
}
refuses "timeoutSeconds 31" "webhook.timeoutSeconds: 31: expected whole seconds from 1 to 30" --set webhook.timeoutSeconds=31
refuses "timeoutSeconds 0" "webhook.timeoutSeconds: 0" --set webhook.timeoutSeconds=0
refuses "a certificates.mode" 'certificates.mode: "vault": expected operator or cert-manager' --set certificates.mode=vault
refuses "a failurePolicy" 'webhook.failurePolicy: "fail": expected Fail or Ignore' --set webhook.failurePolicy=fail
refuses "a memlock that is no quantity" 'memlock: "lots": expected unlimited or a whole quantity of bytes' --set memlock=lots
refuses "a fractional memlock" 'memlock: "1.5Gi": expected unlimited or a whole quantity of bytes' --set memlock=1.5Gi
refuses "a zero memlock" 'memlock: "0": a locked-memory limit is at least 1 byte' --set memlock=0
refuses "memlock in webhook.config" 'webhook.config.memlock: set the top-level value memlock instead' --set webhook.config.memlock=4Mi
refuses "memlock in webhook.configText" 'webhook.configText: leave memlock out' --set 'webhook.configText=memlock: 4Mi'
# values.schema.json: a key the chart does not have, or a value of the wrong type, is refused.
refuses "a misspelt key (webhook.replica)" "Additional property replica is not allowed" --set webhook.replica=3
refuses "a misspelt top-level key" "Additional property memlok is not allowed" --set memlok=4Mi
refuses "a list where a map goes" "nodeSelector" --set 'agent.nodeSelector={a}'
refuses "a boolean as text" "createNamespace" --set-string createNamespace=yes
refuses "a namespace that is no namespace's name" "namespace" --set namespace=GPU_admission
refuses "an environment variable's value as a number" "extraEnv.0.value" --set 'webhook.extraEnv[0].name=A' --set 'webhook.extraEnv[0].value=1'
refuses "a logLevel" 'logLevel: "verbose": expected trace, debug, info, warn or error' --set logLevel=verbose
refuses "an empty test.namespace" "test.namespace" --set test.namespace=
refuses "a logFormat" 'logFormat: "logfmt": expected text or json' --set logFormat=logfmt
refuses "shm.namespace podshaper's own" "is podshaper's own namespace, which runs under Pod Security restricted" \
  --namespace podshaper-system --set shm.namespace=podshaper-system
refuses "an shm.interval" 'shm.interval: "fast": expected a duration' --set shm.interval=fast
refuses "an shm.interval below 100ms" 'shm.interval: "50ms": below 100ms' --set shm.interval=50ms
refuses "an shm.nriSocket that is no absolute path" "nriSocket" --set shm.nriSocket=nri.sock
finish
