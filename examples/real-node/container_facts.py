"""What a process in this container gets, as key=value lines on stdout (the pods of
pods.yaml run it; the demo and the real-node end-to-end test read their logs).

shm_bytes        statfs(/dev/shm): its size
shm_written      bytes a write into /dev/shm took before it failed (ENOSPC at the size)
shm_write_error  the error that stopped it
memory_limit     the memory cgroup's limit (cgroup v1, else v2)
cap_ipc_lock     whether CAP_IPC_LOCK is in the effective set (CapEff)
memlock_soft, memlock_hard   RLIMIT_MEMLOCK (bytes, or unlimited)
mlock_2mib, mlock_64mib      mlock() of 2 and 64 MiB: ok, or the errno
ipc_ns           this process's IPC namespace (compare with the host's)
pet_nproc        PET_NPROC_PER_NODE
uid
seccomp          the process's seccomp mode (/proc/self/status): none, strict or filter
get_mempolicy    the get_mempolicy(2) syscall: ok, or the errno (NCCL's cuMem host memory
                 needs it; refused, NCCL puts that memory in /dev/shm instead)
"""
import ctypes
import errno
import mmap
import os
import resource

CAP_IPC_LOCK = 14


def out(key, value):
    print(f"{key}={value}", flush=True)


def limit(v):
    return "unlimited" if v == resource.RLIM_INFINITY else str(v)


st = os.statvfs("/dev/shm")
out("shm_bytes", st.f_blocks * st.f_frsize)

written, error = 0, "none"
chunk = b"\0" * (1 << 20)
try:
    with open("/dev/shm/podshaper-fill", "wb", buffering=0) as f:
        while written < (64 << 30):
            written += f.write(chunk)
except OSError as e:
    error = errno.errorcode.get(e.errno, str(e.errno))
finally:
    try:
        written = os.stat("/dev/shm/podshaper-fill").st_size
        os.unlink("/dev/shm/podshaper-fill")
    except OSError:
        pass
out("shm_written", written)
out("shm_write_error", error)

for path in ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"):
    if os.path.exists(path):
        out("memory_limit", open(path).read().strip())
        break

capeff = next(int(l.split()[1], 16) for l in open("/proc/self/status") if l.startswith("CapEff:"))
out("cap_ipc_lock", "yes" if capeff >> CAP_IPC_LOCK & 1 else "no")
soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
out("memlock_soft", limit(soft))
out("memlock_hard", limit(hard))

libc = ctypes.CDLL(None, use_errno=True)
libc.mlock.argtypes = libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
for mib in (2, 64):
    size = mib << 20
    buf = mmap.mmap(-1, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    if libc.mlock(addr, size) == 0:
        result = "ok"
        libc.munlock(addr, size)
    else:
        result = errno.errorcode.get(ctypes.get_errno(), "?")
    out(f"mlock_{mib}mib", result)

out("ipc_ns", os.readlink("/proc/self/ns/ipc"))
out("pet_nproc", os.environ.get("PET_NPROC_PER_NODE", "unset"))
out("uid", os.getuid())

mode = next(l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:"))
out("seccomp", {"0": "none", "1": "strict", "2": "filter"}.get(mode, mode))
SYS_get_mempolicy = 239  # x86-64
libc.syscall.restype = ctypes.c_long
if libc.syscall(SYS_get_mempolicy, None, None, ctypes.c_ulong(0), None, ctypes.c_ulong(0)) == 0:
    out("get_mempolicy", "ok")
else:
    out("get_mempolicy", errno.errorcode.get(ctypes.get_errno(), "?"))
