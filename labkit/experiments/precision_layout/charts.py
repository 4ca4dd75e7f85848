"""Lesson 03's charts: speed and error per dtype, NCHW against NHWC, the roofline."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ...draw.labels import place_labels
from ...draw.plots import (
    COLORS,
    DTYPE_COLORS,
    finish,
    first_value,
    fmt_bytes,
    grid,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.units import in_unit, log_axis, log_ticks
from ...env import gpu_label

# ---- charts --------------------------------------------------------------------------------
PRECISION_GRID = grid(
    rows=1,
    cols=2,
    shared_yaxes=True,
    horizontal_spacing=0.04,
    column_widths=[0.42, 0.58],
    subplot_titles=(
        "GPU time per call (heuristic plan)",
        "error vs float64: ● arithmetic, ◇ total, ┈ what rounding the inputs adds",
    ),
)


def sci(value) -> str:
    """A small number for a label: ``2.3e-4`` (one decimal, no padded exponent).

    Args:
        value: the number.

    Returns:
        The label.
    """
    mant, exp = f"{float(value):.1e}".split("e")
    return f"{mant}e{int(exp)}"


def precision_chart(df) -> go.Figure:
    """Speed and error per dtype, one row each.

    Left: GPU time, bars from zero with whiskers over the p10-p90 of the repeated timings. Right
    (log): arithmetic error (vs fp64 on the inputs as cuDNN read them, circle, labelled above) and
    total error (vs fp64 on the unrounded data, open diamond, labelled below). A dotted segment joins
    them: what rounding the inputs adds.

    Args:
        df: `precision`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 GPU time, 1 arithmetic error, 2 total error, 3 the segments.
    """
    ok = ok_rows(df)
    dts = list(ok["dtype"])
    us = [num(v) for v in ok["gpu_us"]]
    p10 = [num(v) for v in ok["gpu_us_p10"]] if "gpu_us_p10" in ok else [None] * len(ok)
    p90 = [num(v) for v in ok["gpu_us_p90"]] if "gpu_us_p90" in ok else [None] * len(ok)
    e1 = [num(v) for v in ok["rel_error"]]
    e2 = (
        [num(v) for v in ok["rel_error_vs_fp64_inputs"]]
        if "rel_error_vs_fp64_inputs" in ok
        else [None] * len(ok)
    )
    colors = [DTYPE_COLORS.get(d, COLORS["dark"]) for d in dts]
    fig = new_figure(**PRECISION_GRID)
    _time_bars(fig, ok, us, (p10, p90), colors)
    _error_marks(fig, dts, (e1, e2), colors)
    _rounding_segments(fig, dts, (e1, e2))
    top = max([v for v in us + p90 if v] or [1.0])
    errors = [v for v in e1 + e2 if v]
    fig.update_layout(
        xaxis=dict(title_text="GPU time per call (us)", type="linear", range=[0, top * 1.3]),
        xaxis2=dict(title_text="relative L2 error (log)", type="log", **log_axis(errors, max_ticks=7)),
        yaxis=dict(type="category", autorange="reversed"),
    )
    spec = request_spec(df)
    detail = (
        f"{spec.layout} {spec.direction} {shape_label(spec)}; the plan cuDNN's heuristic picks per dtype"
        if spec
        else ""
    )
    bad = not_ok_note(df, ("dtype",))
    return finish(
        fig,
        df,
        "Precision: speed and error per dtype",
        detail,
        note=f"{spread_note(ok)} · {bad}" if bad else spread_note(ok),
        height=420,
        legend_rows=0,
    )


def _time_bars(fig: go.Figure, ok, us: list, spread: tuple, colors: list) -> None:
    """The left panel: each dtype's GPU time (us, bars from zero; trace 0), with whiskers over the
    10th-90th percentile of its repeated timings (``spread``: the p10 and the p90 lists)."""
    p10, p90 = spread
    dts = list(ok["dtype"])
    said = [f"{a:.1f}–{b:.1f} us" if None not in (a, b) else "not recorded" for a, b in zip(p10, p90)]
    fig.add_trace(
        go.Bar(
            x=us,
            y=dts,
            orientation="h",
            name="GPU time per call",
            marker_color=colors,
            text=[f" {in_unit(v, 'us')}" for v in us],  # a space: clear of the whisker
            textposition="outside",
            cliponaxis=False,
            error_x=dict(
                type="data",
                symmetric=False,
                array=[b - m if None not in (b, m) else 0 for b, m in zip(p90, us)],
                arrayminus=[m - a if None not in (a, m) else 0 for a, m in zip(p10, us)],
                color=COLORS["dark"],
                thickness=1.5,
                width=5,
            ),
            customdata=[
                [s, fmt_bytes(w), str(p)] for s, w, p in zip(said, ok["workspace_bytes"], ok["plan_name"])
            ],
            hovertemplate="%{y}: %{x:.1f} us (p10–p90 %{customdata[0]})<br>workspace %{customdata[1]}, "
            "plan %{customdata[2]}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )


def _error_marks(fig: go.Figure, dts: list, errors: tuple, colors: list) -> None:
    """The right panel's marks (traces 1-2): each dtype's arithmetic error (circle) and total error
    (open diamond), ``errors`` holding the two lists."""
    e1, e2 = errors
    # the arithmetic error labelled above its circle, the total error below its diamond: the two
    # labels of one row never meet, however close the errors are
    for name, errs, symbol, size, where_, kind in (
        (
            "arithmetic error (vs fp64 on the same rounded inputs)",
            e1,
            "circle",
            11,
            "top center",
            "arithmetic",
        ),
        ("total error (vs fp64 on the original data)", e2, "diamond-open", 14, "bottom center", "total"),
    ):
        fig.add_trace(
            go.Scatter(
                x=errs,
                y=dts,
                mode="markers+text",
                name=name,
                text=[sci(v) if v else "" for v in errs],
                textposition=where_,
                textfont=dict(size=10),
                marker=dict(size=size, color=colors, symbol=symbol, line=dict(width=2, color=colors)),
                hovertemplate=f"%{{y}}: {kind} error %{{x:.2e}}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=2,
        )


def _rounding_segments(fig: go.Figure, dts: list, errors: tuple) -> None:
    """A dotted segment from each dtype's arithmetic error to its total error: what rounding the
    inputs adds (trace 3)."""
    sx, sy = [], []
    for d, a, b in zip(dts, *errors):
        if None not in (a, b):
            sx += [a, b, None]
            sy += [d, d, None]
    fig.add_trace(
        go.Scatter(
            x=sx,
            y=sy,
            mode="lines",
            name="added by rounding the inputs",
            hoverinfo="skip",
            line=dict(color=COLORS["muted"], dash="dot"),
            showlegend=False,
        ),
        row=1,
        col=2,
    )


def spread_note(ok) -> str:
    """What the whiskers are and how wide the widest is, from the rows drawn.

    Args:
        ok: the rows of `precision`'s result that ran.

    Returns:
        The note; a note that says so when the recording holds no spread.
    """
    if not {"gpu_us_p10", "gpu_us_p90"} <= set(ok.columns) or ok.empty:
        return "this recording holds no spread for these timings"
    rel = ((ok["gpu_us_p90"] - ok["gpu_us_p10"]) / ok["gpu_us"]).max()
    return f"whiskers: p10–p90 of each dtype's repeated timings (at most {rel:.1%} of its median here)"


def layout_chart(df) -> go.Figure:
    """NCHW vs NHWC: convolution GPU time stacked with the cost of converting NCHW tensors to NHWC and back.

    Args:
        df: `layout`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 convolution (us), 1 conversion (us).
    """
    ok = ok_rows(df)
    lays = list(ok["layout"])
    conv = [num(v) for v in ok["conv_gpu_us"]]
    conv_txt = [
        f"{in_unit(c, 'us')} conv<br>workspace {fmt_bytes(w)}" for c, w in zip(conv, ok["workspace_bytes"])
    ]
    cvt = [num(v) for v in ok["convert_gpu_us"]]
    fig = new_figure()
    fig.add_trace(
        go.Bar(
            x=lays,
            y=conv,
            name="convolution",
            marker_color=COLORS["primary"],
            text=conv_txt,
            textposition="inside",
            customdata=[str(p) for p in ok["plan_name"]],
            hovertemplate="%{x}: convolution %{y:.1f} us<br>plan %{customdata}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=lays,
            y=cvt,
            name="NCHW → NHWC → NCHW conversion (CuPy transposes)",
            marker_color=COLORS["secondary"],
            text=[f"+{in_unit(c, 'us')} convert" if c else "" for c in cvt],
            textposition="inside",
            customdata=[num(v) for v in ok["end_to_end_us"]],
            hovertemplate="%{x}: conversion %{y:.1f} us (end to end %{customdata:.1f} us)<extra></extra>",
        )
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="memory layout cuDNN runs in")
    fig.update_yaxes(title_text="GPU time per call (us)")
    spec = request_spec(df)
    detail = (
        (
            f"{spec.dtype} {spec.direction} {shape_label(spec)}; the conversion is what a user whose "
            "tensors are "
            "NCHW pays to run in NHWC"
        )
        if spec
        else ""
    )
    return finish(
        fig, df, "NCHW vs NHWC, conversion included", detail, note=not_ok_note(df, ("layout",)), height=460
    )


#: the roofline chart's height and the width a lesson draws it at (pixels): where its labels go
ROOFLINE_HEIGHT, CHART_WIDTH = 500, 880


def roofline_chart(df) -> go.Figure:
    """Arithmetic intensity vs achieved TFLOP/s (log-log), with the roof of the result's GPU.

    The roof is the compute roof (``peak_tflops`` for the dtype) and the bandwidth roof
    (``bandwidth_gb_s``). A GPU with no known ceiling (empty columns) gets no roof, and a note says
    so. Each shape's label goes where it covers no other label, marker or the roof (`place_labels`).

    Args:
        df: `roofline`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 measured shapes, 1 roof (empty without a ceiling).
    """
    ok = ok_rows(df)
    xi = [num(v) for v in ok["intensity_flops_per_byte"]]
    ty = [num(v) for v in ok["tflops"]] if "tflops" in ok.columns else [None] * len(ok)
    dtype = str(df["dtype"].iloc[0]) if len(df) else "?"
    peak, bw = first_value(df, "peak_tflops"), first_value(df, "bandwidth_gb_s")
    gpu = gpu_label((getattr(df, "attrs", {}) or {}).get("gpu"))
    known = [v for v in xi if v]
    lo, hi = (min(known) / 3, max(known) * 3) if known else (1.0, 1e4)
    roof = None
    if peak and bw:
        ridge = peak * 1e3 / bw  # FLOP/B where peak TFLOP/s = intensity * GB/s / 1000
        lo, hi = min(lo, ridge / 3), max(hi, ridge * 3)
        roof = ([lo, ridge, hi], [min(peak, x * bw / 1e3) for x in (lo, ridge, hi)])
    y_axis = log_axis([v for v in ty if v] + ([peak] if peak else []))
    fig = new_figure()
    fig.add_trace(_measured_points(ok, dtype, (xi, ty), (lo, hi), y_axis.get("range"), roof))
    roof_trace, roof_note = _roof_of(df, dtype, roof, gpu)
    fig.add_trace(roof_trace)
    fig.update_xaxes(
        title_text="arithmetic intensity (FLOP/byte, log)",
        type="log",
        range=[math.log10(lo), math.log10(hi)],
        **log_ticks([lo, hi]),
    )
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **y_axis)
    lay = str(df["layout"].iloc[0]) if len(df) else ""
    bad = not_ok_note(df, ("shape",))
    return finish(
        fig,
        df,
        f"Roofline: ResNet-50 convolutions, {dtype} {lay}",
        "heuristic plan per shape",
        note=f"{roof_note} · {bad}" if bad else roof_note,
        height=ROOFLINE_HEIGHT,
    )


def _measured_points(ok, dtype: str, points: tuple, x_range: tuple, y_range, roof) -> go.Scatter:
    """Each shape's intensity (FLOP/B) against its achieved TFLOP/s (``points``: the two lists), its
    name placed where it covers no other label, marker or the roof (trace 0)."""
    xi, ty = points
    names = list(ok["shape"])
    return go.Scatter(
        x=xi,
        y=ty,
        mode="markers+text",
        name=f"measured ({dtype})",
        text=names,
        textposition=_roofline_label_positions(xi, ty, names, x_range, y_range, roof),
        textfont=dict(size=10),
        marker=dict(
            size=10,
            color=DTYPE_COLORS.get(dtype, COLORS["primary"]),
            opacity=0.85,
            line=dict(width=1, color="white"),
        ),
        customdata=[
            [num(u), num(g)]
            for u, g in zip(ok.get("gpu_us", [None] * len(ok)), ok.get("achieved_gb_s", [None] * len(ok)))
        ],
        hovertemplate="%{text}: %{x:.0f} FLOP/B, %{y:.0f} TFLOP/s<br>%{customdata[0]:.1f} us, "
        "%{customdata[1]:.0f} GB/s (min-bytes model)<extra></extra>",
    )


def _roof_of(df, dtype: str, roof, gpu: str) -> tuple:
    """The roof of the result's GPU (trace 1; empty and named so without a ceiling) and the note's
    sentence on where it comes from, or why none is drawn.

    Returns:
        ``(trace, sentence)``.
    """
    peak, bw = first_value(df, "peak_tflops"), first_value(df, "bandwidth_gb_s")
    if roof:
        cg = first_value(df, "ceiling_gpu") or gpu
        trace = go.Scatter(
            x=roof[0],
            y=roof[1],
            mode="lines",
            name=f"roof: {cg}, {dtype} {peak:.0f} TFLOP/s, {bw:.0f} GB/s",
            line=dict(color=COLORS["dark"], width=2),
            hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
        )
        return trace, (
            f"roof: datasheet peak (dense) from labkit.ceilings; ridge at {peak * 1e3 / bw:.0f} FLOP/B. "
            "Intensity: FLOPs over a byte model (filter, output, and the input pixels some window "
            "covers, each moved once)."
        )
    trace = go.Scatter(
        x=[],
        y=[],
        mode="lines",
        name="roof (unknown GPU: not drawn)",
        line=dict(color=COLORS["dark"], width=2),
    )
    cg = first_value(df, "ceiling_gpu")
    why = (
        f"labkit.ceilings has no {dtype} peak for {cg}"
        if cg and bw
        else f"no ceilings known for {gpu} (labkit.ceilings lists vendor datasheet figures only)"
    )
    return trace, f"No roof drawn: {why}. Only the measured points are shown."


def _roofline_label_positions(xs, ys, names, x_range, y_range, roof) -> list:
    """Text positions for the roofline's shape labels, from where each point falls in the plot's
    pixels (the chart's size and margins, as `finish` lays it out)."""
    if not y_range:
        return ["top center"] * len(xs)
    width = CHART_WIDTH - 70 - 30
    height = ROOFLINE_HEIGHT - (112 + 22) - (76 + 15 * 2)
    lx0, lx1 = math.log10(x_range[0]), math.log10(x_range[1])
    ly0, ly1 = y_range

    def px(x, y):
        if not x or not y or x <= 0 or y <= 0:
            return None
        return ((math.log10(x) - lx0) / (lx1 - lx0) * width, (math.log10(y) - ly0) / (ly1 - ly0) * height)

    lines = [[px(x, y) for x, y in zip(*roof)]] if roof else []
    return place_labels([px(x, y) for x, y in zip(xs, ys)], names, size=(width, height), lines=lines)
