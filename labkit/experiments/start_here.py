"""Lesson 00's surprise, explained from kernel traces: in true fp32, NHWC runs slower than NCHW;
lesson 00's exercise (`MODE`: which mode labkit is in); and how close the GPU simulated from a
recording comes to the live one (`simulator_note`).

The layout panel of lesson 00 shows fp16 faster in NHWC; moved to fp32 it shows NHWC slower. The
`kernels` experiment (lesson 10) traced every plan of the base convolution in fp32 NHWC (and, in
the recordings that hold it, in fp32 NCHW): which kernels a call launches and what each costs.
`fp32_layout_note` reads that trace and the `layout` result and says what makes the difference.
Nothing here measures: both come through `labkit.experiments.core.result`."""

from __future__ import annotations

from typing import Optional

from .. import env
from ..draw.plots import fmt_bytes, fmt_us, ok_rows
from ..draw.prose import Text, where
from ..errors import LabkitError
from ..simgpu import fidelity
from .core import BASE, result
from .exercise import Exercise, equal, one_of

#: the kernel role the traces give a copy between NHWC and NCHW order
CONVERSION = "layout conversion"


def _plan_kernels(trace, plan_name: str):
    """The rows of ``trace`` (a `kernels` result) for ``plan_name``; else for its first plan."""
    ok = ok_rows(trace)
    rows = ok[ok["plan_name"] == plan_name]
    if rows.empty and len(ok):
        rows = ok[ok["plan_index"] == ok["plan_index"].min()]
    return rows


def _trace(layout: str):
    """The `kernels` result of the fp32 base convolution in ``layout`` when at hand without
    tracing live (recorded, or traced before on this GPU), else None."""
    try:
        return result("kernels", at_hand_only=True, spec=BASE.replace(dtype="fp32", layout=layout))
    except LabkitError:
        return None


def _noise(nchw, nhwc) -> str:
    """How far the two times are from noise: the spread of repeated replays (p10 to p90) and a
    second run of the same plans, both from lesson 03's `precision` result ("" when not at hand)."""
    spreads, again = [], []
    for row in (nchw, nhwc):
        try:
            prec = result("precision", at_hand_only=True, spec=BASE.replace(layout=row.name))
        except LabkitError:
            return ""
        if prec is None:
            return ""
        prec = ok_rows(prec)
        same = prec[(prec["dtype"] == "fp32") & (prec["plan_name"] == row["plan_name"])]
        if same.empty:
            return ""
        r = same.iloc[0]
        spreads.append((r["gpu_us_p90"] - r["gpu_us_p10"]) / r["gpu_us"])
        again.append(fmt_us(r["gpu_us"]))
    return (
        f" No noise: repeated replays of each call spread by at most {max(spreads):.1%} (p10 to p90), "
        f"and another run of the same two plans (lesson 03's precision measurement) read {again[1]} and "
        f"{again[0]}."
    )


def fp32_layout_note(layouts=None) -> Optional[Text]:
    """Why NHWC is slower than NCHW in fp32 for the base convolution, from the kernel traces.

    Args:
        layouts: the `layout` result for the fp32 base convolution (default: looked up).

    Returns:
        Markdown text built from the numbers in use, or None when NHWC is not the slower layout.
    """
    lay = ok_rows(layouts if layouts is not None else result("layout", spec=BASE.replace(dtype="fp32")))
    by = lay.set_index("layout")
    if not {"NCHW", "NHWC"} <= set(by.index):
        return None
    nchw, nhwc = by.loc["NCHW"], by.loc["NHWC"]
    if nhwc["conv_gpu_us"] <= nchw["conv_gpu_us"]:
        return None
    ratio = nhwc["conv_gpu_us"] / nchw["conv_gpu_us"]
    text = (
        f"In true fp32 (tensor cores off) NHWC is the slower layout ({where(lay)}): "
        f"{fmt_us(nhwc['conv_gpu_us'])} per call against {fmt_us(nchw['conv_gpu_us'])} in NCHW, {ratio:.2f}x."
        + _noise(nchw, nhwc)
    )
    trace = _trace("NHWC")
    if trace is None:
        return Text(
            text + " Lesson 10's kernel trace says why: "
            '`lessons.data("kernels", spec=lessons.base(dtype="fp32"))` takes it on this GPU (it traces '
            "every plan), and this cell then explains it."
        )
    mine = _plan_kernels(trace, str(nhwc["plan_name"]))
    conv = mine[mine["role"] == CONVERSION]
    launches = int(round(float(mine["launches_per_call"].sum())))
    converts = int(round(float(conv["launches_per_call"].sum())))
    ok = ok_rows(trace)
    plans = ok.groupby("plan_name")
    converting = [p for p, rows in plans if (rows["role"] == CONVERSION).any()]
    direct = [(p, float(rows["plan_kernel_us"].iloc[0])) for p, rows in plans if p not in converting]
    converted = (
        f"* **NHWC**, plan {nhwc['plan_name']}: {launches} kernels per call, {converts} of them layout "
        f"conversions ({', '.join(sorted(set(conv['kernel'].str.split('::').str[-1])))}) that copy the "
        f"tensors into NCHW order in its {fmt_bytes(nhwc['workspace_bytes'])} workspace and the result back. "
        f"{len(converting)} of the {plans.ngroups} fp32 NHWC plans convert like this"
    )
    if direct:
        name, us = min(direct, key=lambda x: x[1])
        nhwc_item = (
            f"{converted}; the fastest that reads NHWC as it is ({name}) takes {fmt_us(us)} of kernel time "
            "per call."
        )
    else:
        nhwc_item = f"{converted}."
    other = _trace("NCHW")
    if other is not None:
        theirs = _plan_kernels(other, str(nchw["plan_name"]))
        n = int(round(float(theirs["launches_per_call"].sum())))
        main = theirs.loc[theirs["kernel_us"].idxmax(), "kernel"] if len(theirs) else ""
        nchw_item = (
            f"* **NCHW**, plan {nchw['plan_name']}: {n} kernel{'s' if n != 1 else ''} per call, an implicit "
            f"GEMM that reads NCHW as it is ({str(main)[:40]}...), {fmt_bytes(nchw['workspace_bytes'])} of "
            "workspace."
        )
    else:
        nchw_item = (
            f"* **NCHW**, plan {nchw['plan_name']}: {fmt_bytes(nchw['workspace_bytes'])} of workspace, "
            "nothing to convert (this recording has no kernel trace of it)."
        )
    text = (
        f"{text}\n\nThe kernel traces say why:\n\n{nhwc_item}\n{nchw_item}\n\n"
        "cuDNN's true-fp32 kernels work on NCHW data."
    )
    try:
        half = ok_rows(result("layout", spec=BASE.replace(dtype="fp16"))).set_index("layout")["conv_gpu_us"]
    except LabkitError:
        return Text(text)
    if half["NHWC"] < half["NCHW"]:
        text += (
            f" With tensor cores it is the other way round: in fp16, {fmt_us(half['NHWC'])} in NHWC against "
            f"{fmt_us(half['NCHW'])} in NCHW."
        )
    return Text(text)


def _mode():
    return env.mode()


MODE = Exercise(
    name="mode",
    lesson="00",
    kind="read",
    question="Which mode is labkit in on this machine, 'live' or 'recorded'?",
    truth=lambda: _mode().name,
    parse=one_of(("live", "recorded"), "a mode"),
    judge=equal,
    why=lambda truth: f"labkit is {truth} ({_mode().reason}).",
    hints=(
        "the banner at the top of the lesson names the mode in its first words.",
        "run labkit.env.mode(): the word before the parenthesis is the mode.",
    ),
    wrong_answers=lambda truth: ["recorded" if truth == "live" else "live"],
)


def simulator_note() -> Text:
    """How close the GPU simulated from a recording (`labkit.simgpu`) comes to the live one: what
    ``bench sim-fidelity`` measured on each GPU that has a committed table, and by how much it misses
    each goal (`labkit.simgpu.fidelity.sentence`).

    Returns:
        Markdown text: per GPU measured, a list of what it meets and misses.
    """
    found = fidelity.tables()
    if not found:
        return Text(
            "No GPU has compared the simulated GPU with itself yet (`python -m labkit bench sim-fidelity` "
            "on a GPU writes data/bench/sim_fidelity_<gpu>.csv)."
        )
    tables = [fidelity.load(path) for path in found.values()]
    detail = "\n\n".join("\n".join(f"* {line}" for line in fidelity.sentences(df)) for df in tables)
    return Text(
        "\n".join(f"* {fidelity.summary(df)}" for df in tables)
        + "\n\n<details><summary>The comparison in detail (its workloads and strategies are lessons 02 "
        "and 06's)</summary>\n\n" + detail + "\n\n</details>"
    )
