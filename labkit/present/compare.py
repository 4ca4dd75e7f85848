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


def ratios(df, value: Optional[str] = None, baseline: str = recs.DEFAULT_RECORDING):
    """Per row label (e.g. dtype, shape, plan): each recording's ``value`` (default: the
    experiment's time column) and ``ratio <other>/<baseline>`` for every other recording
    (below 1: the other GPU takes less time). A row that did not run (status not ok) or that a
    recording lacks has no value, and its ratio is empty (NaN), never guessed."""
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
    vals = df[value].where(df["status"] == "ok") if "status" in df.columns else df[value]
    wide = df.assign(_v=vals).pivot(index=labels, columns="recording", values="_v")
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
    wide = wide.reindex(
        pd.MultiIndex.from_tuples(order, names=labels) if len(labels) > 1 else [o[0] for o in order]
    )
    others = [n for n in names if n != baseline]
    out = pd.DataFrame(index=wide.index)
    for n in [baseline] + others:
        out[f"{value} {n}"] = wide[n]
    for n in others:
        out[f"ratio {n}/{baseline}"] = wide[n] / wide[baseline]
    out = out.reset_index()
    out.insert(len(labels), "label", [_label_text(r, labels) for _, r in out.iterrows()])
    out.attrs = dict(df.attrs, value=value, baseline=baseline, others=others)
    return out


def ratio_column(table, other: Optional[str] = None) -> str:
    """The ratio column of a `ratios` table (the first other recording's unless ``other``)."""
    others = table.attrs.get("others") or []
    other = other or (others[0] if others else None)
    if other not in others:
        raise InvalidSpec("other", other, f"must be one of {', '.join(others) or 'no other recording'}")
    return f"ratio {other}/{table.attrs['baseline']}"


def summary(table, other: Optional[str] = None) -> Text:
    """One paragraph from a `ratios` table: the median ratio, the largest gain and the largest loss
    of ``other`` against the baseline (Markdown; every number from the table)."""
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
    return Text(
        f"{table.attrs.get('experiment')}, {len(ok)} rows measured on both: {gpu(oth)} takes a median "
        f"{ok[col].median():.2f}x the time of {gpu(base)} ({value}). Largest gain: {best['label']}, "
        f"{fmt(best[f'{value} {base}'])} -> {fmt(best[f'{value} {oth}'])} ({best[col]:.2f}x); "
        f"largest loss: {worst['label']}, {fmt(worst[f'{value} {base}'])} -> {fmt(worst[f'{value} {oth}'])} "
        f"({worst[col]:.2f}x)."
    )


# ---- one chart, several GPUs -----------------------------------------------------------------
def _trace_name(df, rec: str) -> str:
    p = df.attrs.get("provenance", {}).get(rec, {})
    quick = "" if p.get("complete", True) else ", quick recording"
    return f"{p.get('gpu', rec)} ({p.get('date')}{quick})"


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


def figure(df, value: Optional[str] = None):
    """The GPUs of a `frames` DataFrame on the same axes: grouped bars (one trace per GPU, the
    other GPUs' bars labelled with their ratio to the first), sweep lines, plans as points, and
    for the roofline each GPU's points with its own roof (`labkit.ceilings`). Every trace of one
    recording shares a ``legendgroup`` named after it."""
    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    comp = comparable(name)
    value = value or comp.value
    if value not in df.columns:
        raise InvalidSpec("value", value, f"must be a column of the {name} frame")
    if name == "roofline":
        return _roofline(df)
    fig = plots.new_figure()
    table = ratios(df, value, df.attrs["recordings"][0])
    base = table.attrs["baseline"]
    for i, rec in enumerate(df.attrs["recordings"]):
        vals = [plots.num(v) for v in table[f"{value} {rec}"]]
        rat = table[f"ratio {rec}/{base}"] if rec != base else [None] * len(table)
        text = [
            (plots.fmt_us(v) if value.endswith("_us") else f"{v:.3g}")
            + (f" ({r:.2f}x)" if plots.num(r) else "")
            if v is not None
            else ""
            for v, r in zip(vals, rat)
        ]
        style = dict(name=_trace_name(df, rec), legendgroup=rec, marker_color=GPU_COLORS[i % len(GPU_COLORS)])
        if name == "sweep":
            fig.add_trace(
                go.Scatter(
                    x=list(table["value"]),
                    y=vals,
                    mode="lines+markers",
                    text=text,
                    hovertemplate=f"{df['field'].iloc[0]}=%{{x}}: %{{text}}<extra>%{{fullData.name}}</extra>",
                    **style,
                )
            )
        elif name == "plans":
            ws = df[df["recording"] == rec].set_index("plan_name")["workspace_bytes"]
            fig.add_trace(
                go.Scatter(
                    x=[
                        plots.num(ws.get(p)) / plots.MIB if plots.num(ws.get(p)) is not None else None
                        for p in table["plan_name"]
                    ],
                    y=vals,
                    mode="markers",
                    text=text,
                    customdata=list(table["plan_name"]),
                    marker=dict(size=9, opacity=0.75),
                    hovertemplate="%{customdata}: %{text}<extra>%{fullData.name}</extra>",
                    **style,
                )
            )
        else:
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
                )
            )
    _axes(fig, name, comp, value, table)
    extra = {
        "plans": "every plan cuDNN offers, autotuned on each GPU",
        "sweep": f"sweep of {df['field'].iloc[0]}, heuristic plan" if "field" in df.columns else "",
        "strategies": f"workload '{df['workload'].iloc[0]}'" if "workload" in df.columns else "",
    }.get(name, "")
    extra = (extra + "; " if extra else "") + f"ratios against {df.attrs['provenance'][base]['gpu']}"
    return plots.finish(
        fig,
        df,
        f"Same call, {len(df.attrs['recordings'])} GPUs: {name}",
        _detail(df, extra),
        note=_notes(df),
        height=max(420, 160 + 26 * len(table) * len(df.attrs["recordings"]))
        if name not in ("sweep", "plans")
        else 480,
    )


def _axes(fig, name, comp, value, table) -> None:
    vals = [plots.num(v) for c in table.columns if c.startswith(f"{value} ") for v in table[c]]
    title = comp.axis if value == comp.value else value
    if name == "sweep":
        fig.update_xaxes(
            title_text=workspace_basics.SWEEP_AXIS.get(
                str(table.attrs.get("request", {}).get("field")), "value"
            ),
            type="log",
            tickvals=list(table["value"]),
        )
        fig.update_yaxes(title_text=title + ", log", type="log", **plots.log_axis(vals))
    elif name == "plans":
        fig.update_xaxes(title_text="workspace the plan needs (MiB)")
        fig.update_yaxes(title_text=title + ", log", type="log", **plots.log_axis(vals))
    else:
        fig.update_layout(barmode="group")
        fig.update_yaxes(autorange="reversed")
        kind = plots.log_if_wide(vals)
        top = max([v for v in vals if v is not None] or [1.0])
        fig.update_xaxes(
            title_text=title + (", log" if kind == "log" else ""),
            type=kind,  # room for the labels
            **(plots.log_axis(vals, max_ticks=6) if kind == "log" else dict(range=[0, top * 1.3])),
        )


def _roofline(df):
    """Each GPU's measured shapes (intensity vs TFLOP/s) and its roof from `labkit.ceilings`
    (a GPU the table lacks gets points only, and the note says so)."""
    fig = plots.new_figure()
    dtype = str(df["dtype"].iloc[0])
    xs, ys, missing = [], [], []
    for i, rec in enumerate(df.attrs["recordings"]):
        sub = plots.ok_rows(df[df["recording"] == rec])
        color = GPU_COLORS[i % len(GPU_COLORS)]
        gpu = df.attrs["provenance"][rec]["gpu"]
        x = [plots.num(v) for v in sub["intensity_flops_per_byte"]]
        y = [plots.num(v) for v in sub["tflops"]]
        xs += [v for v in x if v]
        ys += [v for v in y if v]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers+text" if i == 0 else "markers",
                text=list(sub["shape"]),
                textposition="top center",
                textfont=dict(size=10),
                name=_trace_name(df, rec),
                legendgroup=rec,
                marker=dict(size=11, color=color, symbol=("circle", "diamond")[i % 2]),
                customdata=[plots.num(v) for v in sub["gpu_us"]],
                hovertemplate="%{text}: %{x:.0f} FLOP/B, %{y:.0f} TFLOP/s, %{customdata:.1f} us"
                "<extra>%{fullData.name}</extra>",
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
                    name=f"roof {c.gpu}: {peak:.0f} TFLOP/s {dtype}, {c.bandwidth_bytes_per_s / 1e9:.0f} GB/s",
                    hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
                )
            )
        else:
            missing.append(gpu)
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
    note = "roofs: datasheet peaks (dense) from labkit.ceilings; the bandwidth roof moves, the compute roof does not"
    if missing:
        note += f" · no ceilings known for {', '.join(missing)}: points only"
    extra = _notes(df)
    return plots.finish(
        fig,
        df,
        f"Roofline on {len(df.attrs['recordings'])} GPUs: ResNet-50 convolutions, {dtype} "
        f"{df['layout'].iloc[0]}",
        "heuristic plan per shape on each GPU",
        note=note + (" · " + extra if extra else ""),
        height=520,
        legend_rows=2,
    )
