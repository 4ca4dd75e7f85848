"""``bench sim-fidelity --calibrate``: what the simulated GPU reads besides the recording, timed on
this GPU, through the device seam.

The lesson recordings hold what the lessons show; a simulated GPU needs a few numbers more, measured
on the same GPU, the same way its sequences run (`labkit.simgpu.calibration.CALIBRATED` says what each
row holds): an event's host time, cudaMalloc and cudaFree at every size a sequence asks (and whether
cudaMalloc waits for a busy stream), the pools, and for each sequence convolution its launch from
Python (back to back, a warm workspace), its bind, its GPU time per call on 1, 2, 3 and 4 streams at
once (each stream replaying its own CUDA graph of the call) and the host time of a graph launch of
1 and of `GRAPH_CALLS` calls. `write` times them through `labkit.gpu.device.cuda.CudaDevice` on an
idle GPU and writes data/bench/sim_costs_<gpu slug>.csv (call, spec_label, plan_index, nbytes,
streams, graph_calls, host_us, gpu_us, samples), which `labkit.simgpu.recorded.Recorded` reads
before the recording. Host and GPU microseconds (medians); bytes.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Callable, List

import pandas as pd

from ..errors import LabkitError
from ..gpu.device.cuda import CudaDevice
from ..gpu.host import lock
from ..gpu.workspaces import workloads, workspace
from ..gpu.workspaces.runner import Runner
from ..simgpu import sequences
from ..simgpu.recorded import ASYNC_CHUNK, Recorded
from ..spec import ConvSpec
from . import bench

#: samples per timed host call
SAMPLES = 25
#: calls in each stream's CUDA graph when timing a call on several streams at once
GRAPH_CALLS = 20
#: timed rounds of those graphs (the median is kept)
ROUNDS = 5
#: how long a stream is held busy before a cudaMalloc that may wait for it (microseconds)
HOLD_US = 2000.0


def _timed(
    dev, fn: Callable[[], object], before: Callable[[], object] = lambda: None, n: int = SAMPLES
) -> float:
    """The median host time of ``fn()`` over ``n`` calls on ``dev``'s clock, ``before()`` run untimed
    ahead of each."""
    out = []
    for _ in range(n):
        before()
        t0 = dev.clock_us()
        fn()
        out.append(dev.clock_us() - t0)
    return median(out)


def _row(call: str, host_us: float = math.nan, **kw) -> dict:
    row = dict(
        call=call,
        spec_label="",
        plan_index=None,
        nbytes=0,
        streams=None,
        graph_calls=None,
        host_us=host_us,
        gpu_us=math.nan,
        samples=SAMPLES,
    )
    row.update(kw)
    return row


def events_and_syncs(dev) -> List[dict]:
    """The event and synchronisation calls, each on idle streams (its own time).

    They are cudaEventRecord, cudaEventQuery, cudaEventSynchronize, cudaStreamWaitEvent,
    cudaStreamSynchronize and cudaDeviceSynchronize.

    Args:
        dev: the device.

    Returns:
        One row per call, its median host time in ``host_us``.
    """
    s1, s2 = dev.stream(), dev.stream()
    ev = dev.record_event(s1)
    ev.wait()
    return [
        _row("cudaEventRecord", _timed(dev, lambda: dev.record_event(s1))),
        _row("cudaEventQuery", _timed(dev, ev.done)),
        _row("cudaEventSynchronize", _timed(dev, ev.wait)),
        _row("cudaStreamWaitEvent", _timed(dev, lambda: dev.wait_event(s2, ev))),
        _row("cudaStreamSynchronize", _timed(dev, s1.synchronize)),
        _row("cudaDeviceSynchronize", _timed(dev, dev.synchronize)),
    ]


def allocations(dev, sizes: List[int], hold=None) -> List[dict]:
    """cudaMalloc and cudaFree on an idle device at each size; a cudaMalloc behind a stream held
    busy for `HOLD_US` at three sizes (does it wait? rule 6 of `labkit.simgpu.device`).

    Args:
        dev: the device.
        sizes: the sizes, bytes.
        hold: ``hold(stream, us)`` keeps a stream busy; default a spinning kernel
            (`labkit.gpu.workspaces.strategy_check`).

    Returns:
        The rows.
    """
    if hold is None:
        from ..gpu.workspaces.strategy_check import _hold as hold  # heavy: imports CuPy

    rows = []
    for n in (n for n in sizes if n < dev.free_bytes() // 2):
        got = {"cudaMalloc": [], "cudaFree": []}
        samples = 5 if n >= 256 << 20 else 15
        for _ in range(samples):
            dev.synchronize()
            t0 = dev.clock_us()
            p = dev.allocate(n)
            t1 = dev.clock_us()
            dev.free(p)
            got["cudaMalloc"].append(t1 - t0)
            got["cudaFree"].append(dev.clock_us() - t1)
        rows += [_row(c, median(v), nbytes=n, samples=samples) for c, v in got.items()]
    s = dev.stream()
    hold(s, 10.0)  # the hold kernel loaded before anything is timed
    dev.synchronize()
    for n in (131, 1 << 24, 1 << 28):
        took = []
        for _ in range(3):
            hold(s, HOLD_US)
            t0 = dev.clock_us()
            p = dev.allocate(n)
            took.append(dev.clock_us() - t0)
            dev.synchronize()
            dev.free(p)
        rows.append(_row("cudaMalloc_behind_busy_stream", median(took), nbytes=n, gpu_us=HOLD_US, samples=3))
    return rows


def pools(dev, sizes: List[int]) -> List[dict]:
    """The pools' calls, timed.

    A warm request and its free (per pool), the async pool's growth by each chunk size, and its
    release; every block is freed and the device idle before each release.

    Args:
        dev: the device.
        sizes: the allocation sizes, bytes (the async pool's chunks are made from them).

    Returns:
        The rows.
    """
    s = dev.stream()
    rows = []
    for kind in ("caching", "async"):
        pool = dev.pool(kind)
        pairs = []
        for n in (1 << 20, 1 << 24):
            pool.free(pool.allocate(n, stream=s), stream=s)
            pairs.append(_timed(dev, lambda: pool.free(pool.allocate(n, stream=s), stream=s)))
        rows.append(_row(f"{kind}_pool", median(pairs)))
        if kind == "async":
            for chunk in sorted({-(-n // ASYNC_CHUNK) * ASYNC_CHUNK for n in sizes if n <= 1 << 30}):
                grow = []
                for _ in range(3):
                    dev.synchronize()
                    with s:
                        pool.release()
                    t0 = dev.clock_us()
                    p = pool.allocate(chunk - 512, stream=s)
                    grow.append(dev.clock_us() - t0)
                    pool.free(p, stream=s)
                rows.append(_row("async_pool_grow", median(grow), nbytes=chunk, samples=3))

            def use():
                pool.free(pool.allocate(1 << 20, stream=s), stream=s)
                dev.synchronize()

            rows.append(_row("async_pool_release", _timed(dev, pool.release, use)))
        dev.synchronize()
        with s:
            pool.release()
    return rows


def _specs() -> List[ConvSpec]:
    specs = [workloads.RACE_SPEC]
    for w in sequences.FIDELITY_WORKLOADS:
        specs += [s for s in dict.fromkeys(workloads.sequence(w, 1)) if s not in specs]
    return specs


def _plan(cg) -> int:
    """The plan a sequence runs: the default, or for lesson 06's race its first plan that uses a
    workspace (`labkit.gpu.workspaces.concurrency.scratchpad_race`)."""
    if cg.spec == workloads.RACE_SPEC:
        return next(p.index for p in cg.runnable if p.workspace_bytes > 0)
    return cg.default_plan.index


def launches(dev, specs=None) -> List[dict]:
    """Each sequence convolution's default plan: the host time of one `Runner.run` among back-to-back
    calls (a warm preallocated workspace, one stream) and of binding it to a new address.

    Args:
        dev: the device.
        specs: the convolutions; default every sequence's.

    Returns:
        The rows.
    """
    rows = []
    with Runner(workspace.Preallocated(device=dev)) as r:
        for spec in specs or _specs():
            cg = dev.graph(spec)
            plan = _plan(cg)
            for _ in range(3):
                r.run(spec, plan)
            r.stream.synchronize()
            per_call = []
            for _ in range(SAMPLES):
                t0 = dev.clock_us()
                r.run(spec, plan)
                per_call.append(dev.clock_us() - t0)
            r.stream.synchronize()
            ptr = dev.allocate(cg.plans[plan].workspace_bytes, what="calibration workspace")
            arrays = r.operands(spec).arrays
            bind = _timed(dev, lambda: cg.bind(arrays, ptr, plan, r.stream))
            dev.free(ptr)
            rows += [
                _row("python_launch", median(per_call), spec_label=spec.label, plan_index=plan),
                _row("bind", bind, spec_label=spec.label, plan_index=plan),
            ]
    return rows


def concurrency(dev, specs=None) -> List[dict]:
    """Each sequence convolution's default plan on k = 1..4 streams at once: each stream its own
    workspace, inputs and CUDA graph of `GRAPH_CALLS` calls, launched three times in a row: the time
    a stream takes for its middle launch (between two events queued around it; the k streams busy
    throughout, with no launch time in it; the median stream) over the k streams' calls in it
    (median of `ROUNDS`); and the host time of launching a graph of 1 and of `GRAPH_CALLS` calls.

    Args:
        dev: the device.
        specs: the convolutions; default every sequence's.

    Returns:
        The rows.
    """
    rows = []
    streams = [dev.stream() for _ in range(4)]
    for s in streams:
        dev.prepare_stream(s)
    for spec in specs or _specs():
        cg = dev.graph(spec)
        plan = _plan(cg)
        need = cg.plans[plan].workspace_bytes
        ops = [dev.operands(spec, seed=i) for i in range(4)]
        ptrs = [dev.allocate(need, what="calibration workspace") for _ in range(4)]
        try:
            bound = [cg.bind(o.arrays, p, plan, s) for o, p, s in zip(ops, ptrs, streams)]
            for b in bound:
                b.run()
            dev.synchronize()
            graphs = [
                dev.capture(lambda b=b: [b.run() for _ in range(GRAPH_CALLS)], s)
                for b, s in zip(bound, streams)
            ]
            one = dev.capture(bound[0].run, streams[0])
            for g, s in zip(graphs, streams):
                g.launch(s)
            one.launch(streams[0])
            dev.synchronize()
            for k in (1, 2, 3, 4):
                per_call = []
                for _ in range(ROUNDS):
                    dev.synchronize()
                    marks = [[] for _ in range(k)]
                    for _ in range(3):  # a graph before and after the timed one: k streams busy throughout
                        for g, s, m in zip(graphs[:k], streams[:k], marks):
                            m.append(dev.record_event(s))
                            g.launch(s)
                    dev.synchronize()
                    took = statistics.median(dev.elapsed_us(m[1], m[2]) for m in marks)
                    per_call.append(took / (k * GRAPH_CALLS))
                rows.append(
                    _row(
                        "call_gpu",
                        gpu_us=median(per_call),
                        spec_label=spec.label,
                        plan_index=plan,
                        streams=k,
                        samples=ROUNDS,
                    )
                )
            for g, calls in ((one, 1), (graphs[0], GRAPH_CALLS)):
                t = _timed(dev, lambda g=g: g.launch(streams[0]), streams[0].synchronize, n=10)
                rows.append(
                    _row(
                        "graph_launch",
                        t,
                        spec_label=spec.label,
                        plan_index=plan,
                        graph_calls=calls,
                        samples=10,
                    )
                )
            del graphs, one
        finally:
            dev.synchronize()
            for p in ptrs:
                dev.free(p)
    for s in streams:
        dev.release_stream(s)
    return rows


def write(recording: str) -> Path:
    """Time every number the simulator needs on this GPU and write data/bench/sim_costs_<gpu slug>.csv.

    Args:
        recording: the shipped recording of this GPU (its plans name the sizes to time).

    Returns:
        The CSV's path.
    """
    recorded = Recorded(recording)
    dev = CudaDevice()
    sizes = sizes_to_calibrate(recorded)
    t0 = time.perf_counter()
    rows, failed = [], {}
    sections = (
        ("events_and_syncs", lambda: events_and_syncs(dev)),
        ("allocations", lambda: allocations(dev, sizes)),
        ("pools", lambda: pools(dev, sizes)),
        ("launches", lambda: launches(dev)),
        ("concurrency", lambda: concurrency(dev)),
    )
    with lock.hold():
        for (
            name,
            section,
        ) in sections:  # one that fails leaves the others' rows (the simulator says what it lacks)
            try:
                got = section()
            except Exception as exc:  # noqa: BLE001  (a measurement that failed is said, the others kept)
                failed[name] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"calibration: {name} failed: {failed[name]}", flush=True)
                continue
            rows += got
            print(f"calibration: {name}: {len(got)} rows in {time.perf_counter() - t0:.0f} s", flush=True)
        dev.synchronize()
        dev.release_cached()
    return bench._write(
        pd.DataFrame(rows),
        bench.default_name("sim_costs"),
        {"wall_seconds": round(time.perf_counter() - t0, 1), "failed": failed, "git_commit": bench.commit()},
    )


def sizes_to_calibrate(recorded: Recorded) -> List[int]:
    """Every allocation size the fidelity's sequences ask of the simulator, then a grid.

    The sizes are each convolution's default plan's workspace, the async pool's chunk for it and the
    fixed arena; the grid is the powers of two from 512 B to 1 GiB.

    Args:
        recorded: the recording the simulator reads.

    Returns:
        The sizes in bytes, sorted.
    """
    out = {1 << 30, *(1 << k for k in range(9, 31))}
    for spec in _specs():
        try:
            plans, default = recorded.plans(spec)
        except LabkitError:
            continue
        need = next(p.workspace_bytes for p in plans if p.index == default)
        if need:
            out |= {need, -(-need // ASYNC_CHUNK) * ASYNC_CHUNK}
    return sorted(out)


def median(values) -> float:
    """The median of some values.

    Args:
        values: numbers.

    Returns:
        Their median; NaN for none.
    """
    values = list(values)
    return float(statistics.median(values)) if values else math.nan
