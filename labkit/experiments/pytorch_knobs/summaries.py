"""Lesson 11's sentences, each computed from `torch_knobs`' rows: what PyTorch's defaults run and
how that compares with labkit's plan, what ``cudnn.benchmark`` costs and buys, which knobs changed
nothing measurable, and the table of every setting."""

from __future__ import annotations

from typing import List, Optional

import pandas as pd

from ...draw.plots import num
from ...draw.prose import Text, listed, table, where
from ...draw.spreads import spreads_overlap
from ...draw.units import size_text, us_text
from ..core import MIB
from .charts import column, net_of, pytorch_rows
from .settings import PLAN_CACHE

DEFAULTS = "PyTorch's defaults"
BENCHMARK = "benchmark=True"
#: two peaks closer than this are the same peak (the caching allocator rounds to its blocks)
SAME_PEAK_BYTES = 1 * MIB


def row_of(df, setting: str):
    """One PyTorch setting's row, or None when it did not run.

    Args:
        df: `torch_knobs`' result.
        setting: the setting's name.

    Returns:
        The row (a Series) or None.
    """
    pt = pytorch_rows(df)
    pt = pt[pt.setting == setting]
    return None if pt.empty else pt.iloc[0]


def same_time(a, b) -> bool:
    """Whether two settings' times per call are alike: each median within the other's p10 to p90.

    Args:
        a: a row.
        b: another row.

    Returns:
        True when both medians fall in the other's range.
    """
    return bool(
        num(b.gpu_us_p10) <= num(a.gpu_us) <= num(b.gpu_us_p90)
        and num(a.gpu_us_p10) <= num(b.gpu_us) <= num(a.gpu_us_p90)
    )


def same_peaks(a, b) -> bool:
    """Whether two settings peaked alike, first call and steady calls (within `SAME_PEAK_BYTES`).

    Args:
        a: a row.
        b: another row.

    Returns:
        True when both peaks agree.
    """
    return all(
        abs(num(a[c]) - num(b[c])) < SAME_PEAK_BYTES for c in ("first_peak_bytes", "steady_peak_bytes")
    )


def unchanged(df) -> List[str]:
    """The settings that changed neither the time per call nor the peaks, against PyTorch's defaults.

    Args:
        df: `torch_knobs`' result.

    Returns:
        Their names, in the order measured.
    """
    base = row_of(df, DEFAULTS)
    if base is None:
        return []
    return [
        r.setting
        for _, r in pytorch_rows(df).iterrows()
        if r.setting != DEFAULTS and same_time(r, base) and same_peaks(r, base)
    ]


def ratio_text(a: float, b: float) -> str:
    """``a`` against ``b`` as a ratio: ``1.23x`` the time, or ``0.81x``.

    Args:
        a: a time.
        b: the time it is compared with.

    Returns:
        The ratio, two decimals.
    """
    r = a / b
    return f"{r:.3f}x" if abs(r - 1) < 0.005 else f"{r:.2f}x"


def _defaults_sentence(df, base) -> str:
    twin = f"labkit's counterpart, {base.labkit_row},"
    kernels = {True: "the same kernels", False: "other kernels"}.get(
        base.get("same_kernels"), "kernels not compared"
    )
    lab = (
        f" {twin} runs plan {base.labkit_plan} (workspace {size_text(base.labkit_workspace_bytes)}) in "
        f"{us_text(base.labkit_gpu_us)} by CUDA-graph replay: PyTorch's call takes "
        f"{ratio_text(base.gpu_us, base.labkit_gpu_us)} that, with {kernels}."
        if num(base.get("labkit_gpu_us")) is not None
        else ""
    )
    eager = (
        " Lesson 09's report gives this network another time: it adds up labkit's timings of the network's "
        "convolution layers alone, in the dtype and layout asked (fp16 NHWC there), while this is PyTorch's "
        "whole forward pass run eagerly: every layer, not only the convolutions, and the gaps between their "
        "launches."
        if net_of(df)
        else ""
    )
    return (
        f"{where(df)}, PyTorch {base.get('torch', '?')}: at its defaults cuDNN ran "
        f"{'its convolutions' if net_of(df) else 'the call'} as {base.runs_as}, "
        f"{us_text(base.gpu_us)} per call after warm-up, its first call {base.first_call_ms:,.1f} ms; it "
        f"peaked {size_text(base.steady_peak_bytes)} above the inputs in steady calls and "
        f"{size_text(base.first_peak_bytes)} in the first, the output alone {size_text(base.out_bytes)}.{lab}"
        f"{eager}"
    )


def _it(df) -> str:
    """What cuDNN ran: "it" (the convolution) or "its convolutions" (a network's)."""
    return "its convolutions" if net_of(df) else "it"


def spread_text(row) -> str:
    """A row's p10 to p90 time per call, in words.

    Args:
        row: a setting's row (``gpu_us_p10``, ``gpu_us_p90``: microseconds).

    Returns:
        e.g. ``4,292 us to 7,512 us``.
    """
    return f"{us_text(row.gpu_us_p10)} to {us_text(row.gpu_us_p90)}"


def _vs(row, base) -> str:
    """A setting's time per call against the defaults': within their spread, overlapping it (no
    ranking), or a ratio with both p10-p90 ranges."""
    if same_time(row, base):
        return f"within the defaults' spread of {us_text(base.gpu_us)}"
    if spreads_overlap(row, base):
        return (
            f"its p10-p90 ({spread_text(row)}) overlapping the defaults' ({spread_text(base)}, median "
            f"{us_text(base.gpu_us)}), so these runs do not rank the two"
        )
    return (
        f"{ratio_text(row.gpu_us, base.gpu_us)} the defaults' {us_text(base.gpu_us)} (p10-p90 "
        f"{spread_text(row)} against {spread_text(base)})"
    )


def _timed_twice(row, base) -> str:
    """A sentence for a counterpart whose plan is the defaults' counterpart's: why its time differs."""
    if row.labkit_row == base.labkit_row or row.get("labkit_plan") != base.get("labkit_plan"):
        return ""
    if num(row.get("labkit_gpu_us")) is None or num(base.get("labkit_gpu_us")) is None:
        return ""
    return (
        f" Its labkit counterpart ({row.labkit_row}) runs the same plan as the defaults' "
        f"({base.labkit_row}): {us_text(row.labkit_gpu_us)} and {us_text(base.labkit_gpu_us)} are one "
        "plan timed twice, in two runs."
    )


def _first_call_sentence(df, row, base) -> str:
    """A setting's first call against the defaults': one sample each, so set against the spread of the
    first calls of the settings that changed nothing measurable (`unchanged`), where there are some."""
    same = [row_of(df, s) for s in unchanged(df)]
    if not same:
        return (
            f"Its first call took {row.first_call_ms:,.1f} ms against the defaults' "
            f"{base.first_call_ms:,.1f} ms, one sample each: no other setting here matched the defaults' "
            "time and peaks, so the recording holds no repeat to show how far one first call strays."
        )
    firsts = [num(r.first_call_ms) for r in same + [base]]
    lo, hi, n = min(firsts), max(firsts), len(same)
    if lo <= row.first_call_ms <= hi:
        return (
            f"Its first call took {row.first_call_ms:,.1f} ms, within the {lo:,.1f} to {hi:,.1f} ms of the "
            f"first calls of the defaults and of the {n} settings that changed nothing measurable (one "
            "sample each): one first call does not rank the two."
        )
    side = "above" if row.first_call_ms > hi else "below"
    return (
        f"Its first call took {row.first_call_ms:,.1f} ms, {side} the {lo:,.1f} to {hi:,.1f} ms of the "
        f"first calls of the defaults and of the {n} settings that changed nothing measurable (one sample "
        "each)."
    )


def _benchmark_sentence(df, base) -> str:
    bench = row_of(df, BENCHMARK)
    if bench is None:
        return ""
    kernels = (
        " Its pick launched other kernels than labkit's autotuned plan (the table's last column)."
        if bench.get("same_kernels") is False
        else ""
    )
    return (
        f"`{BENCHMARK}`: {us_text(bench.gpu_us)} per call, {_vs(bench, base)}; its first call peaked "
        f"{size_text(bench.first_peak_bytes)} above the inputs against {size_text(base.first_peak_bytes)}, "
        f"and in steady calls {size_text(bench.steady_peak_bytes)} against "
        f"{size_text(base.steady_peak_bytes)}. "
        f"{_first_call_sentence(df, bench, base)}{kernels}{_timed_twice(bench, base)}"
    )


def _tf32_sentence(df, base) -> str:
    off = row_of(df, "allow_tf32=False")
    if off is None or off.runs_as == base.runs_as:
        return ""
    error = (
        f", error against float64 {off.max_rel_error:.1e} against {base.max_rel_error:.1e}"
        if num(off.get("max_rel_error")) is not None and num(base.get("max_rel_error")) is not None
        else ""
    )
    return (
        f"`allow_tf32=False` ran {_it(df)} as {off.runs_as}: {us_text(off.gpu_us)} per call, {_vs(off, base)}"
        f"{error}; peak {size_text(off.steady_peak_bytes)} in steady calls."
    )


def knob_rows(df, knob: str):
    """The PyTorch rows that turned one knob, in the order measured.

    Args:
        df: `torch_knobs`' result.
        knob: the knob, as its settings name it, e.g. "autocast" or "memory format".

    Returns:
        Those rows (`pytorch_rows` of that knob); empty where none ran.
    """
    pt = pytorch_rows(df)
    return pt[pt.knob == knob]


def _layout_sentence(df, base) -> str:
    rows = knob_rows(df, "memory format")
    if rows.empty:
        return ""
    r = rows.iloc[0]
    lab = (
        f" (labkit's plan of it: {us_text(r.labkit_gpu_us)}, workspace {size_text(r.labkit_workspace_bytes)})"
        if num(r.get("labkit_gpu_us")) is not None
        else ""
    )
    return (
        f"`{r.setting}` ran {_it(df)} as {r.runs_as}: {us_text(r.gpu_us)} per call, {_vs(r, base)}{lab}; "
        f"peak {size_text(r.steady_peak_bytes)} in steady calls."
    )


def extra_kernels(df, row) -> int:
    """How many more kernels PyTorch launched per call than labkit's counterpart plan (casts, for autocast).

    Args:
        df: `torch_knobs`' result (its labkit rows hold their plans' kernels).
        row: one of its PyTorch rows.

    Returns:
        The count; 0 when either side has no kernel names.
    """
    twin = df[(df.source == "labkit") & (df.setting == row.get("labkit_row"))]
    mine = row.get("kernels")
    theirs = twin.kernels.iloc[0] if len(twin) and "kernels" in twin.columns else None
    if not isinstance(mine, str) or not isinstance(theirs, str) or not mine or not theirs:
        return 0
    return max(0, len(mine.split(" | ")) - len(theirs.split(" | ")))


def _strict_fp32_sentence(df, rows) -> str:
    """Autocast against strict fp32 (``allow_tf32=False``), the baseline of lesson 09's precision item."""
    strict = row_of(df, "allow_tf32=False")
    if strict is None:
        return ""
    each = [
        f"`{r.setting}` is not ranked against it, their p10-p90 overlapping ({spread_text(r)})"
        if spreads_overlap(r, strict)
        else f"`{r.setting}` takes {ratio_text(r.gpu_us, strict.gpu_us)} its time"
        for _, r in rows.iterrows()
    ]
    return (
        f" Lesson 09's precision item sets half precision against strict fp32 math instead, which "
        f"`allow_tf32=False` runs here ({us_text(strict.gpu_us)}, p10-p90 {spread_text(strict)}): against "
        f"it, {listed(each)}."
    )


def _autocast_sentence(df, base) -> str:
    rows = knob_rows(df, "autocast")
    if rows.empty:
        return ""
    parts = []
    for r in rows.itertuples():
        lab = (
            f" (labkit's {r.runs_as} plan alone: {us_text(r.labkit_gpu_us)})"
            if num(getattr(r, "labkit_gpu_us", None)) is not None
            else ""
        )
        parts.append(f"`{r.setting}` ran {us_text(r.gpu_us)} per call{lab}, {_vs(r, base)}.")
    casts = [extra_kernels(df, r) for _, r in rows.iterrows()]
    cast_text = (
        f" PyTorch's own cast kernels run before cuDNN's: {max(casts)} more kernels per call than "
        "labkit's plan."
        if max(casts) > 0
        else ""
    )
    return (
        f"Autocast, set against the defaults (fp32 tensors, TF32 math): {' '.join(parts)}{cast_text}"
        f"{_strict_fp32_sentence(df, rows)}"
    )


def _together_sentence(df, base) -> str:
    """The switches turned on together against each of them alone (the network's last row)."""
    rows = knob_rows(df, "all of them")
    if rows.empty:
        return ""
    together = rows.iloc[0]
    alone = [r for r in (row_of(df, s) for s in together.setting.split(", ")) if r is not None]
    if not alone:
        return ""
    apart = [r for r in alone if not spreads_overlap(together, r)]
    verdicts = {
        "slower than {rows}": [r for r in apart if together.gpu_us > r.gpu_us],
        "faster than {rows}": [r for r in apart if together.gpu_us < r.gpu_us],
        "not ranked against {rows}, the p10-p90 ranges overlapping": [
            r for r in alone if spreads_overlap(together, r)
        ],
    }
    clauses = [
        verdict.format(
            rows=listed(f"`{r.setting}` alone ({us_text(r.gpu_us)}, p10-p90 {spread_text(r)})" for r in rs)
        )
        for verdict, rs in verdicts.items()
        if rs
    ]
    return (
        f"`{together.setting}`, these switches together: {us_text(together.gpu_us)} per call (p10-p90 "
        f"{spread_text(together)}), {'; '.join(clauses)}."
    )


def _plan_cache_sentence(df, base) -> str:
    r = row_of(df, PLAN_CACHE)
    if r is None or num(r.get("alternating_us")) is None or num(base.get("alternating_us")) is None:
        return ""
    return (
        f"`{r.setting}`: one shape ran {_vs(r, base)}; two batch sizes in turn took "
        f"{us_text(r.alternating_us)} per call against {us_text(base.alternating_us)} at the defaults "
        f"({ratio_text(r.alternating_us, base.alternating_us)}): a cache of one plan holds one shape at a "
        "time."
    )


def _cap_sentence(df, base) -> str:
    pt = pytorch_rows(df)
    caps = pt[(pt.knob == "workspace cap") & (pt.env != "{}")]
    plain = caps[~caps["flags"].str.contains('"benchmark": true')]
    if plain.empty:
        return ""
    same = [r.setting for _, r in plain.iterrows() if same_time(r, base) and same_peaks(r, base)]
    lab = df[(df.source == "labkit") & df.setting.str.contains(", cap ")]
    none_fit = lab[lab.status != "ok"]
    if len(same) != len(plain):
        return ""
    caps = sorted({str(n).split(", cap ")[1] for n in none_fit.setting}, key=lambda c: float(c.split()[0]))
    tail = (
        f" labkit found no plan for this convolution within {listed(caps)} of workspace (its rows: "
        f"{none_fit.status.iloc[0]}), so a cap that worked would have left this convolution with no plan."
        if not none_fit.empty
        else ""
    )
    return (
        f"{listed(f'`{s}`' for s in same)}: the same time and peaks as the defaults; this PyTorch did not "
        f"cap its workspace.{tail}"
    )


def knobs_summary(df) -> Optional[Text]:
    """What each knob did: the defaults against labkit, then each knob's cost or gain, the knobs that
    changed nothing, and the table.

    Args:
        df: `torch_knobs`' result.

    Returns:
        Markdown, as a `Text`.
    """
    base = row_of(df, DEFAULTS)
    if base is None:
        return Text("PyTorch's defaults did not run here: nothing to compare the knobs with.")
    knobs = (
        _benchmark_sentence,
        _tf32_sentence,
        _layout_sentence,
        _autocast_sentence,
        _together_sentence,
        _plan_cache_sentence,
    )
    bullets = [f"* {t}" for t in (fn(df, base) for fn in knobs + (_cap_sentence,)) if t]
    lines = [_defaults_sentence(df, base), "\n".join(bullets)]
    same = unchanged(df)
    if same:
        lines.append(
            f"Changed neither the time per call of one shape (each median within the other's p10-p90) nor a "
            f"peak (within 1 MiB): {listed(f'`{s}`' for s in same)}."
        )
        cache = row_of(df, PLAN_CACHE) if PLAN_CACHE in same and _plan_cache_sentence(df, base) else None
        if cache is not None:
            moved = "slower" if num(cache.alternating_us) > num(base.alternating_us) else "faster"
            lines[-1] += (
                f" `{PLAN_CACHE}` changes nothing for one shape only: with two batch sizes in turn it is "
                f"{moved}, as its bullet above says."
            )
    cut = df[(df.source == "pytorch") & (df.status != "ok")]
    if not cut.empty:
        lines.append(f"Did not run: {listed(f'`{r.setting}` ({r.status})' for r in cut.itertuples())}.")
    return Text("\n\n".join(line for line in lines if line) + "\n\n" + knobs_table(df))


def knobs_table(df) -> Text:
    """Every setting that ran: what cuDNN ran, its time, first call and peaks; then, in a second
    table (one table of both would be wider than the notebook), each setting's labkit counterpart;
    then the settings timed with two batch sizes in turn (the plan cache's test).

    Args:
        df: `torch_knobs`' result.

    Returns:
        Markdown tables, times in us (the first call in ms) and sizes in MiB, as the chart's axes.
    """
    pt = pytorch_rows(df)
    out = pd.DataFrame(
        {
            "setting": pt.setting,
            "convolutions run as": pt.runs_as,
            "per call": [us_text(v) for v in pt.gpu_us],
            "first call": [f"{v:,.1f} ms" for v in pt.first_call_ms],
            "peak, steady": [size_text(v) for v in pt.steady_peak_bytes],
            "peak, first call": [size_text(v) for v in pt.first_peak_bytes],
        }
    )
    torch_table = table(out, list(out.columns))
    if "labkit_gpu_us" not in pt.columns or not pt.labkit_gpu_us.notna().any():
        return torch_table
    lab = pd.DataFrame(
        {
            "setting": pt.setting,
            "labkit counterpart": list(pt.labkit_row),
            "labkit per call": [us_text(v) for v in pt.labkit_gpu_us],
            "its workspace": [size_text(v) for v in pt.labkit_workspace_bytes],
            "same kernels": [{True: "yes", False: "no"}.get(v, "-") for v in column(pt, "same_kernels")],
        }
    )
    tables = f"{torch_table}\n\nEach setting's counterpart in labkit:\n\n{table(lab, list(lab.columns))}"
    turns = pt[pt.alternating_us.notna()] if "alternating_us" in pt.columns else pt.iloc[:0]
    if turns.empty:
        return Text(tables)
    alternating = pd.DataFrame(
        {
            "setting": turns.setting,
            "per call, two batch sizes in turn": [us_text(v) for v in turns.alternating_us],
        }
    )
    intro = (
        "Each setting with the convolution at its batch and at half of it in turn, host time per call "
        "(a plan cache must hold both shapes):"
    )
    return Text(f"{tables}\n\n{intro}\n\n{table(alternating, list(alternating.columns))}")
