"""Lesson 08's hands-on cell, ``%%handson other_gpu``: the learner's own timing code, run unchanged on
every GPU of the lesson (`labkit.practice.gpus`: this GPU live and each other shipped recording's GPU
simulated; in recorded mode every one simulated from its recording). Its reference solution and the
check, which sets each GPU's time beside that GPU's plans experiment (live: measured here; simulated:
its recording's) and reads the ratio between the GPUs against their datasheets (`labkit.ceilings`).
Microseconds."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List

from ...draw.plots import fmt_us, ok_rows
from ...practice import findings, last_gpus
from ...practice.findings import Problem
from ..checking import CheckResult, emit
from ..core import BASE, request_of, result
from ..handson_check import calls_problem, times_far, took, verdict

#: the convolution: the lessons' base (fp16 NHWC, batch 32)
SPEC = BASE
#: a GPU's time within this factor of its plans experiment's counts as the same measurement
TIMES_AGREE = 1.25

#: the reference solution of the hands-on cell ``%%handson other_gpu`` (`labkit.session.handson`)
OTHER_GPU = '''\
import statistics

spec = lessons.base()
CALLS = 20


def conv_us(gpu):
    """GPU microseconds per call of spec's heuristic plan on `gpu`: a warm-up call, a CUDA graph of
    CALLS calls replayed once untimed, then the median of 5 replays, each between two events."""
    conv, stream = gpu.conv(spec), gpu.stream()
    workspace = gpu.allocate(conv.plan.workspace_bytes)
    run = lambda: conv.run(workspace, stream=stream)
    run()
    stream.synchronize()
    graph = gpu.capture(lambda: [run() for _ in range(CALLS)], stream)
    graph.launch(stream)
    stream.synchronize()
    samples = []
    for _ in range(5):
        start = gpu.event(stream)
        graph.launch(stream)
        end = gpu.event(stream)
        end.wait()
        samples.append(gpu.elapsed_us(start, end) / CALLS)
    gpu.free(workspace)
    return statistics.median(samples)


my_gpus = {name: conv_us(gpu) for name, gpu in lessons.gpus().items()}
assert check.other_gpu(my_gpus)
'''
NAMES = {"times_far": "too far from that GPU's plans experiment", "not_every_gpu": "not every GPU"}
HINTS = {
    "not_every_gpu": (
        "the lesson compares the same code on every GPU lessons.gpus() gives. Which did you leave out?",
        "my_gpus = {name: conv_us(gpu) for name, gpu in lessons.gpus().items()}: one time per GPU, by name.",
    ),
    "times_far": (
        "what else than the calls themselves did your events measure?",
        "warm up, then put many calls (a CUDA graph of them) between two events and divide by the calls; "
        "take the median of several samples.",
    ),
}


def _theirs(gpu, spec) -> float:
    """The heuristic pick's time in ``gpu``'s plans experiment: its recording's when simulated, this
    session's (measured here) when live."""
    if gpu.simulated:
        rec = gpu.device.recorded.recording
        df = rec.lookup("plans", request_of("plans", spec=spec))
    else:
        df = result("plans", spec=spec)
    rows = ok_rows(df)
    return float(rows[rows["heuristic_pick"].astype(bool)].iloc[0]["gpu_us"])


def _problems(gpus: dict, spec, timed) -> List[Problem]:
    """Every GPU's findings (race, leak, workspace too small...) and its timings of the convolution;
    a GPU with no time in ``timed`` (said so already) is not said to lack events too."""
    out: List[Problem] = []
    for name, gpu in gpus.items():
        if name not in timed:
            continue
        for p in findings.collect(gpu, gpu.cell_mark):
            out.append(Problem(p.kind, f"on the {name}: {p.message}", p.nbytes))
        calls = [t.calls for t in gpu.timings[gpu.cell_mark.timings :] if t.convs == (spec.label,)]
        problem = calls_problem(calls, f"on the {name}")
        if problem:
            out.append(problem)
    return out


def other_gpu(times=None, *, spec=SPEC) -> CheckResult:
    """Lesson 08 hands-on: the same timing code on every GPU of the lesson.

    Args:
        times: GPU name (as ``lessons.gpus()`` names it) -> GPU microseconds per call of ``spec``'s
            heuristic plan on that GPU.
        spec: the convolution.

    Returns:
        A `CheckResult`: right when every GPU was timed between two events around more than one call,
        nothing raced, was too small or was left allocated on any, and each time is within
        `TIMES_AGREE` of that GPU's plans experiment (median over the GPUs).
    """
    gpus = last_gpus()
    ok = isinstance(times, dict) and times and all(isinstance(v, (int, float)) for v in times.values())
    if not ok or not gpus:
        return emit(
            False,
            "my_gpus is {GPU name: GPU microseconds per call}, one entry per GPU of lessons.gpus(); "
            "check.other_gpu(my_gpus).",
            "no answer yet",
        )
    each = "; ".join(f"the {n} {g.label}" for n, g in gpus.items())
    ran = f"Your code on {len(gpus)} GPUs: {each}."
    problems = []
    missing = [n for n in gpus if n not in times]
    if missing:
        problems.append(Problem("not_every_gpu", f"no time for the {', '.join(missing)}"))
    problems += _problems(gpus, spec, times)
    theirs = {n: _theirs(g, spec) for n, g in gpus.items()}
    known = {n: float(times[n]) for n in gpus if n in times and math.isfinite(times[n])}
    ratio = statistics.median([known[n] / theirs[n] for n in known] or [math.nan])
    if not problems and known and not 1 / TIMES_AGREE <= ratio <= TIMES_AGREE:
        problems.append(times_far(ratio, "the plans experiments'", gpus[next(iter(known))]))
    if problems:
        return verdict("other_gpu", ran, problems, right="", hints=HINTS, names=NAMES)
    return verdict("other_gpu", ran, [], right=_right(times, theirs, gpus, spec))


def _right(times: Dict[str, float], theirs: Dict[str, float], gpus: dict, spec) -> str:
    """Each GPU's time beside its plans experiment's, the ratio between the first two, and their
    datasheets' ratios."""
    names = list(gpus)
    lines = [f"  {'':<12}  {'yours':>10}  {'its plans experiment':>20}  {'TFLOP/s':>8}"]
    for n in names:
        t = times[n]
        shown = fmt_us(t) if math.isfinite(t) else "no time"
        tflops = f"{spec.flops / (t * 1e-6) / 1e12:.0f}" if math.isfinite(t) else "-"
        lines.append(f"  {n:<12}  {shown:>10}  {fmt_us(theirs[n]):>20}  {tflops:>8}")
    said = []
    for n in names:
        if not math.isfinite(times[n]):
            timed = took(math.nan, gpus[n], f"On the {n}, your time")
            said.append(f"{timed}: its plans experiment's stands in.")
    a, b = names[0], names[1] if len(names) > 1 else names[0]
    use = {n: times[n] if math.isfinite(times[n]) else theirs[n] for n in names}
    if a != b:
        said.append(
            f"The {b} takes {use[b] / use[a]:.2f}x the {a}'s time for this call (its plans experiments: "
            f"{theirs[b] / theirs[a]:.2f}x)."
        )
        ca, cb = gpus[a].ceiling, gpus[b].ceiling
        if ca is not None and cb is not None:
            pa, pb = ca.peak_tflops(spec.dtype), cb.peak_tflops(spec.dtype)
            bw = cb.bandwidth_bytes_per_s / ca.bandwidth_bytes_per_s
            r, by_math, by_bytes = use[b] / use[a], pa / pb, 1 / bw
            nearer = "its math" if abs(r - by_math) <= abs(r - by_bytes) else "its memory traffic"
            said.append(
                f"On paper the {b} has {pb / pa:.2f}x the {a}'s {spec.dtype} peak and {bw:.2f}x its memory "
                f"bandwidth (labkit.ceilings): a call held by its math would take {by_math:.2f}x the time, "
                f"one held by its memory traffic {by_bytes:.2f}x. Your {r:.2f}x is nearer {nearer}."
            )
    sentences, rows = " ".join(said), "\n".join(lines)
    return f"{sentences}\n{rows}"
