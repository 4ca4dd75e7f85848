"""Lesson 10's hands-on cell, ``%%handson idle_time``: the learner finds where the GPU waited for the
host in a trace (the strategies' traced passes, `strategy_timeline`: measured on this GPU live,
the recording's trace otherwise); its reference solution and the check, against labkit's own
reading of the same rows (`labkit.gpu.timing.trace.busy_us`). Microseconds."""

from __future__ import annotations

import math

from ... import env
from ...draw.plots import fmt_us
from ...gpu.timing import trace as traces
from ...practice.findings import Problem
from ..checking import CheckResult, emit
from ..core import result
from ..handson_check import verdict

#: the reference solution of the hands-on cell ``%%handson idle_time`` (`labkit.session.handson`)
IDLE_TIME = '''\
trace = lessons.data("strategy_timeline", workload="one_conv", calls=8)  # the traced passes above


def idle_us(trace, strategy):
    """Microseconds of `strategy`'s traced pass in which the GPU ran nothing, from its first kernel's
    start to its last kernel's end: the rows of kind 'kernel' or 'memset' (start_us, end_us)."""
    rows = trace[(trace.strategy == strategy) & trace.kind.isin(["kernel", "memset"])]
    busy, until = 0.0, -float("inf")  # time some row ran; where the rows so far end
    for start, end in sorted(zip(rows.start_us, rows.end_us)):
        busy += max(0.0, end - max(start, until))  # overlaps counted once
        until = max(until, end)
    return rows.end_us.max() - rows.start_us.min() - busy


my_idle = {s: idle_us(trace, s) for s in trace.strategy.unique()}
assert check.idle_time(my_idle)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"idle_time": (IDLE_TIME, False)}
#: an idle time within this many microseconds of labkit's counts as the same
AGREE_US = 0.5
NAMES = {"idle_off": "idle time"}
HINTS = {
    "idle_off": (
        "which rows are the GPU's, and when does its pass start and end?",
        "keep the rows of kind 'kernel' or 'memset'; the pass runs from the first one's start_us to the "
        "last one's end_us; busy is the time inside it covered by at least one row; idle is the rest.",
    ),
}


def _truth(df) -> dict:
    """Strategy -> labkit's idle microseconds of its traced pass (span less busy,
    `labkit.gpu.timing.trace`)."""
    out = {}
    for s, sub in df.groupby("strategy", sort=False):
        dev = traces.device_rows(sub)
        if len(dev):
            out[s] = float(dev.end_us.max() - dev.start_us.min()) - traces.busy_us(sub)
    return out


def _what_is_off(mine: float, truth: float, sub) -> str:
    """What a wrong idle time looks like it left out or put in (never the answer itself)."""
    dev = traces.device_rows(sub)
    span = float(dev.end_us.max() - dev.start_us.min())
    kernels = dev[dev.kind == "kernel"]
    no_memsets = span - traces.busy_us(kernels)
    whole = float(sub.end_us.max() - sub.start_us.min()) - traces.busy_us(sub)
    if 0 <= mine <= 1 and truth > 1:
        return "that looks like a share of the pass: the cell asks for microseconds"
    if abs(mine - no_memsets) <= AGREE_US:
        return "the memsets ran on the GPU too: a memset is busy time"
    if abs(mine - whole) <= AGREE_US:
        return "the host's rows (API calls) are not the GPU's pass: it starts at the first kernel"
    return f"off by {fmt_us(abs(mine - truth))}"


def idle_time(answer=None) -> CheckResult:
    """Lesson 10 hands-on: the GPU's idle time in each strategy's traced pass.

    Args:
        answer: strategy -> idle microseconds, as ``my_idle`` holds them.

    Returns:
        A `CheckResult`: right when every strategy's idle time is within `AGREE_US` of labkit's.
    """
    if not isinstance(answer, dict) or not answer:
        return emit(
            False, "my_idle is empty: the hands-on cell fills it, one entry per strategy.", "no answer yet"
        )
    df = result("strategy_timeline", workload="one_conv", calls=8)
    truth = _truth(df)
    bad = [k for k, v in answer.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad or set(truth) - set(answer):
        return emit(
            False,
            f"my_idle needs a number of microseconds for every strategy ({', '.join(sorted(truth))}).",
            "no answer yet",
        )
    where = (
        f"recorded on the {env.gpu_label(df.attrs.get('gpu'))}"
        if df.attrs.get("mode") == "recorded"
        else f"measured on this {env.gpu_label(df.attrs.get('gpu'))}"
    )
    ran = f"Your idle times of {len(truth)} traced passes (the trace {where})."
    problems = [
        Problem("idle_off", f"{s}: {_what_is_off(float(answer[s]), t, df[df.strategy == s])}")
        for s, t in truth.items()
        if not (math.isfinite(float(answer[s])) and abs(float(answer[s]) - t) <= AGREE_US)
    ]
    if problems:
        return verdict("idle_time", ran, problems, right="", hints=HINTS, names=NAMES)
    most = max(truth, key=truth.get)
    least = min(truth, key=truth.get)
    share = {s: truth[s] / _span(df[df.strategy == s]) for s in (most, least)}
    return verdict(
        "idle_time",
        ran,
        [],
        right=(
            f"Every one matches labkit's reading of the same rows. The GPU waited longest under {most} "
            f"({fmt_us(truth[most])}, {share[most]:.0%} of its pass as drawn), least under {least} "
            f"({fmt_us(truth[least])}, {share[least]:.0%})."
        ),
    )


def _span(sub) -> float:
    """Microseconds from a pass's first device row's start to its last one's end."""
    dev = traces.device_rows(sub)
    return float(dev.end_us.max() - dev.start_us.min())
