"""Lesson 05's hands-on cell, ``%%handson time_every_plan``: the learner times every plan of a graph
with CUDA events, on this GPU or on one simulated from the recording (`labkit.practice`); its
reference solution (events around CUDA-graph replays, as labkit's autotune times), and the check:
every plan timed, each with more than one call between its events, those calls replayed from a CUDA
graph (the GPU's log says which calls a graph's launch ran), nothing left allocated, and the learner's
times beside labkit's (live: its autotune of the same graph; simulated: each plan's recorded kernels,
which the simulated GPU replays), every plan whose time reads NaN named as left out."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional, Tuple

from ...draw.plots import fmt_us, ok_rows
from ...draw.prose import listed
from ...gpu.timing import stops
from ...practice import current, findings
from ...practice.findings import Problem
from ...spec import ConvSpec
from ..checking import CheckResult, emit
from ..core import result
from ..handson_check import calls_problem, calls_timed, times_far, verdict
from .exercises import NCHW

#: the reference solution of the hands-on cell ``%%handson time_every_plan`` (`labkit.session.handson`)
TIME_EVERY_PLAN = """\
import statistics

gpu = lessons.device()
conv = gpu.conv(lessons.base(layout="NCHW"))  # every plan cuDNN offers, built and checked
stream = gpu.stream()
CALLS = 20  # calls in one CUDA graph: one sample times them all, with no launch gap between them
for plan in conv.plans:
    workspace = gpu.allocate(plan.workspace_bytes)  # the plan's own workspace
    run = lambda: conv.run(workspace, stream=stream, plan=plan)  # queues one call of the plan
    for _ in range(3):  # warm-up: loads the kernels, fills the caches, wakes the clocks
        run()
    stream.synchronize()
    graph = gpu.capture(lambda: [run() for _ in range(CALLS)], stream)
    samples = []
    for _ in range(5):  # five timed replays: their median, not one sample
        start = gpu.event(stream)
        graph.launch(stream)
        end = gpu.event(stream)
        end.wait()
        samples.append(gpu.elapsed_us(start, end) / CALLS)
    my_times[plan.index] = statistics.median(samples)
    gpu.free(workspace)
"""
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"time_every_plan": (TIME_EVERY_PLAN, True)}
#: a learner's time for a plan within this factor of labkit's counts as the same measurement
TIMES_AGREE = 1.25


def _timing_problems(gpu, plans: List[int]) -> List[Problem]:
    """Plans never timed between two events with only their own calls between, with one call, or with
    calls launched one by one (no timing of the plan's had only a CUDA graph's replayed calls)."""
    timings = gpu.timings[gpu.cell_mark.timings :]
    out = []
    for p in plans:
        mine = [t for t in timings if t.plans == (p,)]
        problem = calls_problem([t.calls for t in mine], f"plan {p}")
        if problem:
            out.append(problem)
        elif not any(t.replayed == t.calls for t in mine if t.calls > 1):
            out.append(_eager(p, max(mine, key=lambda t: t.calls)))
    return out


def _eager(plan: int, timing) -> Problem:
    """The problem of a plan timed with calls launched one by one between its events: all of them, or
    those a CUDA graph's replay did not run.

    Args:
        plan: the plan's index.
        timing: its timing with the most calls between the events (a `labkit.practice.device.Timing`).

    Returns:
        The `Problem`, of kind ``eager``.
    """
    if not timing.replayed:
        return Problem(
            "eager", f"plan {plan}: the {timing.calls} calls between your events were launched one by one"
        )
    return Problem(
        "eager",
        f"plan {plan}: {timing.calls - timing.replayed} of the {timing.calls} calls between your events were "
        "launched one by one, not replayed from a CUDA graph",
    )


def _labkit_times(gpu, conv, spec: ConvSpec) -> Dict[int, float]:
    """Plan -> labkit's GPU us per call: live its autotune (the plans table); simulated, each plan's
    recorded kernels back to back (what the simulated GPU replays for one call)."""
    if gpu.simulated:
        rec = gpu.device.recorded
        return {p.index: sum(k.us for k in rec.call(spec, p.index).kernels) for p in conv.plans}
    ok = ok_rows(result("plans", spec=spec)).set_index("plan_index")
    return {int(i): float(ok.loc[i, "gpu_us"]) for i in ok.index}


def _charted(gpu, spec: ConvSpec) -> Dict[int, float]:
    """Simulated: plan -> its time in the plans chart (the recording's replay medians), which the
    simulated GPU's figure (its recorded kernels back to back) is not; live: empty (the figure is it)."""
    if not gpu.simulated:
        return {}
    df = result("plans", at_hand_only=True, spec=spec)
    if df is None:
        return {}
    ok = ok_rows(df)
    return {int(i): float(t) for i, t in zip(ok["plan_index"], ok["gpu_us"])}


def plan_times(times, *, spec: ConvSpec = NCHW) -> CheckResult:
    """Check a learner's timings of every plan (hands-on ``time_every_plan``).

    Args:
        times: plan index -> GPU microseconds per call, as the learner measured them.
        spec: the convolution timed (the lesson's fp16 NCHW base).

    Returns:
        A `CheckResult`: right when every plan is timed between two events around a CUDA graph's
        replay of more than one call, nothing is left allocated, and (where the times are known) the
        learner's median ratio to labkit's is within `TIMES_AGREE` and the learner's fastest plan is
        labkit's fastest or within `stops.FINAL_MARGIN` of it (the plans autotune times again before it
        picks). Plans whose time reads NaN are named as left out.
    """
    if not isinstance(times, dict) or not times:
        return emit(
            False, "my_times is empty: the hands-on cell fills it, one entry per plan.", "no answer yet"
        )
    bad = [k for k, v in times.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0]
    if bad:
        return emit(
            False,
            f"{len(bad)} of {len(times)} plans ({', '.join(map(str, sorted(bad)[:6]))}"
            f"{', ...' if len(bad) > 6 else ''}) have no time in microseconds: replace the ... with your "
            "timing.",
        )
    gpu = current()
    conv = next((c for c in reversed(gpu.convs) if c.spec == spec), None)
    if conv is None:
        return emit(
            False, f"no convolution {spec.label} ran on {gpu.label}: run the cell above.", "no answer yet"
        )
    missing = sorted({p.index for p in conv.plans} - set(times))
    if missing:
        return emit(
            False, f"{len(missing)} plans not timed yet (e.g. plan {missing[0]}): time every runnable plan."
        )
    ran = f"You timed {len(conv.plans)} plans of {spec.label} ({gpu.label})."
    problems = findings.collect(gpu, gpu.cell_mark) + _timing_problems(gpu, [p.index for p in conv.plans])
    if problems:
        return verdict("plan_times", ran, problems, right="", hints=COMPARE_HINTS, names=COMPARE_NAMES)
    said, far = _compare(times, _labkit_times(gpu, conv, spec), gpu, charted=_charted(gpu, spec))
    return verdict("plan_times", ran, far, right=said, hints=COMPARE_HINTS, names=COMPARE_NAMES)


COMPARE_NAMES = {
    "times_far": "too far apart",
    "not_fastest": "another fastest plan",
    "eager": "timed without a CUDA graph",
}
COMPARE_HINTS = {
    "eager": (
        "the lesson times replays of a CUDA graph, as labkit's autotune does. What does the host add "
        "between calls it launches one by one?",
        "capture the calls once, graph = gpu.capture(lambda: [run() for _ in range(CALLS)], stream); "
        "put the two events around graph.launch(stream), and divide by CALLS.",
    ),
    "times_far": (
        "what else than the plan's kernels did your events measure?",
        "warm up before timing, put many calls (a CUDA graph of them) between the two events, and divide "
        "by the number of calls; take the median of several samples.",
    ),
    "not_fastest": (
        "close plans swap places from one sample to the next. How many samples did you take?",
        "time more repeats per plan and take their median.",
    ),
}


def _compare(
    times: Dict[int, float], theirs: Dict[int, float], gpu, *, charted: Optional[Dict[int, float]] = None
) -> Tuple[str, List[Problem]]:
    """What the check says of times that passed the structure's checks, beside labkit's: the text,
    and a problem when they are too far apart or the fastest differs. ``charted``: plan -> its time
    in the plans chart, where labkit's figure is another (simulated: the recorded kernels)."""
    mine_known = {i: t for i, t in times.items() if math.isfinite(t) and i in theirs}
    best = min(theirs, key=theirs.get)
    whose = "the simulated GPU's" if gpu.simulated else "labkit's autotune's"
    if best in (charted or {}):
        what = f", its recorded kernels back to back; the plans chart's replays: {fmt_us(charted[best])}"
    else:
        what = ", its recorded kernels back to back" if gpu.simulated else ""
    if not mine_known:
        lacked = "; ".join(list(getattr(gpu.device, "missing", {}))[:2])
        return (
            "Every plan was timed between two events around a CUDA graph of many calls, and nothing is "
            f"left allocated. Your times read NaN: the recording lacks what your events need ({lacked}), "
            f"and a simulated clock never makes a number up. {whose[0].upper() + whose[1:]} fastest: plan "
            f"{best}, {fmt_us(theirs[best])} per call (its recorded kernels back to back).",
            [],
        )
    ratios = {i: t / theirs[i] for i, t in mine_known.items()}
    med = statistics.median(ratios.values())
    mine = min(mine_known, key=mine_known.get)
    far = max(ratios, key=lambda i: abs(math.log(ratios[i])))
    said = (
        f"Your times are {med:.2f}x {whose} (median over {len(ratios)} plans; the farthest, plan {far}, "
        f"{ratios[far]:.2f}x). Your fastest: plan {mine}; {whose}: plan {best} "
        f"({fmt_us(theirs[best])}{what})."
    )
    left_out = _left_out(times, theirs, whose)
    left = " ".join(left_out)
    if not 1 / TIMES_AGREE <= med <= TIMES_AGREE:
        kind = times_far(med, whose, gpu).kind
        calls = f" {calls_timed(gpu)} calls ran between your events."
        more = calls if kind == "not_divided" else " Too far apart."
        return said, [Problem(kind, f"{said}{more} {left}".rstrip())]
    if theirs[mine] > (1 + stops.FINAL_MARGIN) * theirs[best]:
        not_theirs = f" Your fastest is not theirs, nor within {stops.final_margin_text()} of it."
        return said, [Problem("not_fastest", f"{said}{not_theirs} {left}".rstrip())]
    graphs = " Events around CUDA-graph replays leave out the launch gaps that Python launches add."
    return "\n".join([said + graphs, *left_out]), []


def _left_out(times: Dict[int, float], theirs: Dict[int, float], whose: str) -> List[str]:
    """The sentences naming the plans the comparison left out: those whose time reads NaN, and those
    without a time of labkit's to set beside (live: a plan its autotune stopped early)."""
    nan = sorted(i for i, t in times.items() if not math.isfinite(t))
    none = sorted(i for i, t in times.items() if math.isfinite(t) and i not in theirs)
    out = []
    if len(nan) == 1:
        out.append(f"Left out of this comparison: {_plans_text(nan)}, whose time reads NaN.")
    elif nan:
        out.append(f"Left out of this comparison: {_plans_text(nan)}, whose times read NaN.")
    if none:
        out.append(f"Left out of this comparison, as {whose} has no time for them: {_plans_text(none)}.")
    return out


def _plans_text(plans: List[int], *, most: int = 8) -> str:
    """Plans by index for a sentence: "plan 3", "plans 3, 7 and 12", "plans 1, 2, 3, ... and 5 more".

    Args:
        plans: the plans' indices, sorted.
        most: the most indices written out.

    Returns:
        The text.
    """
    if len(plans) == 1:
        return f"plan {plans[0]}"
    if len(plans) <= most:
        return f"plans {listed(plans)}"
    return f"plans {listed([*plans[:most], f'{len(plans) - most} more'])}"
