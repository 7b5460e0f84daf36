#!/usr/bin/env python3
"""Helpers for check_peer.sh: make the extra review variants, and compare what
podshaper-webhook and peer-webhook answer to one AdmissionReview.

  check_peer.py variants CASES_DIR OUT_DIR
  check_peer.py compare REVIEW PODSHAPER_URL PEER_URL CA   (prints one JSON verdict line)
"""
import base64
import copy
import json
import os
import ssl
import sys
import urllib.request

SHAPED_BY = "podshaper.io/shaped-by"
WARNINGS = "podshaper.io/warnings"

try:
    import jsonpatch  # python3-jsonpatch, where installed

    def apply_patch(doc, patch):
        return jsonpatch.apply_patch(doc, patch)
except ImportError:  # a small RFC 6902 applier: the ops the two webhooks emit, and test

    def _tokens(pointer):
        if pointer == "":
            return []
        return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]

    def _walk(doc, tokens):
        for t in tokens:
            doc = doc[int(t)] if isinstance(doc, list) else doc[t]
        return doc

    def _put(parent, token, value, insert):
        if isinstance(parent, list):
            if token == "-":
                parent.append(value)
            elif insert:
                parent.insert(int(token), value)
            else:
                parent[int(token)] = value
        else:
            parent[token] = value

    def _remove(parent, token):
        if isinstance(parent, list):
            return parent.pop(int(token))
        return parent.pop(token)

    def apply_patch(doc, patch):
        doc = copy.deepcopy(doc)
        for op in patch:
            path = _tokens(op["path"])
            if not path:
                if op["op"] in ("add", "replace"):
                    doc = copy.deepcopy(op["value"])
                    continue
                raise ValueError("unsupported root op %s" % op)
            parent = _walk(doc, path[:-1])
            kind = op["op"]
            if kind == "add":
                _put(parent, path[-1], copy.deepcopy(op["value"]), insert=True)
            elif kind == "replace":
                _walk(parent, [path[-1]])  # must exist
                _put(parent, path[-1], copy.deepcopy(op["value"]), insert=False)
            elif kind == "remove":
                _remove(parent, path[-1])
            elif kind in ("move", "copy"):
                src = _tokens(op["from"])
                value = _walk(doc, src)
                if kind == "move":
                    _remove(_walk(doc, src[:-1]), src[-1])
                else:
                    value = copy.deepcopy(value)
                _put(_walk(doc, path[:-1]), path[-1], value, insert=True)
            elif kind == "test":
                if _walk(parent, [path[-1]]) != op["value"]:
                    raise ValueError("test failed: %s" % op)
            else:
                raise ValueError("unknown op %s" % op)
        return doc


def post(url, body, ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def shaped(pod, response):
    """The pod after the response's patch, or None for a denial."""
    if not response.get("allowed"):
        return None
    if not response.get("patch"):
        return copy.deepcopy(pod)
    if response.get("patchType") != "JSONPatch":
        raise ValueError("patchType %r" % response.get("patchType"))
    return apply_patch(pod, json.loads(base64.b64decode(response["patch"])))


def go_zero_values(peer, ours, path=""):
    """Members the peer's pod has and podshaper's lacks whose value is null or {}: the
    zero values Go's encoding of the typed Pod writes (creationTimestamp: null,
    status: {}, resources: {}), which the API server's own decoding discards. Returns
    their paths, and peer with them removed."""
    found = []
    if isinstance(peer, dict) and isinstance(ours, dict):
        out = {}
        for k, v in peer.items():
            here = path + "/" + k.replace("~", "~0").replace("/", "~1")
            if k not in ours and (v is None or v == {}):
                found.append(here)
                continue
            sub, out[k] = go_zero_values(v, ours.get(k), here)
            found += sub
        return found, out
    if isinstance(peer, list) and isinstance(ours, list) and len(peer) == len(ours):
        out = []
        for i, (a, b) in enumerate(zip(peer, ours)):
            sub, v = go_zero_values(a, b, "%s/%d" % (path, i))
            found += sub
            out.append(v)
        return found, out
    return found, peer


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return "%s: %s != %s" % (path or "/", json.dumps(a)[:200], json.dumps(b)[:200])
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s/%s: only in %s" % (path, k, "podshaper" if k in a else "peer")
            d = first_difference(a[k], b[k], path + "/" + k)
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d items != %d items" % (path or "/", len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s/%d" % (path, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %s != %s" % (path or "/", json.dumps(a)[:300], json.dumps(b)[:300])


def drop_shaped_by(pod):
    """podshaper.io/shaped-by names the server; podshaper.io/warnings keeps podshaper's
    admission warnings, which the peer does not write."""
    if pod is not None:
        annotations = pod.get("metadata", {}).get("annotations", {})
        annotations.pop(SHAPED_BY, None)
        annotations.pop(WARNINGS, None)
    return pod


def compare(review_file, podshaper_url, peer_url, ca):
    body = open(review_file, "rb").read()
    pod = (json.loads(body).get("request") or {}).get("object")
    verdict = {"case": review_file}
    answers = {}
    for who, url in (("podshaper", podshaper_url), ("peer", peer_url)):
        status, raw = post(url, body, ca)
        if status != 200:
            verdict.update(result="mismatch", why="%s answered HTTP %d: %s" % (who, status, raw[:200]))
            return verdict
        answers[who] = json.loads(raw)["response"]
    ps, peer = answers["podshaper"], answers["peer"]
    verdict["podshaper"] = ("denied" if not ps.get("allowed") else "patched" if ps.get("patch") else "unchanged")
    if not ps.get("allowed") or not peer.get("allowed"):
        if ps.get("allowed") == peer.get("allowed"):
            verdict.update(result="match", messages=[ps.get("status", {}).get("message"),
                                                     (peer.get("status") or {}).get("message")])
        else:
            who = "podshaper" if not ps.get("allowed") else "peer"
            msg = (answers[who].get("status") or {}).get("message")
            verdict.update(result="mismatch", why="only %s denies: %s" % (who, msg))
        return verdict
    ours, theirs = drop_shaped_by(shaped(pod, ps)), drop_shaped_by(shaped(pod, peer))
    if ours == theirs:
        verdict["result"] = "match"
        return verdict
    zeros, stripped = go_zero_values(theirs, ours)
    if stripped == ours:
        verdict.update(result="match", go_zero_values=zeros)
        return verdict
    verdict.update(result="mismatch", why=first_difference(ours, stripped))
    return verdict


def variants(cases_dir, out_dir):
    """Review variants of the golden pods: each annotation's edge cases, the ulimit
    merge, several GPU containers, existing affinity, shaped pods, configs."""
    seed = json.load(open(os.path.join(cases_dir, "seed-no-cluster-nccl-reserve", "review.json")))
    realistic = json.load(open(os.path.join(cases_dir, "realistic-llm-pod-with-sidecar", "review.json")))

    def make(name, base=seed, annotations=None, drop=(), edit=None, config=None):
        review = copy.deepcopy(base)
        pod = review["request"]["object"]
        ann = pod["metadata"].setdefault("annotations", {})
        for k in drop:
            ann.pop(k, None)
        ann.update(annotations or {})
        if edit:
            edit(pod)
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        json.dump(review, open(os.path.join(d, "review.json"), "w"), indent=2, ensure_ascii=False)
        if config:
            open(os.path.join(d, "config.yaml"), "w").write(config)

    shape = ("podshaper.io/batch-shape", "podshaper.io/batch-dtype")
    trainer = lambda pod: pod["spec"]["containers"][0]

    make("batch-bytes-integer", drop=shape, annotations={"podshaper.io/batch-bytes": "19267584"})
    make("batch-bytes-fraction", drop=shape, annotations={"podshaper.io/batch-bytes": "1.5Gi"})
    make("batch-bytes-decimal-suffix", drop=shape, annotations={"podshaper.io/batch-bytes": "20M"})
    make("batch-bytes-exponent", drop=shape, annotations={"podshaper.io/batch-bytes": "2e7"})
    make("batch-bytes-zero-denied", drop=shape, annotations={"podshaper.io/batch-bytes": "0"})
    make("batch-bytes-negative-denied", drop=shape, annotations={"podshaper.io/batch-bytes": "-18Mi"})
    make("batch-bytes-garbage-denied", drop=shape, annotations={"podshaper.io/batch-bytes": "lots"})
    make("batch-bytes-and-shape-denied", annotations={"podshaper.io/batch-bytes": "18Mi"})
    make("batch-size-missing-denied", drop=shape)
    make("dtype-default-float32", drop=("podshaper.io/batch-dtype",))
    make("dtype-torch-bfloat16", annotations={"podshaper.io/batch-dtype": "torch.bfloat16"})
    make("dtype-alias-half", annotations={"podshaper.io/batch-dtype": "half"})
    make("shape-zero-dim-denied", annotations={"podshaper.io/batch-shape": "32x0x224"})
    make("shape-trailing-x-denied", annotations={"podshaper.io/batch-shape": "32x"})
    make("shape-overflow-denied", annotations={"podshaper.io/batch-shape": "4294967296x4294967296"})
    make("shm-overflow-denied", drop=shape, annotations={"podshaper.io/batch-bytes": "4Ei",
                                                         "podshaper.io/dataloader-workers": "1024"})
    make("workers-zero", annotations={"podshaper.io/dataloader-workers": "0"})
    make("workers-default", drop=("podshaper.io/dataloader-workers", "podshaper.io/prefetch-factor"))
    make("workers-negative-denied", annotations={"podshaper.io/dataloader-workers": "-1"})
    make("workers-plus-sign-denied", annotations={"podshaper.io/dataloader-workers": "+8"})
    make("prefetch-zero-denied", annotations={"podshaper.io/prefetch-factor": "0"})
    make("ranks-16", annotations={"podshaper.io/ranks-per-pod": "16"})
    make("ranks-one-keeps-reserve", annotations={"podshaper.io/ranks-per-pod": "1"})
    make("workers-zero-no-batch-size", annotations={"podshaper.io/dataloader-workers": "0"}, drop=shape)
    make("ranks-zero-denied", annotations={"podshaper.io/ranks-per-pod": "0"})
    make("placement-bogus-denied", annotations={"podshaper.io/placement": "exclusive"})
    make("placement-node-exclusive-explicit", annotations={"podshaper.io/placement": "node-exclusive"})

    def gpus(n):
        def edit(pod):
            for field in ("limits", "requests"):
                trainer(pod)["resources"][field]["nvidia.com/gpu"] = str(n)
        return edit
    make("shared-four-gpus", annotations={"podshaper.io/placement": "shared"}, edit=gpus(4))
    make("partial-node-denied", edit=gpus(4))
    make("more-than-node-denied", edit=gpus(16))
    make("partial-node-warn", edit=gpus(4), config="partialNode: warn\n")
    make("partial-node-expand-nproc-set", edit=lambda p: (gpus(2)(p), trainer(p).setdefault("env", []).append(
        {"name": "PET_NPROC_PER_NODE", "value": "2"})), config="partialNode: expand\n")

    def selector(n):
        def edit(pod):
            gpus(n)(pod)
            pod["spec"]["nodeSelector"] = {"podshaper.io/gpu-count": str(n)}
        return edit
    make("node-selector-gpu-count-4", edit=selector(4))
    make("node-selector-gpu-count-bad-denied", edit=lambda p: p["spec"].__setitem__(
        "nodeSelector", {"podshaper.io/gpu-count": "eight"}))

    make("ulimit-user-annotation-merged",
         annotations={"ulimits.noderesource.dev/container.trainer": "- type: RLIMIT_NOFILE\n  soft: 65536\n  hard: 65536"})
    make("ulimit-user-memlock-kept",
         annotations={"ulimits.noderesource.dev/container.trainer": "- type: memlock\n  soft: 1024\n  hard: 1024\n"})
    make("ulimit-deprecated-key-merged",
         annotations={"ulimits.nri.containerd.io/container.trainer": "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n"})
    make("ulimit-not-a-list-kept", annotations={"ulimits.noderesource.dev/container.trainer": "nofile=1"})

    def two_containers(pod):
        a = trainer(pod)
        b = copy.deepcopy(a)
        b["name"] = "trainer-b"
        for c in (a, b):
            for field in ("limits", "requests"):
                c["resources"][field]["nvidia.com/gpu"] = "4"
        b["resources"]["limits"]["memory"] = "50Gi"
        del b["resources"]["requests"]["memory"]
        b["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 1000}
        b["env"] = [{"name": "PET_NPROC_PER_NODE", "value": "3"}]
        pod["spec"]["containers"].append(b)
        pod["spec"]["containers"].insert(0, {"name": "sidecar", "image": "busybox",
                                             "resources": {"limits": {"memory": "64Mi"}}})
    make("two-gpu-containers", annotations={"podshaper.io/ranks-per-pod": "6"}, edit=two_containers)
    make("memory-limit-decimal", edit=lambda p: trainer(p)["resources"]["limits"].__setitem__("memory", "100G"))
    make("memory-limit-missing", edit=lambda p: [trainer(p)["resources"][f].pop("memory") for f in ("limits", "requests")])

    def existing_affinity(pod):
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                      {"key": "podshaper.io/memlock", "operator": "In", "values": ["unlimited"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "podshaper.io/placement", "operator": "In",
                                                         "values": ["node-exclusive"]}]},
                 "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}]}}
    make("existing-affinity-merged", edit=existing_affinity)
    make("own-shm-volume-large-enough", edit=lambda p: (
        trainer(p).setdefault("volumeMounts", []).append({"name": "dshm", "mountPath": "/dev/shm/"}),
        p["spec"].setdefault("volumes", []).append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}})))
    make("already-shaped-by", annotations={SHAPED_BY: "podshaper-webhook/0.1.0 config=x"})
    # A volume that only has podshaper's name does not make a pod shaped: denied where
    # podshaper would add its own, kept where every GPU container mounts its own /dev/shm.
    make("dshm-volume-name-taken-denied", edit=lambda p: p["spec"].setdefault("volumes", []).append(
        {"name": "podshaper-dshm", "emptyDir": {"medium": "Memory"}}))
    make("dshm-volume-name-own-mount-kept", edit=lambda p: (
        trainer(p).setdefault("volumeMounts", []).append({"name": "podshaper-dshm", "mountPath": "/dev/shm"}),
        p["spec"].setdefault("volumes", []).append(
            {"name": "podshaper-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}})))
    make("not-opted-in", edit=lambda p: p["metadata"]["labels"].pop("podshaper.io/inject"))
    make("no-annotations-denied", drop=list(seed["request"]["object"]["metadata"]["annotations"]))
    make("node-memory-cap-denied", config="defaults:\n  nodeMemory: 8Gi\n")
    make("node-memory-cap-ok", config="defaults:\n  nodeMemory: 2Ti\nlimits:\n  maxShmPercentOfNodeMemory: 10\n")
    make("config-defaults", drop=("podshaper.io/dataloader-workers", "podshaper.io/prefetch-factor"),
         config="defaults:\n  workers: 2\n  prefetchFactor: 3\n  headroomPercent: 0\n  ncclCommunicators: 3\n"
                                             "  gpusPerNode: 8\nncclShmPerCommunicator:\n  shm: 100Mi\n")
    limits_variants(make, seed, trainer, two_containers)
    review_limits_variants(make, seed, trainer, two_containers, cases_dir)

    # As the API server sends a pod: its own encoding of the typed object already has
    # the zero values Go writes, so the peer's patch must carry none of its own.
    def apiserver_form(pod):
        pod["metadata"].setdefault("creationTimestamp", None)
        pod.setdefault("status", {})
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            c.setdefault("resources", {})
    make("apiserver-form-seed", edit=apiserver_form)
    make("apiserver-form-realistic", base=realistic, edit=apiserver_form)
    make("realistic-shared-with-bytes", base=realistic, drop=shape,
         annotations={"podshaper.io/batch-bytes": "37Mi", "podshaper.io/placement": "shared"})


def limits_variants(make, seed, trainer, two_containers):
    """docs/webhook.md "Limits": each bound at its limit and one past it, the paths and
    labels as compared, the shares of several GPU containers."""
    own = sum(len(k.encode()) + len(v.encode()) for k, v in seed["request"]["object"]["metadata"]["annotations"].items())
    pad_key = "example.com/padding"

    def padded(total):
        return {pad_key: "p" * (total - own - len(pad_key))}

    make("annotations-over-api-limit-denied", annotations=padded(262145))
    make("annotations-over-api-limit-not-gpu-pod-denied", annotations=padded(262145),
         edit=lambda p: [trainer(p)["resources"][f].pop("nvidia.com/gpu") for f in ("limits", "requests")])
    # At the limit before shaping: what podshaper adds (~860 B) takes it past, with or
    # without podshaper.io/warnings.
    make("annotations-at-api-limit-denied-after-shaping", annotations=padded(262144))
    # ~170 B under the limit once shaped without podshaper.io/warnings (~340 B), ~170 B over
    # with it: podshaper leaves its warnings annotation out; the peer writes none.
    make("annotations-near-api-limit-warnings-left-out", annotations=padded(262144 - 861 - 170))
    # A podshaper.io/warnings the user wrote is not kept (podshaper writes its own).
    make("annotations-user-warnings-replaced", annotations={
        "podshaper.io/warnings": "w" * 20000, **padded(262000 - 20000 - len("podshaper.io/warnings"))})

    ulimit = "ulimits.noderesource.dev/container.trainer"
    entry = "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n"

    def ulimit_of(size):
        return "#" + "u" * (size - len(entry) - 2) + "\n" + entry
    deprecated = "ulimits.nri.containerd.io/container."
    make("ulimit-annotation-at-limit-merged", annotations={ulimit: ulimit_of(4096)})
    make("ulimit-annotation-too-large-denied", annotations={ulimit: ulimit_of(4097)})
    make("ulimit-deprecated-annotation-at-limit-merged", annotations={deprecated + "trainer": ulimit_of(4096)})
    make("ulimit-deprecated-annotation-too-large-denied", annotations={deprecated + "trainer": ulimit_of(4097)})
    make("ulimit-annotation-of-another-container-too-large-denied",
         annotations={"ulimits.noderesource.dev/container.other": ulimit_of(4097)})
    # 4 KiB in all, over every container's and both prefixes.
    make("ulimit-annotations-4096-in-all-merged",
         annotations={ulimit: ulimit_of(2048), "ulimits.noderesource.dev/container.other": ulimit_of(2048)})
    make("ulimit-annotations-4097-in-all-denied",
         annotations={ulimit: ulimit_of(2048), "ulimits.noderesource.dev/container.other": ulimit_of(2049)})
    make("ulimit-annotations-both-prefixes-4097-in-all-denied",
         annotations={ulimit: ulimit_of(2000), deprecated + "trainer": ulimit_of(2097)})
    make("ulimit-annotations-three-4096-in-all-merged",
         annotations={ulimit: ulimit_of(1000), deprecated + "a": ulimit_of(1000), deprecated + "b": ulimit_of(2096)})
    make("ulimit-annotations-three-4097-in-all-denied",
         annotations={ulimit: ulimit_of(1000), deprecated + "a": ulimit_of(1000), deprecated + "b": ulimit_of(2097)})

    def gpu_containers(n):
        def edit(pod):
            base = trainer(pod)
            pod["spec"]["containers"] = []
            for i in range(n):
                c = copy.deepcopy(base)
                c["name"] = "rank-%d" % i
                for field in ("limits", "requests"):
                    c["resources"][field]["nvidia.com/gpu"] = "1"
                    c["resources"][field]["memory"] = "2Gi"
                pod["spec"]["containers"].append(c)
        return edit
    shared = {"podshaper.io/placement": "shared", "podshaper.io/dataloader-workers": "1"}
    make("gpu-containers-64-shared", annotations=shared, edit=gpu_containers(64))
    make("gpu-containers-65-denied", annotations=shared, edit=gpu_containers(65))

    def selector_terms(terms, expressions, fields=0):
        def edit(pod):
            pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone-%d" % j, "operator": "In", "values": [str(t)]}
                                          for j in range(expressions)],
                     **({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n%d" % j]}
                                         for j in range(fields)]} if fields else {})}
                    for t in range(terms)]}}}
        return edit
    make("node-selector-terms-64", edit=selector_terms(64, 1))
    make("node-selector-terms-65-denied", edit=selector_terms(65, 1))
    make("node-selector-term-64-requirements", edit=selector_terms(2, 60, 4))
    make("node-selector-term-65-requirements-denied", edit=selector_terms(2, 60, 5))
    make("node-selector-terms-65-shared", annotations={"podshaper.io/placement": "shared"},
         edit=selector_terms(65, 1))

    make("shape-16-dimensions", annotations={"podshaper.io/batch-shape": "x".join(["1"] * 12 + ["32", "3", "224", "224"])})
    make("shape-17-dimensions-denied",
         annotations={"podshaper.io/batch-shape": "x".join(["1"] * 13 + ["32", "3", "224", "224"])})

    def gpu_count(text):
        return lambda pod: pod["spec"].__setitem__("nodeSelector", {"podshaper.io/gpu-count": text})
    make("node-selector-gpu-count-8", edit=gpu_count("8"))
    make("node-selector-gpu-count-leading-zero-denied", edit=gpu_count("08"))
    make("node-selector-gpu-count-plus-denied", edit=gpu_count("+8"))
    make("node-selector-gpu-count-zero-denied", edit=gpu_count("0"))

    for name, path in (("double-slash", "/dev//shm"), ("dot", "/dev/shm/."), ("relative", "dev/shm"),
                       ("dotdot", "/dev/x/../shm"), ("below", "/dev/shm/x")):
        make("own-shm-path-" + name, edit=lambda p, path=path: (
            trainer(p).setdefault("volumeMounts", []).append({"name": "dshm", "mountPath": path}),
            p["spec"].setdefault("volumes", []).append(
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}})))

    # Several GPU containers, some with their own /dev/shm: podshaper's volume and the
    # raises are the share of the containers that mount it.
    def own_shm(*names):
        def edit(pod):
            for c in pod["spec"]["containers"]:
                if c["name"] in names:
                    c.setdefault("volumeMounts", []).append({"name": "own-shm", "mountPath": "/dev/shm/"})
            pod["spec"].setdefault("volumes", []).append(
                {"name": "own-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}})
        return edit
    make("two-gpu-containers-one-own-shm", annotations={"podshaper.io/ranks-per-pod": "6"},
         edit=lambda p: (two_containers(p), own_shm("trainer-b")(p)))
    make("two-gpu-containers-both-own-shm", edit=lambda p: (two_containers(p), own_shm("trainer", "trainer-b")(p)))

    def three_containers(pod):
        gpu_containers(3)(pod)
        for c, n in zip(pod["spec"]["containers"], ("2", "3", "3")):
            for field in ("limits", "requests"):
                c["resources"][field]["nvidia.com/gpu"] = n
    make("three-gpu-containers-2-3-3-one-own-shm", edit=lambda p: (three_containers(p), own_shm("rank-1")(p)))
    make("three-gpu-containers-small-share-at-least-64mi",
         annotations={"podshaper.io/dataloader-workers": "0", "podshaper.io/nccl-communicators": "0"},
         edit=lambda p: (three_containers(p), own_shm("rank-1", "rank-2")(p)))
    make("gpu-containers-64-shared-half-own-shm", annotations=shared,
         edit=lambda p: (gpu_containers(64)(p), own_shm(*["rank-%d" % i for i in range(0, 64, 2)])(p)))


def review_limits_variants(make, seed, trainer, two_containers, cases_dir):
    """The second round of limits: podshaper's input annotations within 256 B, container
    names the API server takes, the bytes of required terms, shaped terms kept, $(NAME)
    expansion bounded and the words quoted into the formula cut as podshaper cuts them."""
    inputs = ("podshaper.io/dataloader-workers", "podshaper.io/prefetch-factor", "podshaper.io/batch-bytes",
              "podshaper.io/batch-shape", "podshaper.io/batch-dtype", "podshaper.io/ranks-per-pod",
              "podshaper.io/nccl-communicators", "podshaper.io/placement")
    make("input-annotation-256-workers", annotations={"podshaper.io/dataloader-workers": "0" * 255 + "8"})
    make("input-annotation-256-batch-bytes", drop=("podshaper.io/batch-shape", "podshaper.io/batch-dtype"),
         annotations={"podshaper.io/batch-bytes": "0" * 252 + "18Mi"})
    for key in inputs:
        make("input-annotation-257-%s-denied" % key.split("/")[1], annotations={key: "0" * 256 + "1"})
    make("annotation-not-an-input-1000-bytes", annotations={"podshaper.io/notes": "n" * 1000})
    # In key order: an input annotation too large comes before an NRI ulimit one.
    make("input-annotation-257-and-ulimit-5000-denied", annotations={
        "podshaper.io/ranks-per-pod": "0" * 256 + "8", "ulimits.noderesource.dev/container.trainer": "u" * 5000})

    def rename(index, name):
        return lambda pod: pod["spec"]["containers"][index].__setitem__("name", name)
    make("container-name-63", edit=rename(0, "t" * 63))
    make("container-name-64-denied", edit=rename(0, "t" * 64))
    make("container-name-64-utf8-denied", edit=rename(0, "é" * 40))
    make("container-name-64-sidecar-denied", edit=lambda p: (two_containers(p), rename(0, "s" * 64)(p)))
    make("container-names-twice-denied", edit=lambda p: (two_containers(p), rename(2, "trainer")(p)))
    make("container-names-twice-not-gpu-denied", edit=lambda p: (
        two_containers(p), p["spec"]["containers"].append(copy.deepcopy(p["spec"]["containers"][0]))))
    # podshaper checks spec.containers only: an init container's name is the API server's.
    make("init-container-name-64-not-checked", edit=lambda p: p["spec"].__setitem__(
        "initContainers", [{"name": "i" * 64, "image": "busybox"}]))

    def values_of(n, tag):
        out, i = [], 0
        while n > 0:
            v = ("%s%05d" % (tag, i) + "v" * 63)[:min(n, 63)]
            out.append(v)
            n -= len(v)
            i += 1
        return out

    def terms_bytes(total, fields=0, terms=1):
        """Required terms whose keys and values hold `total` bytes, `fields` of them in
        matchFields, the rest in the first term's matchExpressions."""
        def edit(pod):
            expressions = total - fields
            first = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values_of(expressions - 4, "z")}]}
            if fields:
                first["matchFields"] = [{"key": "metadata.name", "operator": "In",
                                         "values": values_of(fields - len("metadata.name"), "n")}]
            pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [first] + [{"matchExpressions": []} for _ in range(terms - 1)]}}}
        return edit
    make("node-selector-terms-16384-bytes", edit=terms_bytes(16384))
    make("node-selector-terms-16385-bytes-denied", edit=terms_bytes(16385))
    make("node-selector-terms-16384-bytes-with-fields", edit=terms_bytes(16384, fields=8000))
    make("node-selector-terms-16385-bytes-with-fields-denied", edit=terms_bytes(16385, fields=8000))
    make("node-selector-terms-16385-bytes-shared-denied", annotations={"podshaper.io/placement": "shared"},
         edit=terms_bytes(16385))
    make("node-selector-terms-16385-bytes-65-terms-denied", edit=terms_bytes(16385, terms=65))
    make("node-selector-terms-16384-bytes-memlock-quantity", edit=terms_bytes(16384), config="memlock: 64Gi\n")

    # A shaped pod's manifest created again without podshaper.io/shaped-by: its terms,
    # each holding one alternative, are kept as they are, not multiplied again.
    def req(key, value, op="In"):
        return {"key": key, "operator": op, "values": [value]}
    validated = req("podshaper.io/topology-validated", "true")
    unlimited = req("podshaper.io/memlock", "unlimited")
    gt64 = req("podshaper.io/memlock", str(64 * 2**30 - 1), "Gt")
    count8 = req("podshaper.io/gpu-count", "8")

    def with_terms(*terms):
        return lambda pod: pod["spec"].__setitem__("affinity", {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": list(t)} for t in terms]}}})
    zone = req("zone", "a")
    make("shaped-term-kept", edit=with_terms([validated, unlimited, count8]))
    make("shaped-term-reordered-kept", edit=with_terms([count8, zone, unlimited, validated]))
    make("shaped-term-other-gpu-count-multiplied", edit=with_terms([validated, unlimited, req("podshaper.io/gpu-count", "4")]))
    make("shaped-terms-memlock-quantity-kept", config="memlock: 64Gi\n",
         edit=with_terms([zone, validated, unlimited, count8], [zone, validated, gt64, count8]))
    make("shaped-terms-memlock-quantity-one-kept-one-multiplied", config="memlock: 64Gi\n",
         edit=with_terms([zone, validated, gt64, count8], [req("zone", "b"), validated, count8]))
    make("shaped-terms-shared-kept", annotations={"podshaper.io/placement": "shared"}, config="memlock: 64Gi\n",
         edit=with_terms([validated, unlimited], [validated, gt64]))
    # The whole shaped pod of a golden case, its podshaper.io/shaped-by dropped.
    golden = os.path.join(cases_dir, "memlock-4mi-own-terms-doubled")
    manifest = copy.deepcopy(json.load(open(os.path.join(golden, "review.json"))))
    manifest["request"]["object"] = json.load(open(os.path.join(golden, "expected.json")))["pod"]
    for k in (SHAPED_BY, WARNINGS):
        manifest["request"]["object"]["metadata"]["annotations"].pop(k)
    make("shaped-manifest-memlock-quantity-recreated", base=manifest, config=open(os.path.join(golden, "config.yaml")).read())

    # $(NAME) expansion stops at 1024 B a word; the words quoted into the formula are cut
    # to 64 B as podshaper cuts them (never inside a UTF-8 character). With one rank the
    # formula says where the job's span was read (NET, or one rank on one node).
    def command(words, **env):
        def edit(pod):
            trainer(pod)["command"] = words
            trainer(pod)["env"] = [{"name": k, "value": v} for k, v in env.items()]
        return edit
    one = {"podshaper.io/ranks-per-pod": "1"}
    torchrun = lambda *w: ["torchrun", *w, "--nproc-per-node=8", "train.py"]
    for ranks, suffix in ((None, ""), (one, "-one-rank")):
        make("expand-nnodes-word-1024" + suffix, annotations=ranks,
             edit=command(torchrun("--nnodes=$(A)"), A="0" * 1014 + "1"))
        make("expand-nnodes-word-1025-not-expanded" + suffix, annotations=ranks,
             edit=command(torchrun("--nnodes=$(A)"), A="0" * 1015 + "1"))
    make("expand-stops-at-second-big", annotations=one,
         edit=command(torchrun("--nnodes=$(N)$(BIG)$(BIG)"), N="1", BIG="0" * 1000))
    make("expand-utf8-word-cut", annotations=one, edit=command(torchrun("--nnodes=$(BIG)$(BIG)"), BIG="é" * 500))
    make("expand-utf8-word-cut-inside", annotations=one, edit=command(torchrun("--nnodes=x$(BIG)"), BIG="é" * 500))
    make("expand-many-big-in-a-shell-line", annotations=one, edit=command(
        ["sh", "-c", "torchrun --nnodes=$(N) " + "$(BIG)" * 4000 + " train.py"], N="1", BIG="x" * 1000))
    make("expand-many-big-nnodes", annotations=one, edit=command(
        ["sh", "-c", "torchrun --nnodes=" + "$(BIG)" * 4000 + " train.py"], BIG="€" * 100))
    make("nnodes-flag-separate-long", annotations=one, edit=command(torchrun("--nnodes", "0" * 80 + "2")))
    make("nnodes-flag-separate-utf8", annotations=one, edit=command(torchrun("--nnodes", "€" * 30)))
    make("nnodes-flag-64-bytes-not-cut", annotations=one, edit=command(torchrun("--nnodes=" + "0" * 54 + "2")))
    make("nnodes-flag-65-bytes-cut", annotations=one, edit=command(torchrun("--nnodes=" + "0" * 55 + "2")))
    make("nnodes-env-long-one-node", annotations=one, edit=command(["python", "train.py"], PET_NNODES="0" * 100 + "1"))
    make("nnodes-env-utf8-cut", annotations=one, edit=command(["python", "train.py"], PET_NNODES="a" + "é" * 40))
    make("nnodes-env-utf8-cut-shm", edit=command(["python", "train.py"], PET_NNODES="a" + "é" * 40),
         config="ncclShmPerCommunicator:\n  net: 200Mi\n")

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "variants":
        variants(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "compare":
        print(json.dumps(compare(*sys.argv[2:]), ensure_ascii=False))
    else:
        sys.exit(__doc__)
