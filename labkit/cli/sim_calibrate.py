"""``bench sim-fidelity --calibrate``: the device seam's own calls timed on this GPU, for the simulator.

The lesson recordings hold what the lessons show; a simulated GPU needs a few numbers more (an
event's host time, cudaMalloc at every size a sequence asks, each convolution's launch). `write`
times each through `labkit.gpu.device.cuda.CudaDevice`, on an idle GPU, and writes
data/bench/sim_costs_<gpu slug>.csv (call, spec_label, plan_index, nbytes, host_us, gpu_us,
samples), which `labkit.simgpu.recorded.Recorded` reads before the recording. Host microseconds,
medians; bytes.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Callable, List

import pandas as pd

from ..errors import LabkitError
from ..gpu import lock, workloads, workspace
from ..gpu.device.cuda import CudaDevice
from ..gpu.runner import Runner
from ..simgpu import sequences
from ..simgpu.recorded import ASYNC_CHUNK, Recorded
from ..spec import ConvSpec
from . import bench

#: samples per timed call
SAMPLES = 25


def _timed(fn: Callable[[], object], before: Callable[[], object] = lambda: None, n: int = SAMPLES) -> float:
    """The median host time of ``fn()`` over ``n`` calls, ``before()`` run untimed ahead of each."""
    out = []
    for _ in range(n):
        before()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return median(out)


def _row(
    call: str,
    host_us: float,
    *,
    nbytes: int = 0,
    spec_label: str = "",
    plan_index=None,
    gpu_us=float("nan"),
    samples: int = SAMPLES,
) -> dict:
    return dict(
        call=call,
        spec_label=spec_label,
        plan_index=plan_index,
        nbytes=nbytes,
        host_us=host_us,
        gpu_us=gpu_us,
        samples=samples,
    )


def events_and_syncs(dev) -> List[dict]:
    """cudaEventRecord, cudaEventQuery, cudaEventSynchronize, cudaStreamWaitEvent,
    cudaStreamSynchronize and cudaDeviceSynchronize, each on idle streams (its own time)."""
    s1, s2 = dev.stream(), dev.stream()
    ev = dev.record_event(s1)
    ev.wait()
    return [
        _row("cudaEventRecord", _timed(lambda: dev.record_event(s1))),
        _row("cudaEventQuery", _timed(ev.done)),
        _row("cudaEventSynchronize", _timed(ev.wait)),
        _row("cudaStreamWaitEvent", _timed(lambda: dev.wait_event(s2, ev))),
        _row("cudaStreamSynchronize", _timed(s1.synchronize)),
        _row("cudaDeviceSynchronize", _timed(dev.synchronize)),
    ]


def allocations(dev, sizes: List[int]) -> List[dict]:
    """cudaMalloc and cudaFree (on an idle device) at each size; a cudaMalloc behind a busy stream."""
    from ..gpu.strategy_check import _hold  # heavy: imports CuPy

    rows = []
    for n in (n for n in sizes if n < dev.free_bytes() // 2):
        got = {"cudaMalloc": [], "cudaFree": []}
        for _ in range(5):
            dev.synchronize()
            t0 = time.perf_counter()
            p = dev.allocate(n)
            t1 = time.perf_counter()
            dev.free(p)
            got["cudaMalloc"].append((t1 - t0) * 1e6)
            got["cudaFree"].append((time.perf_counter() - t1) * 1e6)
        rows += [_row(c, median(v), nbytes=n, samples=5) for c, v in got.items()]
    s = dev.stream()
    _hold(s, 2000.0)  # does cudaMalloc wait for a busy stream? (the simulator assumes not: rule 6)
    t0 = time.perf_counter()
    p = dev.allocate(1 << 24)
    rows.append(
        _row("cudaMalloc_behind_busy_stream", (time.perf_counter() - t0) * 1e6, nbytes=1 << 24, samples=1)
    )
    dev.synchronize()
    dev.free(p)
    return rows


def pools(dev, sizes: List[int]) -> List[dict]:
    """The pools: a warm request and its free (per pool), the async pool's growth by each chunk
    size, and its release."""
    s = dev.stream()
    rows = []
    for kind in ("caching", "async"):
        pool = dev.pool(kind)
        pairs = []
        for n in (1 << 20, 1 << 24):
            pool.free(pool.allocate(n, stream=s), stream=s)
            pairs.append(_timed(lambda: pool.free(pool.allocate(n, stream=s), stream=s)))
        rows.append(_row(f"{kind}_pool", median(pairs)))
        if kind == "async":
            for chunk in sorted({-(-n // (32 << 20)) * (32 << 20) for n in sizes if n <= 1 << 30}):
                grow = []
                for _ in range(3):
                    s.synchronize()
                    with s:
                        pool.release()
                    t0 = time.perf_counter()
                    p = pool.allocate(chunk - 512, stream=s)
                    grow.append((time.perf_counter() - t0) * 1e6)
                    pool.free(p, stream=s)
                rows.append(_row("async_pool_grow", median(grow), nbytes=chunk, samples=3))
            rows.append(
                _row(
                    "async_pool_release",
                    _timed(pool.release, lambda: pool.free(pool.allocate(1 << 20, stream=s), stream=s)),
                )
            )
        pool.release()
    return rows


def launches(dev, recorded: Recorded) -> List[dict]:
    """Each sequence convolution's default plan: the host time of one `Runner.run` (a warm
    preallocated workspace) and the GPU time of one call between two events."""
    specs = [workloads.RACE_SPEC]
    for w in sequences.WORKLOADS:
        specs += [s for s in dict.fromkeys(workloads.sequence(w, 1)) if s not in specs]
    rows = []
    with Runner(workspace.Preallocated(device=dev)) as r:
        for spec in specs:
            r.run(spec)
            r.stream.synchronize()
            host = _timed(lambda: r.run(spec), r.stream.synchronize)
            gpu = []
            for _ in range(10):
                r.stream.synchronize()
                a = dev.record_event(r.stream)
                r.run(spec)
                b = dev.record_event(r.stream)
                b.wait()
                gpu.append(dev.elapsed_us(a, b))
            plan = r.choose(dev.graph(spec))
            rows.append(
                _row("runner_launch", host, spec_label=spec.label, plan_index=plan, gpu_us=median(gpu))
            )
    return rows


def write(recording: str) -> Path:
    """Time every call the simulator needs on this GPU and write data/bench/sim_costs_<gpu slug>.csv.

    Args:
        recording: the shipped recording of this GPU (its plans name the sizes to time).

    Returns:
        The CSV's path.
    """
    recorded = Recorded(recording)
    dev = CudaDevice()
    sizes = sizes_to_calibrate(recorded)
    t0 = time.perf_counter()
    with lock.hold():
        rows = events_and_syncs(dev) + allocations(dev, sizes) + pools(dev, sizes) + launches(dev, recorded)
    return bench._write(
        pd.DataFrame(rows),
        bench.default_name("sim_costs"),
        {"wall_seconds": round(time.perf_counter() - t0, 1)},
    )


def sizes_to_calibrate(recorded: Recorded) -> List[int]:
    """Every allocation size the fidelity's sequences ask of the simulator (each convolution's
    default plan's workspace, the async pool's chunk for it, the fixed arena), then a grid of
    powers of two from 512 B to 1 GiB."""
    specs: List[ConvSpec] = [workloads.RACE_SPEC]
    for w in sequences.WORKLOADS:
        specs += list(dict.fromkeys(workloads.sequence(w, 1)))
    out = {1 << 30, *(1 << k for k in range(9, 31))}
    for spec in specs:
        try:
            plans, default = recorded.plans(spec)
        except LabkitError:
            continue
        need = next(p.workspace_bytes for p in plans if p.index == default)
        if need:
            out |= {need, -(-need // ASYNC_CHUNK) * ASYNC_CHUNK}
    return sorted(out)


def median(values) -> float:
    """The median of a non-empty list (nan for none)."""
    values = list(values)
    return float(statistics.median(values)) if values else math.nan
