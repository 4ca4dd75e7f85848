"""Lesson 05's hands-on cell, ``%%handson time_every_plan``: the learner times every plan of a graph
with CUDA events; its reference solution, and the check that compares the learner's times with
labkit's autotune on the GPU."""

from __future__ import annotations

import math
import statistics

from ...draw.plots import fmt_us, ok_rows
from ...spec import ConvSpec
from ..checking import CheckResult, emit
from ..core import result
from .exercises import NCHW

#: the reference solution of the hands-on cell ``%%handson time_every_plan`` (`labkit.session.handson`)
TIME_EVERY_PLAN = """\
import statistics

import cupy

from labkit.gpu import engine
from labkit.session import lessons

graph = engine.get_graph(lessons.base(layout="NCHW"))  # every plan cuDNN offers, built
ops = engine.Operands(graph.spec)  # random inputs and an output buffer on the GPU
stream = cupy.cuda.Stream(non_blocking=True)
start, end = cupy.cuda.Event(), cupy.cuda.Event()
for plan in graph.runnable:
    workspace = cupy.empty(plan.workspace_bytes, dtype=cupy.uint8)  # the plan's own workspace
    conv = graph.bind(ops.arrays, workspace.data.ptr, plan.index, stream)
    with stream:
        for _ in range(3):  # warm-up: loads the kernels, fills the caches, wakes the clocks
            conv.run()
        start.record(stream)
        conv.run()
        end.record(stream)
        end.synchronize()
        one_ms = cupy.cuda.get_elapsed_time(start, end)
        calls = max(1, min(20, int(2.0 / max(one_ms, 1e-3))))  # about 2 ms of calls per sample
        samples = []
        for _ in range(7):  # the median of repeats, not one sample
            start.record(stream)
            for _ in range(calls):
                conv.run()
            end.record(stream)
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0 / calls)
    my_times[plan.index] = statistics.median(samples)
stream.synchronize()
engine.release_handle(stream)
"""
#: hands-on cells: name -> (reference solution source, what it needs)
HANDS_ON = {
    "time_every_plan": (TIME_EVERY_PLAN, "a CUDA GPU with cuDNN (live mode)"),
}
#: a learner's time for a plan within this factor of labkit's counts as the same measurement
TIMES_AGREE = 1.25


def plan_times(times, *, spec: ConvSpec = NCHW) -> CheckResult:
    """Check a learner's timings of every plan (hands-on ``time_every_plan``) against labkit's
    autotune of the same graph (the plans table the lesson draws; live, measured on this GPU).

    Args:
        times: plan index -> GPU microseconds per call, as the learner measured them.
        spec: the convolution timed (the lesson's fp16 NCHW base).

    Returns:
        A `CheckResult`: right when every plan is timed, the learner's median ratio to labkit's times
        is within `TIMES_AGREE`, and the learner's fastest plan is labkit's fastest or within 3% of it.
    """
    from ... import env

    m = env.mode()
    if not m.live:
        return emit(
            False, f"this check times plans on the GPU; labkit is in recorded mode ({m.reason}).", "skipped"
        )
    if not isinstance(times, dict) or not times:
        return emit(
            False, "my_times is empty: the hands-on cell fills it, one entry per plan.", "no answer yet"
        )
    bad = [k for k, v in times.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0]
    if bad:
        return emit(
            False, f"plans {sorted(bad)[:6]} have no time in microseconds: replace the ... with your timing."
        )
    ok = ok_rows(result("plans", spec=spec)).set_index("plan_index")
    missing = sorted(set(ok.index) - set(times))
    if missing:
        return emit(
            False, f"{len(missing)} plans not timed yet (e.g. plan {missing[0]}): time every runnable plan."
        )
    ratios = {i: times[i] / float(ok.loc[i, "gpu_us"]) for i in ok.index}
    med = statistics.median(ratios.values())
    mine = min(ok.index, key=lambda i: times[i])
    best = int(ok["gpu_us"].idxmin())
    close = float(ok.loc[mine, "gpu_us"]) <= 1.03 * float(ok.loc[best, "gpu_us"])
    far = max(ratios, key=lambda i: abs(math.log(ratios[i])))
    said = (
        f"your times are {med:.2f}x labkit's (median over {len(ok)} plans; the farthest, plan {far}, "
        f"{ratios[far]:.2f}x). Your fastest: plan {mine}; labkit's: plan {best} "
        f"({fmt_us(ok.loc[best, 'gpu_us'])})."
    )
    if not 1 / TIMES_AGREE <= med <= TIMES_AGREE:
        return emit(
            False,
            said + " Too far apart: warm up before timing, time many calls between two events, and take "
            "the median of several samples.",
        )
    if not close:
        return emit(False, said + " Your fastest is not labkit's (nor within 3% of it): time more repeats.")
    return emit(
        True,
        said + " labkit replays a CUDA graph of the calls instead of launching each from Python: its "
        "times leave out the launch gaps yours may include.",
    )
