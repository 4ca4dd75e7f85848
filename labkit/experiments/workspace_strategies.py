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
from ..errors import InvalidSpec
from .checking import CheckResult, as_number, as_word, frame_for, is_close, pending, say
from .core import MIB, experiment
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


def strategies_summary(df) -> Text:
    ok = ok_rows(df)
    m = _strategy(ok, "malloc_per_call")
    a = _strategy(ok, "fixed_arena")
    fast = ok.loc[ok["median_us"].idxmin()]
    wl = df["workload"].iloc[0]
    parts = [
        f"Workload **{wl}** ({int(df['calls'].iloc[0])} calls per strategy after a warm-up pass, {where(df)})."
    ]
    if m is not None and a is not None:
        parts.append(
            f"Host time per call: {m.median_us:.0f} us for malloc per call vs {a.median_us:.0f} us for the fixed arena "
            f"({m.median_us / a.median_us:.1f}x)."
        )
        if "strategy_us_per_call" in ok.columns:
            parts.append(
                f"Inside the strategy alone (its get and put): {m.strategy_us_per_call:.1f} us vs "
                f"{a.strategy_us_per_call:.1f} us per call."
            )
        parts.append(
            f"malloc_per_call made {int(m.alloc_calls)} cudaMalloc calls in the timed pass "
            f"({m.alloc_us_total / 1000:.1f} ms inside cudaMalloc/cudaFree); the arena made {int(a.alloc_calls)}"
            + (
                " (its one allocation happened in the warm-up pass)"
                if "warmup_alloc_calls" in ok.columns and a.warmup_alloc_calls > 0 and a.alloc_calls == 0
                else ""
            )
            + "."
        )
        pools = [r for _, r in ok.iterrows() if allocator_of(r.strategy) != "cudaMalloc" and r.alloc_calls]
        if pools:
            parts.append(
                ", ".join(f"{r.strategy} {int(r.alloc_calls)}" for r in pools)
                + ": those count requests to the pool, not cudaMalloc calls (the pool serves most from blocks "
                "it keeps; how many reached the driver was not counted)."
            )
        if "gpu_us" in ok.columns:
            parts.append(
                f"GPU wall time per call (two events around the run, over the calls): {m.gpu_us:.0f} us for "
                f"malloc per call vs {a.gpu_us:.0f} us for the arena; the difference is not kernel time but the "
                "GPU idling while the host frees and allocates (each cudaFree waits for the GPU)."
            )
        parts.append(
            f"The arena pays in memory instead: it holds {fmt_bytes(a.peak_bytes)} for a workload whose "
            f"largest workspace is {fmt_bytes(m.peak_bytes)}."
        )
    parts.append(f"Lowest median per call: {fast.strategy} ({fast.median_us:.0f} us).")
    return Text(" ".join(parts))


def pressure_summary(df) -> Text:
    ok = ok_rows(df)
    calls = int(df["calls"].iloc[0])
    fell = ok[ok["fallbacks"] > 0]
    held = ok[ok["fallbacks"] == 0]
    parts = [
        f"Workload **{df['workload'].iloc[0]}** ({where(df)}): {calls} calls with almost no device memory free."
    ]
    if len(fell):
        parts.append(
            f"{len(fell)} of {len(ok)} strategies could not get the workspace the best plan wants and fell back "
            f"to a plan needing less ({', '.join(f'{r.strategy}: {int(r.fallbacks)}' for _, r in fell.iterrows())} "
            "fallbacks)."
        )
    for _, r in held.iterrows():
        parts.append(
            f"{r.strategy} never fell back (its memory was taken before the pressure began): "
            f"{fmt_us(r.median_us)} per call, holding {fmt_bytes(r.peak_bytes)}."
        )
    bad = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    if len(bad):
        parts.append(
            f"{len(bad)} failed: " + "; ".join(f"{r.strategy}: {r.reason}" for _, r in bad.iterrows())
        )
    slow = ok.loc[ok["median_us"].idxmax()]
    fast = ok.loc[ok["median_us"].idxmin()]
    parts.append(
        f"Per call: from {fmt_us(fast.median_us)} ({fast.strategy}) to {fmt_us(slow.median_us)} "
        f"({slow.strategy}, {slow.median_us / fast.median_us:.0f}x)."
    )
    return Text(" ".join(parts))


def dims_only_summary(df) -> Text:
    """What a dims-only key would hand out: same dims, different workspaces (from workspace_sizes)."""
    ok = ok_rows(df)
    fp = ok[ok["direction"] == "fprop"].sort_values("heuristic_workspace_bytes")
    lo, hi = fp.iloc[0], fp.iloc[-1]
    return Text(
        f"All {len(ok)} variants below have the **same dims-only key**, yet their heuristic plans ask for "
        f"{fmt_bytes(ok['heuristic_workspace_bytes'].min())} to {fmt_bytes(ok['heuristic_workspace_bytes'].max())}. "
        f"Among forward convolutions alone: if {lo['dtype']} {lo['layout']} runs first, a dims-only cache stores "
        f"{fmt_bytes(lo.heuristic_workspace_bytes)}; when {hi['dtype']} {hi['layout']} arrives with the same dims it gets "
        f"that buffer back and needs {fmt_bytes(hi.heuristic_workspace_bytes)}: "
        f"{fmt_bytes(hi.heuristic_workspace_bytes - lo.heuristic_workspace_bytes)} short. Handed to cuDNN, that buffer "
        "would be written past its end (labkit's Runner checks the size and refuses; a real cache that trusts its key "
        "does not)."
    )


# ---- exercise checks --------------------------------------------------------------------------------


def _match_strategy(df, answer: str):
    a = answer.strip().lower()
    names = list(df["strategy"])
    hit = [n for n in names if n.lower() == a or n.lower().split(" (")[0] == a]
    if not hit:
        raise InvalidSpec(
            "answer",
            answer,
            f"must name a strategy: {', '.join(dict.fromkeys(n.split(' (')[0] for n in names))}",
        )
    return hit


def fastest_strategy(answer: Optional[str] = None, workload: str = "random_shapes", df=None) -> CheckResult:
    """Lesson 02: which strategy has the lowest median host time per call on ``workload``? Any
    strategy within 5% of the lowest counts (differences that small are noise)."""
    df = ok_rows(frame_for(df, "strategies", workload=workload, repeats=strategies_repeats(workload)))
    if answer is None:
        return pending(
            f"Which strategy has the lowest median time per call on '{workload}'?",
            "the host-time panel: the shortest 'host median' bar.",
        )
    hit = _match_strategy(df, as_word(answer, "a strategy", "fixed_arena"))
    best = df["median_us"].min()
    rows = df[df["strategy"].isin(hit)]
    mine = rows["median_us"].min()
    near = df[df["median_us"] <= best * 1.05]["strategy"].tolist()
    if mine <= best * 1.05:
        r = rows.loc[rows["median_us"].idxmin()]
        return say(
            True,
            f"{r['strategy']}: {fmt_us(mine)} per call ({where(df)}), {int(r['alloc_calls'])} workspace allocations "
            f"({allocator_of(r['strategy'])}) in {int(r['calls'])} convolutions; within 5% of the lowest: {', '.join(near)}.",
        )
    return say(
        False,
        f"{hit[0]} takes {fmt_us(mine)} per call, {mine / best:.2f}x the lowest. Which strategies "
        "never call the allocator once warm?",
    )


def malloc_slowdown(answer=None, df=None) -> CheckResult:
    """Lesson 02: on 'one_conv', how many times slower per call (median) is malloc_per_call than
    the fixed arena? (within 10%)"""
    df = ok_rows(frame_for(df, "strategies", workload="one_conv", repeats=strategies_repeats("one_conv")))
    m = df[df["strategy"].str.startswith("malloc_per_call")].iloc[0]
    a_ = df[df["strategy"].str.startswith("fixed_arena")].iloc[0]
    truth = m["median_us"] / a_["median_us"]
    if answer is None:
        return pending(
            "How many times slower per call is malloc_per_call than fixed_arena on 'one_conv'?",
            "divide the two medians (host time per call).",
        )
    a = as_number(answer, "a ratio", 2.5)
    if is_close(a, truth, 0.10):
        return say(
            True,
            f"{fmt_us(m['median_us'])} / {fmt_us(a_['median_us'])} = {truth:.1f}x: "
            f"{int(m['alloc_calls'])} cudaMalloc+cudaFree pairs on the hot path, and cudaFree waits for the GPU.",
        )
    if is_close(1 / a, truth, 0.10):
        return say(False, "that is the inverse ratio: malloc_per_call over fixed_arena.")
    return say(
        False, f"{a:g}x is {'too high' if a > truth else 'too low'}; use the median host time of each."
    )


def dims_only_shortfall(answer=None, df=None) -> CheckResult:
    """Lesson 02: a cache keyed by dims only first stores the workspace of fp16 NHWC fprop's
    heuristic plan; then fp32 NHWC fprop (same dims) arrives. How many bytes short is the buffer
    it hands back? (within 1%)"""
    df = ok_rows(frame_for(df, "workspace_sizes"))
    fp = df[df["direction"] == "fprop"].set_index(["dtype", "layout"])["heuristic_workspace_bytes"]
    first, second = float(fp[("fp16", "NHWC")]), float(fp[("fp32", "NHWC")])
    truth = max(second - first, 0.0)
    if answer is None:
        return pending(
            "How many bytes short is the buffer a dims-only key hands fp32 NHWC after fp16 NHWC?",
            "both are in the fprop panel (NHWC bars); subtract, in bytes.",
        )
    a = as_number(answer, "bytes", 1000)
    if is_close(a, truth, 0.01) or (truth == 0 and a == 0):
        return say(
            True,
            f"fp32 NHWC needs {second:,.0f} B, the cached buffer holds {first:,.0f} B: {truth:,.0f} B "
            f"({fmt_bytes(truth)}) short. The full key (dtype, layout, direction, plan) would have missed and "
            "allocated the right size.",
        )
    if is_close(a * 2**20, truth, 0.01):
        return say(False, "that is MiB; answer in bytes.")
    return say(
        False,
        f"{a:,.0f} B is {'too much' if a > truth else 'too little'}: subtract the fp16 NHWC fprop workspace "
        "from the fp32 NHWC fprop one.",
    )


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
EXERCISES = (fastest_strategy, malloc_slowdown, dims_only_shortfall)
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
