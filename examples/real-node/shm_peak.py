"""A real PyTorch DataLoader that holds its fullest /dev/shm for a while, with a thread that
samples statfs of /dev/shm every 10 ms: what the container itself saw at its fullest, to
compare with what podshaper-shm measured from the node. Prints statfs_peak_bytes=N.
Its batches and its reading of /dev/shm are dataloader.py's.

    python3 shm_peak.py [--workers 2] [--prefetch 2] [--shape 16x3x224x224] [--batches 10] [--hold 8]
"""
import argparse
import threading
import time

import torch.utils.data as data

from dataloader import Images, shm_used  # beside it, in the same ConfigMap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--shape", default="16x3x224x224")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--hold", type=float, default=8.0)
    args = ap.parse_args()
    shape = tuple(int(d) for d in args.shape.split("x"))
    batch_bytes = 4
    for d in shape:
        batch_bytes *= d

    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], shm_used())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    loader = data.DataLoader(Images(shape, args.batches), batch_size=None, num_workers=args.workers,
                             prefetch_factor=args.prefetch)
    batches = iter(loader)
    held = [next(batches)]  # the first step holds its batch while the workers fill every slot
    want = args.workers * args.prefetch * batch_bytes
    deadline = time.monotonic() + 60
    while shm_used() < want and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(args.hold)  # the fullest state, held
    for batch in batches:
        held = [batch]
    stop.set()
    sampler.join()
    print(f"batches={args.batches} held={len(held)} statfs_peak_bytes={peak[0]}", flush=True)


if __name__ == "__main__":
    main()
