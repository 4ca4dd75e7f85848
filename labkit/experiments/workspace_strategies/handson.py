"""Lesson 02's hands-on cells: a workspace strategy the learner writes, its reference solution
(`labkit.session.handson`) and its check (`labkit.gpu.workspaces.strategy_check`, on a GPU)."""

from __future__ import annotations

from ...draw.plots import (
    fmt_bytes,
    fmt_us,
)
from ...practice import current, passes
from ...practice.findings import Problem
from ..checking import CheckResult, emit, say
from ..handson_check import beside, verdict

# ---- hands-on: a strategy of your own ---------------------------------------------------------------
#: the reference solution of lesson 02's hands-on cell (`labkit.session.handson`)
OWN_STRATEGY_SOURCE = '''\
from labkit.gpu.workspaces.workspace import Strategy


class MyStrategy(Strategy):
    """One buffer per (stream, size), kept until close: no allocation once warm, and a stream
    never gets bytes another stream's call may still be using."""

    name = "my_strategy"

    def __init__(self):
        super().__init__()
        self.kept = {}  # (stream, bytes) -> device pointer

    def _get(self, req):
        key = (req.stream_ptr, req.nbytes)
        if key not in self.kept:
            self.kept[key] = self._malloc(req.nbytes, "my workspace")
        return self.kept[key], req.nbytes

    def _close(self):
        for (_, nbytes), ptr in self.kept.items():
            self._free(ptr, nbytes)
        self.kept.clear()
'''
OWN_STRATEGY_CHECK_SOURCE = "assert check.own_strategy(MyStrategy)\n"


def _verdict_line(v) -> str:
    races = "race: hands bytes still in use to another stream" if v.races else "no race"
    left = fmt_bytes(v.leaked_bytes) if v.leaks else "0 B"
    return f"  {v.strategy}: peak {fmt_bytes(v.peak_bytes)}, {left} left after close, {races}"


def own_strategy(strategy=None) -> CheckResult:
    """Lesson 02 hands-on: run your `Strategy` through the Runner beside the built-in ones (GPU).

    Args:
        strategy: your `labkit.gpu.workspaces.workspace.Strategy` subclass.

    Returns:
        A `CheckResult`: correct when every output matches float64, nothing is left after
        ``close()`` and no call got bytes another stream's call could still be using.
    """
    if strategy is None:
        return emit(
            False, "pass your Strategy subclass: check.own_strategy(MyStrategy)", lead="no answer yet"
        )
    gpu = current()
    if gpu.simulated:
        return _own_strategy_simulated(strategy, gpu)
    from ...gpu.workspaces import strategy_check  # heavy: CuPy, live only

    mine, *others = strategy_check.compare(strategy)
    lines = []
    if mine.error:
        lines.append(f"your strategy raised {mine.error} (get must return (device pointer, bytes))")
    if mine.too_small:
        lines.append(f"too small: {mine.too_small}")
    if not mine.outputs_ok and not (mine.error or mine.too_small):
        lines.append(f"wrong outputs: worst relative error {mine.worst_rel_error:.2e} against float64")
    if mine.leaks:
        lines.append(
            f"leak: {fmt_bytes(mine.leaked_bytes)} of device memory still taken after close() "
            f"(your books say {fmt_bytes(mine.books_held_after_close)} held): free every buffer in _close"
        )
    for r in mine.races[:1]:
        lines.append(
            f"race: a call on one stream got {fmt_bytes(r.overlap_bytes)} that a call on another stream "
            f"was still to use: the second could start {fmt_us(r.lead_us)} before the first had finished "
            "with them. A workspace is its call's until the kernels have run on the call's stream, not "
            "until put (put comes as soon as they are queued)"
        )
    table = "\n".join(_verdict_line(v) for v in [mine, *others])
    if mine.ok:
        return say(
            True,
            f"{mine.calls} calls, every output right against float64 (worst relative error "
            f"{mine.worst_rel_error:.1e}); peak {fmt_bytes(mine.peak_bytes)} held "
            f"(the largest workspace asked: {fmt_bytes(mine.largest_request_bytes)}); nothing left after "
            f"close(); no race on two streams; {fmt_us(mine.host_us_per_call)} host time per call. "
            f"Beside the built-ins:\n{table}",
        )
    failures = "; ".join(lines)
    return say(False, f"{failures}.\nThe built-ins, checked the same way:\n{table}")


#: hints for what only a strategy can get wrong
STRATEGY_HINTS = {
    "error": (
        "your strategy raised an error. What must _get return?",
        "_get(req) returns (device pointer, usable bytes): self._malloc(req.nbytes, 'my workspace') "
        "makes a buffer; keep it, and free it in _close.",
    ),
    "too_small": (
        "a call was handed fewer bytes than its plan asks for. The passes run several convolutions: was "
        "the buffer you handed out made for an earlier, smaller request?",
        "before handing out a kept buffer, compare its size with req.nbytes; when it is smaller, free it "
        "and allocate req.nbytes (or keep one buffer per size, as the key of your dict).",
    ),
}


def _sim_row(r) -> tuple:
    """One strategy's row of the verdict's table, its name flagged where it raced or leaked."""
    flags = [
        k for k, on in (("race", any(p.kind == "race" for p in r.problems)), ("leak", r.leaked_bytes)) if on
    ]
    name = f"{r.strategy} ({', '.join(flags)})" if flags else r.strategy
    return (name, r.peak_bytes, r.timed_alloc_calls, r.host_us_per_call)


def _own_strategy_simulated(strategy, gpu) -> CheckResult:
    """`own_strategy` on a GPU simulated from the recording: `labkit.practice.passes.check_simulated`."""
    mine, *others = passes.check_simulated(strategy, gpu.fresh)
    problems = list(mine.problems)
    if mine.error:
        problems.insert(0, Problem("error", f"your strategy raised {mine.error}"))
    if mine.corrupt and not problems:
        problems.append(Problem("wrong_output", f"{mine.corrupt} calls' outputs are corrupt"))
    ran = (
        f"Your strategy on {len(passes.SIM_CHECK_SPECS)} convolutions: {passes.PASSES} passes on one "
        f"stream to warm up and {passes.PASSES} more timed, then one pass to warm up and one timed on two "
        f"streams sharing it ({gpu.label}; its sanitizer checked every workspace)."
    )
    table = beside([_sim_row(r) for r in others], mine=_sim_row(mine), time="host time per call")
    largest = max((p[2] for p in mine.plans), default=0)
    return verdict(
        "own_strategy",
        ran,
        problems,
        hints=STRATEGY_HINTS,
        names={"error": "error"},
        right=(
            "No workspace too small, none handed to a call on the other stream while a call could still "
            f"use it, nothing left after close(); peak {fmt_bytes(mine.peak_bytes)} held (the largest "
            f"workspace asked: {fmt_bytes(largest)}). Beside the built-ins, each checked the same way on a "
            f"fresh GPU of this kind (allocations in the {passes.PASSES} timed passes, after the "
            f"{passes.PASSES} warm-up passes; host time per call, the median):\n{table}"
        ),
    )
