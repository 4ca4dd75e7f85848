"""What a learner's build workers (`labkit.gpu.build_pool`) hold on the GPU: a lesson's first cell
(``lessons.banner()`` starts them, live), a wait until each has loaded CUDA and cuDNN, then NVML's
per-process GPU memory of this process and of each worker, and how many workers there are. A
class multiplies it by the learners on one GPU. Prints; writes nothing.

    LABKIT_MODE=live python3 scripts/probe_worker_memory.py [--wait S]
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


#: a worker holding this much has its CUDA context and cuDNN loaded (one only starting holds ~14 MiB)
LOADED_BYTES = 256 * 2**20


def gpu_memory_by_pid() -> dict:
    """pid -> bytes of GPU memory NVML sees it use (compute processes of GPU 0)."""
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    return {p.pid: int(p.usedGpuMemory or 0) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--wait", type=float, default=20.0, help="seconds at most for the workers to load CUDA and cuDNN"
    )
    args = ap.parse_args(argv)
    from labkit.gpu import build_pool
    from labkit.session import lessons

    t0 = time.perf_counter()
    print(lessons.banner(), flush=True)
    pool = build_pool.pool()
    size = pool.size if pool is not None else 0
    started = bool(pool is not None and pool._threads)
    print(
        f"workers by default: {build_pool.default_workers()} (LABKIT_BUILD_WORKERS={os.environ.get('LABKIT_BUILD_WORKERS')!r}, "
        f"LABKIT_SHARED_CACHE={'set' if os.environ.get('LABKIT_SHARED_CACHE') else 'unset'}); "
        f"started by the first cell: {started}",
        flush=True,
    )
    if not started:
        print("no worker process started by the first cell: nothing more to measure here")
        return 0
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        used = gpu_memory_by_pid()
        if len([p for p in pool.pids() if used.get(p, 0) >= LOADED_BYTES]) == size:
            break
        time.sleep(0.2)
    used = gpu_memory_by_pid()
    mine = used.get(os.getpid(), 0)
    workers = [used.get(p, 0) for p in pool.pids()]
    print(
        f"after {time.perf_counter() - t0:.1f} s: this process {mine / 2**20:.0f} MiB; {len(workers)} workers "
        f"{', '.join(f'{w / 2**20:.0f}' for w in workers)} MiB; workers together {sum(workers) / 2**30:.2f} GiB",
        flush=True,
    )
    pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
