"""What hands-on checks are written with: a verdict on what a cell ran on a `labkit.practice.Practice`,
with a hint that leads, as the exercises' do (`labkit.experiments.exercise`): the first time a
kind of problem is found, its first hint; from then on, its second.

A verdict's first line says what ran and where its numbers come from ("simulated from the H100 SXM
recording" or "measured on this H100 SXM"); then each kind of problem found, once, with what the
simulator's sanitizer (or the live check) saw; then one hint. Right, it says what was judged and
sets the learner's numbers beside the shipped strategies', from the same kind of device.
"""

from __future__ import annotations

import collections
import math
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from .. import env
from ..draw.plots import fmt_bytes, fmt_us
from ..practice import findings
from ..practice.findings import KINDS, Problem
from .checking import CheckResult, emit

#: what each kind of problem is called in a verdict
NAMES = {
    "race": "race",
    "too_small": "workspace too small",
    "use_after_free": "use after free",
    "leak": "leak",
    "wrong_output": "wrong output",
    "one_call": "one call timed",
    "no_timing": "not timed with events",
    "not_divided": "not divided by the calls",
}
#: kind -> (first hint, second hint); a check may add its own kinds
HINTS: Dict[str, Tuple[str, str]] = {
    "race": (
        "two calls on different streams used the same workspace bytes with nothing ordering them. "
        "When is a workspace free again: when run() or put returns, or later?",
        "a workspace is its call's until the call's kernels have run on its stream; run() and put "
        "come as soon as they are queued. Give each stream its own buffer, or make the next stream "
        "wait for an event recorded on the stream that used the buffer last.",
    ),
    "too_small": (
        "the plan was given fewer bytes than it asks for. Where does a plan say how much it needs?",
        "allocate at least the plan's workspace_bytes (a strategy: at least req.nbytes) for the plan "
        "that runs, and hand that buffer to the call.",
    ),
    "use_after_free": (
        "a call used memory that had been given back. What did the call still need when it was freed?",
        "free a workspace only after the last call that uses it was launched; gpu.free (cudaFree) "
        "then waits for the GPU to finish with it.",
    ),
    "leak": (
        "some memory you allocated is still held. What gives it back?",
        "free every buffer you allocate once nothing can still use it: gpu.free(ptr) in a cell, "
        "self._free(ptr, nbytes) in a strategy's _close, runner.close() for a Runner.",
    ),
    "wrong_output": (
        "an output is not what the convolution computes. Did every call run, with its own workspace?",
        "run each call with a workspace of its own size that no other stream's call is using, and "
        "look at the outputs only after the GPU has run them.",
    ),
    "one_call": (
        "one call between two events is mostly the events' own cost and the clock's resolution. "
        "How many calls ran between your events?",
        "warm up first, then record an event, launch many calls (or one CUDA graph of many), record "
        "another, wait for it, and divide the time by the number of calls.",
    ),
    "no_timing": (
        "no time was taken between two events for this. Which calls measure GPU time?",
        "start = gpu.event(stream); launch the calls; end = gpu.event(stream); end.wait(); then "
        "gpu.elapsed_us(start, end).",
    ),
}
HINTS["not_divided"] = (
    "your times are a whole number of times the experiment's. How many calls ran between your two "
    "events, and did you divide by them?",
    "one sample between two events around a graph replay is the time of every call in the graph: "
    "divide gpu.elapsed_us(start, end) by the number of calls the graph holds.",
)
#: times this close to the calls between the learner's events, as a ratio, read as not divided by them
NOT_DIVIDED_WITHIN = 0.1
_tries: collections.Counter = collections.Counter()


def times_far(ratio: float, whose: str, practice) -> Problem:
    """The problem of times too far from an experiment's: "not_divided" where the ratio is about the
    number of calls between the learner's events (a graph replay's time, not divided by its calls),
    else "times_far".

    Args:
        ratio: the learner's times over the experiment's (their median).
        whose: whose times they were set beside, e.g. "the layout experiment's".
        practice: the `labkit.practice.Practice` the cell ran on (its timings say how many calls ran
            between each pair of events).

    Returns:
        The `Problem`.
    """
    said = f"your times are {ratio:.2f}x {whose} (median)"
    calls = calls_timed(practice)
    if calls >= 2 and abs(ratio / calls - 1) <= NOT_DIVIDED_WITHIN:
        return Problem("not_divided", f"{said}, and {calls} calls ran between your events")
    return Problem("times_far", said)


def calls_timed(practice) -> int:
    """How many calls ran between a pair of the learner's events, the median over this cell's timings.

    Args:
        practice: the `labkit.practice.Practice` the cell ran on.

    Returns:
        The number of calls; 0 where nothing was timed.
    """
    timings = practice.timings[practice.cell_mark.timings :]
    return round(statistics.median(t.calls for t in timings)) if timings else 0


def cell_problems(practice) -> List[Problem]:
    """What went wrong in this cell: the sanitizer's findings (`labkit.practice.findings.collect`),
    else the count of wrong outputs.

    Args:
        practice: the `labkit.practice.Practice` the cell ran on.

    Returns:
        The problems; wrong outputs are said only where nothing else was found.
    """
    out = findings.collect(practice, practice.cell_mark)
    wrong = sum(c.wrong_outputs() for c in practice.convs)
    if wrong and not out:
        out.append(Problem("wrong_output", f"{wrong} outputs are wrong"))
    return out


def calls_problem(calls: Sequence[int], what: str) -> Optional[Problem]:
    """What is off with the timings of one thing: none between two events, or one call at most.

    Args:
        calls: how many of its calls ran between each pair of events that timed only its calls.
        what: the thing, e.g. "the fused graph" or "plan 3".

    Returns:
        A "no_timing" or "one_call" `Problem`; None when some pair of events timed more than one call.
    """
    if not calls:
        return Problem("no_timing", f"{what}: no two events with only its calls between them")
    if max(calls) <= 1:
        return Problem("one_call", f"{what}: {max(calls)} call between your two events")
    return None


def measured_where(df) -> str:
    """Where an experiment's result was measured, as a verdict says it.

    Args:
        df: the experiment's result (its ``attrs`` hold ``mode`` and ``gpu``).

    Returns:
        "recorded on the <GPU>" for a recording's result, else "measured on this GPU".
    """
    if df.attrs.get("mode") == "recorded":
        return f"recorded on the {env.gpu_label(df.attrs.get('gpu'))}"
    return "measured on this GPU"


def parts_beside(parts: Dict[str, str], mine: Dict[str, float], theirs: Dict[str, float]) -> List[str]:
    """A table of the learner's time of each part beside the experiment's, without a title row.

    Args:
        parts: key -> what the part times, e.g. ``{"fused_us": "the fused graph"}``.
        mine: key -> the learner's microseconds per call.
        theirs: key -> the experiment's microseconds per call.

    Returns:
        The table's lines, a header first; each part's name padded to the longest.
    """
    width = max(len(v) for v in parts.values())
    lines = [f"  {'':<{width}}  {'yours':>10}  {'the experiment':>14}"]
    return lines + [f"  {parts[k]:<{width}}  {fmt_us(mine[k]):>10}  {fmt_us(theirs[k]):>14}" for k in parts]


def hint(check: str, kind: str, hints: Optional[Dict[str, Tuple[str, str]]] = None) -> str:
    """The hint for ``kind`` in ``check``: its first the first time, its second after that.

    Args:
        check: the check's name.
        kind: the problem's kind.
        hints: a check's own hints, before `HINTS`.

    Returns:
        The hint.
    """
    pair = (hints or {}).get(kind) or HINTS[kind]
    _tries[check, kind] += 1
    return pair[0] if _tries[check, kind] == 1 else pair[1]


def forget() -> None:
    """Start every hint over (for the tests)."""
    _tries.clear()


def ordered(problems: Sequence[Problem]) -> List[Problem]:
    """The first problem of each kind: the sanitizer's kinds in `KINDS` order, then the others as found.

    Args:
        problems: what was found.

    Returns:
        One `Problem` per kind; its message counts the others like it, its bytes are the kind's total.
    """
    kinds = [k for k in KINDS if any(p.kind == k for p in problems)]
    kinds += [p.kind for p in problems if p.kind not in kinds and p.kind not in KINDS]
    out = []
    for k in dict.fromkeys(kinds):
        same = [p for p in problems if p.kind == k]
        more = f" (and {len(same) - 1} more like it)" if len(same) > 1 else ""
        out.append(Problem(k, same[0].message + more, sum(p.nbytes for p in same)))
    return out


def verdict(
    check: str,
    ran: str,
    problems: Sequence[Problem],
    *,
    right: str,
    hints: Optional[Dict[str, Tuple[str, str]]] = None,
    names: Optional[Dict[str, str]] = None,
) -> CheckResult:
    """Print a hands-on check's verdict.

    Args:
        check: the check's name (its hints count per name).
        ran: what ran and where its numbers come from, one sentence.
        problems: what is wrong (none: correct).
        right: what to say when nothing is wrong (the numbers beside the shipped strategies').
        hints: the check's own hints, by kind.
        names: the check's own names for its kinds.

    Returns:
        The `CheckResult`.
    """
    if not problems:
        return emit(True, f"{ran}\n{right}")
    first = ordered(problems)
    said = {**NAMES, **(names or {})}
    lines = [ran] + [f"  {said.get(p.kind, p.kind)}: {p.message}" for p in first]
    lines.append(f"Hint: {hint(check, first[0].kind, hints)}")
    return emit(False, "\n".join(lines))


def us(value: float) -> str:
    """A time for a verdict's table.

    Args:
        value: microseconds; NaN when a simulated clock stopped.

    Returns:
        The time as `fmt_us` writes it; "not recorded" for NaN.
    """
    return fmt_us(value) if known(value) else "not recorded"


def known(value) -> bool:
    """Whether a value is a finite number (a simulated time the recording held all it needs for).

    Args:
        value: anything.

    Returns:
        True for a finite int or float (not a bool).
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def why_apart(practice) -> str:
    """Why the learner's times, right as they may be, are not the experiment's to the digit.

    Args:
        practice: the `labkit.practice.Practice` the cell ran on.

    Returns:
        A sentence.
    """
    if practice.simulated:
        return (
            "A simulated GPU times each call from its own calibration on that GPU where it has one "
            "(back-to-back CUDA-graph replays, data/bench/sim_costs), else from the recording's plan "
            "tables, and adds the host's launch costs: a right loop lands near the experiment's times, "
            "not on them."
        )
    return (
        "Your loop and the experiment timed the same calls at different moments on this GPU: they "
        "differ by the calls' run-to-run noise."
    )


def took(value, practice, what: str) -> str:
    """``what`` and its time, or why a simulated GPU has none.

    Args:
        value: microseconds, or NaN.
        practice: the `labkit.practice.Practice` it came from.
        what: what was timed, e.g. "your pass between its events".

    Returns:
        A clause, e.g. "your pass between its events: 150.4 us".
    """
    if known(value):
        return f"{what}: {fmt_us(value)}"
    lacked = list(getattr(practice.device, "missing", {}))
    why = lacked[0] if lacked else "a number it needs"
    return f"{what}: no time, since the recording lacks the {why} and a simulated clock makes none up"


def beside(rows: Sequence[tuple], *, mine: tuple, time: str, more: Sequence[str] = ()) -> str:
    """A table of peak bytes, allocations and times per strategy, the learner's row first.

    Args:
        rows: (name, peak bytes, allocations, microseconds, *more microseconds) per shipped strategy.
        mine: the learner's row (a missing time reads "-").
        time: what the time column is, e.g. "host time per call".
        more: what each further time column is.

    Returns:
        The table's lines, a header first.
    """
    width = max(len(r[0]) for r in [mine, *rows])
    heads = [time, *more]
    cols = [max(14, len(h)) for h in heads]
    head = f"  {'':<{width}}  {'peak held':>10}  {'allocations':>11}  " + "  ".join(
        f"{h:<{c}}" for h, c in zip(heads, cols)
    )
    lines = [head.rstrip()]
    for name, peak, allocs, *times in [mine, *rows]:
        cells = [
            us(t) if i < len(times) else "-" for i, t in enumerate(times + [None] * (len(heads) - len(times)))
        ]
        lines.append(
            (
                f"  {name:<{width}}  {fmt_bytes(peak):>10}  {allocs:>11}  "
                + "  ".join(f"{c:<{w}}" for c, w in zip(cells, cols))
            ).rstrip()
        )
    return "\n".join(lines)
