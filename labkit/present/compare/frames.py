"""Experiment calls answered from several recordings, side by side: the frames (`frames`), each
GPU's value and the ratio per row (`ratios`, with its range under the spread of repeated timings
where the recording holds one), and the paragraph that says it (`summary`). Always recorded
numbers; a row appears only where that GPU measured exactly that call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import pandas as pd

from ... import ceilings, experiments
from ...draw import plots
from ...draw.units import us_text
from ...env import gpu_label
from ...errors import InvalidSpec, LabkitError, RecordedDataError
from ...experiments import plans_autotune
from ...store import recordings as recs


@dataclass(frozen=True)
class Comparable:
    """How one experiment compares across GPUs.

    Attributes:
        labels: the columns that name a row.
        value: the column compared by default.
        axis: that value's axis title.
    """

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
    """A string shown as Markdown in a notebook (as `labkit.session.lessons.Text`, which this
    layer cannot import)."""

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
    """How an experiment compares across GPUs.

    Args:
        name: the experiment.

    Returns:
        Its `Comparable`; `InvalidSpec` naming the rule for an experiment that is not compared.
    """
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
    """An experiment's call answered by each recording, as one DataFrame.

    ``attrs``: ``experiment``, ``request``, ``recordings`` (names used, in order), ``provenance``
    (recording -> GPU, cuDNN, frontend, date, complete, source), ``skipped`` (recording -> why it is
    not in the frame) and a combined mode/gpu/cudnn/date that `labkit.draw.plots` titles read.

    Args:
        name: the experiment.
        recordings: the shipped recordings' names; None for every shipped one.
        **kwargs: its arguments, as you would call ``labkit.experiments.<name>``.

    Returns:
        The rows, columns ``recording`` and ``gpu`` first; `RecordedDataError` when no recording has
        the call (the reasons listed).
    """
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
        reasons = "; ".join(f"{k}: {v}" for k, v in skipped.items())
        raise RecordedDataError(f"{name}: no recording has this call: {reasons}", recs.data_dir())
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
    experiment was measured (the date its charts' legends and subtitles give); a recording holds
    more experiments than these.

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
        dates = "; ".join(f"{d} (compared here: {', '.join(es)})" for d, es in sorted(by_date.items()))
        kind = (
            ""
            if m.get("complete")
            else ", a quick recording (`record --quick`: the lessons' base calls only)"
        )
        lines.append(
            f"* `{r.name}`: {gpu_label(m.get('gpu'))} (compute capability {m.get('compute_capability')}), "
            "cuDNN "
            f"{m.get('cudnn_backend')} (frontend {m.get('cudnn_frontend')}), measured {dates}{kind}"
        )
    return Text("\n".join(lines))


def ceilings_table(recordings: Optional[Sequence] = None, dtype: str = "fp16"):
    """Each compared GPU on paper (`labkit.ceilings`, vendor datasheets).

    Args:
        recordings: the shipped recordings' names; None for every shipped one.
        dtype: the dtype whose peak is shown.

    Returns:
        One row per recording: peak dense TFLOP/s for ``dtype``, memory bandwidth (GB/s) and the ridge
        (FLOP/B where the two roofs meet); empty for a GPU the table does not know.
    """
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
def _label_text(row, labels, *, field: Optional[str] = None) -> str:
    """A row's name in a summary: its label columns' values, a sweep's value as ``N=64``.

    Args:
        row: a `ratios` row.
        labels: the columns that name a row.
        field: the dimension a sweep moves (its ``value`` column); None for other experiments.

    Returns:
        The values joined with `` · ``.
    """
    parts = []
    for c in labels:
        v = row[c]
        text = str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
        if c == "cap_bytes":
            text = plans_autotune.cap_label(v)
        elif c == "value" and field:
            text = f"{field}={text}"
        parts.append(text)
    return " · ".join(parts)


#: the fields of a convolution a comparison's rows can name (precision: one row per dtype)
SPEC_FIELDS = ("dtype", "layout", "direction")


def spec_line(df) -> str:
    """The convolution a comparison ran, as its charts' detail line says it.

    A field the rows vary (each dtype of the precision chart) is said as such, not as the base's value;
    so is a dimension a sweep moves (its letter in the shape, and that it varies).

    Args:
        df: a `frames` DataFrame.

    Returns:
        ``fp16 NHWC fprop 32x64x56x56 → 64 3x3 s1 p1``, ``NHWC fprop ... in each dtype``, or
        ``fp16 NHWC fprop Nx64x56x56 → 64 3x3 s1 p1 (N varies)``; empty when the request names no
        convolution.
    """
    spec = plots.request_spec(df)
    if not spec:
        return ""
    rows = comparable(df.attrs.get("experiment")).labels
    fixed = " ".join(str(getattr(spec, f)) for f in SPEC_FIELDS if f not in rows)
    varied = " and ".join(f for f in SPEC_FIELDS if f in rows)
    each = f" in each {varied}" if varied else ""
    swept = str((df.attrs.get("request") or {}).get("field") or "")
    moves = f" ({swept.replace('=', ' = ')} varies)" if swept else ""
    return f"{fixed} {_shape_text(spec, swept)}{each}{moves}"


#: a convolution's dimensions, as `plots.shape_label` writes them (``NxCxHxW → K RxS ...``)
SHAPE_LETTERS = ("N", "C", "H", "W", "K", "R", "S")


def _shape_text(spec, swept: str) -> str:
    """``plots.shape_label(spec)`` with each dimension of ``swept`` (``"N"``, ``"C=K"``) written as its
    letter: a sweep's base value is not the value of every point (``Nx64x56x56 → 64 3x3 s1 p1``)."""
    label = plots.shape_label(spec)
    moved = set(swept.split("=")) & set(SHAPE_LETTERS)
    if not moved:
        return label
    d = {f: f if f in moved else getattr(spec, f) for f in SHAPE_LETTERS}
    rest = label.split(" ", 4)[4]  # stride, padding, dilation, groups
    return f"{d['N']}x{d['C']}x{d['H']}x{d['W']} → {d['K']} {d['R']}x{d['S']} {rest}"


def spread_columns(df, value: str) -> Optional[Tuple[str, str]]:
    """The p10 and p90 columns of a value (repeated timings of each row).

    Args:
        df: a `frames` DataFrame.
        value: the column.

    Returns:
        (p10 column, p90 column); None when the frame lacks them.
    """
    lo, hi = f"{value}_p10", f"{value}_p90"
    return (lo, hi) if lo in df.columns and hi in df.columns else None


def ratios(df, value: Optional[str] = None, baseline: str = recs.DEFAULT_RECORDING):
    """Each recording's value per row label, and its ratio to the baseline's.

    A row that did not run (status not ok) or that a recording lacks has no value, and its ratio is
    empty (NaN), never guessed. Where the frame holds the spread of repeated timings (``<value>_p10``
    and ``<value>_p90``: plans, precision), ``ratio low`` and ``ratio high`` give the ratio's range
    under that spread (the other GPU's p10 over the baseline's p90, and its p90 over the baseline's
    p10): a range that holds 1 is no measured difference.

    Args:
        df: a `frames` DataFrame.
        value: the column compared; default the experiment's time column.
        baseline: the recording the others are divided by.

    Returns:
        One row per label (e.g. dtype, shape, plan): each recording's ``value`` and ``ratio
        <other>/<baseline>`` for every other recording (below 1: the other GPU takes less time).
    """
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
    field = str(df["field"].iloc[0]) if labels == ["value"] and "field" in df.columns else None
    out.insert(len(labels), "label", [_label_text(r, labels, field=field) for _, r in out.iterrows()])
    out.attrs = dict(df.attrs, value=value, baseline=baseline, others=others, spread=bool(spread))
    return out


def ratio_column(table, other: Optional[str] = None) -> str:
    """The ratio column of a `ratios` table.

    Args:
        table: `ratios`' result.
        other: the recording compared; default the first other one.

    Returns:
        The column's name; `InvalidSpec` for a recording the table does not compare.
    """
    others = table.attrs.get("others") or []
    other = other or (others[0] if others else None)
    if other not in others:
        raise InvalidSpec("other", other, f"must be one of {', '.join(others) or 'no other recording'}")
    return f"ratio {other}/{table.attrs['baseline']}"


def ratio_range(table, col: str):
    """The range columns of one ratio column.

    Args:
        table: `ratios`' result.
        col: a ratio column (`ratio_column`).

    Returns:
        (``ratio low ...``, ``ratio high ...``) columns; None without a spread.
    """
    low, high = col.replace("ratio ", "ratio low ", 1), col.replace("ratio ", "ratio high ", 1)
    return (table[low], table[high]) if low in table.columns and high in table.columns else None


def ratio_text(r, low=None, high=None) -> str:
    """A ratio for a label: ``0.89x``, or with its range under the timing spread ``0.891x [0.884–0.906]``.

    Three decimals are used where two would print the same low and high.

    Args:
        r: the ratio.
        low: its lower end; None without a spread.
        high: its upper end.

    Returns:
        The text; empty for a missing ratio.
    """
    if plots.num(r) is None:
        return ""
    if plots.num(low) is None or plots.num(high) is None:
        return f"{r:.2f}x"
    d = 2 if round(high, 2) - round(low, 2) >= 0.02 else 3
    return f"{r:.{d}f}x [{low:.{d}f}–{high:.{d}f}]"


def reference_spread(recordings: Sequence[str]) -> Optional[float]:
    """What a single median of these GPUs may vary by.

    It is the median p10-p90 spread of repeated timings, relative to the median, of the base
    convolution's plans in the recordings.

    Args:
        recordings: the recordings' names.

    Returns:
        The spread as a fraction; None when the plans are not at hand.
    """
    try:
        plans = frames("plans", recordings=list(recordings))
    except LabkitError:
        return None
    ok = plots.ok_rows(plans)
    return float(((ok["gpu_us_p90"] - ok["gpu_us_p10"]) / ok["gpu_us"]).median()) if len(ok) else None


#: a summary's two ends: word, the way a row moved, and which end of the ratios it is
_ENDS = {"gain": ("faster", "lowest"), "loss": ("slower", "highest")}


def _extreme_clause(said: str, *, side: str, ratio: bool, beyond: bool, gpu: str, past: str = "") -> str:
    """The clause naming a table's largest gain or loss, read against the timing spread.

    A row whose ratio range (under both GPUs' p10-p90 spreads) holds 1 is no measured change, so it
    is not called a gain or a loss; the largest one beyond its spread is, where another row has one.

    Args:
        said: the row with the lowest (gain) or highest (loss) ratio, as the summary quotes it.
        side: ``"gain"`` or ``"loss"``.
        ratio: whether its ratio lies on that side of 1.
        beyond: whether its range lies there too (True for a table without a spread).
        gpu: the other GPU's name.
        past: the row with the lowest (gain) or highest (loss) ratio among those whose range lies on
            that side of 1, as the summary quotes it; empty when there is none.

    Returns:
        The clause, lower-case first.
    """
    way, end = _ENDS[side]
    if ratio and beyond:
        return f"largest {side}: {said}"
    if ratio and past:
        return (
            f"largest {side} beyond its spread: {past}, while the {end} ratio, {said}, holds 1 in its range"
        )
    if ratio:
        return f"no row is {way} on {gpu} beyond its spread: the {end} ratio, {said}, holds 1 in its range"
    return f"no row is {way} on {gpu}"


def _extremes(ok, col: str, rng) -> dict:
    """The rows a summary's two clauses read, for each side (``"gain"``, ``"loss"``).

    Args:
        ok: the `ratios` rows with a ratio in ``col``.
        col: the ratio column.
        rng: `ratio_range`'s (low, high) for ``ok``; None without a spread.

    Returns:
        side -> (the row with the extreme ratio, the extreme row beyond its spread or None, whether
        the extreme ratio lies on that side of 1, whether its range does too).
    """
    low, high = rng if rng else (None, None)
    gains, losses = (ok, ok) if rng is None else (ok[high < 1], ok[low > 1])
    best, worst = ok.loc[ok[col].idxmin()], ok.loc[ok[col].idxmax()]
    return {
        "gain": (
            best,
            gains.loc[gains[col].idxmin()] if len(gains) else None,
            best[col] < 1,
            rng is None or high.loc[best.name] < 1,
        ),
        "loss": (
            worst,
            losses.loc[losses[col].idxmax()] if len(losses) else None,
            worst[col] > 1,
            rng is None or low.loc[worst.name] > 1,
        ),
    }


def _quoted(row, past, ratio: bool, beyond: bool) -> list:
    """The rows `_extreme_clause` quotes with their values, in its order."""
    if ratio and beyond:
        return [row]
    if ratio and past is not None:
        return [past, row]
    return [row] if ratio else []


def quoted_labels(table, other: Optional[str] = None) -> list:
    """The labels of the rows `summary` quotes with their values (the largest gain and loss), for a
    chart to write those values beside their points.

    Args:
        table: `ratios`' result.
        other: the recording compared; default the first other one.

    Returns:
        The ``label`` of each quoted row, once each; empty when nothing is compared.
    """
    if not table.attrs.get("others") and other is None:
        return []
    col = ratio_column(table, other)
    ok = table[table[col].notna()]
    if ok.empty:
        return []
    quoted = [r for side in _extremes(ok, col, ratio_range(ok, col)).values() for r in _quoted(*side)]
    return list(dict.fromkeys(r["label"] for r in quoted))


def summary(table, other: Optional[str] = None) -> Text:
    """One paragraph from a `ratios` table: the median ratio, the largest gain and the largest loss.

    The numbers are read against the noise: the ratio ranges of a table with a timing spread, or the
    spread of repeated timings of the base convolution's plans on these GPUs. Every number comes from
    the data.

    Args:
        table: `ratios`' result.
        other: the recording compared; default the first other one.

    Returns:
        Markdown, as a `Text`.
    """
    if not table.attrs.get("others") and other is None:
        skipped = table.attrs.get("skipped", {})
        absent = "; ".join(f"{k}: not recorded there" for k in skipped)
        where = f" ({absent})" if skipped else ""
        return Text(
            f"Only {table.attrs.get('gpu')} has this {table.attrs.get('experiment')} call; nothing to "
            f"compare{where}."
        )
    col = ratio_column(table, other)
    base, oth = table.attrs["baseline"], col.split(" ", 1)[1].split("/")[0]
    prov = table.attrs.get("provenance", {})
    gpu = lambda n: gpu_label((prov.get(n) or {}).get("gpu") or n)  # noqa: E731  (as the charts name it)
    ok = table[table[col].notna()]
    if ok.empty:
        return Text(
            f"No row of {table.attrs.get('experiment')} was measured on both {gpu(base)} and {gpu(oth)}."
        )
    value = table.attrs["value"]
    fmt = us_text if value.endswith("_us") else (lambda v: f"{v:.3g}")  # as the chart's us axis writes it
    rng = ratio_range(ok, col)

    def said(row):
        extra = ratio_text(row[col], *(r.loc[row.name] for r in rng)) if rng else f"{row[col]:.2f}x"
        return f"{row['label']}, {fmt(row[f'{value} {base}'])} -> {fmt(row[f'{value} {oth}'])} ({extra})"

    low, high = rng if rng else (None, None)
    gain, loss = (
        _extreme_clause(
            said(row),
            side=side,
            ratio=ratio,
            beyond=beyond,
            gpu=gpu(oth),
            past=said(past) if past is not None else "",
        )
        for side, (row, past, ratio, beyond) in _extremes(ok, col, rng).items()
    )
    text = (
        f"{table.attrs.get('experiment')}, {len(ok)} rows measured on both: {gpu(oth)} takes a median "
        f"{ok[col].median():.2f}x the time of {gpu(base)} ({value}). {gain[0].upper()}{gain[1:]}; {loss}."
    )
    if rng:
        apart = ok[(high < 1) | (low > 1)]
        named = f" ({', '.join(apart['label'])})" if 0 < len(apart) <= 6 else ""
        text += (
            f" In brackets, the ratio's range under each GPU's p10-p90 spread of repeated timings: "
            f"{len(apart)} of {len(ok)} rows differ beyond it{named}."
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
