"""The chart of a network report: GPU time per call of the pass (the heuristic's plan and the
fastest, us), the workspace each strategy held during each call of the first pass (MiB), and the
pass time within each workspace cap (ms).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ...draw.labels import place_labels
from ...draw.plain_figure import figure_of
from ...draw.plots import COLORS, fmt_bytes, grid, laid_out, num, ok_rows, wrap
from ...draw.units import PLAIN_TICKS, in_unit, number
from ..core import MIB
from .request import strategy_labels
from .tables import largest_request, sized_bytes, tables_of


def column(df, name: str, dtype=np.float64) -> np.ndarray:
    """One column of a table as a numpy array.

    Args:
        df: the table.
        name: the column.
        dtype: the array's dtype; float makes missing values NaN (a gap in the chart).

    Returns:
        The array; empty when ``df`` lacks the column.
    """
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


#: strategies whose held bytes differ by at most this share of the largest, call by call, share a line
SAME_LINE = 0.01
#: the width (px) and opacity of a line that stands for several strategies
MERGED_WIDTH, MERGED_OPACITY = 6, 0.45
#: characters of a legend line in the memory timeline: a longer entry (a line that stands for many
#: strategies) is wrapped, so the legend beside the plots takes little of their width (all eight strategies
#: on one line, as deeplabv3_aspp's report has them, make eight lines: the most the legend shows whole)
LEGEND_CHARS = 26
#: what a legend entry that names several strategies ends with (`LEGEND_CHARS` long: a line of its own)
SAME_WORDS = "(one line: about the same)"


def timeline_entry(members: list) -> str:
    """The legend entry of a memory-timeline line that stands for several strategies.

    Args:
        members: the strategies' labels.

    Returns:
        The one label, or them all wrapped at `LEGEND_CHARS` between labels, then `SAME_WORDS` (lines
        joined by ``<br>``).
    """
    if len(members) == 1:
        return members[0]
    # a label, and the words that say the line stands for them all, are never broken across lines
    whole = ", ".join(m.replace(" ", "\u00a0") for m in members) + " " + SAME_WORDS.replace(" ", "\u00a0")
    return wrap(whole, LEGEND_CHARS).replace("\u00a0", " ")


def held_series(timeline) -> dict:
    """The workspace each strategy held call by call, from a ``timeline`` table.

    After the last call, a step holds what the strategy still held after the pass.

    Args:
        timeline: the report's ``timeline`` table.

    Returns:
        Strategy label -> (calls, bytes held during each, the layers), numpy arrays.
    """
    out = {}
    if not len(timeline) or "strategy" not in timeline.columns:
        return out
    for label, sub in timeline.groupby("strategy", sort=False):
        sub = sub.sort_values("step")
        x = column(sub, "step")
        y = column(sub, "held_bytes")
        layers = list(sub["layer"]) if "layer" in sub.columns else [None] * len(sub)
        if len(sub) and "held_after_bytes" in sub.columns:  # a step wide, so the line shows it
            after = float(sub["held_after_bytes"].iloc[-1])
            x = np.append(x, [x[-1] + 1, x[-1] + 2])
            y = np.append(y, [after, after])
            layers += ["after the pass", "after the pass"]
        out[label] = (x, y, np.array(layers, dtype=object))
    return out


def coinciding(timeline) -> list:
    """The strategies of a ``timeline`` table in groups that hold the same bytes.

    A group holds the same bytes call by call and after the pass (`held_series`), within `SAME_LINE`
    of the largest value: one line at the chart's scale.

    Args:
        timeline: the report's ``timeline`` table.

    Returns:
        Lists of strategy labels in the table's order (`REPORT_STRATEGIES`'s), each list's first the
        one drawn.
    """
    series = {label: y for label, (_, y, _) in held_series(timeline).items()}
    top = max((float(np.nanmax(v)) for v in series.values() if len(v)), default=0.0)
    groups: list = []
    for label in series:
        mine = series[label]
        for g in groups:
            first = series[g[0]]
            if len(first) == len(mine) and np.nanmax(np.abs(first - mine), initial=0.0) <= SAME_LINE * top:
                g.append(label)
                break
        else:
            groups.append([label])
    return groups


#: room above the highest held line, as a share of it (the axis fits the lines)
HELD_ROOM = 0.06

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


def held_range(series: dict) -> list:
    """The held panel's y range: from zero to just above the highest line, in MiB.

    Args:
        series: `held_series`' result.

    Returns:
        [0, top]: `HELD_ROOM` above the most any strategy held; [0, 1] when every line is at zero.
    """
    top = max((float(np.nanmax(y)) for _, y, _ in series.values() if len(y)), default=0.0) / MIB
    return [0, top * (1 + HELD_ROOM) if top > 0 else 1.0]


def _report_detail(df) -> str:
    """The report chart's detail line: the network, its batch, dtype and layout, and the pass."""
    net = df.attrs.get("network") or (df.attrs.get("request") or {}).get("net")
    r = df.attrs.get("request") or {}
    mode = "training (forward + backward)" if r.get("training") else "inference"
    return (
        f"{net if isinstance(net, str) else 'your layers'}, batch {r.get('batch')}, "
        f"{r.get('dtype')} {r.get('layout')}, {mode}"
    )


def network_report_chart(df) -> go.Figure:
    """The network report in three panels: plan times per call, workspace held, and the budget curve.

    Built from plain dicts (`labkit.draw.plain_figure`: 16 -> about 4 ms on a 2-core CPU machine;
    tests/test_plain_figure.py validates them).

    Args:
        df: `network_report`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 heuristic plan's GPU time per call, 1 fastest plan's (us,
        bars per call of the pass); 2-9 workspace held during each call of the first pass, one line
        per strategy (`REPORT_STRATEGIES` by label, MiB); 10 pass time against the workspace cap (ms).
    """
    layers, timeline, budget = tables_of(df, "layers", "timeline", "budget")
    # columns as numpy arrays (plotly copies an array as it is; a list it walks element by element)
    ok = ok_rows(layers) if len(layers) else layers
    series = held_series(timeline)
    groups = {g[0]: g for g in coinciding(timeline)}
    curve = _budget_line(budget)
    traces = [*_plan_time_bars(ok), *_held_lines(df, series, groups), curve]
    fig = figure_of(
        REPORT_GRID,
        traces,
        _report_axes(ok, series, curve["y"]),
        df=df,
        main="Workspace report: every convolution layer",
        detail=_report_detail(df),
        note=_report_note(layers, timeline),
        height=1050,
        legend_rows=1,
    )
    if any(curve["text"]):  # where each label goes depends on the panel's height in pixels, known now
        fig.data[-1].textposition = _budget_label_positions(fig, curve)
    return fig


def _plan_time_bars(ok) -> list:
    """The top panel: the heuristic plan's and the fastest plan's GPU time of each call (us, bars;
    traces 0-1), hovered with the call's layer and the plan's workspace."""
    x = column(ok, "order", np.int64)
    names = [
        n + ("" if d == "fprop" else f" ({d})") for n, d in zip(ok.get("layer", []), ok.get("direction", []))
    ]
    traces = []
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
                hovertemplate=(
                    f"call %{{x}}, %{{customdata[0]}}: %{{y:.1f}} us, workspace %{{customdata[1]}}"
                    f"<extra>{label}</extra>"
                ),
            )
        )
    return traces


def _held_lines(df, series: dict, groups: dict) -> list:
    """The middle panel: the workspace each strategy held during each call of the first pass (MiB;
    traces 2-9, one per strategy), strategies that hold the same drawn as one wider line."""
    empty = np.array([], dtype=np.float64)
    traces = []
    for k, label in enumerate(strategy_labels(sized_bytes(df)).values()):
        group = groups.get(label)
        members = group or [label]
        x, y, call_layers = series[label] if group is not None else (empty, empty, np.array([], dtype=object))
        hover = [
            f"{call_layers[i]}<br>" + "<br>".join(f"{m}: {fmt_bytes(series[m][1][i])}" for m in members)
            for i in range(len(x))
        ]
        traces.append(
            dict(
                type="scatter",
                x=x,
                y=y / MIB,
                mode="lines",
                name=timeline_entry(members),
                showlegend=group is not None,
                # a line that stands for several strategies is wider and half see-through: where
                # another strategy's line runs along it for a while, both show
                line=dict(
                    color=STRATEGY_COLORS[k],
                    shape="hv",
                    width=2 if len(members) == 1 else MERGED_WIDTH,
                    dash=STRATEGY_DASHES[k],
                ),
                opacity=1.0 if len(members) == 1 else MERGED_OPACITY,
                legend="legend2",
                legendgroup="timeline",
                customdata=np.array(hover, dtype=object),
                row=2,
                col=1,
                hovertemplate="call %{x}: %{customdata}<extra></extra>",
            )
        )
    return traces


#: the budget curve's labels: font size (px)
BUDGET_LABEL_PX = 11
#: the budget panel's plot width (px) as the lesson draws it at 1366x768, the strategies' legend beside
#: it: where its labels go is worked out at this width (a wider window only parts them further)
BUDGET_PLOT_PX = 620
#: room above the budget curve's highest point, a share of it (the axis starts at zero)
BUDGET_ROOM = 0.15


def _ms_text(us: float) -> str:
    """A pass time as the budget axis (ms) writes it, to the microsecond: ``0.999 ms``, ``2.704 ms``."""
    return f"{us / 1000:,.3f} ms"


def budget_labels(caps: list, times: list) -> list:
    """The budget curve's point labels: one where the pass time changes, none where it stays.

    A label gives the pass time and how much longer it is than the last point's (no cap: the
    fastest), and the difference itself where the two times read alike; one that stands for several
    caps names them. The fastest's label names the smallest cap that reaches it (the curve's knee).

    Args:
        caps: each point's cap, as the axis writes it (``"0 B"``, ..., ``"no cap"``), in order.
        times: each point's pass time (us), never rising from one point to the next; None where
            not known.

    Returns:
        One text per point, ``<br>`` between its lines; "" where the time equals the point before,
        or is None (not summed: a call without a timed plan); all "" when the last is None.
    """
    out = [""] * len(times)
    start = 0 if times and times[-1] is not None else len(times)
    while start < len(times):
        if times[start] is None:
            start += 1
            continue
        end = start
        while end + 1 < len(times) and times[end + 1] == times[start]:
            end += 1
        time = _ms_text(times[start])
        if end == len(times) - 1:
            out[start] = (
                f"{time}: the fastest,<br>from {caps[start]} on" if end > start else f"{time}: the fastest"
            )
        else:
            more = f"+{number((times[start] / times[-1] - 1) * 100)}%"
            if time == _ms_text(times[-1]):  # as the axis writes them, the two times read alike
                more = f"+{in_unit(times[start] - times[-1], 'ms')} ({more})"
            out[start] = (
                f"{time}, {more}<br>{caps[start]} to {caps[end]}" if end > start else f"{time}, {more}"
            )
        start = end + 1
    return out


def _budget_line(budget) -> dict:
    """The bottom panel: the pass time under each workspace cap every call fits in (ms; trace 10),
    labelled where it changes (`budget_labels`)."""
    fits = budget[budget["calls_without_plan"] == 0] if len(budget) else budget
    caps = list(fits.get("cap_label", []))
    times = [num(v) for v in fits.get("pass_gpu_us", [])]
    return dict(
        type="scatter",
        x=caps,
        y=[None if t is None else t / 1000 for t in times],
        mode="lines+markers+text",
        name="pass time within the cap",
        line=dict(color=COLORS["secondary"]),
        text=budget_labels(caps, times),
        textfont=dict(size=BUDGET_LABEL_PX),
        cliponaxis=False,
        customdata=[f"{s:.2f}x" for s in fits.get("slowdown", [])],
        showlegend=False,
        row=3,
        col=1,
        hovertemplate="cap %{x}: %{y:,.3f} ms per pass (%{customdata} the uncapped)<extra></extra>",
    )


def _budget_label_positions(fig, curve: dict) -> list:
    """Where each budget label goes (`place_labels`): clear of the other labels, the markers and the
    line, in the bottom panel's pixels (`BUDGET_PLOT_PX` wide, its height from the laid-out figure)."""
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    bottom, top = layout.yaxis3.domain
    width, height = BUDGET_PLOT_PX, (top - bottom) * plot_px
    y_top = layout.yaxis3.range[1]
    n = len(curve["y"])
    points = [
        None if y is None else ((i + 0.5) / n * width, y / y_top * height) for i, y in enumerate(curve["y"])
    ]
    return place_labels(
        points, curve["text"], size=(width, height), lines=[points], font_px=BUDGET_LABEL_PX, marker_px=6
    )


def _report_axes(ok, series: dict, times: list) -> dict:
    """The report's axes, and the held panel's legend beside it, right of the plots (never over a line);
    ``times``: the budget curve's pass times (ms)."""
    last_step = max((float(np.nanmax(x)) for x, _, _ in series.values() if len(x)), default=float(len(ok)))
    panel = laid_out(REPORT_GRID)[0]["yaxis2"]["domain"]
    known = [t for t in times if t is not None]
    return dict(
        legend2=dict(x=1.01, xanchor="left", y=panel[1], yanchor="top", orientation="v", font=dict(size=11)),
        # the shared axis spans the first call's whole bar and the step after the pass (the timeline's
        # lines alone would start it at the first bar's middle)
        xaxis=dict(title=dict(text="call of the pass (hover for the layer)"), range=[-0.5, last_step + 0.5]),
        yaxis=dict(title=dict(text="GPU time per call (us)")),
        # the calls of the first two panels are one x axis: a call's bar sits over its held bytes
        xaxis2=dict(title=dict(text="call of the pass (the last step: after the pass)"), matches="x"),
        yaxis2=dict(title=dict(text="workspace held (MiB)"), range=held_range(series)),
        xaxis3=dict(
            title=dict(text="workspace cap (a label's +: how much longer than with no cap)"), type="category"
        ),
        # from zero, with room for a label above the highest point (its labels are placed on this range)
        yaxis3=dict(
            title=dict(text="pass time (ms)"),
            range=[0, max(known, default=1.0) * (1 + BUDGET_ROOM)],
            **PLAIN_TICKS,
        ),
    )


def _report_note(layers, timeline) -> str:
    """The report's note: what each panel draws, and what async_pool holds against the largest request."""
    notes = [
        "Top: CUDA-graph replay medians of each call's plans. Middle: the most workspace each strategy "
        "held while a call ran (strategies that hold the same share one line). Bottom: sums of each call's "
        "measured plan times (the kernels alone, no launch gaps)."
    ]
    pool = timeline[timeline["strategy"] == "async_pool"] if "strategy" in timeline.columns else timeline
    if len(pool):
        notes.append(
            f"async_pool holds {fmt_bytes(pool['held_bytes'].max())}; the largest request is "
            f"{fmt_bytes(largest_request(layers))}."
        )
    return " ".join(notes)
