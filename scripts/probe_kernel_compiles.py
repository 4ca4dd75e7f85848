"""How many of CuPy's kernels a first visit compiles, where, and what they cost (GPU host, live).

CuPy compiles each elementwise/reduction kernel with NVRTC at its first use in a process and
keeps it on disk (``CUPY_CACHE_DIR``). This probe points that cache at an empty folder (a machine
that never ran labkit; ``--keep-cache`` keeps the usual one), counts every compile with its wall
time, thread and the labkit line that asked for it, and builds the panels named after a lesson's
first cell and ``--read`` seconds, as bench_widgets does: per panel, when it was shown and whole,
and the compiles in the panel's own threads. At the end: compiles per thread and the warm-up's
step times.
Prints; writes nothing.

    LABKIT_MODE=live python3 scripts/probe_kernel_compiles.py [--read S] algorithms race fusion
"""

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--read", type=float, default=0.0, help="seconds between the first cell and the first panel"
    )
    ap.add_argument(
        "--keep-cache", action="store_true", help="use CuPy's usual kernel cache, not an empty one"
    )
    ap.add_argument("panels", nargs="*", default=["algorithms", "race"])
    args = ap.parse_args(argv)
    if not args.keep_cache:
        os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-kernels-")
    os.environ.setdefault("LABKIT_PREFETCH", "0")
    events = []  # (end time, seconds, thread name, labkit caller)
    lock = threading.Lock()

    import cupy.cuda.compiler as compiler

    real = compiler._compile_using_nvrtc_no_warning

    def counted(*a, **k):
        t0 = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            t1 = time.perf_counter()
            here = [
                f"{Path(f.filename).name}:{f.lineno} {f.name}"
                for f in traceback.extract_stack()
                if "/labkit/" in f.filename
            ]
            with lock:
                events.append((t1, t1 - t0, threading.current_thread().name, " < ".join(reversed(here[-3:]))))

    compiler._compile_using_nvrtc_no_warning = counted
    t0 = time.perf_counter()
    from labkit import lessons, widgets  # the lesson's first cell
    from labkit.session import warmup

    lessons.banner()
    print(
        f"== first cell: {(time.perf_counter() - t0) * 1000:.0f} ms; CUPY_CACHE_DIR={os.environ.get('CUPY_CACHE_DIR')}",
        flush=True,
    )
    time.sleep(args.read)
    for name in args.panels:
        start = time.perf_counter()
        p = widgets.panel(name)
        shown = (time.perf_counter() - start) * 1000
        p.wait()
        end = time.perf_counter()
        with lock:
            mine = [e for e in events if start <= e[0] <= end]
        own = [e for e in mine if not e[2].startswith("labkit-warm-up")]
        print(
            f"== {name}: shown at {shown:.0f} ms, whole at {(end - start) * 1000:.0f} ms; compiles meanwhile: "
            f"{len(mine)} ({sum(e[1] for e in mine):.2f} s), {len(own)} in the panel's threads "
            f"({sum(e[1] for e in own):.2f} s)",
            flush=True,
        )
        for caller, n in collections.Counter(e[3] for e in own).most_common(12):
            print(f"   {n:3d}  {caller}")
    warmup.wait(120)
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e[2]].append(e[1])
    print(
        "compiles per thread: "
        + ", ".join(f"{k} {len(v)} ({sum(v):.2f} s)" for k, v in sorted(by_thread.items()))
    )
    print(f"warm-up: {warmup.seconds}")


if __name__ == "__main__":
    main()
