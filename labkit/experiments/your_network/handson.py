"""Lesson 09's hands-on cell, ``%%handson network_pass``: the learner writes the report's loop for a
three-layer network under one workspace strategy (each layer's plan and workspace, the peak held,
the pass's GPU time between two events), on this GPU or on one simulated from the recording
(`labkit.practice`); its reference solution and the check, which sets the learner's pass beside
every shipped strategy's on the same layers. Bytes, microseconds."""

from __future__ import annotations

import math
from typing import List

from ... import networks
from ...draw.plots import fmt_bytes
from ...practice import current, findings, passes
from ...practice.findings import Problem
from ...spec import ConvSpec
from ..checking import CheckResult, emit
from ..handson_check import beside, took, verdict
from .request import REPORT_STRATEGIES, strategy_options

#: the reference solution of the hands-on cell ``%%handson network_pass`` (`labkit.session.handson`)
NETWORK_PASS = '''\
from labkit.gpu.workspaces.workspace import Scratchpad

gpu, layers = lessons.device(), lessons.three_layers()


def network_pass(strategy):
    """One pass over `layers` under `strategy`: dict(layers=[(spec.label, plan index, workspace
    bytes) per layer], peak_bytes=the peak workspace held, pass_us=GPU time between two events)."""
    runner = gpu.runner(strategy)  # a Runner on a stream of its own
    start = gpu.event(runner.stream)
    rows = []
    for spec in layers:
        call = runner.run(spec)  # the strategy's workspace for the plan the Runner picks
        rows.append((spec.label, call.plan_index, call.workspace_bytes))
    end = gpu.event(runner.stream)
    end.wait()
    peak = strategy.stats.peak_held_bytes
    runner.close()  # frees what the strategy holds
    return dict(layers=rows, peak_bytes=peak, pass_us=gpu.elapsed_us(start, end))


my_pass = network_pass(Scratchpad())
assert check.network_pass(my_pass)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"network_pass": (NETWORK_PASS, True)}
NAMES = {
    "layers_off": "layers",
    "labels_off": "labels",
    "peak_off": "peak held",
    "part_timed": "part of the pass timed",
}
HINTS = {
    "layers_off": (
        "what does runner.run(spec) tell you about the call it made?",
        "keep, for each layer in order, (spec.label, call.plan_index, call.workspace_bytes) from the "
        "record runner.run returns.",
    ),
    "labels_off": (
        "your plans and workspaces are the Runner's; a layer's label is its spec's own: spec.label.",
        "keep, for each layer in order, (spec.label, call.plan_index, call.workspace_bytes).",
    ),
    "peak_off": (
        "who counts the bytes a strategy holds?",
        "read strategy.stats.peak_held_bytes after the pass, before runner.close().",
    ),
    "part_timed": (
        "where are your two events, around which calls?",
        "record one event before the first layer's call and one after the last's, on the runner's stream.",
    ),
}


def three_layers() -> List[ConvSpec]:
    """ResNet-50's first three convolutions at batch 32, fp16, NHWC (the recorded report's settings):
    the 7x7 stem, then the first block's 1x1 and 3x3.

    Returns:
        The three `labkit.ConvSpec` s, in forward order.
    """
    return [layer.spec for layer in networks.resnet50(batch=32, dtype="fp16", layout="NHWC")[:3]]


def report_strategies(largest_bytes: int) -> list:
    """The network report's strategies as `labkit.practice.passes.shipped_passes` takes them, its
    fixed arena sized for a pass's largest workspace (`REPORT_STRATEGIES`).

    Args:
        largest_bytes: the largest workspace a call of the pass ran with, bytes.

    Returns:
        (name, options) per strategy, in the report's order.
    """
    return [(name, strategy_options(opts, largest_bytes)) for _, name, opts in REPORT_STRATEGIES]


def _same(a, b) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


def _problems(answer: dict, gpu) -> List[Problem]:
    """What is off in the learner's pass: the sanitizer's and leaks, the layers, the peak, the timing."""
    mark = gpu.cell_mark
    out = findings.collect(gpu, mark)
    runners = gpu.runners[mark.runners :]
    if not gpu.simulated:
        out += [
            Problem("leak", f"{fmt_bytes(r.strategy.stats.held_bytes)} still held: runner.close() frees it")
            for r in runners
            if not r.strategy.closed
        ]
    ran = [(c.conv, c.plan_index, c.workspace_bytes) for c in gpu.launches[mark.launches :]]
    said = [tuple(row) if isinstance(row, (list, tuple)) else row for row in answer.get("layers") or []]
    if said != ran:
        labels_only = len(said) == len(ran) and all(
            isinstance(row, tuple) and len(row) == 3 and row[1:] == call[1:] for row, call in zip(said, ran)
        )
        kind = "labels_off" if labels_only else "layers_off"
        out.append(Problem(kind, f"you listed {said[:3]}; the Runner ran {ran[:3]}"))
    peaks = [int(r.strategy.stats.peak_held_bytes) for r in runners]
    if answer.get("peak_bytes") not in peaks:
        out.append(Problem("peak_off", f"you said {answer.get('peak_bytes')!r} B; the strategy held {peaks}"))
    timed = [t for t in gpu.timings[mark.timings :] if _same(t.us, answer.get("pass_us"))]
    if not timed:
        out.append(Problem("no_timing", "pass_us is no time taken with gpu.elapsed_us"))
    elif timed[-1].calls <= 1:
        out.append(Problem("one_call", f"{timed[-1].calls} call between your two events"))
    elif timed[-1].calls < len(ran):
        out.append(Problem("part_timed", f"{timed[-1].calls} of the pass's {len(ran)} calls between them"))
    return out


def network_pass(answer=None) -> CheckResult:
    """Lesson 09 hands-on: the learner's pass over three layers under a strategy.

    Args:
        answer: ``dict(layers=[(label, plan index, workspace bytes), ...], peak_bytes=...,
            pass_us=...)``, what ``network_pass(strategy)`` returns.

    Returns:
        A `CheckResult`: right when the layers are the Runner's calls, the peak is the strategy's,
        the pass was timed between two events around all its calls, no race or under-sized
        workspace was found and nothing is left held.
    """
    if not isinstance(answer, dict) or not {"layers", "peak_bytes", "pass_us"} <= set(answer):
        return emit(
            False,
            "network_pass(strategy) returns dict(layers=[(label, plan, workspace bytes), ...], "
            "peak_bytes=..., pass_us=...).",
            "no answer yet",
        )
    gpu = current()
    runners = gpu.runners[gpu.cell_mark.runners :]
    name = runners[-1].strategy.describe() if runners else "?"
    ran = f"Your pass over {len(three_layers())} layers under {name} ({gpu.label})."
    problems = _problems(answer, gpu)
    if problems:
        return verdict("network_pass", ran, problems, right="", hints=HINTS, names=NAMES)
    largest = max(w for _, _, w in answer["layers"])
    strategies = report_strategies(largest)
    first = passes.shipped_passes(three_layers(), gpu.fresh, warm=False, strategies=strategies)
    later = passes.shipped_passes(three_layers(), gpu.fresh, strategies=strategies)
    rows = [(a.strategy, a.peak_bytes, a.timed_alloc_calls, a.gpu_us, b.gpu_us) for a, b in zip(first, later)]
    alloc = runners[-1].strategy.stats.alloc_calls
    plans = ", ".join(f"plan {p} with {fmt_bytes(w)}" for _, p, w in answer["layers"])
    timed = took(answer["pass_us"], gpu, "your pass between its events")
    return verdict(
        "network_pass",
        ran,
        [],
        right=(
            f"Layers: {plans}. Peak held {fmt_bytes(answer['peak_bytes'])}; {timed}; nothing left "
            "held. Beside the report's strategies over the same layers, each on a fresh GPU of this kind, "
            "the fixed arena sized as the report sizes it, for the largest workspace of the pass "
            f"({fmt_bytes(largest)} here): allocations in the first pass; GPU time of the first pass, "
            "from nothing held, and of a later one.\n"
            + beside(
                rows,
                mine=("you: " + name, answer["peak_bytes"], alloc, answer["pass_us"]),
                time="first pass",
                more=("later pass",),
            )
        ),
    )
