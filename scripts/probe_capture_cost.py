"""How much does capturing a cuDNN plan into a CUDA graph cost, against running it (issue 25)?

    python scripts/probe_capture_cost.py [--plans eng1,eng0] [--limit 60]

For each spec below (depthwise convolutions of MobileNetV3 at batch 16, fp16 NHWC) and each plan
whose name starts with one of ``--plans`` (plus the heuristic's pick), in a child process with a
time limit: the wall time of one eager call and of three (host-synchronised), then the time to
capture k = 1, 2, 4, 8 back-to-back calls into a CUDA graph with the number of graph nodes each
capture made (cuGraphGetNodes), stopping once a capture takes longer than 10 s; and whether a
capture in thread-local mode (unsafe API calls are errors, not waits) succeeds. Prints one line
per measurement as it goes, so a child stopped at its limit still says how far it got.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

SPECS = {
    "g72_s1": dict(N=16, C=72, H=56, W=56, K=72, R=3, S=3, padding=1, groups=72),
    "g64_s2": dict(N=16, C=64, H=112, W=112, K=64, R=3, S=3, stride=2, padding=1, groups=64),
    "g240_s2": dict(N=16, C=240, H=28, W=28, K=240, R=3, S=3, stride=2, padding=1, groups=240),
}

CHILD = r"""
import ctypes, sys, time
import cupy
from labkit import ConvSpec
from labkit.gpu import engine, memory
kw = eval(sys.argv[1]); prefixes = sys.argv[2].split(",")
spec = ConvSpec(**kw, dtype="fp16", layout="NHWC")
drv = ctypes.CDLL("libcuda.so.1")  # a cudaGraph_t is a CUgraph
def nodes(g):
    n = ctypes.c_size_t(0)
    drv.cuGraphGetNodes(ctypes.c_void_p(g), None, ctypes.byref(n))
    return n.value
t = time.perf_counter(); cg = engine.ConvGraph(spec); print(f"built {spec.label}: {len(cg.runnable)} plans in {time.perf_counter()-t:.2f}s", flush=True)
ops = engine.Operands(spec)
picks = [cg.default_plan] + [p for p in cg.runnable if any(p.name == x or p.name.startswith(x + "_") for x in prefixes) and p.index != cg.default_plan.index]
for p in picks:
    s = cupy.cuda.Stream(non_blocking=True)
    ws = memory.alloc(p.workspace_bytes, "ws")
    b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, s)
    t = time.perf_counter(); b.run(); s.synchronize(); e1 = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(3): b.run()
    s.synchronize(); e3 = (time.perf_counter() - t) / 3
    print(f"  plan {p.index} {p.name}: eager first call {e1*1e3:.2f} ms, then {e3*1e3:.2f} ms per call", flush=True)
    for mode_name, mode in (("threadlocal", cupy.cuda.runtime.streamCaptureModeThreadLocal),):
        try:
            cupy.cuda.runtime.streamBeginCapture(s.ptr, mode)
            try:
                b.run()
            finally:
                g = cupy.cuda.runtime.streamEndCapture(s.ptr)
            print(f"    capture 1 call in {mode_name} mode: ok, {nodes(g)} nodes", flush=True)
            drv.cuGraphDestroy(ctypes.c_void_p(g))
        except Exception as exc:
            print(f"    capture 1 call in {mode_name} mode: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            try:
                cupy.cuda.runtime.streamEndCapture(s.ptr)
            except Exception:
                pass
            s = cupy.cuda.Stream(non_blocking=True); b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, s)
    for k in (1, 2, 4, 8):
        s.synchronize()
        t = time.perf_counter()
        cupy.cuda.runtime.streamBeginCapture(s.ptr, cupy.cuda.runtime.streamCaptureModeRelaxed)
        for _ in range(k):
            b.run()
        g = cupy.cuda.runtime.streamEndCapture(s.ptr)
        c = time.perf_counter() - t
        print(f"    capture {k} call(s) (relaxed): {c*1e3:.1f} ms, {nodes(g)} nodes", flush=True)
        drv.cuGraphDestroy(ctypes.c_void_p(g))
        if c > 10:
            break
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plans", default="eng1")
    p.add_argument("--limit", type=float, default=60)
    p.add_argument("--specs", default=",".join(SPECS))
    args = p.parse_args(argv)
    for name in args.specs.split(","):
        print(f"== {name}", flush=True)
        try:
            subprocess.run(
                [sys.executable, "-c", CHILD, repr(SPECS[name]), args.plans],
                timeout=args.limit,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        except subprocess.TimeoutExpired:
            print(f"   (stopped at the {args.limit:.0f} s limit)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
