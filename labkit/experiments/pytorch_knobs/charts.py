"""Lesson 11's chart: each PyTorch setting's time per call, first call and peak memory, with labkit's
measurement of its counterpart beside the time and the memory."""

from __future__ import annotations

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    finish,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    row_bands,
    shape_label,
)
from ...draw.units import in_unit, log_axis_with_room
from ..core import MIB

#: the chart's traces, in order (a panel updates them in place)
TRACES = (
    "PyTorch: median time per call",
    "labkit: the counterpart plan's time (graph replay)",
    "PyTorch: first call",
    "PyTorch: peak above the inputs, steady calls",
    "PyTorch: peak above the inputs, first call",
    "labkit: the plan's workspace + the output",
)


#: each plot's log axis: at most four ticks in a third of the chart, room right of the largest value
#: for its label
LOG_AXIS = dict(room=0.45, max_ticks=4)


def pytorch_rows(df):
    """The PyTorch settings that ran, in the order measured (PyTorch's defaults first).

    Args:
        df: `torch_knobs`' result.

    Returns:
        Those rows.
    """
    return ok_rows(df[df.source == "pytorch"])


def net_of(df) -> str:
    """The network a result measured: its request's ``net``; empty for one convolution.

    Args:
        df: `torch_knobs`' result.

    Returns:
        The network's name, or "".
    """
    return str(((getattr(df, "attrs", {}) or {}).get("request") or {}).get("net") or "")


def column(df, name: str) -> list:
    """A column's values, or NaN for each row where the result has no such column (a network's rows
    have no labkit counterpart).

    Args:
        df: the rows.
        name: the column.

    Returns:
        The values, one per row.
    """
    return list(df[name]) if name in df.columns else [float("nan")] * len(df)


def _mib(values) -> list:
    return [None if num(v) is None else num(v) / MIB for v in values]


def _dots(fig, x, y, name, color, symbol, text, col, *, position="middle right", **kw):
    """One trace of labelled marks in subplot ``col``, beside the other traces' marks in each row
    (each label at ``position`` from its mark)."""
    drawn = any(num(v) is not None for v in x)  # a network's rows have no labkit counterpart
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            name=name,
            orientation="h",  # marks of one setting side by side across its row (scattermode group)
            mode="markers+text",
            marker=dict(color=color, size=8, symbol=symbol),
            text=text,
            textposition=position,
            cliponaxis=False,
            textfont=dict(size=10, color=color),
            showlegend=drawn,
            **kw,
        ),
        row=1,
        col=col,
    )


def _what_is_drawn(df, *, has_labkit: bool) -> str:
    """The chart's subtitle: the request, and what its marks are (labkit's only when it has some)."""
    net, spec = net_of(df), request_spec(df)
    what = (
        f"{net} forward pass (torchvision, random weights), batch {spec.N if spec else '?'}"
        if net
        else (f"{spec.dtype} {spec.layout} {shape_label(spec)}" if spec else "one convolution")
    )
    marks = (
        "time: median, whisker p10-p90; grey diamonds: labkit's plan"
        if has_labkit
        else "time: median, whisker p10-p90"
    )
    return f"{what}; a fresh process per setting; {marks}"


def knobs_chart(df) -> go.Figure:
    """Each PyTorch setting: time per call, first call and peak memory above the inputs, with
    labkit's counterpart beside the time and the memory.

    The settings' values span a decade and more (``allow_tf32=False`` runs fp32 math, ten times the
    others' time and memory), so each of the three plots is labelled marks on a log axis, every
    request alike; a band behind every other row keeps a row's marks together.

    Args:
        df: `torch_knobs`' result.

    Returns:
        The ``go.Figure``: three plots sharing the settings' axis, one scale each (`TRACES`).
    """
    pt = pytorch_rows(df)
    y = list(pt.setting)
    fig = new_figure(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04)
    us = [num(v) for v in pt.gpu_us]
    spread = dict(
        type="data",
        symmetric=False,
        array=[num(b) - num(a) for a, b in zip(pt.gpu_us, pt.gpu_us_p90)],
        arrayminus=[num(a) - num(b) for a, b in zip(pt.gpu_us, pt.gpu_us_p10)],
        color=COLORS["primary"],
        thickness=1,
        width=2,
    )
    # the label sits above its whisker, which runs through the text beside the mark (ResNet-50's p90s)
    time_text = [in_unit(v, "us") for v in us]
    _dots(
        fig, us, y, TRACES[0], COLORS["primary"], "circle", time_text, 1, position="top right", error_x=spread
    )
    lab_us = [num(v) for v in column(pt, "labkit_gpu_us")]
    lab_text = [in_unit(v, "us") if v else "" for v in lab_us]
    _dots(fig, lab_us, y, TRACES[1], COLORS["muted"], "diamond", lab_text, 1)
    first_ms = [num(v) for v in pt.first_call_ms]
    _dots(fig, first_ms, y, TRACES[2], COLORS["secondary"], "circle", [f"{v:,.1f} ms" for v in first_ms], 2)
    steady, first = _mib(pt.steady_peak_bytes), _mib(pt.first_peak_bytes)
    _dots(fig, steady, y, TRACES[3], COLORS["good"], "circle", [in_unit(v * MIB, "MiB") for v in steady], 3)
    _dots(fig, first, y, TRACES[4], COLORS["purple"], "square", [in_unit(v * MIB, "MiB") for v in first], 3)
    labkit_mem = [
        None if num(w) is None else (num(w) + num(o)) / MIB
        for w, o in zip(column(pt, "labkit_workspace_bytes"), pt.out_bytes)
    ]
    mem_text = [in_unit(v * MIB, "MiB") if v is not None else "" for v in labkit_mem]
    _dots(fig, labkit_mem, y, TRACES[5], COLORS["muted"], "diamond", mem_text, 3)
    fig.update_layout(scattermode="group", scattergap=0.3, shapes=row_bands(len(y), subplots=(1, 2, 3)))
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    for col, title, values in (
        (
            1,
            "time per call (us), log",
            [num(v) for v in pt.gpu_us_p10] + [num(v) for v in pt.gpu_us_p90] + lab_us,
        ),
        (2, "first call (ms), log", first_ms),
        (3, "peak above the inputs (MiB), log", steady + first + labkit_mem),
    ):
        fig.update_xaxes(title_text=title, row=1, col=col, **log_axis_with_room(values, **LOG_AXIS))
    net = net_of(df)
    detail = _what_is_drawn(df, has_labkit=any(v is not None for v in lab_us + labkit_mem))
    main = (
        f"PyTorch's switches, measured: {net}" if net else "PyTorch's switches, measured on one convolution"
    )
    note = " · ".join(
        n
        for n in (
            not_ok_note(df[df.source == "pytorch"], ("setting",)),
            not_ok_note(df[df.source == "labkit"], ("setting",)).replace("did not run", "labkit did not run"),
        )
        if n
    )
    return finish(
        fig, df, main, detail, note=note, height=170 + (54 if net else 64) * max(4, len(y)), legend_rows=2
    )
