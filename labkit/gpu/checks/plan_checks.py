"""Which plans compute the right result: one verdict per (convolution, plan) against float64.

cuDNN offers plans that run without an error and return wrong numbers (``docs/wrong-plans.md``
lists the ones seen, with their smallest reproductions). labkit runs each plan of a convolution
once on seeded inputs and compares it with the float64 reference (`labkit.gpu.cudnn.reference_runs.judge`)
before the plan is timed, chosen, cached or saved (`labkit.gpu.cudnn.conv_graph.ConvGraph.check`). A plan
whose relative error is over the dtype's tolerance is excluded for that convolution; plan tables
show it as ``wrong result`` with its error, never as a time.

This module is the bookkeeping only (no CuPy, no cuDNN): the `Verdict`, the process's memory of
verdicts (`BOOK`, keyed by spec, epilogue and plan name), the sentences a result carries when the
heuristic's pick was wrong, and a verdict's form inside a saved plan (`as_info`, `from_info`;
saved plans are keyed by the cuDNN backend and frontend versions, so a verdict is never carried
to another cuDNN).
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass
from typing import List, Optional, Tuple

#: how a plan table's ``status`` starts for a plan whose result was wrong
WRONG = "wrong result"
#: how it starts for a plan that raised when it was run to be checked
FAILED = "failed when checked"


def _number(value: float) -> str:
    """A relative error for a sentence: 1.4, 0.0231, 3.1e-05, or "inf"."""
    if not math.isfinite(value):
        return "inf (the output holds NaN or inf)"
    if value == 0:
        return "0"
    return f"{value:.2g}" if value >= 0.1 else f"{value:.2e}" if value < 1e-3 else f"{value:.3g}"


def wrong_status(rel_error: float, tolerance: float) -> str:
    """The status of a plan whose result was wrong.

    Args:
        rel_error: its relative error against float64.
        tolerance: the largest accepted.

    Returns:
        e.g. ``wrong result: relative error 1.4 vs float64 (tolerance 1.00e-02)``.
    """
    return f"{WRONG}: relative error {_number(rel_error)} vs float64 (tolerance {tolerance:.2e})"


def is_wrong(status) -> bool:
    """Whether a plan table's ``status`` says the plan computed a wrong result or failed its check.

    Args:
        status: the status.

    Returns:
        True when it starts with `WRONG` or `FAILED`.
    """
    return str(status).startswith((WRONG, FAILED))


@dataclass(frozen=True)
class Verdict:
    """One plan of one convolution, run once and compared with the float64 reference.

    Attributes:
        plan_name: cuDNN's name of the plan (engine and knobs, e.g. ``eng7_k24=29``).
        rel_error: ||out - ref||_2 / ||ref||_2 (inf when the output holds NaN or inf).
        tolerance: the largest relative error accepted for the spec (`reference.tolerance_for`).
        max_abs_error: max |out - ref|.
        error: what the plan raised when run to be checked ("" when it ran).
        transient: the check could not run for now (its workspace did not fit): the graph keeps
            the verdict, `BOOK` does not.
    """

    plan_name: str
    rel_error: float
    tolerance: float
    max_abs_error: float = math.nan
    error: str = ""
    transient: bool = False

    @property
    def ok(self) -> bool:
        """Whether the plan may be timed, chosen, cached and saved."""
        return not self.error and math.isfinite(self.rel_error) and self.rel_error <= self.tolerance

    @property
    def status(self) -> str:
        """``ok``, or why the plan is excluded (a `WRONG` or `FAILED` sentence)."""
        if self.error:
            return f"{FAILED}: {self.error}"[:300]
        return "ok" if self.ok else wrong_status(self.rel_error, self.tolerance)


def plan_words(index: int, name: str) -> str:
    """A plan as the checks name it: ``plan 0 (eng7_k24=29)``.

    Args:
        index: the plan's index.
        name: its name.

    Returns:
        The words.
    """
    return f"plan {index} ({name})"


def fell_through_note(first: Tuple[int, Verdict], used: Optional[Tuple[int, str]]) -> str:
    """The sentence a result carries when the heuristic's pick was wrong.

    Args:
        first: the pick's plan index and `Verdict`.
        used: the index and name of the plan that ran instead; None if none was right.

    Returns:
        The sentence.
    """
    index, verdict = first
    what = "failed its check" if verdict.error else "computes wrong results"
    why = verdict.error if verdict.error else f"relative error {_number(verdict.rel_error)} vs float64"
    first_choice = plan_words(index, verdict.plan_name)
    if used is None:
        return f"the heuristic's first choice, {first_choice}, {what} here ({why}); no other plan was right"
    return (
        f"the heuristic's first choice, {first_choice}, {what} here ({why}); its next correct plan, "
        f"{plan_words(*used)}, ran instead"
    )


class VerdictBook:
    """Verdicts this process has reached: (spec key, epilogue, plan name) -> `Verdict`.

    A graph of the same convolution built again (another workspace cap, a graph cache eviction)
    takes its plans' verdicts from here instead of running them again.

    Args:
        max_entries: past this many, the oldest verdicts are forgotten (and checked again if needed).
    """

    def __init__(self, *, max_entries: int = 100_000):
        self.max_entries = int(max_entries)
        self._entries: "collections.OrderedDict[tuple, Verdict]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, spec_key, epilogue: str, plan_name: str) -> Optional[Verdict]:
        """The verdict reached for one plan of one convolution.

        Args:
            spec_key: the convolution's `ConvSpec.key`.
            epilogue: its fused epilogue.
            plan_name: the plan's name.

        Returns:
            The `Verdict`; None when there is none.
        """
        with self._lock:
            return self._entries.get((spec_key, epilogue, plan_name))

    def put(self, spec_key, epilogue: str, verdict: Verdict) -> None:
        """Remember a verdict for its plan of one convolution (a ``transient`` one is not kept).

        Args:
            spec_key: the convolution's `ConvSpec.key`.
            epilogue: its fused epilogue.
            verdict: the `Verdict`; it names its plan.
        """
        if verdict.transient:
            return
        with self._lock:
            self._entries[(spec_key, epilogue, verdict.plan_name)] = verdict
            self._entries.move_to_end((spec_key, epilogue, verdict.plan_name))
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def wrong(self, spec_key=None, epilogue: Optional[str] = None) -> List[Tuple[tuple, str, Verdict]]:
        """Every plan found wrong.

        Args:
            spec_key: only this convolution's (`ConvSpec.key`); None for all.
            epilogue: only this epilogue's; None for all.

        Returns:
            (spec key, epilogue, verdict) per wrong plan.
        """
        with self._lock:
            items = list(self._entries.items())
        return [
            (k, e, v)
            for (k, e, _), v in items
            if not v.ok and (spec_key is None or k == spec_key) and (epilogue is None or e == epilogue)
        ]

    def clear(self) -> None:
        """Forget every verdict."""
        with self._lock:
            self._entries.clear()


#: this process's verdicts
BOOK = VerdictBook()


def as_info(verdict: Verdict) -> dict:
    """A verdict as the ``check`` entry of a saved plan's info (`labkit.store.plan_store`).

    Args:
        verdict: the verdict.

    Returns:
        rel_error, tolerance and max_abs_error.
    """
    return dict(
        rel_error=float(verdict.rel_error),
        tolerance=float(verdict.tolerance),
        max_abs_error=float(verdict.max_abs_error),
    )


def from_info(plan_name: str, info: dict, tolerance: float) -> Optional[Verdict]:
    """The verdict a saved plan's ``info`` carries, judged by today's tolerance.

    Args:
        plan_name: the plan's name.
        info: the saved plan's info.
        tolerance: today's tolerance for the convolution.

    Returns:
        The `Verdict`; None when the info carries none or an unreadable one (the plan is then checked
        when loaded).
    """
    check = (info or {}).get("check")
    if not isinstance(check, dict):
        return None
    try:
        rel = float(check["rel_error"])
        worst = float(check.get("max_abs_error", math.nan))
    except (KeyError, TypeError, ValueError):
        return None
    if rel != rel:  # NaN: nothing was compared
        return None
    return Verdict(str(plan_name), rel, float(tolerance), worst)
