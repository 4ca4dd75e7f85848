"""What is wrong with what a hands-on cell ran: `Problem` s, from a `labkit.practice.Practice`'s log
and, on a simulated GPU, its sanitizer (compute-sanitizer's racecheck and memcheck, on workspaces).

Four kinds, each what compute-sanitizer would call it:

* ``race``: two calls on different streams in flight at once on the same workspace bytes, or
  bytes handed to a call while a call on another stream could still use them (the simulator's
  ``race`` and ``handover``);
* ``too_small``: a call given fewer workspace bytes than its plan asks (none at all included);
* ``use_after_free``: a call given memory that was freed, or freed while a call could still use it;
* ``leak``: bytes still held that were allocated since the mark (`Mark`).

Live, a GPU has no sanitizer: a race shows as wrong outputs (`labkit.practice.conv.Conv.wrong_outputs`),
and a workspace too small or freed is refused before cuDNN runs. Bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Set

#: the simulator's finding kinds -> the kind a check names
SIM_KINDS = {
    "race": "race",
    "handover": "race",
    "too_small": "too_small",
    "invalid_address": "too_small",
    "use_after_free": "use_after_free",
    "freed_in_use": "use_after_free",
}
KINDS = ("race", "too_small", "use_after_free", "leak")
#: the simulator's memcheck kinds: a `Practice` names those of a call it launched itself
MEMCHECK = ("too_small", "invalid_address", "use_after_free")


@dataclass(frozen=True)
class Problem:
    """One thing wrong.

    Attributes:
        kind: one of `KINDS`.
        message: what happened, for the learner.
        nbytes: the bytes involved.
    """

    kind: str
    message: str
    nbytes: int = 0


@dataclass
class Mark:
    """Where a cell's own work begins in a `Practice`'s log (what came before is not judged).

    Attributes:
        launches: launches logged before it.
        timings: timings taken before it.
        problems: the practice's own problems before it.
        sim_findings: the simulator's findings before it (0 live).
        runners: runners made before it.
        allocations: the addresses allocated and not freed then.
        sim_leaks: the messages of the simulator's leaks then (empty live).
    """

    launches: int = 0
    timings: int = 0
    problems: int = 0
    sim_findings: int = 0
    runners: int = 0
    allocations: Set[int] = field(default_factory=set)
    sim_leaks: Set[str] = field(default_factory=set)


def mark(practice) -> Mark:
    """The log's present end: what a check made afterwards judges starts here.

    Args:
        practice: the `labkit.practice.Practice`.

    Returns:
        A `Mark`.
    """
    sim = practice.simulated
    return Mark(
        len(practice.launches),
        len(practice.timings),
        len(practice.problems),
        len(practice.device.findings) if sim else 0,
        len(practice.runners),
        set(practice.memory.allocations),
        {f.message for f in practice.device.leaks()} if sim else set(),
    )


def collect(practice, since: Mark = None) -> List[Problem]:
    """Every `Problem` since ``since``: the practice's own (refused calls), the simulator's findings,
    and the leaks (bytes allocated since the mark and still held).

    Args:
        practice: the `labkit.practice.Practice`.
        since: a `Mark`; default everything.

    Returns:
        The problems, in the order found, the leaks last.
    """
    since = since or Mark()
    out = list(practice.problems[since.problems :])
    if practice.simulated:
        for f in practice.device.findings[since.sim_findings :]:
            said = f.kind in MEMCHECK and f.calls and set(f.calls) <= practice.flagged_calls
            if f.kind in SIM_KINDS and not said:
                out.append(Problem(SIM_KINDS[f.kind], f.message, f.nbytes))
        for f in practice.device.leaks():
            if f.message not in since.sim_leaks:
                out.append(Problem("leak", f.message, f.nbytes))
    else:
        for p, n in practice.memory.allocations.items():
            if p not in since.allocations:
                out.append(Problem("leak", f"{n:,} B of your workspace at 0x{p:x} never freed", n))
    return out


def first_of_each(problems: List[Problem]) -> List[Problem]:
    """The first problem of each kind, in `KINDS` order.

    Args:
        problems: the problems (`collect`).

    Returns:
        At most one `Problem` per kind.
    """
    return [next(p for p in problems if p.kind == k) for k in KINDS if any(p.kind == k for p in problems)]
