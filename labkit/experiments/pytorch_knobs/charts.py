"""Lesson 11's chart: each PyTorch setting's time per call, first call and peak memory, with labkit's
measurement of its counterpart beside the time and the memory."""

from __future__ import annotations

import plotly.graph_objects as go

from ...draw.plots import COLORS, finish, new_figure, not_ok_note, num, ok_rows, request_spec, shape_label
from ...draw.units import in_unit
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


def _hbar(fig, x, y, name, color, text, col, **kw):
    drawn = any(num(v) is not None for v in x)  # a network's rows have no labkit counterpart
    fig.add_trace(
        go.Bar(
            x=x,
            y=y,
            name=name,
            orientation="h",
            marker_color=color,
            text=text,
            textposition="outside",
            cliponaxis=False,
            textfont=dict(size=10),
            showlegend=drawn,
            **kw,
        ),
        row=1,
        col=col,
    )


def knobs_chart(df) -> go.Figure:
    """Each PyTorch setting: time per call, first call and peak memory above the inputs, with
    labkit's counterpart beside the time and the memory.

    Args:
        df: `torch_knobs`' result.

    Returns:
        The ``go.Figure``: three panels sharing the settings' axis, one scale each (`TRACES`).
    """
    pt = pytorch_rows(df)
    y = list(pt.setting)
    fig = new_figure(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.12)
    us = [num(v) for v in pt.gpu_us]
    spread = dict(
        type="data",
        symmetric=False,
        array=[num(b) - num(a) for a, b in zip(pt.gpu_us, pt.gpu_us_p90)],
        arrayminus=[num(a) - num(b) for a, b in zip(pt.gpu_us, pt.gpu_us_p10)],
        color=COLORS["dark"],
        thickness=1,
        width=2,
    )
    _hbar(fig, us, y, TRACES[0], COLORS["primary"], [in_unit(v, "us") for v in us], 1, error_x=spread)
    lab_us = [num(v) for v in column(pt, "labkit_gpu_us")]
    _hbar(fig, lab_us, y, TRACES[1], COLORS["muted"], [in_unit(v, "us") if v else "" for v in lab_us], 1)
    first_ms = [num(v) for v in pt.first_call_ms]
    _hbar(fig, first_ms, y, TRACES[2], COLORS["secondary"], [f"{v:,.1f} ms" for v in first_ms], 2)
    steady, first = _mib(pt.steady_peak_bytes), _mib(pt.first_peak_bytes)
    _hbar(fig, steady, y, TRACES[3], COLORS["good"], [in_unit(v * MIB, "MiB") for v in steady], 3)
    _hbar(fig, first, y, TRACES[4], COLORS["purple"], [in_unit(v * MIB, "MiB") for v in first], 3)
    labkit_mem = [
        None if num(w) is None else (num(w) + num(o)) / MIB
        for w, o in zip(column(pt, "labkit_workspace_bytes"), pt.out_bytes)
    ]
    mem_text = [in_unit(v * MIB, "MiB") if v is not None else "" for v in labkit_mem]
    _hbar(fig, labkit_mem, y, TRACES[5], COLORS["muted"], mem_text, 3)
    fig.update_layout(barmode="group", bargap=0.2, bargroupgap=0.05)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    for col, title, values in (
        (1, "time per call (us)", [num(v) for v in pt.gpu_us_p90] + lab_us),
        (2, "first call (ms)", first_ms),
        (3, "peak above the inputs (MiB)", steady + first + labkit_mem),
    ):  # from zero, with room for the labels right of the longest bar
        top = max([v for v in values if v is not None] or [1.0])
        fig.update_xaxes(title_text=title, range=[0, top * 1.4], row=1, col=col)
    net = net_of(df)
    spec = request_spec(df)
    what = (
        f"{net} forward pass (torchvision, random weights), batch {spec.N if spec else '?'}"
        if net
        else (f"{spec.dtype} {spec.layout} {shape_label(spec)}" if spec else "one convolution")
    )
    detail = f"{what}; a fresh process per setting; time: median, p10-p90; grey: labkit's plan"
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
