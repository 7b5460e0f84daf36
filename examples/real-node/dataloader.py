"""A real PyTorch DataLoader, as a training script runs it: PET_NPROC_PER_NODE ranks
(default 1), each with its own DataLoader of `workers` worker processes and
`prefetch_factor` batches each, batches of float32 images, and a training step slower
than the workers (every prefetch slot full: the most /dev/shm a DataLoader holds). The
first step lasts until the workers have filled every slot (as a first step that compiles
its kernels does), so that the peak is reached on a slow or CPU-limited node too.
Workers hand batches to their rank through /dev/shm; too small a /dev/shm kills them
with "Bus error". Prints one line per rank and exits 0 when every rank finished.

    python3 dataloader.py [--workers 2] [--prefetch 2] [--shape 32x3x224x224] [--batches 12] [--step 0.1] [--fill-timeout 60]
"""
import argparse
import multiprocessing as mp
import os
import sys
import time

import torch
import torch.utils.data as data


class Images(data.Dataset):
    def __init__(self, shape, n):
        self.shape, self.n = shape, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full(self.shape, float(i), dtype=torch.float32)


def shm_used():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def first_step(args, shape, batch_bytes):
    """Waits (up to --fill-timeout s) until /dev/shm holds every batch the workers prefetch.
    A worker that cannot put its batch there dies, and the DataLoader raises here."""
    want = min(args.workers * args.prefetch, args.batches - 1) * batch_bytes
    deadline = time.monotonic() + args.fill_timeout
    while shm_used() < want and time.monotonic() < deadline:
        time.sleep(0.05)
    if shm_used() < want:
        print(f"(the workers had not filled their {args.workers} x {args.prefetch} slots "
              f"after {args.fill_timeout} s; training goes on)", flush=True)


def rank_main(rank, args, shape):
    loader = data.DataLoader(Images(shape, args.batches), batch_size=None, num_workers=args.workers,
                             prefetch_factor=args.prefetch)
    batch_bytes = 4
    for d in shape:
        batch_bytes *= d
    seen = 0
    for batch in loader:
        assert batch[0, 0, 0, 0].item() == seen
        if seen == 0 and args.workers > 0:
            first_step(args, shape, batch_bytes)
        seen += 1
        time.sleep(args.step)  # the training step
    print(f"rank {rank}: {seen} batches of {'x'.join(map(str, shape))} float32 "
          f"({args.workers} workers x prefetch {args.prefetch})", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--shape", default="32x3x224x224")
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--step", type=float, default=0.1)
    p.add_argument("--fill-timeout", type=float, default=60)
    args = p.parse_args()
    shape = tuple(int(d) for d in args.shape.split("x"))
    ranks = int(os.environ.get("PET_NPROC_PER_NODE", "1"))
    print(f"torch {torch.__version__}, {ranks} rank(s), /dev/shm "
          f"{os.statvfs('/dev/shm').f_blocks * os.statvfs('/dev/shm').f_frsize >> 20} MiB", flush=True)
    procs = [mp.Process(target=rank_main, args=(r, args, shape)) for r in range(ranks)]
    for proc in procs:
        proc.start()
    failed = 0
    for r, proc in enumerate(procs):
        proc.join()
        if proc.exitcode != 0:
            print(f"rank {r}: exit code {proc.exitcode}", flush=True)
            failed += 1
    print("training finished" if not failed else f"training failed: {failed} rank(s)", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
