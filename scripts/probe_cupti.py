"""What CUPTI (NVIDIA's ``cupti-python``) shows of a cuDNN call, before labkit.gpu.trace relied on
it (issue 26). Prints; writes nothing but ``--out``'s small CSV of records.

    python scripts/probe_cupti.py [--out DIR]

Parts, each in its own try (a failure prints and the next part runs):
1. which activity kinds enable; the driver, CUPTI and NVML versions;
2. every plan of the base convolution run 3 times eagerly under tracing: kernels, memsets,
   memcpys, runtime/driver API calls per plan;
3. one CUDA-graph replay of 4 calls: do kernels inside a graph come as records (graph_id)?
4. a second trace in the same process (enable, disable, enable again);
5. cudaMalloc/cudaFree per call (CuPy's unpooled allocator) under tracing: the API records;
6. NVML: SM and memory clocks, power, temperature, throttle reasons;
7. torch.profiler running while our CUPTI session is on (a second tracer).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECORDS = []


SKIP = set()


def part(name):
    def wrap(fn):
        if name.split(".")[0] in SKIP:
            return fn
        print(f"\n== {name}", flush=True)
        t = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        print(f"   ({time.perf_counter() - t:.2f} s)", flush=True)
        return fn

    return wrap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip", default="", help="comma-separated part numbers to skip")
    args = ap.parse_args()
    import faulthandler

    faulthandler.enable()
    SKIP.update(args.skip.split(","))
    import cupy
    from cupti import cupti

    from labkit import experiments
    from labkit.gpu import engine, measure, memory

    K = cupti.ActivityKind
    got = []

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for a in activities:
            got.append(a)

    kinds = [
        "CONCURRENT_KERNEL",
        "MEMCPY",
        "MEMSET",
        "RUNTIME",
        "DRIVER",
        "SYNCHRONIZATION",
        "MEMORY2",
        "MEMORY_POOL",
        "GRAPH_TRACE",
        "OVERHEAD",
        "NAME",
        "MARKER",
    ]
    enabled = []

    def start():
        got.clear()
        for k in enabled:
            cupti.activity_enable(getattr(K, k))

    def stop():
        cupti.activity_flush_all(1)
        for k in enabled:
            cupti.activity_disable(getattr(K, k))
        return list(got)

    def describe(a):
        kind = K(a.kind).name
        if kind in ("RUNTIME", "DRIVER"):
            dom = cupti.CallbackDomain.RUNTIME_API if kind == "RUNTIME" else cupti.CallbackDomain.DRIVER_API
            name = cupti.get_callback_name(dom, a.cbid)
        else:
            name = getattr(a, "name", "") or ""
        return kind, name

    def summary(recs, label):
        c = collections.Counter()
        for a in recs:
            c[describe(a)] += 1
        print(f"  {label}: {len(recs)} records")
        for (kind, name), n in c.most_common(25):
            print(f"    {n:4d} {kind:18s} {str(name)[:110]}")

    @part("1. versions and kinds")
    def _():
        print("  cupti version", cupti.get_version() if hasattr(cupti, "get_version") else "?")
        print(
            "  driver", cupy.cuda.runtime.driverGetVersion(), "runtime", cupy.cuda.runtime.runtimeGetVersion()
        )
        cupti.activity_register_callbacks(requested, completed)
        for k in kinds:
            try:
                cupti.activity_enable(getattr(K, k))
                cupti.activity_disable(getattr(K, k))
                enabled.append(k)
            except Exception as exc:  # noqa: BLE001
                print(f"  {k}: {exc}")
        print("  enabled:", enabled)

    spec = experiments.BASE
    cg = engine.get_graph(spec)
    ops = engine.Operands(spec)
    stream = measure.timing_stream()

    @part("2. every plan of the base conv, 3 eager calls each")
    def _():
        for p in cg.runnable:
            ws = memory.alloc(p.workspace_bytes, "ws")
            b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
            b.run()
            stream.synchronize()  # warm, untraced
            start()
            t0 = cupti.get_timestamp()
            for _ in range(3):
                b.run()
            stream.synchronize()
            recs = stop()
            ks = [a for a in recs if K(a.kind).name in ("CONCURRENT_KERNEL", "MEMSET", "MEMCPY")]
            names = collections.Counter(describe(a)[1][:60] or K(a.kind).name for a in ks)
            api = collections.Counter(describe(a)[1] for a in recs if K(a.kind).name in ("RUNTIME", "DRIVER"))
            print(
                f"  plan {p.index} {p.name}: {len(ks) / 3:.1f} device ops/call; {dict(names)}; api {dict(api)}"
            )
            for a in recs:
                kind, name = describe(a)
                RECORDS.append(
                    dict(
                        plan=p.name,
                        kind=kind,
                        name=name,
                        start=getattr(a, "start", getattr(a, "timestamp", 0)) - t0,
                        end=getattr(a, "end", 0) - t0 if hasattr(a, "end") else None,
                        stream=getattr(a, "stream_id", None),
                        corr=getattr(a, "correlation_id", None),
                        grid=(
                            getattr(a, "grid_x", None),
                            getattr(a, "grid_y", None),
                            getattr(a, "grid_z", None),
                        ),
                        block=(getattr(a, "block_x", None),),
                    )
                )
            del b, ws

    @part("3. CUDA graph replay of 4 calls")
    def _():
        p = cg.default_plan
        ws = memory.alloc(p.workspace_bytes, "ws")
        b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
        g = measure.capture(b.run, stream, 4)
        g.launch(stream)
        stream.synchronize()
        start()
        g.launch(stream)
        stream.synchronize()
        recs = stop()
        summary(recs, "replay")
        for a in recs:
            if K(a.kind).name == "CONCURRENT_KERNEL":
                print(
                    "   kernel graph_id",
                    a.graph_id,
                    "node",
                    a.graph_node_id,
                    "stream",
                    a.stream_id,
                    "dur",
                    a.end - a.start,
                )
                break

    @part("4. a second trace in the same process")
    def _():
        p = cg.default_plan
        ws = memory.alloc(p.workspace_bytes, "ws")
        b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
        for i in range(2):
            start()
            b.run()
            stream.synchronize()
            summary(stop(), f"trace {i}")

    @part("5. cudaMalloc/cudaFree per call (no pool)")
    def _():
        p = max(cg.runnable, key=lambda q: q.workspace_bytes)
        print("  plan", p.name, "workspace", p.workspace_bytes)
        cupy.cuda.set_allocator(None)
        try:
            start()
            for _ in range(4):
                mem = cupy.cuda.Memory(max(p.workspace_bytes, 1))
                cg.execute(ops.arrays, int(mem.ptr), p.index, stream)
                stream.synchronize()
                del mem
            recs = stop()
        finally:
            cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
        summary(recs, "malloc per call")
        t0 = min(getattr(a, "start", 1 << 62) for a in recs)
        for a in sorted(recs, key=lambda r: getattr(r, "start", getattr(r, "timestamp", 0)))[:40]:
            kind, name = describe(a)
            s = getattr(a, "start", getattr(a, "timestamp", 0)) - t0
            e = (getattr(a, "end", 0) - t0) if hasattr(a, "end") else None
            print(
                f"   {kind:18s} {str(name)[:50]:50s} {s / 1e3:9.1f} us -> {'' if e is None else f'{e / 1e3:9.1f}'}"
                f" stream {getattr(a, 'stream_id', '-')}"
            )

    @part("6. NVML")
    def _():
        import pynvml as n

        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        print("  name", n.nvmlDeviceGetName(h), "uuid", n.nvmlDeviceGetUUID(h))
        print(
            "  sm clock",
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            "max",
            n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM),
            "mem clock",
            n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            "max",
            n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM),
        )
        print(
            "  power mW",
            n.nvmlDeviceGetPowerUsage(h),
            "limit",
            n.nvmlDeviceGetEnforcedPowerLimit(h),
            "temp",
            n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
        )
        print("  throttle reasons", hex(n.nvmlDeviceGetCurrentClocksEventReasons(h)))
        print("  processes", [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses(h)])
        print("  utilization", n.nvmlDeviceGetUtilizationRates(h).gpu)

    @part("7. torch.profiler while CUPTI is on")
    def _():
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.init()
        p = cg.default_plan
        ws = memory.alloc(p.workspace_bytes, "ws")
        b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
        start()
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                b.run()
                stream.synchronize()
            print(
                "  torch saw",
                len([e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]),
                "CUDA events",
            )
        finally:
            summary(stop(), "ours, with torch's")
        start()
        b.run()
        stream.synchronize()
        summary(stop(), "ours, after torch's")

    if args.out and RECORDS:
        import pandas as pd

        Path(args.out).mkdir(parents=True, exist_ok=True)
        pd.DataFrame(RECORDS).to_csv(Path(args.out) / "cupti_records.csv", index=False)


if __name__ == "__main__":
    main()
