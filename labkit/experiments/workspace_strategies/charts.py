"""Lesson 02's chart: every strategy on one workload, times as labelled dots on log axes, counts and
bytes as labelled bars from zero."""

from __future__ import annotations

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    finish,
    fmt_us,
    grid,
    log_axis,
    new_figure,
    not_ok_note,
    num,
)
from ...draw.units import PLAIN_TICKS, SIZE_AXIS, in_unit
from ..core import MIB

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


def microseconds(v) -> str:
    """A time label in the time axes' unit: ``10,160 us``."""
    return in_unit(v, "us")


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
            text=missing(microseconds)(median),
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
            text=missing(microseconds)(inside),
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
            text=missing(microseconds)(gpu),
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
                text=missing(lambda v: in_unit(v, SIZE_AXIS))(raw),
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
        title_text="workspace held (MiB)",
        type="linear",
        range=[0, 1.45 * top(held)],
        nticks=4,
        row=2,
        col=2,
        **PLAIN_TICKS,
    )
    fig.update_xaxes(
        title_text="fallbacks (count)", type="linear", range=[0, 1.45 * max(calls, 1)], nticks=4, row=2, col=3
    )
    wl = str(df["workload"].iloc[0]) if len(df) else "?"
    detail = (
        f"workload '{wl}': {calls} convolution calls per strategy after a warm-up pass; host time = "
        "strategy + "
        "launch; GPU wall time = events around the run / calls: kernels + GPU idle waiting for the host"
    )
    note = (
        "allocations: cudaMalloc calls that returned memory (a failed one is not counted) for the "
        "strategies that own their memory; hatched, for "
        "cupy_pool / async_pool: "
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
