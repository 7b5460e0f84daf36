"""The peer for the agent's bandwidth: torch copies 256 MiB between every GPU pair, both
ways, timed as the agent times cuMemcpyPeerAsync (3 warm-ups, 10 timed copies on CUDA
events, mean one-way GB/s)."""
import itertools
import torch

NBYTES = 256 << 20
n = torch.cuda.device_count()
means = {}
for a, b in itertools.combinations(range(n), 2):
    rates = []
    for src, dst in ((a, b), (b, a)):
        x = torch.empty(NBYTES, dtype=torch.uint8, device=f"cuda:{src}")
        y = torch.empty(NBYTES, dtype=torch.uint8, device=f"cuda:{dst}")
        with torch.cuda.device(src):
            for _ in range(3):
                y.copy_(x, non_blocking=True)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                y.copy_(x, non_blocking=True)
            stop.record()
            stop.synchronize()
        gbs = 10 * NBYTES / (start.elapsed_time(stop) / 1e3) / 1e9
        rates.append(gbs)
        print(f"torch copy GPU{src}->{dst}: {gbs:.1f} GB/s")
        del x, y
    means[(a, b)] = sum(rates) / 2
    print(f"torch GPU{a} <-> GPU{b}: {means[(a, b)]:.1f} GB/s one way")
if means:
    print(f"torch mean one way over {len(means)} pairs: {sum(means.values()) / len(means):.1f} GB/s")
