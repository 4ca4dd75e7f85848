"""Benchmarks (``python -m labkit bench strategies|vs-torch``): print a table with ratios against a
baseline measured in the same run, and write it to data/bench/ with its provenance (.json beside).
Never timed assertions: these are measurements to read. ``vs-torch`` is `labkit.cli.vs_torch`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Optional

import pandas as pd

from .. import env
from ..env import gpu_slug
from ..errors import ModeError
from ..gpu.workspaces import workloads
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


def bench_dir() -> Path:
    """The benchmarks' folder, data/bench (beside data/recordings).

    Returns:
        The path.
    """
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
    return f"{which}_{gpu_slug(gpu_name if gpu_name is not None else env.environment().gpu_name)}"


def commit() -> str:
    """This checkout's commit.

    Returns:
        The short hash: ``LABKIT_GIT_COMMIT`` where it is set (a copied tree on a GPU host can carry
        a stale or no .git), else git's; "" where neither is at hand.
    """
    if os.environ.get("LABKIT_GIT_COMMIT"):
        return os.environ["LABKIT_GIT_COMMIT"][:7]
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except OSError:
        return ""


def _write(df, name: str, extra: dict) -> Path:
    from ..experiments import provenance  # heavy: plotly, where a chart is drawn

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
    if importlib.util.find_spec("torch") is None:
        raise ModeError("bench vs-torch needs PyTorch with CUDA: pip install -e '.[torch]'")
