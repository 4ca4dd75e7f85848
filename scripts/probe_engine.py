"""Smoke probe of labkit.gpu.engine on a GPU: build, list plans, run, time. Prints a table.

Usage (device): source .whl/setup.sh && python3 scripts/probe_engine.py
"""

import sys
import time
import traceback

import cupy

from labkit import ConvSpec
from labkit.gpu import engine, measure

cases = [
    ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp16", layout="NHWC"),
    ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW"),
    ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp32", layout="NCHW"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="tf32", layout="NHWC"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="bf16", layout="NHWC"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp8_e4m3", layout="NHWC"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NHWC", direction="dgrad"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NHWC", direction="wgrad"),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NHWC", groups=64),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NCHW", dilation=2, padding=2),
    ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp8_e4m3", layout="NHWC", direction="dgrad"),
]
stream = cupy.cuda.Stream(non_blocking=True)
for spec in cases:
    for epi in (
        ["none", "bias_relu_add"]
        if spec.direction == "fprop" and spec.dtype == "fp16" and spec.layout == "NHWC" and spec.groups == 1
        else ["none"]
    ):
        try:
            t0 = time.perf_counter()
            g = engine.get_graph(spec, epi)
            t1 = time.perf_counter()
            engine.get_graph(spec, epi)
            t2 = time.perf_counter()
            p = g.default_plan
            arrays = {}
            for role, shape in engine.role_shapes(spec, epi).items():
                dt = engine.role_dtype(spec, role)
                np_dt = {
                    "fp32": "float32",
                    "tf32": "float32",
                    "fp16": "float16",
                    "bf16": "uint16",
                    "fp8_e4m3": "uint8",
                }[dt]
                arrays[role] = cupy.zeros(engine.storage_shape(shape, spec.layout), dtype=np_dt)
                if np_dt.startswith("float"):
                    arrays[role][...] = cupy.random.uniform(-1, 1, arrays[role].shape).astype(np_dt)
            ws = cupy.empty(max(1, p.workspace_bytes), dtype=cupy.uint8)
            b = g.bind(arrays, ws.data.ptr, p.index, stream)
            b.run()
            stream.synchronize()
            gr = measure.graph_replay(b.run, stream)
            hd = measure.host_dispatch(b.run, stream)
            bb = measure.back_to_back(b.run, stream)
            print(
                f"OK  {spec.label:60s} {epi:14s} plans={len(g.plans)} built={len(g.runnable)} ws={p.workspace_bytes} "
                f"build={t1 - t0:.3f}s hit={1e6 * (t2 - t1):.0f}us replay={gr.median_us:.1f}us b2b={bb.median_us:.1f}us host={hd.median_us:.1f}us "
                f"fast={b._fast is not None} name={p.name}",
                flush=True,
            )
        except Exception as exc:
            print(f"ERR {spec.label:60s} {epi:14s} {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
print(g.plan_table().head(12).to_string())
