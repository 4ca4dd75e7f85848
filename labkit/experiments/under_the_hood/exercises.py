"""Lesson 10's exercise checks: the kernels one call of the heuristic's plan launches, the
strategy under which the GPU waits longest for the host, and how long (us) the race's two streams
ran at once.
"""

from __future__ import annotations

from typing import Optional

from ...draw.plots import fmt_us, ok_rows
from ...errors import InvalidSpec
from ..checking import CheckResult, as_number, as_word, frame_for, is_close, pending, say
from ..core import BASE


def heuristic_kernels(answer=None, df=None) -> CheckResult:
    """Lesson 10: how many kernels does one call of the heuristic's plan of the base convolution
    launch (memsets count)? (exact)"""
    df = ok_rows(frame_for(df, "kernels", spec=BASE))
    name = df.attrs.get("heuristic_plan") or df.sort_values("plan_index").plan_name.iloc[0]
    row = df[df.plan_name == name].iloc[0]
    truth = float(row.kernels_per_call)
    if answer is None:
        return pending(
            f"How many kernels does one call of the heuristic's plan ({name}) launch?",
            "hover its bar in the kernels chart, or count its rows in the table.",
        )
    a = as_number(answer, "a count", 2)
    if a == truth:
        roles = ", ".join(dict.fromkeys(df[df.plan_name == name].role))
        return say(True, f"{truth:g} per call ({roles}).")
    return say(False, f"{a:g} is {'too many' if a > truth else 'too few'}; memsets are kernels here too.")


def idle_strategy(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 10: in the strategy timeline, under which strategy does the GPU sit idle longest
    (largest idle share)? Answer a strategy as the chart names it."""
    df = frame_for(df, "strategy_timeline", workload="one_conv", calls=8)
    s = df.drop_duplicates("strategy").set_index("strategy")
    if "idle_share_api" in s.columns:  # the pass the chart draws
        s = s.assign(idle_share=s.idle_share_api)
    truth = s.idle_share.idxmax()
    if answer is None:
        return pending(
            "Under which strategy does the GPU wait longest for the host?",
            "the lane names in the timeline chart end with the idle share.",
        )
    a = as_word(answer, "a strategy", "malloc_per_call")
    if a.lower() == str(truth).lower() or (a.lower() in str(truth).lower() and len(a) > 4):
        return say(
            True,
            f"{truth}: idle {s.loc[truth, 'idle_share']:.0%} of its pass; every call waits for cudaFree "
            "(which synchronises) and cudaMalloc before its kernel can start.",
        )
    if a not in s.index and not any(a.lower() in str(i).lower() for i in s.index):
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(map(str, s.index))}")
    return say(False, "look for the widest gaps between kernels in the GPU lanes.")


def race_overlap(answer=None, df=None) -> CheckResult:
    """Lesson 10: with CUDA-graph launches, for how many microseconds did the two streams' kernels
    run at the same time in the traced round? (within 25%: traces vary run to run)"""
    df = frame_for(df, "race_timeline", launch="graph", streams=2)
    truth = float(df.overlap_us.iloc[0])
    if answer is None:
        return pending(
            "How long did stream 1 and stream 2 run at the same time (us)?", "the chart's detail line."
        )
    a = as_number(answer, "microseconds", 100)
    if is_close(a, truth, 0.25) or (truth == 0 and a == 0):
        return say(True, f"{fmt_us(truth)}: during it both streams wrote the same workspace.")
    return say(False, f"{a:g} us is {'too much' if a > truth else 'too little'}.")
