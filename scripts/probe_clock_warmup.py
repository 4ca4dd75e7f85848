"""Does a measurement on a GPU that has been idle read slower than one on a busy GPU? (issue 28:
in the classroom bench, the smallest request, ~16 us per call, read 4-6% faster with 8 learners
keeping the GPU busy than alone.) Measures lesson 03's precision request at N=16 (every dtype,
CUDA-graph replay, as the bench does) ``--rounds`` times in each of three conditions, in turn:

* ``idle``: after ``--idle`` seconds with nothing on the GPU;
* ``busy``: right after ``--busy-ms`` of device-to-device copies (the GPU's clocks up);
* ``back to back``: right after the previous measurement.

Prints each round's GPU time per dtype and the SM clock NVML read just before it, then the
median per condition and dtype.

    python3 scripts/probe_clock_warmup.py [--rounds 6] [--idle 2] [--busy-ms 50]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def busy(ms: float) -> None:
    """Copy 256 MiB back and forth on the device for at least ``ms`` milliseconds."""
    import cupy

    a = cupy.empty(256 * 2**20, dtype=cupy.uint8)
    b = cupy.empty_like(a)
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1000 < ms:
        for _ in range(4):
            b.data.copy_from_device_async(a.data, a.nbytes)
        cupy.cuda.Device().synchronize()
    del a, b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--busy-ms", type=float, default=50.0)
    args = ap.parse_args(argv)
    from labkit.gpu import conditions
    from labkit.session import lessons

    spec = lessons.base(N=16)
    lessons.data("precision", force=True, spec=spec)  # builds and compiles out of the way
    got = {}
    for r in range(args.rounds):
        for cond in ("idle", "busy", "back to back"):
            if cond == "idle":
                time.sleep(args.idle)
            elif cond == "busy":
                busy(args.busy_ms)
            before = (conditions.sample() or {}).get("sm_clock_mhz")
            df = lessons.data("precision", force=True, spec=spec)
            ok = df[df["status"] == "ok"]
            us = dict(zip(ok["dtype"], map(float, ok["gpu_us"])))
            for d, v in us.items():
                got.setdefault((cond, d), []).append(v)
            print(
                f"round {r} {cond:12s} SM {before} MHz before: "
                + ", ".join(f"{d} {v:.2f}" for d, v in us.items()),
                flush=True,
            )
    print("\nmedian GPU us per call (and spread (max-min)/median):")
    for (cond, d), v in sorted(got.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        m = statistics.median(v)
        print(f"  {d:9s} {cond:12s} {m:8.2f} us   spread {(max(v) - min(v)) / m:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
