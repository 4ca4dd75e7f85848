"""Probe (GPU host): what NVML shows of other processes on the GPU, for issue 28's contention mark.

Prints this process's pid, NVML's compute process list, and per-process utilisation samples
(nvmlDeviceGetProcessUtilization) while (a) nothing else runs and (b) a child process keeps the GPU
busy with a matmul loop. Usage: python3 scripts/probe_contention.py [--labkit]  (--labkit: what labkit.gpu.contention sees)
"""

import os
import subprocess
import sys
import time

import cupy
import pynvml

BUSY = r"""
import time, cupy
a = cupy.random.random((4096, 4096), dtype=cupy.float32)
t = time.time()
print('child pid', __import__('os').getpid(), flush=True)
while time.time() - t < 6:
    a @ a
cupy.cuda.Device().synchronize()
"""


def samples(h, since_us):
    try:
        return pynvml.nvmlDeviceGetProcessUtilization(h, since_us)
    except pynvml.NVMLError as exc:
        return f"error {exc}"


def show(h, label, since_us):
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    print(label, "compute processes:", [(p.pid, p.usedGpuMemory) for p in procs])
    s = samples(h, since_us)
    if isinstance(s, str):
        print(label, "process utilisation:", s)
    else:
        print(label, "process utilisation samples:", [(x.pid, x.smUtil, x.memUtil, x.timeStamp) for x in s])


def main():
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    print(
        "uuid", pynvml.nvmlDeviceGetUUID(h), "cupy uuid", cupy.cuda.runtime.getDeviceProperties(0).get("uuid")
    )
    print("my pid", os.getpid(), "pid ns", os.readlink("/proc/self/ns/pid"))
    x = cupy.ones((1 << 20,), dtype=cupy.float32)
    t0 = int(time.time() * 1e6)
    for _ in range(2000):
        x += 1
    cupy.cuda.Device().synchronize()
    time.sleep(0.5)
    show(h, "alone", t0)
    child = subprocess.Popen([sys.executable, "-c", BUSY])
    time.sleep(2)
    t1 = int(time.time() * 1e6)
    for _ in range(200):
        x += 1
    cupy.cuda.Device().synchronize()
    time.sleep(1.0)
    show(h, "busy child", t1)
    t2 = time.perf_counter()
    for _ in range(20):
        samples(h, t1)
    print("getProcessUtilization cost ms", (time.perf_counter() - t2) / 20 * 1e3)
    u = pynvml.nvmlDeviceGetUtilizationRates(h)
    print("device util", u.gpu, u.memory)
    child.wait()
    time.sleep(1.5)
    show(h, "after child", int(time.time() * 1e6) - 1_000_000)


if __name__ == "__main__" and "--labkit" not in sys.argv:
    main()


def labkit_view():
    """What labkit.gpu.contention sees of a detached busy process (as tests/test_classroom_gpu.py starts it)."""
    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
    from test_classroom_gpu import another_program

    from labkit.gpu import contention

    busy = another_program(5)
    print(
        "busy pid",
        busy,
        "ppid",
        contention._ppid(busy),
        "family of me?",
        contention._family(busy, {os.getpid()}),
    )
    for _ in range(8):
        time.sleep(0.5)
        now = int(time.time() * 1e6)
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        raw = samples(h, now - 3_000_000)
        raw = (
            raw
            if isinstance(raw, str)
            else [(x.pid, x.smUtil, x.memUtil, round((now - x.timeStamp) / 1e6, 2)) for x in raw]
        )
        print(
            "raw (pid, sm, mem, age s):",
            raw,
            "| others_since(now):",
            contention.others_since(now),
            "| active_since(now-1s):",
            contention.active_since(now - 1_000_000),
        )


if __name__ == "__main__" and "--labkit" in sys.argv:
    pynvml.nvmlInit()
    labkit_view()
