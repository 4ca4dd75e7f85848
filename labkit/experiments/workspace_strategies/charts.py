"""Lesson 02's chart: every strategy on one workload. On top, the three times per call as labelled
marks on one log axis; under it, allocations, memory held and fallbacks as labelled bars from zero.
Each part has its own legend, drawn right above it."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import List, Optional

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    NOTE_CHARS,
    finish,
    grid,
    new_figure,
    not_ok_note,
    num,
    row_bands,
    wrap,
)
from ...draw.units import PLAIN_TICKS, SIZE_AXIS, in_unit, log_ticks
from ..core import MIB

# ---- the layout, in pixels ---------------------------------------------------------------------

#: height of the time plot per strategy: three marks one under the other, a label's height apart (px)
TIME_ROW_PX = 48
#: height of a bar plot per strategy: two bars, a label's height apart (px)
BAR_ROW_PX = 34
#: room between the time plot and the bar plots: the time axis, its note, the bar plots' legends (px)
GAP_PX = 170
#: strategies the grid is laid out for (`labkit.gpu.workspaces.workloads.BENCH_STRATEGIES`)
ROWS = 8
#: font size of every mark's label, legend and axis (px): readable at 1366x768
FONT_PX = 12
#: font size of the marks' value labels (px)
LABEL_PX = 11
#: rows of the figure's first legend (the time plot's: its title, then its entries)
LEGEND_ROWS = 2
#: the title block and the time plot's legend above the plots (`labkit.draw.plots.finish`, px)
TOP_PX = 112 + 22 * LEGEND_ROWS
#: the part of the figure the plots take: its height less the title block and the bottom margin (px)
PLOTS_PX = ROWS * (TIME_ROW_PX + BAR_ROW_PX) + GAP_PX

STRATEGIES_GRID = grid(
    rows=2,
    cols=3,
    specs=[[{"colspan": 3}, None, None], [{}, {}, {}]],
    shared_yaxes=True,
    horizontal_spacing=0.05,
    vertical_spacing=GAP_PX / PLOTS_PX,
    row_heights=[TIME_ROW_PX / (TIME_ROW_PX + BAR_ROW_PX), BAR_ROW_PX / (TIME_ROW_PX + BAR_ROW_PX)],
)

#: the strategies whose workspace allocations are requests to a caching pool, not cudaMalloc calls
POOL_ALLOCATORS = {"cupy_pool": "MemoryPool.malloc", "async_pool": "MemoryAsyncPool.malloc"}


def allocator_of(strategy: str) -> str:
    """Whose calls a strategy's ``alloc_calls`` counts.

    Args:
        strategy: the strategy as a result names it (its options after a space).

    Returns:
        A pool's malloc for the caching pools; "cudaMalloc" for the strategies that allocate their own.
    """
    return POOL_ALLOCATORS.get(str(strategy).split(" ")[0], "cudaMalloc")


# ---- the table, as the chart reads it ---------------------------------------------------------


@dataclass
class _Table:
    """The result's columns as lists, None where a strategy did not run.

    Attributes:
        df: the result.
        names: the strategies, as the chart labels them.
        ok: whether each ran.
        calls: convolution calls per strategy in the timed pass.
        workload: the workload's name.
    """

    df: object
    names: List[str]
    ok: List[bool]
    calls: int
    workload: str

    @classmethod
    def of(cls, df) -> "_Table":
        ok = list((df["status"] == "ok") if "status" in df.columns else [True] * len(df))
        calls = int(df["calls"].iloc[0]) if "calls" in df.columns and len(df) else 0
        wl = str(df["workload"].iloc[0]) if len(df) else "?"
        return cls(df, list(df["strategy"]), ok, calls, wl)

    def col(self, name: str) -> List[Optional[float]]:
        """Column ``name``; None where it is missing or the strategy did not run."""
        vals = self.df[name] if name in self.df.columns else [None] * len(self.names)
        return [num(v) if k else None for v, k in zip(vals, self.ok)]

    def labels(self, vals, fmt) -> List[str]:
        """Each value formatted, "not run" for a strategy that did not run."""
        return [fmt(v) if k else "not run" for v, k in zip(vals, self.ok)]


def microseconds(v) -> str:
    """A time label in the time axis's unit: ``10,160 us``.

    Args:
        v: microseconds.

    Returns:
        The label.
    """
    return in_unit(v, "us")


def _count(v) -> str:
    return "" if v is None else f"{int(v)}"


# ---- the time plot: three times per call on one log axis ----------------------------------------

#: (column, legend entry, colour, symbol) of the three times, in trace order
TIMES = (
    ("median_us", "host time: median call, whisker to p95", COLORS["primary"], "circle"),
    ("strategy_us_per_call", "inside the strategy's get/put: mean", COLORS["dark"], "diamond"),
    ("gpu_us", "GPU wall time: mean", COLORS["purple"], "square"),
)


def _time_traces(fig: go.Figure, t: _Table) -> None:
    """Traces 0-2, the time plot: host time (median, whisker to p95), time inside get/put (mean) and
    GPU wall time (mean) per call, side by side in each strategy's row, each mark labelled."""
    median, p95 = t.col("median_us"), t.col("p95_us")
    hover = (
        "%{y}: median call %{x:.1f} us in all (strategy + launch), p95 %{customdata}",
        "%{y}: %{x:.1f} us per call inside the strategy's get/put, on average over the calls",
        "%{y}: %{x:.1f} us per call on average: two events around the run over the calls, kernels plus "
        "time the GPU waited for the host",
    )
    for k, (column, name, color, symbol) in enumerate(TIMES):
        vals = t.col(column)
        whisker = (
            dict(
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=[(p - m) if p is not None and m is not None else 0 for m, p in zip(median, p95)],
                    arrayminus=[0] * len(vals),
                    color=color,
                    thickness=1.5,
                    width=3,
                )
            )
            if k == 0
            else {}
        )
        fig.add_trace(
            go.Scatter(
                y=t.names,
                x=vals,
                name=name,
                orientation="h",  # marks of one strategy side by side across its row (scattermode group)
                mode="markers+text",
                marker=dict(color=color, size=9, symbol=symbol),
                # the host mark's whisker runs right: its label goes left
                textposition="middle left" if k == 0 else "middle right",
                textfont=dict(size=LABEL_PX, color=color),
                text=[f" {s} " for s in t.labels(vals, microseconds)] if k else _host_labels(t, vals, p95),
                cliponaxis=False,
                customdata=[microseconds(p) for p in p95],
                hovertemplate=hover[k] + "<extra></extra>",
                legend="legend",
                **whisker,
            ),
            row=1,
            col=1,
        )


def _host_labels(t: _Table, median: list, p95: list) -> List[str]:
    """The host marks' labels: the median and the p95 the whisker reaches, as the summaries write them."""
    return [
        f" {m} (p95 {microseconds(p)}) " if p is not None and m != "not run" else f" {m} "
        for m, p in zip(t.labels(median, microseconds), p95)
    ]


def _log_range(values) -> dict:
    """A log axis over ``values`` with room either side for a mark's label, ticked 1-2-5."""
    v = [x for x in values if x is not None and x > 0]
    if not v:
        return dict(type="log")
    lo, hi = math.log10(min(v)), math.log10(max(v))
    pad = max(0.45, 0.12 * (hi - lo))
    ticks = log_ticks(v, max_ticks=9)
    return dict(type="log", range=[lo - pad, hi + pad], **ticks)


def mean_above_median(df) -> str:
    """A sentence for the strategies whose mean get/put exceeds their median host time.

    Host time (the median call's) includes the get/put (a mean per call): the sentence says which
    number is which, and why they differ.

    Args:
        df: `strategies`' result.

    Returns:
        The sentence; empty when there is no such strategy.
    """
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    above = (
        ok[ok["strategy_us_per_call"] > ok["median_us"]] if "strategy_us_per_call" in ok.columns else ok[:0]
    )
    if above.empty:
        return ""
    each = "; ".join(
        f"{r.strategy}: get/put {microseconds(r.strategy_us_per_call)} is a mean over its {int(r.calls)} "
        f"calls, host time {microseconds(r.median_us)} the median call (p95 {microseconds(r.p95_us)})"
        for r in above.itertuples()
    )
    return (
        f"{each}. Host time includes the get/put, but a mean counts the slowest calls in full and a "
        "median does not."
    )


# ---- the bar plots: allocations, memory held, fallbacks -----------------------------------------


#: what every bar trace shares: horizontal, labelled outside its end at the labels' size
BAR_STYLE = dict(
    orientation="h",
    textposition="outside",
    constraintext="none",
    cliponaxis=False,
    textfont=dict(size=LABEL_PX),
)


def _allocation_traces(fig: go.Figure, t: _Table) -> None:
    """Traces 3-4: workspace allocations in the timed pass and in the warm-up pass, hatched where
    they are requests to a pool."""
    whose = [allocator_of(n) for n in t.names]
    pooled = ["/" if w in POOL_ALLOCATORS.values() else "" for w in whose]
    for column, label, color in (
        ("alloc_calls", "timed pass", COLORS["bad"]),
        ("warmup_alloc_calls", "warm-up pass", "#ff9896"),
    ):
        vals = t.col(column)
        fig.add_trace(
            go.Bar(
                y=t.names,
                x=[v if k else 0 for v, k in zip(vals, t.ok)],
                name=label,
                marker_color=color,
                marker_pattern_shape=pooled,
                text=t.labels(vals, _count),
                customdata=whose,
                hovertemplate=f"%{{y}}: %{{x}} workspace allocations in the {label}, counted as calls of "
                "%{customdata}<extra></extra>",
                legend="legend2",
                **BAR_STYLE,
            ),
            row=2,
            col=1,
        )


def _memory_traces(fig: go.Figure, t: _Table) -> None:
    """Traces 5-6: workspace memory held at the peak and after the run (MiB)."""
    for column, label, color in (
        ("peak_bytes", "peak held", COLORS["secondary"]),
        ("held_after_bytes", "held after the run", "#ffbb78"),
    ):
        raw = t.col(column)
        fig.add_trace(
            go.Bar(
                y=t.names,
                x=[v / MIB if v is not None else 0 for v in raw],
                name=label,
                marker_color=color,
                text=t.labels(raw, lambda v: in_unit(v, SIZE_AXIS)),
                hovertemplate=f"%{{y}}: {label} %{{text}}<extra></extra>",
                legend="legend3",
                **BAR_STYLE,
            ),
            row=2,
            col=2,
        )


def _fallback_trace(fig: go.Figure, t: _Table) -> None:
    """Trace 7: the calls of the timed pass that ran a plan needing less workspace than the heuristic's."""
    fell = t.col("fallbacks")
    fig.add_trace(
        go.Bar(
            y=t.names,
            x=[v if v is not None else 0 for v in fell],
            name=f"calls that fell back (of {t.calls})",
            marker_color=COLORS["muted"],
            text=t.labels(fell, lambda v: f"{int(v)} of {t.calls}"),
            hovertemplate="%{y}: %{x} of the calls ran a plan with a smaller workspace than the heuristic's"
            "<extra></extra>",
            legend="legend4",
            **BAR_STYLE,
        ),
        row=2,
        col=3,
    )


# ---- axes and legends ---------------------------------------------------------------------------


def _axes(fig: go.Figure, t: _Table) -> None:
    """One scale per plot whatever the workload: times on a log axis (marks), counts and bytes linear
    from zero (bars)."""
    font = dict(size=FONT_PX)
    fig.update_yaxes(autorange="reversed", tickfont=font)
    fig.update_xaxes(tickfont=font, title_font=font)
    times = [v for c in ("median_us", "p95_us", "strategy_us_per_call", "gpu_us") for v in t.col(c)]
    fig.update_xaxes(title_text="time per call (us), log scale", row=1, col=1, **_log_range(times))

    def top(vals, floor=1.0):
        return max([v for v in vals if v is not None] + [floor])

    allocs = t.col("alloc_calls") + t.col("warmup_alloc_calls")
    held = [v / MIB for v in t.col("peak_bytes") + t.col("held_after_bytes") if v is not None]
    for col, title, top_value, room in (
        (1, "allocations (count)", top(allocs), 1.35),
        (2, "workspace held (MiB)", top(held), 1.6),
        (3, "fallbacks (count)", max(t.calls, 1), 1.6),
    ):
        fig.update_xaxes(
            title_text=title,
            type="linear",
            range=[0, room * top_value],
            nticks=4,
            row=2,
            col=col,
            **(PLAIN_TICKS if col == 2 else {}),  # MiB read as labelled: 1,000, not 1k
        )


#: (legend, its title) of the bar plots, left to right
BAR_LEGENDS = (
    ("legend2", "<b>workspace allocations</b><br>hatched: requests to a pool"),
    ("legend3", "<b>workspace memory held</b>"),
    ("legend4", "<b>fallbacks to a smaller plan</b>"),
)


def _legends(fig: go.Figure) -> None:
    """Each bar plot's legend right above it, its title naming the plot.

    Every legend is placed in paper coordinates: plotly reserves the margin a legend placed by
    the container needs on top of what legends placed on the plot push, which moved the plots down
    by a legend's height."""
    lay = fig.layout
    bottom_row = (lay.xaxis2.domain, lay.xaxis3.domain, lay.xaxis4.domain)
    y = lay.yaxis2.domain[1] + 6 / PLOTS_PX
    for (name, title), domain in zip(BAR_LEGENDS, bottom_row):
        fig.update_layout(
            {
                name: dict(
                    title=dict(text=title, side="top", font=dict(size=FONT_PX)),
                    font=dict(size=FONT_PX),
                    orientation="v",
                    x=domain[0],
                    xanchor="left",
                    y=y,
                    yanchor="bottom",
                    tracegroupgap=2,
                    bgcolor="rgba(0,0,0,0)",
                )
            }
        )


def _time_legend() -> dict:
    """The time plot's legend, right above it (the figure's first legend, in the room `finish` leaves
    for it under the title block)."""
    return dict(
        title=dict(text="<b>time per call</b>, one row of marks per strategy", side="top"),
        font=dict(size=FONT_PX),
        xref="paper",
        x=0,
        yref="paper",
        y=1 + 8 / PLOTS_PX,
        yanchor="bottom",
    )


def _time_note(note: str) -> dict:
    """An annotation under the time plot's axis title (the mean/median sentence)."""
    return dict(
        text=note,
        xref="paper",
        yref="y domain",
        x=0,
        y=0,
        yshift=-44,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        font=dict(size=LABEL_PX, color=COLORS["dark"]),
        name="time-note",
    )


# ---- the chart ----------------------------------------------------------------------------------


def strategies_chart(df) -> go.Figure:
    """Every workspace strategy on one workload: times, allocations, memory and fallbacks.

    Times per call are on one log axis (marks, labelled); counts and bytes are bars on linear axes
    from zero (every bar labelled: "0" and "0 B" drawn), each part's legend above it. A strategy that
    did not run has no mark and no bar, and its labels say "not run".

    Args:
        df: `strategies`' result.

    Returns:
        The ``go.Figure``. Traces: 0 host median per call (us; whisker to the p95), 1 host time inside
        the strategy's get/put, mean per call (us), 2 GPU wall time, mean per call (us), 3 allocator
        calls in the timed pass, 4 allocator calls in the warm-up pass, 5 peak held (MiB), 6 held
        after the run (MiB), 7 fallbacks in the timed pass.
    """
    t = _Table.of(df)
    fig = new_figure(**STRATEGIES_GRID)
    _time_traces(fig, t)
    _allocation_traces(fig, t)
    _memory_traces(fig, t)
    _fallback_trace(fig, t)
    fig.update_layout(
        barmode="group",
        bargap=0.12,
        bargroupgap=0.05,
        scattermode="group",
        scattergap=0.05,
        shapes=row_bands(len(t.names), subplots=(1, 2, 3, 4)),  # a strategy's marks and bars: its band
    )
    _axes(fig, t)
    _legends(fig)
    inverted = mean_above_median(df)
    if inverted:
        fig.add_annotation(_time_note(wrap(html.escape(inverted, quote=False), NOTE_CHARS)))
    allocations = (
        "allocations: cudaMalloc calls that returned memory (a failed one is not counted) for the strategies "
        "that own their memory; hatched, for cupy_pool / async_pool: requests to the pool (most served from "
        "its cache without reaching cudaMalloc)"
    )
    detail = (
        f"workload '{t.workload}': {t.calls} convolution calls per strategy, timed after a warm-up pass of "
        "the same calls; host time = strategy + launch; GPU wall time = two events around the run / calls: "
        "kernels + GPU idle"
    )
    note = " · ".join(n for n in (allocations, not_ok_note(df, ("strategy",))) if n)
    bottom = 76 + 15 * (wrap(note, NOTE_CHARS).count("<br>") + 1)  # `finish`'s margin under the plots
    finish(
        fig,
        df,
        f"Workspace strategies on '{t.workload}'",
        detail,
        note=note,
        height=TOP_PX + PLOTS_PX + bottom,
        legend_rows=LEGEND_ROWS,
    )
    return fig.update_layout(legend=_time_legend())
