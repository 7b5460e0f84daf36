#!/usr/bin/env python3
"""The webhook's cluster cache at scale, against a running control plane that holds the
GPU Nodes of the operator benchmark (scripts/bench/operator.sh --claims runs it after
that benchmark, on its cluster): M namespaces and N ResourceClaims in them (8 GPUs each,
allocated on a node as a DRA driver leaves them, reserved for a pod), then one
podshaper-webhook replica started with --kubeconfig, and what it measures:

  ready    seconds from its start until /readyz answers 200 (its Namespaces and Nodes
           listed), and until its ResourceClaims are all cached
           (podshaper_webhook_cached_objects): until then a DRA pod's claim is read
           from the API server, as admission waits
  rss      its VmRSS once ready and after the load (VmHWM: the peak)
  latency  admission at a fixed rate with that cache, answered from it: a pod asking
           nvidia.com/gpu (placed against every GPU Node of the cache) and a pod whose
           GPUs come from one of the ResourceClaims (read from the cache, not the API
           server): p50 / p99, and whether the webhook read any claim from the API server
           meanwhile (its client's GET count; target 0)

Standard library only, but the load generator (podshaper-loadgen, scripts/bench-build.sh);
without it the latency rows are left out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from operator_bench import Api, free_port, heap_mib, log, parallel, parse_metrics, proc_status, write_results  # noqa: E402

mono = time.monotonic
RESOURCE = "/apis/resource.k8s.io/v1"
GPU_DRIVER = "gpu.nvidia.com"


def namespace_names(m):
    return [f"team-{i:03d}" for i in range(m)]


def claim_object(ns, name):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "llm-pretrain", "podshaper-bench": "true"}},
            "spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": GPU_DRIVER, "allocationMode": "ExactCount", "count": 8}}]}}}


def claim_status(node, pod, uid):
    """What a DRA driver and the scheduler leave on an allocated claim: a result per
    device, the node it is bound to, the pod it is reserved for."""
    return {"allocation": {
        "devices": {"results": [{"request": "gpus", "driver": GPU_DRIVER, "pool": node, "device": f"gpu-{i}"}
                                for i in range(8)]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}]}


def review(pod, ns):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000031",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "namespace": ns, "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": pod, "dryRun": False}}


def training_pod(ns, claim=None):
    """An 8-GPU training pod as a user writes it; with `claim`, its GPUs come from that
    ResourceClaim instead of nvidia.com/gpu."""
    res = {"memory": "64Gi", "cpu": "8"}
    if claim is None:
        res["nvidia.com/gpu"] = "8"
    container = {"name": "trainer", "image": "pytorch:2", "command": ["torchrun", "--nproc-per-node=8", "train.py"],
                 "resources": {"limits": dict(res), "requests": dict(res)}}
    spec = {"containers": [container], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    if claim is not None:
        container["resources"]["claims"] = [{"name": "gpus"}]
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "llm-pretrain-0", "namespace": ns, "labels": {"podshaper.io/inject": "true", "app": "llm"},
                         "annotations": {"podshaper.io/dataloader-workers": "8", "podshaper.io/prefetch-factor": "4",
                                         "podshaper.io/batch-shape": "32x3x224x224", "podshaper.io/batch-dtype": "float32"}},
            "spec": spec}


class Webhook:
    def __init__(self, binary, kubeconfig, workdir, threads):
        self.binary, self.kubeconfig, self.dir, self.threads = binary, kubeconfig, workdir, threads
        self.port = free_port()
        self.crt, self.key = os.path.join(workdir, "tls.crt"), os.path.join(workdir, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", self.key, "-out", self.crt], check=True, capture_output=True)
        self.proc = None
        self.logfile = os.path.join(workdir, "webhook.log")

    def url(self, path):
        return f"https://127.0.0.1:{self.port}{path}"

    def start(self):
        self.proc = subprocess.Popen([self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--tls-cert", self.crt,
                                      "--tls-key", self.key, "--kubeconfig", self.kubeconfig,
                                      "--threads", str(self.threads)],
                                     stdout=subprocess.DEVNULL, stderr=open(self.logfile, "w"))
        return mono()

    def get(self, path):
        r = subprocess.run(["curl", "-sk", "-o", "/dev/stdout", "-w", "\n%{http_code}", "--max-time", "5", self.url(path)],
                           capture_output=True, text=True)
        body, _, code = r.stdout.rpartition("\n")
        return int(code or 0), body

    def wait_ready(self, t0, timeout):
        while mono() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"podshaper-webhook exited ({self.proc.returncode}); its log: {self.logfile}")
            if self.get("/readyz")[0] == 200:
                return mono() - t0
            time.sleep(0.05)
        raise RuntimeError(f"podshaper-webhook not ready after {timeout} s; its log: {self.logfile}")

    def status(self):
        return proc_status(self.proc.pid)

    def metrics(self):
        code, body = self.get("/metrics")
        return parse_metrics(body) if code == 200 else {}

    def cached(self, resource):
        """What the webhook's watch of `resource` holds; None from a webhook that does not say."""
        series = [v for labels, v in self.metrics().get("podshaper_webhook_cached_objects", [])
                  if f'resource="{resource}"' in labels]
        return sum(series) if series else None

    def gets(self):
        """GETs by the webhook's API client so far: lists, and the claims a watch had not
        brought yet (what admission reads from the API server)."""
        code, body = self.get("/metrics")
        if code != 200:
            return None
        return sum(v for labels, v in parse_metrics(body).get("podshaper_kube_client_requests_total", [])
                   if 'verb="GET"' in labels)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Bench:
    def __init__(self, a):
        self.a = a
        self.api = Api(a.cluster_dir)
        self.result = {"claims": a.claims, "claim_namespaces": a.namespaces}

    def create(self):
        names = namespace_names(self.a.namespaces)
        t0 = mono()
        for ns in names:
            status, _ = self.api.request("POST", "/api/v1/namespaces",
                                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            if status not in (201, 409):
                raise RuntimeError(f"namespace {ns}: HTTP {status}")
        nodes = [n["metadata"]["name"] for n in self.api.list_all("/api/v1/nodes?labelSelector=podshaper-bench%3Dtrue")[0]]
        self.result["gpu_nodes"] = len(nodes)
        if not nodes:
            raise RuntimeError("no bench Nodes (labelled podshaper-bench=true): run after the operator benchmark")
        claims = [(names[i % len(names)], f"train-{i:06d}", nodes[i % len(nodes)]) for i in range(self.a.claims)]
        if self.a.existing:  # an earlier run made them on this cluster: the webhook measured again
            have = {(c["metadata"]["namespace"], c["metadata"]["name"])
                    for c in self.api.list_all(f"{RESOURCE}/resourceclaims")[0]}
            missing = [c for c in claims if c[:2] not in have]
            if missing:
                raise RuntimeError(f"--existing: {len(missing)} of the {len(claims)} claims are not on the cluster "
                                   f"(the first: {missing[0][0]}/{missing[0][1]})")
            self.result["create_claims_seconds"] = 0
            self.claims = claims
            log(f"{len(claims)} ResourceClaims already on the cluster (--existing)")
            return
        log(f"creating {len(claims)} ResourceClaims in {len(names)} namespaces, allocated on {len(nodes)} Nodes")

        def create(c):
            ns, name, node = c
            obj = self.api.json("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", claim_object(ns, name), ok=(201,))
            obj["status"] = claim_status(node, name + "-pod", "00000000-0000-4000-8000-" + name[-6:].rjust(12, "0"))
            self.api.json("PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}/status", obj)

        _, _, last = parallel(self.api, create, claims, self.a.parallel)
        self.result["create_claims_seconds"] = round(last - t0, 1)
        self.claims = claims
        log(f"  created and allocated in {last - t0:.1f} s")

    def load(self, wh, name, body):
        if not self.a.loadgen:
            return
        path = os.path.join(self.a.workdir, f"{name}.json")
        with open(path, "w") as f:
            json.dump(body, f)
        out = subprocess.run([self.a.loadgen, "--url", wh.url("/mutate-v1-pod"), "--ca", wh.crt, "--json", "--body", path,
                              "--mode", "fixed", "--rate", str(self.a.rate), "--duration", str(self.a.duration),
                              "--connections", "16"], check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        lat = r["latency_ms"]
        self.result[f"{name}_p50_ms"], self.result[f"{name}_p99_ms"] = lat["p50"], lat["p99"]
        self.result[f"{name}_errors"] = r["errors"]
        self.result[f"{name}_allowed_bytes"] = r.get("response_bytes_mean")
        log(f"  {name}: {r['ok']} answered at {self.a.rate}/s, p50 {lat['p50']} ms, p99 {lat['p99']} ms, {r['errors']} errors")

    def run(self):
        self.create()
        wh = Webhook(self.a.webhook, os.path.join(self.a.cluster_dir, "kubeconfig"), self.a.workdir, self.a.threads)
        try:
            t0 = wh.start()
            ready = wh.wait_ready(t0, self.a.timeout)
            self.result["webhook_ready_seconds"] = round(ready, 2)
            log(f"webhook ready in {ready:.2f} s")
            while (cached := wh.cached("resourceclaims")) is not None and cached < len(self.claims):
                if mono() - t0 > self.a.timeout:
                    raise RuntimeError(f"the webhook cached {cached} of {len(self.claims)} claims "
                                       f"in {self.a.timeout} s; its log: {wh.logfile}")
                time.sleep(0.1)
            if cached is not None:
                self.result["webhook_claims_cached_seconds"] = round(mono() - t0, 2)
            time.sleep(2)
            self.result["webhook_rss_ready_mib"] = round(wh.status()["VmRSS"], 1)
            log(f"  its {len(self.claims)} claims cached {self.result.get('webhook_claims_cached_seconds', '(not said)')} s "
                f"after its start; RSS {self.result['webhook_rss_ready_mib']} MiB")
            gets0 = wh.gets()
            ns, name, _ = self.claims[len(self.claims) // 2]
            self.load(wh, "admission_gpu", review(training_pod(ns), ns))
            self.load(wh, "admission_claim", review(training_pod(ns, name), ns))
            gets1 = wh.gets()
            self.result["api_gets_during_load"] = None if gets0 is None or gets1 is None else int(gets1 - gets0)
            st = wh.status()
            self.result["webhook_rss_mib"] = round(st["VmRSS"], 1)
            self.result["webhook_hwm_mib"] = round(st["VmHWM"], 1)
            self.result["webhook_heap_mib"] = heap_mib(wh.metrics())  # (in use, freed but held)
        finally:
            wh.stop()
        return self.result


def table(r):
    rows = [
        ("GPU Nodes / ResourceClaims / namespaces", f"{r['gpu_nodes']} / {r['claims']} / {r['claim_namespaces']}", ""),
        ("create and allocate the claims", f"{r['create_claims_seconds']} s", "bench client"),
        ("webhook: start -> ready", f"{r['webhook_ready_seconds']} s", "Namespaces and Nodes listed; target <= 30 s"),
        ("webhook: start -> every claim cached", f"{r.get('webhook_claims_cached_seconds', '-')} s", "target <= 30 s"),
        ("webhook RSS ready / after load (peak)",
         f"{r['webhook_rss_ready_mib']} / {r['webhook_rss_mib']} MiB ({r['webhook_hwm_mib']} MiB)", "target <= 128 MiB"),
        ("webhook heap in use / freed but held", "{} / {} MiB".format(*r["webhook_heap_mib"])
         if r.get("webhook_heap_mib") else "-", "the allocator's own count"),
    ]
    for k, what in (("admission_gpu", "nvidia.com/gpu pod"), ("admission_claim", "ResourceClaim pod")):
        if f"{k}_p50_ms" in r:
            rows.append((f"admission p50 / p99, {what}", f"{r[f'{k}_p50_ms']} / {r[f'{k}_p99_ms']} ms",
                         f"{r[f'{k}_errors']} errors"))
    if r.get("api_gets_during_load") is not None:
        rows.append(("GETs to the API server under load", r["api_gets_during_load"], "a claim not cached; target 0"))
    w = max(len(a) for a, _, _ in rows)
    v = max(len(str(b)) for _, b, _ in rows)
    return "\n".join(["podshaper-webhook's cluster cache", ""] + [f"  {a:<{w}}  {str(b):<{v}}  {c}".rstrip() for a, b, c in rows])


def summarize(r):
    targets = {"webhook_ready_seconds": 30.0, "webhook_claims_cached_seconds": 30.0, "webhook_hwm_mib": 128.0}
    r["targets"] = {k: {"target": f"<= {want}", "value": r.get(k), "pass": r.get(k) is not None and r[k] <= want}
                    for k, want in targets.items() if k in r}
    if r.get("api_gets_during_load") is not None:
        r["targets"]["api_gets_during_load"] = {"target": "== 0", "value": r["api_gets_during_load"],
                                                  "pass": r["api_gets_during_load"] == 0}
    for k in ("admission_gpu_errors", "admission_claim_errors"):
        if k in r:
            r["targets"][k] = {"target": "== 0", "value": r[k], "pass": r[k] == 0}
    r["pass"] = all(t["pass"] for t in r["targets"].values())
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster-dir", required=True)
    p.add_argument("--webhook", required=True, help="the podshaper-webhook binary")
    p.add_argument("--loadgen", help="podshaper-loadgen; without it no latency rows")
    p.add_argument("--claims", type=int, default=100000)
    p.add_argument("--namespaces", type=int, default=300)
    p.add_argument("--rate", type=int, default=200, help="admissions per second for the latency rows")
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--json")
    p.add_argument("--existing", action="store_true",
                   help="the claims are there already (operator.sh --keep-cluster): measure another webhook build")
    a = p.parse_args()
    if a.loadgen and not os.access(a.loadgen, os.X_OK):
        a.loadgen = None
    with tempfile.TemporaryDirectory() as d:
        a.workdir = d
        r = summarize(Bench(a).run())
    print(table(r))
    for k, t in r["targets"].items():
        print(f"    {k:<28} {str(t['value']):>10}  {t['target']:<8} {'PASS' if t['pass'] else 'FAIL'}")
    write_results(a.json, r)
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
