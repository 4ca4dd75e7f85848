"""Lesson 02's summaries: the text under the strategies chart (one for the pressure workload), each
surprise explained from the measurement, and what a dims-only cache key would hand out."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import (
    not_ok_note,
    ok_rows,
)
from ...draw.prose import Text, listed, where
from ...draw.units import size_text, us_text
from ...gpu.workspaces.workloads import ONE_CONV, PRESSURE_FREE_BYTES
from ..core import beside
from .charts import allocator_of
from .runs import strategies_repeats

# ---- summaries --------------------------------------------------------------------------------


def _strategy(df, name):
    rows = df[df["strategy"].str.split(" ").str[0] == name]
    return rows.iloc[0] if len(rows) else None


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
    tied = ok[(ok["median_us"] <= best["p95_us"]) & (ok.index != best.name)]
    lowest, strategy, p95 = us_text(best["median_us"]), best["strategy"], us_text(best["p95_us"])
    if len(tied):
        return (
            "**noise**: a strategy's calls spread from its median to its p95 (the whisker); "
            f"the lowest median, {lowest} ({strategy}), has its p95 at {p95}, "
            f"and {len(tied)} of the other {len(ok) - 1} medians lie within that "
            f"({listed(tied['strategy'])}): "
            "at this noise they cost the same as it."
        )
    return (
        "**noise**: a strategy's calls spread from its median to its p95 (the whisker); "
        f"the lowest median, {lowest} ({strategy}), has its p95 at {p95}, "
        "and no other median lies within it."
    )


def _none_ran(df) -> Optional[Text]:
    """When no strategy ran (each row a status such as OutOfMemory): one line saying so, with the
    first reason; else None."""
    if len(ok_rows(df)):
        return None
    first = df.iloc[0]
    workload, statuses = df["workload"].iloc[0], not_ok_note(df, ("strategy",))
    if first.get("reason"):
        return Text(
            f"Workload **{workload}** ({where(df)}): no strategy ran, so there is nothing to compare "
            f"({statuses}). {first['strategy']}: {first['reason']}"
        )
    return Text(
        f"Workload **{workload}** ({where(df)}): no strategy ran, so there is nothing to compare "
        f"({statuses})."
    )


def _host_bullet(m, a) -> str:
    """The host time per call of malloc_per_call (row ``m``) and fixed_arena (row ``a``)."""
    malloc, arena, ratio = us_text(m.median_us), us_text(a.median_us), m.median_us / a.median_us
    malloc_inside, arena_inside = us_text(m.strategy_us_per_call), us_text(a.strategy_us_per_call)
    times = f"{ratio:.1f}x" if ratio >= 1.5 else f"{ratio:.2f}x"  # near 1, two decimals tell it from 1
    free = int(m.calls) - int(m.alloc_calls)  # calls whose plan needs no workspace: no cudaMalloc
    median_misses = 2 * free > int(m.calls) and "p95_us" in m.index and m.p95_us > a.p95_us
    why = (
        f" {free} of malloc_per_call's {int(m.calls)} calls need no workspace and allocate nothing, so "
        "its median says little of its cudaMalloc calls: the mean inside the strategy does, and so does "
        f"its 95th percentile, {us_text(m.p95_us)} against {us_text(a.p95_us)} for fixed_arena;"
        if median_misses
        else ""
    )
    if ratio < 1 and a.strategy_us_per_call <= m.strategy_us_per_call:  # not the arena's get and put
        return (
            f"**host time per call** (median): {malloc} for malloc_per_call, {arena} for fixed_arena "
            f"({times}); inside the strategy alone (its get and put, a mean per call) "
            f"{malloc_inside} against {arena_inside}, so what puts fixed_arena's median above "
            "malloc_per_call's lies outside the strategy, in the launches every strategy makes the same "
            f"way, not in the arena's own work;{why}"
        )
    return (
        f"**host time per call** (median): {malloc} for malloc_per_call, {arena} for fixed_arena "
        f"({times}); inside the strategy alone (its get and put, a mean per call) "
        f"{malloc_inside} against {arena_inside};{why}"
    )


def _allocations_bullet(ok, m, a) -> str:
    """The allocations in the timed pass: malloc_per_call's (row ``m``), fixed_arena's (row ``a``) and
    the caching pools' (requests, not cudaMalloc calls)."""
    malloc_calls, malloc_us = int(m.alloc_calls), m.alloc_us_total
    arena = f"fixed_arena {int(a.alloc_calls)}"
    if "warmup_alloc_calls" in ok.columns and a.warmup_alloc_calls > 0 and a.alloc_calls == 0:
        arena = f"fixed_arena {int(a.alloc_calls)} (its one allocation came in the warm-up pass)"
    pools = [r for _, r in ok.iterrows() if allocator_of(r.strategy) != "cudaMalloc" and r.alloc_calls]
    pool_requests = ", ".join(f"{r.strategy} {int(r.alloc_calls)}" for r in pools)
    if pools:
        return (
            f"**allocations**: malloc_per_call made {malloc_calls} cudaMalloc calls in the timed pass "
            f"({us_text(malloc_us)} inside cudaMalloc/cudaFree), {arena}; "
            f"{pool_requests} count requests to the pool, not cudaMalloc calls "
            "(the pool serves most from blocks it keeps);"
        )
    return (
        f"**allocations**: malloc_per_call made {malloc_calls} cudaMalloc calls in the timed pass "
        f"({us_text(malloc_us)} inside cudaMalloc/cudaFree), {arena};"
    )


def _gpu_bullet(m, a) -> str:
    """The GPU wall time per call of malloc_per_call (row ``m``) and fixed_arena (row ``a``), and
    why malloc_per_call's is longer when it is (over 1.2x)."""
    malloc, arena = us_text(m.gpu_us), us_text(a.gpu_us)
    if m.gpu_us > 1.2 * a.gpu_us:
        return (
            f"**GPU wall time per call** (two events around the run, over the calls): "
            f"{malloc} for malloc_per_call, {arena} for fixed_arena: not slower kernels but the GPU "
            "idling while the host frees and allocates (each cudaFree waits for the GPU);"
        )
    return (
        f"**GPU wall time per call** (two events around the run, over the calls): "
        f"{malloc} for malloc_per_call, {arena} for fixed_arena;"
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
        bullets += [_host_bullet(m, a), _allocations_bullet(ok, m, a), _gpu_bullet(m, a)]
        bullets.append(
            f"**memory**: the arena pays instead, holding {size_text(a.peak_bytes)} "
            f"for a workload whose largest workspace is {size_text(m.peak_bytes)};"
        )
    bullets.append(noise_sentence(df))
    items = "\n".join(f"* {b}" for b in bullets)
    return Text(f"{lead}\n\n{items}")


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


def _pool_sentence(pool) -> str:
    """Why cupy_pool (row ``pool``) is slow under memory pressure: what its pool does when a
    cudaMalloc fails. Where its mean get/put exceeds its median call, says why."""
    median, inside, p95 = us_text(pool.median_us), us_text(pool.strategy_us_per_call), us_text(pool.p95_us)
    retries = (
        "CuPy's pool answers a failed cudaMalloc by freeing its cached blocks and trying again, then by "
        "running Python's garbage collector (gc.collect(), a pass over every Python object of this "
        "process) and trying once more, before it raises (SingleDeviceMemoryPool._try_malloc in CuPy's "
        "memory.pyx)."
    )
    if pool.strategy_us_per_call > pool.median_us:
        return (
            f"cupy_pool takes {median} per call (median) and spends on average {inside} per call inside "
            "its get/put, on the host (more than its median call takes in all: a mean counts the slowest "
            f"calls, p95 {p95}, in full): {retries}"
        )
    return (
        f"cupy_pool takes {median} per call (median) and spends on average {inside} per call inside "
        f"its get/put, on the host: {retries}"
    )


def _longer(ratio: float) -> str:
    """How much longer one time is than another, never rounded to no cost.

    Args:
        ratio: the longer time over the shorter (above 1).

    Returns:
        ``9.1x as long`` from 1.2x; below it the excess as a percentage to two significant figures
        (``4% longer``, ``0.4% longer``), which a ratio to 0.1 would round to ``1.0x``.
    """
    return f"{ratio:.1f}x as long" if ratio >= 1.2 else f"{(ratio - 1) * 100:.2g}% longer"


def _fallback_plan_sentence(df, fell) -> Optional[str]:
    """What the plan the strategies fell back to costs on the GPU against the heuristic's plan, from
    the replay medians of every plan of the workload's convolution (`plans`, lesson 05's chart).

    Args:
        df: `strategies`' result for the pressure workload.
        fell: its rows of the strategies that fell back.

    Returns:
        The sentence; None where the plans are not at hand, or where the workspace most of those
        strategies held names no single plan.
    """
    held = fell["peak_bytes"][fell["peak_bytes"] > 0]
    plans = beside(df, "plans", spec=ONE_CONV)
    if not len(held) or plans is None:
        return None
    plans = ok_rows(plans)
    workspace = int(held.mode().iloc[0])
    ran, pick = plans[plans["workspace_bytes"] == workspace], plans[plans["heuristic_pick"].astype(bool)]
    if len(ran) != 1 or len(pick) != 1:
        return None
    ran, pick, holding = ran.iloc[0], pick.iloc[0], int((held == workspace).sum())
    slower = ran.gpu_us > pick.gpu_us
    head = "Falling back costs GPU time on every call" if slower else "Falling back costs no GPU time here"
    ratio = ran.gpu_us / pick.gpu_us
    longer = _longer(ratio) if slower else f"{ratio:.2f}x as long"
    return (
        f"{head}: `{ran.plan_name}`, the plan whose "
        f"{size_text(workspace)} workspace {holding} of these {len(fell)} strategies held, takes "
        f"{us_text(ran.gpu_us)} per call on the GPU against {us_text(pick.gpu_us)} for the heuristic's plan, "
        f"{longer} (CUDA-graph replay medians of this convolution's "
        "plans, lesson 05's plans chart)."
    )


def pressure_summary(df) -> Text:
    """What the `pressure` workload shows, each surprise explained from the measurement.

    It says who fell back and why (a strategy that makes its buffers at their first call makes them
    under the pressure), what a failed allocation costs in CuPy's pool, and who was untouched.

    Args:
        df: `strategies`' result for the pressure workload.

    Returns:
        Markdown, as a `Text`.
    """
    none = _none_ran(df)
    if none is not None:
        return none
    ok = ok_rows(df)
    calls = int(df["calls"].iloc[0])
    parts = [
        f"Workload **{df['workload'].iloc[0]}** ({where(df)}): {calls} calls with only "
        f"{size_text(PRESSURE_FREE_BYTES)} of device memory left free."
    ]
    fell = ok[ok["fallbacks"] > 0]
    held = ok[ok["fallbacks"] == 0]
    one = _one_conv(df)
    wanted = _strategy(ok_rows(one), "malloc_per_call").peak_bytes if one is not None else None
    # what the heuristic's plan asks for, with its size where one_conv measured it
    plan_wants = "the workspace the heuristic's plan wants"
    plans_workspace = "the heuristic plan's workspace"
    if wanted:
        plan_wants = f"the workspace the heuristic's plan wants ({size_text(wanted)})"
        plans_workspace = f"the heuristic plan's workspace ({size_text(wanted)})"
    if len(fell):
        fallbacks = ", ".join(f"{r.strategy} {int(r.fallbacks)} of {calls}" for _, r in fell.iterrows())
        parts.append(
            f"{len(fell)} of {len(ok)} strategies could not get {plan_wants} "
            f"and fell back to a plan needing less: {fallbacks}."
        )
        slower = _fallback_plan_sentence(df, fell)
        if slower is not None:
            parts.append(slower)
    lazy = fell[
        (fell["alloc_calls"] == 0)
        & (fell["fallbacks"] == calls)
        & (fell["alloc_us_total"] > 0)
        & (fell["warmup_alloc_calls"] > 0)
        & (fell["peak_bytes"] > 0)
    ]
    if len(lazy):
        names, share = listed(lazy["strategy"]), _allocator_share(lazy)
        inside = lazy["strategy_us_per_call"]
        fastest, slowest = us_text(inside.min()), us_text(inside.max())
        held_bytes = size_text(lazy["peak_bytes"].max())
        parts.append(
            f"{names} make each buffer at the first call that needs it, not before the run: "
            "here that first call came after the pressure began, so the heuristic plan's buffer was "
            f"never made. Each call asks again, and the failed cudaMalloc is {share} of the time inside "
            f"their get/put ({fastest} to {slowest} per call, the chart's diamonds); then each falls back "
            f"and runs the plan whose {held_bytes} buffer is all they ever held."
        )
    grower = _scratchpad_regrows(fell, calls)
    if grower is not None:
        strategy, held_bytes = grower.strategy, size_text(grower.peak_bytes)
        timed, warmup = int(grower.alloc_calls), int(grower.warmup_alloc_calls)
        parts.append(
            f"{strategy} keeps one grow-only buffer per stream, yet made {timed} cudaMallocs in the timed "
            f"pass and {warmup} in the warm-up: one per call. Each call first asks for {plans_workspace}. "
            f"To grow, the scratchpad frees the buffer it holds ({held_bytes}) before it allocates the "
            "larger one (its `_get`, shown in lesson 06); that cudaMalloc fails, the Runner falls back, "
            "and the smaller plan's call finds no buffer and has one made again."
        )
    for _, r in held.iterrows():
        parts.append(
            f"{r.strategy} never fell back: its memory was taken when it was made, before the pressure began "
            f"({us_text(r.median_us)} per call, holding {size_text(r.peak_bytes)})."
        )
    pool = _strategy(ok, "cupy_pool")
    others = ok[ok["strategy"].str.split(" ").str[0] != "cupy_pool"]
    if pool is not None and len(others) and pool.median_us > 10 * others["median_us"].max():
        parts.append(_pool_sentence(pool))
    empty = fell[fell["peak_bytes"] == 0]
    if len(empty):
        parts.append(
            f"{listed(empty['strategy'])} got no workspace at all and ran a plan that needs none (peak 0 B)."
        )
    bad = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    if len(bad):
        failures = "; ".join(f"{r.strategy}: {r.reason}" for _, r in bad.iterrows())
        parts.append(f"{len(bad)} failed: {failures}")
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
    first, then = f"{lo['dtype']} {lo['layout']}", f"{hi['dtype']} {hi['layout']}"
    stored, needed = lo.heuristic_workspace_bytes, hi.heuristic_workspace_bytes
    return Text(
        f"All {len(ok)} variants have the **same dims-only key**, yet their heuristic plans ask for "
        f"{size_text(sizes.min())} to {size_text(sizes.max())}. Among forward convolutions alone: "
        f"if {first} runs first, a dims-only cache stores {size_text(stored)}; "
        f"when {then} arrives with the same dims it gets that buffer back and needs {size_text(needed)}: "
        f"{size_text(needed - stored)} short. Handed to cuDNN, that buffer would be written past its end "
        "(labkit's Runner checks the size and refuses; a real cache that trusts its key does not)."
    )
