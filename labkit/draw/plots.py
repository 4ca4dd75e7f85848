"""What every chart is built with: formatting of times and sizes, axes, the title block with its
provenance line, notes, colours. The charts themselves live with their experiments (one topic
module per lesson in `labkit.experiments`), each taking the tidy DataFrame its experiment returned.

Nothing here measures, looks anything up or invents a number: every value drawn comes from the
DataFrame passed in, and every title carries its provenance (`provenance_subtitle`: live or
recorded, GPU, cuDNN version, date) from ``df.attrs``.

Each builder returns a ``go.Figure`` with a fixed number of traces for its chart (listed in
`labkit.experiments.TRACES`), whatever the data: rows that did not run (``status`` not ``ok``) are
left out of the
traces and named in a note under the chart. That is what lets `labkit.present.widgets` wrap a figure in a
``go.FigureWidget`` once and afterwards update its traces in place.

Units: microseconds (us) for times, MiB (2**20 bytes) for sizes on axes, TFLOP/s for throughput;
a label on a chart is written in its axis's unit, and log axes are ticked, by `labkit.draw.units`.
"""

from __future__ import annotations

import contextlib
import copy
import html
import math
import re
from typing import Iterable, List, Optional

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..env import gpu_label
from ..spec import ConvSpec
from . import figure_widget

MIB = 2**20
TEMPLATE = "plotly_white"

COLORS = {
    "primary": "#1f77b4",
    "secondary": "#ff7f0e",
    "good": "#2ca02c",
    "bad": "#d62728",
    "muted": "#9aa0a6",
    "dark": "#3c4043",
    "purple": "#9467bd",
}
DTYPE_COLORS = {
    "fp32": "#1f77b4",
    "tf32": "#17becf",
    "fp16": "#ff7f0e",
    "bf16": "#d62728",
    "fp8_e4m3": "#9467bd",
}
LAYOUT_COLORS = {"NCHW": "#1f77b4", "NHWC": "#ff7f0e"}


# ---- formatting -------------------------------------------------------------------------------
def fmt_bytes(n) -> str:
    """A size in binary units: ``131 B``, ``24.6 MiB``, ``1.00 GiB``.

    Args:
        n: bytes; None or NaN for a missing value.

    Returns:
        The text; '-' for a missing value.
    """
    if n is None or isnan(n):
        return "-"
    n = float(n)
    if abs(n) < 1024:
        return f"{n:.0f} B"
    if abs(n) < MIB:
        return f"{n / 1024:.1f} KiB"
    if abs(n) < 2**30:
        return f"{n / MIB:.1f} MiB"
    return f"{n / 2**30:.2f} GiB"


def fmt_us(us) -> str:
    """A time in its unit: ``24.6 us``, ``1.23 ms``, ``2.10 s``.

    Args:
        us: microseconds; None or NaN for a missing value.

    Returns:
        The text; '-' for a missing value.
    """
    if us is None or isnan(us):
        return "-"
    us = float(us)
    if us < 1000:
        return f"{us:.1f} us"
    if us < 1e6:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1e6:.2f} s"


def fmt_seconds(s) -> str:
    """A time given in seconds, written as `fmt_us` writes it: ``1.23 ms``, ``2.10 s``.

    Args:
        s: seconds; None or NaN for a missing value.

    Returns:
        The text; '-' for a missing value.
    """
    return "-" if s is None or isnan(s) else fmt_us(float(s) * 1e6)


def isnan(x) -> bool:
    """Whether a value is NaN, for any value (None, text and other non-numbers are not).

    Args:
        x: the value.

    Returns:
        True only for a number that is NaN.
    """
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def num(x) -> Optional[float]:
    """A value as a float, or None for a missing value (plotly leaves a gap).

    Args:
        x: a number, None or NaN.

    Returns:
        The float; None for None or NaN.
    """
    if x is None or isnan(x):
        return None
    return float(x)


# ---- provenance -------------------------------------------------------------------------------
def provenance_subtitle(df) -> str:
    """Where the numbers come from, read from ``df.attrs``.

    For example ``recorded on H100 SXM · cuDNN 9.19.0 (frontend 1.28.0) · 2026-11-22`` (the GPU as
    `labkit.env.gpu_label` names it), then the GPU's conditions and its turn when they were recorded.

    Args:
        df: a result, with its provenance in ``attrs``.

    Returns:
        The provenance line.
    """
    a = getattr(df, "attrs", {}) or {}
    mode = a.get("mode") or "unknown mode"
    gpu = gpu_label_of(a.get("gpu"))
    frontend = f" (frontend {a['cudnn_frontend']})" if a.get("cudnn_frontend") else ""
    parts = [
        f"{mode} on {gpu}",
        f"cuDNN {a.get('cudnn_backend') or '?'}{frontend}",
        a.get("date") or "date unknown",
        conditions_text(a.get("conditions")),
        contention_text(a.get("gpu_turn")),
    ]
    return " · ".join(p for p in parts if p)


def gpu_label_of(gpu) -> str:
    """`labkit.env.gpu_label` of a result's ``attrs['gpu']``.

    Args:
        gpu: one device name, or a comparison's several joined by " vs ".

    Returns:
        The label, or the labels joined by " vs ".
    """
    return " vs ".join(gpu_label(g) for g in str(gpu).split(" vs ")) if gpu else gpu_label(None)


def contention_text(turn) -> str:
    """Words for a live result's turn on the GPU (`labkit.gpu.host.lock`).

    Args:
        turn: the result's ``attrs['gpu_turn']``: ``contended_by`` (other processes that used the GPU
            while it was measured, `labkit.gpu.host.contention`) and ``waited_s`` (seconds).

    Returns:
        "<b>CONTENDED</b> ..." when another process used the GPU, "waited 2.1 s for the GPU" after a
        wait of a second or more, else empty.
    """
    if not isinstance(turn, dict):
        return ""
    others = turn.get("contended_by") or []
    if others:
        who = ", ".join(str(p) for p in others[:3]) + (" ..." if len(others) > 3 else "")
        return (
            f"<b>CONTENDED</b>: process {who} used this GPU during the measurement "
            "(not saved; measured again when the GPU is free)"
        )
    waited = float(turn.get("waited_s") or 0)
    return f"waited {waited:.1f} s for the GPU" if waited >= 1 else ""


def conditions_text(c) -> str:
    """The GPU's conditions during a measurement, in a few words.

    The values are the highest of its samples (`labkit.gpu.host.conditions`). NVML's throttle reasons drop
    their "software " prefix to fit the line.

    Args:
        c: the result's ``attrs['conditions']``: ``sm_clock_mhz``, ``power_w``, ``temperature_c``,
            ``throttle``.

    Returns:
        E.g. "peak SM 1980 MHz, 312 W, 41 C", with "THROTTLED (power cap)" when any sample found its
        clocks held down; empty when they were not recorded.
    """
    if not isinstance(c, dict) or "sm_clock_mhz" not in c:
        return ""
    reasons = ", ".join(str(r).removeprefix("software ") for r in c.get("throttle") or ())
    throttled = f" · <b>THROTTLED</b> ({reasons})" if c.get("throttle") else ""
    return (
        f"peak SM {c['sm_clock_mhz']} MHz, {float(c.get('power_w') or 0):.0f} W, {c.get('temperature_c')} C"
        f"{throttled}"
    )


def request_spec(df):
    """The convolution of the request behind a result.

    Args:
        df: a result; its ``attrs['request']`` holds ``spec`` or ``base``.

    Returns:
        The `ConvSpec`; None when there is none or it does not parse.
    """
    req = (getattr(df, "attrs", {}) or {}).get("request") or {}
    d = req.get("spec") or req.get("base")
    if not isinstance(d, dict):
        return None
    try:
        return ConvSpec.from_dict(d)
    except Exception:  # noqa: BLE001 - a label is decoration; never fail a chart over it
        return None


def shape_label(spec) -> str:
    """A convolution's shape without dtype, layout or direction: ``32x64x56x56 → 64, 3x3 s1 p1``.

    Args:
        spec: a `ConvSpec`, or None.

    Returns:
        The label; empty for None.
    """
    if spec is None:
        return ""
    lab = spec.label.split(" ", 3)[3]
    return lab.replace(" -> ", " → ")


def title_block(main: str, df, detail: str = "") -> dict:
    """Title, detail line and provenance line as one text (lines joined by <br>).

    plotly places a separate ``title.subtitle`` by measuring the title. That fails when a FigureWidget
    is drawn before it is in the page (plotly/plotly.py#5208), and puts the subtitle over the title.

    Args:
        main: the title (escaped, in bold).
        df: the result, for its provenance (`provenance_subtitle`).
        detail: a line between the title and the provenance; empty for none.

    Returns:
        The layout's ``title`` properties (``text``, ``x``, ``xanchor``).
    """
    sub = provenance_subtitle(df)
    if detail:
        sub = f"{detail}<br>{sub}"
    return dict(
        text=(
            f"<b>{html.escape(main, quote=False)}</b><br>"
            f"<span style='font-size:12px;color:#3c4043'>{sub}</span>"
        ),
        x=0.0,
        xanchor="left",
    )


def ok_rows(df):
    """The rows that ran (``status`` "ok"); every row of a table without a ``status`` column.

    Args:
        df: a result.

    Returns:
        The rows, as a DataFrame.
    """
    if "status" in df.columns:
        return df[df["status"] == "ok"]
    return df


def not_ok_note(df, label_cols: Iterable[str]) -> str:
    """One line naming the rows that did not run, with their status.

    Args:
        df: a result.
        label_cols: the columns that name a row in the line.

    Returns:
        "did not run: ..."; empty when every row ran or there is no ``status`` column.
    """
    if "status" not in df.columns:
        return ""
    bad = df[df["status"] != "ok"]
    if bad.empty:
        return ""
    parts = []
    for _, r in bad.iterrows():
        name = " ".join(str(r[c]) for c in label_cols if c in r.index)
        parts.append(f"{name}: {r['status']}")
    return f"did not run: {'; '.join(parts)}"


def finish(
    fig: go.Figure, df, main: str, detail: str = "", note: str = "", height: int = 480, legend_rows: int = 1
) -> go.Figure:
    """Lay out a chart (`finish_layout`) and add its note.

    From the top: title, detail line, provenance line, the legend, then the plot. The note is a line
    under the x-axis title.

    Args:
        fig: the chart.
        df: its result, for the provenance line.
        main: the title.
        detail: a line under the title (wrapped between phrases at `DETAIL_CHARS`); empty for none.
        note: a line under the plot (wrapped at `NOTE_CHARS`); empty for none.
        height: the figure's height in px, before the lines a long detail adds.
        legend_rows: rows of legend above the plot; 0 hides the legend.

    Returns:
        ``fig``.
    """
    layout, note_annotation = finish_layout(df, main, detail, note, height, legend_rows)
    fig.update_layout(**layout)
    if note_annotation:
        fig.add_annotation(
            note_annotation
        )  # (re-assigning all annotations re-validates the subplot titles: slow)
    return fig


def finish_layout(df, main: str, detail: str = "", note: str = "", height: int = 480, legend_rows: int = 1):
    """What `finish` sets, as plain data.

    Args:
        df: the result, for the provenance line.
        main: the title.
        detail: a line under the title; empty for none.
        note: a line under the plot; empty for none.
        height: the figure's height in px, before the lines a long detail adds.
        legend_rows: rows of legend above the plot; 0 hides the legend.

    Returns:
        (the layout's properties, the note's annotation or None).
    """
    # a detail line longer than the chart is wide would be cut at its right edge: wrap it between
    # phrases, and move the legend and the plot down by the lines it adds
    detail = wrap(detail, DETAIL_CHARS, phrases=True) if detail else detail
    extra = 17 * detail.count("<br>")
    height += extra
    top = 112 + 22 * legend_rows + extra
    layout = dict(showlegend=False) if legend_rows == 0 else {}
    layout.update(
        title=dict(title_block(main, df, detail), yref="container", y=1 - 12 / height, yanchor="top"),
        height=height,
        margin=dict(
            t=top, b=(76 + 15 * (wrap(note, NOTE_CHARS).count("<br>") + 1)) if note else 64, l=70, r=30
        ),
        legend=dict(
            orientation="h",
            yref="container",
            y=1 - (88 + extra) / height,
            yanchor="top",
            x=0,
            xanchor="left",
            traceorder="normal",
        ),
        # a bar label that would have to shrink below 9 px to fit is hidden (its value is in the hover)
        uniformtext=dict(minsize=9, mode="hide"),
    )
    return layout, (note_block(note) if note else None)


def new_figure(**subplots) -> go.Figure:
    """An empty figure in the plotly_white template, or a subplot grid (a chart's `grid`).

    The template is applied at construction, as plotly's default, which plotly resolves from its
    registry (cheap). Assigning it afterwards, or setting ``pio.templates.default`` through its
    property, validates a deep copy of it (5 ms on a 2-core CPU machine, on every widget update). So
    the registry's default name is swapped directly where plotly keeps it (``_default``, plotly 6 and
    7; tests/test_plots.py checks that the template is applied and plotly's default left alone).

    A subplot grid is laid out by ``make_subplots`` once per set of arguments (`laid_out`) and copied
    (0.8 ms; tests/test_plots.py: the same figure either way).

    Args:
        **subplots: ``make_subplots``' arguments; none for a figure without a grid.

    Returns:
        The ``go.Figure``.
    """
    grid = laid_out(subplots) if subplots else None
    with labkit_template():
        if grid is None:
            return go.Figure()
        layout, grid_ref, grid_str = grid
        fig = go.Figure(layout=copy.deepcopy(layout))
    return attach_grid(fig, grid_ref, grid_str)


def attach_grid(fig: go.Figure, grid_ref, grid_str) -> go.Figure:
    """Put a laid-out grid (`laid_out`) where ``add_trace(row=, col=)`` reads it.

    Args:
        fig: the figure.
        grid_ref: the grid's ``_grid_ref``, where ``make_subplots`` puts it.
        grid_str: its ``_grid_str``.

    Returns:
        ``fig``.
    """
    fig.__dict__["_grid_ref"] = grid_ref
    fig.__dict__["_grid_str"] = grid_str
    return fig


@contextlib.contextmanager
def labkit_template():
    """Inside the block, figures made get `TEMPLATE` at construction (see `new_figure`)."""
    reg = pio.templates
    old, reg._default = reg._default, TEMPLATE
    try:
        yield
    finally:
        reg._default = old


def grid(**subplots) -> dict:
    """Declare a chart's subplot grid (``make_subplots``' arguments) beside the chart.

    The chart draws ``new_figure(**GRID)``. The warm-up lays out every declared grid ahead
    (`lay_out_grids`), so no lesson's first chart does it (``make_subplots``: 8 ms for the network
    report's three rows on a 2-core CPU machine).

    Args:
        **subplots: ``make_subplots``' arguments.

    Returns:
        ``subplots``, unchanged.
    """
    _DECLARED.append(subplots)
    return subplots


def lay_out_grids() -> int:
    """Lay out every grid a chart declared with `grid` and nobody laid out yet.

    Returns:
        How many grids it laid out.
    """
    todo = [g for g in list(_DECLARED) if _grid_key(g) not in _GRIDS]
    for g in todo:
        laid_out(g)
    return len(todo)


def _grid_key(subplots: dict) -> str:
    return repr(sorted(subplots.items()))


def laid_out(subplots: dict) -> tuple:
    """A subplot grid's layout, made once per set of arguments.

    It is made under plotly's default template, whichever it is: the copy takes labkit's at
    `new_figure`. Nothing is swapped, so a warm-up thread never changes another thread's figures.

    Args:
        subplots: ``make_subplots``' arguments.

    Returns:
        (the layout without its template, ``_grid_ref``, ``_grid_str``).
    """
    key = _grid_key(subplots)
    grid = _GRIDS.get(key)
    if grid is None:
        fig = make_subplots(**copy.deepcopy(subplots))  # (it fills a ``specs`` argument's defaults in place)
        layout = fig.layout.to_plotly_json()
        layout.pop("template", None)
        grid = _GRIDS[key] = (layout, fig.__dict__["_grid_ref"], fig.__dict__["_grid_str"])
    return grid


#: make_subplots' arguments -> (its layout without the template, _grid_ref, _grid_str): `laid_out`
_GRIDS: dict = {}
#: every chart's grid (`grid`), in the order the charts' modules declared them
_DECLARED: list = []


def note_block(text: str) -> dict:
    """The annotation of a note under the plot (11 px, wrapped at `NOTE_CHARS`).

    Args:
        text: the note, escaped here.

    Returns:
        The annotation's properties.
    """
    return dict(
        text=wrap(html.escape(text, quote=False), NOTE_CHARS),
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        yshift=-58,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        font=dict(size=11, color=COLORS["dark"]),
        name="note",
    )


def no_data(fig: go.Figure, message: str) -> None:
    """Empty every trace of a chart and say why in its middle.

    No stale number stays on screen next to controls it was not measured for: the axes are hidden
    too.

    Args:
        fig: a Figure or FigureWidget.
        message: why there is nothing to draw.
    """
    with batch(fig):
        for t in fig.data:
            t.update(dict(x=None, y=None, text=None, customdata=None, visible=False))
        fig.layout.annotations = [
            dict(
                text=wrap(html.escape(message, quote=False), 90),
                xref="paper",
                yref="paper",
                x=0.5,
                y=0.5,
                showarrow=False,
                font=dict(size=13, color=COLORS["bad"]),
                bgcolor="rgba(255,255,255,0.9)",
                name="no-data",
            )
        ]
        fig.layout.title.text = (
            "<b>No data for this request</b><br><span style='font-size:12px;color:#3c4043'>nothing is "
            "drawn: no number on this chart belongs to another request</span>"
        )
        for name in [k for k in fig.layout if k.startswith(("xaxis", "yaxis"))]:
            fig.layout[name].visible = False  # no axis scale left over from the previous request


#: the fill behind every other row of a chart of rows (`row_bands`)
BAND_FILL = "#f1f3f4"


def row_bands(rows: int, subplots: Iterable[int] = (1,)) -> List[dict]:
    """Shading behind every other row of a chart whose y axis lists categories (strategies, settings),
    so that the marks of one row, side by side within it, read as that row's and not the next one's.

    Args:
        rows: how many categories the y axis has.
        subplots: the subplots to shade, by their axes' number (1: ``x``/``y``, 2: ``x2``/``y2``...).

    Returns:
        Shape dicts for ``fig.layout.shapes``, drawn under the grid and the traces: the second row,
        the fourth...
    """
    shapes = []
    for k in subplots:
        axis = "" if k == 1 else str(k)
        shapes += [
            dict(
                type="rect",
                xref=f"x{axis} domain",
                yref=f"y{axis}",
                x0=0,
                x1=1,
                y0=i - 0.5,
                y1=i + 0.5,
                fillcolor=BAND_FILL,
                line_width=0,
                layer="below",  # under the grid lines and the traces
                name="row band",
            )
            for i in range(1, rows, 2)
        ]
    return shapes


@contextlib.contextmanager
def batch(fig):
    """A context in which a FigureWidget's changes reach the browser as one update, and are then
    kept as its widget state (`figure_widget.keep_drawn_state`: a page reloaded draws them too).

    Args:
        fig: a ``go.FigureWidget`` or a plain ``go.Figure`` (for which it does nothing).

    Yields:
        None, inside ``fig.batch_update()`` for a FigureWidget.
    """
    if not hasattr(fig, "batch_update"):
        yield
        return
    with fig.batch_update():
        yield
    figure_widget.keep_drawn_state(fig)


#: characters of a 12 px subtitle line that fit a panel's chart (`widgets.FIG_WIDTH`, 900 px)
DETAIL_CHARS = 128
#: characters of an 11 px note line under the plot: it starts at the plot's left edge, which long
#: y labels push right (the strategies chart's plot starts ~190 px in)
NOTE_CHARS = 112


#: where a detail line may break: after a phrase's comma or semicolon ("1,018 us" is one word)
PHRASE_END = re.compile(r"(?<=[,;]) ")


def wrap(text: str, width: int, *, phrases: bool = False) -> str:
    """Text broken at spaces into lines of at most ``width`` characters, for a plotly label.

    Args:
        text: the text (a word longer than ``width`` stays whole).
        width: characters a line, e.g. `DETAIL_CHARS` or `NOTE_CHARS`.
        phrases: break only between phrases (`PHRASE_END`), as a detail line reads; a phrase longer
            than ``width`` is broken at spaces.

    Returns:
        The first 8 lines, joined by ``<br>``.
    """
    if not phrases:
        return "<br>".join(_fill(text.split(" "), width)[:8])
    lines = [part for line in _fill(PHRASE_END.split(text), width) for part in _fill(line.split(" "), width)]
    return "<br>".join(lines[:8])


def _fill(pieces: List[str], width: int) -> List[str]:
    """``pieces`` (words or phrases) joined by spaces into lines of at most ``width`` characters,
    greedily; a piece longer than ``width`` is a line of its own."""
    lines, cur = [], ""
    for w in pieces:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    return lines


def first_value(df, col):
    """The first value a column holds, for a figure a whole result shares (a GPU's peak, a cost).

    Args:
        df: a result.
        col: the column's name.

    Returns:
        The first value that is neither None, NaN nor empty: text as it is, a number as a float;
        None when the column is missing or holds none.
    """
    if col not in df.columns:
        return None
    for v in df[col]:
        if v is not None and not isnan(v) and v != "":
            return v if isinstance(v, str) else float(v)
    return None


def concat(frames: List) -> "object":
    """Several results of one experiment as one, keeping the first one's provenance in ``attrs``.

    Args:
        frames: the DataFrames (e.g. `race` over launch methods).

    Returns:
        The joined DataFrame.
    """
    out = pd.concat(list(frames), ignore_index=True)
    out.attrs = dict(frames[0].attrs)
    return out
