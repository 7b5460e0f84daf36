#!/usr/bin/env python3
"""What NCCL puts in /dev/shm, per rank per communicator and by transport, and a real
DDP job with a DataLoader inside a /dev/shm of exactly the size `podshaper-webhook review`
computes (headroom 0). Runs on a host with 2 or more GPUs (scripts/gpu/nccl_shm.sh).

  nccl_shm.py run WEBHOOK OUTDIR [--gpus 2] [--dry-run]
      the table (each layout of two ranks with 1, 2 and 4 communicators: the transport NCCL
      chose, the peak of /dev/shm, all-reduce bus bandwidth of 1 GiB) and the jobs; writes
      OUTDIR/nccl-shm.json, OUTDIR/nccl-shm.md and OUTDIR/logs/<case>.log (NCCL_DEBUG=INFO).
      --dry-run: gloo on the CPU, to try the plumbing on a machine without GPUs.
  nccl_shm.py holder ...   (internal) inside a private mount namespace whose /dev/shm is
      a fresh tmpfs: starts the ranks, samples statvfs(/dev/shm) every 1 ms, reports the peak.
  nccl_shm.py rank ...     (internal) one rank: communicators, all-reduce, or the DDP job.

Every case runs its ranks in `unshare --mount` with its own tmpfs at /dev/shm, as a pod's
emptyDir of medium Memory is. NCCL unlinks its segments once every local peer has attached
them, so `ls` misses them; statvfs does not (a mapped, unlinked tmpfs file keeps its pages).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
MiB = 1 << 20
# NVLink multicast stays off on these shared hosts, in every program started here.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

# The layouts of two ranks (the note's table): name, NCCL environment, one pod (both ranks
# share one /dev/shm) or a pod per GPU (each rank its own IPC, PID, UTS and /dev/shm), and
# the transport NCCL must report for the row to count.
LAYOUTS = [
    ("one pod, NCCL's defaults (cuMem)", {}, "pod", "P2P/CUMEM"),
    ("one pod, NCCL_CUMEM_ENABLE=0 (legacy CUDA IPC)", {"NCCL_CUMEM_ENABLE": "0"}, "pod", "P2P/IPC"),
    ("one pod, P2P unavailable, cuMem host memory", {"NCCL_P2P_DISABLE": "1"}, "pod", "SHM"),
    ("one pod, P2P unavailable, cuMem off (legacy SHM)", {"NCCL_P2P_DISABLE": "1", "NCCL_CUMEM_ENABLE": "0"}, "pod",
     "SHM"),
    ("ranks as on two nodes (NET)", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, "pod", "NET/Socket"),
    ("a pod per GPU, each its own IPC, PID and /dev/shm", {}, "pod-per-gpu", "NET/Socket"),
]
COMMUNICATORS = {"ranks as on two nodes (NET)": [1, 2, 4]}  # the rest: 1 and 4

# The real job (the note's): DDP, DataLoader 3 workers × prefetch 2 of 16×3×224×224 float32,
# pin_memory, 30 steps, a consumer slower than the workers so every prefetch slot fills.
JOB = {"workers": 3, "prefetch": 2, "shape": "16x3x224x224", "dtype": "float32", "steps": 30}
# name, NCCL environment, PET_NNODES in the pod, the node's podshaper.io/p2p label,
# communicators run, communicators told to the webhook, must finish, NCCL's transport.
NET_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
JOBS = [
    ("NET, 4 communicators (the default)", NET_ENV, None, "all", 4, None, True, "NET/Socket"),
    ("NET, 6 communicators", NET_ENV, "2", "all", 6, 6, True, "NET/Socket"),
    ("P2P, one node, 4 communicators", {}, "1", "all", 4, 4, True, "P2P/CUMEM"),
    ("legacy SHM, one node without P2P, 4 communicators", {"NCCL_P2P_DISABLE": "1", "NCCL_CUMEM_ENABLE": "0"}, "1",
     "partial", 4, 4, True, "SHM"),
    # Must die for want of /dev/shm, and say so: 6 communicators in the size for 2.
    ("control: NET, 6 communicators run, 2 told", NET_ENV, "2", "all", 6, 2, False, "NET/Socket"),
]
OUT_OF_SHM = ("No space left on device", "unable to allocate shared memory")


# ---------------------------------------------------------------- one rank


def rank_main(args):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cuda = not args.dry_run
    local = int(os.environ.get("LOCAL_RANK", rank))
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    out = {"rank": rank, "torch": torch.__version__}
    if cuda:
        out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    t0 = time.time()
    dist.init_process_group(backend)
    groups = [dist.group.WORLD] + [dist.new_group(list(range(world))) for _ in range(args.communicators - 1)]
    for g in groups:  # NCCL makes a communicator at its first collective
        x = torch.ones(1, device=device)
        dist.all_reduce(x, group=g)
        assert x.item() == world, x.item()
    if cuda:
        torch.cuda.synchronize()
    out["init_s"] = round(time.time() - t0, 2)
    if args.bandwidth:
        out["busbw_gbs"] = bus_bandwidth(torch, dist, device, world, nbytes=(16 << 20) if args.dry_run else (1 << 30))
    if args.job:
        out.update(ddp_job(torch, dist, device, args))
    dist.barrier()
    dist.destroy_process_group()
    out["finished"] = True
    print(json.dumps(out), flush=True)


def bus_bandwidth(torch, dist, device, world, nbytes=1 << 30, warmup=2, timed=10):
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.time()
    for _ in range(timed):
        dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    per = (time.time() - t) / timed
    return round(nbytes * 2 * (world - 1) / world / per / 1e9, 1)


def ddp_job(torch, dist, device, args):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    shape = [int(d) for d in JOB["shape"].split("x")]

    class Images(Dataset):
        def __len__(self):
            return shape[0] * (JOB["steps"] + 4)

        def __getitem__(self, i):
            return torch.full(shape[1:], float(i % 7)), i % 10

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10)).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loader = DataLoader(Images(), batch_size=shape[0], num_workers=JOB["workers"], prefetch_factor=JOB["prefetch"],
                        pin_memory=device.type == "cuda", persistent_workers=False)
    steps = 0
    for images, labels in loader:
        loss = torch.nn.functional.cross_entropy(ddp(images.to(device, non_blocking=True)), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.05)  # slower than the workers: every prefetch slot fills
        steps += 1
        if steps == JOB["steps"]:
            break
    return {"steps": steps}


# ---------------------------------------------------------------- the tmpfs holder


def holder_main(args):
    """Inside the mount namespace: start the local ranks, sample /dev/shm, report."""
    peak = [0]
    stop = threading.Event()

    def used():
        st = os.statvfs("/dev/shm")
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    base = used()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], used())
            time.sleep(0.001)

    threading.Thread(target=sample, daemon=True).start()
    size = os.statvfs("/dev/shm")
    procs = []
    env_base = dict(os.environ)
    for r in args.ranks:
        # NCCL writes its INFO lines to stdout unless told a file.
        env = dict(env_base, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(args.world),
                   NCCL_DEBUG_FILE=f"{args.log}.rank{r}.nccl")
        cmd = [sys.executable, str(HERE), "rank", "--communicators", str(args.communicators)]
        cmd += ["--bandwidth"] * args.bandwidth + ["--job"] * args.job + ["--dry-run"] * args.dry_run
        log = open(f"{args.log}.rank{r}", "w")
        # its own session: a rank that hangs is killed with its DataLoader workers
        procs.append((r, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                          start_new_session=True), log))
    results, deadline = [], time.time() + args.timeout
    for r, p, log in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, _ = p.communicate()
        log.close()
        lines = [l for l in out.splitlines() if l.startswith("{")]
        res = json.loads(lines[-1]) if lines else {"rank": r, "finished": False}
        res["rc"] = p.returncode
        results.append(res)
    stop.set()
    time.sleep(0.01)
    print(json.dumps({"peak_bytes": peak[0] - base, "size_bytes": size.f_blocks * size.f_frsize, "ranks": results}))


# ---------------------------------------------------------------- the driver


def kill_group(p):
    try:
        os.killpg(p.pid, 9)
    except ProcessLookupError:
        pass


def in_tmpfs(size, holder_args, own_namespaces=False, hostname=None):
    """The holder's command line inside a private mount namespace with a fresh tmpfs."""
    ns = ["--mount", "--propagation", "private"]
    if own_namespaces:  # a pod of its own: IPC, PID and hostname too
        ns += ["--ipc", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc"]
    script = 'mount -t tmpfs -o size="$1" podshaper-shm /dev/shm && shift'
    if hostname:
        script += f" && hostname {hostname}"
    script += ' && exec "$@"'
    return ["unshare"] + ns + ["sh", "-c", script, "sh", str(size), sys.executable, str(HERE), "holder"] + holder_args


def run_case(name, env, layout, communicators, size, logdir, gpus, port, bandwidth=False, job=False, dry_run=False,
             timeout=240):
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + f"-c{communicators}"
    log = logdir / slug
    env = dict(os.environ, **SAFE_ENV, **env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_DEBUG="INFO",
               PYTHONUNBUFFERED="1")
    common = ["--world", str(gpus), "--communicators", str(communicators), "--log", str(log),
              "--timeout", str(timeout)] + ["--bandwidth"] * bandwidth + ["--job"] * job + ["--dry-run"] * dry_run
    if layout == "pod":
        holders = [in_tmpfs(size, common + ["--ranks"] + [str(r) for r in range(gpus)])]
    else:
        holders = [in_tmpfs(size, common + ["--ranks", str(r)], own_namespaces=True, hostname=f"pod-{r}")
                   for r in range(gpus)]
    t = time.time()
    procs = [subprocess.Popen(h, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for h in holders]
    reports, errors, deadline = [], [], time.time() + timeout + 30
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, err = p.communicate()
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if lines:
            reports.append(json.loads(lines[-1]))
        else:
            errors.append(err.strip()[-500:])
    ranks = [r for rep in reports for r in rep["ranks"]]
    logs = ""
    for r in range(gpus):
        for f in (Path(f"{log}.rank{r}.nccl"), Path(f"{log}.rank{r}")):
            if f.exists():
                logs += f.read_text(errors="replace")
                f.unlink()
    Path(f"{log}.log").write_text(logs)
    finished = len(ranks) == gpus and all(r.get("finished") and r.get("rc") == 0 for r in ranks)
    per_tmpfs_ranks = 1 if layout != "pod" else gpus
    peak = max((rep["peak_bytes"] for rep in reports), default=0)
    out = {"case": name, "layout": layout, "communicators": communicators, "finished": finished,
           "transport": transports(logs), "peak_bytes": peak, "size_bytes": size, "wall_s": round(time.time() - t, 1),
           "per_rank_per_communicator_bytes": peak // per_tmpfs_ranks // communicators}
    for key in ("busbw_gbs", "nccl", "torch", "steps", "init_s"):
        vals = [r[key] for r in ranks if key in r]
        if vals:
            out[key] = min(vals) if key == "busbw_gbs" else vals[0]
    said = [l.strip() for l in logs.splitlines() if "NCCL WARN" in l or "unable to allocate shared memory" in l
            or "No space left" in l]
    if said:
        out["errors"] = said[:4]
    if errors:
        out["driver_errors"] = errors
    return out


def transports(logs):
    """NCCL's own words for what each connection goes over: P2P/CUMEM, SHM, NET/Socket..."""
    found = []
    for m in re.finditer(r" via ([A-Za-z0-9/_]+)", logs):
        t = m.group(1)
        t = "/".join(t.split("/")[:2]) if t.startswith(("P2P", "NET")) else t.split("/")[0]
        if t not in found:
            found.append(t)
    return ", ".join(found) or "-"


def review_size(webhook, communicators, nnodes, p2p, gpus, workdir):
    """`podshaper-webhook review` of the job's pod, headroom 0, with a cluster of one node
    class: gpus GPUs validated with podshaper.io/p2p=p2p. Returns bytes and the formula."""
    annotations = {"podshaper.io/dataloader-workers": str(JOB["workers"]),
                   "podshaper.io/prefetch-factor": str(JOB["prefetch"]),
                   "podshaper.io/batch-shape": JOB["shape"], "podshaper.io/batch-dtype": JOB["dtype"],
                   "podshaper.io/ranks-per-pod": str(gpus)}
    if communicators is not None:
        annotations["podshaper.io/nccl-communicators"] = str(communicators)
    container = {"name": "trainer", "image": "torch", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    if nnodes is not None:
        container["env"] = [{"name": "PET_NNODES", "value": nnodes}]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "job", "namespace": "ml", "labels": {"podshaper.io/inject": "true"},
                        "annotations": annotations},
           "spec": {"containers": [container]}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "nccl-shm", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "namespace": "ml", "operation": "CREATE", "object": pod}}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-node", "labels": {"kubernetes.io/hostname": "gpu-node",
                                                        "podshaper.io/topology-validated": "true",
                                                        "podshaper.io/gpu-count": str(gpus),
                                                        "podshaper.io/p2p": p2p,
                                                        "podshaper.io/memlock": "unlimited"}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "capacity": {"memory": "256Gi"}}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    (workdir / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [namespace, node]}))
    (workdir / "config.yaml").write_text("defaults:\n  headroomPercent: 0\n")
    out = subprocess.run([webhook, "review", "--config", str(workdir / "config.yaml"), "--cluster",
                          str(workdir / "cluster.json"), "--output", "pod"], input=json.dumps(review),
                         capture_output=True, text=True, check=True)
    a = json.loads(out.stdout)["metadata"]["annotations"]
    size = a["podshaper.io/shm-size"]
    units = {"Mi": MiB, "Gi": 1 << 30}
    return int(size[:-2]) * units[size[-2:]], a["podshaper.io/shm-formula"]


def markdown(table, jobs):
    lines = ["| layout of the two ranks | communicators | NCCL's transport | bus bw 1 GiB | /dev/shm peak | "
             "per rank per communicator |", "| --- | --- | --- | --- | --- | --- |"]
    for r in table:
        bw = f"{r['busbw_gbs']} GB/s" if "busbw_gbs" in r else "–"
        ok = "" if r["finished"] else " (failed)"
        lines.append(f"| {r['case']}{ok} | {r['communicators']} | {r['transport']} | {bw} | {r['peak_bytes']:,} B | "
                     f"{r['per_rank_per_communicator_bytes']:,} B |")
    lines += ["", "| job (2 ranks, DDP + DataLoader) | communicators run / told | /dev/shm (review, headroom 0) | "
              "peak | peak / size | finished | expected |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for j in jobs:
        ratio = j["peak_bytes"] / j["size_bytes"] if j["size_bytes"] else 0
        lines.append(f"| {j['case']} ({j['transport']}) | {j['communicators']} / {j['told']} | "
                     f"{j['size_bytes'] // MiB}Mi | {j['peak_bytes'] / MiB:.1f} MiB | {ratio:.3f} | "
                     f"{'yes' if j['finished'] else 'no'} | {'finish' if j['must_finish'] else 'fail'} |")
    return "\n".join(lines) + "\n"


def run_main(args):
    outdir = Path(args.outdir)
    logdir = outdir / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    work = outdir / "work"
    work.mkdir(exist_ok=True)
    port = 29500
    result = {"host": os.uname().nodename, "gpus": args.gpus, "table": [], "jobs": []}

    def save():
        (outdir / "nccl-shm.json").write_text(json.dumps(result, indent=1) + "\n")
        (outdir / "nccl-shm.md").write_text(markdown(result["table"], result["jobs"]))

    if not args.jobs_only:
        for name, env, layout, transport in LAYOUTS:
            for c in COMMUNICATORS.get(name, [1, 4]):
                port += 1
                r = run_case(name, env, layout, c, 2 << 30, logdir, args.gpus, port, bandwidth=(c == 1),
                             dry_run=args.dry_run)
                # NCCL's own log must name the transport the row is about (gloo has none)
                r["as_expected"] = r["finished"] and (args.dry_run or transport in r["transport"])
                print(json.dumps(r), flush=True)
                result["table"].append(r)
                save()
    for name, env, nnodes, p2p, run, told, must, transport in JOBS:
        size, formula = review_size(args.webhook, told, nnodes, p2p, args.gpus, work)
        port += 1
        r = run_case(name, env, "pod", run, size, logdir, args.gpus, port, job=True, dry_run=args.dry_run)
        r.update(told=told if told is not None else "default", formula=formula, must_finish=must)
        said = " ".join(r.get("errors", []))
        if args.dry_run:  # gloo keeps nothing in /dev/shm: the control finishes there
            r["as_expected"] = r["finished"] or not must
        elif must:
            r["as_expected"] = r["finished"] and transport in r["transport"]
        else:  # it must die, and for want of /dev/shm, not of anything else
            r["as_expected"] = not r["finished"] and any(s in said for s in OUT_OF_SHM)
        print(json.dumps(r), flush=True)
        result["jobs"].append(r)
        save()
    shutil.rmtree(work, ignore_errors=True)
    bad = [r["case"] for r in result["jobs"] if not r["as_expected"]]
    bad += [f"{r['case']} c{r['communicators']} ({r['transport']})" for r in result["table"] if not r["as_expected"]]
    print(markdown(result["table"], result["jobs"]))
    if bad:
        print("nccl_shm: not as expected: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run")
    run.add_argument("webhook")
    run.add_argument("outdir")
    run.add_argument("--gpus", type=int, default=2)
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--jobs-only", action="store_true")
    h = sub.add_parser("holder")
    r = sub.add_parser("rank")
    for p in (h, r):
        p.add_argument("--communicators", type=int, default=1)
        p.add_argument("--bandwidth", action="store_true")
        p.add_argument("--job", action="store_true")
        p.add_argument("--dry-run", action="store_true")
    h.add_argument("--world", type=int, required=True)
    h.add_argument("--ranks", type=int, nargs="+", required=True)
    h.add_argument("--log", required=True)
    h.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    if args.mode == "rank":
        return rank_main(args)
    if args.mode == "holder":
        return holder_main(args)
    return run_main(args)


if __name__ == "__main__":
    sys.exit(main())
