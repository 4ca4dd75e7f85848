"""A chart built from plain dicts, made into a ``go.Figure`` in one step without plotly's
validation.

Building a chart through plotly's objects (``add_trace(row=, col=)``, ``update_layout``) walks
plotly's property tree for every value: the network report's chart (11 traces on a three-row
grid) takes 16 ms that way on a 2-core CPU machine in a Jupyter kernel, 2-3 times that on the GPU
host, where a panel has 100 ms in all (a class's goal). Built from plain dicts and made into a
figure without validation, the same chart takes 4 ms (the figure itself 1 ms of them), with the
same JSON.

What validation would catch is checked in tests instead: tests/test_plain_figure.py validates
every recorded report chart's dicts with plotly (``go.Figure(fig.to_plotly_json())``) and asks for
the same figure, and checks `figure_of` against the figure plotly's objects build. The figure
returned validates every later change as any other does.

``traces``: plotly trace dicts, each with ``"type"`` and, in a grid, ``"row"`` and ``"col"``
(1-based; replaced by the cell's axes, as ``add_trace(row=, col=)`` does). Nested properties are
nested dicts (``line=dict(color=...)``, not ``line_color``): plotly's underscore shorthand is
expanded by validation, which this skips.
"""

from __future__ import annotations

import copy
from typing import List, Optional

import plotly.graph_objects as go

from .plots import attach_grid, finish_layout, labkit_template, laid_out


def merged(base: dict, extra: dict) -> dict:
    """``base`` with ``extra`` laid over it, nested dicts merged key by key.

    Args:
        base: the dict to start from (unchanged).
        extra: the values laid over it; its lists and other non-dict values replace ``base``'s.

    Returns:
        A new dict.
    """
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def figure_of(
    grid: Optional[dict],
    traces: List[dict],
    layout: dict,
    *,
    df,
    main: str,
    detail: str = "",
    note: str = "",
    height: int = 480,
    legend_rows: int = 1,
) -> go.Figure:
    """The figure `labkit.draw.plots.finish` would make of a grid, traces and a layout, without validation.

    It equals ``new_figure(**grid)`` with ``traces`` added, ``layout`` updated and `plots.finish`
    applied, in `plots.TEMPLATE` (see the module doc).

    Args:
        grid: `labkit.draw.plots.new_figure`'s subplot grid arguments; None for a single plot.
        traces: plotly trace dicts, each with ``"type"`` and, in a grid, ``"row"`` and ``"col"``.
        layout: layout properties as nested dicts.
        df: the result the chart draws (its provenance goes in the subtitle).
        main: the title.
        detail: the line under the title.
        note: a line under the x-axis title.
        height: the chart's height in pixels, before the lines a long detail adds.
        legend_rows: rows the legend takes; 0 hides it.

    Returns:
        A ``go.Figure`` that validates every later change (`validating`).
    """
    grid_layout, grid_ref, grid_str = laid_out(grid) if grid else ({}, None, None)
    cells = []
    for trace in traces:
        trace = dict(trace)
        row, col = trace.pop("row", None), trace.pop("col", None)
        if row is not None:
            trace.update(grid_ref[row - 1][col - 1][0].trace_kwargs)
        cells.append(trace)
    finishing, note_annotation = finish_layout(df, main, detail, note, height, legend_rows)
    full = merged(merged(copy.deepcopy(grid_layout), layout), finishing)
    if note_annotation:
        full["annotations"] = list(full.get("annotations", ())) + [note_annotation]
    with labkit_template():
        fig = validating(go.Figure(dict(data=cells, layout=full), _validate=False))
    return attach_grid(fig, grid_ref, grid_str) if grid else fig


def validating(fig):
    """A figure made with ``_validate=False``, made to validate every later change.

    It sets the figure's, its layout's and its traces' flags (plotly's ``_validate``, in plotly 6
    and 7).

    Args:
        fig: the figure (a ``go.Figure`` or ``go.FigureWidget``).

    Returns:
        ``fig`` itself.
    """
    fig._validate = fig._layout_obj._validate = True
    for trace in fig.data:
        trace._validate = True
    return fig
