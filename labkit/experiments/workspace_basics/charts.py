"""Lesson 01's charts: the classic algorithm table, workspace by dtype/layout/direction, a sweep."""

from __future__ import annotations

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    LAYOUT_COLORS,
    finish,
    fmt_bytes,
    grid,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.units import PLAIN_TICKS, SIZE_AXIS, in_unit, log_axis_with_room
from ..core import MIB

# ---- charts --------------------------------------------------------------------------------


ALGORITHMS_GRID = grid(
    rows=1,
    cols=2,
    shared_yaxes=True,
    horizontal_spacing=0.04,
    subplot_titles=("GPU time (us), as cuDNN's Find reports it", "workspace it asks for (MiB)"),
)


def algorithms_chart(df) -> go.Figure:
    """The classic algorithm table: GPU time and workspace per algorithm; unsupported ones say so.

    Args:
        df: `algorithms`' result.

    Returns:
        The ``go.Figure``. Traces: 0 time bars (us), 1 workspace bars (MiB), 2 'not supported' labels.
    """
    df = df.sort_values("algo_id") if "algo_id" in df.columns else df
    timed = df["find_status"] == "ok" if "find_status" in df.columns else df["time_us"].notna()
    sized = (
        df["query_status"] == "ok" if "query_status" in df.columns else df["query_workspace_bytes"].notna()
    )
    fastest = None
    if timed.any():
        fastest = df.loc[df.loc[timed, "time_us"].astype(float).idxmin(), "algorithm"]
    fig = new_figure(**ALGORITHMS_GRID)
    t = [num(v) if ok else None for v, ok in zip(df["time_us"], timed)]
    ws = [
        (num(v) / MIB if num(v) is not None else None) if ok else None
        for v, ok in zip(df["query_workspace_bytes"], sized)
    ]
    _algorithm_time_bars(fig, df, t, fastest)
    _algorithm_workspace_bars(fig, df, ws, sized)
    _unsupported_labels(fig, df, timed)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="GPU time of one call, Find's timing (us)", row=1, col=1)
    top = max([v for v in ws if v is not None] + [1.0])
    fig.update_xaxes(title_text="workspace (MiB)", range=[0, 1.4 * top], row=1, col=2, **PLAIN_TICKS)
    spec = request_spec(df)
    detail = (
        (
            f"{spec.dtype} {spec.layout} {shape_label(spec)}; legacy API, times from one run each "
            "inside Find (not the CUDA-graph medians of the other charts)"
        )
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        "The classic algorithm table: time and workspace per algorithm",
        detail,
        height=430,
        legend_rows=0,
    )


DIRECTIONS = ("fprop", "dgrad", "wgrad")
WORKSPACE_SIZES_GRID = grid(
    rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.045, subplot_titles=DIRECTIONS
)


def _algorithm_time_bars(fig: go.Figure, df, t: list, fastest) -> None:
    """The left panel: each algorithm's GPU time in Find (``t``, us; None: not timed), the fastest in
    green and labelled so (trace 0)."""
    names = list(df["algorithm"])
    math_col = df["math"] if "math" in df.columns else [""] * len(df)
    fig.add_trace(
        go.Bar(
            y=names,
            x=t,
            orientation="h",
            name="GPU time",
            marker_color=[COLORS["good"] if n == fastest else COLORS["primary"] for n in names],
            text=[
                "" if v is None else f"{in_unit(v, 'us')} · fastest" if n == fastest else in_unit(v, "us")
                for v, n in zip(t, names)
            ],
            textposition="auto",
            customdata=[str(m) if isinstance(m, str) else "" for m in math_col],
            hovertemplate="%{y}: %{x:.1f} us (%{customdata} math)<extra></extra>",
        ),
        row=1,
        col=1,
    )


def _algorithm_workspace_bars(fig: go.Figure, df, ws: list, sized) -> None:
    """The right panel: the workspace each algorithm asks (``ws``, MiB), labelled, or "not supported"
    where the query failed (trace 1)."""
    wsb = list(df["query_workspace_bytes"])
    fig.add_trace(
        go.Bar(
            y=list(df["algorithm"]),
            x=[v if v is not None else 0 for v in ws],
            orientation="h",
            name="workspace",
            marker_color=COLORS["secondary"],
            text=[in_unit(b, SIZE_AXIS) if ok else "not supported" for b, ok in zip(wsb, sized)],
            textposition="outside",
            constraintext="none",
            cliponaxis=False,
            textfont=dict(color=[COLORS["dark"] if ok else COLORS["bad"] for ok in sized]),
            hovertemplate="%{y}: %{text}<extra></extra>",
        ),
        row=1,
        col=2,
    )


def _unsupported_labels(fig: go.Figure, df, timed) -> None:
    """Beside each algorithm Find did not time, on the time panel: "not supported" and its status
    (trace 2)."""
    names = list(df["algorithm"])
    unsup = [
        (n, s) for n, s, ok in zip(names, df.get("find_status", df.get("query_status")), timed) if not ok
    ]
    fig.add_trace(
        go.Scatter(
            y=[n for n, _ in unsup],
            x=[0] * len(unsup),
            mode="text",
            name="not supported",
            text=[f"  not supported ({s})" for _, s in unsup],
            textposition="middle right",
            textfont=dict(color=COLORS["bad"]),
            hoverinfo="skip",
            showlegend=False,
        ),
        row=1,
        col=1,
    )


def workspace_sizes_chart(df) -> go.Figure:
    """Per direction, one row per dtype and layout: the heuristic pick's workspace over the largest.

    A bar stands for the workspace of the plan cuDNN's heuristic picks (labelled: "0 B" is drawn, a
    variant that did not run says so), over a grey bar for the largest any candidate plan asks. Axes
    are linear from zero, the same for the three directions.

    Args:
        df: `workspace_sizes`' result.

    Returns:
        The ``go.Figure``. Traces: per direction (fprop, dgrad, wgrad) the largest candidate, then the
        heuristic pick in NCHW, then in NHWC (9 in all).
    """
    dtypes = list(dict.fromkeys(df["dtype"]))
    rows = [f"{d} {lay}" for d in dtypes for lay in ("NCHW", "NHWC")]
    fig = new_figure(**WORKSPACE_SIZES_GRID)
    top = 0.0
    for c, direction in enumerate(DIRECTIONS, start=1):
        sizes = _direction_sizes(df[df["direction"] == direction].set_index(["dtype", "layout"]), dtypes)
        top = max(top, sizes[3])
        _direction_bars(fig, c, direction, rows, sizes)
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    for c in (1, 2, 3):
        fig.update_xaxes(
            title_text="workspace (MiB)", range=[0, 1.45 * (top or 1)], nticks=4, row=1, col=c, **PLAIN_TICKS
        )
    spec = request_spec(df)
    return finish(
        fig,
        df,
        "Workspace by dtype, layout and direction (same dims)",
        shape_label(spec),
        note=_sizes_note(df),
        height=560,
    )


def _direction_sizes(sub, dtypes: list) -> tuple:
    """One direction's rows (each dtype in NCHW, then NHWC): the heuristic pick's workspace, the
    largest any candidate asks, and the pick's label.

    Args:
        sub: that direction's rows of the result, indexed by dtype and layout.
        dtypes: the dtypes, in order.

    Returns:
        ``(picks, biggest, labels, most)``: sizes in MiB (0 where not run), labels ("not run" or the
        status where there is no size), and the largest size of either, MiB.
    """
    picks, biggest, text, most = [], [], [], 0.0
    for d in dtypes:
        for lay in ("NCHW", "NHWC"):
            r = sub.loc[(d, lay)] if (d, lay) in sub.index else None
            ok = r is not None and ("status" not in sub.columns or r["status"] == "ok")
            h = num(r["heuristic_workspace_bytes"]) if ok else None
            m = num(r["max_workspace_bytes"]) if ok else None
            picks.append(h / MIB if h is not None else 0.0)
            biggest.append(m / MIB if m is not None else 0.0)
            text.append(
                in_unit(h, SIZE_AXIS) if h is not None else ("not run" if r is None else str(r["status"]))
            )
            most = max(most, (m or 0.0) / MIB, (h or 0.0) / MIB)
    return picks, biggest, text, most


def _direction_bars(fig: go.Figure, c: int, direction: str, rows: list, sizes: tuple) -> None:
    """One direction's panel (column ``c``): the largest candidate's grey bar under the heuristic
    pick's bar in NCHW and in NHWC, labelled (three traces; the legend from the first panel only)."""
    picks, biggest, text, _ = sizes
    fig.add_trace(
        go.Bar(
            y=rows,
            x=biggest,
            orientation="h",
            name="largest any candidate plan asks",
            legendgroup="max",
            showlegend=c == 1,
            marker_color="#dadce0",
            width=0.8,
            customdata=[fmt_bytes(v * MIB) for v in biggest],
            hovertemplate=f"{direction} %{{y}}: the hungriest candidate plan asks %{{customdata}}"
            "<extra></extra>",
        ),
        row=1,
        col=c,
    )
    for lay in ("NCHW", "NHWC"):
        mine = [r.endswith(lay) for r in rows]
        fig.add_trace(
            go.Bar(
                y=rows,
                x=[v if m else None for v, m in zip(picks, mine)],
                orientation="h",
                name=f"{lay}: the heuristic's pick",
                legendgroup=lay,
                showlegend=c == 1,
                marker_color=LAYOUT_COLORS[lay],
                width=0.45,
                text=[t if m else "" for t, m in zip(text, mine)],
                textposition="outside",
                constraintext="none",
                cliponaxis=False,
                textfont=dict(size=10),
                hovertemplate=f"{direction} %{{y}}: heuristic plan %{{text}}<extra></extra>",
            ),
            row=1,
            col=c,
        )


def _sizes_note(df) -> str:
    """The workspace-sizes chart's note: what its bars are, plans still compiling, variants not run."""
    notes = [
        "coloured bars: the plan cuDNN's heuristic picks, labelled; grey bars: the largest workspace any "
        "candidate plan asks"
    ]
    cut = int(column_sum(df, "plans_cut"))
    if cut:
        notes.append(
            f"{cut} runtime-compiled plan{'s' if cut > 1 else ''} still compiling and left out of the grey "
            "bars (measure again once compiled)"
        )
    notes.append(not_ok_note(df, ("dtype", "layout", "direction")))
    return " · ".join(n for n in notes if n)


def column_sum(df, col: str) -> float:
    """The sum of one column.

    Args:
        df: a result.
        col: the column.

    Returns:
        The sum, NaN counted as 0; 0 when the column is absent (a recording made before it existed).
    """
    return float(df[col].fillna(0).sum()) if col in df.columns else 0.0


SWEEP_AXIS = {
    "N": "N (batch size)",
    "C=K": "C = K (channels in = out)",
    "H=W": "H = W (image size, pixels)",
    "R=S": "R = S (filter size)",
}


SWEEP_GRID = grid(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])


def sweep_chart(df) -> go.Figure:
    """GPU time and workspace of the heuristic plan as one dimension varies, every point labelled.

    One scale whatever the field or the base: the swept values are evenly spaced (x is each value's
    position, its tick labelled with the value), as the recorded values double or step. GPU time is on
    a log axis (us), workspace on a linear one from zero in MiB (`SIZE_AXIS`, "0 MiB" labelled).

    Positions, not a category axis: a panel updates its chart in place, and the browser keeps a
    category axis's earlier categories. A chart moved to another field would place its new values
    after the old ones.

    Args:
        df: `sweep`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 GPU time (us), 1 workspace (MiB).
    """
    field = str(df["field"].iloc[0]) if len(df) else ""
    ok = ok_rows(df)
    fig = new_figure(**SWEEP_GRID)
    values = [str(v) for v in ok["value"]]
    times = _sweep_time_line(fig, ok, field, values)
    sizes = _sweep_workspace_line(fig, ok, field, values)
    _sweep_axes(fig, field, values, times, sizes)
    spec = request_spec(df)
    detail = (
        f"around {spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; "
        "heuristic plan at each point"
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        f"Sweep of {field}: GPU time and workspace",
        detail,
        note=not_ok_note(df, ("field", "value")),
        height=560,
        legend_rows=0,
    )


def _labelled_points() -> dict:
    """A sweep line's style: markers joined by lines, each point's value written above it."""
    return dict(
        mode="lines+markers+text", textposition="top center", textfont=dict(size=10), cliponaxis=False
    )


def _sweep_time_line(fig: go.Figure, ok, field: str, values: list) -> list:
    """The top panel: the heuristic plan's GPU time at each swept value's position (trace 0).

    Returns:
        The times, us (None: not timed).
    """
    custom = [
        [str(p), num(t), v]
        for p, t, v in zip(ok.get("plan_name", [""] * len(ok)), ok.get("tflops", [None] * len(ok)), values)
    ]
    times = [num(v) for v in ok["gpu_us"]]
    fig.add_trace(
        go.Scatter(
            x=list(range(len(values))),
            y=times,
            name="GPU time",
            line=dict(color=COLORS["primary"]),
            text=[in_unit(v, "us") for v in times],
            customdata=custom,
            hovertemplate=f"{field}=%{{customdata[2]}}: %{{y:.1f}} us, %{{customdata[1]:.0f}} TFLOP/s"
            "<br>plan %{customdata[0]}"
            "<extra></extra>",
            **_labelled_points(),
        ),
        row=1,
        col=1,
    )
    return times


def _sweep_workspace_line(fig: go.Figure, ok, field: str, values: list) -> list:
    """The bottom panel: the workspace the heuristic plan asks at each swept value's position (MiB;
    trace 1).

    Returns:
        The sizes, MiB (None: not known).
    """
    sizes = [num(v) / MIB if num(v) is not None else None for v in ok["workspace_bytes"]]
    fig.add_trace(
        go.Scatter(
            x=list(range(len(values))),
            y=sizes,
            name="workspace",
            line=dict(color=COLORS["secondary"]),
            text=[in_unit(v, SIZE_AXIS) for v in ok["workspace_bytes"]],
            customdata=[[v, fmt_bytes(b)] for v, b in zip(values, ok["workspace_bytes"])],
            hovertemplate=f"{field}=%{{customdata[0]}}: workspace %{{text}} (%{{customdata[1]}})"
            "<extra></extra>",
            **_labelled_points(),
        ),
        row=2,
        col=1,
    )
    return sizes


#: a sweep whose workspaces are all under this (MiB) draws them on a 1 MiB axis
TINY_MIB = 0.01


def _sweep_axes(fig: go.Figure, field: str, values: list, times: list, sizes: list) -> None:
    """Both panels' x axes at the values' positions, ticked with the values; the time's log axis with
    room for the labels, the workspace's linear one from just under zero."""
    at = list(range(len(values)))
    positions = dict(
        type="linear",
        tickmode="array",
        tickvals=at,
        ticktext=values,
        range=[-0.5, len(at) - 0.5],
        zeroline=False,
    )
    fig.update_xaxes(**positions, row=1, col=1)
    fig.update_xaxes(**positions, title_text=SWEEP_AXIS.get(field, field), row=2, col=1)
    fig.update_yaxes(title_text="GPU time (us)", row=1, col=1, **log_axis_with_room(times, room=0.12))
    top = max([v for v in sizes if v is not None] + [0.0])
    # a few bytes at most (the fp16 NHWC plans' 131 B): a 1 MiB axis, where they read as about zero
    # beside their labels, rather than ticks of 0.00005 MiB
    top = top if top >= TINY_MIB else 1.0
    fig.update_yaxes(
        title_text=f"workspace ({SIZE_AXIS})",
        type="linear",
        **PLAIN_TICKS,
        range=[-0.08 * top, 1.3 * top],
        row=2,
        col=1,
    )
