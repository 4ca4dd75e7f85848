"""The performance checklist of a network, computed from two measurements of it: `checklist_items`
(per distinct layer: dtypes, layouts, the production batch, builds, loads, reuse) and
`network_report` (autotune, workspace strategies, the pass's time). `checklist_table` gives one
row per item of `ITEMS` with what it gains and what it costs, `checklist_sentences` one sentence
per item written from that row; `checklist_chart` draws the table. Every comparison is made on
the layers measured on both sides (the rows say how many); a pass's GPU time here is the sum of
its calls' CUDA-graph replay medians (each call's count times its distinct layer's time).
Microseconds; bytes; percent.
"""

from __future__ import annotations

import math
from typing import List

import pandas as pd

from ...draw.plots import fmt_seconds, fmt_us
from ...draw.units import number, size_text, us_text
from ...env import gpu_label
from .tables import tables_of

#: the checklist's items, in the order the cuDNN frontend's guide lists them
ITEMS = (
    "precision",
    "layout",
    "autotune",
    "plans",
    "graph reuse",
    "batch size",
    "memory fits",
    "profile",
)
#: bytes per element of each dtype's tensors
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8_e4m3": 1}
#: how many of the top layers the profile names
TOP_LAYERS = 3
#: the table's columns, in order
COLUMNS = (
    "item",
    "applies",
    "before",
    "after",
    "per",
    "before_us",
    "after_us",
    "gain_us",
    "saved_percent",
    "cost_us",
    "payback_passes",
    "again_us",
    "error_before",
    "error_after",
    "memory_before_bytes",
    "memory_after_bytes",
    "target_memory_bytes",
    "target_gpu",
    "share_percent",
    "layers_compared",
    "layers",
    "note",
)


def _ok(df):
    return df[df["status"] == "ok"] if len(df) else df


def _sub(df, table: str):
    return df[df["table"] == table] if "table" in df.columns else df.iloc[0:0]


def _pair(convs, before: dict, after: dict):
    """The ``convs`` rows of two variants, side by side per distinct layer measured in both
    (``_b`` and ``_a`` suffixes)."""
    ok = _ok(convs)

    def pick(sel):
        rows = ok
        for k, v in sel.items():
            rows = rows[rows[k] == v]
        return rows.set_index("spec_id")

    b, a = pick(before), pick(after)
    return b.add_suffix("_b").join(a.add_suffix("_a"), how="inner")


def _sums(both, col: str) -> tuple:
    """(before, after) sums of ``col`` times each layer's count over a `_pair`."""
    return (
        float((both[f"{col}_b"] * both["count_b"]).sum()),
        float((both[f"{col}_a"] * both["count_a"]).sum()),
    )


def _row(item: str, **fields) -> dict:
    row = dict(item=item, **fields)
    b, a = row.get("before_us"), row.get("after_us")
    if b is not None and a is not None and "gain_us" not in row:
        row["gain_us"] = b - a
        row["saved_percent"] = 100.0 * (b - a) / b if b else float("nan")
    return row


def _not_measurable(item: str, why: str) -> dict:
    return dict(item=item, applies=f"not measurable here: {why}")


def _measured_layers(convs) -> int:
    return int(convs["spec_id"].nunique()) if len(convs) else 0


def precision_row(convs, dtype: str, layout: str, batch: int) -> dict:
    """fp32 against the half precision the network runs (or the faster of fp16 and bf16).

    Args:
        convs: `checklist_items`' ``convs`` rows (each layer's heuristic plan per dtype, layout, batch).
        dtype: the network's dtype.
        layout: its layout.
        batch: its batch.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    sel = dict(layout=layout, N=batch)
    halves = [dtype] if dtype in ("fp16", "bf16") else ["fp16", "bf16"]
    pairs = [(d, _pair(convs, dict(sel, dtype="fp32"), dict(sel, dtype=d))) for d in halves]
    pairs = [(d, p) for d, p in pairs if len(p)]
    if not pairs:
        return _not_measurable("precision", "no layer was measured in fp32 and in fp16 or bf16")
    half, both = min(pairs, key=lambda dp: _sums(dp[1], "gpu_us")[1])
    before, after = _sums(both, "gpu_us")
    faster = after < before
    return _row(
        "precision",
        applies="yes" if faster else f"no: {half} is not faster than fp32 here",
        before="fp32",
        after=half,
        per="pass",
        before_us=before,
        after_us=after,
        error_before=float(both["rel_error_b"].max()),
        error_after=float(both["rel_error_a"].max()),
        layers_compared=len(both),
        layers=_measured_layers(convs),
    )


def layout_row(convs, convert, dtype: str, layout: str, batch: int) -> dict:
    """NCHW against channels-last (NHWC) plus the one conversion of the network's input.

    Args:
        convs: `checklist_items`' ``convs`` rows.
        convert: its ``convert`` rows (the input's NCHW to NHWC conversion, timed).
        dtype: the network's dtype.
        layout: its layout.
        batch: its batch.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    sel = dict(dtype=dtype, N=batch)
    both = _pair(convs, dict(sel, layout="NCHW"), dict(sel, layout="NHWC"))
    conv_ok = _ok(convert)
    if not len(both) or not len(conv_ok):
        return _not_measurable(
            "layout", "no layer was measured in both layouts, or the conversion was not timed"
        )
    before, after = _sums(both, "gpu_us")
    cost = float(conv_ok["convert_gpu_us"].iloc[0])
    faster = after + cost < before
    return _row(
        "layout",
        applies="yes" if faster else "no: NHWC with its input's conversion is not faster than NCHW here",
        before="NCHW",
        after="NHWC",
        per="pass",
        before_us=before,
        after_us=after + cost,
        cost_us=cost,
        layers_compared=len(both),
        layers=_measured_layers(convs),
        note=f"the network runs {layout}",
    )


def _timed_again(ok, convs, dtype: str, layout: str, batch: int) -> float:
    """The report's heuristic plans' pass as `checklist_items` timed the same plans (the network's
    dtype, layout and batch), in microseconds; NaN unless it timed every layer the report did."""
    rows = _ok(convs)
    if not len(rows):
        return float("nan")
    rows = rows[(rows["dtype"] == dtype) & (rows["layout"] == layout) & (rows["N"] == batch)]
    rows = rows.drop_duplicates("spec_id").set_index("spec_id")
    if not set(ok["spec_id"]) <= set(rows.index):
        return float("nan")
    return float(rows.loc[ok["spec_id"], "gpu_us"].sum())


def autotune_row(layers, convs=None, *, dtype: str = "", layout: str = "", batch: int = 0) -> dict:
    """The heuristic's pick against the fastest plan, per pass; what finding the fastest took
    (each distinct layer's step of the report: building, checking and timing every plan); the same
    heuristic plans' pass as the checklist's own measurement timed it, to read the gain against.

    Args:
        layers: the network report's ``layers`` table.
        convs: `checklist_items`' ``convs`` rows (None: no second timing).
        dtype: the network's dtype.
        layout: its layout.
        batch: its batch size.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, ``again_us`` the heuristic's pass timed again, the layers compared), or a row that
        says why the item is not measurable here.
    """
    ok = _ok(layers)
    if not len(ok):
        return _not_measurable("autotune", "the network report measured no layer")
    before, after = float(ok["heuristic_gpu_us"].sum()), float(ok["fastest_gpu_us"].sum())
    again = float("nan") if convs is None else _timed_again(ok, convs, dtype, layout, batch)
    cost = float(ok.drop_duplicates("spec_id")["step_seconds"].sum()) * 1e6
    gain = before - after
    return _row(
        "autotune",
        applies="yes" if gain > 0 else "no: the heuristic picks the fastest plan of every layer",
        before="heuristic",
        after="fastest",
        per="pass",
        before_us=before,
        after_us=after,
        cost_us=cost,
        payback_passes=cost / gain if gain > 0 else float("inf"),
        again_us=again,
        layers_compared=int(ok["spec_id"].nunique()),
        layers=int(layers["spec_id"].nunique()),
    )


def plans_row(saved) -> dict:
    """Building every distinct layer's plan against loading it serialized, per process start.

    Args:
        saved: `checklist_items`' ``plans`` rows (build and load seconds per layer).

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    ok = _ok(saved)
    ok = ok[ok["load_seconds"].notna()] if len(ok) else ok
    if not len(ok):
        return _not_measurable("plans", "no plan was both built and loaded")
    return _row(
        "plans",
        applies="yes",
        before="build",
        after="load saved",
        per="process start",
        before_us=float(ok["build_seconds"].sum()) * 1e6,
        after_us=float(ok["load_seconds"].sum()) * 1e6,
        layers_compared=len(ok),
        layers=int(saved["spec_id"].nunique()),
    )


def reuse_row(reuse) -> dict:
    """Building the graph for every call against calling the built graph, per pass (host time of
    each call, waited for).

    Args:
        reuse: `checklist_items`' ``reuse`` rows (host microseconds per call, rebuilt and reused).

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    ok = _ok(reuse)
    if not len(ok):
        return _not_measurable("graph reuse", "no layer's calls were timed")
    return _row(
        "graph reuse",
        applies="yes",
        before="rebuild per call",
        after="reuse",
        per="pass",
        before_us=float((ok["rebuild_call_us"] * ok["count"]).sum()),
        after_us=float((ok["reuse_call_us"] * ok["count"]).sum()),
        layers_compared=len(ok),
        layers=int(reuse["spec_id"].nunique()),
    )


def batch_row(convs, dtype: str, layout: str, batch: int, production_batch: int) -> dict:
    """Time per image and the largest layer's memory at the learner's batch and the production batch.

    Args:
        convs: `checklist_items`' ``convs`` rows.
        dtype: the network's dtype.
        layout: its layout.
        batch: the batch measured.
        production_batch: the batch the learner names for production.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    if production_batch == batch:
        return dict(item="batch size", applies=f"no: the production batch is the batch measured ({batch})")
    sel = dict(dtype=dtype, layout=layout)
    both = _pair(convs, dict(sel, N=batch), dict(sel, N=production_batch))
    if not len(both):
        return _not_measurable("batch size", f"no layer was measured at batch {batch} and {production_batch}")
    before, after = _sums(both, "gpu_us")
    held = {s: both[f"operands_bytes_{s}"] + both[f"workspace_bytes_{s}"] for s in ("b", "a")}
    return _row(
        "batch size",
        applies="yes",
        before=f"batch {batch}",
        after=f"batch {production_batch}",
        per="image",
        before_us=before / batch,
        after_us=after / production_batch,
        memory_before_bytes=float(held["b"].max()),
        memory_after_bytes=float(held["a"].max()),
        layers_compared=len(both),
        layers=_measured_layers(convs),
    )


def tensor_bytes(layers, dtype: str) -> tuple:
    """(every call's filter, the largest call's input and output) in bytes, from the layers' sizes.

    Args:
        layers: the network report's ``layers`` table (forward calls).
        dtype: their dtype.

    Returns:
        The two sizes, bytes.
    """
    e = ELEMENT_BYTES.get(dtype, 4)
    fwd = layers[layers["direction"] == "fprop"]
    P = (fwd["H"] + 2 * fwd["padding"] - fwd["dilation"] * (fwd["R"] - 1) - 1) // fwd["stride"] + 1
    Q = (fwd["W"] + 2 * fwd["padding"] - fwd["dilation"] * (fwd["S"] - 1) - 1) // fwd["stride"] + 1
    filters = (fwd["K"] * (fwd["C"] // fwd["groups"]) * fwd["R"] * fwd["S"] * e).sum()
    inout = (fwd["N"] * fwd["C"] * fwd["H"] * fwd["W"] * e + fwd["N"] * fwd["K"] * P * Q * e).max()
    return float(filters), float(inout)


def memory_row(layers, strategies, dtype: str, memory_bytes, target_bytes, target_name) -> dict:
    """The forward's peak under the workspace strategy that holds the most, against this GPU's
    memory and a target GPU's: at least every filter, the largest call's input and output, and
    that strategy's measured workspace peak.

    Args:
        layers: the network report's ``layers`` table.
        strategies: its ``strategies`` table.
        dtype: the network's dtype.
        memory_bytes: this GPU's memory in bytes (None: unknown).
        target_bytes: the target GPU's memory in bytes (None: none named).
        target_name: the target GPU's name.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    ok = _ok(strategies)
    if not len(ok) or not len(_ok(layers)):
        return _not_measurable("memory fits", "no workspace strategy ran the pass")
    filters, inout = tensor_bytes(_ok(layers), dtype)
    worst = ok.loc[ok["peak_workspace_bytes"].idxmax()]
    peak = filters + inout + float(worst["peak_workspace_bytes"])
    fits = [m is None or peak <= m for m in (memory_bytes, target_bytes)]
    where = "this GPU" if not fits[0] else f"the {gpu_label(target_name)}"
    return dict(
        item="memory fits",
        applies="yes: it fits" if all(fits) else f"no: it does not fit {where}",
        before="GPU memory",
        after="forward peak",
        per="pass",
        memory_before_bytes=float(memory_bytes) if memory_bytes else float("nan"),
        memory_after_bytes=peak,
        target_memory_bytes=float(target_bytes) if target_bytes else float("nan"),
        share_percent=100.0 * peak / memory_bytes if memory_bytes else float("nan"),
        layers_compared=int(_ok(layers)["spec_id"].nunique()),
        layers=int(layers["spec_id"].nunique()),
        target_gpu=gpu_label(target_name) if target_name else "",
        note=str(worst["strategy"]),
    )


def _top_shape(r, kernels: float) -> str:
    """One distinct layer of the profile's note: its first layer's name, its calls, their GPU time
    summed (microseconds) and their share of the calls' time ``kernels`` (microseconds)."""
    share = 100 * r.us / kernels
    if r.calls == 1:
        return f"{r.layer} (1 call, {us_text(r.us)}, {share:.0f}%)"
    return f"{r.layer} ({r.calls} calls, {us_text(r.us)} in all, {share:.0f}%)"


def profile_row(layers, strategies) -> dict:
    """The pass between two events against its calls' own GPU time (the rest: the GPU idles between
    launches), and the distinct layers (shapes) with the largest share of the calls' time, each
    summed over its calls.

    Args:
        layers: the network report's ``layers`` table.
        strategies: its ``strategies`` table.

    Returns:
        One checklist row (item, applies, before/after and their times in microseconds or sizes in
        bytes, the layers compared), or a row that says why the item is not measurable here.
    """
    ok, runs = _ok(layers), _ok(strategies)
    first = runs[runs["strategy"] == "preallocated"] if len(runs) else runs
    if not len(ok) or not len(first):
        return _not_measurable("profile", "the preallocated strategy's pass was not timed")
    pass_us = float(first["pass_gpu_us"].iloc[0])
    kernels = float(ok["fastest_gpu_us"].sum())
    by_layer = ok.groupby("spec_id").agg(
        us=("fastest_gpu_us", "sum"), layer=("layer", "first"), calls=("layer", "size")
    )
    top = by_layer.sort_values("us", ascending=False).head(TOP_LAYERS)
    note = "; ".join(_top_shape(r, kernels) for r in top.itertuples())
    return dict(
        item="profile",
        applies="yes",
        before="pass between events",
        after="its calls' GPU time",
        per="pass",
        before_us=pass_us,
        after_us=kernels,
        gain_us=pass_us - kernels,
        share_percent=100.0 * (pass_us - kernels) / pass_us if pass_us else float("nan"),
        layers_compared=len(by_layer),
        layers=int(layers["spec_id"].nunique()),
        note=note,
    )


def checklist_table(report, items, *, production_batch: int, memory_bytes=None, target=None):
    """One row per checklist item (`ITEMS`).

    Args:
        report: `network_report`'s frame for the network.
        items: `checklist_items`' frame for the same network.
        production_batch: the production batch the items were measured at.
        memory_bytes: this GPU's memory, bytes (None: unknown).
        target: (name, memory in bytes) of the target GPU, or None.

    Returns:
        A DataFrame with `COLUMNS`: ``applies`` says yes, no (and why) or not measurable here (and
        why); ``before``/``after`` what is compared, ``per`` what a time is per (pass, image,
        process start); times in us, sizes in bytes; ``saved_percent`` of the time before;
        ``again_us`` (autotune) the heuristic plans' pass as ``items`` timed them.
    """
    req = items.attrs.get("request") or {}
    layers, strategies = tables_of(report, "layers", "strategies")
    dtype, layout, batch = req.get("dtype"), req.get("layout"), req.get("batch")
    convs = _sub(items, "convs")
    own = _ok(convs)
    if (
        dtype is None or layout is None or batch is None
    ):  # each spec its own: read the network's from its rows
        first = convs.iloc[0] if len(convs) else {}
        dtype, layout, batch = first.get("dtype"), first.get("layout"), first.get("N")
    target_name, target_bytes = target if target else (None, None)
    rows = [
        precision_row(convs, dtype, layout, batch),
        layout_row(convs, _sub(items, "convert"), dtype, layout, batch),
        autotune_row(layers, convs, dtype=dtype, layout=layout, batch=batch),
        plans_row(_sub(items, "plans")),
        reuse_row(_sub(items, "reuse")),
        batch_row(convs, dtype, layout, batch, production_batch),
        memory_row(layers, strategies, dtype, memory_bytes, target_bytes, target_name),
        profile_row(layers, strategies),
    ]
    df = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    df.attrs = dict(items.attrs, report_date=report.attrs.get("date"), measured_layers=_measured_layers(own))
    return df


def _times(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _noise(r) -> str:
    """The autotune sentence's clause on the heuristic's pass timed again, or empty when it was not."""
    again, b = r.get("again_us", math.nan), r["before_us"]
    if again != again:
        return ""
    diff = abs(again - b)
    verdict = "within" if r["gain_us"] <= diff else "beyond"
    return (
        f" (the checklist's own timing of the same heuristic plans, for precision and layout, gives "
        f"{us_text(again)}, {us_text(diff)} {'more' if again > b else 'less'}: the gain is {verdict} "
        "the difference between two measurements of one pass)"
    )


def _sentence(r) -> str:
    """One row of `checklist_table` in a sentence, every number read from the row."""
    item, applies = r["item"], str(r["applies"])
    if applies.startswith("not measurable"):
        return f"{item.capitalize()}: {applies}."
    if applies.startswith("no: the production batch"):
        return f"Batch size: {applies[4:]}; name another production batch to compare."
    b, a = r["before_us"], r["after_us"]
    of = f" (on {int(r['layers_compared'])} of {int(r['layers'])} distinct layers)"
    of = "" if r["layers_compared"] == r["layers"] else of
    ratio = b / a if a else float("nan")
    if item == "precision":
        verb = f"{_times(ratio)}x faster" if a < b else f"{_times(1 / ratio)}x slower"
        return (
            f"Precision: the pass's convolutions take {us_text(a)} in {r['after']} against {us_text(b)} "
            f"in fp32{of}, {verb}; the largest error against float64 is {r['error_after']:.1e} "
            f"against {r['error_before']:.1e} in fp32."
        )
    if item == "layout":
        conv = a - r["cost_us"]
        verdict = "a gain" if a < b else "a loss"
        return (
            f"Layout: in NHWC the pass's convolutions take {us_text(conv)}, and converting the "
            f"network's input from NCHW once {us_text(r['cost_us'])}, {us_text(a)} in all against "
            f"{us_text(b)} in NCHW{of}: {verdict} of {us_text(abs(b - a))} a pass ({r['note']})."
        )
    if item == "autotune":
        if not r["gain_us"] > 0:
            return (
                "Autotune (the network report): the heuristic already picks the fastest plan of every "
                f"layer ({us_text(b)} a pass); building, checking and timing every plan took "
                f"{fmt_seconds(r['cost_us'] / 1e6)} for nothing."
            )
        return (
            f"Autotune (the network report): the fastest plans take {us_text(a)} a pass against the "
            f"heuristic's {us_text(b)}{of}, {us_text(r['gain_us'])} less{_noise(r)}; building, checking "
            f"and timing every plan took {fmt_seconds(r['cost_us'] / 1e6)}, paid back after "
            f"{number(math.ceil(r['payback_passes']), whole=True)} passes."
        )
    if item == "plans":
        return (
            f"Plans: building the heuristic plans of {int(r['layers_compared'])} distinct layers took "
            f"{fmt_us(b)}; loading them saved took {fmt_us(a)}, {_times(ratio)}x "
            "less, at each start of a process."
        )
    if item == "graph reuse":
        return (
            f"Graph reuse: building the graph for every call costs {fmt_us(b)} of host time a pass, "
            f"calling the built graphs {fmt_us(a)}{of}, {_times(ratio)}x less."
        )
    if item == "batch size":
        verb = "less" if a < b else "more"
        return (
            f"Batch size: an image takes {us_text(a)} of convolution time at {r['after']} against "
            f"{us_text(b)} at {r['before']}, {us_text(abs(b - a))} {verb}{of}; the largest layer "
            f"holds {size_text(r['memory_after_bytes'])} of tensors and workspace at {r['after']} "
            f"against {size_text(r['memory_before_bytes'])}."
        )
    if item == "memory fits":
        target = (
            f" and {100 * r['memory_after_bytes'] / r['target_memory_bytes']:.1f}% of the "
            f"{r['target_gpu']}'s {size_text(r['target_memory_bytes'])}"
            if r["target_memory_bytes"] == r["target_memory_bytes"]
            else ""
        )
        mine = (
            f"{r['share_percent']:.1f}% of this GPU's {size_text(r['memory_before_bytes'])}"
            if r["memory_before_bytes"] == r["memory_before_bytes"]
            else "this GPU's memory unknown"
        )
        return (
            "Memory fits (the network report's strategies): the forward holds at least "
            f"{size_text(r['memory_after_bytes'])} (every filter, the largest call's input and output, "
            f"and the {r['note']} strategy's workspace), {mine}{target}: {applies.split(': ', 1)[1]}."
        )
    return (
        f"Profile (the network report): the pass took {us_text(b)} between two events and its calls' kernels "
        f"{us_text(a)}, so the GPU idled {r['share_percent']:.0f}% of it between launches; "
        f"the shapes with the most GPU time summed over their calls, each named by its first layer: "
        f"{r['note']}. Lesson 10 traces the kernels and the gaps."
    )


def checklist_sentences(table) -> List[str]:
    """One sentence per item, written from its row of `checklist_table`.

    Args:
        table: `checklist_table`'s result.

    Returns:
        The sentences, in `ITEMS` order.
    """
    return [_sentence(r) for r in table.to_dict("records")]
