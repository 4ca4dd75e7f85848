"""Lesson 02, workspace strategies: fixed arena, malloc per call, keyed cache, per-stream scratchpad
and the caching pools on one workload, and under memory pressure.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

from typing import Optional

import plotly.graph_objects as go

from ..draw.plots import (
    COLORS,
    finish,
    fmt_bytes,
    fmt_us,
    grid,
    log_axis,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
)
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from .checking import CheckResult, emit, say
from .core import MIB, experiment, result
from .exercise import Exercise, equal, number, one_of
from .panel_config import plain_panel


# ---- experiments ------------------------------------------------------------------------------
@experiment
def strategies(workload: str = "one_conv", repeats: int = 20):
    """Every workspace strategy on one workload (`labkit.gpu.workloads`): per-call host time, GPU time,
    allocations, peak and held workspace bytes."""
    from ..gpu import workloads

    return workloads.run_all(workload, repeats)


def strategies_repeats(workload: str) -> int:
    """Passes a ``strategies`` call records for a workload (ResNet-50 passes are long: 3)."""
    return 3 if workload.startswith("resnet") else 20


# ---- charts --------------------------------------------------------------------------------


STRATEGIES_GRID = grid(
    rows=2,
    cols=3,
    shared_yaxes=True,
    horizontal_spacing=0.035,
    vertical_spacing=0.2,
    subplot_titles=(
        "host time per call",
        "inside the strategy's get/put",
        "GPU wall time per call",
        "workspace allocations",
        "workspace memory held",
        "fallbacks to a smaller plan",
    ),
)
#: label font of the dots and bars (px)
LABEL_SIZE = 10


def _log_range(values) -> dict:
    """A log axis over ``values`` with room either side for a dot's label (a few tick labels)."""
    import math

    v = [x for x in values if x is not None and x > 0]
    if not v:
        return dict(type="log")
    lo, hi = math.log10(min(v)), math.log10(max(v))
    pad = max(0.35, 0.2 * (hi - lo))
    return dict(type="log", **{k: val for k, val in log_axis(v, max_ticks=4).items() if k != "range"}) | dict(
        range=[lo - pad, hi + pad]
    )


def _count(v) -> str:
    return "" if v is None else f"{int(v)}"


def strategies_chart(df) -> go.Figure:
    """Every workspace strategy on one workload, one row of dots (times, log axes, labelled) and one
    of bars (counts and bytes, linear axes from zero, every bar labelled: "0" and "0 B" drawn).

    Traces: 0 host median per call (us; whisker to the p95), 1 host time inside the strategy's
    get/put per call (us), 2 GPU wall time per call (us), 3 allocator calls in the timed pass,
    4 allocator calls in the warm-up pass, 5 peak held (MiB), 6 held after the run (MiB),
    7 fallbacks in the timed pass. A strategy that did not run has no dot and no bar, and its
    labels say "not run"."""
    names = list(df["strategy"])
    ok = list((df["status"] == "ok") if "status" in df.columns else [True] * len(df))
    col = lambda c, scale=1.0: [  # noqa: E731
        (num(v) / scale if num(v) is not None else None) if k else None
        for v, k in zip(df[c] if c in df.columns else [None] * len(df), ok)
    ]
    missing = lambda fmt: lambda vals: [fmt(v) if k else "not run" for v, k in zip(vals, ok)]  # noqa: E731
    fig = new_figure(**STRATEGIES_GRID)
    calls = int(df["calls"].iloc[0]) if "calls" in df.columns and len(df) else 0
    median, p95 = col("median_us"), col("p95_us")
    dot = dict(
        mode="markers+text",
        textposition="top center",
        textfont=dict(size=LABEL_SIZE),
        cliponaxis=False,
        showlegend=False,  # the subplot titles name them
    )
    fig.add_trace(
        go.Scatter(
            y=names,
            x=median,
            name="host time per call: median, whisker to p95",
            marker=dict(color=COLORS["primary"], size=8),
            error_x=dict(
                type="data",
                symmetric=False,
                array=[(p - m) if p is not None and m is not None else 0 for m, p in zip(median, p95)],
                arrayminus=[0] * len(names),
                color=COLORS["primary"],
                thickness=1.5,
                width=3,
            ),
            text=missing(fmt_us)(median),
            customdata=[fmt_us(p) for p in p95],
            hovertemplate="%{y}: median %{x:.1f} us per call, p95 %{customdata}<extra></extra>",
            **dot,
        ),
        row=1,
        col=1,
    )
    inside = col("strategy_us_per_call")
    fig.add_trace(
        go.Scatter(
            y=names,
            x=inside,
            name="inside the strategy's get/put (mean per call)",
            marker=dict(color=COLORS["dark"], size=8, symbol="diamond"),
            text=missing(fmt_us)(inside),
            hovertemplate="%{y}: %{x:.1f} us per call inside the strategy's get/put<extra></extra>",
            **dot,
        ),
        row=1,
        col=2,
    )
    gpu = col("gpu_us")
    fig.add_trace(
        go.Scatter(
            y=names,
            x=gpu,
            name="GPU wall time per call (kernels + idle)",
            marker=dict(color=COLORS["purple"], size=8, symbol="square"),
            text=missing(fmt_us)(gpu),
            hovertemplate="%{y}: %{x:.1f} us per call between two events around the run: kernels plus "
            "time the GPU waited for the host<extra></extra>",
            **dot,
        ),
        row=1,
        col=3,
    )
    whose = [allocator_of(n) for n in names]
    pooled = ["/" if w in POOL_ALLOCATORS.values() else "" for w in whose]
    bar = dict(
        orientation="h",
        textposition="outside",
        constraintext="none",
        cliponaxis=False,
        textfont=dict(size=LABEL_SIZE),
    )
    for i, (column, label, color) in enumerate(
        (("alloc_calls", "timed pass", COLORS["bad"]), ("warmup_alloc_calls", "warm-up pass", "#ff9896"))
    ):
        vals = col(column)
        fig.add_trace(
            go.Bar(
                y=names,
                x=[v if k else 0 for v, k in zip(vals, ok)],
                name=f"allocations ({label})",
                marker_color=color,
                marker_pattern_shape=pooled,
                text=missing(_count)(vals),
                customdata=whose,
                hovertemplate=f"%{{y}}: %{{x}} workspace allocations in the {label}, counted as calls of "
                "%{customdata}<extra></extra>",
                **bar,
            ),
            row=2,
            col=1,
        )
    for column, label, color in (
        ("peak_bytes", "peak held", COLORS["secondary"]),
        ("held_after_bytes", "held after the run", "#ffbb78"),
    ):
        raw = col(column)
        fig.add_trace(
            go.Bar(
                y=names,
                x=[v / MIB if v is not None else 0 for v in raw],
                name=label,
                marker_color=color,
                text=missing(fmt_bytes)(raw),
                hovertemplate=f"%{{y}}: {label} %{{text}}<extra></extra>",
                **bar,
            ),
            row=2,
            col=2,
        )
    fell = col("fallbacks")
    fig.add_trace(
        go.Bar(
            y=names,
            x=[v if v is not None else 0 for v in fell],
            name="fallbacks (timed pass)",
            showlegend=False,
            marker_color=COLORS["muted"],
            text=missing(lambda v: f"{int(v)} of {calls}")(fell),
            hovertemplate="%{y}: %{x} of the calls ran a plan with a smaller workspace than the heuristic's"
            "<extra></extra>",
            **bar,
        ),
        row=2,
        col=3,
    )
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    # one scale per column whatever the workload: times on log axes (dots), counts and bytes linear
    top = lambda vals, floor=1.0: max([v for v in vals if v is not None] + [floor])  # noqa: E731
    fig.update_xaxes(
        title_text="microseconds per call (us)", row=1, col=1, **_log_range([m for m in median] + p95)
    )
    fig.update_xaxes(title_text="microseconds per call (us)", row=1, col=2, **_log_range(inside))
    fig.update_xaxes(title_text="microseconds per call (us)", row=1, col=3, **_log_range(gpu))
    allocs = col("alloc_calls") + col("warmup_alloc_calls")
    fig.update_xaxes(
        title_text="allocations (count)", type="linear", range=[0, 1.3 * top(allocs)], nticks=4, row=2, col=1
    )
    held = [v / MIB for v in col("peak_bytes") + col("held_after_bytes") if v is not None]
    fig.update_xaxes(
        title_text="workspace held (MiB)", type="linear", range=[0, 1.45 * top(held)], nticks=4, row=2, col=2
    )
    fig.update_xaxes(
        title_text="fallbacks (count)", type="linear", range=[0, 1.45 * max(calls, 1)], nticks=4, row=2, col=3
    )
    wl = str(df["workload"].iloc[0]) if len(df) else "?"
    detail = (
        f"workload '{wl}': {calls} convolution calls per strategy after a warm-up pass; host time = strategy + "
        "launch; GPU wall time = events around the run / calls: kernels + GPU idle waiting for the host"
    )
    note = (
        "allocations: cudaMalloc calls for the strategies that own their memory; hatched, for cupy_pool / async_pool: "
        "requests to the pool (most served from its cache without reaching cudaMalloc)"
    )
    bad = not_ok_note(df, ("strategy",))
    return finish(
        fig,
        df,
        f"Workspace strategies on '{wl}'",
        detail,
        note=note + (" · " + bad if bad else ""),
        height=820,
        legend_rows=1,
    )


#: the strategies whose workspace allocations are requests to a caching pool, not cudaMalloc calls
POOL_ALLOCATORS = {"cupy_pool": "MemoryPool.malloc", "async_pool": "MemoryAsyncPool.malloc"}


def allocator_of(strategy: str) -> str:
    """Whose calls a strategy's ``alloc_calls`` counts: a pool's malloc for the caching pools,
    cudaMalloc for the strategies that allocate their own memory."""
    return POOL_ALLOCATORS.get(str(strategy).split(" ")[0], "cudaMalloc")


# ---- summaries --------------------------------------------------------------------------------


def _strategy(df, name):
    rows = df[df["strategy"].str.split(" ").str[0] == name]
    return rows.iloc[0] if len(rows) else None


def _joined(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def noise_sentence(df) -> str:
    """Which strategies a learner cannot tell apart by host time: those whose median lies within
    the lowest median's spread (from the lowest median to its p95)."""
    ok = ok_rows(df)
    best = ok.loc[ok["median_us"].idxmin()]
    tied = ok[ok["median_us"] <= best["p95_us"]]
    text = (
        "Noise: a strategy's calls spread from its median to its p95 (the whisker); the lowest median, "
        f"{fmt_us(best['median_us'])} ({best['strategy']}), has its p95 at {fmt_us(best['p95_us'])}"
    )
    if len(tied) > 1:
        return text + (
            f", and {len(tied)} of {len(ok)} medians lie within that ({_joined(tied['strategy'])}): at this "
            "noise they cost the same."
        )
    return text + ", and no other median lies within it."


def strategies_summary(df) -> Text:
    ok = ok_rows(df)
    m = _strategy(ok, "malloc_per_call")
    a = _strategy(ok, "fixed_arena")
    wl = df["workload"].iloc[0]
    parts = [
        f"Workload **{wl}** ({int(df['calls'].iloc[0])} calls per strategy after a warm-up pass, "
        f"{where(df)})."
    ]
    if m is not None and a is not None:
        parts.append(
            f"Host time per call (median): {fmt_us(m.median_us)} for malloc per call, {fmt_us(a.median_us)} for "
            f"the fixed arena ({m.median_us / a.median_us:.1f}x)."
        )
        if "strategy_us_per_call" in ok.columns:
            parts.append(
                f"Inside the strategy alone (its get and put): {fmt_us(m.strategy_us_per_call)} against "
                f"{fmt_us(a.strategy_us_per_call)} per call."
            )
        arena_first = (
            " (its one allocation happened in the warm-up pass)"
            if "warmup_alloc_calls" in ok.columns and a.warmup_alloc_calls > 0 and a.alloc_calls == 0
            else ""
        )
        parts.append(
            f"malloc_per_call made {int(m.alloc_calls)} cudaMalloc calls in the timed pass "
            f"({m.alloc_us_total / 1000:.1f} ms inside cudaMalloc/cudaFree); the arena made "
            f"{int(a.alloc_calls)}{arena_first}."
        )
        pools = [r for _, r in ok.iterrows() if allocator_of(r.strategy) != "cudaMalloc" and r.alloc_calls]
        if pools:
            parts.append(
                ", ".join(f"{r.strategy} {int(r.alloc_calls)}" for r in pools)
                + ": those count requests to the pool, not cudaMalloc calls (the pool serves most from "
                "blocks it keeps; how many reached the driver was not counted)."
            )
        if "gpu_us" in ok.columns:
            idle = m.gpu_us > 1.2 * a.gpu_us
            parts.append(
                f"GPU wall time per call (two events around the run, over the calls): {fmt_us(m.gpu_us)} for "
                f"malloc per call, {fmt_us(a.gpu_us)} for the arena"
                + (
                    "; the difference is not kernel time but the GPU idling while the host frees and "
                    "allocates (each cudaFree waits for the GPU)."
                    if idle
                    else "."
                )
            )
        parts.append(
            f"The arena pays in memory instead: it holds {fmt_bytes(a.peak_bytes)} for a workload whose "
            f"largest workspace is {fmt_bytes(m.peak_bytes)}."
        )
    parts.append(noise_sentence(df))
    return Text(" ".join(parts))


def _one_conv():
    """The `one_conv` result, when at hand without measuring (else None)."""
    try:
        return result(
            "strategies", at_hand_only=True, workload="one_conv", repeats=strategies_repeats("one_conv")
        )
    except LabkitError:
        return None


def pressure_summary(df) -> Text:
    """What the `pressure` workload shows, each surprise explained from the measurement: who fell
    back and why (a strategy that makes its buffers at their first call makes them under the
    pressure), what a failed allocation costs in CuPy's pool, and who was untouched."""
    from ..gpu.workloads import PRESSURE_FREE_BYTES

    ok = ok_rows(df)
    calls = int(df["calls"].iloc[0])
    parts = [
        f"Workload **{df['workload'].iloc[0]}** ({where(df)}): {calls} calls with only "
        f"{fmt_bytes(PRESSURE_FREE_BYTES)} of device memory left free."
    ]
    fell = ok[ok["fallbacks"] > 0]
    held = ok[ok["fallbacks"] == 0]
    one = _one_conv()
    wanted = _strategy(ok_rows(one), "malloc_per_call").peak_bytes if one is not None else None
    want = f" ({fmt_bytes(wanted)})" if wanted else ""
    if len(fell):
        parts.append(
            f"{len(fell)} of {len(ok)} strategies could not get the workspace the heuristic's plan wants{want} "
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
        parts.append(
            f"{names} make each buffer at the first call that needs it, not before the run: here that first "
            "call came after the pressure began, so the heuristic plan's buffer was never made. Each call asks "
            f"again (a failed cudaMalloc: {fmt_us(lazy['alloc_us_total'].min() / calls)} to "
            f"{fmt_us(lazy['alloc_us_total'].max() / calls)} per call inside the allocator), falls back, and "
            f"runs the plan whose {fmt_bytes(lazy['peak_bytes'].max())} buffer is all they ever held."
        )
    for _, r in held.iterrows():
        parts.append(
            f"{r.strategy} never fell back: its memory was taken when it was made, before the pressure began "
            f"({fmt_us(r.median_us)} per call, holding {fmt_bytes(r.peak_bytes)})."
        )
    pool = _strategy(ok, "cupy_pool")
    others = ok[ok["strategy"].str.split(" ").str[0] != "cupy_pool"]
    if pool is not None and len(others) and pool.median_us > 10 * others["median_us"].max():
        parts.append(
            f"cupy_pool takes {fmt_us(pool.median_us)} per call (median) and spends {fmt_us(pool.strategy_us_per_call)} "
            "per call (mean) inside its get/put, on the host: CuPy's pool answers a failed cudaMalloc by freeing its cached blocks and "
            "trying again, then by running Python's garbage collector (gc.collect(), a pass over every Python "
            "object of this process) and trying once more, before it raises (SingleDeviceMemoryPool._try_malloc "
            "in CuPy's memory.pyx)."
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
    return Text(" ".join(parts))


def dims_only_summary(df) -> Text:
    """What a dims-only key would hand out: same dims, different workspaces (from workspace_sizes)."""
    ok = ok_rows(df)
    fp = ok[ok["direction"] == "fprop"].sort_values("heuristic_workspace_bytes")
    lo, hi = fp.iloc[0], fp.iloc[-1]
    sizes = ok["heuristic_workspace_bytes"]
    return Text(
        f"All {len(ok)} variants below have the **same dims-only key**, yet their heuristic plans ask for "
        f"{fmt_bytes(sizes.min())} to {fmt_bytes(sizes.max())}. Among forward convolutions alone: if "
        f"{lo['dtype']} {lo['layout']} runs first, a dims-only cache stores {fmt_bytes(lo.heuristic_workspace_bytes)}; "
        f"when {hi['dtype']} {hi['layout']} arrives with the same dims it gets that buffer back and needs "
        f"{fmt_bytes(hi.heuristic_workspace_bytes)}: "
        f"{fmt_bytes(hi.heuristic_workspace_bytes - lo.heuristic_workspace_bytes)} short. Handed to cuDNN, that "
        "buffer would be written past its end (labkit's Runner checks the size and refuses; a real cache that "
        "trusts its key does not)."
    )


# ---- exercises -------------------------------------------------------------------------------------


def _frame(workload: str):
    return ok_rows(result("strategies", workload=workload, repeats=strategies_repeats(workload)))


def _slowdown() -> float:
    df = _frame("one_conv")
    return float(_strategy(df, "malloc_per_call").median_us / _strategy(df, "fixed_arena").median_us)


def _slowdown_why(truth: float) -> str:
    df = _frame("one_conv")
    m, a = _strategy(df, "malloc_per_call"), _strategy(df, "fixed_arena")
    return (
        f"measured {fmt_us(m.median_us)} against {fmt_us(a.median_us)} per call: {truth:.1f}x ({where(df)}). "
        f"Inside the strategy alone malloc_per_call spends {fmt_us(m.strategy_us_per_call)} per call "
        f"(cudaMalloc, then a cudaFree that waits for the convolution just launched), the arena "
        f"{fmt_us(a.strategy_us_per_call)}. Noise: the arena's calls reach {fmt_us(a.p95_us)} at their p95, "
        "far below malloc_per_call's median."
    )


def _slowdown_wrong(answer: float, truth: float) -> Optional[str]:
    if answer <= 0:
        return "a slowdown is a ratio above zero (malloc_per_call's time over fixed_arena's)."
    if answer > 2 * truth:
        return f"{answer:g}x is more than twice what was measured: each call still runs the same convolution."
    return f"{answer:g}x is less than half of what was measured."


MALLOC_SLOWDOWN = Exercise(
    name="malloc_slowdown",
    lesson="02",
    kind="predict",
    question=(
        "Before the chart: on one_conv, how many times slower per call (median host time) will "
        "malloc_per_call be than fixed_arena? A rough number: within a factor of two of the measurement counts."
    ),
    truth=_slowdown,
    parse=number("a ratio"),
    judge=lambda answer, truth: truth / 2 <= answer <= truth * 2,
    why=_slowdown_why,
    hints=(
        "Per call, the arena only hands out a pointer; malloc_per_call adds a cudaMalloc and a cudaFree. The "
        "convolution itself runs about 50 us on the GPU: how long might a driver call that waits for it take?",
        "cudaFree returns only once the GPU has finished the convolution just launched, so the host waits for "
        "every call; count the convolution's time once more, plus the allocation.",
    ),
    wrong=_slowdown_wrong,
    example=1.5,
)


def _parse_strategy(answer) -> str:
    """A strategy's label as the chart shows it (any case; a unique beginning will do)."""
    names = list(_frame("growing_batch")["strategy"])
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidSpec(
            "answer", answer, "must be a strategy's name as the chart shows it, e.g. 'cupy_pool'"
        )
    a = " ".join(answer.split()).lower()
    hit = [n for n in names if n.lower() == a] or [n for n in names if n.lower().startswith(a)]
    if len(hit) != 1:
        raise InvalidSpec(
            "answer",
            answer,
            "must name one strategy as the chart shows it: " + ", ".join(repr(n) for n in names),
        )
    return hit[0]


def _falls_back() -> str:
    df = _frame("growing_batch")
    return str(df.loc[df["fallbacks"].idxmax(), "strategy"])


def _falls_back_why(truth: str) -> str:
    df = _frame("growing_batch")
    r = df[df["strategy"] == truth].iloc[0]
    biggest = _strategy(df, "malloc_per_call").peak_bytes  # malloc_per_call holds one workspace at a time
    rest = df[df["strategy"] != truth]
    return (
        f"{truth} ran {int(r.fallbacks)} of {int(r.calls)} calls with a smaller plan ({where(df)}). Its budget "
        f"is smaller than the largest workspace this batch reaches ({fmt_bytes(biggest)}): a request larger "
        "than the whole budget cannot be kept (the Runner falls back), and to make room it evicted "
        f"{int(r.evictions)} buffers. Its GPU wall time per call: {fmt_us(r.gpu_us)}, against "
        f"{fmt_us(rest['gpu_us'].median())} for the median strategy."
    )


FALLS_BACK = Exercise(
    name="fallback_strategy",
    lesson="02",
    kind="explore",
    question=(
        "Move the strategies panel to the growing_batch workload (batch 1, 2, 4, ... 64 of one convolution). "
        "One strategy runs some of its calls with a smaller plan than the heuristic's. Which one? "
        "(its name as the chart shows it)"
    ),
    truth=_falls_back,
    parse=_parse_strategy,
    judge=equal,
    why=_falls_back_why,
    hints=(
        "The panel's bottom right column counts each strategy's fallbacks.",
        "A strategy with a byte budget cannot keep a workspace larger than its whole budget.",
    ),
    wrong=lambda answer, truth: f"{answer} ran every call with the plan it asked for first.",
    leaks=lambda truth: (r"on 'growing_batch'", r"Workload growing_batch"),
    wrong_answers=lambda truth: [n for n in ("fixed_arena (1024 MiB)", "malloc_per_call") if n != truth],
)

#: the reasons offered for cupy_pool's time under memory pressure
POOL_REASONS = {
    "garbage_collector": "on each failed cudaMalloc, CuPy's pool frees its cached blocks, runs Python's garbage "
    "collector and tries again",
    "slow_plan": "the smaller plan it falls back to is that much slower on the GPU",
    "cudafree_wait": "each call's cudaFree waits for the GPU to finish",
    "full_memory": "a GPU with almost no free memory runs every kernel more slowly",
}


def _pool_reason() -> str:
    pool = _strategy(_frame("pressure"), "cupy_pool")
    return "garbage_collector" if pool.strategy_us_per_call >= 0.5 * pool.median_us else "slow_plan"


def _pool_numbers():
    df = _frame("pressure")
    pool = _strategy(df, "cupy_pool")
    fell = df[(df["fallbacks"] > 0) & (df["strategy"] != pool.strategy)]
    return df, pool, fell


def _pool_why(truth: str) -> str:
    df, pool, _ = _pool_numbers()
    return (
        f"cupy_pool spends {fmt_us(pool.strategy_us_per_call)} of each call inside its get/put, on the host "
        f"(median per call {fmt_us(pool.median_us)}, {where(df)}). CuPy's SingleDeviceMemoryPool._try_malloc "
        "answers a failed cudaMalloc by freeing its cached blocks and retrying, then by running gc.collect() "
        "(a pass over every Python object of the process) and retrying once more; only then does it raise, "
        "and the Runner falls back. Under pressure every call goes through that."
    )


def _pool_wrong(answer: str, truth: str) -> Optional[str]:
    df, pool, fell = _pool_numbers()
    arena = _strategy(df, "fixed_arena")
    malloc = _strategy(df, "malloc_per_call")
    return {
        "slow_plan": (
            f"the other strategies that fell back took {fmt_us(fell['median_us'].min())} to "
            f"{fmt_us(fell['median_us'].max())} per call, and cupy_pool spent {fmt_us(pool.strategy_us_per_call)} "
            "of each call on the host, inside its get/put, not on the GPU."
        ),
        "cudafree_wait": (
            f"that is malloc_per_call's cost ({fmt_us(malloc.median_us)} per call here); cupy_pool's put hands "
            "the block back to its pool and calls no cudaFree."
        ),
        "full_memory": f"fixed_arena ran under the same pressure at {fmt_us(arena.median_us)} per call.",
    }.get(answer)


POOL_UNDER_PRESSURE = Exercise(
    name="pool_under_pressure",
    lesson="02",
    kind="explain",
    question="Under memory pressure, cupy_pool takes far longer per call than every other strategy. Why?",
    truth=_pool_reason,
    parse=one_of(tuple(POOL_REASONS), "one of the reasons"),
    judge=equal,
    why=_pool_why,
    hints=(
        "Compare cupy_pool's dot under 'inside the strategy's get/put' with its host time per call: is the "
        "time spent on the GPU, or in Python on the host?",
        "What does CuPy's MemoryPool do when cudaMalloc fails, before it gives up?",
    ),
    wrong=_pool_wrong,
    choices=POOL_REASONS,
)


# ---- hands-on: a strategy of your own ---------------------------------------------------------------
#: the reference solution of lesson 02's hands-on cell (`labkit.session.handson`)
OWN_STRATEGY_SOURCE = '''\
from labkit.gpu.workspace import Strategy


class MyStrategy(Strategy):
    """One buffer per (stream, size), kept until close: no allocation once warm, and a stream
    never gets bytes another stream's call may still be using."""

    name = "my_strategy"

    def __init__(self):
        super().__init__()
        self.kept = {}  # (stream, bytes) -> device pointer

    def _get(self, req):
        key = (req.stream_ptr, req.nbytes)
        if key not in self.kept:
            self.kept[key] = self._malloc(req.nbytes, "my workspace")
        return self.kept[key], req.nbytes

    def _close(self):
        for (_, nbytes), ptr in self.kept.items():
            self._free(ptr, nbytes)
        self.kept.clear()
'''
OWN_STRATEGY_CHECK_SOURCE = "assert check.own_strategy(MyStrategy)\n"


def _verdict_line(v) -> str:
    races = "shares bytes across streams" if v.races else "no race"
    left = fmt_bytes(v.leaked_bytes) if v.leaks else "0 B"
    return f"  {v.strategy}: peak {fmt_bytes(v.peak_bytes)}, {left} left after close, {races}"


def own_strategy(strategy=None) -> CheckResult:
    """Lesson 02 hands-on: run your `Strategy` through the Runner beside the built-in ones (GPU).

    Args:
        strategy: your `labkit.gpu.workspace.Strategy` subclass.

    Returns:
        A `CheckResult`: correct when every output matches float64, nothing is left after
        ``close()`` and no call got bytes another stream's call could still be using.
    """
    from .. import env

    m = env.mode()
    if not m.live:
        return emit(
            False,
            f"this check runs your strategy on a CUDA GPU; labkit is in recorded mode ({m.reason}).",
            lead="skipped",
        )
    if strategy is None:
        return emit(
            False, "pass your Strategy subclass: check.own_strategy(MyStrategy)", lead="no answer yet"
        )
    from ..gpu import strategy_check

    mine, *others = strategy_check.compare(strategy)
    lines = []
    if mine.error:
        lines.append(f"your strategy raised {mine.error} (get must return (device pointer, bytes))")
    if mine.too_small:
        lines.append(f"too small: {mine.too_small}")
    if not mine.outputs_ok and not (mine.error or mine.too_small):
        lines.append(f"wrong outputs: worst relative error {mine.worst_rel_error:.2e} against float64")
    if mine.leaks:
        lines.append(
            f"leak: {fmt_bytes(mine.leaked_bytes)} of device memory still taken after close() (your books say "
            f"{fmt_bytes(mine.books_held_after_close)} held): free every buffer in _close"
        )
    for r in mine.races[:1]:
        lines.append(
            f"race: a call on one stream got {fmt_bytes(r.overlap_bytes)} that a call on another stream was still "
            f"to use: the second could start {fmt_us(r.lead_us)} before the first had finished with them. A "
            "workspace is its call's until the kernels have run on the call's stream, not until put (put comes "
            "as soon as they are queued)"
        )
    table = "\n".join(_verdict_line(v) for v in [mine, *others])
    if mine.ok:
        return say(
            True,
            f"{mine.calls} calls, every output right against float64 (worst relative error "
            f"{mine.worst_rel_error:.1e}); peak {fmt_bytes(mine.peak_bytes)} held (the largest workspace asked: "
            f"{fmt_bytes(mine.largest_request_bytes)}); nothing left after close(); no race on two streams; "
            f"{fmt_us(mine.host_us_per_call)} host time per call. Beside the built-ins:\n{table}",
        )
    return say(False, "; ".join(lines) + ".\nThe built-ins, checked the same way:\n" + table)


# ---- the recorded grid ---------------------------------------------------------------------------
WORKLOADS = (
    "one_conv",
    "resnet50_fp16_nhwc",
    "resnet50_fp32_nchw",
    "random_shapes",
    "growing_batch",
    "pressure",
)


def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base call only."""
    return [
        ("strategies", dict(workload=w, repeats=strategies_repeats(w)))
        for w in (WORKLOADS[:1] if quick else WORKLOADS)
    ]


LESSON = "02"
CHARTS = {"strategies": (strategies_chart, 8, strategies_summary)}
EXERCISES = (MALLOC_SLOWDOWN, FALLS_BACK, POOL_UNDER_PRESSURE)
#: hands-on cells: name -> (reference solution source, what it needs)
HANDS_ON = {
    "own_strategy": (OWN_STRATEGY_SOURCE, "a CUDA GPU (live mode)"),
    "check_own_strategy": (OWN_STRATEGY_CHECK_SOURCE, "a CUDA GPU (live mode) and your MyStrategy"),
}
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (own_strategy,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "strategies": plain_panel(
        "strategies",
        "Workspace strategies",
        dict(workload="one_conv"),
        "workload one_conv",
        lambda s: dict(workload=s["workload"], repeats=strategies_repeats(s["workload"])),
    )
}
