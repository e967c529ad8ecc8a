# What a GPU script sees of its sandbox (`mlrb doctor --gpu-probe`), as
# one JSON object on stdout: who it runs as, its limits and seccomp state,
# the device nodes, the variables' names, what CUDA's driver says as it
# initialises (cuInit through ctypes, no torch needed), what torch says,
# and whether what CUDA does at initialisation works here: reserve address
# space, make a memfd and size it, start threads. Standard library only;
# every check reports its failure instead of raising.
import ctypes
import json
import os
import threading


def check(fn):
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 - a probe reports, never fails
        return "failed: %s: %s" % (type(error).__name__, error)


def limits():
    wanted = ("Max file size", "Max data size", "Max address space", "Max processes", "Max core file size")
    with open("/proc/self/limits") as f:
        return {line[:26].strip(): line[26:47].strip() for line in f if line.startswith(wanted)}


def seccomp():
    with open("/proc/self/status") as f:
        return {k: v.strip() for k, v in (l.split(":", 1) for l in f) if k.startswith("Seccomp")}


def sysfs():
    """What CUDA's driver reads of /sys as it initialises."""
    with open("/sys/module/nvidia/initstate") as f:
        state = f.read().strip()
    root = "/sys/bus/pci/devices/"
    nvidia = [d for d in os.listdir(root) if open(root + d + "/vendor").read().strip() == "0x10de"]
    return {"initstate": state, "nvidia_pci": sorted(nvidia)}


def cuda_driver():
    cuda = ctypes.CDLL("libcuda.so.1")
    code = cuda.cuInit(0)
    name = ctypes.c_char_p()
    cuda.cuGetErrorName(code, ctypes.byref(name))
    count = ctypes.c_int(-1)
    if code == 0:
        cuda.cuDeviceGetCount(ctypes.byref(count))
    return {"cuInit": code, "error": (name.value or b"").decode(), "devices": count.value}


def torch_view():
    import torch
    view = {"version": torch.__version__, "is_available": torch.cuda.is_available()}
    view["init"] = check(lambda: torch.cuda.init() or "ok")
    return view


def reserve(gib):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    base = libc.mmap(None, gib << 30, 0, 0x02 | 0x20 | 0x4000, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        return "failed: errno %d" % ctypes.get_errno()
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.munmap(base, gib << 30)
    return "ok"


def memfd(gib):
    fd = os.memfd_create("mlrb-probe", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, gib << 30)
        return "ok"
    finally:
        os.close(fd)


def threads(n):
    stop = threading.Event()
    started = 0
    try:
        for _ in range(n):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    finally:
        stop.set()
    return started


def main():
    import getpass
    report = {
        "user": check(getpass.getuser),
        "uid": os.getuid(),
        "limits": check(limits),
        "seccomp": check(seccomp),
        "nodes": check(lambda: sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))),
        "proc_driver": os.path.isdir("/proc/driver/nvidia"),
        "sys": check(sysfs),
        "env": sorted(os.environ),
        "reserve_256_gib": check(lambda: reserve(256)),
        "memfd_16_gib": check(lambda: memfd(16)),
        "threads_of_64": check(lambda: threads(64)),
        "cuda_driver": check(cuda_driver),
        "torch": check(torch_view),
    }
    print(json.dumps(report))


main()
