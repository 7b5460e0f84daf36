#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ from the repository's tests,
fixtures and examples (fuzz/README.md). Run from anywhere; it replaces only the
seeds it writes (names starting with "seed-"), so inputs added by hand or kept
from fuzzing stay. JSON is written compact: smaller inputs fuzz faster."""

import hashlib
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def compact(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


class Target:
    def __init__(self, name):
        self.dir = CORPUS / name
        self.dir.mkdir(parents=True, exist_ok=True)
        for old in self.dir.glob("seed-*"):
            old.unlink()
        self.seen = set()

    def add(self, name, data):
        if isinstance(data, str):
            data = data.encode()
        digest = hashlib.sha1(data).hexdigest()
        if digest in self.seen:
            return
        self.seen.add(digest)
        (self.dir / f"seed-{name}").write_bytes(data)


def reviews():
    """(name, AdmissionReview) from the golden cases, bench inputs and examples."""
    out = []
    for f in sorted((ROOT / "tests/golden/cases").glob("*/review.json")):
        out.append((f.parent.name, json.loads(f.read_text())))
    for f in sorted((ROOT / "bench/inputs").glob("*.json")):
        out.append(("bench-" + f.stem, json.loads(f.read_text())))
    out.append(("example-resnet50", json.loads((ROOT / "examples/admissionreview-resnet50.json").read_text())))
    return out


def admission():
    t = Target("admission")
    revs = reviews()
    for name, review in revs:
        text = compact(review)
        # A seed sets libFuzzer's default -max_len: the golden case at the API server's
        # annotation limit (256 KiB) would make every input that large; it is a golden test.
        if len(text) > 64 * 1024:
            continue
        t.add(name + ".json", text)
    # The seed pod as the golden test stores it shaped: a second admission of it.
    seed = json.loads((ROOT / "tests/golden/cases/seed-8xh100-validated-p2p/review.json").read_text())
    shaped = json.loads((ROOT / "tests/golden/cases/seed-8xh100-validated-p2p/expected.json").read_text())["pod"]
    again = json.loads(json.dumps(seed))
    again["request"]["object"] = shaped
    t.add("already-shaped.json", compact(again))
    other = json.loads(json.dumps(seed))
    other["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    t.add("not-a-pod.json", compact(other))
    sub = json.loads(json.dumps(seed))
    sub["request"]["subResource"] = "status"
    t.add("subresource.json", compact(sub))
    t.add("not-a-review.json", '{"apiVersion":"v1","kind":"Pod"}')
    t.add("no-uid.json", '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}')
    return revs


def field(value):
    return "~" if value is None else str(value)


def annotations(revs):
    """The annotation target's line format (fuzz/annotations_fuzzer.cc)."""
    t = Target("annotations")
    keys = ["dataloader-workers", "prefetch-factor", "batch-bytes", "batch-shape", "batch-dtype",
            "ranks-per-pod", "placement"]
    for name, review in revs:
        req = review.get("request", {})
        pod = req.get("object", {})
        ann = pod.get("metadata", {}).get("annotations", {})
        fields = [ann.get("podshaper.io/" + k) for k in keys]
        containers = pod.get("spec", {}).get("containers", [])
        gpus = [c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") for c in containers]
        gpus = [g for g in gpus if g is not None]
        memory = next((c.get("resources", {}).get("limits", {}).get("memory") for c in containers
                       if c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") is not None), None)
        fields += [gpus[0] if gpus else None, gpus[1] if len(gpus) > 1 else None,
                   pod.get("spec", {}).get("nodeSelector", {}).get("podshaper.io/gpu-count"),
                   memory, req.get("namespace")]
        t.add(name + ".txt", "\n".join(field(v) for v in fields))
        for setting in ("1", "2"):
            t.add(f"{name}-setting{setting}.txt", "\n".join(field(v) for v in fields + [setting]))
    # Edge cases from tests/unit/core (pod_shaper_test, shm_test, quantity_test).
    for name, fields in {
        "shape-bfloat16": ["8", "4", None, "32x3x224x224", "torch.bfloat16", "8", "node-exclusive", "8"],
        "bytes-fraction": ["2", "2", "1.5Gi", None, None, None, "shared", "1"],
        "both-batch": ["8", "4", "18Mi", "32x3x224x224", "float32", "8", None, "8"],
        "zero-workers": ["0", "1", "1e9", None, None, "1", None, "8"],
        "overflow": ["1024", "1024", "8Ei", None, None, "1024", None, "8"],
        "partial-node": ["8", "2", "18Mi", None, None, None, None, "4", None, None, "64Gi", "ml"],
        "two-containers": ["4", "2", "100M", None, None, "8", None, "6", "2", "8", "512Gi", "default"],
        "baseline-namespace": ["8", "2", "18Mi", None, None, None, None, "8", None, None, None, "baseline"],
        "no-batch": ["8", "2"],
        "negative": ["-1", "2", "18Mi"],
        # fields 12 (setting) and 13: the user's own NRI ulimit annotation (a backslash-n is a newline)
        "ulimits-block": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "0",
                          "- type: RLIMIT_NOFILE\\n  soft: 1048576\\n  hard: 1048576"],
        "ulimits-flow": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "0",
                         "[{type: nofile, soft: 1024, hard: 1024}]"],
        "ulimits-own-memlock": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "1",
                                "- type: memlock\\n  soft: 1024\\n  hard: 1024\\n"],
        "ulimits-not-a-list": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "2",
                               "memlock=-1"],
        # fields 14 and 15: podshaper.io/nccl-communicators and the trainer's PET_NNODES
        "nccl-one-node": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "0", None, "4", "1"],
        "nccl-many-nodes": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "2", None, "12",
                            "1:16"],
        "nccl-none": ["8", "4", "18Mi", None, None, None, None, "8", None, None, None, "ml", "1", None, "0", "x"],
        "nccl-overflow": ["8", "4", "18Mi", None, None, "1024", None, "8", None, None, None, "ml", "0", None,
                          "18446744073709551615", "$(N)"],
    }.items():
        t.add(name + ".txt", "\n".join(field(v) for v in fields))


def quantity():
    t = Target("quantity")
    for i, q in enumerate(["18Mi", "1.5Gi", "100M", "1e9", "500m", "19267584", "5822Mi", "1536Ki", "64k", "2G",
                           "2Ti", "7Ei", "8Ei", "1E", "5E3", "15e-1", "1n", ".5Ki", "+4Ki", "-1", "3000m",
                           "9223372036854775807", "9223372036854775808", "18446744073709551615",
                           "1.000000000000000000000000000000000000000000Gi", "1e999", "12Qi", "0Mi", "4.0",
                           "1234567890123456789012345678901234567890", "0000000000000000000000000000000000000008"]):
        t.add(f"{i:02d}.txt", q)


def config():
    t = Target("config")
    for f in sorted((ROOT / "tests/golden/cases").glob("*/config.yaml")):
        t.add(f.parent.name + ".yaml", f.read_text())
    t.add("example-webhook-config.yaml", (ROOT / "examples/webhook-config.yaml").read_text())
    t.add("every-key.yaml", "defaults:\n  workers: 8\n  prefetchFactor: 4\n  headroomPercent: 0\n"
          "  ncclCommunicators: 10\n  gpusPerNode: 4\n  nodeMemory: 2Ti\nncclShmPerCommunicator:\n  net: 31104Ki\n"
          "  p2p: 0\n  shm: 70000Ki\nlimits:\n"
          "  maxShmPercentOfNodeMemory: 25\npartialNode: expand\npodSecurity: warn\nshm:\n  adoptOwnVolume: true\n")
    t.add("flow-style.yaml", "{defaults: {workers: 2, gpusPerNode: [8]}, partialNode: \"warn\"}\n")
    t.add("anchors.yaml", "defaults: &d\n  workers: 4\nlimits: *d\n")
    t.add("empty.yaml", "")


def nvidia_smi():
    t = Target("nvidia_smi")
    files = sorted((ROOT / "tests/fixtures/topologies").glob("*.txt")) + \
        sorted((ROOT / "tests/fixtures/captures").glob("*.txt")) + \
        sorted((ROOT / "tests/fixtures/p2p").glob("*.txt"))
    for f in files:
        t.add(f.name, f.read_bytes())
    for host in sorted((ROOT / "docs/hardware").glob("*")):
        m, r = host / "nvidia-smi-topo-m.txt", host / "nvidia-smi-topo-p2p-r.txt"
        if m.exists() and r.exists():
            t.add(host.name + ".topo-m-and-p2p-r.txt", m.read_bytes() + b"\n" + r.read_bytes())


def watch_stream():
    t = Target("watch_stream")
    lines = {
        "node-added": {"type": "ADDED", "object": {"kind": "Node", "metadata": {"name": "a", "resourceVersion": "5"}}},
        "modified": {"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "6"}}},
        "deleted": {"type": "DELETED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}},
        "bookmark": {"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1", "metadata": {
            "resourceVersion": "12746", "annotations": {"k8s.io/initial-events-end": "true"}}}},
        "gone": {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                             "status": "Failure", "message": "too old resource version: 1 (12745)",
                                             "reason": "Expired", "code": 410}},
    }
    objects = []
    for f in sorted((ROOT / "tests/golden/cases").glob("*/cluster.json")):
        cluster = json.loads(f.read_text())
        objects += cluster.get("namespaces", []) + cluster.get("nodes", [])
    unique = {}
    for o in objects:
        unique.setdefault(compact(o), o)
    events = [{"type": "ADDED", "object": o} for o in unique.values()]
    headers = [b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x07\x3f\x01\xc8", b"\x90\x10\x20\x30"]
    stream = "\n".join(compact(e) for e in lines.values()) + "\n"
    t.add("protocol-test-lines.bin", headers[0] + stream.encode())
    t.add("protocol-test-lines-bytewise.bin", headers[1] + stream.replace("\n", "\r\n").encode())
    t.add("cluster-objects.bin", headers[2] + ("\n".join(compact(e) for e in events[:12]) + "\n").encode())
    modified = [{"type": "MODIFIED", "object": e["object"]} for e in events[:4]]
    deleted = [{"type": "DELETED", "object": e["object"]} for e in events[:2]]
    t.add("cluster-churn.bin", headers[0] + ("\n".join(compact(e) for e in events[:4] + modified + deleted)
                                             + "\n{\"type\":\"ADDED\",").encode())
    t.add("overlong-line.bin", headers[3] + ("x" * 600 + "\n" + compact(lines["node-added"])).encode())
    t.add("garbage.bin", headers[2] + b"\x01\x02\xff\n[1,2,3]\n{\"object\":{}}\n{\"type\":\"RENAMED\",\"object\":{}}\n")


def list_page():
    t = Target("list_page")
    objects = []
    for f in sorted((ROOT / "tests/golden/cases").glob("*/cluster.json")):
        objects += json.loads(f.read_text()).get("nodes", [])
    unique = list({compact(o): o for o in objects}.values())
    node_list = {"kind": "NodeList", "apiVersion": "v1",
                 "metadata": {"resourceVersion": "12745", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
                              "remainingItemCount": 40},
                 "items": unique[:6]}
    # A header byte of 0xff reads at the client's depth limit; 0x03 at a limit of 4.
    t.add("node-list.bin", b"\xff" + compact(node_list).encode())
    t.add("node-list-indented.bin", b"\xff" + json.dumps(node_list, indent=2).encode())
    t.add("last-page-shallow.bin", b"\x03" + b'{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"a":[]},{}]}')
    t.add("null-items.bin", b"\xff" + b'{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":null}')
    t.add("strings-and-duplicates.bin", b"\xff" + '{"\\u0069tems":[{"s":"]}\\"{[","t":"\\\\"},[1,[2]],"x",-1.5e3,true,'
          'false,null],"kind":"A","kind":"B","metadata":{"continue":"a"},"metadata":{"resourceVersion":"9"}}'.encode())
    t.add("two-items.bin", b"\xff" + b'{"items":[1],"items":[2]}')
    t.add("not-json.bin", b"\xff" + b'{"items":[{"a":1},{"b":')


def pod_explain():
    """Shaped pods as the operator's cache holds them: the golden cases' shaped pods,
    pending, and ended with the real DataLoader and NCCL lines (docs/hardware logs)."""
    t = Target("pod_explain")
    nccl = ("[2026-11-26 03:05:15] vm:2781:2911 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared "
            "memory segment /dev/shm/nccl-4PshbB (size 34210176), error: No space left on device (28)")
    dataloader = ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                  "memory (shm).\nRuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.\n"
                  "rank 0: exit code 1\ntraining failed: 1 rank(s)\n")
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}]
    shaped = [f for f in sorted((ROOT / "tests/golden/cases").glob("*/expected.json"))
              if json.loads(f.read_text()).get("allowed") and len(f.read_text()) < 64 * 1024]
    for f in shaped[:6]:
        pod = json.loads(f.read_text()).get("pod")
        if not pod:
            continue
        pod["metadata"].update(uid="pod-uid", creationTimestamp="2026-11-18T11:06:40Z", ownerReferences=owner)
        pending = json.loads(compact(pod))
        pending["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "lastTransitionTime": "2026-11-18T11:06:41Z",
            "message": "0/7 nodes are available: 7 node(s) didn't match Pod's node affinity/selector."}]}
        t.add(f.parent.name + "-pending.json", compact(pending))
        for name, state, message, restarts in (("dataloader", "state", dataloader, 0), ("nccl", "lastState", nccl, 2),
                                               ("sigbus", "state", "", 0)):
            ended = json.loads(compact(pod))
            ended["spec"]["nodeName"] = "a"
            term = {"exitCode": 135 if name == "sigbus" else 1, "reason": "Error", "message": message}
            cs = {"name": pod["spec"]["containers"][0]["name"], "restartCount": restarts, state: {"terminated": term}}
            ended["status"] = {"phase": "Failed", "containerStatuses": [cs]}
            t.add(f.parent.name + "-" + name + ".json", compact(ended))


def documents():
    t = Target("documents")
    for f in sorted((ROOT / "tests/review/corpus").glob("*")):
        t.add(f.name, f.read_bytes())
    for f in sorted((ROOT / "examples").glob("*.yaml")):
        t.add(f.name, f.read_bytes())
    t.add("streams.yaml", "# c\na: 1\n---\nb: [1, 0x1f, 1e3, 08, .5, +5, -.inf]\n...\n--- {c: 123456789012345678901234567890}\n")


if __name__ == "__main__":
    revs = admission()
    annotations(revs)
    quantity()
    config()
    documents()
    nvidia_smi()
    watch_stream()
    list_page()
    pod_explain()
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    print(f"seeds: {sum(1 for f in CORPUS.rglob('seed-*'))} files, {total} bytes under {CORPUS.relative_to(ROOT)}")
