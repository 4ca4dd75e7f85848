"""Lesson 09's exercise checks, on the ResNet-50 report (batch 32, fp16 NHWC): the layer whose
fastest plan needs the largest workspace, the workspace cap (MiB) that loses the least time within
a budget, and the fastest strategy whose peak stays within a budget (MiB).
"""

from __future__ import annotations

from typing import Optional

from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...errors import InvalidSpec
from ..checking import CheckResult, as_number, as_word, frame_for, pending, say
from ..core import MIB
from .tables import table_of


def _report_frame(df):
    return frame_for(df, "network_report", net="resnet50", batch=32, dtype="fp16", layout="NHWC")


def largest_workspace_layer(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 09: in the ResNet-50 report (batch 32, fp16 NHWC), which layer's fastest plan asks
    for the largest workspace? (its name, e.g. 'layer1.0.conv2')"""
    layers = ok_rows(table_of(_report_frame(df), "layers"))
    big = layers.loc[layers["fastest_workspace_bytes"].idxmax()]
    if answer is None:
        return pending(
            "Which layer's fastest plan needs the largest workspace?",
            "hover the top chart, or sort report.layers by fastest_workspace_bytes.",
        )
    a = as_word(answer, "a layer name", "layer1.0.conv2")
    if a not in set(layers["layer"]):
        raise InvalidSpec("answer", answer, "must be a layer name of the report (report.layers.layer)")
    mine = layers[layers["layer"] == a]["fastest_workspace_bytes"].max()
    if mine >= big["fastest_workspace_bytes"]:
        return say(True, f"{a}: {fmt_bytes(mine)} for its fastest plan ({big['fastest_plan']}).")
    return say(False, f"{a}'s fastest plan needs {fmt_bytes(mine)}; another layer needs more.")


def cap_for_budget(answer_mib=None, budget_mib: float = 16, df=None) -> CheckResult:
    """Lesson 09: you can spare ``budget_mib`` MiB of workspace. Which cap of the budget curve
    (in MiB) loses the least time while keeping within it?"""
    budget = table_of(_report_frame(df), "budget")
    within = budget[
        (budget["cap_bytes"] >= 0)
        & (budget["cap_bytes"] <= budget_mib * MIB)
        & (budget["calls_without_plan"] == 0)
    ]
    if answer_mib is None:
        return pending(
            f"With {budget_mib:g} MiB to spare, which cap (MiB) loses the least time?",
            "the bottom chart: the caps you can afford, and their pass times.",
        )
    a = as_number(answer_mib, "a cap in MiB", 4)
    if within.empty:
        return say(False, f"no cap up to {budget_mib:g} MiB gives every call a plan here.")
    best = within.loc[within["pass_gpu_us"].idxmin()]
    if a * MIB > budget_mib * MIB:
        return say(False, f"{a:g} MiB is more than the {budget_mib:g} MiB you can spare.")
    mine = within[within["cap_bytes"] == round(a * MIB)]
    if mine.empty:
        return say(False, f"{a:g} MiB is not one of the caps measured ({', '.join(within['cap_label'])}).")
    m = mine.iloc[0]
    if m["pass_gpu_us"] <= best["pass_gpu_us"] * 1.0001:
        return say(
            True,
            f"{m['cap_label']}: {fmt_us(m['pass_gpu_us'])} per pass, {m['slowdown']:.2f}x the uncapped pass "
            f"({int(m['calls_changing_plan'])} call(s) take a slower plan).",
        )
    return say(False, f"{m['cap_label']} gives {fmt_us(m['pass_gpu_us'])}; a cap you can afford does better.")


def strategy_for_budget(answer: Optional[str] = None, budget_mib: float = 64, df=None) -> CheckResult:
    """Lesson 09: which strategy runs the ResNet-50 pass in the least GPU time while its peak
    workspace stays within ``budget_mib`` MiB? (a strategy label of report.strategies)"""
    strategies = ok_rows(table_of(_report_frame(df), "strategies"))
    within = strategies[strategies["peak_workspace_bytes"] <= budget_mib * MIB]
    if answer is None:
        return pending(
            f"Which strategy is fastest with a peak of at most {budget_mib:g} MiB?",
            "report.strategies: peak_workspace_bytes and pass_gpu_us.",
        )
    a = as_word(answer, "a strategy", "cupy_pool")
    if a not in set(strategies["strategy"]):
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(strategies['strategy'])}")
    mine = strategies[strategies["strategy"] == a].iloc[0]
    if mine["peak_workspace_bytes"] > budget_mib * MIB:
        return say(False, f"{a} peaks at {fmt_bytes(mine['peak_workspace_bytes'])}, over {budget_mib:g} MiB.")
    best = within["pass_gpu_us"].min()
    if mine["pass_gpu_us"] <= best * 1.03:  # within 3%: run-to-run noise of a pass
        return say(
            True,
            f"{a}: {fmt_us(mine['pass_gpu_us'])} per pass with a peak of {fmt_bytes(mine['peak_workspace_bytes'])}.",
        )
    return say(
        False, f"{a} takes {fmt_us(mine['pass_gpu_us'])}; a strategy within budget takes {fmt_us(best)}."
    )
