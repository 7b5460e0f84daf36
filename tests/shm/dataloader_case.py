"""One DataLoader case under whatever /dev/shm this process sees; prints one JSON line.

Run by shm_grid.py inside a private mount namespace whose /dev/shm is a tmpfs of the
size podshaper computed. Batches are written into /dev/shm by the workers (PyTorch's
default collate allocates the batch in shared memory). A slow consumer first waits until
the workers have filled every prefetch slot, then takes each batch slower than they
make the next: the worst case (--consumer-ms 0: a consumer faster than the workers). A poller process samples the tmpfs's use.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

POLL = r"""
import os, signal, sys, time
parent = os.getppid()
peak = 0
stop = False
def done(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, done)
sys.stdout.write("ready\n"); sys.stdout.flush()
while not stop and os.getppid() == parent:  # gone with its parent
    s = os.statvfs("/dev/shm")
    peak = max(peak, (s.f_blocks - s.f_bfree) * s.f_frsize)
    time.sleep(0.0002)
print(peak, flush=True)
"""


def shm_used():
    s = os.statvfs("/dev/shm")
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--prefetch", type=int, required=True)
    p.add_argument("--kind", choices=["image", "dict", "bytes"], required=True)
    p.add_argument("--shape", default="8x3x224x224")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--batches", type=int, default=0, help="0: enough to fill every slot twice")
    p.add_argument("--consumer-ms", type=float, default=30.0)
    p.add_argument("--pin-memory", action="store_true", help="pin_memory=True (needs CUDA)")
    a = p.parse_args()

    import torch
    from torch.utils.data import DataLoader, Dataset

    dims = [int(d) for d in a.shape.split("x")]
    batch_size, sample = dims[0], dims[1:]
    dtype = getattr(torch, a.dtype)
    tensor_bytes = torch.empty((), dtype=dtype).element_size()
    for d in dims:
        tensor_bytes *= d

    class Samples(Dataset):
        def __len__(self):
            return n_batches * batch_size

        def __getitem__(self, i):
            x = torch.full(sample, i % 7, dtype=dtype)  # an image, or token ids for "bytes"
            if a.kind == "dict":
                return {"image": x, "label": torch.tensor(i, dtype=torch.int64)}
            return x

    slots = a.workers * a.prefetch
    n_batches = a.batches or max(2 * slots + 4, 6)
    kwargs = {"num_workers": a.workers, "batch_size": batch_size, "pin_memory": a.pin_memory}
    if a.workers > 0:
        kwargs["prefetch_factor"] = a.prefetch
        kwargs["timeout"] = 60  # a batch not received in 60 s is an error, not a hang
    baseline = shm_used()  # what others keep there (0 in our own tmpfs)
    poller = subprocess.Popen([sys.executable, "-c", POLL], stdout=subprocess.PIPE, text=True)
    poller.stdout.readline()
    result = {"torch": torch.__version__, "batches": 0}
    start = time.monotonic()
    try:
        batches = iter(DataLoader(Samples(), **kwargs))
        # Every slot full before the first step, however slow the workers are here.
        deadline = time.monotonic() + 20
        while (a.consumer_ms and slots and shm_used() - baseline < slots * tensor_bytes
               and time.monotonic() < deadline):
            time.sleep(0.01)
        result["filled"] = shm_used() - baseline >= slots * tensor_bytes
        for batch in batches:
            result["batches"] += 1
            time.sleep(a.consumer_ms / 1000)
        result["finished"] = result["batches"] == n_batches
    except Exception as e:  # a worker out of /dev/shm surfaces here
        result["finished"] = False
        result["error"] = str(e).splitlines()[0][:300]
        result["error_text"] = str(e)[-2000:]
    result["seconds"] = round(time.monotonic() - start, 2)
    poller.send_signal(signal.SIGTERM)
    result["peak"] = max(0, int(poller.communicate()[0].strip() or 0) - baseline)
    s = os.statvfs("/dev/shm")
    result["size"] = s.f_blocks * s.f_frsize
    print(json.dumps(result), flush=True)
    return 0 if result["finished"] else 1


if __name__ == "__main__":
    sys.exit(main())
