"""The charts of a comparison: the GPUs of a `frames` DataFrame on the same axes (the roofline,
drawn by `roofline`; a sweep's lines, the fastest plans beside their time ratio, or bars), every
trace of one recording in a ``legendgroup`` named after it, the title with every provenance.
"""

from __future__ import annotations

import math
from typing import Optional

import plotly.graph_objects as go

from ...draw import plots
from ...draw.names import plan_labels
from ...draw.units import in_unit, log_axis, log_if_wide, tick_text
from ...env import gpu_label
from ...errors import InvalidSpec
from ...experiments import workspace_basics
from .frames import (
    GPU_COLORS,
    comparable,
    quoted_labels,
    ratio_range,
    ratio_text,
    ratios,
    spec_line,
    spread_columns,
)
from .names import COLOR_EQUAL, notes, short_gpu, trace_name
from .roofline import roofline_figure


# ---- one chart, several GPUs -----------------------------------------------------------------
def _detail(df, extra: str = "") -> str:
    return "; ".join(x for x in (spec_line(df), extra) if x)


def _fmt(value: str):
    """How a label writes a ``value`` column: times in the axis's us, others in 3 digits."""
    return (lambda v: in_unit(v, "us")) if value.endswith("_us") else (lambda v: f"{v:.3g}")


def _spread_of(df, rec: str, table, value: str):
    """(values - p10, p90 - values) of recording ``rec`` in ``table``'s row order, or None."""
    cols = spread_columns(df, value)
    if not cols:
        return None
    comp = comparable(df.attrs["experiment"])
    mine = plots.ok_rows(df[df["recording"] == rec]).set_index(list(comp.labels))
    keys = [
        tuple(r) if len(comp.labels) > 1 else r[0] for r in table[list(comp.labels)].itertuples(index=False)
    ]
    lo = [plots.num(mine[cols[0]].get(k)) for k in keys]
    hi = [plots.num(mine[cols[1]].get(k)) for k in keys]
    v = [plots.num(x) for x in table[f"{value} {rec}"]]
    return (
        [a - b if a is not None and b is not None else None for a, b in zip(v, lo)],
        [b - a if a is not None and b is not None else None for a, b in zip(v, hi)],
    )


def figure(df, value: Optional[str] = None):
    """The GPUs of a `frames` DataFrame on the same axes, every trace of one recording in one legend group.

    For the roofline: each GPU's points, at each shape's intensity, under its own roof
    (`labkit.ceilings`). For a sweep: one line per GPU. For plans: the fastest plans per GPU with
    their spread, beside their time ratio. Otherwise: bars per row (dots on a log axis where values
    span decades), each other GPU's labelled with its ratio to the first, and the ratio's range under
    the timing spread where the frame holds one.

    Args:
        df: `frames`' result.
        value: the column compared; default the experiment's (`comparable`).

    Returns:
        The ``go.Figure``; `InvalidSpec` for a ``value`` that is not a column.
    """
    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    comp = comparable(name)
    value = value or comp.value
    if value not in df.columns:
        raise InvalidSpec("value", value, f"must be a column of the {name} frame")
    if name == "roofline":
        return roofline_figure(df)
    table = ratios(df, value, df.attrs["recordings"][0])
    if name == "sweep":
        return _sweep(df, table, comp)
    if name == "plans":
        return _plans(df, table, comp)
    return _bars(df, table, comp)


def _ratio_texts(table, rec: str) -> list:
    base = table.attrs["baseline"]
    if rec == base:
        return [""] * len(table)
    col = f"ratio {rec}/{base}"
    rng = ratio_range(table, col)
    return [
        ratio_text(r, *(x.iloc[i] for x in rng)) if rng else ratio_text(r) for i, r in enumerate(table[col])
    ]


def _whiskers(err) -> dict:
    """The ``error_x`` of a trace's whiskers (p10-p90, or a ratio's range), as keyword arguments.

    Args:
        err: how far each whisker reaches below and above its value (`_spread_of`'s), or None.

    Returns:
        ``{"error_x": ...}``, or ``{}`` where there is no spread.
    """
    if not err:
        return {}
    return dict(
        error_x=dict(type="data", symmetric=False, arrayminus=err[0], array=err[1], thickness=1.2, width=3)
    )


def _bar_trace(df, table, rec: str, i: int, *, kind: str):
    """One GPU's trace of a bar comparison: bars on a linear axis, else dots, each row labelled.

    Args:
        df: `frames`' result.
        table: `ratios`' result for it.
        rec: the recording drawn.
        i: its place among the frame's recordings.
        kind: ``"linear"`` (bars) or ``"log"`` (dots, each GPU a little above or below its row's line).

    Returns:
        The ``go.Bar`` or ``go.Scatter``: every value labelled with its ratio to the first GPU.
    """
    value, recs = table.attrs["value"], df.attrs["recordings"]
    fmt = _fmt(value)
    vals = [plots.num(v) for v in table[f"{value} {rec}"]]
    text = [
        (fmt(v) + (f" · {r}" if r else "")) if v is not None else "not measured"
        for v, r in zip(vals, _ratio_texts(table, rec))
    ]
    err = _spread_of(df, rec, table, value)
    style = dict(name=trace_name(df, rec), legendgroup=rec, marker_color=GPU_COLORS[i % len(GPU_COLORS)])
    if kind == "linear":
        return go.Bar(
            y=list(table["label"]),
            x=vals,
            orientation="h",
            text=text,
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{text}<extra>%{fullData.name}</extra>",
            **style,
            **_whiskers(err),
        )
    return go.Scatter(
        y=[k + 0.22 * (i - (len(recs) - 1) / 2) for k in range(len(table))],
        x=vals,
        mode="markers+text",
        text=text,
        textposition="middle right",
        textfont=dict(size=10),
        cliponaxis=False,
        marker=dict(size=9, symbol=("circle", "diamond")[i % 2]),
        customdata=list(table["label"]),
        hovertemplate="%{customdata}: %{text}<extra>%{fullData.name}</extra>",
        **style,
        **_whiskers(err),
    )


def _bar_axes(fig, table, comp, allv: list, *, kind: str) -> None:
    """A bar comparison's axes: linear from zero with room for the labels, or log with one tick per row.

    Args:
        fig: the figure, changed in place.
        table: `ratios`' result drawn.
        comp: the experiment's `Comparable`.
        allv: every value drawn (None where not measured).
        kind: ``"linear"`` or ``"log"`` (`log_if_wide`).
    """
    value, n = table.attrs["value"], len(table)
    title = comp.axis if value == comp.value else value
    top = max([v for v in allv if v is not None] or [1.0])
    if kind == "linear":
        fig.update_layout(barmode="group")
        fig.update_yaxes(autorange="reversed")
        fig.update_xaxes(title_text=title, type="linear", range=[0, top * 1.45])  # room for the labels
    else:
        fig.update_yaxes(
            tickvals=list(range(n)), ticktext=list(table["label"]), range=[n - 0.5, -0.5], type="linear"
        )
        fig.update_xaxes(title_text=f"{title}, log", type="log", **log_axis(allv + [top * 4], max_ticks=6))


def _bar_words(df, table) -> tuple:
    """A bar comparison's detail line (the workload, what the labels say) and its note (the spread).

    Args:
        df: `frames`' result.
        table: `ratios`' result drawn.

    Returns:
        ``(detail, note)``, both text.
    """
    workload = (
        f"workload '{df['workload'].iloc[0]}'; "
        if df.attrs["experiment"] == "strategies" and "workload" in df.columns
        else ""
    )
    base_gpu = df.attrs["provenance"][table.attrs["baseline"]]["gpu"]
    extra = f"{workload}labels: time and ratio against {gpu_label(base_gpu)}"
    spread = "whiskers and [ranges]: p10-p90 of repeated timings" if table.attrs.get("spread") else ""
    note = " · ".join(n for n in (spread, notes(df)) if n)
    return _detail(df, extra), note


def _bars(df, table, comp):
    """Grouped bars (a linear axis from zero), or dots on a log axis where the values span decades."""
    value, recs = table.attrs["value"], df.attrs["recordings"]
    allv = [plots.num(v) for rec in recs for v in table[f"{value} {rec}"]]
    kind = log_if_wide(allv)
    fig = plots.new_figure()
    for i, rec in enumerate(recs):
        fig.add_trace(_bar_trace(df, table, rec, i, kind=kind))
    _bar_axes(fig, table, comp, allv, kind=kind)
    detail, note = _bar_words(df, table)
    return plots.finish(
        fig,
        df,
        f"Same call, {len(recs)} GPUs: {df.attrs['experiment']}",
        detail,
        note=note,
        height=max(420, 160 + 26 * len(table) * len(recs)),
    )


def _sweep(df, table, comp):
    """One line per GPU over the swept value (log-log), the ratio to the first GPU in the hover; the
    points the summary quotes (`quoted_labels`) labelled with their value and ratio."""
    value = table.attrs["value"]
    fmt = _fmt(value)
    fig = plots.new_figure()
    quoted = _quoted_positions(df, table)
    for i, rec in enumerate(df.attrs["recordings"]):
        vals = [plots.num(v) for v in table[f"{value} {rec}"]]
        text = [
            (fmt(v) + (f" · {r}" if r else "")) if v is not None else "not measured"
            for v, r in zip(vals, _ratio_texts(table, rec))
        ]
        where = [quoted.get((label, rec)) for label in table["label"]]
        fig.add_trace(
            go.Scatter(
                x=list(table["value"]),
                y=vals,
                mode="lines+markers+text",
                text=[t if w else "" for t, w in zip(text, where)],
                textposition=[w or "top left" for w in where],
                textfont=dict(size=11, color=GPU_COLORS[i % len(GPU_COLORS)]),
                cliponaxis=False,  # a label by the highest point may reach above the plot
                customdata=text,
                name=trace_name(df, rec),
                legendgroup=rec,
                marker_color=GPU_COLORS[i % len(GPU_COLORS)],
                hovertemplate=(
                    f"{df['field'].iloc[0]}=%{{x}}: %{{customdata}}<extra>%{{fullData.name}}</extra>"
                ),
            )
        )
    vals = [plots.num(v) for c in table.columns if c.startswith(f"{value} ") for v in table[c]]
    fig.update_xaxes(
        title_text=workspace_basics.SWEEP_AXIS.get(str(table.attrs.get("request", {}).get("field")), "value"),
        type="log",
        tickvals=list(table["value"]),
        ticktext=[tick_text(float(v)) for v in table["value"]],
        range=_sweep_range(table, quoted),
    )
    title = comp.axis if value == comp.value else value
    fig.update_yaxes(title_text=f"{title}, log", type="log", **log_axis(vals))
    return plots.finish(
        fig,
        df,
        f"Same call, {len(df.attrs['recordings'])} GPUs: sweep",
        _detail(
            df,
            "heuristic plan at each point; labelled: the largest gain and loss, time and ratio against "
            f"{gpu_label(df.attrs['provenance'][table.attrs['baseline']]['gpu'])}; hover for the others",
        ),
        note=notes(df),
        height=480,
    )


#: how far a sweep's x axis reaches past its first or last value where a label sits there: a share
#: of the values' span on the log axis (about a 15-character label's width at 11 px)
SWEEP_LABEL_PAD = 0.16


def _quoted_positions(df, table) -> dict:
    """Where each label of a point the summary quotes goes (`quoted_labels`): above and left of the
    highest GPU's point, below and right of the others', clear of the lines that rise through them
    and parted where two GPUs' points are close.

    Args:
        df: `frames`' result of a sweep.
        table: its `ratios`.

    Returns:
        (row label, recording) -> a plotly ``textposition``.
    """
    value, recs = table.attrs["value"], df.attrs["recordings"]
    rows = table.reset_index(drop=True)
    out = {}
    for label in quoted_labels(table):
        i = rows.index[rows["label"] == label][0]
        vals = {rec: plots.num(rows.loc[i, f"{value} {rec}"]) for rec in recs}
        shown = [rec for rec in recs if vals[rec] is not None]
        top = max(shown, key=lambda rec: vals[rec]) if shown else None
        out.update({(label, rec): "top left" if rec == top else "bottom right" for rec in shown})
    return out


def _sweep_range(table, quoted: dict) -> list:
    """A sweep's log x range (log10 units), reaching past the first value where a label goes left of
    it and past the last where one goes right of it (`SWEEP_LABEL_PAD`)."""
    xs = [math.log10(float(v)) for v in table["value"]]
    first, last = table["label"].iloc[0], table["label"].iloc[-1]
    pad = SWEEP_LABEL_PAD * max(xs[-1] - xs[0], 0.5)
    left = any(k[0] == first and p.endswith("left") for k, p in quoted.items())
    right = any(k[0] == last and p.endswith("right") for k, p in quoted.items())
    # plotly's own margin around the markers, where no label needs more
    edge = 0.04 * max(xs[-1] - xs[0], 0.5)
    return [xs[0] - (pad if left else edge), xs[-1] + (pad if right else edge)]


#: plans a plans comparison draws (the fastest on the first GPU; `ratios` has every plan)
PLANS_SHOWN = 12
PLANS_GRID = plots.grid(
    rows=1,
    cols=2,
    shared_yaxes=True,
    column_widths=[0.6, 0.4],
    horizontal_spacing=0.03,
    subplot_titles=("GPU time per call: median, whiskers p10-p90", "time ratio, whiskers: its range"),
)


def _plan_ticks(df, shown) -> list:
    """Each shown plan's tick: its `plan_labels` label, and which GPU's fastest or heuristic's pick it is.

    Args:
        df: `frames`' result of ``plans``.
        shown: the rows drawn (``plan_name`` column), in order.

    Returns:
        One tick text a row (``"<br>(heuristic's pick, fastest on H200 SXM)"`` where it is such a plan).
    """
    flags = {}
    for rec in df.attrs["recordings"]:
        mine = df[df["recording"] == rec].set_index("plan_name")
        for col, tag in (("best", f"fastest on {short_gpu(df.attrs['provenance'][rec]['gpu'])}"),):
            for p in mine.index[mine[col].astype(bool)] if col in mine.columns else []:
                flags.setdefault(p, []).append(tag)
    if "heuristic_pick" in df.columns:
        for p in dict.fromkeys(df.loc[df["heuristic_pick"].astype(bool), "plan_name"]):
            flags.setdefault(p, []).insert(0, "heuristic's pick")
    names = list(shown["plan_name"])
    return [
        lab + (f"<br>({', '.join(flags[p])})" if p in flags else "")
        for p, lab in zip(names, plan_labels(names))
    ]


def _plan_time_trace(df, shown, rec: str, i: int):
    """One GPU's median time of each shown plan with its p10-p90 whiskers, a little above or below the row.

    Args:
        df: `frames`' result of ``plans``.
        shown: the rows drawn (`ratios`' columns), in order.
        rec: the recording drawn.
        i: its place among the frame's recordings.

    Returns:
        The ``go.Scatter`` (the plan's full name and time in the hover).
    """
    value, recs = shown.attrs["value"], df.attrs["recordings"]
    fmt = _fmt(value)
    vals = [plots.num(v) for v in shown[f"{value} {rec}"]]
    return go.Scatter(
        x=vals,
        y=[k + 0.2 * (i - (len(recs) - 1) / 2) for k in range(len(shown))],
        mode="markers",
        name=trace_name(df, rec),
        legendgroup=rec,
        marker=dict(size=9, color=GPU_COLORS[i % len(GPU_COLORS)], symbol=("circle", "diamond")[i % 2]),
        customdata=[
            [p, fmt(v) if v is not None else "not measured"] for p, v in zip(shown["plan_name"], vals)
        ],
        hovertemplate="%{customdata[0]}: %{customdata[1]}<extra>%{fullData.name}</extra>",
        **_whiskers(_spread_of(df, rec, shown, value)),
    )


def _plan_ratio_trace(df, shown, rec: str, i: int):
    """One GPU's time ratio to the first GPU for each shown plan, whiskers its range under the spreads.

    Args:
        df: `frames`' result of ``plans``.
        shown: the rows drawn (`ratios`' columns), in order.
        rec: the recording drawn (not the first).
        i: its place among the frame's recordings.

    Returns:
        The ``go.Scatter``, out of the legend (its GPU's time trace is there).
    """
    base = shown.attrs["baseline"]
    col = f"ratio {rec}/{base}"
    r = [plots.num(v) for v in shown[col]]
    rng = ratio_range(shown, col)
    err = (
        (
            [v - lo if v is not None and plots.num(lo) is not None else None for v, lo in zip(r, rng[0])],
            [h - v if v is not None and plots.num(h) is not None else None for v, h in zip(r, rng[1])],
        )
        if rng
        else None
    )
    gpu = {k: short_gpu(df.attrs["provenance"][k]["gpu"]) for k in (rec, base)}
    return go.Scatter(
        x=r,
        y=list(range(len(shown))),
        mode="markers",
        name=f"ratio {gpu[rec]} / {gpu[base]}",
        legendgroup=rec,
        showlegend=False,
        marker=dict(size=8, color=GPU_COLORS[i % len(GPU_COLORS)], symbol="line-ns-open", line_width=2),
        customdata=[
            ratio_text(v, *(x.iloc[k] for x in rng)) if rng else ratio_text(v) for k, v in enumerate(r)
        ],
        hovertemplate="%{customdata}<extra></extra>",
        **_whiskers(err),
    )


def _plan_axes(fig, shown, comp, *, ticks: list, recs: list) -> None:
    """A plans comparison's axes: times (linear, padded), ratios centred on 1 with a line there, plan ticks.

    Args:
        fig: the figure (`PLANS_GRID`), changed in place.
        shown: the rows drawn (`ratios`' columns), in order.
        comp: the experiment's `Comparable`.
        ticks: `_plan_ticks`' texts, one a row.
        recs: the recordings drawn, in order.
    """
    value, n = shown.attrs["value"], len(shown)
    vals = [plots.num(v) for rec in recs for v in shown[f"{value} {rec}"]]
    vals = [v for v in vals if v is not None] or [1.0]
    pad = 0.08 * (max(vals) - min(vals) or max(vals))
    title = comp.axis if value == comp.value else value
    fig.update_xaxes(title_text=title, type="linear", range=[min(vals) - pad, max(vals) + pad], row=1, col=1)
    ratio_vals = [
        plots.num(v)
        for c in shown.columns
        if c.startswith("ratio")
        for v in shown[c]
        if plots.num(v) is not None
    ] or [1.0]
    span = max(abs(max(ratio_vals) - 1), abs(1 - min(ratio_vals)), 0.02) * 1.15
    fig.update_xaxes(
        title_text="other GPU's time / first GPU's", type="linear", range=[1 - span, 1 + span], row=1, col=2
    )
    fig.add_vline(x=1, line=dict(color=COLOR_EQUAL, width=1, dash="dot"), row=1, col=2)
    fig.update_yaxes(
        tickvals=list(range(n)),
        ticktext=ticks,
        range=[n - 0.5, -0.5],
        type="linear",
        tickfont=dict(size=11),
        row=1,
        col=1,
    )


def _plans(df, table, comp):
    """The `PLANS_SHOWN` plans fastest on the first GPU, one row each: every GPU's median with its
    p10-p90 whiskers (each GPU a little above or below the row), and the time ratio with its
    range under those spreads; a plan is labelled `plan_labels` (its full name in the hover), and
    a tick says which plan is the heuristic's pick and which the fastest on each GPU."""
    value = table.attrs["value"]
    recs, base = df.attrs["recordings"], table.attrs["baseline"]
    shown = table.sort_values(f"{value} {base}", na_position="last").head(PLANS_SHOWN)
    shown.attrs = table.attrs
    n = len(shown)
    fig = plots.new_figure(**PLANS_GRID)
    ticks = _plan_ticks(df, shown)
    for i, rec in enumerate(recs):
        fig.add_trace(_plan_time_trace(df, shown, rec, i), row=1, col=1)
    for i, rec in enumerate(recs[1:], 1):
        fig.add_trace(_plan_ratio_trace(df, shown, rec, i), row=1, col=2)
    _plan_axes(fig, shown, comp, ticks=ticks, recs=recs)
    more = len(table) - n
    of_all = f" of {len(table)} cuDNN offers (compare.ratios(df) has all)" if more > 0 else ""
    detail = (
        f"the {n} plans fastest on {short_gpu(df.attrs['provenance'][base]['gpu'])}{of_all}; a plan: its "
        "engine, and #n its rank among that engine's plans here (hover for the full name)"
    )
    return plots.finish(
        fig,
        df,
        f"Same call, {len(recs)} GPUs: plans",
        _detail(df, detail),
        note=notes(df),
        height=230 + 40 * n,
    )
