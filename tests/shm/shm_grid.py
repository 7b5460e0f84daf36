#!/usr/bin/python3
"""The /dev/shm formula against a real PyTorch DataLoader (Debian's python3-torch).

  shm_grid.py WEBHOOK          make test: every case runs under a /dev/shm of exactly the
                               size `WEBHOOK review` computes for its annotations, and must
                               finish; a control case under the runtime's 64 MiB must die
                               for want of it (a Bus error in torch 1.13, "unable to
                               allocate shared memory" in 2.11); podshaper's dtype sizes
                               must be torch's.
  shm_grid.py WEBHOOK --bench  make bench: each case's peak use under a roomy /dev/shm, and
                               the ratio formula / measured need.

The webhook is asked with headroom 0 and no NCCL reserve, so the size is the DataLoader
part of the formula alone. Each case runs in its own mount namespace (unshare -m) with a
tmpfs at /dev/shm, as a container's emptyDir of medium Memory is.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch; --python for another
MiB = 1 << 20

# name, workers, prefetch, batch kind, shape, dtype, consumer ("slow": every prefetch slot full)
CASES = [
    ("w0 float32", 0, 2, "image", "32x3x224x224", "float32", "slow"),
    ("w1 p1 float32", 1, 1, "image", "64x3x224x224", "float32", "slow"),
    ("w1 p4 uint8", 1, 4, "image", "128x3x224x224", "uint8", "slow"),
    ("w2 p2 float32", 2, 2, "image", "32x3x224x224", "float32", "slow"),
    ("w2 p2 float32 fast consumer", 2, 2, "image", "32x3x224x224", "float32", "fast"),
    ("w2 p2 bfloat16 unaligned", 2, 2, "image", "18x3x333x333", "bfloat16", "slow"),
    ("w2 p1 dict", 2, 1, "dict", "32x3x224x224", "float32", "slow"),
    ("w4 p2 float32", 4, 2, "image", "16x3x224x224", "float32", "slow"),
    ("w4 p4 batch-bytes", 4, 4, "bytes", "64x8192", "int64", "slow"),
    ("w8 p1 uint8", 8, 1, "image", "64x3x224x224", "uint8", "slow"),
    ("w8 p2 dict", 8, 2, "dict", "8x3x224x224", "float32", "slow"),
    ("w8 p4 float32", 8, 4, "image", "8x3x224x224", "float32", "slow"),
]
# With CUDA (--cuda, on a GPU host): pin_memory=True, as GPU training sets it.
CUDA_CASES = [
    ("w2 p2 float32 pin_memory", 2, 2, "image", "32x3x224x224", "float32", "slow pin"),
    ("w8 p4 float32 pin_memory", 8, 4, "image", "8x3x224x224", "float32", "slow pin"),
]
# A control that must die for want of /dev/shm: under the runtime's 64 MiB, batches of
# 36.75 MiB, so any two alive at once (the + 2 held alone) overflow it.
CONTROL = ("control: 64 MiB", 2, 2, "image", "64x3x224x224", "float32", "fast")


ELEMENT = {"float32": 4, "bfloat16": 2, "uint8": 1, "int64": 8}  # the dtypes of CASES


def batch_bytes(kind, shape, dtype):
    n = ELEMENT[dtype]
    for d in shape.split("x"):
        n *= int(d)
    if kind == "dict":  # {"image": the batch, "label": one int64 per sample}
        n += int(shape.split("x")[0]) * 8
    return n


def annotations(workers, prefetch, kind, shape, dtype):
    a = {"podshaper.io/dataloader-workers": str(workers), "podshaper.io/prefetch-factor": str(prefetch),
         "podshaper.io/placement": "shared"}
    if kind == "image":
        a.update({"podshaper.io/batch-shape": shape, "podshaper.io/batch-dtype": dtype})
    else:  # what a user computes for a dict or a batch of token ids
        a["podshaper.io/batch-bytes"] = str(batch_bytes(kind, shape, dtype))
    return a


def review(annots):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "shm-grid", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "ml", "operation": "CREATE",
                        "object": {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": "loader", "namespace": "ml",
                                                "labels": {"podshaper.io/inject": "true"},
                                                "annotations": annots},
                                   "spec": {"containers": [{"name": "trainer", "image": "torch",
                                                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def ask(webhook, config, annots):
    """The shaped pod's /dev/shm size in bytes and its formula, from `review --output pod`."""
    out = subprocess.run([webhook, "review", "--config", config, "--output", "pod"], input=json.dumps(review(annots)),
                         capture_output=True, text=True, check=True)
    pod = json.loads(out.stdout)
    a = pod["metadata"]["annotations"]
    size = a["podshaper.io/shm-size"]
    units = {"Mi": MiB, "Gi": 1 << 30}
    vol = [v for v in pod["spec"]["volumes"] if v["name"] == "podshaper-dshm"][0]
    assert vol["emptyDir"]["sizeLimit"] == size, (vol, size)
    return int(size[:-2]) * units[size[-2:]], a["podshaper.io/shm-formula"]


def run_case(case, shm_bytes, mount=True):
    _, workers, prefetch, kind, shape, dtype, consumer = case
    cmd = [PYTHON, str(HERE / "dataloader_case.py"), "--workers", str(workers), "--prefetch", str(prefetch),
           "--kind", kind, "--shape", shape, "--dtype", dtype]
    if "pin" in consumer:
        cmd.append("--pin-memory")
    if consumer == "fast":
        cmd += ["--consumer-ms", "0"]
    else:  # slower than the workers: they fill every slot while a step runs
        cmd += ["--consumer-ms", str(40 + 3 * batch_bytes(kind, shape, dtype) // MiB)]
    if mount:  # a private mount namespace whose /dev/shm is a tmpfs of shm_bytes
        script = 'mount -t tmpfs -o size="$1" podshaper-shm /dev/shm && shift && exec "$@"'
        cmd = unshare_prefix() + ["sh", "-c", script, "sh", str(shm_bytes)] + cmd
    # Its own session, so that a hung case is killed with every worker and the poller.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # a DataLoader whose worker died can hang
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return {"finished": False, "error": "still running after 120 s", "stderr": err}
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        return {"finished": False, "error": (err.strip().splitlines() or ["no output"])[-1], "stderr": err}
    r = json.loads(lines[-1])
    r["stderr"] = err
    if r["finished"] and p.returncode != 0:
        r.update(finished=False, error=f"exit code {p.returncode} after the last batch")
    if r["finished"] and mount and r["size"] != shm_bytes:
        r.update(finished=False, error=f"/dev/shm was {r['size']} B, not the {shm_bytes} B asked")
    # torch 1.13's workers die of SIGBUS; torch 2.11's collate raises "unable to allocate
    # shared memory(shm) for file ...", as it allocates the batch's file up front.
    said = (r.get("error_text", "") + err).lower()
    if not r["finished"] and ("bus error" in said or "unable to allocate shared memory" in said):
        r["out_of_shm"] = True
    return r


_UNSHARE = None


def unshare_prefix():
    """unshare's arguments for a private mount namespace: as root, else (or where root
    may not mount) in a user namespace of its own."""
    global _UNSHARE
    if _UNSHARE is None:
        plain = ["unshare", "--mount", "--propagation", "private"]
        userns = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
        probe = ["sh", "-c", "mount -t tmpfs -o size=1M podshaper-probe /dev/shm"]
        for prefix in ([plain] if os.geteuid() == 0 else []) + [userns]:
            if subprocess.run(prefix + probe, capture_output=True).returncode == 0:
                _UNSHARE = prefix
                break
        else:
            sys.exit("shm_grid: cannot mount a tmpfs at /dev/shm in a private mount namespace "
                     "(unshare --mount as root, or in a user namespace); run as root")
    return _UNSHARE


def check_dtypes(webhook, config):
    """podshaper's size of every dtype this torch has is torch's element_size."""
    names = subprocess.run([PYTHON, "-c", "import torch, json; print(json.dumps({n: getattr(torch, n).itemsize "
                            "if hasattr(getattr(torch, n), 'itemsize') else torch.empty(0, dtype=getattr(torch, n))"
                            ".element_size() for n in %r if isinstance(getattr(torch, n, None), torch.dtype)}))"
                            % DTYPES], capture_output=True, text=True, check=True)
    torch_sizes = json.loads(names.stdout)
    bad = []
    for name, size in sorted(torch_sizes.items()):
        got, formula = ask(webhook, config, {"podshaper.io/dataloader-workers": "1", "podshaper.io/prefetch-factor": "1",
                                             "podshaper.io/placement": "shared",
                                             "podshaper.io/batch-shape": "1000", "podshaper.io/batch-dtype": name})
        expect = f"× {1000 * size} B (1000 {name})"
        if expect not in formula:
            bad.append(f"{name}: torch says {size} B an element, podshaper's formula: {formula}")
    return torch_sizes, bad


DTYPES = ["float64", "double", "float32", "float", "float16", "half", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
          "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "complex128", "cdouble", "complex64",
          "cfloat", "complex32", "chalf", "int64", "long", "int32", "int", "int16", "short", "int8", "uint64", "uint32",
          "uint16", "uint8", "bool"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("webhook")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--json", help="also write the table here (make bench's report reads it)")
    ap.add_argument("--python", default="/usr/bin/python3", help="a python3 with torch (default: Debian's)")
    ap.add_argument("--cuda", action="store_true", help="add the pin_memory cases (a GPU host)")
    ap.add_argument("--no-mount", action="store_true",
                    help="with --bench: measure on the /dev/shm there is, where no tmpfs can be mounted")
    args = ap.parse_args()
    global PYTHON
    PYTHON = args.python
    if args.no_mount and not args.bench:
        ap.error("--no-mount measures only (--bench): the size under test needs its own tmpfs")
    tmpdir = tempfile.TemporaryDirectory(prefix="podshaper-shm-")
    tmp = tmpdir.name
    strict = os.path.join(tmp, "strict.yaml")
    Path(strict).write_text("defaults:\n  headroomPercent: 0\n  ncclCommunicators: 0\n")
    default = os.path.join(tmp, "default.yaml")
    Path(default).write_text("defaults:\n  ncclCommunicators: 0\n")
    torch_version = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True, check=True).stdout.strip()
    failures, table = [], []
    print(f"torch {torch_version}, {os.cpu_count()} cores; /dev/shm sized by {args.webhook} review "
          f"(headroom 0, no NCCL reserve){', peaks measured under a roomy /dev/shm' if args.bench else ''}")
    print(f"{'case':30} {'batch B':>10} {'computed':>9} {'+20%':>8} {'peak':>9} {'ratio':>6} {'+20%':>6} {'s':>5}  result")
    start = time.monotonic()
    for case in CASES + (CUDA_CASES if args.cuda else []):
        name, workers, prefetch, kind, shape, dtype, _ = case
        annots = annotations(workers, prefetch, kind, shape, dtype)
        computed, formula = ask(args.webhook, strict, annots)
        with_headroom, _ = ask(args.webhook, default, annots)
        if workers > 0 and computed <= 64 * MiB:
            failures.append(f"{name}: the computed {computed // MiB}Mi is the floor: the case tests nothing")
        r = run_case(case, 2 * computed + 256 * MiB if args.bench else computed, mount=not args.no_mount)
        peak = r.get("peak", 0)
        ratio = f"{computed / peak:.2f}" if peak else "-"
        ratio20 = f"{with_headroom / peak:.2f}" if peak else "-"
        result = "finished" if r["finished"] else "FAILED: " + r.get("error", "?")
        print(f"{name:30} {batch_bytes(kind, shape, dtype):>10} {computed // MiB:>7}Mi {with_headroom // MiB:>6}Mi "
              f"{peak / MiB:>7.1f}Mi {ratio:>6} {ratio20:>6} {r.get('seconds', 0):>5}  {result}", flush=True)
        table.append({"case": name, "batch_bytes": batch_bytes(kind, shape, dtype), "computed": computed,
                      "computed_with_headroom": with_headroom, "peak": peak, "finished": r["finished"]})
        if r["finished"] and workers > 0 and case[6] != "fast" and not r.get("filled"):
            failures.append(f"{name}: the workers never filled their {workers * prefetch} prefetch slots: the case "
                            "did not test the worst case")
        if not r["finished"]:
            failures.append(f"{name} died under the computed /dev/shm of {computed // MiB}Mi ({formula}): "
                            f"{r.get('error')}\n{r.get('stderr', '')[-2000:]}")
    if not args.bench:
        r = run_case(CONTROL, 64 * MiB)
        ok = not r["finished"] and r.get("out_of_shm")
        print(f"{CONTROL[0]:30} {batch_bytes(*CONTROL[3:6]):>10} {64:>7}Mi {'-':>8} {r.get('peak', 0) / MiB:>7.1f}Mi "
              f"{'-':>6} {'-':>6} {r.get('seconds', 0):>5}  "
              f"{'died for want of /dev/shm, as it must' if ok else 'FAILED: it did not die for want of /dev/shm'}")
        if not ok:
            failures.append("the control case did not die for want of /dev/shm under 64 MiB: the harness cannot "
                            f"see a failure ({r})")
        sizes, bad = check_dtypes(args.webhook, strict)
        print(f"dtypes: podshaper's element size is torch {torch_version}'s for all {len(sizes)} it has: "
              f"{'yes' if not bad else 'NO'}")
        failures += bad
    print(f"{time.monotonic() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch_version, "cores": os.cpu_count(), "cases": table}, indent=1))
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
