"""Lesson 04's chart: fused against unfused, one row per epilogue and path, three panels (GPU time,
memory allocated, modelled HBM traffic)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    finish,
    grid,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.units import SIZE_AXIS, in_unit, log_ticks
from ..core import MIB

#: the paths a fusion table holds, top to bottom within an epilogue, with their colours
PATHS = (("fused", COLORS["good"]), ("fused, autotuned", COLORS["primary"]), ("unfused", COLORS["muted"]))

FUSION_GRID = grid(
    rows=1,
    cols=3,
    shared_yaxes=True,
    horizontal_spacing=0.03,
    column_widths=[0.38, 0.31, 0.31],
    subplot_titles=("GPU time per call (log)", "memory allocated", "HBM traffic (model)"),
)


def repeat_gaps(df) -> list:
    """The differences between two timings of one plan in a fusion table, one per epilogue that has
    such a pair: its heuristic's fused plan and its autotuned one, where both are the same plan.

    Args:
        df: `fusion`'s result.

    Returns:
        Each difference as a fraction of the smaller time, in the table's epilogue order.
    """
    ok = ok_rows(df)
    gaps = []
    for _, sub in ok.groupby("epilogue", sort=False):
        s = sub.set_index("path")
        if {"fused", "fused, autotuned"} <= set(s.index) and s.loc["fused", "plan_name"] == s.loc[
            "fused, autotuned", "plan_name"
        ]:
            a, b = float(s.loc["fused", "gpu_us"]), float(s.loc["fused, autotuned", "gpu_us"])
            gaps.append(abs(a - b) / min(a, b))
    return gaps


def repeat_spread(df):
    """The largest difference between two timings of one plan in a fusion table (`repeat_gaps`).

    Args:
        df: `fusion`'s result.

    Returns:
        The difference as a fraction of the smaller time; None when no epilogue has such a pair.
    """
    gaps = repeat_gaps(df)
    return max(gaps) if gaps else None


def differs_text(gap: float) -> str:
    """A repeated timing's difference in words: ``0.3%``, or ``under 0.1%``.

    Args:
        gap: the difference, as a fraction.

    Returns:
        The words.
    """
    return f"{gap:.1%}" if gap >= 0.001 else "under 0.1%"


def fusion_chart(df) -> go.Figure:
    """Fused conv+bias+relu(+add) (the heuristic's plan, and autotuned) vs the unfused sequence.

    One row per (epilogue, path): GPU time (dots on a log axis, labelled), allocated bytes and
    modelled HBM traffic (bars from zero, labelled).

    Args:
        df: `fusion`'s result.

    Returns:
        The ``go.Figure``. Traces: (fused, fused autotuned, unfused) x (time us, allocated MiB,
        modelled MiB) = 9.
    """
    fig = new_figure(**FUSION_GRID)
    epis = list(dict.fromkeys(df["epilogue"]))
    ok = ok_rows(df)
    by_path = {path: ok[ok["path"] == path].set_index("epilogue") for path, _ in PATHS}
    tops = {}
    for c, col in enumerate(("gpu_us", "allocated_bytes", "modelled_hbm_bytes"), start=1):
        for path, color in PATHS:
            sub = by_path[path]
            vals = [num(sub.loc[e, col]) if e in sub.index and col in sub.columns else None for e in epis]
            y = [epis, [path] * len(epis)]  # a two-level axis: epilogue, then path
            fig.add_trace(
                _time_dots(path, color, y, vals) if c == 1 else _size_bars(path, color, y, vals), row=1, col=c
            )
            tops[c] = max([v for v in vals if v is not None] + [tops.get(c, 0.0)])
    times = [num(v) for v in ok["gpu_us"]] if "gpu_us" in ok.columns else []
    fig.update_layout(
        xaxis=_time_axis(times),
        xaxis2=dict(title_text="allocated (MiB)", type="linear", range=[0, tops.get(2, 1) / MIB * 1.5 or 1]),
        xaxis3=dict(
            title_text="modelled HBM bytes (MiB)", type="linear", range=[0, tops.get(3, 1) / MIB * 1.5 or 1]
        ),
        yaxis=dict(type="multicategory", autorange="reversed"),
    )
    spec = request_spec(df)
    detail = (
        f"{spec.dtype} {spec.layout} {shape_label(spec)}; fused = one cuDNN graph "
        "(the heuristic's plan / the fastest plan), unfused = cuDNN conv + CuPy elementwise kernels"
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        "Fusion: conv + bias + ReLU (+ residual add)",
        detail,
        note=_fusion_note(df),
        height=440,
        legend_rows=0,
    )


def _time_dots(path: str, color: str, y: list, vals: list) -> go.Scatter:
    """One path's GPU time per epilogue: dots on the time panel, labelled in us (None: not timed)."""
    return go.Scatter(
        x=vals,
        y=y,
        mode="markers+text",
        name=path,
        marker=dict(size=11, color=color),
        text=[in_unit(v, "us") if v is not None else "" for v in vals],
        textposition="middle right",
        textfont=dict(size=11),
        cliponaxis=False,
        hovertemplate=f"{path}, %{{y}}: %{{text}}<extra></extra>",
        showlegend=False,
    )


def _size_bars(path: str, color: str, y: list, vals: list) -> go.Bar:
    """One path's bytes per epilogue (``vals``, bytes): bars from zero in MiB, labelled."""
    return go.Bar(
        x=[v / MIB if v is not None else None for v in vals],
        y=y,
        orientation="h",
        name=path,
        marker_color=color,
        text=[in_unit(v, SIZE_AXIS) if v is not None else "" for v in vals],
        textposition="outside",
        cliponaxis=False,
        hovertemplate=f"{path}, %{{y}}: %{{text}}<extra></extra>",
        showlegend=False,
    )


def _fusion_note(df) -> str:
    """The fusion chart's note: the traffic model, the noise of a plan timed twice, rows not timed."""
    gaps = repeat_gaps(df)
    if not gaps:
        noise = "no plan was timed twice here"
    elif len(gaps) == 1:
        differs = differs_text(gaps[0])
        noise = f"one plan timed twice here (fused and autotuned picked it) differs by {differs}"
    else:
        noise = (
            f"{len(gaps)} plans timed twice here (fused and autotuned picked each) differ by "
            f"{differs_text(max(gaps))} at most"
        )
    model = (
        "HBM traffic is a model from tensor sizes (each tensor read/written once per kernel; a plan's "
        "workspace traffic is not in it)"
    )
    notes = [model, noise, not_ok_note(df, ("epilogue", "path"))]
    return " · ".join(n for n in notes if n)


def _time_axis(times) -> dict:
    """The time panel's log axis: ticks over ``times`` and room on the right for each dot's label."""
    v = [t for t in times if t]
    if not v:
        return dict(title_text="GPU time (us, log)", type="log")
    lo, hi = math.log10(min(v)), math.log10(max(v))
    span = max(hi - lo, 0.3)
    return dict(
        title_text="GPU time (us, log)",
        type="log",
        range=[lo - 0.15 * span, hi + 0.55 * span],
        **log_ticks(v + [10 ** (hi + 0.4 * span)], max_ticks=5),
    )
