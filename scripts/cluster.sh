#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for podshaper's demo and end-to-end tests:
# etcd, kube-apiserver, kube-scheduler and kube-controller-manager (built by
# scripts/controlplane-build.sh), GPU Node objects made from the topology fixtures, the
# CRDs, and podshaper-webhook as a process registered by URL (PODSHAPER_WITH_WEBHOOK=no and
# PODSHAPER_WITH_CRDS=no leave podshaper out). With PODSHAPER_WITH_NODE=yes also one real
# node, scripts/node.sh: kubelet, containerd with NRI, runc and CNI, where shaped pods run;
# `install` then puts podshaper on it as pods (make cluster-up, make demo, the real-node tests);
# PODSHAPER_NODE_LIFECYCLE=yes adds the node lifecycle controller (the node-fault tests).
#
#   scripts/cluster.sh up      start (idempotent: does nothing while up)
#   scripts/cluster.sh down    stop exactly what `up` started (recorded pids)
#   scripts/cluster.sh status
#   scripts/cluster.sh down-all
#                      every cluster of this checkout that runs (.cluster, build/*/), stopped
#                      with a line each: make test does it first, make demo, make clean and
#                      the real-node tests too (a machine runs one real node at a time)
#   scripts/cluster.sh down-other DIR
#                      the cluster in DIR, if this checkout's, the same way (scripts/node.sh,
#                      before it takes the machine's real node from it)
#   scripts/cluster.sh install  podshaper installed as pods on the real node, as an admin does
#                      (make cluster-up, make demo, the real-node tests; after `up` with
#                      PODSHAPER_WITH_NODE=yes PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no)
#   scripts/cluster.sh stop-webhook     the webhook `up` started (a test runs its own replicas)
#   scripts/cluster.sh stop-apiserver [SIGNAL] | start-apiserver | restart-apiserver
#                      kube-apiserver alone, etcd kept (the fault tests: watches must recover)
#
# Everything lives in .cluster/: pki/, kubeconfig, logs/, pids/, env.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${PODSHAPER_CLUSTER_DIR:-$root/.cluster}
cpbin=${PODSHAPER_CONTROLPLANE_BIN:-$root/build/controlplane}
# kubectl from the same release as the control plane (scripts/controlplane-build.sh).
export PATH=$cpbin:$PATH
webhook_bin=${PODSHAPER_BIN:-$root/build/bin}/podshaper-webhook
webhook_config=${PODSHAPER_WEBHOOK_CONFIG:-}  # a config file for the webhook; defaults when empty
with_webhook=${PODSHAPER_WITH_WEBHOOK:-yes}    # no: the install test brings its own (manifests/)
with_node=${PODSHAPER_WITH_NODE:-no}           # yes: a real node too (scripts/node.sh)
node_lifecycle=${PODSHAPER_NODE_LIFECYCLE:-no}  # yes: the node lifecycle controller (NotReady, taints)
with_crds=${PODSHAPER_WITH_CRDS:-yes}          # no: nothing of podshaper's (an admin installs it)
# The config `up` wrote for a real node (below), for a later restart-webhook.
[[ -z $webhook_config && -f $dir/webhook-config.yaml && -d $dir/node ]] && webhook_config=$dir/webhook-config.yaml
kubeconfig=$dir/kubeconfig

log() { echo "cluster: $*" >&2; }
starting=no
die() {
  echo "cluster: error: $*" >&2
  if [[ $starting == yes ]]; then  # leave nothing half-started behind
    for f in "$dir"/logs/*.log; do [[ -s $f ]] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
    down
  fi
  exit 1
}
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

procs_dir=$dir
source "$root/scripts/procs.sh"  # free_ports, running, start, wait_for, stop_one, statuses

pki() {
  [[ -f $dir/pki/sa.pub ]] && return  # the last file written: an interrupted run starts over
  local p=$dir/pki.tmp
  rm -rf "$p"
  mkdir -p "$p"
  log "generating certificates"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=podshaper-test-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  sign() {  # sign NAME SUBJECT [SANS]
    local ext=$p/$1.ext
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$ext"
    [[ -n ${3:-} ]] && echo "subjectAltName=$3" >>"$ext"
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" 2>/dev/null
    openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 3650 \
      -extfile "$ext" -out "$p/$1.crt" 2>/dev/null
    rm -f "$p/$1.csr" "$ext"
  }
  sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
  sign admin "/O=system:masters/CN=podshaper-admin"
  sign scheduler "/CN=system:kube-scheduler"
  sign controller-manager "/CN=system:kube-controller-manager"
  sign webhook "/CN=podshaper-webhook" "IP:127.0.0.1,DNS:localhost"
  sign webhook-client "/CN=podshaper-webhook"
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  rm -rf "$dir/pki"
  mv "$p" "$dir/pki"
}

write_kubeconfig() {  # write_kubeconfig FILE CERTNAME
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: podshaper
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $dir/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $dir/pki/$2.crt
    client-key: $dir/pki/$2.key
contexts:
- name: podshaper
  context: {cluster: podshaper, user: $2}
current-context: podshaper
KC
}

register_webhook() {
  local ca
  ca=$(base64 -w0 <"$dir/pki/ca.crt")
  kc apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: podshaper
webhooks:
- name: pods.podshaper.io
  clientConfig:
    url: https://127.0.0.1:$WEBHOOK_PORT/mutate-v1-pod
    caBundle: $ca
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["pods"]
    scope: Namespaced
  objectSelector:
    matchLabels: {podshaper.io/inject: "true"}
  namespaceSelector:
    matchExpressions:
    - {key: podshaper.io/inject, operator: NotIn, values: ["disabled"]}
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-node-lease, podshaper-system, podshaper-node]}
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 5
  reinvocationPolicy: IfNeeded
  admissionReviewVersions: ["v1"]
YAML
}

# The webhook reads Namespaces, Nodes, ResourceClaimTemplates and ResourceClaims, and nothing else.
webhook_rbac() {
  kc apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: podshaper-webhook}
rules:
- apiGroups: [""]
  resources: [namespaces, nodes]
  verbs: [get, list, watch]
- apiGroups: [resource.k8s.io]
  resources: [resourceclaimtemplates, resourceclaims]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: podshaper-webhook}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: podshaper-webhook}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: podshaper-webhook}
YAML
}

start_webhook() {
  start podshaper-webhook "$webhook_bin" serve --listen "127.0.0.1:$WEBHOOK_PORT" \
    --tls-cert "$dir/pki/webhook.crt" --tls-key "$dir/pki/webhook.key" \
    ${webhook_config:+--config "$webhook_config"} --kubeconfig "$dir/webhook.kubeconfig"
  wait_for 30 podshaper-webhook curl -sf --cacert "$dir/pki/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/readyz"
}

# Registered means the API server calls it: a dry-run pod comes back shaped.
wait_shaping() {
  local probe='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"podshaper-probe","labels":{"podshaper.io/inject":"true"},
    "annotations":{"podshaper.io/batch-bytes":"1Mi"}},"spec":{"containers":[{"name":"c","image":"x",
    "resources":{"limits":{"nvidia.com/gpu":"8"}}}]}}'
  local deadline=$((SECONDS + 60))
  until [[ -n $(kc -n default create --dry-run=server -o jsonpath='{.metadata.annotations.podshaper\.io/shaped-by}' \
                  -f - <<<"$probe" 2>/dev/null) ]]; do
    [[ $SECONDS -lt $deadline ]] || die "the API server does not call podshaper-webhook (logs: $dir/logs/)"
    sleep 0.5
  done
}

# kube-apiserver on $API_PORT, over the etcd on $ETCD_PORT (restart-apiserver starts it
# again with the same flags: the data and the resourceVersions survive).
# PODSHAPER_APISERVER_ARGS: more flags (word-split), e.g. --etcd-compaction-interval=10s.
# --endpoint-reconciler-type none: from v1.37 the reconciler of the `kubernetes` Service's
# endpoints refuses a loopback address; nothing here reads them (pods reach the API server
# through the node's DNAT rule, docs/real-node.md).
# --enable-aggregator-routing: no kube-proxy runs here, so the API server calls a webhook
# Service (clientConfig.service) at one of its ready endpoints' pod IPs, not its ClusterIP.
start_apiserver() {
  log "starting kube-apiserver"
  # shellcheck disable=SC2086  # PODSHAPER_APISERVER_ARGS is a list of flags
  start kube-apiserver "$cpbin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode RBAC \
    --enable-admission-plugins NamespaceLifecycle,ServiceAccount,PodSecurity,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,ResourceQuota \
    --disable-admission-plugins TaintNodesByCondition \
    --kubelet-client-certificate "$dir/pki/admin.crt" --kubelet-client-key "$dir/pki/admin.key" \
    --kubelet-preferred-address-types InternalIP \
    --enable-aggregator-routing=true \
    --allow-privileged=true --profiling=false --v=1 ${PODSHAPER_APISERVER_ARGS:-}
  wait_for 90 kube-apiserver kc get --raw /readyz
}

# podshaper's CRDs and the default TopologyPolicy, as the tests of the components expect.
install_crds() {
  log "installing podshaper's CRDs and the default TopologyPolicy"
  kc apply -k "$root/crds/" >/dev/null
  wait_for 30 kube-apiserver kc wait --for condition=established --timeout 5s \
    crd/gputopologyreports.podshaper.io crd/topologypolicies.podshaper.io crd/shmusages.podshaper.io crd/shmprofiles.podshaper.io
  wait_for 30 kube-apiserver kc apply -f "$root/manifests/base/topologypolicy-default.yaml"
  if [[ $with_node == yes ]]; then  # as above: 4 MiB is what the real node can give
    kc patch topologypolicy default --type merge -p '{"spec":{"requirements":{"requireMemlockUnlimited":false}}}' >/dev/null
  fi
}

up() {
  if [[ -f $dir/env ]] && running etcd && running kube-apiserver && running kube-scheduler &&
     running kube-controller-manager && { [[ $with_webhook == no ]] || running podshaper-webhook; } &&
     kc get --raw /readyz >/dev/null 2>&1; then
    [[ $with_node == yes ]] && { bash "$root/scripts/node.sh" up || die "the real node did not come up"; }
    log "already up ($kubeconfig)"
    return 0
  fi
  [[ -d $dir/pids ]] && down
  for b in etcd kube-apiserver kube-scheduler kube-controller-manager; do
    [[ -x $cpbin/$b ]] || die "$cpbin/$b is missing: run scripts/controlplane-build.sh (make cluster-up does)"
  done
  [[ $with_webhook == no || -x $webhook_bin ]] || die "$webhook_bin is missing: run make build"
  mkdir -p "$dir/logs" "$dir/pids"
  rm -rf "$dir/etcd"
  # No process here may raise RLIMIT_MEMLOCK past 8 MiB: a real node here grants 4 MiB,
  # not the default unlimited.
  if [[ $with_node == yes && -z $webhook_config ]]; then
    webhook_config=$dir/webhook-config.yaml
    printf '# scripts/cluster.sh: this machine cannot grant unlimited memlock\nmemlock: 4Mi\n' >"$webhook_config"
  fi
  pki
  local ports
  ports=$(free_ports 6)
  read -r ETCD_PORT ETCD_PEER_PORT API_PORT SCHEDULER_PORT CONTROLLER_MANAGER_PORT WEBHOOK_PORT <<<"$ports"
  [[ -n $WEBHOOK_PORT ]] || die "could not choose ports"
  printf '%s\n' "ETCD_PORT=$ETCD_PORT" "ETCD_PEER_PORT=$ETCD_PEER_PORT" "API_PORT=$API_PORT" \
    "SCHEDULER_PORT=$SCHEDULER_PORT" "CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT" \
    "WEBHOOK_PORT=$WEBHOOK_PORT" >"$dir/env"
  starting=yes
  write_kubeconfig "$kubeconfig" admin
  write_kubeconfig "$dir/scheduler.kubeconfig" scheduler
  write_kubeconfig "$dir/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$dir/webhook.kubeconfig" webhook-client

  log "starting etcd"
  start etcd "$cpbin/etcd" --name default --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn
  wait_for 30 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"

  start_apiserver

  log "starting kube-scheduler and kube-controller-manager"
  start kube-scheduler "$cpbin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false --v=1
  # No node lifecycle controller (and no TaintNodesByCondition above): the GPU nodes
  # have no kubelet, and must not be tainted not-ready. The garbage collector handles
  # owner references; the job controller makes a Job's pods (training pods rarely come
  # one by one); the resourceclaim controller makes a pod's ResourceClaims from its
  # templates (GPUs through DRA). With a real node, also what makes installed podshaper run there:
  # Deployments, DaemonSets, Service endpoints, disruption budgets. The clusterrole
  # aggregation controller folds podshaper-view into the built-in view role.
  local controllers=garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,namespace-controller,root-ca-certificate-publisher-controller,job-controller,resourceclaim-controller,clusterrole-aggregation-controller
  [[ $with_node == yes ]] &&
    controllers+=,deployment-controller,replicaset-controller,daemonset-controller,endpoints-controller,endpointslice-controller,disruption-controller
  # PODSHAPER_NODE_LIFECYCLE=yes (the node-fault tests): the node lifecycle controller too,
  # so that the real node turns NotReady 20 s (not the default 50 s) after its kubelet
  # stops (the kubelet renews its lease every 10 s). Off by default: it would mark the
  # kubelet-less GPU nodes NotReady as well, and taint them.
  local lifecycle=()
  [[ $node_lifecycle == yes ]] &&
    { controllers+=,node-lifecycle-controller; lifecycle=(--node-monitor-grace-period 20s); }
  start kube-controller-manager "$cpbin/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" --leader-elect=false \
    --controllers "$controllers" \
    --use-service-account-credentials=true \
    "${lifecycle[@]}" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" --v=1
  wait_for 60 kube-scheduler curl -sfk "https://127.0.0.1:$SCHEDULER_PORT/healthz"
  wait_for 60 kube-controller-manager curl -sfk "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz"

  log "creating GPU nodes from the topology fixtures"
  bash "$root/scripts/gpu-nodes.sh" | kc apply -f - >/dev/null

  [[ $with_crds == yes ]] && install_crds
  if [[ $with_webhook == yes ]]; then
    log "starting podshaper-webhook"
    webhook_rbac
    start_webhook
    register_webhook
    wait_shaping
  fi
  if [[ $with_node == yes ]]; then
    bash "$root/scripts/node.sh" up || die "the real node did not come up (logs: $dir/node/logs/)"
  fi
  starting=no
  log "up: kubectl --kubeconfig $kubeconfig get nodes"
}

down() {
  # The real node first, while the API server can still see its pods go.
  if [[ -d $dir/node ]]; then bash "$root/scripts/node.sh" down || log "the real node's down failed: stopping the rest"; fi
  [[ -d $dir/pids ]] || { log "not running"; return 0; }
  for name in podshaper-operator podshaper-webhook kube-controller-manager kube-scheduler kube-apiserver etcd; do
    stop_one "$name"
  done
  rm -f "$dir/env"
  log "down"
}

# podshaper installed on the real node as README's "Install on a cluster" says: its images
# (scripts/images.sh --from-build: the tested binaries) imported into the node's containerd,
# `kubectl apply -k crds/`, then examples/real-node/install/ (manifests/ with what this
# machine's node needs), the agent's topology capture as a ConfigMap, every rollout waited for.
install() {
  [[ -d $dir/node ]] || die "install needs the real node (PODSHAPER_WITH_NODE=yes PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no scripts/cluster.sh up)"
  local ns=podshaper-system tag w again=no t0=$SECONDS
  tag=${PODSHAPER_IMAGE_TAG:-$(sed -n 's/^project(podshaper VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")}
  PODSHAPER_IMAGE_TAG=$tag bash "$root/scripts/images.sh" --from-build "${PODSHAPER_BIN:-$root/build/bin}" ||
    die "scripts/images.sh --from-build failed"
  docker save -o "$dir/images.tar" "podshaper-webhook:$tag" "podshaper-operator:$tag" "podshaper-agent:$tag" "podshaper-shm:$tag"
  bash "$root/scripts/node.sh" load "$dir/images.tar"
  rm -f "$dir/images.tar"
  kc -n $ns get deploy podshaper-webhook >/dev/null 2>&1 && again=yes
  kc apply -k "$root/crds/" >/dev/null
  wait_for 30 kube-apiserver kc wait --for condition=established --timeout 5s \
    crd/gputopologyreports.podshaper.io crd/topologypolicies.podshaper.io crd/shmusages.podshaper.io crd/shmprofiles.podshaper.io
  # podshaper-shm mounts the kubelet's pods and containerd's NRI socket at the paths the
  # node has them: this node's are under its own dir, not /var/lib/kubelet and /var/run/nri.
  kc kustomize "$root/examples/real-node/install/" |
    sed -e "s#/var/lib/kubelet#$dir/node/kubelet#g" -e "s#/var/run/nri#$dir/node/run/nri#g" | kc apply -f - >/dev/null
  kc -n $ns create configmap podshaper-agent-fixture --dry-run=client -o yaml \
    --from-file "topology.txt=$root/tests/fixtures/captures/h200x4-nv18.topo-m-and-p2p-r.txt" | kc apply -f - >/dev/null
  # Installed before: the same tag may now name newer binaries, which only new pods run.
  if [[ $again == yes ]]; then
    kc -n $ns rollout restart deploy/podshaper-webhook deploy/podshaper-operator ds/podshaper-agent >/dev/null
    kc -n podshaper-node rollout restart ds/podshaper-shm >/dev/null
  fi
  for w in $ns/deploy/podshaper-webhook $ns/deploy/podshaper-operator $ns/ds/podshaper-agent podshaper-node/ds/podshaper-shm; do
    kc -n "${w%%/*}" rollout status "${w#*/}" --timeout 180s >/dev/null || die "${w#*/} did not roll out (kubectl -n ${w%%/*} describe ${w#*/})"
  done
  log "podshaper installed in $((SECONDS - t0)) s (images, kubectl apply -k, every rollout)"
}

# This checkout, as the kernel spells it: a cluster dir is compared by its physical path.
here=$(cd "$root" && pwd -P)
node_lock=${PODSHAPER_NODE_LOCK:-/run/podshaper-node.lock}  # scripts/node.sh's

# ours DIR: DIR is a cluster dir of this checkout: the one this command names
# (PODSHAPER_CLUSTER_DIR), one inside the checkout but not inside another checkout nested
# in it (a worktree, a clone), or one inside the build dir the Makefile names.
ours() {
  local d
  [[ -n $1 ]] && d=$(cd "$1" 2>/dev/null && pwd -P) || return 1
  [[ -d $dir && $d == "$(cd "$dir" && pwd -P)" ]] && return 0
  if [[ -n ${PODSHAPER_BUILD_DIR:-} && -d $PODSHAPER_BUILD_DIR && $(dirname "$d") == "$(cd "$PODSHAPER_BUILD_DIR" && pwd -P)" ]]; then
    return 0
  fi
  [[ $d == "$here"/* ]] || return 1
  while d=$(dirname "$d"); [[ $d != "$here" ]]; do
    [[ ! -e $d/.git ]] || return 1
  done
}

# down_leftover DIR: the cluster in DIR (physical, this checkout's) stopped when anything of
# it runs, saying so in one line; its down's output only when that fails.
down_leftover() {
  local d=$1 what out
  runs_in "$d" || [[ -d $d/node/pids ]] || return 0
  if [[ $d == "$here/.cluster" ]]; then
    what="the cluster make demo or make cluster-up left running in .cluster ("
    [[ -d $d/node ]] && what+="one real node per machine; "
    what+="make cluster-up starts it again)"
  else
    what="the cluster an earlier run left running in ${d#"$here"/}"
    [[ -d $d/node ]] && what+=" (one real node per machine)"
  fi
  log "stopping $what"
  out=$(PODSHAPER_CLUSTER_DIR=$d bash "$root/scripts/cluster.sh" down 2>&1) ||
    { echo "$out" >&2; log "error: could not stop the cluster in $d"; return 1; }
}

# Every cluster of this checkout that runs: the demo's (.cluster), one a `make cluster-up`
# left, a killed test's (build/*/, the Makefile's BUILD_DIR), the one holding the machine's
# real node, and the one PODSHAPER_CLUSTER_DIR names (a test's own, wherever it is). Clusters of other checkouts, and everything else on the machine, are left
# alone: only processes a cluster dir here recorded, and still running as named, are signalled.
down_all() {
  local dirs=("$dir" "$here/.cluster" "$here"/build/*/) d seen=" " failed=0
  [[ -n ${PODSHAPER_BUILD_DIR:-} ]] && dirs+=("$PODSHAPER_BUILD_DIR"/*/)
  dirs+=("$(lock_holder)")
  for d in "${dirs[@]}"; do
    ours "$d" || continue
    d=$(cd "$d" && pwd -P)
    [[ $seen != *" $d "* ]] || continue
    seen+="$d "
    down_leftover "$d" || failed=1
  done
  [[ $failed == 0 ]] || die "a cluster of this checkout could not be stopped (above)"
}

# down-other DIR: the one cluster in DIR, if it is this checkout's (scripts/node.sh, before
# it takes the machine's real node from it).
down_other() {
  ours "$1" || { log "the cluster in $1 is not this checkout's: left alone"; return 1; }
  down_leftover "$(cd "$1" && pwd -P)"
}

# The cluster dir whose real node holds the machine's one (scripts/node.sh's lock), if any.
lock_holder() {
  local n
  n=$(cat "$node_lock" 2>/dev/null) || return 0
  [[ -z $n ]] || dirname "$n"
}

# runs_in DIR: a process DIR recorded (its control plane's, its real node's) is alive and ours.
runs_in() {
  local f
  for f in "$1"/pids/*.pid "$1"/node/pids/*.pid; do
    [[ -f $f ]] || continue
    (procs_dir=${f%/pids/*}; running "$(basename "$f" .pid)") && return 0
  done
  return 1
}

status() {
  [[ -d $dir/node ]] && bash "$root/scripts/node.sh" status
  statuses etcd kube-apiserver kube-scheduler kube-controller-manager podshaper-webhook podshaper-operator
}

case ${1:-} in
  up) up ;;
  down) down ;;
  down-all) down_all ;;
  down-other) down_other "${2:?usage: $0 down-other DIR}" ;;
  status) status ;;
  restart-webhook) source "$dir/env"; start_webhook; wait_shaping ;;
  install) install ;;
  stop-webhook) stop_one podshaper-webhook ;;
  stop-apiserver) stop_one kube-apiserver "${2:-TERM}" ;;
  start-apiserver) source "$dir/env"; running kube-apiserver || start_apiserver ;;
  restart-apiserver) source "$dir/env"; stop_one kube-apiserver; start_apiserver ;;
  *) echo "usage: $0 up|down|down-all|down-other DIR|status|install|restart-webhook|stop-webhook|stop-apiserver [SIGNAL]|start-apiserver|restart-apiserver" >&2; exit 2 ;;
esac
