"""labkit.draw.plain_figure: a chart built from plain dicts is the figure plotly's objects build
(same JSON, same template, traces in the same cells), its dicts pass plotly's validation, and
the figure validates every later change."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from labkit.draw import plain_figure, plots
from labkit.experiments.your_network import charts
from tests.test_plots import recorded_frames


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def as_json(fig) -> dict:
    return json.loads(pio.to_json(fig))


TRACES = [
    dict(
        type="bar",
        x=np.arange(3),
        y=np.array([1.5, 2.0, 0.5]),
        name="bars",
        marker=dict(color="#123456"),
        customdata=np.array([["a", "1 B"], ["b", "2 B"], ["c", "3 B"]], dtype=object),
        row=1,
        col=1,
    ),
    dict(
        type="scatter",
        x=[1, 2],
        y=[3.0, 4.0],
        mode="lines",
        line=dict(shape="hv", dash="dot", width=2),
        name="line",
        row=2,
        col=1,
    ),
]
LAYOUT = dict(
    xaxis=dict(title=dict(text="x (us)")), yaxis2=dict(title=dict(text="held (MiB)"), rangemode="tozero")
)
GRID = dict(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=("top", "bottom"))


@pytest.mark.parametrize("note", ["", "a note under the chart"])
def test_a_plain_figure_is_the_figure_plotlys_objects_build(note):
    df = recorded_frames("network_report")[0][1]
    want = plots.new_figure(**GRID)
    for t in TRACES:
        t = dict(t)
        row, col, kind = t.pop("row"), t.pop("col"), t.pop("type")
        want.add_trace(go.Bar(**t) if kind == "bar" else go.Scatter(**t), row=row, col=col)
    want.update_layout(**LAYOUT)
    plots.finish(want, df, "main title", detail="a detail", note=note, height=500, legend_rows=2)
    got = plain_figure.figure_of(
        GRID,
        TRACES,
        LAYOUT,
        df=df,
        main="main title",
        detail="a detail",
        note=note,
        height=500,
        legend_rows=2,
    )
    assert as_json(got) == as_json(want)
    assert got.layout.template == pio.templates[plots.TEMPLATE]
    assert [(t.xaxis, t.yaxis) for t in got.data] == [("x", "y"), ("x2", "y2")]
    assert TRACES[0]["row"] == 1 and "xaxis" not in TRACES[0]  # the caller's dicts are left as they were


def test_every_recorded_network_report_chart_passes_plotlys_validation():
    """The report's chart is built unvalidated: its dicts must be what plotly would accept and
    keep unchanged, and what is changed afterwards is validated again."""
    frames = recorded_frames("network_report")
    assert frames
    for req, df in frames:
        fig = charts.network_report_chart(df)
        assert as_json(go.Figure(fig.to_plotly_json())) == as_json(fig), req
    with pytest.raises(ValueError):
        fig.data[0].marker.color = "not a colour"
    with pytest.raises(ValueError):
        fig.layout.height = -3
    with pytest.raises(ValueError):
        fig.update_layout(xaxis3=dict(type="no such type"))


def test_merged_lays_nested_dicts_over_and_leaves_the_base_alone():
    base = dict(a=dict(b=1, c=dict(d=2)), e=[1])
    out = plain_figure.merged(base, dict(a=dict(c=dict(f=3)), e=[2], g=4))
    assert out == dict(a=dict(b=1, c=dict(d=2, f=3)), e=[2], g=4)
    assert base == dict(a=dict(b=1, c=dict(d=2)), e=[1])
