#!/usr/bin/env python3
"""The operator benchmark of issue 7, against a running control plane (scripts/cluster.sh).

Run by scripts/bench/operator.sh, which brings the cluster up and down; this file does the
rest: N GPU Nodes and N GPUTopologyReports, podshaper-operator started and stopped by pid,
and what it measures:

  cold   the operator started over N reports nobody judged yet: seconds from its start
         until every report is Validated True and every Node labelled
         podshaper.io/topology-validated=true
  live   the operator running while the N reports are created: seconds from the last
         report's creation until the same
  writes the operator's podshaper_operator_writes_total (status, node, event) per second
         during each catch-up (peak over 1 s windows, mean), and its delta over a quiet
         window (steady state; target 0)
  rss    VmRSS / VmHWM of the operator (target <= 150 MiB) and the API server, at steady state
  flips  K reports changed one at a time (pair 0's p2p.read OK -> NS -> OK): milliseconds
         from the PATCH returning until the Node's topology-validated label flips (a watch
         on the Nodes, timestamped when the event line arrives)

"All judged" is taken from one list+watch of Nodes and reports kept by this process (the
time of the event that completes the set), cross-checked with the operator's /metrics
(podshaper_operator_reports == N, podshaper_operator_queue_depth == 0) and with kubectl.
Standard library only.
"""
import argparse
import concurrent.futures as futures
import datetime
import hashlib
import http.client
import json
import math
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

PREFIX = "bench-gpu-"
LABEL = "podshaper.io/topology-validated"
GTR = "/apis/podshaper.io/v1alpha1/gputopologyreports"
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"}

mono = time.monotonic


def log(msg):
    print(f"[{datetime.datetime.now(datetime.timezone.utc).strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    while True:
        port = random.randint(20000, 31999)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


# --------------------------------------------------------------------------- API client
class Api:
    """HTTPS to the API server as the cluster's admin (client certificate); one keep-alive
    connection per thread."""

    def __init__(self, cluster_dir):
        env = dict(l.strip().split("=", 1) for l in open(os.path.join(cluster_dir, "env")) if "=" in l)
        self.port = int(env["API_PORT"])
        pki = os.path.join(cluster_dir, "pki")
        self.ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
        self.local = threading.local()

    def connect(self, timeout=120):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)

    def request(self, method, path, body=None, ctype="application/json"):
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Accept": "application/json", "User-Agent": "podshaper-bench"}
        if data is not None:
            headers["Content-Type"] = ctype
        for attempt in range(6):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self.connect()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except (http.client.HTTPException, OSError) as e:
                conn.close()
                self.local.conn = None
                if attempt == 5:
                    raise RuntimeError(f"{method} {path}: {e}")
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status in (429, 500, 503, 504) and attempt < 5:
                time.sleep(0.2 * (attempt + 1))
                continue
            return resp.status, payload
        raise AssertionError("unreachable")

    def json(self, method, path, body=None, ctype="application/json", ok=(200, 201)):
        status, payload = self.request(method, path, body, ctype)
        if status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {payload[:300]!r}")
        return json.loads(payload) if payload else {}

    def list_all(self, path):
        """A paginated list: (items, resourceVersion of the snapshot)."""
        items, cont, rv = [], "", None
        while True:
            sep = "&" if "?" in path else "?"
            page = self.json("GET", f"{path}{sep}limit=500" + (f"&continue={cont}" if cont else ""))
            items += page.get("items", [])
            rv = rv or page["metadata"]["resourceVersion"]
            cont = page["metadata"].get("continue")
            if not cont:
                return items, rv


# --------------------------------------------------------------------------- tracker
class Tracker:
    """One list+watch of the Nodes and one of the GPUTopologyReports. Keeps, for the bench
    nodes, the topology-validated label and the report's Validated condition, and the
    monotonic time at which each last changed (taken when the event's line arrived)."""

    def __init__(self, api):
        self.api = api
        self.cv = threading.Condition()
        self.label = {}        # node -> topology-validated value (None: no label)
        self.labelled = set()  # nodes with any podshaper.io/ label
        self.valid = {}        # report -> Validated status ("True"/"False"/None); absent: no report
        self.label_at = {}
        self.valid_at = {}
        self.waiters = []
        self.stop = False
        self.errors = []

    # counts (under cv)
    def n_label_true(self):
        return sum(1 for v in self.label.values() if v == "true")

    def n_valid_true(self):
        return sum(1 for v in self.valid.values() if v == "True")

    def start(self):
        nodes, nrv = self.api.list_all("/api/v1/nodes")
        reports, rrv = self.api.list_all(GTR)
        now = mono()
        with self.cv:
            for n in nodes:
                self._node(n, now, "ADDED")
            for r in reports:
                self._report(r, now, "ADDED")
        for path, rv, fn in (("/api/v1/nodes", nrv, self._node), (GTR, rrv, self._report)):
            threading.Thread(target=self._watch, args=(path, rv, fn), daemon=True).start()

    def _node(self, obj, ts, kind):
        md = obj.get("metadata", {})
        name = md.get("name", "")
        if not name.startswith(PREFIX):
            return
        labels = {} if kind == "DELETED" else (md.get("labels") or {})
        value = labels.get(LABEL)
        if self.label.get(name, "<none>") != value:
            self.label_at[name] = ts
        if kind == "DELETED":
            self.label.pop(name, None)
        else:
            self.label[name] = value
        if any(k.startswith("podshaper.io/") for k in labels):
            self.labelled.add(name)
        else:
            self.labelled.discard(name)

    def _report(self, obj, ts, kind):
        name = obj.get("metadata", {}).get("name", "")
        if not name.startswith(PREFIX):
            return
        if kind == "DELETED":
            if name in self.valid:
                self.valid_at[name] = ts
            self.valid.pop(name, None)
            return
        status = None
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Validated":
                status = c.get("status")
        if self.valid.get(name, "<none>") != status:
            self.valid_at[name] = ts
        self.valid[name] = status

    def _watch(self, path, rv, fn):
        while not self.stop:
            conn = self.api.connect(timeout=None)
            try:
                conn.request("GET", f"{path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=3600&resourceVersion={rv}",
                             headers={"Accept": "application/json", "User-Agent": "podshaper-bench-watch"})
                resp = conn.getresponse()
                if resp.status != 200:
                    raise RuntimeError(f"watch {path}: HTTP {resp.status}: {resp.read()[:200]!r}")
                while not self.stop:
                    line = resp.readline()
                    ts = mono()
                    if not line:
                        break
                    ev = json.loads(line)
                    typ, obj = ev.get("type"), ev.get("object", {})
                    if typ == "ERROR":
                        if obj.get("code") == 410:
                            raise RuntimeError(f"watch {path}: 410 Gone")  # not expected in a bench run
                        raise RuntimeError(f"watch {path}: ERROR {obj}")
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if typ == "BOOKMARK":
                        continue
                    with self.cv:
                        fn(obj, ts, typ)
                        self._check(ts)
                        self.cv.notify_all()
            except Exception as e:  # noqa: BLE001  (recorded, and the bench fails on it)
                if not self.stop:
                    self.errors.append(str(e))
                    log(f"tracker: {e}")
                    time.sleep(0.5)
            finally:
                conn.close()

    def _check(self, ts):
        for w in self.waiters:
            if w["at"] is None and w["pred"]():
                w["at"] = ts

    def wait(self, pred, timeout, what="", already=None):
        """Waits until pred() holds (evaluated on every event); returns the monotonic time
        of the event that made it hold (if it held already: already(), or now)."""
        w = {"pred": pred, "at": None}
        deadline = mono() + timeout
        with self.cv:
            if pred():
                return already() if already else mono()
            self.waiters.append(w)
            try:
                while w["at"] is None:
                    left = deadline - mono()
                    if left <= 0:
                        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
                    self.cv.wait(min(left, 1.0))
            finally:
                self.waiters.remove(w)
        return w["at"]


# --------------------------------------------------------------------------- operator
def proc_status(pid):
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0  # kB -> MiB
    except OSError:
        pass
    return out


def proc_cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return float("nan")


def heap_mib(metrics):
    """podshaper_heap_bytes from a /metrics dict: (in use, freed but held) in MiB, or None."""
    by = {labels: v for labels, v in metrics.get("podshaper_heap_bytes", [])}
    used, held = by.get('state="in_use"'), by.get('state="free_held"')
    return None if used is None or held is None else (round(used / 2**20, 1), round(held / 2**20, 1))


def parse_metrics(text):
    """{name: [(labels-string, value)]}"""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            key, value = line.rsplit(" ", 1)
            value = float(value)
        except ValueError:
            continue
        name, _, labels = key.partition("{")
        out.setdefault(name, []).append((labels.rstrip("}"), value))
    return out


def msum(m, name, contains=""):
    return sum(v for l, v in m.get(name, []) if contains in l)


class Operator:
    def __init__(self, binary, kubeconfig, config, logfile, pidfile):
        self.binary, self.kubeconfig, self.config = binary, kubeconfig, config
        self.logfile, self.pidfile = logfile, pidfile
        self.proc = None
        self.samples = []  # (t, metrics dict)
        self.lock = threading.Lock()
        self.poller = None
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    def start(self):
        self.port = free_port()
        with open(self.logfile, "a") as f:
            f.write(f"=== {datetime.datetime.now(datetime.timezone.utc).isoformat()} bench start on :{self.port}\n")
        self.log = open(self.logfile, "a")
        self.started_at = mono()
        self.proc = subprocess.Popen(
            [self.binary, "run", "--kubeconfig", self.kubeconfig, "--config", self.config,
             "--listen", f"127.0.0.1:{self.port}", "--identity", "bench-op"],
            stdout=self.log, stderr=subprocess.STDOUT)
        with open(self.pidfile, "w") as f:
            f.write(str(self.proc.pid))
        self.samples = []
        self.polling = True
        self.poller = threading.Thread(target=self._poll, daemon=True)
        self.poller.start()

    def get(self, path, timeout=3):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def metrics(self):
        status, text = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics: HTTP {status}")
        return parse_metrics(text)

    def _poll(self):
        while self.polling and self.proc and self.proc.poll() is None:
            t = mono()
            try:
                m = self.metrics()
                with self.lock:
                    self.samples.append((t, {
                        "writes": msum(m, "podshaper_operator_writes_total"),
                        "status": msum(m, "podshaper_operator_writes_total", 'kind="status"'),
                        "node": msum(m, "podshaper_operator_writes_total", 'kind="node"'),
                        "event": msum(m, "podshaper_operator_writes_total", 'kind="event"'),
                        "reports": msum(m, "podshaper_operator_reports"),
                        "queue": msum(m, "podshaper_operator_queue_depth"),
                        "leader": msum(m, "podshaper_operator_leader"),
                        "ok": msum(m, "podshaper_operator_reconciles_total", 'controller="report",result="ok"'),
                        "errors": msum(m, "podshaper_operator_reconciles_total", 'controller="report",result="error"'),
                        "conflicts": msum(m, "podshaper_operator_conflicts_total"),
                        "dur_sum": msum(m, "podshaper_operator_reconcile_duration_seconds_sum"),
                        "dur_count": msum(m, "podshaper_operator_reconcile_duration_seconds_count"),
                    }))
            except Exception:  # noqa: BLE001  (not up yet, or busy: the next poll)
                pass
            time.sleep(max(0.0, 0.2 - (mono() - t)))

    def window(self, t0, t1):
        with self.lock:
            return [(t, s) for t, s in self.samples if t0 <= t <= t1]

    def last(self):
        with self.lock:
            return self.samples[-1] if self.samples else (None, None)

    def first_when(self, pred, after=0.0):
        with self.lock:
            for t, s in self.samples:
                if t >= after and pred(s):
                    return t
        return None

    def wait_metrics(self, pred, timeout, what):
        deadline = mono() + timeout
        while mono() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"podshaper-operator exited ({self.proc.returncode}); log: {self.logfile}")
            t, s = self.last()
            if s is not None and pred(s):
                return t
            time.sleep(0.1)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for the operator's {what}")

    def rss(self):
        return proc_status(self.proc.pid)

    def cpu(self):
        return proc_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc is None:
            return
        self.polling = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        try:
            os.remove(self.pidfile)
        except OSError:
            pass
        self.proc = None


def write_rates(samples, t0, t1):
    """Peak writes/s over ~1 s windows of the samples in [t0, t1]."""
    pts = [(t, s["writes"]) for t, s in samples if t0 - 0.3 <= t <= t1 + 0.3]
    peak, j = 0.0, 0
    for i in range(len(pts)):
        while j < len(pts) and pts[j][0] - pts[i][0] < 1.0:
            j += 1
        if j >= len(pts):
            break
        peak = max(peak, (pts[j][1] - pts[i][1]) / (pts[j][0] - pts[i][0]))
    return peak


def write_results(path, r):
    """The results as JSON (sorted, one key a line) where --json asked for them."""
    if path:
        with open(path, "w") as f:
            json.dump(r, f, indent=1, sort_keys=True)
            f.write("\n")


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


# --------------------------------------------------------------------------- objects
def node_object(name):
    """An 8-GPU Node as a GPU cluster's kubelet, NFD and NVIDIA's GPU feature discovery
    leave it (about 11 KB of JSON): some 80 labels, the kubelet's conditions, addresses,
    node info and its cached images. Whoever watches Nodes receives all of it."""
    res = {"cpu": "192", "memory": "2048Gi", "nvidia.com/gpu": "8", "pods": "110", "ephemeral-storage": "1Ti",
           "hugepages-1Gi": "0", "hugepages-2Mi": "0", "rdma/ib": "8"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "p5.48xlarge", "topology.kubernetes.io/region": "us-east-1",
              "topology.kubernetes.io/zone": "us-east-1a", "nvidia.com/gpu.product": "H100", "nvidia.com/gpu.count": "8",
              "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper", "nvidia.com/cuda.driver.major": "550",
              "nvidia.com/cuda.driver.minor": "90", "nvidia.com/cuda.runtime.major": "12", "nvidia.com/mig.capable": "true",
              "nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true", "podshaper-bench": "true"}
    for flag in ("ADX", "AESNI", "AVX", "AVX2", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512F", "AVX512VL", "AVX512VNNI",
                 "AMXBF16", "AMXINT8", "AMXTILE", "BMI1", "BMI2", "CMPXCHG8", "FMA3", "FSRM", "FXSR", "GFNI", "HYPERVISOR",
                 "IBPB", "LAHF", "MOVBE", "MPX", "OSXSAVE", "SHA", "SPEC_CTRL_SSBD", "SSE", "SSE2", "SSE3", "SSE4",
                 "SSE42", "SSSE3", "STIBP", "VAES", "VMX", "VPCLMULQDQ", "WAITPKG", "X87", "XGETBV1", "XSAVE",
                 "XSAVEC", "XSAVEOPT", "XSAVES"):
        labels[f"feature.node.kubernetes.io/cpu-cpuid.{flag}"] = "true"
    for k in ("cpu-hardware_multithreading", "cpu-pstate.status", "kernel-config.NO_HZ", "kernel-config.NO_HZ_IDLE",
              "memory-numa", "network-sriov.capable", "pci-10de.present", "pci-15b3.present", "rdma.available",
              "rdma.capable", "storage-nonrotationaldisk", "system-os_release.ID", "system-os_release.VERSION_ID"):
        labels[f"feature.node.kubernetes.io/{k}"] = "true"
    images = [{"names": [f"registry.example.com/ml/{img}@sha256:{hashlib.sha256((name + img).encode()).hexdigest()}",
                         f"registry.example.com/ml/{img}:v{i}.{i % 7}.0"], "sizeBytes": 1_000_000_000 + i * 7_340_033}
              for i, img in enumerate(["pytorch-train", "nccl-tests", "dcgm-exporter", "gpu-feature-discovery",
                                       "k8s-device-plugin", "nvidia-container-toolkit", "driver", "node-feature-discovery",
                                       "mellanox-ofed", "rdma-shared-dp", "kube-proxy", "calico-node", "pause",
                                       "fluent-bit", "node-exporter", "megatron", "deepspeed", "jax-train", "triton",
                                       "nemo", "podshaper-agent", "busybox", "csi-node-driver", "ebs-csi", "efa-plugin"])]
    conditions = [{"type": t, "status": st, "reason": r, "message": m,
                   "lastHeartbeatTime": "2026-11-27T00:00:00Z", "lastTransitionTime": "2026-11-20T00:00:00Z"}
                  for t, st, r, m in (("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                                      ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                                      ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                                      ("Ready", "True", "KubeletReady", "kubelet is posting ready status"))]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "podshaper.io/topology-fixture": "p5.48xlarge-8xH100-nv18.topo-m.txt",
            "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": "i-0" + hashlib.sha256(name.encode()).hexdigest()[:16]}),
            "nfd.node.kubernetes.io/feature-labels": ",".join(k.split("/", 1)[1] for k in labels if k.startswith("feature."))}},
        "spec": {"providerID": f"aws:///us-east-1a/i-0{hashlib.sha256(name.encode()).hexdigest()[:16]}",
                 "podCIDR": "10.0.0.0/24"},
        "status": {"capacity": res, "allocatable": res, "conditions": conditions,
                   "addresses": [{"type": "InternalIP", "address": "10.1.2.3"}, {"type": "Hostname", "address": name}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                   "nodeInfo": {"machineID": hashlib.md5(name.encode()).hexdigest(), "systemUUID": hashlib.md5(name.encode()).hexdigest(),
                                "bootID": hashlib.md5((name + "boot").encode()).hexdigest(), "kernelVersion": "6.8.0-1015-aws",
                                "osImage": "Ubuntu 22.04.4 LTS", "containerRuntimeVersion": "containerd://1.7.20",
                                "kubeletVersion": "v1.37.2", "kubeProxyVersion": "", "operatingSystem": "linux",
                                "architecture": "amd64"},
                   "images": images},
    }


def report_object(name, uid, spec):
    return {"apiVersion": "podshaper.io/v1alpha1", "kind": "GPUTopologyReport",
            "metadata": {"name": name, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
            "spec": spec}


def parallel(api, fn, items, workers):
    """Runs fn(item) on a pool; returns (results, monotonic time the first and the last returned)."""
    times = []
    lock = threading.Lock()

    def run(item):
        r = fn(item)
        with lock:
            times.append(mono())
        return r

    with futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(run, items))
    return results, min(times), max(times)


# --------------------------------------------------------------------------- the benchmark
class Bench:
    def __init__(self, a):
        self.a = a
        self.api = Api(a.cluster_dir)
        self.kubeconfig = os.path.join(a.cluster_dir, "kubeconfig")
        self.names = [f"{PREFIX}{i:05d}" for i in range(a.nodes)]
        self.uids = {}
        opbin = os.path.join(a.bin, "podshaper-operator")
        self.result = {"nodes": a.nodes, "flips": a.flips, "cpus": os.cpu_count(),
                       "steady_window_seconds": a.steady, "operator_workers": a.workers,
                       "no_live": a.no_live, "heartbeat_seconds": a.heartbeat,
                       "operator_binary": os.path.join(a.source_bin or a.bin, "podshaper-operator"),
                       "operator_binary_sha256": hashlib.sha256(open(opbin, "rb").read()).hexdigest()[:16],
                       "operator_binary_mtime": datetime.datetime.fromtimestamp(
                           os.path.getmtime(os.path.join(a.source_bin or a.bin, "podshaper-operator")),
                           datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "started_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "loadavg_at_start": open("/proc/loadavg").read().split()[0]}
        self.tracker = Tracker(self.api)
        cfg = os.path.join(a.cluster_dir, "bench-operator.yaml")
        with open(cfg, "w") as f:
            f.write(f"eventNamespace: default\nworkers: {a.workers}\nleaderElection:\n"
                    "  enabled: true\n  namespace: podshaper-system\n  name: podshaper-operator\n"
                    "  leaseDuration: 15s\n  renewDeadline: 10s\n  retryPeriod: 2s\n")
        self.op = Operator(os.path.join(a.bin, "podshaper-operator"), self.kubeconfig, cfg,
                           os.path.join(a.cluster_dir, "logs", "bench-operator.log"),
                           os.path.join(a.cluster_dir, "pids", "bench-operator.pid"))

    def kubectl(self, *args):
        return subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], check=True,
                              capture_output=True, text=True).stdout

    def verify(self):
        """The brief's cross-check with kubectl: labelled nodes and Validated reports."""
        labelled = len([l for l in self.kubectl("get", "nodes", "-l", f"{LABEL}=true,podshaper-bench=true",
                                                "-o", "name").splitlines() if l.strip()])
        out = self.kubectl("get", "gtr", "-o",
                           'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Validated")].status}{"\\n"}{end}')
        validated = sum(1 for l in out.splitlines() if l.startswith(PREFIX) and l.split()[-1:] == ["True"])
        return labelled, validated

    def all_judged(self):
        n = self.a.nodes
        return len(self.tracker.valid) == n and self.tracker.n_valid_true() == n and self.tracker.n_label_true() == n

    def apiserver_pid(self):
        return int(open(os.path.join(self.a.cluster_dir, "pids", "kube-apiserver.pid")).read())

    def etcd_pid(self):
        return int(open(os.path.join(self.a.cluster_dir, "pids", "etcd.pid")).read())

    def apiserver_writes(self):
        """apiserver_request_total of write verbs: total and by resource."""
        status, payload = self.api.request("GET", "/metrics")
        m = parse_metrics(payload.decode())
        total, by = 0.0, {}
        for labels, v in m.get("apiserver_request_total", []):
            kv = dict(p.split("=", 1) for p in labels.split(",") if "=" in p)
            if kv.get("verb", "").strip('"') in WRITE_VERBS:
                total += v
                res = kv.get("resource", "").strip('"')
                by[res] = by.get(res, 0) + v
        return total, by

    # ---- phases
    def setup(self):
        status, _ = self.api.request("POST", "/api/v1/namespaces",
                                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podshaper-system"}})
        if status not in (201, 409):
            raise RuntimeError(f"namespace podshaper-system: HTTP {status}")
        probe = subprocess.run(
            [os.path.join(self.a.bin, "podshaper-agent"), "probe",
             "--fixture", os.path.join(self.a.root, "tests/fixtures/topologies/p5.48xlarge-8xH100-nv18.topo-m.txt"),
             "--p2p-fixture", os.path.join(self.a.root, "tests/fixtures/p2p/8gpu-all-ok.p2p-r.txt"), "--format", "json"],
            check=True, capture_output=True, text=True).stdout
        self.spec = json.loads(probe)
        self.tracker.start()

    def create_nodes(self):
        log(f"creating {self.a.nodes} Nodes")

        def create(name):
            obj = self.api.json("POST", "/api/v1/nodes", node_object(name), ok=(201,))
            return name, obj["metadata"]["uid"]

        t0 = mono()
        res, _, last = parallel(self.api, create, self.names, self.a.parallel)
        self.uids = dict(res)
        # The brief's check that Nodes keep the status they were created with.
        n = self.api.json("GET", f"/api/v1/nodes/{self.names[0]}")
        assert n["status"]["allocatable"].get("nvidia.com/gpu") == "8", n["status"]
        self.result["create_nodes_seconds"] = round(last - t0, 2)
        log(f"  {self.a.nodes} Nodes in {last - t0:.1f} s")

    def create_reports(self):
        spec = dict(self.spec)
        spec["observedAt"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.observed_at = mono()
        bodies = {n: json.dumps(report_object(n, self.uids[n], spec)).encode() for n in self.names}
        order = list(self.names)
        random.shuffle(order)  # as agents would: in no particular order
        _, first, last = parallel(self.api, lambda n: self.api.json("POST", GTR, bodies[n], ok=(201,)),
                                  order, self.a.parallel)
        return first, last

    def catchup_stats(self, key, t_start, t_done, w_start):
        samples = self.op.window(t_start - 1, t_done + 1)
        t_end, s_end = None, None
        for t, s in samples:  # the first sample at or after done
            if t >= t_done:
                t_end, s_end = t, s
                break
        if s_end is None:
            t_end, s_end = self.op.last()
        writes = s_end["writes"] - w_start
        dur = max(t_done - t_start, 1e-6)
        self.result[f"{key}_writes"] = int(writes)
        self.result[f"{key}_writes_by_kind"] = {k: int(s_end[k] - self.w0_kind.get(k, 0)) for k in ("status", "node", "event")}
        self.result[f"{key}_writes_per_second_mean"] = round(writes / dur, 1)
        self.result[f"{key}_writes_per_second_peak"] = round(write_rates(self.op.samples, t_start, t_done), 1)
        self.result[f"{key}_conflicts"] = int(s_end["conflicts"] - self.w0_kind.get("conflicts", 0))
        self.result[f"{key}_reconcile_errors"] = int(s_end["errors"] - self.w0_kind.get("errors", 0))
        dc = s_end["dur_count"] - self.w0_kind.get("dur_count", 0)
        ds = s_end["dur_sum"] - self.w0_kind.get("dur_sum", 0)
        self.result[f"{key}_reconciles"] = int(dc)
        self.result[f"{key}_reconcile_mean_ms"] = round(1000 * ds / dc, 2) if dc else None

    def snapshot_counters(self):
        _, s = self.op.last()
        self.w0_kind = dict(s) if s else {}
        return s["writes"] if s else 0.0

    def wait_judged(self, what, timeout):
        t_done = self.tracker.wait(self.all_judged, timeout, what)
        n = self.a.nodes
        t_metrics = self.op.wait_metrics(lambda s: s["reports"] == n and s["queue"] == 0, 60,
                                         f"podshaper_operator_reports == {n} and queue_depth == 0")
        return t_done, t_metrics

    def phase_cold(self):
        log(f"cold start: the operator over {self.a.nodes} reports nobody judged")
        self.w0_kind = {}
        cpu_api0 = proc_cpu_seconds(self.apiserver_pid())
        self.op.start()
        t0 = self.op.started_at
        t_leader = self.op.wait_metrics(lambda s: s["leader"] == 1, 120, "leadership")
        t_done, t_metrics = self.wait_judged("all reports judged (cold start)", self.a.timeout)
        r = self.result
        r["catchup_cold_seconds"] = round(t_done - t0, 2)
        r["cold_leader_seconds"] = round(t_leader - t0, 2)
        r["cold_metrics_done_seconds"] = round(t_metrics - t0, 2)
        r["cold_operator_cpu_seconds"] = round(self.op.cpu(), 2)
        r["cold_apiserver_cpu_seconds"] = round(proc_cpu_seconds(self.apiserver_pid()) - cpu_api0, 2)
        self.catchup_stats("cold", t0, t_done, 0.0)
        r["cold_verified_labels"], r["cold_verified_validated"] = self.verify()
        log(f"  judged in {t_done - t0:.2f} s (leader after {t_leader - t0:.2f} s)")

    def steady(self, key):
        # settle: queue drained and no write for 2 s
        self.op.wait_metrics(lambda s: s["queue"] == 0, 60, "queue to drain")
        time.sleep(2)
        t0, s0 = self.op.last()
        api0, api_by0 = self.apiserver_writes()
        cpu0 = self.op.cpu()
        beats = self.start_heartbeats()
        # RSS every 10 s over the window: a soak (--steady 600) shows growth, not just a level.
        curve, t_start = [], mono()
        while True:
            curve.append((round(mono() - t_start, 1), round(self.op.rss().get("VmRSS", float("nan")), 1)))
            left = self.a.steady - (mono() - t_start)
            if left <= 0:
                break
            time.sleep(min(10.0, left))
        t1, s1 = self.op.last()
        heartbeats = self.stop_heartbeats(beats)
        api1, api_by1 = self.apiserver_writes()
        cpu1 = self.op.cpu()
        rss, arss = self.op.rss(), proc_status(self.apiserver_pid())
        r = self.result
        r[f"{key}_steady_writes"] = int(s1["writes"] - s0["writes"])
        r[f"{key}_steady_reconciles"] = int(s1["ok"] - s0["ok"])
        r[f"{key}_steady_apiserver_writes"] = int(api1 - api0)
        r[f"{key}_steady_apiserver_writes_by_resource"] = {
            k: int(v - api_by0.get(k, 0)) for k, v in api_by1.items() if v - api_by0.get(k, 0) > 0}
        r[f"{key}_steady_operator_cpu_percent"] = round(100 * (cpu1 - cpu0) / (t1 - t0), 1)
        r[f"{key}_operator_rss_mib"] = round(rss.get("VmRSS", float("nan")), 1)
        r[f"{key}_operator_hwm_mib"] = round(rss.get("VmHWM", float("nan")), 1)
        try:
            r[f"{key}_operator_heap_mib"] = heap_mib(self.op.metrics())  # (in use, freed but held)
        except Exception:  # noqa: BLE001 - an operator without /metrics then: left out
            r[f"{key}_operator_heap_mib"] = None
        r[f"{key}_apiserver_rss_mib"] = round(arss.get("VmRSS", float("nan")), 1)
        r[f"{key}_steady_heartbeats"] = heartbeats
        r[f"{key}_steady_rss_curve_mib"] = curve
        r[f"{key}_steady_rss_growth_mib"] = round(curve[-1][1] - curve[0][1], 1)
        r[f"{key}_etcd_rss_mib"] = round(proc_status(self.etcd_pid()).get("VmRSS", float("nan")), 1)
        log(f"  steady {self.a.steady:.0f} s: {r[f'{key}_steady_writes']} operator writes; "
            f"RSS {r[f'{key}_operator_rss_mib']} MiB (peak {r[f'{key}_operator_hwm_mib']}, "
            f"{r[f'{key}_steady_rss_growth_mib']:+} MiB over the window; heap in use / freed but held: "
            f"{r[f'{key}_operator_heap_mib']} MiB)")

    # Agents' heartbeats (--heartbeat S): every report's spec.observedAt rewritten once every
    # S seconds, spread evenly, as podshaper-agent run does. The operator re-reads each one
    # and must write nothing; without them the reports would turn stale at maxReportAge
    # (10m) in a long window, which is a transition, not a steady state.
    def start_heartbeats(self):
        if not self.a.heartbeat:
            return None
        state = {"stop": False, "sent": 0, "errors": 0}

        def run():
            gap = self.a.heartbeat / len(self.names)
            nxt = mono()
            while not state["stop"]:
                for name in self.names:
                    if state["stop"]:
                        break
                    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                    body = json.dumps({"spec": {"observedAt": now}}).encode()
                    try:
                        status, _ = self.api.request("PATCH", f"{GTR}/{name}", body, ctype="application/merge-patch+json")
                        state["sent" if status == 200 else "errors"] += 1
                    except Exception:  # noqa: BLE001  (counted; the window goes on)
                        state["errors"] += 1
                    nxt += gap
                    time.sleep(max(0.0, nxt - mono()))
        state["thread"] = threading.Thread(target=run, daemon=True)
        state["thread"].start()
        return state

    def stop_heartbeats(self, state):
        if state is None:
            return None
        state["stop"] = True
        state["thread"].join(10)
        return {"sent": state["sent"], "errors": state["errors"]}

    def flips(self):
        k = self.a.flips
        log(f"{k} flips")
        lat = {"false": [], "true": []}
        status_lat = []
        for name in random.sample(self.names, min(k, len(self.names))):
            for value, want in (("NS", "false"), ("OK", "true")):
                patch = json.dumps([{"op": "replace", "path": "/spec/pairs/0/p2p/read", "value": value}]).encode()
                self.api.json("PATCH", f"{GTR}/{name}", patch, ctype="application/json-patch+json")
                t_after = mono()
                t_label = self.tracker.wait(lambda: self.tracker.label.get(name) == want, 30,
                                            f"{name}'s {LABEL} to become {want}",
                                            already=lambda: self.tracker.label_at[name])
                want_status = "True" if want == "true" else "False"
                t_status = self.tracker.wait(lambda: self.tracker.valid.get(name) == want_status, 30,
                                             f"{name}'s Validated to become {want_status}",
                                             already=lambda: self.tracker.valid_at[name])
                lat[want].append(max(0.0, t_label - t_after) * 1000)
                if t_status is not None:
                    status_lat.append(max(0.0, t_status - t_after) * 1000)
                time.sleep(random.uniform(0.1, 0.3))
        both = lat["false"] + lat["true"]
        r = self.result
        r["flip_samples"] = len(both)
        r["flip_p50_ms"] = round(pct(both, 50), 1)
        r["flip_p99_ms"] = round(pct(both, 99), 1)
        r["flip_max_ms"] = round(max(both), 1)
        r["flip_to_false_p50_ms"] = round(pct(lat["false"], 50), 1)
        r["flip_to_true_p50_ms"] = round(pct(lat["true"], 50), 1)
        r["flip_status_p50_ms"] = round(pct(status_lat, 50), 1)
        r["flip_status_p99_ms"] = round(pct(status_lat, 99), 1)
        log(f"  p50 {r['flip_p50_ms']} ms, p99 {r['flip_p99_ms']} ms, max {r['flip_max_ms']} ms")

    def phase_live(self):
        n = self.a.nodes
        log(f"live: deleting the {n} reports (the operator removes the labels), then creating them again")
        t0 = mono()
        parallel(self.api, lambda name: self.api.request("DELETE", f"{GTR}/{name}"), self.names, self.a.parallel)
        self.tracker.wait(lambda: not self.tracker.valid and not self.tracker.labelled, self.a.timeout,
                          "all reports gone and all podshaper.io labels removed")
        t_unlabelled = mono()
        self.op.wait_metrics(lambda s: s["queue"] == 0 and s["reports"] == 0, 60, "queue to drain after deletion")
        self.result["unlabel_after_delete_seconds"] = round(t_unlabelled - t0, 2)
        time.sleep(2)
        w_start = self.snapshot_counters()
        cpu_op0, cpu_api0 = self.op.cpu(), proc_cpu_seconds(self.apiserver_pid())
        log(f"creating {n} reports with the operator running")
        first, last = self.create_reports()
        t_done, t_metrics = self.wait_judged("all reports judged (live)", self.a.timeout)
        r = self.result
        r["create_reports_seconds"] = round(last - first, 2)
        r["catchup_live_seconds"] = round(max(0.0, t_done - last), 2)
        r["live_first_report_to_done_seconds"] = round(t_done - first, 2)
        r["live_metrics_done_seconds"] = round(max(0.0, t_metrics - last), 2)
        r["live_operator_cpu_seconds"] = round(self.op.cpu() - cpu_op0, 2)
        r["live_apiserver_cpu_seconds"] = round(proc_cpu_seconds(self.apiserver_pid()) - cpu_api0, 2)
        self.catchup_stats("live", first, t_done, w_start)
        r["live_verified_labels"], r["live_verified_validated"] = self.verify()
        log(f"  reports created in {last - first:.1f} s; all judged {t_done - last:.2f} s after the last")

    def run(self):
        self.setup()
        self.create_nodes()
        log(f"creating {self.a.nodes} reports (no operator yet)")
        first, last = self.create_reports()
        self.result["create_reports_cold_seconds"] = round(last - first, 2)
        try:
            self.phase_cold()
            self.steady("cold")
            self.flips()
            if not self.a.no_live:
                self.phase_live()
                self.steady("live")
            age = mono() - self.observed_at
            if age > 540:
                log(f"warning: the reports are {age:.0f} s old (maxReportAge 10m)")
            self.result["tracker_errors"] = self.tracker.errors
            _, s = self.op.last()
            self.result["leader_at_end"] = s["leader"] if s else None
        finally:
            self.op.stop()
            self.tracker.stop = True
        return self.result


def summarize(r):
    t = {
        "catchup_live_seconds": ("<=", 60.0),
        "steady_writes": ("==", 0),
        # The targets: 150 MiB up to 5,000 nodes, 256 MiB at 12,500.
        "operator_rss_mib": ("<=", 150.0 if r["nodes"] <= 5000 else 256.0),
        "flip_p99_ms": ("<=", 1000.0),
    }
    if r.get("no_live"):
        del t["catchup_live_seconds"]  # --no-live: that phase did not run
    r["steady_writes"] = max(r.get("cold_steady_writes", 0), r.get("live_steady_writes", 0))
    r["operator_rss_mib"] = max(r.get("cold_operator_rss_mib", 0), r.get("live_operator_rss_mib", 0))
    r["operator_hwm_mib"] = max(r.get("cold_operator_hwm_mib", 0), r.get("live_operator_hwm_mib", 0))
    r["apiserver_rss_mib"] = max(r.get("cold_apiserver_rss_mib", 0), r.get("live_apiserver_rss_mib", 0))
    # What extrapolates: the operator's own CPU per report written (live) and memory per node.
    if r.get("live_operator_cpu_seconds") is not None:
        r["operator_cpu_ms_per_report"] = round(1000 * r["live_operator_cpu_seconds"] / r["nodes"], 2)
    r["operator_rss_kib_per_node"] = round(1024 * r["operator_rss_mib"] / r["nodes"], 1)
    r["writes_per_second_peak"] = r.get("live_writes_per_second_peak")
    r["writes_per_second_mean"] = r.get("live_writes_per_second_mean")
    r["targets"] = {}
    for k, (op, want) in t.items():
        got = r.get(k)
        ok = got is not None and (got <= want if op == "<=" else got == want)
        r["targets"][k] = {"target": f"{op} {want}", "value": got, "pass": ok}
    r["pass"] = all(v["pass"] for v in r["targets"].values())
    return r


class _NotRun:
    """What table() shows for a number of a phase that did not run (--no-live)."""

    def __getitem__(self, _key):
        return self

    def __str__(self):
        return "-"

    def __format__(self, _spec):
        return "-"


class _Results(dict):
    def __missing__(self, _key):
        return _NotRun()


def table(r):
    r = _Results(r)
    rows = [
        ("nodes (reports)", r["nodes"], ""),
        ("CPUs on this machine", r["cpus"], "etcd, API server, operator, bench share them"),
        ("create N Nodes", f"{r['create_nodes_seconds']} s", "bench client, parallel POSTs"),
        ("create N reports", f"{r['create_reports_seconds']} s", "with the operator running"),
        ("live: last report -> all judged", f"{r['catchup_live_seconds']} s", "target <= 60 s"),
        ("live: first report -> all judged", f"{r['live_first_report_to_done_seconds']} s", ""),
        ("live: writes (status/node/event)",
         f"{r['live_writes']} ({r['live_writes_by_kind']['status']}/{r['live_writes_by_kind']['node']}/{r['live_writes_by_kind']['event']})", ""),
        ("live: writes/s peak / mean", f"{r['live_writes_per_second_peak']} / {r['live_writes_per_second_mean']}", "operator's writes_total"),
        ("live: reconcile mean", f"{r['live_reconcile_mean_ms']} ms", f"{r['live_reconciles']} reconciles, {r['live_conflicts']} conflicts"),
        ("live: CPU s operator / API server", f"{r['live_operator_cpu_seconds']} / {r['live_apiserver_cpu_seconds']}",
         f"operator {r['operator_cpu_ms_per_report']} ms per report"),
        ("cold: operator start -> all judged", f"{r['catchup_cold_seconds']} s", f"leader after {r['cold_leader_seconds']} s"),
        ("cold: writes/s peak / mean", f"{r['cold_writes_per_second_peak']} / {r['cold_writes_per_second_mean']}", f"{r['cold_writes']} writes"),
        ("cold: CPU s operator / API server", f"{r['cold_operator_cpu_seconds']} / {r['cold_apiserver_cpu_seconds']}", ""),
        ("steady writes (operator)", f"{r['cold_steady_writes']} / {r['live_steady_writes']}",
         f"after cold / after live, {r['steady_window_seconds']:.0f} s each; target 0"),
        ("steady writes (API server, all)", f"{r['cold_steady_apiserver_writes']} / {r['live_steady_apiserver_writes']}",
         json.dumps(r["live_steady_apiserver_writes_by_resource"], default=str)),
        ("steady reconciles", f"{r['cold_steady_reconciles']} / {r['live_steady_reconciles']}", ""),
        ("operator RSS (peak)", f"{r['operator_rss_mib']} MiB ({r['operator_hwm_mib']} MiB)",
         f"target <= {r['targets']['operator_rss_mib']['target'][3:]} MiB; {r['operator_rss_kib_per_node']} KiB per node"),
        ("operator heap in use / freed but held", "{} / {} MiB".format(*r["live_operator_heap_mib"])
         if r.get("live_operator_heap_mib") else "-", "the allocator's own count, after live"),
        ("API server / etcd RSS", f"{r['apiserver_rss_mib']} / {r['live_etcd_rss_mib']} MiB", ""),
        ("flip -> label p50 / p99 / max", f"{r['flip_p50_ms']} / {r['flip_p99_ms']} / {r['flip_max_ms']} ms",
         f"{r['flip_samples']} samples; target p99 <= 1000 ms"),
        ("flip -> status p50 / p99", f"{r['flip_status_p50_ms']} / {r['flip_status_p99_ms']} ms", ""),
        ("delete N reports -> labels gone", f"{r['unlabel_after_delete_seconds']} s", ""),
        ("verified (kubectl) labels / Validated",
         f"{r['live_verified_labels']} / {r['live_verified_validated']}", f"cold: {r['cold_verified_labels']} / {r['cold_verified_validated']}"),
    ]
    w = max(len(a) for a, _, _ in rows)
    v = max(len(str(b)) for _, b, _ in rows)
    lines = [f"podshaper-operator benchmark ({r['nodes']} nodes; {r['operator_binary']} built "
             f"{r['operator_binary_mtime']}, sha256 {r['operator_binary_sha256']}; {r['operator_workers']} workers)", ""]
    lines += [f"  {a:<{w}}  {str(b):<{v}}  {c}".rstrip() for a, b, c in rows]
    lines.append("")
    lines.append("  targets:")
    for k, t in r["targets"].items():
        lines.append(f"    {k:<24} {str(t['value']):>10}  {t['target']:<10} {'PASS' if t['pass'] else 'FAIL'}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster-dir", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--source-bin", help="where the binaries were copied from (recorded)")
    p.add_argument("--root", required=True)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--flips", type=int, default=50)
    p.add_argument("--steady", type=float, default=None, help="seconds of the steady-state window (30 at 5000 nodes)")
    p.add_argument("--heartbeat", type=float, default=0,
                   help="during steady windows, rewrite each report's observedAt every S seconds (the agent's 300); 0: off")
    p.add_argument("--no-live", action="store_true", help="stop after the cold start's steady window and the flips")
    p.add_argument("--workers", type=int, default=2, help="the operator's workers (its default: 2)")
    p.add_argument("--parallel", type=int, default=8, help="the bench's concurrent API requests when creating")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json")
    a = p.parse_args()
    if a.steady is None:
        a.steady = 30.0 if a.nodes >= 1000 else 10.0
    bench = Bench(a)
    r = summarize(bench.run())
    print(table(r), flush=True)
    write_results(a.json, r)
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
