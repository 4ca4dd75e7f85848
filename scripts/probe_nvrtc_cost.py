"""What one CuPy kernel compile costs on this machine (empty kernel cache): a plain ufunc first
(NVRTC's first use in the process), then labkit's fused quantize kernels, then reductions
(any/all/count_nonzero, which CuPy compiles with CUB, against sums and maxima). Prints; writes nothing.

    python3 scripts/probe_nvrtc_cost.py
"""

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-kernels-")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(label, fn):
    t0 = time.perf_counter()
    fn()
    import cupy

    cupy.cuda.get_current_stream().synchronize()
    print(
        f"{(time.perf_counter() - t0) * 1000:8.0f} ms  {label}   cupyx loaded: {'cupyx' in sys.modules}",
        flush=True,
    )


def main():
    import cupy

    from labkit.gpu import numerics

    x = cupy.linspace(-1, 1, 1000)
    timed("x + 1 (first NVRTC use)", lambda: x + 1)
    timed("x * 2", lambda: x * 2)
    timed("cupy.frexp(x)", lambda: cupy.frexp(x))
    timed("cupy.ldexp(x, 3)", lambda: cupy.ldexp(x, cupy.int32(3)))
    for d in ("fp16", "fp32", "bf16", "fp8_e4m3"):
        timed(f"quantize {d} (fused kernel)", lambda d=d: numerics.quantize(x, d))
    timed("decode bf16", lambda: numerics.decode(numerics.quantize(x, "bf16")[0], "bf16"))
    timed("x.any()", lambda: bool(x.any()))
    timed("cupy.isfinite(x).all()", lambda: bool(cupy.isfinite(x).all()))
    timed("cupy.max(cupy.abs(x))", lambda: float(cupy.max(cupy.abs(x))))
    timed("cupy.sum(x ** 2)", lambda: float(cupy.sum(x**2)))
    timed("cupy.sqrt(s)", lambda: float(cupy.sqrt(cupy.sum(x))))
    timed("x.astype(float32)", lambda: x.astype(cupy.float32))
    b = x > 0
    timed("cupy.count_nonzero(b)", lambda: int(cupy.count_nonzero(b)))
    timed("b.sum()", lambda: int(b.sum()))
    m = x.reshape(10, 100) > 0
    timed("m.any(axis=1)", lambda: m.any(axis=1))
    timed("m.sum(axis=1)", lambda: m.sum(axis=1))
    u = cupy.zeros(5000, dtype=cupy.uint8)
    timed("(u != 165).sum()", lambda: int((u != 165).sum()))
    print(f"cupyx in sys.modules at the end: {'cupyx' in sys.modules}")


if __name__ == "__main__":
    main()
