"""The roofline of a comparison: each GPU's measured shapes (intensity vs TFLOP/s) under its own
roof from `labkit.ceilings`, every GPU's point of one shape at its intensity, one label per shape or
per group of shapes whose points coincide; the shapes the summary quotes carry their times and ratio.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ... import ceilings
from ...draw import plots
from ...draw.units import log_axis, log_ticks, us_text
from ...env import gpu_label
from .frames import GPU_COLORS, quoted_labels, ratio_column, ratio_range, ratio_text, ratios
from .names import COLOR_EQUAL, notes, short_gpu, trace_name

#: a roofline's points of one shape are drawn at its intensity on every GPU: the first GPU's marker
#: this size (px, a ring), each next one this much smaller, so points that coincide show one inside another
ROOF_MARKER_SIZE, ROOF_MARKER_STEP = 15, 5
#: shapes whose points lie this close (decades, in x and y) share one label
ROOF_SAME_DECADES = 0.05
#: the y axis reaches at least this far (decades) under a quoted shape's lowest point: room for its
#: label of three lines written under it
ROOF_QUOTED_ROOM = 0.4


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


def _roof_quoted(df) -> dict:
    """The lines a label adds for each shape `summary` quotes (its largest gain and loss): the
    first GPU's time, then the compared GPU's with its ratio, as the summary writes them.

    Args:
        df: `frames`' result of ``roofline``.

    Returns:
        shape -> its lines, each in its GPU's colour; empty when one GPU alone was measured.
    """
    recs = df.attrs["recordings"]
    table = ratios(df, "gpu_us", recs[0])
    if not table.attrs.get("others"):
        return {}
    col = ratio_column(table)
    other = col.split(" ", 1)[1].split("/")[0]
    gpu = {rec: short_gpu(df.attrs["provenance"][rec]["gpu"]) for rec in (recs[0], other)}
    color = {rec: GPU_COLORS[recs.index(rec) % len(GPU_COLORS)] for rec in gpu}
    rows = table.reset_index(drop=True)
    rng = ratio_range(rows, col) or ()  # without a spread, the ratio alone
    out = {}
    for label in quoted_labels(table):
        i = rows.index[rows["label"] == label][0]
        ratio = ratio_text(rows.loc[i, col], *(r[i] for r in rng))
        texts = {
            recs[0]: f"{gpu[recs[0]]}: {us_text(rows.loc[i, f'gpu_us {recs[0]}'])}",
            other: f"{gpu[other]}: {us_text(rows.loc[i, f'gpu_us {other}'])} · {ratio}",
        }
        out[label] = [f'<span style="color:{color[rec]}">{t}</span>' for rec, t in texts.items()]
    return out


def _roof_labels(points: dict, quoted: dict) -> list:
    """One label a shape, or a group of shapes whose points coincide (`_roof_groups`), above its
    points; a group with a shape the summary quotes is labelled under them, with its times.

    Args:
        points: `_roof_points`' result.
        quoted: `_roof_quoted`'s result.

    Returns:
        The annotations (dicts, log-axis coordinates).
    """
    labels = []
    for group in _roof_groups(points):
        gx = 10 ** (sum(math.log10(points[s][0]) for s in group) / len(group))
        ys = [v for s in group for v in points[s][1] if v]
        lines = [" · ".join(group)]
        for s in (s for s in group if s in quoted):
            first, second = quoted[s]
            lines += [(f"{s}, " if len(group) > 1 else "") + first, second]
        under = len(lines) > 1  # under the points, away from the roofs above them
        labels.append(
            dict(
                x=math.log10(gx),
                y=math.log10(min(ys) if under else max(ys)),
                text="<br>".join(lines),
                showarrow=False,
                yshift=-(ROOF_MARKER_SIZE // 2 + 2) if under else 9,
                yanchor="top" if under else "bottom",
                font=dict(size=11 if under else 10, color=COLOR_EQUAL),
            )
        )
    return labels


def _roof_axes(fig, xs: list, ys: list, *, under: list) -> None:
    """A roofline's log axes: intensity over every point and roof, TFLOP/s over every point and peak.

    Args:
        fig: the figure, its traces drawn, changed in place.
        xs: the intensities measured (FLOP/byte).
        ys: the TFLOP/s measured, and each roof's peak.
        under: the TFLOP/s of each point with a label of times under it: the axis reaches
            `ROOF_QUOTED_ROOM` under them.
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
    yaxis = log_axis(ys)
    if under and "range" in yaxis:
        bottom = min(yaxis["range"][0], math.log10(min(under)) - ROOF_QUOTED_ROOM)
        yaxis["range"] = [bottom, yaxis["range"][1]]
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **yaxis)


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
    the two coincide; one label per shape, or per group of shapes whose points coincide. The
    shapes `summary` quotes (its largest gain and loss) carry their times and ratio.

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
    quoted = _roof_quoted(df)
    fig.update_layout(annotations=_roof_labels(points, quoted))
    _roof_axes(fig, xs, ys, under=[v for s in quoted for v in points.get(s, (0, []))[1] if v])
    labelled = (
        f"; labelled under their points: the largest gain and loss, time and ratio against "
        f"{short_gpu(df.attrs['provenance'][recs[0]]['gpu'])}; hover for the others"
        if quoted
        else ""
    )
    return plots.finish(
        fig,
        df,
        f"Roofline on {len(recs)} GPUs: ResNet-50 convolutions, {dtype} {df['layout'].iloc[0]}",
        f"heuristic plan per shape on each GPU{labelled}",
        note=_roof_note(df, missing),
        height=540,
        legend_rows=2,
    )
