"""The chart of a network report: GPU time per call of the pass (the heuristic's plan and the
fastest, us), the workspace each strategy held during each call of the first pass (MiB), and the
pass time within each workspace cap (ms).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ...draw.plain_figure import figure_of
from ...draw.plots import COLORS, fmt_bytes, grid, num, ok_rows
from ..core import MIB
from .request import REPORT_STRATEGIES
from .tables import tables_of


def column(df, name: str, dtype=np.float64) -> np.ndarray:
    """Column ``name`` of ``df`` as a numpy array of ``dtype`` (float: missing values NaN, a gap in
    the chart); empty when ``df`` lacks it."""
    if name not in df.columns:
        return np.array([], dtype=dtype)
    return (
        df[name].to_numpy(dtype=dtype, na_value=np.nan)
        if dtype is np.float64
        else df[name].to_numpy(dtype=dtype)
    )


STRATEGY_COLORS = ("#3c4043", "#1f77b4", "#d62728", "#2ca02c", "#98df8a", "#9467bd", "#ff7f0e", "#8c564b")
#: lines that lie on top of each other (several strategies hold the same bytes) stay visible
STRATEGY_DASHES = ("solid", "dash", "solid", "dot", "dashdot", "longdash", "dot", "solid")


REPORT_GRID = grid(
    rows=3,
    cols=1,
    vertical_spacing=0.11,
    row_heights=[0.34, 0.38, 0.28],
    subplot_titles=(
        "GPU time per call: the heuristic's plan and the fastest",
        "workspace memory held during each call (first pass, from nothing)",
        "pass time if every call keeps within a workspace cap",
    ),
)


def network_report_chart(df) -> go.Figure:
    """Three panels. Traces: 0 heuristic plan's GPU time per call, 1 fastest plan's (us, bars per
    call of the pass); 2-9 workspace held during each call of the first pass, one line per
    strategy (`REPORT_STRATEGIES`, MiB); 10 pass time against the workspace cap (ms).

    Built from plain dicts (`labkit.draw.plain_figure`: 16 -> about 4 ms on a 2-core CPU machine;
    tests/test_plain_figure.py validates them)."""
    layers, timeline, budget = tables_of(df, "layers", "timeline", "budget")
    traces = []
    # columns as numpy arrays (plotly copies an array as it is; a list it walks element by element)
    ok = ok_rows(layers) if len(layers) else layers
    x = column(ok, "order", np.int64)
    names = [
        n + ("" if d == "fprop" else f" ({d})") for n, d in zip(ok.get("layer", []), ok.get("direction", []))
    ]
    for col, label, color in (
        ("heuristic_gpu_us", "heuristic plan", COLORS["muted"]),
        ("fastest_gpu_us", "fastest plan", COLORS["primary"]),
    ):
        ws = ok.get(col.replace("gpu_us", "workspace_bytes"), [None] * len(ok))
        hover = np.array([[n, fmt_bytes(w)] for n, w in zip(names, ws)], dtype=object).reshape(len(names), 2)
        traces.append(
            dict(
                type="bar",
                x=x,
                y=column(ok, col),
                name=label,
                marker=dict(color=color),
                customdata=hover,
                legendgroup="layers",
                row=1,
                col=1,
                hovertemplate="call %{x}, %{customdata[0]}: %{y:.1f} us, workspace %{customdata[1]}<extra>"
                + label
                + "</extra>",
            )
        )
    strategy = column(timeline, "strategy", object)
    steps, held = column(timeline, "step"), column(timeline, "held_bytes") / MIB
    layer = (
        timeline["layer"].to_numpy(dtype=object)
        if "layer" in timeline.columns
        else np.full(len(timeline), None, dtype=object)
    )
    for k, (label, _, _) in enumerate(REPORT_STRATEGIES):
        mine = strategy == label
        traces.append(
            dict(
                type="scatter",
                x=steps[mine],
                y=held[mine],
                mode="lines",
                name=label,
                line=dict(color=STRATEGY_COLORS[k], shape="hv", width=2, dash=STRATEGY_DASHES[k]),
                legendgroup="timeline",
                customdata=layer[mine],
                row=2,
                col=1,
                hovertemplate="call %{x} (%{customdata}): %{y:.1f} MiB held<extra>" + label + "</extra>",
            )
        )
    fits = budget[budget["calls_without_plan"] == 0] if len(budget) else budget
    traces.append(
        dict(
            type="scatter",
            x=list(fits.get("cap_label", [])),
            y=[num(v) / 1000 for v in fits.get("pass_gpu_us", [])],
            mode="lines+markers",
            name="pass time within the cap",
            line=dict(color=COLORS["secondary"]),
            customdata=[f"{s:.2f}x" for s in fits.get("slowdown", [])],
            row=3,
            col=1,
            hovertemplate="cap %{x}: %{y:.2f} ms per pass (%{customdata} the uncapped)<extra></extra>",
        )
    )
    axes = dict(
        xaxis=dict(title=dict(text="call of the pass (hover for the layer)")),
        yaxis=dict(title=dict(text="GPU time per call (us)")),
        xaxis2=dict(title=dict(text="call of the pass")),
        yaxis2=dict(title=dict(text="workspace held (MiB)"), rangemode="tozero"),
        xaxis3=dict(title=dict(text="workspace cap"), type="category"),
        yaxis3=dict(title=dict(text="pass time (ms)"), rangemode="tozero"),
    )
    net = df.attrs.get("network") or (df.attrs.get("request") or {}).get("net")
    r = df.attrs.get("request") or {}
    detail = (
        f"{net if isinstance(net, str) else 'your layers'}, batch {r.get('batch')}, {r.get('dtype')} {r.get('layout')}"
        + (", training (forward + backward)" if r.get("training") else ", inference")
    )
    note = (
        "Top: CUDA-graph replay medians of each call's plans. Middle: the most workspace each strategy held while "
        "a call ran. Bottom: sums of each call's measured plan times (the kernels alone, no launch gaps)."
    )
    return figure_of(
        REPORT_GRID,
        traces,
        axes,
        df=df,
        main="Workspace report: every convolution layer",
        detail=detail,
        note=note,
        height=1050,
        legend_rows=2,
    )
