#!/usr/bin/env bash
# A real Kubernetes node for podshaper's demo and end-to-end tests, joined to the control
# plane of scripts/cluster.sh: kubelet (built with the control plane), containerd with NRI
# (scripts/node-build.sh), Debian's runc and CNI plugins (bridge + host-local on a bridge
# and subnet of its own), the NRI ulimit plugin and a test GPU device plugin fed by a
# topology capture (tests/node: both stand in for what a real GPU node runs), and the test
# images (scripts/node-images.sh) imported into containerd. Shaped pods run here.
#
#   scripts/node.sh up       start (idempotent: does nothing while up)
#   scripts/node.sh down     stop, and leave nothing behind: processes, mounts, cgroups,
#                            the bridge, pod network namespaces; the sysctls kubelet
#                            changed are restored, and the Node object is deleted
#   scripts/node.sh status
#   scripts/node.sh load TAR...
#                            import image tarballs (`docker save`) into the node's containerd,
#                            as a registry pull would put them there (the product images)
# Faults, for tests and people (docs/RELIABILITY.md "Node faults"); each returns once the part
# is down, or back and ready (the kubelet: its healthz, the Node Ready since it started, the
# GPUs offered; containerd: answering, with its NRI ulimit plugin registered unless stopped),
# and leaves the node's containers running:
#   scripts/node.sh restart kubelet|containerd
#   scripts/node.sh stop kubelet|nri-ulimit
#   scripts/node.sh start kubelet|nri-ulimit
#                            nri-ulimit is the NRI ulimit plugin only (not podshaper-shm nor any
#                            other NRI plugin); stopped, it stays stopped across a containerd
#                            restart until started again
#
# Everything lives in $PODSHAPER_CLUSTER_DIR/node/ (cluster.sh's dir), but for kubelet's
# device-plugin socket, whose directory is fixed (/var/lib/kubelet/device-plugins): one
# real node per machine at a time (/run/podshaper-node.lock says whose; `up` stops another
# cluster of this checkout that holds it, saying so, and refuses one of elsewhere). The bridge, subnet
# and cgroup root are derived from the dir. What these machines do not allow, and how the
# node lives with it:
#  - no process has CAP_SYS_RESOURCE: containerd runs with restrict_oom_score_adj (kubelet
#    asks -998 for sandboxes, which runc could not set) and containers cannot be given an
#    RLIMIT_MEMLOCK above the 8 MiB hard limit every process here has;
#  - cgroup v1 only (cgroupfs driver);
#  - traffic goes to loopback or to addresses the test made: the node's IP is the gateway
#    address of its own bridge, the pods' IPs are on that bridge, nothing is masqueraded,
#    and pods have no default route (only their subnet, and the Service range via the node);
#  - no kube-proxy: pods reach the API server as in-cluster clients do, at the `kubernetes`
#    Service (10.0.0.1:443), through one DNAT rule from the bridge to the API server on
#    loopback (route_localnet on the bridge lets those packets reach 127.0.0.1). The API
#    server reaches Services itself (--enable-aggregator-routing, scripts/cluster.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${PODSHAPER_CLUSTER_DIR:-$root/.cluster}
# As the kernel spells it (mounts, the lock): one dir has one node, whatever path named it.
[[ -d $dir ]] && dir=$(cd "$dir" && pwd -P)
node_dir=$dir/node
kubeconfig=$dir/kubeconfig
cpbin=${PODSHAPER_CONTROLPLANE_BIN:-$root/build/controlplane}
nodebin=${PODSHAPER_NODE_BIN:-$root/build/node}
node_name=${PODSHAPER_NODE_NAME:-real-h200x4-0}
# A 4×H200 (NVSwitch) host this project captured on a GPU machine (docs/hardware): the
# device plugin advertises its GPUs, and the agent reports its topology.
node_fixture=${PODSHAPER_NODE_FIXTURE:-$root/tests/fixtures/captures/h200x4-nv18.topo-m-and-p2p-r.txt}
cni_bin=/usr/lib/cni
runc=/usr/sbin/runc

# Names and addresses of this cluster's node, from its directory.
id=$(printf '%s' "$(cd "$dir" 2>/dev/null && pwd || echo "$dir")" | sha256sum | cut -c1-6)
bridge=psn$id
octet=$((16#$id % 200 + 20))
subnet=10.213.$octet.0/24
node_ip=10.213.$octet.1
cgroup_root=/podshaper-node-$id
# kubelet's, not configurable (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1.DevicePluginPath)
device_plugins=/var/lib/kubelet/device-plugins
lock=${PODSHAPER_NODE_LOCK:-/run/podshaper-node.lock}
# The NRI ulimit plugin containerd launches (pre-installed: IDX-NAME in plugin_path).
ulimit_plugin=$node_dir/nri/plugins/10-podshaper-ulimit
# cluster.sh's Service range, the one route pods have beyond their subnet (through the
# node: no default route), and the `kubernetes` Service's ClusterIP in it.
service_cidr=10.0.0.0/24
api_service_ip=10.0.0.1

log() { echo "node: $*" >&2; }
die() { echo "node: error: $*" >&2; exit 1; }
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
ctr_() { "$nodebin/ctr" -a "$node_dir/containerd.sock" -n k8s.io "$@"; }

procs_dir=$node_dir
stop_grace=10
source "$root/scripts/procs.sh"  # free_ports, running, start, wait_for, stop_one, statuses

# The v1 hierarchies (cpu,cpuacct and its links counted once).
cgroup_dirs() {
  local d
  for d in /sys/fs/cgroup/*/; do
    d=${d%/}
    [[ -L $d ]] && continue
    echo "$d"
  done
}

write_configs() {
  mkdir -p "$node_dir"/{containerd,runc,cni/net.d,cni/ipam,nri/plugins,nri/conf.d,run/nri,kubelet,pods,logs,pids}
  cat >"$node_dir/containerd.toml" <<TOML
version = 3
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
temp = "$node_dir/containerd/tmp"
[grpc]
  address = "$node_dir/containerd.sock"
[ttrpc]
  address = "$node_dir/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/containerd/opt"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "podshaper.test/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  # kubelet asks oom_score_adj -998 for sandboxes; lowering it needs CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$runc"
        Root = "$node_dir/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$cni_bin"]
    conf_dir = "$node_dir/cni/net.d"
    max_conf_num = 1
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  # In a directory of its own: podshaper-shm's DaemonSet mounts it (hostPath), and nothing else.
  socket_path = "$node_dir/run/nri/nri.sock"
  plugin_path = "$node_dir/nri/plugins"
  plugin_config_path = "$node_dir/nri/conf.d"
TOML
  cat >"$node_dir/cni/net.d/10-podshaper.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "podshaper-node",
  "plugins": [{
    "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$node_dir/cni/ipam",
             "ranges": [[{"subnet": "$subnet", "gateway": "$node_ip"}]],
             "routes": [{"dst": "$service_cidr"}]}
  }]
}
JSON
  cat >"$node_dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: $cgroup_root
failSwapOn: false
# From v1.35 a kubelet refuses cgroup v1 unless told; these test machines have only v1.
failCgroupV1: false
containerRuntimeEndpoint: unix://$node_dir/containerd.sock
imageServiceEndpoint: unix://$node_dir/containerd.sock
address: $node_ip
port: $KUBELET_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
readOnlyPort: 0
# The API server (client certificate from the cluster's CA) may read logs and exec;
# nobody else.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
podLogsDir: $node_dir/pods
volumePluginDir: $node_dir/kubelet/volume-plugins
makeIPTablesUtilChains: false
serializeImagePulls: false
# The test images are imported, never pulled: keep them whatever the disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
nodeStatusReportFrequency: 10s
YAML
}

# The sysctls kubelet sets (it is not run with protectKernelDefaults), saved once.
save_sysctls() {
  local f=$node_dir/sysctl-before.txt
  [[ -f $f ]] && return
  sysctl -e vm.overcommit_memory kernel.panic kernel.panic_on_oops >"$f.tmp"
  mv "$f.tmp" "$f"
}
restore_sysctls() {
  local f=$node_dir/sysctl-before.txt line
  [[ -f $f ]] || return 0
  # Another cluster's kubelet still running wants them as it set them.
  if pgrep -x kubelet >/dev/null; then log "another kubelet runs: sysctls left as they are"; rm -f "$f"; return 0; fi
  while IFS= read -r line; do sysctl -q -w "${line// /}" >/dev/null || true; done <"$f"
  rm -f "$f"
}

# The kube-proxy rule of the `kubernetes` Service, for pods of this node only: api_dnat -A|-D
# (-D removes every rule of this node, found by its comment, whatever port it names).
api_dnat() {
  local comment="podshaper-node $id: kubernetes Service" rule api_port
  if [[ $1 == -D ]]; then
    iptables -t nat -S PREROUTING 2>/dev/null | grep -F -- "$comment" | sed 's/^-A //' |
      while read -r rule; do eval "iptables -t nat -D $rule" || true; done
    return 0
  fi
  api_port=$(sed -n 's/^API_PORT=//p' "$dir/env" 2>/dev/null || true)
  [[ -n $api_port ]] || die "no API_PORT in $dir/env"
  local add=(PREROUTING -i "$bridge" -d "$api_service_ip" -p tcp --dport 443 -m comment --comment "$comment"
             -j DNAT --to-destination "127.0.0.1:$api_port")
  sysctl -q -w "net.ipv4.conf.$bridge.route_localnet=1"
  iptables -t nat -C "${add[@]}" 2>/dev/null || iptables -t nat -A "${add[@]}"
}

up() {
  if running containerd && running kubelet && running podshaper-test-deviceplugin &&
     kc get node "$node_name" >/dev/null 2>&1; then
    log "already up ($node_name)"
    return 0
  fi
  [[ -d $node_dir/pids ]] && down
  [[ $(id -u) -eq 0 ]] || die "a kubelet needs root"
  command -v iptables >/dev/null || die "iptables is missing: run scripts/deps.sh (make deps)"
  for b in containerd ctr containerd-shim-runc-v2 podshaper-nri-ulimit podshaper-test-deviceplugin; do
    [[ -x $nodebin/$b ]] || die "$nodebin/$b is missing: run scripts/node-build.sh (make cluster-up does)"
  done
  [[ -x $cpbin/kubelet ]] || die "$cpbin/kubelet is missing: run scripts/controlplane-build.sh"
  [[ -x $runc && -x $cni_bin/bridge && -x $cni_bin/host-local && -x $cni_bin/loopback ]] ||
    die "runc or the CNI plugins are missing: run scripts/deps.sh (make deps)"
  [[ -f $dir/env ]] || die "the control plane is not up (scripts/cluster.sh up)"
  if other_node_runs; then
    # This checkout's (the demo's, a killed test's): the newest command wins, and says so.
    bash "$root/scripts/cluster.sh" down-other "$(dirname "$(cat "$lock")")" || true
    if other_node_runs; then
      die "a real node of $(dirname "$(cat "$lock")") runs (kubelet's device-plugin directory is one per machine): stop it first (PODSHAPER_CLUSTER_DIR=$(dirname "$(cat "$lock")") scripts/cluster.sh down)"
    fi
  fi
  if ip -o route show | grep -q "^${subnet%/*}/" && ! ip link show "$bridge" >/dev/null 2>&1; then
    die "$subnet is already routed on this machine; set PODSHAPER_CLUSTER_DIR elsewhere"
  fi
  echo "$node_dir" >"$lock"
  local images t0=$SECONDS
  images=$(bash "$root/scripts/node-images.sh") || die "scripts/node-images.sh failed"

  local ports
  ports=$(free_ports 2)
  read -r KUBELET_PORT KUBELET_HEALTHZ_PORT <<<"$ports"
  write_configs
  printf 'NODE_NAME=%s\nNODE_IP=%s\nNODE_BRIDGE=%s\nNODE_CGROUP_ROOT=%s\nKUBELET_PORT=%s\nKUBELET_HEALTHZ_PORT=%s\n' \
    "$node_name" "$node_ip" "$bridge" "$cgroup_root" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" >"$node_dir/env"
  save_sysctls

  # The bridge exists before kubelet, which takes its gateway address as the node's IP.
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$node_ip/24" dev "$bridge"
  fi
  ip link set "$bridge" up
  api_dnat -A
  # kubelet's cgroup root, in every hierarchy; cpuset needs its cpus and mems set first.
  local d
  for d in $(cgroup_dirs); do
    mkdir -p "$d$cgroup_root"
    if [[ -f $d/cpuset.cpus ]]; then
      cat "$d/cpuset.cpus" >"$d$cgroup_root/cpuset.cpus"
      cat "$d/cpuset.mems" >"$d$cgroup_root/cpuset.mems"
    fi
  done

  # The NRI plugin, started by containerd (a pre-installed plugin: IDX-NAME).
  ln -sf "$nodebin/podshaper-nri-ulimit" "$ulimit_plugin"
  rm -f "$node_dir/nri-ulimit.stopped"
  # containerd drops a launched plugin's output: the plugin logs to a file of ours.
  echo "logFile: $node_dir/logs/nri-ulimit.log" >"$node_dir/nri/conf.d/10-podshaper-ulimit.conf"
  log "starting containerd (NRI, runc, CNI bridge $bridge, $subnet)"
  start_containerd

  log "importing the test images"
  local image tar
  while read -r image tar; do
    [[ -n $image ]] || continue
    ctr_ images import --platform linux/amd64 "$tar" >/dev/null 2>>"$node_dir/logs/ctr.log" || die "could not import $tar (log: $node_dir/logs/ctr.log)"
  done <<<"$images"

  log "starting kubelet ($node_name at $node_ip)"
  start_kubelet
  start podshaper-test-deviceplugin "$nodebin/podshaper-test-deviceplugin" --fixture "$node_fixture" \
    --plugin-dir "$device_plugins" --node "$node_name"
  wait_for 60 kubelet node_has_gpus
  log "up: $node_name Ready with $(kc get node "$node_name" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') GPUs in $((SECONDS - t0)) s"
}

start_containerd() {
  # The v2 shim from build/node first: Debian's containerd 1.6 shim may be on PATH.
  start containerd env PATH="$nodebin:$PATH" "$nodebin/containerd" --config "$node_dir/containerd.toml"
  wait_for 30 containerd ctr_ version
}

start_kubelet() {
  start kubelet "$cpbin/kubelet" --config "$node_dir/kubelet.yaml" --kubeconfig "$kubeconfig" \
    --root-dir "$node_dir/kubelet" --cert-dir "$node_dir/kubelet/pki" \
    --hostname-override "$node_name" --node-ip "$node_ip" \
    --node-labels "nvidia.com/gpu.present=true,nvidia.com/gpu.product=H200,nvidia.com/gpu.count=4,podshaper.io/real-node=true" \
    --v=1
  wait_for 60 kubelet curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
}

# The machine's one real node is another cluster's, and its kubelet runs.
other_node_runs() {
  [[ -f $lock && $(cat "$lock") != "$node_dir" ]] && pgrep -f -- "--root-dir $(cat "$lock")/kubelet" >/dev/null
}

node_has_gpus() {
  [[ $(kc get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}/{.status.allocatable.nvidia\.com/gpu}' 2>/dev/null) == True/[1-9]* ]]
}

down() {
  [[ -d $node_dir ]] || { log "not running"; return 0; }
  # The pods first, through kubelet, while the API server and kubelet still run: kubelet
  # stops their containers, unmounts their volumes and releases their addresses.
  if running kubelet && kc get --raw /readyz >/dev/null 2>&1; then
    kc delete pods --all-namespaces --field-selector "spec.nodeName=$node_name" --wait=false >/dev/null 2>&1 || true
    local deadline=$((SECONDS + 60))
    while [[ -n $(kc get pods --all-namespaces --field-selector "spec.nodeName=$node_name" -o name 2>/dev/null) ]]; do
      [[ $SECONDS -lt $deadline ]] || { log "pods still on $node_name after 60 s; forcing"; break; }
      sleep 0.5
    done
    kc delete pods --all-namespaces --field-selector "spec.nodeName=$node_name" --grace-period=0 --force >/dev/null 2>&1 || true
  fi
  stop_one podshaper-test-deviceplugin
  stop_one podshaper-nri-ulimit
  stop_one kubelet
  # What kubelet did not get to: sandboxes and containers, then containerd itself (the
  # NRI plugin it started exits with it).
  if running containerd; then
    local c
    for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$c" >/dev/null 2>&1 || true; done
    sleep 0.5
    for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  stop_one containerd
  # Any process left in kubelet's cgroups (shims, container processes), and shims of ours.
  local d p
  for d in $(cgroup_dirs); do
    [[ -d $d$cgroup_root ]] || continue
    find "$d$cgroup_root" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r p; do kill -9 "$p" 2>/dev/null || true; done
  done
  pkill -9 -f -- "-address $node_dir/containerd.sock" 2>/dev/null || true
  sleep 0.2
  # Mounts under the node's dir (kubelet's bind mount of its root, volumes, netns, rootfs),
  # deepest first.
  local m
  for _ in 1 2 3; do
    for m in $(findmnt -rn -o TARGET | grep -F "$node_dir/" | sort -r; findmnt -rn -o TARGET | grep -Fx "$node_dir/kubelet"); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
  # Cgroups, deepest first.
  for d in $(cgroup_dirs); do
    [[ -d $d$cgroup_root ]] && find "$d$cgroup_root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  api_dnat -D
  ip link del "$bridge" 2>/dev/null || true
  if [[ -f $lock && $(cat "$lock") == "$node_dir" ]]; then
    rm -rf "$device_plugins"
    rmdir /var/lib/kubelet 2>/dev/null || true
    rm -f "$lock"
  fi
  restore_sysctls
  if [[ -f $dir/env ]] && kc get --raw /readyz >/dev/null 2>&1; then
    kc delete node "$node_name" --wait=false >/dev/null 2>&1 || true
  fi
  rm -rf --one-file-system "$node_dir"
  log "down"
}

status() {
  statuses containerd kubelet podshaper-test-deviceplugin
  # Its processes first: a stop that failed leaves the marker and a plugin still running.
  if ulimit_plugin_pids >/dev/null; then echo "nri-ulimit: running (pid $(ulimit_plugin_pids | tr '\n' ' ' | sed 's/ $//'))"
  else echo "nri-ulimit: stopped"; fi
}

# Faults. The node's env (ports) is read back: these run in a later process than `up`.
node_env() {
  [[ -f $node_dir/env ]] || die "the node is not up (scripts/node.sh up)"
  # shellcheck disable=SC1091
  source "$node_dir/env"
}

# The NRI ulimit plugin's processes: the one containerd launched (by its plugin_path name)
# and one started by `start nri-ulimit` (against the NRI socket).
ulimit_plugin_pids() {
  { pgrep -f -- "^$ulimit_plugin( |\$)" || true
    pgrep -f -- "^$nodebin/podshaper-nri-ulimit -socket $node_dir/run/nri/nri.sock" || true
  } | grep .
}

# The kubelet's own readiness: its healthz, the Node Ready, and the GPUs offered again (the
# device plugin registers anew with a restarted kubelet). A Ready from before the restart
# counts only once the kubelet posted status since it started.
kubelet_ready() {
  curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null || return 1
  local hb; hb=$(kc get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' 2>/dev/null) || return 1
  [[ -n $hb && $(date -d "$hb" +%s) -gt $kubelet_started ]] || return 1
  node_has_gpus
}

fault() {  # fault VERB PART
  local verb=$1 part=$2 t0=$SECONDS
  node_env
  case $verb/$part in
    stop/kubelet|restart/kubelet)
      running kubelet || [[ $verb == restart ]] || { log "kubelet is not running"; return 0; }
      stop_one kubelet
      log "kubelet stopped (its containers keep running)"
      [[ $verb == restart ]] || return 0
      ;&
    start/kubelet)
      if running kubelet; then log "kubelet already runs"; return 0; fi
      kubelet_started=$(date +%s)
      start_kubelet
      wait_for 120 kubelet kubelet_ready
      log "kubelet back and $node_name Ready with its GPUs in $((SECONDS - t0)) s"
      ;;
    restart/containerd)
      running containerd || die "containerd is not running"
      local log_file=$node_dir/logs/nri-ulimit.log before
      before=$(grep -c "configured by" "$log_file" 2>/dev/null || true)
      stop_one containerd
      log "containerd stopped (its shims and containers keep running)"
      start_containerd
      # The ulimit plugin launched again (unless stopped), before the kubelet creates anything.
      [[ -f $node_dir/nri-ulimit.stopped ]] ||
        wait_for 30 containerd bash -c "[[ \$(grep -c 'configured by' '$log_file') -gt ${before:-0} ]]"
      log "containerd back (answering, its NRI ulimit plugin registered) in $((SECONDS - t0)) s"
      ;;
    stop/nri-ulimit)
      touch "$node_dir/nri-ulimit.stopped"
      # Gone from plugin_path, so that a containerd restart does not launch it again.
      rm -f "$ulimit_plugin"
      local pids p
      pids=$(ulimit_plugin_pids || true)
      for p in $pids; do kill "$p" 2>/dev/null || true; done
      for _ in $(seq 100); do ulimit_plugin_pids >/dev/null || break; sleep 0.1; done
      for p in $(ulimit_plugin_pids || true); do kill -9 "$p" 2>/dev/null || true; done
      ulimit_plugin_pids >/dev/null && die "the NRI ulimit plugin did not stop"
      log "NRI ulimit plugin stopped (containerd now ignores ulimits.noderesource.dev annotations)"
      ;;
    start/nri-ulimit)
      if ulimit_plugin_pids >/dev/null; then rm -f "$node_dir/nri-ulimit.stopped"; log "NRI ulimit plugin already runs"; return 0; fi
      running containerd || die "containerd is not running"
      ln -sf "$nodebin/podshaper-nri-ulimit" "$ulimit_plugin"
      rm -f "$node_dir/nri-ulimit.stopped"
      # As a plugin deployed apart connects (a DaemonSet's): to the NRI socket. It exits when
      # containerd goes; a restarted containerd launches the one in plugin_path.
      local log_file=$node_dir/logs/nri-ulimit.log before
      before=$(grep -c "configured by" "$log_file" 2>/dev/null || true)
      start podshaper-nri-ulimit "$nodebin/podshaper-nri-ulimit" -socket "$node_dir/run/nri/nri.sock" \
        -idx 10 -name podshaper-ulimit -log-file "$log_file"
      wait_for 30 podshaper-nri-ulimit bash -c "[[ \$(grep -c 'configured by' '$log_file') -gt ${before:-0} ]]"
      log "NRI ulimit plugin started and registered with containerd in $((SECONDS - t0)) s"
      ;;
    *) echo "usage: $0 restart kubelet|containerd; stop|start kubelet|nri-ulimit" >&2; exit 2 ;;
  esac
}

load() {
  running containerd || die "the node is not up (scripts/node.sh up)"
  local tar
  for tar in "$@"; do
    ctr_ images import --platform linux/amd64 "$tar" >/dev/null 2>>"$node_dir/logs/ctr.log" ||
      die "could not import $tar (log: $node_dir/logs/ctr.log)"
  done
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  load) shift; load "$@" ;;
  restart|stop|start) fault "$1" "${2:-}" ;;
  *) echo "usage: $0 up|down|status|load TAR...|restart kubelet|containerd|stop|start kubelet|nri-ulimit" >&2; exit 2 ;;
esac
