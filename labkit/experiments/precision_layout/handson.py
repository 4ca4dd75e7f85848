"""Lesson 03's hands-on cell, ``%%handson nhwc_pays``: the learner times the convolution in NCHW and in
NHWC and the copies that convert a user's NCHW tensors for NHWC (``gpu.conversion``), with CUDA
events, on this GPU or on one simulated from the recording (`labkit.practice`), and decides whether
converting pays: for one call, and after how many calls in a row one conversion has paid for itself.
Its reference solution and the check, which sets the learner's times beside the layout experiment's
(`core.result("layout")`: measured on this GPU live, the recording's otherwise). Microseconds, bytes."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional

from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...errors import LabkitError
from ...practice import current
from ...practice.findings import Problem
from ...practice.layout import Copied
from ..checking import CheckResult, emit
from ..core import BASE, result
from ..handson_check import (
    calls_problem,
    cell_problems,
    measured_where,
    parts_beside,
    times_far,
    took,
    verdict,
    why_apart,
)

#: the convolution: the lesson's base shape (fp16, batch 32), in each layout
SPEC = BASE
#: the learner's time of each part within this factor of the layout experiment's counts as the same
TIMES_AGREE = 1.25
#: a ``layers`` answer that is not the count may be the break-even within this share of it (a fraction)
BREAK_EVEN_REL = 0.1
#: the answer's parts: key -> what it times
PARTS = {
    "nchw_us": "the NCHW convolution",
    "nhwc_us": "the NHWC convolution",
    "convert_us": "the conversion (x to NHWC, y back)",
}

#: the reference solution of the hands-on cell ``%%handson nhwc_pays`` (`labkit.session.handson`)
NHWC_PAYS = '''\
import statistics

gpu = lessons.device()
nchw, nhwc = (gpu.conv(lessons.base(layout=lay)) for lay in ("NCHW", "NHWC"))  # heuristic plans
copies = gpu.conversion(nhwc)  # the user's NCHW x into nhwc's x, then nhwc's y back to NCHW
stream = gpu.stream()
CALLS = 20


def time_us(run_one):
    """GPU microseconds per call of run_one(), which queues one call on `stream`: a warm-up call,
    a CUDA graph of CALLS calls replayed once untimed (its first launch uploads it), then the median
    of 5 replays, each between two events."""
    run_one()
    stream.synchronize()
    graph = gpu.capture(lambda: [run_one() for _ in range(CALLS)], stream)
    graph.launch(stream)
    stream.synchronize()
    samples = []
    for _ in range(5):
        start = gpu.event(stream)
        graph.launch(stream)
        end = gpu.event(stream)
        end.wait()
        samples.append(gpu.elapsed_us(start, end) / CALLS)
    return statistics.median(samples)


def conv_us(conv):
    """time_us of conv's heuristic plan, run with a workspace of its own."""
    workspace = gpu.allocate(conv.plan.workspace_bytes)
    us = time_us(lambda: conv.run(workspace, stream=stream))
    gpu.free(workspace)
    return us


my_layout = dict(
    nchw_us=conv_us(nchw), nhwc_us=conv_us(nhwc), convert_us=time_us(lambda: copies.run(stream=stream))
)
saved = my_layout["nchw_us"] - my_layout["nhwc_us"]  # what running in NHWC saves a call
pays = my_layout["nhwc_us"] + my_layout["convert_us"] < my_layout["nchw_us"]
layers = int(my_layout["convert_us"] // saved) + 1 if saved > 0 else None  # calls one conversion pays for
assert check.nhwc_pays(my_layout, pays=pays, layers=layers)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"nhwc_pays": (NHWC_PAYS, True)}
NAMES = {
    "pays_off": "does it pay",
    "layers_off": "calls to pay",
    "no_time": "no time",
    "times_far": "too far from the layout experiment",
}
HINTS = {
    "pays_off": (
        "a user whose tensors are NCHW pays for the conversion on top of the NHWC call. What does NCHW cost "
        "alone?",
        "pays = nhwc_us + convert_us < nchw_us.",
    ),
    "layers_off": (
        "one conversion (x in, y back) can serve a run of calls that all stay in NHWC; each call saves what "
        "NHWC saves. After how many has it paid for itself?",
        "each call in NHWC saves nchw_us - nhwc_us: find the fewest calls whose savings add up to more than "
        "convert_us (and None when NHWC saves nothing).",
    ),
    "no_time": (
        "on the simulated GPU a time is a number only where the recording holds every cost in it, and it "
        "holds no host time of launching the copies from Python. What did your events time besides replays "
        "of a CUDA graph?",
        "capture the calls in a CUDA graph (gpu.capture), launch it once and wait (graph.launch(stream); "
        "stream.synchronize()), then put only graph.launch(stream) between your two events: the replays' "
        "costs were recorded, and on a GPU too a graph's first launch uploads it.",
    ),
    "times_far": (
        "what else than the calls themselves did your events measure?",
        "warm up, then put many calls (a CUDA graph of them) between two events and divide by the calls; "
        "take the median of several samples.",
    ),
}


def _layout(spec):
    """The layout experiment's NCHW and NHWC rows for ``spec`` (by layout) and its frame."""
    df = result("layout", spec=spec)
    return ok_rows(df).set_index("layout"), df


def calls_to_pay(nchw_us: float, nhwc_us: float, convert_us: float) -> Optional[int]:
    """The fewest calls in a row, run in NHWC after one conversion, whose savings exceed its cost.

    Args:
        nchw_us: a call in NCHW (microseconds).
        nhwc_us: a call in NHWC.
        convert_us: one conversion (the input to NHWC, the output back).

    Returns:
        The count; None when NHWC saves nothing.
    """
    saved = nchw_us - nhwc_us
    return int(convert_us // saved) + 1 if saved > 0 else None


def _timing_problems(gpu, spec) -> List[Problem]:
    """Each part never timed between two events with only its own calls between, or timed over one call."""
    timings = gpu.timings[gpu.cell_mark.timings :]
    labels = {
        "nchw_us": spec.replace(layout="NCHW").label,
        "nhwc_us": spec.replace(layout="NHWC").label,
        "convert_us": Copied(spec.replace(layout="NHWC")).label,
    }
    out = []
    for key, label in labels.items():
        problem = calls_problem([t.calls for t in timings if t.convs == (label,)], PARTS[key])
        if problem:
            out.append(problem)
    return out


def _no_time(gpu, what: str) -> str:
    """Why ``what`` has no time on a simulated GPU: the copies' Python launch, where it stopped the clock."""
    copies = [m for m in getattr(gpu.device, "missing", {}) if "NCHW <-> NHWC copies" in m]
    if copies:
        return (
            f"{what}: no time, since the recording lacks the {copies[0]} and a simulated clock makes none up"
        )
    return took(math.nan, gpu, what)


def _verdict_problems(times: Dict[str, float], pays, layers) -> List[Problem]:
    """The learner's verdicts against what their own times say."""
    n, h, c = (times[k] for k in PARTS)
    out = []
    if pays != (h + c < n):
        out.append(
            Problem(
                "pays_off",
                f"by your times NHWC with the conversion takes {fmt_us(h + c)} a call against NCHW's "
                f"{fmt_us(n)}; you said pays={pays!r}",
            )
        )
    if not _calls_agree(layers, n, h, c):
        out.append(Problem("layers_off", f"your times do not give {layers!r} calls"))
    return out


def _calls_agree(layers, nchw_us: float, nhwc_us: float, convert_us: float) -> bool:
    """Whether ``layers`` is what the times give: the count (`calls_to_pay`), or the break-even
    (convert_us over what a call saves) within `BREAK_EVEN_REL`, as Exercise 5 takes it."""
    count = calls_to_pay(nchw_us, nhwc_us, convert_us)
    if layers is None or count is None:
        return layers == count
    even = convert_us / (nchw_us - nhwc_us)
    return float(layers) == count or abs(layers - even) <= BREAK_EVEN_REL * even


def nhwc_pays(times=None, *, pays=None, layers=..., spec=SPEC) -> CheckResult:
    """Lesson 03 hands-on: NCHW, NHWC and the conversion between them, timed; does converting pay?

    Args:
        times: ``dict(nchw_us=..., nhwc_us=..., convert_us=...)``: GPU microseconds per call of the
            convolution in NCHW, in NHWC, and of one conversion (the input to NHWC, the output back).
        pays: whether converting for one call beats running NCHW (True or False).
        layers: the fewest calls in a row, all in NHWC after one conversion, for which it pays, or the
            break-even (a fraction, within `BREAK_EVEN_REL`); None when it never pays.
        spec: the convolution (its layout is set per part).

    Returns:
        A `CheckResult`: right when each part was timed between two events around more than one of
        its calls, nothing raced, was too small or was left allocated, the verdicts are what the
        learner's own times give, and those times are within `TIMES_AGREE` of the layout
        experiment's (median over the parts).
    """
    if not isinstance(times, dict) or set(PARTS) - set(times) or pays is None or layers is ...:
        return emit(
            False,
            "my_layout is dict(nchw_us=..., nhwc_us=..., convert_us=...), GPU microseconds per call; "
            "check.nhwc_pays(my_layout, pays=True or False, layers=a number of calls or None).",
            "no answer yet",
        )
    bad = [k for k in PARTS if isinstance(times[k], bool) or not isinstance(times[k], (int, float))]
    counted = layers is None or (
        isinstance(layers, (int, float)) and not isinstance(layers, bool) and math.isfinite(layers)
    )
    if bad or not isinstance(pays, bool) or not counted:
        what = f"my_layout[{bad[0]!r}] is no number" if bad else f"pays={pays!r}, layers={layers!r}"
        return emit(
            False,
            f"{what}: times in microseconds, pays True or False, layers a number of calls (a fraction is "
            "fine) or None.",
        )
    gpu = current()
    shape = spec.label.replace(f" {spec.layout} ", " ")
    ran = f"Your times of {shape} in NCHW, in NHWC and of the conversion ({gpu.label})."
    problems = cell_problems(gpu) + _timing_problems(gpu, spec)
    unknown = [k for k in PARTS if not math.isfinite(times[k])]
    unavoidable = [m for m in getattr(gpu.device, "missing", {}) if "NCHW <-> NHWC copies" not in m]
    if unknown and not unavoidable:  # the copies launched from Python between events: said with the rest
        problems.append(Problem("no_time", _no_time(gpu, PARTS[unknown[0]])))
    rows, df = _layout(spec)
    if not problems and not unknown:
        problems += _verdict_problems(times, pays, layers)
    theirs = {
        "nchw_us": rows.loc["NCHW", "conv_gpu_us"],
        "nhwc_us": rows.loc["NHWC", "conv_gpu_us"],
        "convert_us": rows.loc["NHWC", "convert_gpu_us"],
    }
    ratio = statistics.median([times[k] / theirs[k] for k in PARTS if k not in unknown] or [math.nan])
    if not problems and not unknown and not 1 / TIMES_AGREE <= ratio <= TIMES_AGREE:
        problems.append(times_far(ratio, "the layout experiment's", gpu))
    if problems:
        return verdict("nhwc_pays", ran, problems, right="", hints=HINTS, names=NAMES)
    if unknown:  # a number the simulated GPU lacks, and no fault of the cell: the experiment's times
        said = took(math.nan, gpu, "Each part was timed between two events around many calls; your times")
        right = _right(theirs, theirs, rows, df, None, spec, gpu)
        return verdict("nhwc_pays", ran, [], right=f"{said}. {right}")
    return verdict("nhwc_pays", ran, [], right=_right(times, theirs, rows, df, ratio, spec, gpu))


def _inside(spec, pick: str) -> str:
    """What the NCHW plan ``pick``'s own layout conversions take, from lesson 10's kernel trace when
    at hand."""
    try:
        trace = result("kernels", at_hand_only=True, spec=spec.replace(layout="NCHW"))
    except LabkitError:
        return ""
    if trace is None:
        return ""
    rows = ok_rows(trace)
    rows = rows[rows["plan_name"] == pick]
    conversions = rows[rows["role"] == "layout conversion"]
    us = float((conversions["kernel_us"] * conversions["launches_per_call"]).sum())
    return (
        f"cuDNN's NCHW plan converts inside, in its workspace: its own conversion kernels take {fmt_us(us)} "
        "a call (lesson 10's trace)."
        if us
        else ""
    )


def _right(times, theirs, rows, df, ratio, spec, gpu) -> str:
    """The verdicts said out, and the learner's times beside the layout experiment's (``ratio`` None:
    the learner's times are not numbers, and ``times`` are the experiment's)."""
    n, h, c = (times[k] for k in PARTS)
    k = calls_to_pay(n, h, c)
    where = measured_where(df)
    pays = "converting pays even for one call" if h + c < n else "converting for one call does not pay"
    one_call = f"NHWC with the conversion takes {(h + c) / n:.1f}x NCHW's time: {pays}."
    sentences = [
        f"By the layout experiment's times ({where}): for one call, {one_call}"
        if ratio is None
        else f"For one call, {one_call}",
        f"Run in NHWC, a call saves {fmt_us(n - h)}: one conversion pays for itself after {k} calls in "
        "a row stay in NHWC. Convert once per network, not per layer."
        if k
        else "NHWC saves nothing here: converting never pays.",
        f"The NCHW plan needs {fmt_bytes(rows.loc['NCHW', 'workspace_bytes'])} of workspace, the NHWC "
        f"plan {fmt_bytes(rows.loc['NHWC', 'workspace_bytes'])}.",
        _inside(spec, rows.loc["NCHW", "plan_name"]),
    ]
    said = " ".join(s for s in sentences if s)
    if ratio is None:
        return said
    both = theirs["nhwc_us"] + theirs["convert_us"]
    names = {**PARTS, "both_us": "NHWC with the conversion"}
    table = "\n".join(parts_beside(names, {**times, "both_us": h + c}, {**theirs, "both_us": both}))
    return (
        f"{said} {why_apart(gpu)} Beside the layout experiment ({where}; your times {ratio:.2f}x its, "
        f"median):\n{table}"
    )
