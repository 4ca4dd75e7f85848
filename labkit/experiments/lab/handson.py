"""Lesson 07's hands-on cell, ``%%handson workspace_knee``: the learner caps the workspace and finds the
knee, on this GPU or on one simulated from the recording (`labkit.practice`): under each of the caps
experiment's caps, the plans cuDNN keeps (``gpu.conv(spec, workspace_cap=cap)``) run with one
workspace that fits them all and are timed with CUDA events; the fastest time per cap; the smallest
cap whose fastest time is within a tolerance of the uncapped one. Its reference solution and the
check, which sets the learner's times beside the caps experiment's (`core.result("caps")`: measured
on this GPU live, the recording's otherwise). Bytes, microseconds."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional

from ...draw.names import plan_labels
from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...practice import current
from ...practice.findings import Problem
from ..checking import CheckResult, emit
from ..core import BASE, result
from ..handson_check import cell_problems, measured_where, times_far, took, verdict, why_apart

#: the convolution whose workspace is capped: the fp16 NCHW base, whose fastest plans need megabytes
SPEC = BASE.replace(layout="NCHW")
#: the knee: the smallest cap whose fastest plan is at most this fraction slower than with no cap
TOLERANCE = 0.05
#: the learner's time under a cap within this factor of the caps experiment's counts as the same
TIMES_AGREE = 1.25

#: the reference solution of the hands-on cell ``%%handson workspace_knee`` (`labkit.session.handson`)
WORKSPACE_KNEE = '''\
import statistics

gpu = lessons.device()
spec = lessons.base(layout="NCHW")  # fp16 NCHW: its fastest plans need a workspace of megabytes
stream = gpu.stream()
CALLS = 20
timed = {}  # plan name -> GPU us per call: a plan kept under several caps is timed once


def time_us(conv, plan, workspace):
    """GPU microseconds per call of `plan`: a warm-up call, then the median of 5 replays of a
    CUDA graph of CALLS calls, each between two events."""
    run = lambda: conv.run(workspace, stream=stream, plan=plan)
    run()
    stream.synchronize()
    graph = gpu.capture(lambda: [run() for _ in range(CALLS)], stream)
    samples = []
    for _ in range(5):
        start = gpu.event(stream)
        graph.launch(stream)
        end = gpu.event(stream)
        end.wait()
        samples.append(gpu.elapsed_us(start, end) / CALLS)
    return statistics.median(samples)


my_best = {}
for cap in lessons.CAPS:  # smallest first; None: no cap
    conv = gpu.conv(spec, workspace_cap=cap)  # the plans cuDNN keeps: each needs at most `cap` bytes
    workspace = gpu.allocate(max(p.workspace_bytes for p in conv.plans))  # one that fits them all
    for p in conv.plans:
        if p.name not in timed:
            timed[p.name] = time_us(conv, p, workspace)
    my_best[cap] = min(timed[p.name] for p in conv.plans)
    gpu.free(workspace)
my_knee = next((cap for cap in lessons.CAPS if my_best[cap] <= 1.05 * my_best[None]), None)
assert check.workspace_knee(my_best, my_knee)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"workspace_knee": (WORKSPACE_KNEE, True)}
NAMES = {"knee_off": "knee", "times_far": "too far from the caps experiment"}
HINTS = {
    "knee_off": (
        "read your own table: which is the first cap, from the smallest up, whose time is close to no cap's?",
        "take the caps from the smallest up and keep the first whose best time is at most 1.05 times the "
        "best time with no cap (my_best[None]).",
    ),
    "times_far": (
        "under each cap, is your number the fastest plan's time per call, and only the plan's kernels?",
        "time every plan the capped convolution keeps (warm up, two events around a CUDA graph of many "
        "calls, divide by the calls, the median of several samples) and keep the smallest.",
    ),
}


def _caps_table(spec):
    """The caps experiment's rows for ``spec`` by cap (None: no cap): (plans within, best plan,
    its workspace bytes, its GPU us, its slowdown against no cap)."""
    df = ok_rows(result("caps", spec=spec))
    return df, {
        (None if int(r.cap_bytes) < 0 else int(r.cap_bytes)): r
        for r in df.itertuples()  # the experiment's caps, smallest first, no cap last
    }


def knee_of(best: Dict[Optional[int], float], caps: List[Optional[int]], tolerance: float = TOLERANCE):
    """The smallest cap whose time is within ``tolerance`` of no cap's.

    Args:
        best: cap (bytes; None: no cap) -> the fastest time under it (microseconds).
        caps: the caps, smallest first, None last.
        tolerance: the fraction a cap may add to no cap's time.

    Returns:
        The cap; None when only no cap comes that close (or a time is NaN).
    """
    return next((c for c in caps if best[c] <= (1 + tolerance) * best[None]), None)


def _problems(gpu, best, knee, caps) -> List[Problem]:
    """What is off: the sanitizer's findings, leaks, wrong outputs, timings of one call, a knee that
    your own times do not give."""
    out = cell_problems(gpu)
    timings = gpu.timings[gpu.cell_mark.timings :]
    if not timings:
        out.append(Problem("no_timing", "no time was taken between two events (gpu.elapsed_us)"))
    elif min(t.calls for t in timings) <= 1:
        one = min(timings, key=lambda t: t.calls)
        out.append(Problem("one_call", f"{one.calls} call between two of your events"))
    if not out and all(math.isfinite(best[c]) for c in caps):
        mine = knee_of(best, caps)
        if knee != mine:
            out.append(
                Problem(
                    "knee_off",
                    f"by your own times the smallest cap within {TOLERANCE:.0%} of no cap's is "
                    f"{_cap(mine)}; you said {_cap(knee)}",
                )
            )
    return out


def _cap(cap) -> str:
    return "no cap" if cap is None else fmt_bytes(cap)


def workspace_knee(best=None, knee=..., *, spec=SPEC) -> CheckResult:
    """Lesson 07 hands-on: the fastest time under each workspace cap, and the knee.

    Args:
        best: cap in bytes (None: no cap) -> the fastest plan's GPU microseconds per call under it,
            for every cap of the caps experiment (``lessons.CAPS``).
        knee: the smallest cap whose time is within `TOLERANCE` of no cap's.
        spec: the convolution capped.

    Returns:
        A `CheckResult`: right when every cap was timed between two events around more than one
        call, no workspace was too small, raced or left allocated, the knee is the one the learner's
        own times give, and those times are within `TIMES_AGREE` of the caps experiment's (median
        over the caps).
    """
    df, table = _caps_table(spec)
    caps = list(table)
    if not isinstance(best, dict) or set(caps) - set(best) or knee is ...:
        return emit(
            False,
            "my_best needs the fastest time (us per call) under every cap of lessons.CAPS "
            f"({', '.join(_cap(c) for c in caps)}), and my_knee one of those caps.",
            "no answer yet",
        )
    bad = [c for c in caps if isinstance(best[c], bool) or not isinstance(best[c], (int, float))]
    if bad or knee not in caps:
        what = f"my_best[{bad[0]!r}] is no number of microseconds" if bad else f"my_knee={knee!r} is no cap"
        return emit(False, f"{what}: each cap's time is a number, the knee one of lessons.CAPS.")
    gpu = current()
    ran = f"Your fastest time under {len(caps)} workspace caps of {spec.label} ({gpu.label})."
    problems = _problems(gpu, best, knee, caps)
    theirs = {c: float(table[c].gpu_us) for c in caps}
    known = [c for c in caps if math.isfinite(best[c])]
    ratio = statistics.median(best[c] / theirs[c] for c in known) if known else math.nan
    if not problems and known and not 1 / TIMES_AGREE <= ratio <= TIMES_AGREE:
        problems.append(times_far(ratio, "the caps experiment's", gpu))
    if problems:
        return verdict("workspace_knee", ran, problems, right="", hints=HINTS, names=NAMES)
    return verdict("workspace_knee", ran, [], right=_right(best, knee, table, df, gpu, ratio))


def _right(best, knee, table, df, gpu, ratio) -> str:
    """What a right answer is told: the knee, what it saves, and the table beside the experiment's."""
    caps = list(table)
    theirs = knee_of({c: float(table[c].gpu_us) for c in caps}, caps)
    where = measured_where(df)
    measured = all(math.isfinite(best[c]) for c in caps)
    at = knee if measured else theirs
    times = best if measured else {c: float(table[c].gpu_us) for c in caps}
    below = caps[caps.index(at) - 1] if caps.index(at) else None
    fastest = table[None]
    needs = f"the fastest plan with no cap ({fastest.best_plan}) needs {fmt_bytes(fastest.workspace_bytes)}"
    drops = ""
    if below is not None:  # your times' ratio and the experiment's (lesson 05's chart), each named
        theirs_x, mine_x = table[below].slowdown_vs_unlimited, times[below] / times[None]
        drops = (
            f", and the next cap down, {_cap(below)}, drops it: {mine_x:.2f}x slower by your times "
            f"({theirs_x:.2f}x in the caps experiment)"
            if measured
            else f", and the next cap down, {_cap(below)}, drops it: {theirs_x:.2f}x slower"
        )
    if not measured:
        timed = took(math.nan, gpu, "Every cap was timed between two events around many calls; your times")
        head = f"{timed}. By the caps experiment ({where}), the knee is {_cap(at)}: {needs}{drops}."
    elif math.isfinite(ratio):
        head = (
            f"The knee is {_cap(at)}: {needs}{drops}. The caps experiment ({where}) puts the knee at "
            f"{_cap(theirs)}; your times are {ratio:.2f}x its (median over the caps). {why_apart(gpu)}"
        )
    else:
        head = (
            f"The knee is {_cap(at)}: {needs}{drops}. The caps experiment ({where}) puts the knee at "
            f"{_cap(theirs)}."
        )
    labels = dict(zip(table.values(), plan_labels(str(table[c].best_plan) for c in caps)))
    width = max(len(_cap(c)) for c in caps)
    lines = [f"  {'cap':<{width}}  {'plans':>5}  {'your best':>12}  {'the experiment':>14}  its best plan"]
    for c in caps:
        r = table[c]
        mine = fmt_us(best[c]) if math.isfinite(best[c]) else "not recorded"
        lines.append(
            f"  {_cap(c):<{width}}  {int(r.plans_within_cap):>5}  {mine:>12}  {fmt_us(r.gpu_us):>14}  "
            f"{labels[r]}, {fmt_bytes(r.workspace_bytes)}"
        )
    rows = "\n".join(lines)
    return f"{head}\n{rows}"
