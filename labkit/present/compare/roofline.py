"""The roofline of a comparison: each GPU's measured shapes (intensity vs TFLOP/s) under its own
roof from `labkit.ceilings`, every GPU's point of one shape at its intensity, one label per shape or
per group of shapes whose points coincide.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ... import ceilings
from ...draw import plots
from ...draw.units import log_axis, log_ticks
from ...env import gpu_label
from .frames import GPU_COLORS
from .names import COLOR_EQUAL, notes, trace_name

#: a roofline's points of one shape are drawn at its intensity on every GPU: the first GPU's marker
#: this size (px, a ring), each next one this much smaller, so points that coincide show one inside another
ROOF_MARKER_SIZE, ROOF_MARKER_STEP = 15, 5
#: shapes whose points lie this close (decades, in x and y) share one label
ROOF_SAME_DECADES = 0.05


def _roof_groups(points) -> list:
    """Shapes whose points lie within `ROOF_SAME_DECADES` of each other (log x and y), in
    intensity order: each group one label ("3x3 @14 · 3x3 @7": coinciding points shown as such).
    ``points``: shape -> (x, [y of each GPU])."""
    order = sorted(points, key=lambda s: points[s][0])
    groups: list = []
    for s in order:
        x, ys = points[s]
        for g in groups:
            gx, gys = points[g[-1]]
            near_x = abs(math.log10(x) - math.log10(gx)) <= ROOF_SAME_DECADES
            near_y = all(
                abs(math.log10(a) - math.log10(b)) <= ROOF_SAME_DECADES for a, b in zip(ys, gys) if a and b
            )
            if near_x and near_y:
                g.append(s)
                break
        else:
            groups.append([s])
    return groups


def _roof_points(df) -> dict:
    """Each shape's intensity and every GPU's TFLOP/s, where both were measured.

    Args:
        df: `frames`' result of ``roofline``.

    Returns:
        shape -> ``[x (FLOP/byte), [TFLOP/s of each recording, None where not measured]]``.
    """
    recs = df.attrs["recordings"]
    points: dict = {}
    for i, rec in enumerate(recs):
        sub = plots.ok_rows(df[df["recording"] == rec])
        for s, x, y in zip(sub["shape"], sub["intensity_flops_per_byte"], sub["tflops"]):
            if plots.num(x) and plots.num(y):
                points.setdefault(s, [float(x), [None] * len(recs)])[1][i] = float(y)
    return points


def _roof_gpu_trace(df, sub, rec: str, i: int):
    """One GPU's measured shapes at their intensity: the first GPU a ring, each next a smaller filled marker.

    Args:
        df: `frames`' result of ``roofline``.
        sub: its measured rows of ``rec``.
        rec: the recording drawn.
        i: its place among the frame's recordings.

    Returns:
        The ``go.Scatter`` (shape, FLOP/byte, TFLOP/s and us in the hover).
    """
    color = GPU_COLORS[i % len(GPU_COLORS)]
    x = [plots.num(v) for v in sub["intensity_flops_per_byte"]]
    return go.Scatter(
        x=[v if v else None for v in x],
        y=[plots.num(v) for v in sub["tflops"]],
        mode="markers",
        name=trace_name(df, rec),
        legendgroup=rec,
        marker=dict(
            size=max(ROOF_MARKER_SIZE - ROOF_MARKER_STEP * i, 6),
            color="rgba(0,0,0,0)" if i == 0 else color,
            symbol=("circle", "diamond")[i % 2],
            line=dict(color=color, width=2),
        ),
        text=list(sub["shape"]),
        customdata=[[plots.num(v), plots.num(a)] for v, a in zip(sub["gpu_us"], x)],
        hovertemplate="%{text}: %{customdata[1]:.0f} FLOP/B, %{y:.0f} TFLOP/s, "
        "%{customdata[0]:.1f} us<extra>%{fullData.name}</extra>",
    )


def _roof_trace(c, rec: str, i: int, *, dtype: str, xs: list):
    """A GPU's roof from `labkit.ceilings`: bandwidth up to the ridge, the compute peak after it.

    Args:
        c: the GPU's ceilings (`ceilings.for_gpu`), with a peak for ``dtype``.
        rec: the recording it belongs to (its legend group).
        i: its place among the frame's recordings.
        dtype: the precision whose peak it draws.
        xs: the intensities drawn so far (FLOP/byte): the roof spans them and the ridge, a factor 3 wider.

    Returns:
        The ``go.Scatter`` line.
    """
    peak, ridge = c.peak_tflops(dtype), c.ridge_intensity(dtype)
    rx = sorted([min(xs + [ridge]) / 3, ridge, max(xs + [ridge]) * 3])
    ry = [min(peak, v * c.bandwidth_bytes_per_s / 1e12) for v in rx]
    return go.Scatter(
        x=rx,
        y=ry,
        mode="lines",
        legendgroup=rec,
        line=dict(color=GPU_COLORS[i % len(GPU_COLORS)], width=2),
        name=f"roof {c.gpu}: {peak:.0f} TFLOP/s {dtype}, {c.bandwidth_bytes_per_s / 1e9:.0f} GB/s",
        hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
    )


def _roof_labels(points: dict) -> list:
    """One label a shape, or a group of shapes whose points coincide (`_roof_groups`), above its points.

    Args:
        points: `_roof_points`' result.

    Returns:
        The annotations (dicts, log-axis coordinates).
    """
    labels = []
    for group in _roof_groups(points):
        gx = 10 ** (sum(math.log10(points[s][0]) for s in group) / len(group))
        gy = max(v for s in group for v in points[s][1] if v)
        labels.append(
            dict(
                x=math.log10(gx),
                y=math.log10(gy),
                text=" · ".join(group),
                showarrow=False,
                yshift=9,
                yanchor="bottom",
                font=dict(size=10, color=COLOR_EQUAL),
            )
        )
    return labels


def _roof_axes(fig, xs: list, ys: list) -> None:
    """A roofline's log axes: intensity over every point and roof, TFLOP/s over every point and peak.

    Args:
        fig: the figure, its traces drawn, changed in place.
        xs: the intensities measured (FLOP/byte).
        ys: the TFLOP/s measured, and each roof's peak.
    """
    lo, hi = min(xs) / 3, max(xs) * 3
    for t in fig.data:
        if t.mode == "lines":
            lo, hi = min(lo, min(t.x)), max(hi, max(t.x))
    fig.update_xaxes(
        title_text="arithmetic intensity (FLOP/byte, log)",
        type="log",
        range=[math.log10(lo), math.log10(hi)],
        **log_ticks([lo, hi]),
    )
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **log_axis(ys))


def _roof_note(df, missing: list) -> str:
    """A roofline's note: where the roofs come from, how coinciding points show, GPUs without a roof.

    Args:
        df: `frames`' result of ``roofline``.
        missing: the labels of the GPUs `labkit.ceilings` lacks.

    Returns:
        The note, its parts joined by " · ".
    """
    parts = [
        "roofs: datasheet peaks (dense) from labkit.ceilings; the bandwidth roof moves, the compute roof "
        "does not",
        "every GPU's point of a shape sits at its intensity, the first a ring, the next a smaller filled "
        "marker (inside the ring where they coincide)",
        f"no ceilings known for {', '.join(missing)}: points only" if missing else "",
        notes(df),
    ]
    return " · ".join(n for n in parts if n)


def roofline_figure(df):
    """Each GPU's measured shapes (intensity vs TFLOP/s) under its roof from `labkit.ceilings`.

    A GPU the table lacks gets points only, and the note says so. Every GPU's point of one shape
    sits at its intensity: the first a ring, the next a smaller filled marker, inside the ring where
    the two coincide; one label per shape, or per group of shapes whose points coincide.

    Args:
        df: `frames`' result of ``roofline``.

    Returns:
        The ``go.Figure``.
    """
    fig = plots.new_figure()
    dtype = str(df["dtype"].iloc[0])
    recs = df.attrs["recordings"]
    xs, ys, missing = [], [], []
    points = _roof_points(df)
    for i, rec in enumerate(recs):
        sub = plots.ok_rows(df[df["recording"] == rec])
        xs += [v for v in (plots.num(a) for a in sub["intensity_flops_per_byte"]) if v]
        ys += [v for v in (plots.num(a) for a in sub["tflops"]) if v]
        fig.add_trace(_roof_gpu_trace(df, sub, rec, i))
        gpu = df.attrs["provenance"][rec]["gpu"]
        c = ceilings.for_gpu(gpu)
        if c and c.peak_tflops(dtype):
            ys.append(c.peak_tflops(dtype))
            fig.add_trace(_roof_trace(c, rec, i, dtype=dtype, xs=xs))
        else:
            missing.append(gpu_label(gpu))
    fig.update_layout(annotations=_roof_labels(points))
    _roof_axes(fig, xs, ys)
    return plots.finish(
        fig,
        df,
        f"Roofline on {len(recs)} GPUs: ResNet-50 convolutions, {dtype} {df['layout'].iloc[0]}",
        "heuristic plan per shape on each GPU",
        note=_roof_note(df, missing),
        height=540,
        legend_rows=2,
    )
