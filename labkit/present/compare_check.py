"""Exercise self-checks for lesson 08 (the same convolution on another GPU), in the manner of
`labkit.present.check`: ``None`` prints the question's hint; an answer of the wrong type raises
`labkit.InvalidSpec`; a `CheckResult` comes back (true when correct). The truth is
read from the recordings through `labkit.present.compare` (pass ``df=`` a `compare.frames` result of your
own to check against it)."""

from __future__ import annotations

from typing import Optional

from ..draw import plots
from ..errors import InvalidSpec
from ..experiments.checking import CheckResult, pending, say
from . import compare


def _gpu(df, rec: str) -> str:
    return df.attrs["provenance"][rec]["gpu"]


def biggest_gain(answer: Optional[str] = None, df=None) -> CheckResult:
    """Which ResNet-50 shape of the roofline gains most (smallest time ratio) on the other GPU?"""
    if answer is None:
        return pending(
            "Which roofline shape gains most on the GPU with more memory bandwidth?",
            "the two GPUs share their compute roof and differ in memory bandwidth: which shape is held down by "
            "bandwidth, not compute?",
        )
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidSpec("answer", answer, "must be a str naming a shape, e.g. '3x3 @28'")
    df = df if df is not None else compare.frames("roofline")
    table = compare.ratios(df)
    col = compare.ratio_column(table)
    shapes = list(table["shape"])
    if answer.strip() not in shapes:
        raise InvalidSpec("answer", answer, f"must be one of the shapes: {', '.join(shapes)}")
    ok = table[table[col].notna()]
    best = ok.loc[ok[col].idxmin()]
    base, other = table.attrs["baseline"], table.attrs["others"][0]
    lowest = ok.loc[ok["shape"].map(dict(zip(df["shape"], df["intensity_flops_per_byte"]))).idxmin(), "shape"]
    why = (
        f"{best['shape']} takes {best[col]:.2f}x the time on {_gpu(df, other)} "
        f"({plots.fmt_us(best[f'gpu_us {base}'])} -> {plots.fmt_us(best[f'gpu_us {other}'])}); "
        f"the lowest-intensity shape is {lowest}."
    )
    if answer.strip() == best["shape"]:
        return say(True, why)
    mine = ok[ok["shape"] == answer.strip()]
    got = (
        f"{answer.strip()} takes {float(mine[col].iloc[0]):.2f}x the time"
        if not mine.empty
        else f"{answer} was not measured on both"
    )
    return say(False, f"{got}. Which shape sits furthest left on the roofline, under the bandwidth roof?")


def best_plan_changes(answer: Optional[bool] = None, df=None) -> CheckResult:
    """Does autotuning pick a different fastest plan on the other GPU (base convolution, every plan)?"""
    if answer is None:
        return pending(
            "Is the fastest plan of the base convolution a different plan on the other GPU? (True / False)",
            "compare.frames('plans') marks each GPU's fastest plan in its 'best' column.",
        )
    if not isinstance(answer, bool):
        raise InvalidSpec("answer", answer, "must be True or False")
    df = df if df is not None else compare.frames("plans")
    recs = df.attrs["recordings"]
    if len(recs) < 2:
        raise InvalidSpec("df", recs, "must hold the plans of at least two recordings")
    best = {r: df[(df["recording"] == r) & df["best"].astype(bool)].iloc[0] for r in recs[:2]}
    a, b = (best[r] for r in recs[:2])
    changes = a["plan_name"] != b["plan_name"]
    on_b = df[(df["recording"] == recs[1]) & (df["plan_name"] == a["plan_name"])]["gpu_us"]
    margin = (
        f" On {_gpu(df, recs[1])}, {_gpu(df, recs[0])}'s fastest plan takes {plots.fmt_us(float(on_b.iloc[0]))} "
        f"against {plots.fmt_us(b['gpu_us'])} for its own: {float(on_b.iloc[0]) / b['gpu_us'] - 1:.1%} slower, "
        "a small margin from single runs: measure again before you trust it."
        if changes and len(on_b)
        else ""
    )
    text = (
        f"{_gpu(df, recs[0])}: {a['plan_name']} ({plots.fmt_us(a['gpu_us'])}); "
        f"{_gpu(df, recs[1])}: {b['plan_name']} ({plots.fmt_us(b['gpu_us'])}).{margin}"
    )
    return say(
        answer == changes, text if answer == changes else "look at the 'best' column per recording again."
    )
