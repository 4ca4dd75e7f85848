"""Workloads for the workspace strategies, and the runs behind ``python -m labkit bench strategies``.

=====================  ======================================================================
``one_conv``            one convolution repeated (fp16 NCHW 32x64x56x56 3x3: its default plan
                        needs a ~25.8 MB workspace)
``resnet50_fp16_nhwc``  the 53 forward convolutions of ResNet-50 (batch 32) in order, repeated
``resnet50_fp32_nchw``  the same in fp32 NCHW (true fp32: bigger workspaces)
``random_shapes``       a seeded stream of shapes drawn from 12 specs (cache growth, eviction)
``growing_batch``       batch 1, 2, 4, ... 64 of one convolution (a scratchpad grows)
``pressure``            ``one_conv`` with only 8 MiB of device memory left free: each strategy
                        must fall back to a plan with a smaller workspace, or fail clearly
=====================  ======================================================================

Each strategy first runs the whole sequence once untimed (warm-up: first allocations, bindings),
then again timed: the counters (alloc_calls, alloc_us_total, hits, misses, evictions, fallbacks)
are those of the timed pass (steady state); ``warmup_alloc_*`` those of the warm-up; peak/held bytes
cover both. Per-call times are host wall time around `Runner.run` (strategy + launch; the per-call
cudaFree waits for the GPU, so its cost shows here); ``strategy_us_per_call`` is the host time
spent inside the strategy's get/put alone (the cleanest overhead number: launches excluded);
``gpu_us`` is the GPU wall time of the timed pass (two events on the stream, before the first call and
after the last) over its number of calls: the kernels plus any time the GPU waited for the host (e.g.
for malloc_per_call's cudaMalloc/cudaFree), not kernel time alone. ``alloc_calls`` counts the
strategy's workspace allocations: cudaMalloc calls for the strategies that own their memory,
``pool.malloc`` requests for cupy_pool / async_pool (most served from the pool's cache). Microseconds;
bytes.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from typing import List

import pandas as pd

from ... import networks
from ...errors import InvalidSpec, LabkitError
from ...signals.cancel import checkpoint
from ...signals.progress import report
from ...spec import ConvSpec
from ..timing import trace
from ..timing.ranges import annotate
from . import workspace
from .runner import Runner

ONE_CONV = ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW")
#: lesson 06's race: a small fp16 NCHW convolution whose default plan needs a workspace (layout
#: transforms); `labkit.gpu.workspaces.concurrency` races it
RACE_SPEC = ConvSpec(N=1, C=64, H=28, W=28, K=64, dtype="fp16", layout="NCHW")
WORKLOADS = (
    "one_conv",
    "resnet50_fp16_nhwc",
    "resnet50_fp32_nchw",
    "random_shapes",
    "growing_batch",
    "pressure",
)
PRESSURE_FREE_BYTES = 8 << 20

#: the strategies every workload runs, with the options the benchmark uses
BENCH_STRATEGIES = (
    ("preallocated", {}),
    ("fixed_arena", {"size_bytes": 1 << 30}),
    ("malloc_per_call", {}),
    ("keyed_cache", {"budget_bytes": 256 << 20}),
    ("keyed_cache", {"budget_bytes": 32 << 20}),
    ("scratchpad", {}),
    ("cupy_pool", {}),
    ("async_pool", {}),
)


def resnet50_sequence(N: int = 32, dtype: str = "fp16", layout: str = "NHWC") -> List[ConvSpec]:
    """The 53 convolutions of a ResNet-50 (v1.5: stride on the 3x3) forward pass, in order.

    They are `labkit.networks.resnet50`'s, checked layer by layer against torchvision.

    Args:
        N: the batch.
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.

    Returns:
        The `ConvSpec` s.
    """
    return [layer.spec for layer in networks.resnet50(batch=N, dtype=dtype, layout=layout)]


def sequence(workload: str, repeats: int) -> List[ConvSpec]:
    """The convolutions a workload runs, in order.

    Args:
        workload: one of `WORKLOADS`.
        repeats: passes over it.

    Returns:
        The `ConvSpec` s; `InvalidSpec` for an unknown workload or a repeats that is not an int >= 1.
    """
    if workload not in WORKLOADS:
        raise InvalidSpec("workload", workload, f"must be one of {', '.join(WORKLOADS)}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InvalidSpec("repeats", repeats, "must be an int >= 1")
    if workload in ("one_conv", "pressure"):
        return [ONE_CONV] * repeats
    if workload == "resnet50_fp16_nhwc":
        return resnet50_sequence(dtype="fp16", layout="NHWC") * repeats
    if workload == "resnet50_fp32_nchw":
        return resnet50_sequence(dtype="fp32", layout="NCHW") * repeats
    if workload == "growing_batch":
        return [ONE_CONV.replace(N=n) for n in (1, 2, 4, 8, 16, 32, 64) for _ in range(repeats)]
    rng = random.Random(7)
    pool = [
        ConvSpec(
            N=rng.choice([8, 16, 32]),
            C=c,
            H=hw,
            W=hw,
            K=c,
            dtype=rng.choice(["fp16", "fp32"]),
            layout=rng.choice(["NCHW", "NHWC"]),
        )
        for c, hw in [
            (64, 56),
            (64, 28),
            (128, 28),
            (128, 14),
            (256, 14),
            (256, 7),
            (512, 7),
            (32, 56),
            (96, 28),
            (192, 14),
            (48, 56),
            (384, 7),
        ]
    ]
    return [rng.choice(pool) for _ in range(12 * repeats)]


def run_one(strategy_name: str, options: dict, workload: str, repeats: int) -> dict:
    """Run a workload under one strategy on a fresh stream: a warm-up pass, then a timed one.

    Args:
        strategy_name: a name `labkit.gpu.workspaces.workspace.make` knows.
        options: the strategy's options (e.g. ``budget_bytes``).
        workload: one of `WORKLOADS`.
        repeats: passes over the workload's convolutions.

    Returns:
        One result row: host time per call (``median_us``, ``p95_us``), GPU time per call
        (``gpu_us``), allocations, hits, misses and fallbacks of the timed pass, peak bytes, ``status``.
    """
    import cupy  # heavy: CuPy, live only

    from ..buffers import memory  # heavy: CuPy, live only
    from ..cudnn import graph_cache  # heavy: CuPy, live only

    checkpoint()
    seq = sequence(workload, repeats)
    strategy = workspace.make(strategy_name, **options)
    runner = Runner(strategy, fallback=True)
    stream = runner.stream
    row = dict(workload=workload, strategy=strategy.describe(), calls=len(seq))
    hog = None
    try:
        for spec in dict.fromkeys(seq):  # build graphs and inputs outside the timed loop
            graph_cache.get_graph(spec)
            runner.operands(spec)
        if workload == "pressure":
            cupy.cuda.runtime.deviceSynchronize()
            cupy.get_default_memory_pool().free_all_blocks()
            hog = memory.raw_malloc(memory.free_bytes() - PRESSURE_FREE_BYTES, "memory pressure")
        with annotate(f"strategy {row['strategy']}: warm-up pass", "strategy"):
            for spec in seq:  # warm-up pass: the same calls, untimed (first allocations, bindings)
                runner.run(spec)
            stream.synchronize()
        warm = dataclasses.replace(strategy.stats)
        warm_fallbacks = runner.fallbacks
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        per_call = []
        start.record(stream)
        for spec in seq:
            t0 = time.perf_counter()
            runner.run(spec)
            per_call.append((time.perf_counter() - t0) * 1e6)
        end.record(stream)
        end.synchronize()
        st = strategy.stats
        per_call.sort()
        row.update(
            median_us=statistics.median(per_call),
            p95_us=per_call[int(0.95 * (len(per_call) - 1))],
            gpu_us=cupy.cuda.get_elapsed_time(start, end) * 1000 / len(seq),
            alloc_calls=st.alloc_calls - warm.alloc_calls,
            alloc_us_total=st.alloc_us_total - warm.alloc_us_total,
            peak_bytes=st.peak_held_bytes,
            held_after_bytes=st.held_bytes,
            hits=st.hits - warm.hits,
            misses=st.misses - warm.misses,
            evictions=st.evictions - warm.evictions,
            fallbacks=runner.fallbacks - warm_fallbacks,
            warmup_alloc_calls=warm.alloc_calls,
            strategy_us_per_call=(st.get_put_us_total - warm.get_put_us_total) / len(seq),
            warmup_alloc_us_total=warm.alloc_us_total,
            status="ok",
            reason="",
        )
    except LabkitError as exc:
        row.update(status=type(exc).__name__, reason=str(exc)[:300], fallbacks=runner.fallbacks)
    finally:
        if hog:
            stream.synchronize()
            memory.raw_free(hog)
        runner.close()
    return row


def run_all(workload: str, repeats: int = 20, *, strategies=BENCH_STRATEGIES):
    """Every strategy on one workload.

    Args:
        workload: one of `WORKLOADS`.
        repeats: passes over it.
        strategies: (name, options) pairs; default `BENCH_STRATEGIES`.

    Returns:
        A DataFrame of `run_one`'s rows, one per strategy.
    """
    sequence(workload, repeats)  # validate before any GPU work
    rows = []
    for name, opts in strategies:
        rows.append(run_one(name, opts, workload, repeats))
        report(lambda: pd.DataFrame(rows), len(rows), len(strategies), "strategies run")
    return pd.DataFrame(rows)


def traced_pass(
    strategy_name: str, options: dict, workload: str = "one_conv", calls: int = 8, passes: int = 5
) -> tuple:
    """The first calls of a workload under one strategy, in steady state, untraced and traced.

    One untraced warm-up pass comes first. Then: untraced (``gpu_us``, two events around a pass;
    ``host_us``, the host's wall time), traced with device records only, and traced with API calls
    too (`labkit.gpu.timing.trace`). Each tracer first runs a warm-up pass that is not kept
    (`trace.Tracer.keep_from_now`: the first pass under a tracer pays CUPTI's set-up of each kernel).
    Untraced and device-only runs take ``passes`` passes each, and their medians count: a pass of 8
    calls lasts about half a millisecond, and one pass's gaps vary with the host.

    From the device-only passes, whose gaps are the least distorted (CUPTI's host cost is mostly per
    API call): ``busy_us`` (device time, overlaps once) and ``idle_share`` (the share of a pass's
    device span in which the GPU waited); ``idle_share_api`` is the same for the returned pass, whose
    gaps include CUPTI's host time. Times in microseconds.

    Args:
        strategy_name: a strategy of `labkit.gpu.workspaces.workspace.make`.
        options: its options.
        workload: one of `WORKLOADS`.
        calls: the calls of a pass.
        passes: passes per untraced and device-only run.

    Returns:
        (row, the traced pass with API calls: the timeline frame, or None when the run failed).
    """
    import cupy  # heavy: CuPy, live only

    from ..cudnn import graph_cache  # heavy: CuPy, live only

    seq = sequence(workload, 1)[:calls]
    if len(seq) < calls:
        seq = (seq * (-(-calls // len(seq))))[:calls]
    strategy = workspace.make(strategy_name, **options)
    runner = Runner(strategy, fallback=True)
    stream = runner.stream
    row = dict(workload=workload, strategy=strategy.describe(), calls=len(seq))
    passes = max(1, int(passes))

    def one_pass():
        for spec in seq:
            runner.run(spec)
        stream.synchronize()

    def traced(label, api, n):
        with trace.Tracer(label, api=api) as t:
            one_pass()  # CUPTI's set-up of each kernel: not kept
            t.keep_from_now()
            for _ in range(n):
                t.mark()
                one_pass()
            t.mark()
        return t.frame()

    try:
        with annotate(f"strategy {row['strategy']}: traced pass", "strategy"):
            for spec in dict.fromkeys(seq):
                graph_cache.get_graph(spec)
                runner.operands(spec)
            one_pass()  # warm-up: first allocations, bindings
            gpu, host = [], []
            for _ in range(passes):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(stream)
                t0 = time.perf_counter()
                for spec in seq:
                    runner.run(spec)
                host.append((time.perf_counter() - t0) * 1e6)
                end.record(stream)
                end.synchronize()
                gpu.append(cupy.cuda.get_elapsed_time(start, end) * 1000)
            row.update(gpu_us=statistics.median(gpu), host_us=statistics.median(host))
            dev = trace.between_marks(traced(f"{row['strategy']}: device records only", False, passes))
            df = traced(f"{row['strategy']}: {len(seq)} calls of {workload}", True, 1)
        row.update(
            busy_us=statistics.median(trace.busy_us(d) for d in dev),
            idle_share=statistics.median(trace.idle_share(d) for d in dev),
            idle_share_api=trace.idle_share(df),
            dropped=df.attrs.get("dropped", 0),
            status="ok",
            reason="",
        )
    except LabkitError as exc:
        row.update(status=type(exc).__name__, reason=str(exc)[:300])
        df = None
    finally:
        runner.close()
    return row, df
