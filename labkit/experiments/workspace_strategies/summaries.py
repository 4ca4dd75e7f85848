"""Lesson 02's summaries: the text under the strategies chart (one for the pressure workload), each
surprise explained from the measurement, and what a dims-only cache key would hand out."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import (
    fmt_bytes,
    fmt_us,
    not_ok_note,
    ok_rows,
)
from ...draw.prose import Text, where
from ..core import beside
from .charts import allocator_of
from .runs import strategies_repeats

# ---- summaries --------------------------------------------------------------------------------


def _strategy(df, name):
    rows = df[df["strategy"].str.split(" ").str[0] == name]
    return rows.iloc[0] if len(rows) else None


def _joined(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def noise_sentence(df) -> str:
    """Which strategies a learner cannot tell apart by host time.

    They are those whose median lies within the lowest median's spread (from the lowest median to
    its p95).

    Args:
        df: `strategies`' result.

    Returns:
        The sentence, in Markdown.
    """
    ok = ok_rows(df)
    best = ok.loc[ok["median_us"].idxmin()]
    tied = ok[ok["median_us"] <= best["p95_us"]]
    text = (
        "**noise**: a strategy's calls spread from its median to its p95 (the whisker); the lowest median, "
        f"{fmt_us(best['median_us'])} ({best['strategy']}), has its p95 at {fmt_us(best['p95_us'])}"
    )
    if len(tied) > 1:
        return text + (
            f", and {len(tied)} of {len(ok)} medians lie within that ({_joined(tied['strategy'])}): at this "
            "noise they cost the same."
        )
    return text + ", and no other median lies within it."


def _none_ran(df) -> Optional[Text]:
    """When no strategy ran (each row a status such as OutOfMemory): one line saying so, with the
    first reason; else None."""
    if len(ok_rows(df)):
        return None
    first = df.iloc[0]
    reason = f" {first['strategy']}: {first['reason']}" if first.get("reason") else ""
    return Text(
        f"Workload **{df['workload'].iloc[0]}** ({where(df)}): no strategy ran, so there is nothing to "
        f"compare ({not_ok_note(df, ('strategy',))}).{reason}"
    )


def strategies_summary(df) -> Text:
    """What the strategies chart shows: a lead line and one bullet per column.

    The columns are host time (and its noise), allocations, GPU wall time and memory.

    Args:
        df: `strategies`' result.

    Returns:
        Markdown, as a `Text`.
    """
    none = _none_ran(df)
    if none is not None:
        return none
    ok = ok_rows(df)
    m = _strategy(ok, "malloc_per_call")
    a = _strategy(ok, "fixed_arena")
    wl = df["workload"].iloc[0]
    calls = int(df["calls"].iloc[0])
    lead = f"Workload **{wl}** ({calls} calls per strategy after a warm-up pass, {where(df)}):"
    bullets = []
    if m is not None and a is not None:
        bullets.append(
            f"**host time per call** (median): {fmt_us(m.median_us)} for malloc_per_call, "
            f"{fmt_us(a.median_us)} "
            f"for fixed_arena ({m.median_us / a.median_us:.1f}x); inside the strategy alone (its get "
            "and put, a mean per call) "
            f"{fmt_us(m.strategy_us_per_call)} against {fmt_us(a.strategy_us_per_call)};"
        )
        arena_first = (
            " (its one allocation came in the warm-up pass)"
            if "warmup_alloc_calls" in ok.columns and a.warmup_alloc_calls > 0 and a.alloc_calls == 0
            else ""
        )
        pools = [r for _, r in ok.iterrows() if allocator_of(r.strategy) != "cudaMalloc" and r.alloc_calls]
        bullets.append(
            f"**allocations**: malloc_per_call made {int(m.alloc_calls)} cudaMalloc calls in the timed pass "
            f"({m.alloc_us_total / 1000:.1f} ms inside cudaMalloc/cudaFree), fixed_arena {int(a.alloc_calls)}"
            f"{arena_first}"
            + (
                "; "
                + ", ".join(f"{r.strategy} {int(r.alloc_calls)}" for r in pools)
                + " count requests to the pool, not cudaMalloc calls (the pool serves most from blocks "
                "it keeps)"
                if pools
                else ""
            )
            + ";"
        )
        idle = m.gpu_us > 1.2 * a.gpu_us
        bullets.append(
            f"**GPU wall time per call** (two events around the run, over the calls): {fmt_us(m.gpu_us)} for "
            f"malloc_per_call, {fmt_us(a.gpu_us)} for fixed_arena"
            + (
                ": not slower kernels but the GPU idling while the host frees and allocates (each cudaFree "
                "waits for the GPU);"
                if idle
                else ";"
            )
        )
        bullets.append(
            f"**memory**: the arena pays instead, holding {fmt_bytes(a.peak_bytes)} for a workload "
            "whose largest "
            f"workspace is {fmt_bytes(m.peak_bytes)};"
        )
    bullets.append(noise_sentence(df))
    return Text(lead + "\n\n" + "\n".join(f"* {b}" for b in bullets))


def _one_conv(df):
    """The `one_conv` result from where ``df`` came from, when it is there (else None)."""
    return beside(df, "strategies", workload="one_conv", repeats=strategies_repeats("one_conv"))


def _allocator_share(rows) -> str:
    """How much of the time inside the strategies' get/put their allocator took, in words: "nearly
    all" (90 % or more for each), "most" (over half) or "some"."""
    share = (rows["alloc_us_total"] / rows["calls"] / rows["strategy_us_per_call"]).min()
    return "nearly all" if share >= 0.9 else "most" if share > 0.5 else "some"


def _scratchpad_regrows(fell, calls: int):
    """The per-stream scratchpad's row when it made a buffer on every call of the timed pass (and fell
    back on every call): its grow-only buffer freed to grow, the growth failed; else None."""
    pad = _strategy(fell, "scratchpad_per_stream")
    if pad is None or not (pad.alloc_calls == calls == pad.fallbacks and pad.peak_bytes > 0):
        return None
    return pad


def pressure_summary(df) -> Text:
    """What the `pressure` workload shows, each surprise explained from the measurement.

    It says who fell back and why (a strategy that makes its buffers at their first call makes them
    under the pressure), what a failed allocation costs in CuPy's pool, and who was untouched.

    Args:
        df: `strategies`' result for the pressure workload.

    Returns:
        Markdown, as a `Text`.
    """
    from ...gpu.workloads import PRESSURE_FREE_BYTES

    none = _none_ran(df)
    if none is not None:
        return none
    ok = ok_rows(df)
    calls = int(df["calls"].iloc[0])
    parts = [
        f"Workload **{df['workload'].iloc[0]}** ({where(df)}): {calls} calls with only "
        f"{fmt_bytes(PRESSURE_FREE_BYTES)} of device memory left free."
    ]
    fell = ok[ok["fallbacks"] > 0]
    held = ok[ok["fallbacks"] == 0]
    one = _one_conv(df)
    wanted = _strategy(ok_rows(one), "malloc_per_call").peak_bytes if one is not None else None
    want = f" ({fmt_bytes(wanted)})" if wanted else ""
    if len(fell):
        parts.append(
            f"{len(fell)} of {len(ok)} strategies could not get the workspace the heuristic's plan "
            f"wants{want} "
            "and fell back to a plan needing less: "
            + ", ".join(f"{r.strategy} {int(r.fallbacks)} of {calls}" for _, r in fell.iterrows())
            + "."
        )
    lazy = fell[
        (fell["alloc_calls"] == 0)
        & (fell["fallbacks"] == calls)
        & (fell["alloc_us_total"] > 0)
        & (fell["warmup_alloc_calls"] > 0)
        & (fell["peak_bytes"] > 0)
    ]
    if len(lazy):
        names = _joined(lazy["strategy"])
        inside = lazy["strategy_us_per_call"]
        parts.append(
            f"{names} make each buffer at the first call that needs it, not before the run: here that "
            "first call came after the pressure began, so the heuristic plan's buffer was never made. "
            f"Each call asks again, and the failed cudaMalloc is {_allocator_share(lazy)} of the time "
            f"inside their get/put ({fmt_us(inside.min())} to {fmt_us(inside.max())} per call, the "
            "chart's diamonds); then each falls back and runs the plan whose "
            f"{fmt_bytes(lazy['peak_bytes'].max())} buffer is all they ever held."
        )
    grower = _scratchpad_regrows(fell, calls)
    if grower is not None:
        parts.append(
            f"{grower.strategy} keeps one grow-only buffer per stream, yet made {int(grower.alloc_calls)} "
            f"cudaMallocs in the timed pass and {int(grower.warmup_alloc_calls)} in the warm-up: one per "
            f"call. Each call first asks for the heuristic plan's workspace{want}. To grow, the scratchpad "
            f"frees the buffer it holds ({fmt_bytes(grower.peak_bytes)}) before it allocates the larger one "
            "(its `_get`, shown in lesson 06); that cudaMalloc fails, the Runner falls back, and the "
            "smaller plan's call finds no buffer and has one made again."
        )
    for _, r in held.iterrows():
        parts.append(
            f"{r.strategy} never fell back: its memory was taken when it was made, before the pressure began "
            f"({fmt_us(r.median_us)} per call, holding {fmt_bytes(r.peak_bytes)})."
        )
    pool = _strategy(ok, "cupy_pool")
    others = ok[ok["strategy"].str.split(" ").str[0] != "cupy_pool"]
    if pool is not None and len(others) and pool.median_us > 10 * others["median_us"].max():
        mean_high = (
            " (more than its median call takes in all: a mean counts the slowest calls, p95 "
            f"{fmt_us(pool.p95_us)}, in full)"
            if pool.strategy_us_per_call > pool.median_us
            else ""
        )
        parts.append(
            f"cupy_pool takes {fmt_us(pool.median_us)} per call (median) and spends on average "
            f"{fmt_us(pool.strategy_us_per_call)} per call inside its get/put, on the host{mean_high}: "
            "CuPy's pool answers a failed cudaMalloc by freeing its cached blocks and trying again, then by "
            "running Python's garbage collector (gc.collect(), a pass over every Python object of this "
            "process) and trying once more, before it raises (SingleDeviceMemoryPool._try_malloc in CuPy's "
            "memory.pyx)."
        )
    empty = fell[fell["peak_bytes"] == 0]
    if len(empty):
        parts.append(
            f"{_joined(empty['strategy'])} got no workspace at all and ran a plan that needs none (peak 0 B)."
        )
    bad = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    if len(bad):
        parts.append(
            f"{len(bad)} failed: " + "; ".join(f"{r.strategy}: {r.reason}" for _, r in bad.iterrows())
        )
    parts.append(noise_sentence(df))
    return Text(parts[0] + "\n\n" + "\n".join(f"* {p}" for p in parts[1:]))


def dims_only_summary(df) -> Text:
    """What a dims-only key would hand out: same dims, different workspaces.

    Args:
        df: `workspace_sizes`' result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    fp = ok[ok["direction"] == "fprop"].sort_values("heuristic_workspace_bytes")
    lo, hi = fp.iloc[0], fp.iloc[-1]
    sizes = ok["heuristic_workspace_bytes"]
    return Text(
        f"All {len(ok)} variants have the **same dims-only key**, yet their heuristic plans ask for "
        f"{fmt_bytes(sizes.min())} to {fmt_bytes(sizes.max())}. Among forward convolutions alone: if "
        f"{lo['dtype']} {lo['layout']} runs first, a dims-only cache stores "
        f"{fmt_bytes(lo.heuristic_workspace_bytes)}; "
        f"when {hi['dtype']} {hi['layout']} arrives with the same dims it gets that buffer back and needs "
        f"{fmt_bytes(hi.heuristic_workspace_bytes)}: "
        f"{fmt_bytes(hi.heuristic_workspace_bytes - lo.heuristic_workspace_bytes)} short. Handed to "
        "cuDNN, that "
        "buffer would be written past its end (labkit's Runner checks the size and refuses; a real "
        "cache that "
        "trusts its key does not)."
    )
