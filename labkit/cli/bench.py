"""Benchmarks (``python -m labkit bench strategies|vs-torch``): print a table with ratios against a
baseline measured in the same run, and write it to data/bench/ with its provenance (.json beside).
Never timed assertions: these are measurements to read."""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path
from typing import Optional

from ..store.recordings import data_dir

STRATEGY_COLUMNS = [
    "workload",
    "strategy",
    "calls",
    "median_us",
    "p95_us",
    "gpu_us",
    "alloc_calls",
    "alloc_us_total",
    "peak_bytes",
    "held_after_bytes",
]
VS_TORCH_COLUMNS = [
    "shape",
    "dtype",
    "layout",
    "labkit_gpu_us",
    "torch_gpu_us",
    "ratio",
    "labkit_host_us",
    "torch_host_us",
]


def bench_dir() -> Path:
    """data/bench (beside data/recordings): the benchmarks' CSVs."""
    return data_dir().parent / "bench"


def default_name(which: str, gpu_name: Optional[str] = None) -> str:
    """A benchmark's CSV name: the benchmark and the GPU that runs it.

    A run on another GPU never overwrites this one's table.

    Args:
        which: "strategies" or "vs_torch".
        gpu_name: the GPU's name; default this machine's.

    Returns:
        ``<which>_<slug of the GPU>`` (`labkit.env.gpu_slug`), e.g. ``vs_torch_h100-80gb-hbm3`` on an
        NVIDIA H100 80GB HBM3, ``strategies_h200`` on an NVIDIA H200.
    """
    from ..env import environment, gpu_slug

    return f"{which}_{gpu_slug(gpu_name if gpu_name is not None else environment().gpu_name)}"


def _write(df, name: str, extra: dict) -> Path:
    from ..experiments import provenance

    out = bench_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.csv"
    df.to_csv(path, index=False)
    meta = {**provenance(live=True), **extra}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def strategies(repeats: int = 50, name: Optional[str] = None):
    """Every workspace strategy on every workload, written to data/bench/<name>.csv.

    ``overhead_us_vs_preallocated`` is the host time per call inside the strategy's get/put minus the
    no-management baseline's, same workload, same run.

    Args:
        repeats: passes over each workload.
        name: the CSV's name; default `default_name` ("strategies").

    Returns:
        The table, one row per strategy and workload.
    """
    import pandas as pd

    from ..gpu import workloads

    t0 = time.perf_counter()
    frames = []
    for w in workloads.WORKLOADS:
        r = 3 if w.startswith("resnet") else repeats
        df = workloads.run_all(w, r)
        base = df[df.strategy.str.startswith("preallocated")].strategy_us_per_call
        df["overhead_us_vs_preallocated"] = df.strategy_us_per_call - (
            float(base.iloc[0]) if len(base) else float("nan")
        )
        frames.append(df)
        print(
            df[
                STRATEGY_COLUMNS
                + ["strategy_us_per_call", "overhead_us_vs_preallocated", "fallbacks", "status"]
            ].to_string(index=False),
            flush=True,
        )
    df = pd.concat(frames, ignore_index=True)
    cols = STRATEGY_COLUMNS + [c for c in df.columns if c not in STRATEGY_COLUMNS]
    path = _write(
        df[cols],
        name or default_name("strategies"),
        {"wall_seconds": round(time.perf_counter() - t0, 1), "repeats": repeats},
    )
    print(f"wrote {path}")
    return df


def require_torch() -> None:
    """`ModeError` in one line unless PyTorch imports (``bench vs-torch`` compares with it)."""
    import importlib.util

    from ..errors import ModeError

    if importlib.util.find_spec("torch") is None:
        raise ModeError("bench vs-torch needs PyTorch with CUDA: pip install -e '.[torch]'")


def _torch_times(spec, calls: int = 20):
    """PyTorch F.conv2d (cudnn.benchmark=True; channels_last for NHWC) on the same shape:
    (a function timing 10 replays of a CUDA graph of ``calls`` convs -> median GPU us per conv,
    back-to-back GPU us, host us) per call."""
    import statistics

    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = spec.dtype == "tf32"
    dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        spec.dtype
    ]
    fmt = torch.channels_last if spec.layout == "NHWC" else torch.contiguous_format
    x = torch.randn(spec.x_shape, device="cuda", dtype=dt).to(memory_format=fmt)
    w = torch.randn(spec.w_shape, device="cuda", dtype=dt).to(memory_format=fmt)
    kw = dict(stride=spec.stride, padding=spec.padding, dilation=spec.dilation, groups=spec.groups)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(5):
            F.conv2d(x, w, **kw)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            F.conv2d(x, w, **kw)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()

    def replay_us() -> float:
        samples = []
        for _ in range(10):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1000 / calls)
        return statistics.median(samples)

    b2b = []
    for _ in range(5):
        start.record()
        for _ in range(50):
            F.conv2d(x, w, **kw)
        end.record()
        end.synchronize()
        b2b.append(start.elapsed_time(end) * 1000 / 50)
    host = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100):
            F.conv2d(x, w, **kw)
        host.append((time.perf_counter() - t0) * 1e6 / 100)
        torch.cuda.synchronize()
    return replay_us, statistics.median(b2b), statistics.median(host)


def vs_torch(
    name: Optional[str] = None, *, dtypes=("fp32", "tf32", "fp16", "bf16"), layouts=("NCHW", "NHWC")
):
    """labkit's autotuned plan against PyTorch's cudnn.benchmark pick on the ResNet-50 shapes.

    GPU times come from CUDA-graph replay of 20 convolutions: three alternating rounds of 10 replays
    per side, the median of the round medians. The table goes to data/bench/<name>.csv.

    Args:
        name: the CSV's name; default `default_name` ("vs_torch").
        dtypes: the dtypes compared.
        layouts: the layouts compared.

    Returns:
        The table, one row per shape, dtype and layout.
    """
    import cupy
    import pandas as pd

    from ..experiments import resnet50_shapes
    from ..gpu import autotune, engine, measure, memory

    t0 = time.perf_counter()
    rows = []
    for shape, base in resnet50_shapes():
        for d in dtypes:
            for lay in layouts:
                spec = base.replace(dtype=d, layout=lay)
                row = dict(shape=shape, dtype=d, layout=lay)
                try:
                    cg = engine.get_graph(spec)
                    ops = engine.Operands(spec)
                    tuned = autotune.autotune(cg, ops)
                    plan = cg.plan(tuned.best_index)
                    ws = memory.alloc(plan.workspace_bytes, "workspace")
                    stream = cupy.cuda.Stream(non_blocking=True)
                    b = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
                    lb = measure.back_to_back(b.run, stream)
                    lh = measure.host_dispatch(b.run, stream)
                    one = measure.capture(b.run, stream, 1)  # the same call as a CUDA graph of one conv
                    lgh = measure.host_dispatch(functools.partial(one.launch, stream), stream)
                    torch_replay, tb, th = _torch_times(spec)
                    labkit_replay = measure.replay_timer(measure.capture(b.run, stream, 20), stream, 20)
                    lab, tor = [], []
                    for _ in range(3):  # alternate, so clock and thermal drift hit both sides alike
                        lab.append(labkit_replay())
                        tor.append(torch_replay())
                    lg, tg = statistics.median(lab), statistics.median(tor)
                    row.update(
                        labkit_gpu_us=lg,
                        torch_gpu_us=tg,
                        ratio=lg / tg,
                        labkit_host_us=lh.median_us,
                        torch_host_us=th,
                        labkit_graph_launch_host_us=lgh.median_us,
                        labkit_b2b_us=lb.median_us,
                        torch_b2b_us=tb,
                        labkit_plan=plan.name,
                        workspace_bytes=plan.workspace_bytes,
                        heuristic_gpu_us=tuned.gpu_us(tuned.heuristic_index),
                        status="ok",
                    )
                    del ops, ws, b, one
                    engine.release_handle(stream)
                except Exception as exc:  # noqa: BLE001  (reported in the table, the run goes on)
                    row.update(status=f"{type(exc).__name__}: {str(exc)[:200]}")
                rows.append(row)
                print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
        engine.graphs.clear()
        cupy.get_default_memory_pool().free_all_blocks()
    df = pd.DataFrame(rows)
    import torch

    ok = df[df.status == "ok"]
    summary = {
        "cells": len(df),
        "cells_ok": len(ok),
        "share_ratio_le_1": float((ok.ratio <= 1.0).mean()) if len(ok) else None,
        "median_ratio": float(ok.ratio.median()) if len(ok) else None,
        "labkit_host_us_median": float(ok.labkit_host_us.median()) if len(ok) else None,
        "labkit_host_us_median_nhwc": float(ok[ok.layout == "NHWC"].labkit_host_us.median())
        if len(ok)
        else None,
        "labkit_graph_launch_host_us_median": float(ok.labkit_graph_launch_host_us.median())
        if len(ok)
        else None,
        "torch_host_us_median": float(ok.torch_host_us.median()) if len(ok) else None,
        "torch": torch.__version__,
        "torch_cudnn": torch.backends.cudnn.version(),
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    cols = VS_TORCH_COLUMNS + [c for c in df.columns if c not in VS_TORCH_COLUMNS]
    path = _write(df[cols], name or default_name("vs_torch"), summary)
    print(df[VS_TORCH_COLUMNS].to_string(index=False))
    print(json.dumps(summary, indent=2))
    print(f"wrote {path}")
    return df
