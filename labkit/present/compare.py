"""The same experiment call answered from several recordings: one convolution, several GPUs.

``frames(name, **kwargs)`` looks the call up in every shipped recording (or the ones named) and
returns one DataFrame with ``recording`` and ``gpu`` columns; a recording that lacks the call is
left out and named, with the reason, in ``df.attrs['skipped']`` (never silently). ``ratios(df)``
puts each GPU's value side by side per row label (dtype, shape, plan, strategy, ...) with the
ratio other / baseline; ``figure(df)`` draws the GPUs on the same axes, each trace labelled with
its GPU and the title with every recording's provenance. ``summary(table)`` says it in words.

Always recorded numbers, in live mode too (the recordings compared are GPUs you may not have);
nothing is interpolated or borrowed: a row appears only where that GPU measured exactly that call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import plotly.graph_objects as go

from .. import ceilings
from ..draw import plots
from ..errors import InvalidSpec, LabkitError, RecordedDataError
from ..experiments import plans_autotune, workspace_basics
from ..store import recordings as recs


@dataclass(frozen=True)
class Comparable:
    """How one experiment compares: the columns that name a row, the value compared by default."""

    labels: Tuple[str, ...]
    value: str
    axis: str


#: experiment -> how its rows compare across GPUs
COMPARABLE = {
    "precision": Comparable(("dtype",), "gpu_us", "GPU time per call (us)"),
    "layout": Comparable(("layout",), "conv_gpu_us", "convolution GPU time (us)"),
    "roofline": Comparable(("shape",), "gpu_us", "GPU time per call (us)"),
    "strategies": Comparable(("strategy",), "gpu_us", "GPU wall time per call (us)"),
    "plans": Comparable(("plan_name",), "gpu_us", "GPU time per call (us)"),
    "fusion": Comparable(("epilogue", "path"), "gpu_us", "GPU time per call (us)"),
    "sweep": Comparable(("value",), "gpu_us", "GPU time per call (us)"),
    "caps": Comparable(("cap_bytes",), "gpu_us", "best GPU time under the cap (us)"),
    "algorithms": Comparable(("algorithm",), "time_us", "GPU time, cuDNN's Find (us)"),
}
#: experiments not compared, and why
NOT_COMPARED = {
    "build_cost": "its times are host wall time for building graphs (the CPU and the driver), not the GPU's",
    "race": "it counts outputs corrupted by a race whose outcome depends on timing, not a speed",
    "workspace_sizes": "it holds workspace sizes only, no time (compare 'plans' for time and workspace)",
}
GPU_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


class Text(str):
    """A string shown as Markdown in a notebook (as `labkit.session.lessons.Text`; this layer cannot import it)."""

    def _repr_markdown_(self) -> str:
        return str(self)


# ---- which recordings, which call --------------------------------------------------------------
def _recordings(names) -> list:
    """The recordings to compare: every shipped one (the default first), or those named."""
    shipped = recs.shipped()
    if names is None:
        return shipped
    if isinstance(names, (str, recs.Recording)) or not isinstance(names, Sequence) or not names:
        raise InvalidSpec(
            "recordings", names, "must be a non-empty list of recording names, e.g. ['h100-sxm', 'h200']"
        )
    by_name = {r.name: r for r in shipped}
    out = []
    for n in names:
        rec = n if isinstance(n, recs.Recording) else by_name.get(n)
        if rec is None:
            raise InvalidSpec(
                "recordings",
                n,
                f"must name a recording in {recs.data_dir()} (available: {', '.join(by_name) or 'none'})",
            )
        if rec.name in [r.name for r in out]:
            raise InvalidSpec("recordings", n, "each recording may be named once")
        out.append(rec)
    return out


def comparable(name: str) -> Comparable:
    """How experiment ``name`` compares; `InvalidSpec` naming the rule for any other name."""
    from .. import experiments

    if name in NOT_COMPARED:
        raise InvalidSpec(
            "experiment",
            name,
            f"is not compared across GPUs: {NOT_COMPARED[name]}; compare one of {', '.join(COMPARABLE)}",
        )
    if name not in COMPARABLE or name not in experiments.registry():
        raise InvalidSpec("experiment", name, f"must be one of {', '.join(COMPARABLE)}")
    return COMPARABLE[name]


def frames(name: str, recordings: Optional[Sequence] = None, **kwargs):
    """Experiment ``name`` called with ``kwargs`` (as you would call ``labkit.experiments.<name>``),
    answered by each recording: one DataFrame, columns ``recording`` and ``gpu`` first.

    ``attrs``: ``experiment``, ``request``, ``recordings`` (names used, in order), ``provenance``
    (recording -> GPU, cuDNN, frontend, date, complete, source), ``skipped`` (recording -> why it
    is not in the frame) and a combined mode/gpu/cudnn/date that `labkit.draw.plots` titles read.
    `RecordedDataError` when no recording has the call (the reasons listed)."""
    import pandas as pd

    from .. import experiments

    comparable(name)
    try:
        request = experiments.request_of(name, **kwargs)
    except TypeError as exc:
        raise InvalidSpec("arguments", kwargs, f"{name}: {exc}") from None
    parts, skipped, prov = [], {}, {}
    for rec in _recordings(recordings):
        try:
            df = experiments.with_model(name, rec.lookup(name, request))
        except LabkitError as exc:  # not recorded there (or recorded as unsupported): say so
            skipped[rec.name] = f"{rec.metadata.get('gpu')}: {exc}"
            continue
        df.insert(0, "recording", rec.name)
        df.insert(1, "gpu", rec.metadata.get("gpu"))
        parts.append(df)
        prov[rec.name] = dict(rec.provenance(name), complete=rec.metadata.get("complete"), recording=rec.name)
    if not parts:
        raise RecordedDataError(
            f"{name}: no recording has this call: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()),
            recs.data_dir(),
        )
    out = pd.concat(parts, ignore_index=True)
    out.attrs = _attrs(name, request, prov, skipped)
    return out


def _attrs(name: str, request: dict, prov: dict, skipped: dict) -> dict:
    def joined(key):
        vals = list(dict.fromkeys(str(p.get(key)) for p in prov.values()))
        return " / ".join(vals)

    return {
        "experiment": name,
        "request": request,
        "recordings": list(prov),
        "provenance": prov,
        "skipped": skipped,
        "mode": "recorded",
        "gpu": " vs ".join(p["gpu"] for p in prov.values()),
        "cudnn_backend": joined("cudnn_backend"),
        "cudnn_frontend": joined("cudnn_frontend"),
        "date": joined("date"),
    }


def describe(recordings: Optional[Sequence] = None, experiments: Optional[Sequence[str]] = None) -> Text:
    """The recordings compared, one Markdown line each: GPU, cuDNN, and the date each compared
    experiment was measured (the date its charts' legends and subtitles give).

    Args:
        recordings: recording names (default: every shipped recording).
        experiments: the experiments whose dates to give (default: every comparable one).

    Returns:
        Markdown text, one bullet per recording.
    """
    lines = []
    for r in _recordings(recordings):
        m = r.metadata
        names = [e for e in (experiments or sorted(COMPARABLE)) if e in r.experiments()]
        by_date: dict = {}
        for e in names:
            by_date.setdefault(r.provenance(e)["date"], []).append(e)
        dates = "; ".join(f"{d} ({', '.join(es)})" for d, es in sorted(by_date.items()))
        kind = (
            ""
            if m.get("complete")
            else ", a quick recording (`record --quick`: the lessons' base calls only)"
        )
        lines.append(
            f"* `{r.name}`: {m.get('gpu')} (compute capability {m.get('compute_capability')}), cuDNN "
            f"{m.get('cudnn_backend')} (frontend {m.get('cudnn_frontend')}), measured {dates}{kind}"
        )
    return Text("\n".join(lines))


def ceilings_table(recordings: Optional[Sequence] = None, dtype: str = "fp16"):
    """Each compared GPU on paper (`labkit.ceilings`, vendor datasheets): peak dense TFLOP/s for
    ``dtype``, memory bandwidth (GB/s) and the ridge (FLOP/B where the two roofs meet); empty for a
    GPU the table does not know."""
    import pandas as pd

    rows = []
    for r in _recordings(recordings):
        c = ceilings.for_gpu(r.metadata.get("gpu"))
        rows.append(
            dict(
                recording=r.name,
                gpu=r.metadata.get("gpu"),
                ceiling=c.gpu if c else None,
                **{
                    f"{dtype}_tflops": c.peak_tflops(dtype) if c else None,
                    "bandwidth_gb_s": c.bandwidth_bytes_per_s / 1e9 if c else None,
                    f"{dtype}_ridge_flop_per_byte": c.ridge_intensity(dtype) if c else None,
                },
            )
        )
    return pd.DataFrame(rows)


# ---- side by side ------------------------------------------------------------------------------
def _label_text(row, labels) -> str:
    parts = []
    for c in labels:
        v = row[c]
        parts.append(
            plans_autotune.cap_label(v)
            if c == "cap_bytes"
            else str(int(v))
            if isinstance(v, float) and v.is_integer()
            else str(v)
        )
    return " · ".join(parts)


def spread_columns(df, value: str) -> Optional[Tuple[str, str]]:
    """The p10 and p90 columns of ``value`` (repeated timings of each row), when the frame has them."""
    lo, hi = f"{value}_p10", f"{value}_p90"
    return (lo, hi) if lo in df.columns and hi in df.columns else None


def ratios(df, value: Optional[str] = None, baseline: str = recs.DEFAULT_RECORDING):
    """Per row label (e.g. dtype, shape, plan): each recording's ``value`` (default: the
    experiment's time column) and ``ratio <other>/<baseline>`` for every other recording
    (below 1: the other GPU takes less time). A row that did not run (status not ok) or that a
    recording lacks has no value, and its ratio is empty (NaN), never guessed.

    Where the frame holds the spread of repeated timings (``<value>_p10`` and ``<value>_p90``:
    plans, precision), ``ratio low`` and ``ratio high`` give the ratio's range under that spread
    (the other GPU's p10 over the baseline's p90, and its p90 over the baseline's p10): a range
    that holds 1 is no measured difference."""
    import pandas as pd

    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    comp = comparable(name)
    value = value or comp.value
    if value not in df.columns or df[value].dtype.kind not in "if":
        nums = [c for c in df.columns if df[c].dtype.kind in "f"]
        raise InvalidSpec("value", value, f"must be a numeric column of the {name} frame: {', '.join(nums)}")
    names = list(dict.fromkeys(df["recording"]))
    if baseline not in names:
        raise InvalidSpec(
            "baseline", baseline, f"must be one of the recordings in the frame: {', '.join(names)}"
        )
    labels = list(comp.labels)
    dup = df[df.duplicated(["recording"] + labels, keep=False)]
    if not dup.empty:
        raise InvalidSpec(
            "df",
            name,
            f"rows must be unique per recording and {labels}; repeated: "
            f"{dup[labels].drop_duplicates().to_dict('records')[:3]}",
        )
    ok = (df["status"] == "ok") if "status" in df.columns else pd.Series(True, index=df.index)
    order = list(
        dict.fromkeys(
            map(
                tuple,
                df.sort_values("recording", key=lambda s: s != baseline, kind="stable")[labels].itertuples(
                    index=False, name=None
                ),
            )
        )
    )
    index = pd.MultiIndex.from_tuples(order, names=labels) if len(labels) > 1 else [o[0] for o in order]

    def wide(col):
        return (
            df.assign(_v=df[col].where(ok))
            .pivot(index=labels, columns="recording", values="_v")
            .reindex(index)
        )

    values = wide(value)
    spread = spread_columns(df, value)
    p10, p90 = (wide(spread[0]), wide(spread[1])) if spread else (None, None)
    others = [n for n in names if n != baseline]
    out = pd.DataFrame(index=values.index)
    for n in [baseline] + others:
        out[f"{value} {n}"] = values[n]
    for n in others:
        out[f"ratio {n}/{baseline}"] = values[n] / values[baseline]
        if spread:
            out[f"ratio low {n}/{baseline}"] = p10[n] / p90[baseline]
            out[f"ratio high {n}/{baseline}"] = p90[n] / p10[baseline]
    out = out.reset_index()
    out.insert(len(labels), "label", [_label_text(r, labels) for _, r in out.iterrows()])
    out.attrs = dict(df.attrs, value=value, baseline=baseline, others=others, spread=bool(spread))
    return out


def ratio_column(table, other: Optional[str] = None) -> str:
    """The ratio column of a `ratios` table (the first other recording's unless ``other``)."""
    others = table.attrs.get("others") or []
    other = other or (others[0] if others else None)
    if other not in others:
        raise InvalidSpec("other", other, f"must be one of {', '.join(others) or 'no other recording'}")
    return f"ratio {other}/{table.attrs['baseline']}"


def ratio_range(table, col: str):
    """The ``ratio low`` and ``ratio high`` columns of ratio column ``col`` (None without a spread)."""
    low, high = col.replace("ratio ", "ratio low ", 1), col.replace("ratio ", "ratio high ", 1)
    return (table[low], table[high]) if low in table.columns and high in table.columns else None


def ratio_text(r, low=None, high=None) -> str:
    """``0.89x`` or, with its range under the timing spread, ``0.891x [0.884–0.906]`` (three
    decimals where two would print the same low and high)."""
    if plots.num(r) is None:
        return ""
    if plots.num(low) is None or plots.num(high) is None:
        return f"{r:.2f}x"
    d = 2 if round(high, 2) - round(low, 2) >= 0.02 else 3
    return f"{r:.{d}f}x [{low:.{d}f}–{high:.{d}f}]"


def reference_spread(recordings: Sequence[str]) -> Optional[float]:
    """The median p10-p90 spread of repeated timings, relative to the median, of the base
    convolution's plans in ``recordings`` (what a single median of these GPUs may vary by)."""
    try:
        plans = frames("plans", recordings=list(recordings))
    except LabkitError:
        return None
    ok = plots.ok_rows(plans)
    return float(((ok["gpu_us_p90"] - ok["gpu_us_p10"]) / ok["gpu_us"]).median()) if len(ok) else None


def summary(table, other: Optional[str] = None) -> Text:
    """One paragraph from a `ratios` table: the median ratio, the largest gain and the largest loss
    of ``other`` against the baseline, and the noise they are read against: the ratio ranges of a
    table with a timing spread, or the spread of repeated timings of the base convolution's plans
    on these GPUs (Markdown; every number from the data)."""
    if not table.attrs.get("others") and other is None:
        skipped = table.attrs.get("skipped", {})
        return Text(
            f"Only {table.attrs.get('gpu')} has this {table.attrs.get('experiment')} call; nothing to compare"
            + (" (" + "; ".join(f"{k}: not recorded there" for k in skipped) + ")." if skipped else ".")
        )
    col = ratio_column(table, other)
    base, oth = table.attrs["baseline"], col.split(" ", 1)[1].split("/")[0]
    prov = table.attrs.get("provenance", {})
    gpu = lambda n: (prov.get(n) or {}).get("gpu") or n  # noqa: E731
    ok = table[table[col].notna()]
    if ok.empty:
        return Text(
            f"No row of {table.attrs.get('experiment')} was measured on both {gpu(base)} and {gpu(oth)}."
        )
    best, worst = ok.loc[ok[col].idxmin()], ok.loc[ok[col].idxmax()]
    value = table.attrs["value"]
    fmt = plots.fmt_us if value.endswith("_us") else (lambda v: f"{v:.3g}")
    rng = ratio_range(ok, col)

    def said(row):
        extra = ratio_text(row[col], *(r.loc[row.name] for r in rng)) if rng else f"{row[col]:.2f}x"
        return f"{row['label']}, {fmt(row[f'{value} {base}'])} -> {fmt(row[f'{value} {oth}'])} ({extra})"

    text = (
        f"{table.attrs.get('experiment')}, {len(ok)} rows measured on both: {gpu(oth)} takes a median "
        f"{ok[col].median():.2f}x the time of {gpu(base)} ({value}). Largest gain: {said(best)}; "
        f"largest loss: {said(worst)}."
    )
    if rng:
        low, high = rng
        apart = ok[(high < 1) | (low > 1)]
        text += (
            f" In brackets, the ratio's range under each GPU's p10-p90 spread of repeated timings: "
            f"{len(apart)} of {len(ok)} rows differ beyond it"
            + (f" ({', '.join(apart['label'])})." if 0 < len(apart) <= 6 else ".")
        )
    else:
        spread = reference_spread(table.attrs.get("recordings") or [base, oth])
        if spread is not None:
            text += (
                f" No spread was recorded for {table.attrs.get('experiment')} (one median per row); the base "
                f"convolution's plans, timed repeatedly on these GPUs, vary by a median {spread:.1%} between "
                "p10 and p90: read a ratio within a few percent of 1 as no difference."
            )
    return Text(text)


# ---- one chart, several GPUs -----------------------------------------------------------------
def _trace_name(df, rec: str) -> str:
    p = df.attrs.get("provenance", {}).get(rec, {})
    quick = "" if p.get("complete", True) else ", quick recording"
    return f"{p.get('gpu', rec)} ({p.get('date')}{quick})"


def short_gpu(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` as ``H100`` (the model, for tick labels)."""
    words = [w for w in str(name).split() if w.upper() not in ("NVIDIA", "TESLA")]
    return words[0] if words else str(name)


def _notes(df) -> str:
    notes = [
        f"{r}: not in this comparison (this call was not recorded there; df.attrs['skipped'] says more)"
        for r in df.attrs.get("skipped", {})
    ]
    quick = [r for r, p in df.attrs.get("provenance", {}).items() if p.get("complete") is False]
    if quick:
        notes.append(f"{', '.join(quick)}: a quick recording (the lessons' base calls only)")
    return " · ".join(notes)


def _detail(df, extra: str = "") -> str:
    spec = plots.request_spec(df)
    lab = f"{spec.dtype} {spec.layout} {spec.direction} {plots.shape_label(spec)}" if spec else ""
    return "; ".join(x for x in (lab, extra) if x)


def _fmt(value: str):
    return plots.fmt_us if value.endswith("_us") else (lambda v: f"{v:.3g}")


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
    """The GPUs of a `frames` DataFrame on the same axes, every trace of one recording in a
    ``legendgroup`` named after it: for the roofline each GPU's points, side by side, under its
    own roof (`labkit.ceilings`); for a sweep one line per GPU; for plans the fastest plans per
    GPU with their spread, beside their time ratio; otherwise bars per row (dots on a log axis
    where values span decades), each other GPU's labelled with its ratio to the first (and the
    ratio's range under the timing spread where the frame holds one)."""
    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    comp = comparable(name)
    value = value or comp.value
    if value not in df.columns:
        raise InvalidSpec("value", value, f"must be a column of the {name} frame")
    if name == "roofline":
        return _roofline(df)
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


def _bars(df, table, comp):
    """Grouped bars (a linear axis from zero), or dots on a log axis where the values span decades."""
    name, value = df.attrs["experiment"], table.attrs["value"]
    fmt = _fmt(value)
    recs = df.attrs["recordings"]
    allv = [plots.num(v) for rec in recs for v in table[f"{value} {rec}"]]
    kind = plots.log_if_wide(allv)
    fig = plots.new_figure()
    n = len(table)
    for i, rec in enumerate(recs):
        vals = [plots.num(v) for v in table[f"{value} {rec}"]]
        text = [
            (fmt(v) + (f" · {r}" if r else "")) if v is not None else "not measured"
            for v, r in zip(vals, _ratio_texts(table, rec))
        ]
        err = _spread_of(df, rec, table, value)
        style = dict(name=_trace_name(df, rec), legendgroup=rec, marker_color=GPU_COLORS[i % len(GPU_COLORS)])
        error = (
            dict(
                error_x=dict(
                    type="data", symmetric=False, arrayminus=err[0], array=err[1], thickness=1.2, width=3
                )
            )
            if err
            else {}
        )
        if kind == "linear":
            fig.add_trace(
                go.Bar(
                    y=list(table["label"]),
                    x=vals,
                    orientation="h",
                    text=text,
                    textposition="outside",
                    cliponaxis=False,
                    hovertemplate="%{y}: %{text}<extra>%{fullData.name}</extra>",
                    **style,
                    **error,
                )
            )
        else:  # dots, each GPU a little above or below its row's line
            y = [k + 0.22 * (i - (len(recs) - 1) / 2) for k in range(n)]
            fig.add_trace(
                go.Scatter(
                    y=y,
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
                    **error,
                )
            )
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
        fig.update_xaxes(
            title_text=title + ", log", type="log", **plots.log_axis(allv + [top * 4], max_ticks=6)
        )
    extra = (
        f"workload '{df['workload'].iloc[0]}'" if name == "strategies" and "workload" in df.columns else ""
    )
    base_gpu = df.attrs["provenance"][table.attrs["baseline"]]["gpu"]
    extra = (extra + "; " if extra else "") + f"labels: time and ratio against {base_gpu}"
    note = _notes(df)
    if table.attrs.get("spread"):
        note = "whiskers and [ranges]: p10-p90 of repeated timings" + (" · " + note if note else "")
    return plots.finish(
        fig,
        df,
        f"Same call, {len(recs)} GPUs: {name}",
        _detail(df, extra),
        note=note,
        height=max(420, 160 + 26 * n * len(recs)),
    )


def _sweep(df, table, comp):
    """One line per GPU over the swept value (log-log), the ratio to the first GPU in the hover."""
    value = table.attrs["value"]
    fmt = _fmt(value)
    fig = plots.new_figure()
    for i, rec in enumerate(df.attrs["recordings"]):
        vals = [plots.num(v) for v in table[f"{value} {rec}"]]
        text = [
            (fmt(v) + (f" ({r})" if r else "")) if v is not None else "not measured"
            for v, r in zip(vals, _ratio_texts(table, rec))
        ]
        fig.add_trace(
            go.Scatter(
                x=list(table["value"]),
                y=vals,
                mode="lines+markers",
                text=text,
                name=_trace_name(df, rec),
                legendgroup=rec,
                marker_color=GPU_COLORS[i % len(GPU_COLORS)],
                hovertemplate=f"{df['field'].iloc[0]}=%{{x}}: %{{text}}<extra>%{{fullData.name}}</extra>",
            )
        )
    vals = [plots.num(v) for c in table.columns if c.startswith(f"{value} ") for v in table[c]]
    fig.update_xaxes(
        title_text=workspace_basics.SWEEP_AXIS.get(str(table.attrs.get("request", {}).get("field")), "value"),
        type="log",
        tickvals=list(table["value"]),
    )
    title = comp.axis if value == comp.value else value
    fig.update_yaxes(title_text=title + ", log", type="log", **plots.log_axis(vals))
    field = df["field"].iloc[0] if "field" in df.columns else "value"
    return plots.finish(
        fig,
        df,
        f"Same call, {len(df.attrs['recordings'])} GPUs: sweep",
        _detail(df, f"sweep of {field}, heuristic plan; hover a point for its ratio to the first GPU"),
        note=_notes(df),
        height=480,
    )


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


def _plans(df, table, comp):
    """The `PLANS_SHOWN` plans fastest on the first GPU, one row each: every GPU's median with its
    p10-p90 whiskers (each GPU a little above or below the row), and the time ratio with its
    range under those spreads; a tick says which plan is the heuristic's pick and which the
    fastest on each GPU."""
    value = table.attrs["value"]
    recs, base = df.attrs["recordings"], table.attrs["baseline"]
    shown = table.sort_values(f"{value} {base}", na_position="last").head(PLANS_SHOWN)
    shown.attrs = table.attrs
    n = len(shown)
    fig = plots.new_figure(**PLANS_GRID)
    flags = {}
    for rec in recs:
        mine = df[df["recording"] == rec].set_index("plan_name")
        for col, tag in (("best", f"fastest on {short_gpu(df.attrs['provenance'][rec]['gpu'])}"),):
            for p in mine.index[mine[col].astype(bool)] if col in mine.columns else []:
                flags.setdefault(p, []).append(tag)
    if "heuristic_pick" in df.columns:
        for p in dict.fromkeys(df.loc[df["heuristic_pick"].astype(bool), "plan_name"]):
            flags.setdefault(p, []).insert(0, "heuristic's pick")
    ticks = [p + (f"<br>({', '.join(flags[p])})" if p in flags else "") for p in shown["plan_name"]]
    fmt = _fmt(value)
    for i, rec in enumerate(recs):
        vals = [plots.num(v) for v in shown[f"{value} {rec}"]]
        err = _spread_of(df, rec, shown, value)
        fig.add_trace(
            go.Scatter(
                x=vals,
                y=[k + 0.2 * (i - (len(recs) - 1) / 2) for k in range(n)],
                mode="markers",
                name=_trace_name(df, rec),
                legendgroup=rec,
                marker=dict(
                    size=9, color=GPU_COLORS[i % len(GPU_COLORS)], symbol=("circle", "diamond")[i % 2]
                ),
                customdata=[
                    [p, fmt(v) if v is not None else "not measured"] for p, v in zip(shown["plan_name"], vals)
                ],
                hovertemplate="%{customdata[0]}: %{customdata[1]}<extra>%{fullData.name}</extra>",
                **(
                    dict(
                        error_x=dict(
                            type="data",
                            symmetric=False,
                            arrayminus=err[0],
                            array=err[1],
                            thickness=1.2,
                            width=3,
                        )
                    )
                    if err
                    else {}
                ),
            ),
            row=1,
            col=1,
        )
    for i, rec in enumerate(recs[1:], 1):
        col = f"ratio {rec}/{base}"
        r = [plots.num(v) for v in shown[col]]
        rng = ratio_range(shown, col)
        err = (
            dict(
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=[
                        h - v if v is not None and plots.num(h) is not None else None
                        for v, h in zip(r, rng[1])
                    ],
                    arrayminus=[
                        v - lo if v is not None and plots.num(lo) is not None else None
                        for v, lo in zip(r, rng[0])
                    ],
                    thickness=1.2,
                    width=3,
                )
            )
            if rng
            else {}
        )
        fig.add_trace(
            go.Scatter(
                x=r,
                y=list(range(n)),
                mode="markers",
                name=f"ratio {short_gpu(df.attrs['provenance'][rec]['gpu'])} / "
                f"{short_gpu(df.attrs['provenance'][base]['gpu'])}",
                legendgroup=rec,
                showlegend=False,
                marker=dict(
                    size=8, color=GPU_COLORS[i % len(GPU_COLORS)], symbol="line-ns-open", line_width=2
                ),
                customdata=[
                    ratio_text(v, *(x.iloc[k] for x in rng)) if rng else ratio_text(v)
                    for k, v in enumerate(r)
                ],
                hovertemplate="%{customdata}<extra></extra>",
                **err,
            ),
            row=1,
            col=2,
        )
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
        tickfont=dict(size=9),
        row=1,
        col=1,
    )
    more = len(table) - n
    detail = f"the {n} plans fastest on {short_gpu(df.attrs['provenance'][base]['gpu'])}" + (
        f" of {len(table)} cuDNN offers (compare.ratios(df) has all)" if more > 0 else ""
    )
    return plots.finish(
        fig,
        df,
        f"Same call, {len(recs)} GPUs: plans",
        _detail(df, detail),
        note=_notes(df),
        height=230 + 40 * n,
    )


#: the line at ratio 1 (no difference)
COLOR_EQUAL = "#5f6368"
#: a roofline's points of one shape on several GPUs are drawn side by side, this far apart (decades)
ROOF_OFFSET_DECADES = 0.03
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


def _roofline(df):
    """Each GPU's measured shapes (intensity vs TFLOP/s) and its roof from `labkit.ceilings`
    (a GPU the table lacks gets points only, and the note says so). The GPUs' points of one shape
    sit side by side at its intensity (the first hollow), joined by a thin line; one label per
    shape, or per group of shapes whose points coincide."""
    fig = plots.new_figure()
    dtype = str(df["dtype"].iloc[0])
    recs = df.attrs["recordings"]
    xs, ys, missing = [], [], []
    points: dict = {}
    for i, rec in enumerate(recs):
        sub = plots.ok_rows(df[df["recording"] == rec])
        for s, x, y in zip(sub["shape"], sub["intensity_flops_per_byte"], sub["tflops"]):
            if plots.num(x) and plots.num(y):
                points.setdefault(s, [float(x), [None] * len(recs)])[1][i] = float(y)
    for i, rec in enumerate(recs):
        sub = plots.ok_rows(df[df["recording"] == rec])
        color = GPU_COLORS[i % len(GPU_COLORS)]
        gpu = df.attrs["provenance"][rec]["gpu"]
        shift = 10 ** (ROOF_OFFSET_DECADES * (2 * i - (len(recs) - 1)))
        x = [plots.num(v) for v in sub["intensity_flops_per_byte"]]
        y = [plots.num(v) for v in sub["tflops"]]
        xs += [v for v in x if v]
        ys += [v for v in y if v]
        fig.add_trace(
            go.Scatter(
                x=[v * shift if v else None for v in x],
                y=y,
                mode="markers",
                name=_trace_name(df, rec),
                legendgroup=rec,
                marker=dict(
                    size=10,
                    color="white" if i == 0 else color,
                    symbol=("circle", "diamond")[i % 2],
                    line=dict(color=color, width=2),
                ),
                text=list(sub["shape"]),
                customdata=[[plots.num(v), plots.num(a)] for v, a in zip(sub["gpu_us"], x)],
                hovertemplate="%{text}: %{customdata[1]:.0f} FLOP/B, %{y:.0f} TFLOP/s, "
                "%{customdata[0]:.1f} us<extra>%{fullData.name}</extra>",
            )
        )
        c = ceilings.for_gpu(gpu)
        peak = c.peak_tflops(dtype) if c else None
        if peak:
            ridge = c.ridge_intensity(dtype)
            rx = sorted([min(xs + [ridge]) / 3, ridge, max(xs + [ridge]) * 3])
            ry = [min(peak, v * c.bandwidth_bytes_per_s / 1e12) for v in rx]
            ys.append(peak)
            fig.add_trace(
                go.Scatter(
                    x=rx,
                    y=ry,
                    mode="lines",
                    legendgroup=rec,
                    line=dict(color=color, width=2),
                    name=f"roof {c.gpu}: {peak:.0f} TFLOP/s {dtype}, "
                    f"{c.bandwidth_bytes_per_s / 1e9:.0f} GB/s",
                    hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
                )
            )
        else:
            missing.append(gpu)
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
    fig.update_layout(annotations=labels)
    lo, hi = min(xs) / 3, max(xs) * 3
    for t in fig.data:
        if t.mode == "lines":
            lo, hi = min(lo, min(t.x)), max(hi, max(t.x))
    fig.update_xaxes(
        title_text="arithmetic intensity (FLOP/byte, log)",
        type="log",
        range=[math.log10(lo), math.log10(hi)],
        **plots.log_ticks([lo, hi]),
    )
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **plots.log_axis(ys))
    note = (
        "roofs: datasheet peaks (dense) from labkit.ceilings; the bandwidth roof moves, the compute roof "
        "does not · each shape's points sit side by side at its intensity"
    )
    if missing:
        note += f" · no ceilings known for {', '.join(missing)}: points only"
    extra = _notes(df)
    return plots.finish(
        fig,
        df,
        f"Roofline on {len(recs)} GPUs: ResNet-50 convolutions, {dtype} {df['layout'].iloc[0]}",
        "heuristic plan per shape on each GPU",
        note=note + (" · " + extra if extra else ""),
        height=540,
        legend_rows=2,
    )
