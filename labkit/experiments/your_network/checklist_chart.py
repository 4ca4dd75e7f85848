"""The performance checklist's chart: one panel per kind of percent, so each axis has one meaning.
Time saved (of the time before each item: precision, layout, autotune, plans, graph reuse, batch
size), the memory the forward holds (of this GPU's memory) and the time the GPU idles (of the pass,
the profile). Bars on linear axes from zero, each labelled with what it compares.
"""

from __future__ import annotations

import math
from typing import Optional

from ...draw.plots import COLORS, finish, fmt_seconds, fmt_us, grid, new_figure
from ...draw.units import size_text, us_text
from .checklist import ITEMS

#: the chart's panels, top to bottom: the items each draws and its x axis's title, one kind of
#: percent each
PANELS = (
    (ITEMS[:6], "time saved by the item (% of the time before it)"),
    (("memory fits",), "memory the forward holds (% of this GPU's memory)"),
    (("profile",), "time the GPU idles between launches (% of the pass)"),
)
#: the profile's panel is the tallest of the two small ones: its label names three shapes, one a line
CHECKLIST_GRID = grid(rows=3, cols=1, row_heights=[0.64, 0.13, 0.23], vertical_spacing=0.09)


def _bar_value(r) -> Optional[float]:
    if str(r["applies"]).startswith(("not measurable", "no: the production batch")):
        return None
    if r["item"] in ("memory fits", "profile"):
        return r["share_percent"]
    return r["saved_percent"]


def _bar_text(r) -> str:
    """An item's label on the chart: what it compares, then its cost (every quantity its sentence
    names)."""
    item, b, a = r["item"], r["before_us"], r["after_us"]
    partial = r["layers_compared"] != r["layers"] and item not in ("memory fits", "profile")
    of = f" ({int(r['layers_compared'])} of {int(r['layers'])} layers)" if partial else ""
    per = f" an {r['per']}{of}" if r["per"] == "image" else f" a {r['per']}{of}"
    if item == "memory fits":
        target = (
            f"<br>{r['target_gpu']}: {size_text(r['target_memory_bytes'])}"
            if r["target_memory_bytes"] == r["target_memory_bytes"]
            else ""
        )
        return f"peak {size_text(r['memory_after_bytes'])} of {size_text(r['memory_before_bytes'])}{target}"
    if item == "profile":
        shapes = "<br>".join(str(r["note"]).split("; "))  # one shape a line
        head = f"{us_text(b)} a pass, kernels {us_text(a)}"
        return f"{head}<br>most GPU time, summed over a shape's calls:<br>{shapes}"
    if item in ("plans", "graph reuse"):
        tail = f"{int(r['layers_compared'])} distinct layers" if item == "plans" else "host time, waited for"
        per = "" if item == "plans" else per
        return f"{r['before']} {fmt_us(b)} → {r['after']} {fmt_us(a)}{per}<br>{tail}"
    head = f"{r['before']} {us_text(b)} → {r['after']} {us_text(a)}{per}"
    if item == "precision":
        return f"{head}<br>largest error {r['error_before']:.1e} → {r['error_after']:.1e}"
    if item == "layout":
        return (
            f"{head}<br>NHWC convolutions {us_text(a - r['cost_us'])} + input conversion "
            f"{us_text(r['cost_us'])}; {'gain' if a < b else 'loss'} {us_text(abs(b - a))}"
        )
    if item == "autotune":
        cost = fmt_seconds(r["cost_us"] / 1e6)
        again = r.get("again_us", math.nan)
        timed = f" (heuristic timed again: {us_text(again)}, {us_text(abs(again - b))} apart)"
        timed = timed if again == again else ""
        return f"{head}<br>gain {us_text(r['gain_us'])}{timed}; finding the fastest plans {cost}"
    return (
        f"{head}<br>{us_text(abs(b - a))} {'less' if a < b else 'more'}; largest layer "
        f"{size_text(r['memory_before_bytes'])} → {size_text(r['memory_after_bytes'])}"
    )


def _measured(r) -> bool:
    v = _bar_value(r)
    return v is not None and v == v


def _bars(rows: list, panel: int) -> dict:
    """One panel's bars (its measured items), labelled with what each compares."""
    values = [_bar_value(r) for r in rows]
    return dict(
        type="bar",
        y=[r["item"] for r in rows],
        x=values,
        orientation="h",
        name="measured",
        legendgroup="measured",
        showlegend=panel == 1 and bool(rows),
        text=[_bar_text(r) for r in rows],
        textposition="auto",
        marker=dict(
            color=[
                COLORS["muted"] if panel > 1 else COLORS["primary"] if v >= 0 else COLORS["bad"]
                for v in values
            ]
        ),
        hovertemplate="%{y}: %{x:.1f}%<br>%{text}<extra></extra>",
    )


def _not_measured(rows: list, *, in_legend: bool) -> dict:
    """A panel's items not measured here: an open mark at zero, said so in words."""
    return dict(
        type="scatter",
        y=[r["item"] for r in rows],
        x=[0] * len(rows),
        mode="markers+text",
        marker=dict(symbol="circle-open", color=COLORS["dark"], size=9),
        text=["not measured here" for _ in rows],
        textposition="middle right",
        name="not measured here",
        legendgroup="not measured",
        showlegend=in_legend,
        hoverinfo="skip",
    )


def checklist_chart(table):
    """The checklist in three panels, one kind of percent each (`PANELS`): the time each item saves
    (of the time before it), the memory the forward holds (of this GPU's memory) and the time the
    GPU idles between launches (of the pass). Bars on linear axes from zero, each labelled with
    what it compares.

    Args:
        table: `checklist_table`'s result (its ``attrs`` give the provenance).

    Returns:
        The ``go.Figure``: traces 0-2 each panel's bars, then, for each panel that has one, its
        items not measured here (an open mark at zero).
    """
    rows = table.to_dict("records")
    fig = new_figure(**CHECKLIST_GRID)
    missing_traces = []
    for panel, (items, title) in enumerate(PANELS, start=1):
        mine = [r for r in rows if r["item"] in items]
        shown = [r for r in mine if _measured(r)]
        fig.add_trace(_bars(shown, panel), row=panel, col=1)
        missing = [r for r in mine if not _measured(r)]
        if missing:
            missing_traces.append((panel, _not_measured(missing, in_legend=not missing_traces)))
        low = min([0.0] + [_bar_value(r) for r in shown])
        fig.update_xaxes(
            title_text=title,
            range=[min(low * 1.05, -5.0) if low < 0 else 0, 105],
            zeroline=True,
            row=panel,
            col=1,
        )
        fig.update_yaxes(
            categoryorder="array", categoryarray=list(reversed(items)), type="category", row=panel, col=1
        )
    for panel, trace in missing_traces:
        fig.add_trace(trace, row=panel, col=1)
    net = (table.attrs.get("request") or {}).get("net")
    return finish(
        fig,
        table,
        f"The performance checklist, measured for {net if isinstance(net, str) else 'your network'}",
        detail="autotune, memory fits and profile: the network report of the same network, measured "
        f"{table.attrs.get('report_date') or 'on a date not recorded'}",
        height=760,
        legend_rows=1 if missing_traces else 0,
    )
