"""Lesson 04's hands-on cell, ``%%handson fused_graph``: the learner builds conv + bias + ReLU as one
cuDNN graph (``gpu.conv(spec, epilogue="bias_relu")``), runs the same work unfused
(``gpu.unfused(spec)``: the convolution, then CuPy's bias add and ReLU), and times both with CUDA
events, on this GPU or on one simulated from the recording (`labkit.practice`). Its reference
solution and the check, which sets the learner's times beside the fusion experiment's
(`core.result("fusion")`: measured on this GPU live, the recording's otherwise). Microseconds, bytes."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List

from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...practice import current
from ...practice.findings import Problem
from ...practice.fusion import Fused
from ...practice.unfused import Unfused
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

#: the convolution: the lesson's base shape (fp16 NHWC, batch 32)
SPEC = BASE
#: the fused epilogue: conv + bias + ReLU
EPILOGUE = "bias_relu"
#: the learner's time of each path within this factor of the fusion experiment's counts as the same
TIMES_AGREE = 1.25
#: the answer's parts: key -> what it times
PARTS = {"fused_us": "the fused graph", "unfused_us": "the unfused path"}

#: the reference solution of the hands-on cell ``%%handson fused_graph`` (`labkit.session.handson`)
FUSED_GRAPH = '''\
import statistics

gpu, spec = lessons.device(), lessons.base()
fused = gpu.conv(spec, epilogue="bias_relu")  # conv + bias + ReLU: one cuDNN graph, its own plans
unfused = gpu.unfused(spec)  # conv, then CuPy's bias add and ReLU, each writing a tensor
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


def path_us(path):
    """time_us of one path (its heuristic plan), run with a workspace of its own."""
    workspace = gpu.allocate(path.plan.workspace_bytes)
    us = time_us(lambda: path.run(workspace, stream=stream))
    gpu.free(workspace)
    return us


my_fusion = dict(fused_us=path_us(fused), unfused_us=path_us(unfused))
assert check.fused_graph(my_fusion)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"fused_graph": (FUSED_GRAPH, True)}
NAMES = {
    "not_fused": "not the fused graph",
    "no_time": "no time",
    "times_far": "too far from the fusion experiment",
    "swapped": "the two times swapped",
}
HINTS = {
    "swapped": (
        "which of your two timings ran the graph made with an epilogue, and which key did its time go to?",
        "my_fusion['fused_us'] is the time of gpu.conv(spec, epilogue='bias_relu'); 'unfused_us' that of "
        "the convolution and its separate bias and ReLU kernels.",
    ),
    "not_fused": (
        "the fused graph holds the bias and the ReLU too, in the convolution's epilogue. What did you "
        "ask gpu.conv for?",
        'gpu.conv(spec, epilogue="bias_relu") builds conv + bias + ReLU as one cuDNN graph; time that.',
    ),
    "no_time": (
        "on the simulated GPU a time is a number only where the recording holds every cost in it, and it "
        "holds no host time of launching either path from Python. What did your events time besides "
        "replays of a CUDA graph?",
        "capture the calls in a CUDA graph (gpu.capture), launch it once and wait (graph.launch(stream); "
        "stream.synchronize()), then put only graph.launch(stream) between your two events.",
    ),
    "times_far": (
        "what else than the calls themselves did your events measure?",
        "warm up, then put many calls (a CUDA graph of them) between two events and divide by the calls; "
        "take the median of several samples.",
    ),
}


def _labels(spec) -> Dict[str, str]:
    """Each part's calls, as the practice writes them down."""
    return {"fused_us": Fused(spec, EPILOGUE).label, "unfused_us": Unfused(spec).label}


def _timing_problems(gpu, spec) -> List[Problem]:
    """Each path never timed between two events with only its own calls between, or over one call;
    the plain convolution timed where the fused graph was not."""
    timings = gpu.timings[gpu.cell_mark.timings :]
    out = []
    for key, label in _labels(spec).items():
        calls = [t.calls for t in timings if t.convs == (label,)]
        if key == "fused_us" and not calls and any(t.convs == (spec.label,) for t in timings):
            out.append(Problem("not_fused", "you timed the plain convolution: its bias and ReLU ran nowhere"))
        elif problem := calls_problem(calls, PARTS[key]):
            out.append(problem)
    return out


def _fusion(spec):
    """The fusion experiment's bias_relu rows for ``spec``, by path, and its frame."""
    df = result("fusion", spec=spec)
    rows = ok_rows(df)
    return rows[rows["epilogue"] == EPILOGUE].set_index("path"), df


def _no_time(gpu, what: str) -> str:
    """Why ``what`` has no time on a simulated GPU: a path's Python launch stopped the clock."""
    launched = [m for m in getattr(gpu.device, "missing", {}) if "conv + bias + ReLU" in m or "unfused" in m]
    if launched:
        lacks = f"the recording lacks the {launched[0]}"
        return f"{what}: no time, since {lacks} and a simulated clock makes none up"
    return took(math.nan, gpu, what)


def fused_graph(times=None, *, spec=SPEC) -> CheckResult:
    """Lesson 04 hands-on: conv + bias + ReLU built as one cuDNN graph, timed against the unfused path.

    Args:
        times: ``dict(fused_us=..., unfused_us=...)``: GPU microseconds per call of the fused graph
            (``gpu.conv(spec, epilogue="bias_relu")``) and of the unfused path (``gpu.unfused(spec)``).
        spec: the convolution.

    Returns:
        A `CheckResult`: right when the fused graph and the unfused path were each timed between two
        events around more than one of their calls, nothing raced, was too small or was left
        allocated, and the times are within `TIMES_AGREE` of the fusion experiment's (median over
        the two).
    """
    if not isinstance(times, dict) or set(PARTS) - set(times):
        return emit(
            False,
            "my_fusion is dict(fused_us=..., unfused_us=...), GPU microseconds per call; "
            "check.fused_graph(my_fusion).",
            "no answer yet",
        )
    bad = [k for k in PARTS if isinstance(times[k], bool) or not isinstance(times[k], (int, float))]
    if bad:
        return emit(False, f"my_fusion[{bad[0]!r}] is no number: GPU microseconds per call.")
    gpu = current()
    ran = f"Your times of conv + bias + ReLU, {spec.label}, fused and unfused ({gpu.label})."
    problems = cell_problems(gpu) + _timing_problems(gpu, spec)
    unknown = [k for k in PARTS if not math.isfinite(times[k])]
    if not problems and unknown:
        problems.append(Problem("no_time", _no_time(gpu, PARTS[unknown[0]])))
    rows, df = _fusion(spec)
    theirs = {"fused_us": rows.loc["fused", "gpu_us"], "unfused_us": rows.loc["unfused", "gpu_us"]}
    ratio = statistics.median([times[k] / theirs[k] for k in PARTS if k not in unknown] or [math.nan])
    swapped = not unknown and all(
        1 / TIMES_AGREE <= times[a] / theirs[b] <= TIMES_AGREE
        for a, b in (("fused_us", "unfused_us"), ("unfused_us", "fused_us"))
    )
    if not problems and not 1 / TIMES_AGREE <= ratio <= TIMES_AGREE:
        problems.append(
            Problem(
                "swapped", "your fused_us is the experiment's unfused time and your unfused_us its fused time"
            )
            if swapped
            else times_far(ratio, "the fusion experiment's", gpu)
        )
    if problems:
        return verdict("fused_graph", ran, problems, right="", hints=HINTS, names=NAMES)
    return verdict("fused_graph", ran, [], right=_right(times, theirs, rows, df, ratio, gpu))


def _right(times, theirs, rows, df, ratio, gpu) -> str:
    """What fusing bought by the learner's times, and those times beside the fusion experiment's."""
    f, u = times["fused_us"], times["unfused_us"]
    where = measured_where(df)
    fusing = f"makes it {u / f:.1f}x faster" if f < u else f"makes it {f / u:.1f}x slower"
    table = "\n".join(parts_beside(PARTS, times, theirs))
    return (
        f"The fused graph takes {fmt_us(f)} a call, the unfused path {fmt_us(u)}: fusing {fusing}. "
        f"The unfused path writes {fmt_bytes(rows.loc['unfused', 'intermediate_bytes'])} of intermediate "
        "tensors a call that the fused graph keeps in registers. "
        f"{why_apart(gpu)} Beside the fusion experiment ({where}; your times {ratio:.2f}x its, "
        f"median):\n{table}"
    )
