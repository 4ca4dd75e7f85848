"""Plotly figure builders: one per chart, each taking the tidy DataFrame an experiment returned.

Nothing here measures, looks anything up or invents a number: every value drawn comes from the
DataFrame passed in, and every title carries its provenance (`provenance_subtitle`: live or
recorded, GPU, cuDNN version, date) from ``df.attrs``.

Each builder returns a ``go.Figure`` with a fixed number of traces for its chart (listed in
`TRACES`), whatever the data: rows that did not run (``status`` not ``ok``) are left out of the
traces and named in a note under the chart. That is what lets `labkit.widgets` wrap a figure in a
``go.FigureWidget`` once and afterwards update its traces in place.

Units: microseconds (us) for times, MiB (2**20 bytes) for sizes on axes, TFLOP/s for throughput.
"""
from __future__ import annotations

import html
import math
from typing import Iterable, List, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

MIB = 2**20
TEMPLATE = "plotly_white"

#: chart name -> number of traces its builder always returns
TRACES = {
    "precision": 3, "layout": 2, "fusion": 9, "plans": 4, "caps": 2, "algorithms": 3, "build_cost": 1,
    "roofline": 2, "sweep": 2, "workspace_sizes": 6, "strategies": 8, "race": 2,
}

COLORS = {
    "primary": "#1f77b4", "secondary": "#ff7f0e", "good": "#2ca02c", "bad": "#d62728", "muted": "#9aa0a6",
    "dark": "#3c4043", "purple": "#9467bd",
}
DTYPE_COLORS = {"fp32": "#1f77b4", "tf32": "#17becf", "fp16": "#ff7f0e", "bf16": "#d62728", "fp8_e4m3": "#9467bd"}
LAYOUT_COLORS = {"NCHW": "#1f77b4", "NHWC": "#ff7f0e"}


# ---- formatting -------------------------------------------------------------------------------
def fmt_bytes(n) -> str:
    """``131 B``, ``24.6 MiB``, ``1.00 GiB`` (binary units); '-' for a missing value."""
    if n is None or _isnan(n):
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
    """``24.6 us``, ``1.23 ms``, ``2.1 s``; '-' for a missing value."""
    if us is None or _isnan(us):
        return "-"
    us = float(us)
    if us < 1000:
        return f"{us:.1f} us"
    if us < 1e6:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1e6:.2f} s"


def fmt_seconds(s) -> str:
    return "-" if s is None or _isnan(s) else fmt_us(float(s) * 1e6)


def _tick_seconds(s: float) -> str:
    us = s * 1e6
    return f"{us:g} us" if us < 1000 else f"{us / 1000:g} ms" if us < 1e6 else f"{s:g} s"


def _isnan(x) -> bool:
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def _num(x) -> Optional[float]:
    """float, or None for a missing value (plotly leaves a gap)."""
    if x is None or _isnan(x):
        return None
    return float(x)


# ---- provenance -------------------------------------------------------------------------------
def provenance_subtitle(df) -> str:
    """Where the numbers come from, from ``df.attrs``: e.g.
    ``recorded on NVIDIA H100 80GB HBM3 · cuDNN 9.19.0 (frontend 1.28.0) · 2026-11-22``."""
    a = getattr(df, "attrs", {}) or {}
    mode = a.get("mode") or "unknown mode"
    gpu = a.get("gpu") or "unknown GPU"
    text = f"{mode} on {gpu} · cuDNN {a.get('cudnn_backend') or '?'}"
    if a.get("cudnn_frontend"):
        text += f" (frontend {a['cudnn_frontend']})"
    return text + f" · {a.get('date') or 'date unknown'}"


def request_spec(df):
    """The `ConvSpec` of the request behind ``df`` (``attrs['request']['spec']`` or ``['base']``), or None."""
    from .spec import ConvSpec

    req = (getattr(df, "attrs", {}) or {}).get("request") or {}
    d = req.get("spec") or req.get("base")
    if not isinstance(d, dict):
        return None
    try:
        return ConvSpec.from_dict(d)
    except Exception:  # noqa: BLE001 - a label is decoration; never fail a chart over it
        return None


def shape_label(spec) -> str:
    """``32x64x56x56 -> 64, 3x3 s1 p1`` (no dtype/layout/direction)."""
    if spec is None:
        return ""
    lab = spec.label.split(" ", 3)[3]
    return lab.replace(" -> ", " → ")


def _title(main: str, df, detail: str = "") -> dict:
    """Title, detail line and provenance line as ONE text (lines joined by <br>): plotly places a
    separate ``title.subtitle`` by measuring the title, which fails when a FigureWidget is drawn
    before it is in the page (plotly/plotly.py#5208) and puts the subtitle over the title."""
    sub = provenance_subtitle(df)
    if detail:
        sub = f"{detail}<br>{sub}"
    return dict(text=f"<b>{html.escape(main, quote=False)}</b><br><span style='font-size:12px;color:#3c4043'>{sub}</span>",
                x=0.0, xanchor="left")


def _ok(df):
    if "status" in df.columns:
        return df[df["status"] == "ok"]
    return df


def _not_ok_note(df, label_cols: Iterable[str]) -> str:
    """One line naming the rows that did not run, with their status."""
    if "status" not in df.columns:
        return ""
    bad = df[df["status"] != "ok"]
    if bad.empty:
        return ""
    parts = []
    for _, r in bad.iterrows():
        name = " ".join(str(r[c]) for c in label_cols if c in r.index)
        parts.append(f"{name}: {r['status']}")
    return "did not run: " + "; ".join(parts)


def _layout(fig: go.Figure, df, main: str, detail: str = "", note: str = "", height: int = 480,
            legend_rows: int = 1) -> go.Figure:
    """Common layout. From the top: title, detail line, provenance line, the legend (one row, or
    ``legend_rows``), then the plot; a note line under the x-axis title when there is one."""
    # a detail line longer than the chart is wide would be cut at its right edge: wrap it, and
    # move the legend and the plot down by the lines it adds
    detail = _wrap(detail, DETAIL_CHARS) if detail else detail
    extra = 17 * detail.count("<br>")
    height += extra
    top = 112 + 22 * legend_rows + extra
    if legend_rows == 0:
        fig.update_layout(showlegend=False)
    fig.update_layout(
        title=dict(_title(main, df, detail), yref="container", y=1 - 12 / height, yanchor="top"),
        height=height,
        margin=dict(t=top, b=(76 + 15 * (_wrap(note, NOTE_CHARS).count("<br>") + 1)) if note else 64, l=70, r=30),
        legend=dict(orientation="h", yref="container", y=1 - (88 + extra) / height, yanchor="top", x=0, xanchor="left",
                    traceorder="normal"),
        # a bar label that would have to shrink below 9 px to fit is hidden (its value is in the hover)
        uniformtext=dict(minsize=9, mode="hide"),
    )
    if note:
        fig.add_annotation(_note(note))  # (re-assigning all annotations re-validates the subplot titles: slow)
    return fig


def _new_figure(**subplots) -> go.Figure:
    """An empty figure (a subplot grid when ``subplots`` are given) in the plotly_white template.

    The template is applied at construction, as plotly's default (cheap), rather than assigned
    afterwards (a validated deep copy: ~15 ms a figure, on every widget update)."""
    import plotly.io as pio

    old = pio.templates.default
    pio.templates.default = TEMPLATE
    try:
        return make_subplots(**subplots) if subplots else go.Figure()
    finally:
        pio.templates.default = old


def _note(text: str) -> dict:
    return dict(text=_wrap(html.escape(text, quote=False), NOTE_CHARS), xref="paper", yref="paper", x=0, y=0, yshift=-58,
                xanchor="left", yanchor="top", align="left", showarrow=False, font=dict(size=11, color=COLORS["dark"]),
                name="note")


def log_ticks(values, fmt=None, max_ticks: int = 10) -> dict:
    """``tickvals``/``ticktext`` for a log axis over ``values``: 1-2-5 steps (powers of ten alone
    over more than three decades), labelled in full (``fmt`` formats a value; default plain).
    ``max_ticks``: at most that many (coarser steps, then every other decade): a narrow subplot
    asks for fewer, so its labels do not run together."""
    v = [float(x) for x in values if x is not None and not _isnan(x) and float(x) > 0]
    if not v:
        return {}
    lo, hi = min(v), max(v)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    first = (1,) if e1 - e0 > 3 else (1, 2, 5) if e1 - e0 > 1 else (1, 2, 3, 5, 7)
    ladder = [s for s in ((1, 2, 3, 5, 7), (1, 2, 5), (1, 3), (1,)) if len(s) <= len(first)]
    # a labelled tick at or just under the lowest value when the lowest tick is far above it:
    # without it a wide range can start its labels far above the lowest points (e.g. 100 us on
    # an axis whose best plans sit near 25 us); one close above it needs no neighbour (0.5 beside 1)
    below = [m * 10.0**e for e in range(e0 - 1, e1 + 1) for m in (1, 2, 5) if lo / 2.51 <= m * 10.0**e <= lo]

    def with_floor(ticks):
        return sorted(set(ticks) | {max(below)}) if below and (not ticks or min(ticks) > 2.5 * lo) else ticks

    for steps in ladder:
        ticks = with_floor([m * 10.0**e for e in range(e0, e1 + 1) for m in steps if lo / 2.2 <= m * 10.0**e <= hi * 2.2])
        if len(ticks) <= max_ticks:
            break
    else:  # every other (or third) decade from the lowest: evenly spaced, one near the lowest value
        decades = [10.0**e for e in range(e0, e1 + 1) if lo / 2.2 <= 10.0**e <= hi * 2.2]
        ticks = decades[::2] if len(decades[::2]) <= max_ticks else decades[::3]
    if fmt is None:
        if e1 - e0 > 3 and (lo < 1e-2 or hi > 1e5):
            text = [f"10<sup>{round(math.log10(t))}</sup>" for t in ticks]
        else:
            text = [f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks]
    else:
        text = [fmt(t) for t in ticks]
    return dict(tickmode="array", tickvals=ticks, ticktext=text)


def size_unit(values_bytes):
    """(divisor, unit) so that the largest of ``values_bytes`` reads well: B, KiB or MiB."""
    v = [float(x) for x in values_bytes if x is not None and not _isnan(x)]
    top = max(v) if v else 0.0
    if top < 1024:
        return 1.0, "B"
    if top < MIB:
        return 1024.0, "KiB"
    return float(MIB), "MiB"


def no_data(fig: go.Figure, message: str) -> None:
    """Empty every trace of ``fig`` (a Figure or FigureWidget) and say why in the middle of the
    chart: no stale number stays on screen next to controls it was not measured for."""
    with _batch(fig):
        for t in fig.data:
            t.update(dict(x=None, y=None, text=None, customdata=None, visible=False))
        fig.layout.annotations = [dict(text=_wrap(html.escape(message, quote=False), 90), xref="paper", yref="paper", x=0.5,
                                       y=0.5, showarrow=False, font=dict(size=13, color=COLORS["bad"]),
                                       bgcolor="rgba(255,255,255,0.9)", name="no-data")]
        fig.layout.title.text = ("<b>No data for this request</b><br><span style='font-size:12px;color:#3c4043'>nothing is "
                                 "drawn: no number on this chart belongs to another request</span>")
        for name in [k for k in fig.layout if k.startswith(("xaxis", "yaxis"))]:
            fig.layout[name].visible = False  # no axis scale left over from the previous request


def _batch(fig):
    import contextlib

    return fig.batch_update() if hasattr(fig, "batch_update") else contextlib.nullcontext()


#: characters of a 12 px subtitle line that fit a panel's chart (`widgets.FIG_WIDTH`, 900 px)
DETAIL_CHARS = 128
#: characters of an 11 px note line under the plot: it starts at the plot's left edge, which long
#: y labels push right (the strategies chart's plot starts ~190 px in)
NOTE_CHARS = 112


def _wrap(text: str, width: int) -> str:
    words, lines, cur = text.split(" "), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    return "<br>".join(lines[:8])


def nice_step(raw: float) -> float:
    """The 1-2-5 step at or above ``raw`` (linear axis ticks at round values: 2x, 4x, 6x, not 1.9x, 3.9x)."""
    if not raw or raw <= 0 or _isnan(raw):
        return 1.0
    e = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * 10.0**e >= raw - 1e-12:
            return m * 10.0**e
    return 10.0 ** (e + 1)


def log_axis(values, fmt=None, max_ticks: int = 10) -> dict:
    """`log_ticks` plus a ``range`` that shows the lowest tick and some room above the highest
    value, so the lowest points always have a labelled tick under them."""
    t = log_ticks(values, fmt, max_ticks)
    v = [float(x) for x in values if x is not None and not _isnan(x) and float(x) > 0]
    if not t or not v:
        return t
    lo, hi = math.log10(min(min(t["tickvals"]), min(v))), math.log10(max(v))
    pad = max(0.07, 0.05 * (hi - lo))  # room for a marker's half at either end
    return dict(t, range=[lo - pad, hi + max(pad, 0.1)])


def _log_if_wide(values, ratio: float = 30.0) -> str:
    v = [float(x) for x in values if x is not None and not _isnan(x) and float(x) > 0]
    return "log" if v and max(v) / min(v) > ratio else "linear"


# ---- lesson 01: what a workspace is ---------------------------------------------------------
def algorithms(df) -> go.Figure:
    """The classic algorithm table: GPU time and workspace per algorithm; unsupported ones say so.

    Traces: 0 time bars (us), 1 workspace bars (MiB), 2 'not supported' labels.
    """
    df = df.sort_values("algo_id") if "algo_id" in df.columns else df
    names = list(df["algorithm"])
    timed = df["find_status"] == "ok" if "find_status" in df.columns else df["time_us"].notna()
    sized = df["query_status"] == "ok" if "query_status" in df.columns else df["query_workspace_bytes"].notna()
    fastest = None
    if timed.any():
        fastest = df.loc[df.loc[timed, "time_us"].astype(float).idxmin(), "algorithm"]
    fig = _new_figure(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("GPU time (us), as cuDNN's Find reports it", "workspace it asks for (MiB)"))
    t = [_num(v) if ok else None for v, ok in zip(df["time_us"], timed)]
    ws = [(_num(v) / MIB if _num(v) is not None else None) if ok else None for v, ok in zip(df["query_workspace_bytes"], sized)]
    math_col = df["math"] if "math" in df.columns else [""] * len(df)
    fig.add_trace(go.Bar(
        y=names, x=t, orientation="h", name="GPU time", marker_color=[COLORS["good"] if n == fastest else COLORS["primary"] for n in names],
        text=[(f"{fmt_us(v)}" + (" · fastest" if n == fastest else "")) if v is not None else "" for v, n in zip(t, names)],
        textposition="auto", customdata=[str(m) if isinstance(m, str) else "" for m in math_col],
        hovertemplate="%{y}: %{x:.1f} us (%{customdata} math)<extra></extra>"), row=1, col=1)
    wsb = list(df["query_workspace_bytes"])
    fig.add_trace(go.Bar(
        y=names, x=ws, orientation="h", name="workspace", marker_color=COLORS["secondary"],
        text=[fmt_bytes(b) if ok else "" for b, ok in zip(wsb, sized)], textposition="auto",
        hovertemplate="%{y}: %{text}<extra></extra>"), row=1, col=2)
    unsup = [(n, s) for n, s, ok in zip(names, df.get("find_status", df.get("query_status")), timed) if not ok]
    fig.add_trace(go.Scatter(
        y=[n for n, _ in unsup], x=[0] * len(unsup), mode="text", name="not supported",
        text=[f"  not supported ({s})" for _, s in unsup], textposition="middle right",
        textfont=dict(color=COLORS["bad"]), hoverinfo="skip", showlegend=False), row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="GPU time of one call, Find's timing (us)", row=1, col=1)
    fig.update_xaxes(title_text="workspace (MiB)", row=1, col=2)
    spec = request_spec(df)
    detail = (f"{spec.dtype} {spec.layout} {shape_label(spec)}; legacy API, times from one run each inside Find "
              "(not the CUDA-graph medians of the other charts)") if spec else ""
    return _layout(fig, df, "The classic algorithm table: time and workspace per algorithm", detail, height=430,
                   legend_rows=0)


def workspace_sizes(df) -> go.Figure:
    """Workspace of the heuristic plan per dtype, layout and direction (whiskers: smallest and
    largest among all candidate plans). Traces: 6 bars (3 directions x 2 layouts)."""
    dirs = ("fprop", "dgrad", "wgrad")
    dtypes = list(dict.fromkeys(df["dtype"]))
    fig = _new_figure(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03, subplot_titles=dirs)
    for c, d in enumerate(dirs, start=1):
        for lay in ("NCHW", "NHWC"):
            sub = df[(df["direction"] == d) & (df["layout"] == lay)].set_index("dtype")
            ys, lo, hi, txt = [], [], [], []
            for dt in dtypes:
                r = sub.loc[dt] if dt in sub.index else None
                ok = r is not None and ("status" not in sub.columns or r["status"] == "ok")
                h = _num(r["heuristic_workspace_bytes"]) if ok else None
                ys.append(h / MIB if h is not None else None)
                lo.append((h - float(r["min_workspace_bytes"])) / MIB if h is not None else 0)
                hi.append((float(r["max_workspace_bytes"]) - h) / MIB if h is not None else 0)
                txt.append(fmt_bytes(h) if h is not None else "n/a")
            fig.add_trace(go.Bar(
                x=dtypes, y=ys, name=lay, legendgroup=lay, showlegend=c == 1, marker_color=LAYOUT_COLORS[lay],
                text=txt, textposition="none",
                error_y=dict(type="data", symmetric=False, array=hi, arrayminus=lo, color=COLORS["dark"], thickness=1),
                hovertemplate=f"{d} {lay} %{{x}}: heuristic plan %{{text}}<extra></extra>"), row=1, col=c)
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="workspace of the heuristic plan (MiB)", row=1, col=1)
    for c in (1, 2, 3):
        fig.update_xaxes(title_text="dtype", row=1, col=c)
    spec = request_spec(df)
    note = "bars: the plan cuDNN's heuristic picks; whiskers: smallest to largest workspace among all candidate plans"
    bad = _not_ok_note(df, ("dtype", "layout", "direction"))
    return _layout(fig, df, "Workspace by dtype, layout and direction (same dims)", shape_label(spec),
                   note=(note + (" · " + bad if bad else "")), height=500)


SWEEP_AXIS = {"N": "N (batch size)", "C=K": "C = K (channels in = out)", "H=W": "H = W (image size, pixels)",
              "R=S": "R = S (filter size)"}


def sweep(df) -> go.Figure:
    """GPU time and workspace of the heuristic plan as one dimension varies.
    Traces: 0 GPU time (us), 1 workspace (MiB)."""
    field = str(df["field"].iloc[0]) if len(df) else ""
    ok = _ok(df)
    fig = _new_figure(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])
    custom = [[str(p), _num(t)] for p, t in zip(ok.get("plan_name", [""] * len(ok)), ok.get("tflops", [None] * len(ok)))]
    fig.add_trace(go.Scatter(
        x=list(ok["value"]), y=[_num(v) for v in ok["gpu_us"]], mode="lines+markers", name="GPU time",
        line=dict(color=COLORS["primary"]), customdata=custom,
        hovertemplate=f"{field}=%{{x}}: %{{y:.1f}} us, %{{customdata[1]:.0f}} TFLOP/s<br>plan %{{customdata[0]}}<extra></extra>"),
        row=1, col=1)
    div, unit = size_unit(ok["workspace_bytes"])
    fig.add_trace(go.Scatter(
        x=list(ok["value"]), y=[_num(v) / div if _num(v) is not None else None for v in ok["workspace_bytes"]],
        mode="lines+markers", name="workspace", line=dict(color=COLORS["secondary"]),
        text=[fmt_bytes(v) for v in ok["workspace_bytes"]],
        hovertemplate=f"{field}=%{{x}}: workspace %{{text}}<extra></extra>"), row=2, col=1)
    xtype = "linear" if field == "R=S" else "log"
    fig.update_xaxes(type=xtype, tickvals=list(ok["value"]), row=1, col=1)
    fig.update_xaxes(type=xtype, tickvals=list(ok["value"]), title_text=SWEEP_AXIS.get(field, field), row=2, col=1)
    ytype = _log_if_wide(ok["gpu_us"])
    fig.update_yaxes(title_text="GPU time (us)", type=ytype, row=1, col=1,
                     **(log_axis(ok["gpu_us"]) if ytype == "log" else {}))
    fig.update_yaxes(title_text=f"workspace ({unit})", rangemode="tozero", row=2, col=1)
    spec = request_spec(df)
    detail = f"around {spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; heuristic plan at each point" if spec else ""
    return _layout(fig, df, f"Sweep of {field}: GPU time and workspace", detail,
                   note=_not_ok_note(df, ("field", "value")), height=520, legend_rows=0)


# ---- lesson 02: strategies -------------------------------------------------------------------
def strategies(df) -> go.Figure:
    """Every workspace strategy on one workload. Traces: 0 host median per call (us), 1 host p95
    (us), 2 host time inside the strategy's get/put per call (us), 3 GPU time per call (us),
    4 allocator calls in the timed pass, 5 allocator calls in the warm-up pass, 6 peak held (MiB),
    7 held after the run (MiB). A column the DataFrame lacks leaves its trace empty."""
    names = list(df["strategy"])
    ok = list((df["status"] == "ok") if "status" in df.columns else [True] * len(df))
    col = lambda c, scale=1.0: [(_num(v) / scale if _num(v) is not None else None) if k else None  # noqa: E731
                                for v, k in zip(df[c] if c in df.columns else [None] * len(df), ok)]
    fig = _new_figure(rows=1, cols=4, shared_yaxes=True, horizontal_spacing=0.025,
                        subplot_titles=("host time per call", "GPU wall time per call", "workspace allocations",
                                        "workspace memory"))
    fb = list(df["fallbacks"]) if "fallbacks" in df.columns else [0] * len(df)
    bar = dict(orientation="h")
    fig.add_trace(go.Bar(y=names, x=col("median_us"), name="host median", marker_color=COLORS["primary"], customdata=fb,
                         hovertemplate="%{y}: median %{x:.1f} us per call (fallbacks: %{customdata})<extra></extra>", **bar),
                  row=1, col=1)
    fig.add_trace(go.Bar(y=names, x=col("p95_us"), name="host p95", marker_color="#aec7e8",
                         hovertemplate="%{y}: p95 %{x:.1f} us per call<extra></extra>", **bar), row=1, col=1)
    fig.add_trace(go.Bar(y=names, x=col("strategy_us_per_call"), name="inside the strategy (get/put)",
                         marker_color=COLORS["dark"],
                         hovertemplate="%{y}: %{x:.1f} us per call inside the strategy's get/put<extra></extra>", **bar),
                  row=1, col=1)
    fig.add_trace(go.Bar(y=names, x=col("gpu_us"), name="GPU wall time (kernels + idle)", marker_color=COLORS["purple"],
                         hovertemplate="%{y}: %{x:.1f} us per call between two events around the run: kernels plus "
                                       "time the GPU waited for the host<extra></extra>", **bar), row=1, col=2)
    whose = [allocator_of(n) for n in names]
    fig.add_trace(go.Bar(y=names, x=col("alloc_calls"), name="allocations (timed pass)", marker_color=COLORS["bad"],
                         text=[f"{int(v)} {'to the pool' if w in POOL_ALLOCATORS.values() else w}" if v else ""
                               for v, w in zip(col("alloc_calls"), whose)],
                         textposition="auto", customdata=whose,
                         marker_pattern_shape=["/" if w in POOL_ALLOCATORS.values() else "" for w in whose],
                         hovertemplate="%{y}: %{x} workspace allocations in the timed pass, counted as calls of "
                                       "%{customdata}<extra></extra>", **bar), row=1, col=3)
    fig.add_trace(go.Bar(y=names, x=col("warmup_alloc_calls"), name="allocations (warm-up pass)", marker_color="#ff9896",
                         customdata=whose,
                         marker_pattern_shape=["/" if w in POOL_ALLOCATORS.values() else "" for w in whose],
                         hovertemplate="%{y}: %{x} workspace allocations in the warm-up pass (%{customdata})<extra></extra>",
                         **bar), row=1, col=3)
    peak = df["peak_bytes"] if "peak_bytes" in df.columns else [None] * len(df)
    fig.add_trace(go.Bar(y=names, x=col("peak_bytes", MIB), name="peak held", marker_color=COLORS["secondary"],
                         text=[fmt_bytes(v) if k else "" for v, k in zip(peak, ok)], textposition="auto",
                         hovertemplate="%{y}: peak %{text}<extra></extra>", **bar), row=1, col=4)
    fig.add_trace(go.Bar(y=names, x=col("held_after_bytes", MIB), name="held after the run", marker_color="#ffbb78",
                         hovertemplate="%{y}: %{x:.1f} MiB still held after the run<extra></extra>", **bar), row=1, col=4)
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    times = col("median_us") + col("p95_us") + col("strategy_us_per_call")
    t1, t2 = _log_if_wide(times, 100), _log_if_wide(col("gpu_us"))
    # four subplots side by side, ~170 px each: few ticks, or their labels run together
    fig.update_xaxes(title_text="host time per call (us)", type=t1, row=1, col=1,
                     **(log_axis(times, max_ticks=4) if t1 == "log" else {}))
    fig.update_xaxes(title_text="GPU wall time per call (us)", type=t2, row=1, col=2,
                     **(log_axis(col("gpu_us"), max_ticks=4) if t2 == "log" else dict(nticks=5)))
    fig.update_xaxes(nticks=4, row=1, col=3)
    fig.update_xaxes(nticks=4, row=1, col=4)
    fig.update_xaxes(title_text="allocations (count)", row=1, col=3)
    fig.update_xaxes(title_text="workspace held (MiB)", row=1, col=4)
    wl = str(df["workload"].iloc[0]) if len(df) else "?"
    calls = int(df["calls"].iloc[0]) if "calls" in df.columns and len(df) else 0
    detail = (f"workload '{wl}': {calls} convolution calls per strategy after a warm-up pass; host time = strategy + "
              "launch; GPU wall time = events around the run / calls: kernels + GPU idle waiting for the host")
    note = ("allocations: cudaMalloc calls for the strategies that own their memory; hatched, for cupy_pool / async_pool: "
            "requests to the pool (most served from its cache without reaching cudaMalloc)")
    bad = _not_ok_note(df, ("strategy",))
    return _layout(fig, df, f"Workspace strategies on '{wl}'", detail, note=note + (" · " + bad if bad else ""),
                   height=560, legend_rows=3)


#: the strategies whose workspace allocations are requests to a caching pool, not cudaMalloc calls
POOL_ALLOCATORS = {"cupy_pool": "MemoryPool.malloc", "async_pool": "MemoryAsyncPool.malloc"}


def allocator_of(strategy: str) -> str:
    """Whose calls a strategy's ``alloc_calls`` counts: a pool's malloc for the caching pools,
    cudaMalloc for the strategies that allocate their own memory."""
    return POOL_ALLOCATORS.get(str(strategy).split(" ")[0], "cudaMalloc")


# ---- lesson 03: precision, layout, roofline ---------------------------------------------------
def precision(df) -> go.Figure:
    """Error vs GPU time per dtype, log-log. Traces: 0 arithmetic error (vs fp64 on the inputs
    cuDNN read), 1 total error (vs fp64 on the unrounded data), 2 the segment between them
    (what rounding the inputs to the dtype adds)."""
    ok = _ok(df)
    x = [_num(v) for v in ok["gpu_us"]]
    e1 = [_num(v) for v in ok["rel_error"]]
    e2 = [_num(v) for v in ok["rel_error_vs_fp64_inputs"]] if "rel_error_vs_fp64_inputs" in ok else [None] * len(ok)
    dts = list(ok["dtype"])
    colors = [DTYPE_COLORS.get(d, COLORS["dark"]) for d in dts]
    fig = _new_figure()
    fig.add_trace(go.Scatter(x=x, y=e1, mode="markers+text", name="arithmetic error (vs fp64 on the same rounded inputs)",
                             text=dts, textposition="middle left", marker=dict(size=12, color=colors, symbol="circle"),
                             customdata=[[fmt_bytes(w), str(p)] for w, p in zip(ok["workspace_bytes"], ok["plan_name"])],
                             hovertemplate="%{text}: %{x:.1f} us, arithmetic error %{y:.2e}<br>workspace %{customdata[0]}, "
                                           "plan %{customdata[1]}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=e2, mode="markers", name="total error (vs fp64 on the original data)",
                             text=dts, marker=dict(size=12, color=colors, symbol="diamond-open", line=dict(width=2)),
                             hovertemplate="%{text}: %{x:.1f} us, total error %{y:.2e}<extra></extra>"))
    sx, sy = [], []
    for xi, a, b in zip(x, e1, e2):
        if None not in (xi, a, b):
            sx += [xi, xi, None]
            sy += [a, b, None]
    fig.add_trace(go.Scatter(x=sx, y=sy, mode="lines", name="added by rounding the inputs", hoverinfo="skip",
                             line=dict(color=COLORS["muted"], dash="dot")))
    fig.update_xaxes(title_text="GPU time per call (us, log)", type="log", **log_axis(x))
    fig.update_yaxes(title_text="relative L2 error vs float64 (log)", type="log", **log_axis(e1 + e2))
    spec = request_spec(df)
    detail = f"{spec.layout} {spec.direction} {shape_label(spec)}; heuristic plan per dtype; lower-left is better" if spec else ""
    return _layout(fig, df, "Precision: error vs speed per dtype", detail, note=_not_ok_note(df, ("dtype",)), height=480)


def layout(df) -> go.Figure:
    """NCHW vs NHWC: convolution GPU time stacked with the cost of converting a user's NCHW
    tensors to NHWC and back. Traces: 0 convolution (us), 1 conversion (us)."""
    ok = _ok(df)
    lays = list(ok["layout"])
    conv = [_num(v) for v in ok["conv_gpu_us"]]
    conv_txt = [f"{fmt_us(c)} conv<br>workspace {fmt_bytes(w)}" for c, w in zip(conv, ok["workspace_bytes"])]
    cvt = [_num(v) for v in ok["convert_gpu_us"]]
    fig = _new_figure()
    fig.add_trace(go.Bar(x=lays, y=conv, name="convolution", marker_color=COLORS["primary"], text=conv_txt,
                         textposition="inside", customdata=[str(p) for p in ok["plan_name"]],
                         hovertemplate="%{x}: convolution %{y:.1f} us<br>plan %{customdata}<extra></extra>"))
    fig.add_trace(go.Bar(x=lays, y=cvt, name="NCHW → NHWC → NCHW conversion (CuPy transposes)",
                         marker_color=COLORS["secondary"],
                         text=[f"+{fmt_us(c)} convert" if c else "" for c in cvt], textposition="inside",
                         customdata=[_num(v) for v in ok["end_to_end_us"]],
                         hovertemplate="%{x}: conversion %{y:.1f} us (end to end %{customdata:.1f} us)<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="memory layout cuDNN runs in")
    fig.update_yaxes(title_text="GPU time per call (us)")
    spec = request_spec(df)
    detail = (f"{spec.dtype} {spec.direction} {shape_label(spec)}; the conversion is what a user whose tensors are "
              "NCHW pays to run in NHWC") if spec else ""
    return _layout(fig, df, "NCHW vs NHWC, conversion included", detail, note=_not_ok_note(df, ("layout",)), height=460)


def roofline(df) -> go.Figure:
    """Arithmetic intensity vs achieved TFLOP/s (log-log), with the roof of the df's GPU: the
    compute roof (``peak_tflops`` for the dtype) and the bandwidth roof (``bandwidth_gb_s``).
    A GPU with no known ceiling (empty columns) gets no roof, and a note says so.
    Traces: 0 measured shapes, 1 roof (empty without a ceiling)."""
    ok = _ok(df)
    xi = [_num(v) for v in ok["intensity_flops_per_byte"]]
    ty = [_num(v) for v in ok["tflops"]] if "tflops" in ok.columns else [None] * len(ok)
    dtype = str(df["dtype"].iloc[0]) if len(df) else "?"
    peak, bw = _first(df, "peak_tflops"), _first(df, "bandwidth_gb_s")
    roof_at = (lambda x: min(peak, x * bw / 1e3)) if peak and bw else None
    fig = _new_figure()
    fig.add_trace(go.Scatter(
        x=xi, y=ty, mode="markers+text", name=f"measured ({dtype})", text=list(ok["shape"]),
        textposition=_label_positions(xi, ty, roof_at),
        textfont=dict(size=10), marker=dict(size=11, color=DTYPE_COLORS.get(dtype, COLORS["primary"])),
        customdata=[[_num(u), _num(g)] for u, g in zip(ok.get("gpu_us", [None] * len(ok)), ok.get("achieved_gb_s", [None] * len(ok)))],
        hovertemplate="%{text}: %{x:.0f} FLOP/B, %{y:.0f} TFLOP/s<br>%{customdata[0]:.1f} us, %{customdata[1]:.0f} GB/s "
                      "(min-bytes model)<extra></extra>"))
    gpu = (getattr(df, "attrs", {}) or {}).get("gpu") or "this GPU"
    notes = []
    known = [v for v in xi if v]
    lo, hi = (min(known) / 3, max(known) * 3) if known else (1.0, 1e4)
    if peak and bw:
        ridge = peak * 1e3 / bw  # FLOP/B where peak TFLOP/s = intensity * GB/s / 1000
        lo, hi = min(lo, ridge / 3), max(hi, ridge * 3)
        rx = [lo, ridge, hi]
        ry = [min(peak, x * bw / 1e3) for x in rx]
        cg = _first(df, "ceiling_gpu") or gpu
        fig.add_trace(go.Scatter(x=rx, y=ry, mode="lines", name=f"roof: {cg}, {dtype} {peak:.0f} TFLOP/s, {bw:.0f} GB/s",
                                 line=dict(color=COLORS["dark"], width=2),
                                 hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>"))
        notes.append(f"roof: datasheet peak (dense) from labkit.ceilings; ridge at {ridge:.0f} FLOP/B. "
                     "Intensity: FLOPs over a byte model (filter, output, and the input pixels some window "
                     "covers, each moved once).")
    else:
        fig.add_trace(go.Scatter(x=[], y=[], mode="lines", name="roof (unknown GPU: not drawn)",
                                 line=dict(color=COLORS["dark"], width=2)))
        cg = _first(df, "ceiling_gpu")
        why = (f"labkit.ceilings has no {dtype} peak for {cg}" if cg and bw else
               f"no ceilings known for {gpu} (labkit.ceilings lists vendor datasheet figures only)")
        notes.append(f"No roof drawn: {why}. Only the measured points are shown.")
    fig.update_xaxes(title_text="arithmetic intensity (FLOP/byte, log)", type="log", range=[math.log10(lo), math.log10(hi)],
                     **log_ticks([lo, hi]))
    ys = [v for v in ty if v] + ([peak] if peak else [])
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **log_axis(ys))
    lay = str(df["layout"].iloc[0]) if len(df) else ""
    note = " ".join(notes)
    bad = _not_ok_note(df, ("shape",))
    return _layout(fig, df, f"Roofline: ResNet-50 convolutions, {dtype} {lay}", "heuristic plan per shape",
                   note=note + (" · " + bad if bad else ""), height=500)


def _label_positions(xs, ys, roof_at=None) -> list:
    """Text positions for labelled points on log-log axes: above the point, but below it when the
    roof (``roof_at(x)``) runs just above (the line would cross the label), and to the left /
    right for two points close together (their labels would overlap)."""
    lx = [math.log10(x) if x else None for x in xs]
    ly = [math.log10(y) if y else None for y in ys]
    pos = []
    for x, y, a in zip(xs, ys, ly):
        near_roof = roof_at is not None and x and y and math.log10(roof_at(x)) - a < 0.3
        pos.append("bottom center" if near_roof else "top center")
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if None in (lx[i], lx[j], ly[i], ly[j]):
                continue
            if abs(lx[i] - lx[j]) < 0.15 and abs(ly[i] - ly[j]) < 0.15:
                left, right = (i, j) if lx[i] <= lx[j] else (j, i)
                pos[left], pos[right] = "middle left", "middle right"
    return pos


def _first(df, col):
    if col not in df.columns:
        return None
    for v in df[col]:
        if v is not None and not _isnan(v) and v != "":
            return v if isinstance(v, str) else float(v)
    return None


# ---- lesson 04: fusion ------------------------------------------------------------------------
def fusion(df) -> go.Figure:
    """Fused conv+bias+relu(+add) (the heuristic's plan, and autotuned) vs the unfused sequence:
    GPU time, allocated bytes, modelled HBM traffic. Traces: (fused, fused autotuned, unfused) x
    (time us, allocated MiB, modelled MiB) = 9."""
    fig = _new_figure(rows=1, cols=3, horizontal_spacing=0.07,
                        subplot_titles=("GPU time per call", "memory allocated", "HBM traffic (model)"))
    epis = list(dict.fromkeys(df["epilogue"]))
    for c, (col, scale, fmt) in enumerate((("gpu_us", 1.0, fmt_us), ("allocated_bytes", MIB, fmt_bytes),
                                           ("modelled_hbm_bytes", MIB, fmt_bytes)), start=1):
        for path, color in (("fused", COLORS["good"]), ("fused, autotuned", COLORS["primary"]), ("unfused", COLORS["muted"])):
            sub = _ok(df[df["path"] == path]).set_index("epilogue")
            vals = [_num(sub.loc[e, col]) if e in sub.index and col in sub.columns else None for e in epis]
            fig.add_trace(go.Bar(x=epis, y=[v / scale if v is not None else None for v in vals], name=path,
                                 legendgroup=path, showlegend=c == 1, marker_color=color,
                                 text=[fmt(v) if v is not None else "" for v in vals], textposition="auto",
                                 hovertemplate=f"{path} %{{x}}: %{{text}}<extra></extra>"), row=1, col=c)
    fig.update_layout(barmode="group")
    times = [_num(v) for v in _ok(df)["gpu_us"]] if "gpu_us" in df.columns else []
    if _log_if_wide(times, 10) == "log":  # e.g. fp32: a 10 ms fused plan beside 0.3 ms bars
        fig.update_yaxes(title_text="GPU time (us, log)", type="log", row=1, col=1, **log_axis(times, max_ticks=6))
    else:
        fig.update_yaxes(title_text="GPU time (us)", type="linear", row=1, col=1)
    fig.update_yaxes(title_text="allocated (MiB)", row=1, col=2)
    fig.update_yaxes(title_text="modelled HBM bytes (MiB)", row=1, col=3)
    for c in (1, 2, 3):
        fig.update_xaxes(title_text="epilogue", row=1, col=c)
    spec = request_spec(df)
    detail = (f"{spec.dtype} {spec.layout} {shape_label(spec)}; fused = one cuDNN graph (heuristic's plan / fastest "
              "plan), unfused = cuDNN conv + CuPy elementwise kernels") if spec else ""
    note = "HBM traffic is a model from tensor sizes (each tensor read/written once per kernel), not a counter reading"
    bad = _not_ok_note(df, ("epilogue", "path"))
    return _layout(fig, df, "Fusion: conv + bias + ReLU (+ residual add)", detail,
                   note=note + (" · " + bad if bad else ""), height=460)


# ---- lesson 05: plans, caps, build cost -----------------------------------------------------
def plans(df) -> go.Figure:
    """Every plan: workspace vs GPU time; the heuristic pick, the best and the worst highlighted.
    Traces: 0 all plans, 1 heuristic pick, 2 best, 3 worst."""
    ok = _ok(df)
    div, unit = size_unit(ok["workspace_bytes"])

    def pts(mask):
        sub = ok[mask] if mask is not None else ok
        return dict(x=[float(v) / div for v in sub["workspace_bytes"]], y=[_num(v) for v in sub["gpu_us"]],
                    text=[str(p) for p in sub["plan_name"]],
                    customdata=[[int(i), fmt_bytes(w)] for i, w in zip(sub["plan_index"], sub["workspace_bytes"])])

    hover = "plan %{customdata[0]} %{text}<br>%{y:.1f} us, workspace %{customdata[1]}<extra>%{fullData.name}</extra>"
    fig = _new_figure()
    fig.add_trace(go.Scatter(mode="markers", name="every plan", marker=dict(size=8, color=COLORS["muted"], opacity=0.7),
                             hovertemplate=hover, **pts(None)))
    # the fastest plan is an open diamond drawn around its point, so a heuristic pick that is the
    # same plan (or one next to it) still shows its star inside
    for col, name, sym, color, size, line in (
            ("heuristic_pick", "heuristic pick", "star", COLORS["secondary"], 16, dict(width=1, color="white")),
            ("best", "fastest (autotuned)", "diamond-open", COLORS["good"], 24, dict(width=3, color=COLORS["good"])),
            ("worst", "slowest", "x", COLORS["bad"], 13, dict(width=1, color="white"))):
        mask = ok[col].astype(bool) if col in ok.columns else ok["plan_index"] < 0
        fig.add_trace(go.Scatter(mode="markers", name=name, marker=dict(size=size, color=color, symbol=sym, line=line),
                                 hovertemplate=hover, **pts(mask)))
    top = float(ok["workspace_bytes"].max()) / div if len(ok) else 1.0
    fig.update_xaxes(title_text=f"workspace the plan needs ({unit})", range=[-0.04 * (top or 1), 1.06 * (top or 1)],
                     zeroline=True)
    fig.update_yaxes(title_text="GPU time per call (us, log)", type="log", **log_axis(ok["gpu_us"]))
    spec = request_spec(df)
    n_ok, n_all = len(ok), len(df)
    detail = f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}: {n_ok} plans timed" if spec else ""
    note = f"{n_all - n_ok} of {n_all} plans could not be timed" if n_all != n_ok else ""
    return _layout(fig, df, "Every plan cuDNN offers: workspace vs GPU time", detail, note=note, height=480)


def cap_label(cap_bytes) -> str:
    c = int(cap_bytes)
    return "unlimited" if c < 0 else fmt_bytes(c)


def caps(df) -> go.Figure:
    """Best plan under each workspace cap and its slowdown against no cap.
    Traces: 0 best GPU time (us, bars), 1 slowdown (x, line on the right axis)."""
    labels = [cap_label(c) for c in df["cap_bytes"]]
    ok = (df["status"] == "ok") if "status" in df.columns else [True] * len(df)
    t = [_num(v) if k else None for v, k in zip(df["gpu_us"] if "gpu_us" in df else [None] * len(df), ok)]
    sd = [_num(v) if k else None for v, k in zip(df["slowdown_vs_unlimited"] if "slowdown_vs_unlimited" in df
                                                  else [None] * len(df), ok)]
    n = list(df["plans_within_cap"]) if "plans_within_cap" in df else [None] * len(df)
    fig = _new_figure(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=labels, y=t, name="best GPU time under the cap", marker_color=COLORS["primary"],
                         text=[f"{int(k)} plans" if k is not None and not _isnan(k) else "" for k in n],
                         textposition="inside", insidetextanchor="start",
                         customdata=[[str(p), fmt_bytes(w)] for p, w in zip(df.get("best_plan", [""] * len(df)),
                                                                           df.get("workspace_bytes", [None] * len(df)))],
                         hovertemplate="cap %{x}: %{y:.1f} us (%{text})<br>plan %{customdata[0]}, workspace %{customdata[1]}"
                                       "<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=labels, y=sd, name="slowdown vs unlimited", mode="lines+markers+text",
                             text=[f"{v:.2f}x" if v is not None else "" for v in sd], textposition="top center",
                             line=dict(color=COLORS["bad"]),
                             hovertemplate="cap %{x}: %{y:.2f}x the unlimited best<extra></extra>"), secondary_y=True)
    fig.update_xaxes(title_text="workspace cap (deselect_workspace_greater_than)", type="category")
    fig.update_yaxes(title_text="best GPU time (us)", secondary_y=False, rangemode="tozero")
    top = max([v for v in sd if v is not None] or [1.0])
    step = nice_step(top * 1.15 / 4)
    fig.update_yaxes(title_text="slowdown (x)", secondary_y=True, range=[0, top * 1.25], showgrid=False,
                     tickmode="linear", tick0=0, dtick=step, tickformat=".0f" if step >= 1 else ".1f" if step >= 0.1 else ".2f",
                     ticksuffix="x")
    spec = request_spec(df)
    detail = f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; every plan within the cap autotuned" if spec else ""
    return _layout(fig, df, "What a workspace cap costs", detail, note=_not_ok_note(df, ("cap_bytes",)), height=460)


def build_cost(df) -> go.Figure:
    """Wall time of each build stage (log). Traces: 0 bars."""
    s = [_num(v) for v in df["seconds"]]
    fig = _new_figure()
    fig.add_trace(go.Bar(y=list(df["stage"]), x=s, orientation="h", marker_color=COLORS["primary"],
                         text=[fmt_seconds(v) for v in s], textposition="auto", name="wall time",
                         hovertemplate="%{y}: %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="wall time (s, log)", type="log", **log_axis(s, _tick_seconds))
    spec = request_spec(df)
    pay = _first(df, "calls_to_pay_off_autotune")
    if pay is None:
        pay_txt = ""
    elif math.isinf(pay):
        pay_txt = "autotuning found nothing faster than the heuristic pick, so it never pays for itself here"
    else:
        pay_txt = (f"autotuning pays for itself after {pay:,.0f} calls (heuristic {_first(df, 'heuristic_gpu_us'):.1f} us "
                   f"vs best {_first(df, 'best_gpu_us'):.1f} us per call)")
    detail = f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}" if spec else ""
    return _layout(fig, df, "What building a cuDNN graph costs", detail, note=pay_txt, height=400, legend_rows=0)


# ---- lesson 06: race ----------------------------------------------------------------------------
def race(df) -> go.Figure:
    """Corrupted outputs with one scratchpad shared by all streams vs one per stream, per launch
    method. ``df`` may hold several race calls (one x category each).
    Traces: 0 shared, 1 per-stream."""
    cases = list(dict.fromkeys(f"{r.launch} launch, {int(r.streams)} streams" for r in df.itertuples()))
    fig = _new_figure()
    for sp, color in (("shared", COLORS["bad"]), ("per-stream", COLORS["good"])):
        sub = df[df["scratchpad"] == sp]
        by = {f"{r.launch} launch, {int(r.streams)} streams": r for r in sub.itertuples()}
        y = [int(by[c].mismatches_bitwise) if c in by else None for c in cases]
        txt = [f"{int(by[c].mismatches_bitwise)} / {int(by[c].runs)}" if c in by else "" for c in cases]
        fig.add_trace(go.Bar(x=cases, y=y, name=f"{sp} scratchpad", marker_color=color, text=txt, textposition="outside",
                             hovertemplate="%{x}: %{text} outputs differ from the solo run<extra>" + sp + "</extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="how the convolutions were launched")
    # counts of the outputs checked: whole numbers, up to the number checked (an all-zero case then
    # reads "0 of 1024", not an axis of 0.2, 0.4 ... counts)
    runs = [float(v) for v in df["runs"] if _num(v)] if "runs" in df.columns else []
    fig.update_yaxes(title_text="corrupted outputs (count)", rangemode="tozero", tickformat=",d",
                     **(dict(range=[0, max(runs) * 1.08]) if runs else {}))
    label = str(df["spec_label"].iloc[0]) if "spec_label" in df.columns and len(df) else ""
    ws = fmt_bytes(df["workspace_bytes"].iloc[0]) if "workspace_bytes" in df.columns and len(df) else "?"
    detail = f"{label}, workspace {ws}; every output compared bit for bit with the same convolution run alone"
    return _layout(fig, df, "Shared vs per-stream scratchpad on concurrent streams", detail, height=440)


#: experiment name -> builder
BUILDERS = {
    "precision": precision, "layout": layout, "fusion": fusion, "plans": plans, "caps": caps,
    "algorithms": algorithms, "build_cost": build_cost, "roofline": roofline, "sweep": sweep,
    "workspace_sizes": workspace_sizes, "strategies": strategies, "race": race,
}


def figure(df) -> go.Figure:
    """The chart for any experiment's DataFrame (by ``df.attrs['experiment']``)."""
    from .errors import InvalidSpec

    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    if name not in BUILDERS:
        raise InvalidSpec("df", name, f"attrs['experiment'] must name one of {', '.join(BUILDERS)}")
    return BUILDERS[name](df)


def concat(frames: List) -> "object":
    """Several DataFrames of one experiment as one (for `race` over launch methods), keeping the
    first frame's provenance in ``attrs``."""
    import pandas as pd

    out = pd.concat(list(frames), ignore_index=True)
    out.attrs = dict(frames[0].attrs)
    return out
