"""The plans of a graph that may run: each one run once against float64 before it is handed out.

`Plan` is one candidate plan of a graph. `CheckedPlans` is the part of
`labkit.gpu.cudnn.conv_graph.ConvGraph` that answers "which plans may run": ``runnable``, ``default_plan``,
``plan(i)`` and ``wrong``. A plan is checked (`check`: one run on seeded inputs, one float64
reference for all plans of the graph, `labkit.gpu.cudnn.reference_runs.judge`) before any of them
hands it out, so no plan is timed, chosen, cached or saved unchecked; a plan whose result is
wrong is excluded for that convolution (`labkit.gpu.checks.plan_checks`), and a heuristic's pick that
is wrong falls through to its next correct plan (``fell_through``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ...errors import InvalidSpec, Unsupported, WrongResult
from ...signals.cancel import checkpoint, was_cut
from ..checks import plan_checks


@dataclass(frozen=True)
class Plan:
    """One candidate plan of a graph.

    Attributes:
        index: its index in the graph.
        name: cuDNN's name, e.g. "eng0".
        workspace_bytes: bytes it needs; None when it did not build.
        built: whether it built.
        notes: cuDNN's behaviour notes, comma-separated.
        error: why it did not build.
    """

    index: int
    name: str
    workspace_bytes: Optional[int]
    built: bool
    notes: str = ""
    error: str = ""


#: the verdict of a plan not checked yet (`CheckedPlans.wrong` lists only checked plans)
_OK = plan_checks.Verdict("", 0.0, 1.0)


class CheckedPlans:
    """Mixed into `labkit.gpu.cudnn.conv_graph.ConvGraph`: its ``plans``, checked against float64 before use.

    The graph provides ``spec``, ``epilogue``, ``all_plans``, ``plans`` (`Plan` list in the
    heuristic's order), ``graph`` (the frontend graph), ``_describe_plan(i, why_not)`` and
    ``_backend_indices()``; ``_checks_start()`` is called before its plans are described.
    """

    #: seconds this graph spent checking plans against float64 (`check`), and how many it ran
    check_seconds = 0.0
    plans_checked = 0

    def _checks_start(self) -> None:
        #: plan index -> `plan_checks.Verdict` of the plans checked (or known) so far
        self.verdicts: Dict[int, plan_checks.Verdict] = {}
        self._check_lock = threading.RLock()
        self._runnable: Optional[List[Plan]] = None
        self._note: Optional[str] = None  # `fell_through`, once known
        #: plan index -> the GPU time of its run in its check here, in microseconds, for the plans run
        #: in this process: their kernels are loaded, and that run was their first call
        #: (`labkit.gpu.timing.measure.eager_us`'s ``first_us``)
        self.ran_here: Dict[int, float] = {}

    def check(self, *, ops=None) -> Dict[int, plan_checks.Verdict]:
        """Run every built plan that has no verdict yet once, and compare it with float64.

        Each output is judged against one float64 reference (`labkit.gpu.cudnn.reference_runs.judge`). A plan
        this process judged before for this convolution (another cap, a rebuild) is not run again. The
        time spent is added to ``check_seconds``.

        Args:
            ops: the operands to run on; None makes seed-0 inputs here.

        Returns:
            Plan index -> `plan_checks.Verdict`, for every plan judged so far.
        """
        with self._check_lock:
            todo = [p for p in self.plans if p.built and p.index not in self.verdicts]
            if todo:
                self._runnable = self._note = None
            for p in list(todo):
                known = plan_checks.BOOK.get(self.spec.key, self.epilogue, p.name)
                if known is not None:
                    self.verdicts[p.index] = known
                    todo.remove(p)
            todo = [p.index for p in todo]
            if todo:
                from ..cudnn import reference_runs  # heavy: CuPy, live only

                t0 = time.perf_counter()
                first_calls: Dict[int, float] = {}
                for index, verdict in zip(
                    todo, reference_runs.judge(self, todo, ops=ops, first_calls=first_calls)
                ):
                    self.verdicts[index] = verdict
                    self.ran_here[index] = first_calls.get(index, math.nan)
                    plan_checks.BOOK.put(self.spec.key, self.epilogue, verdict)
                self.check_seconds += time.perf_counter() - t0
                self.plans_checked += len(todo)
            return dict(self.verdicts)

    @property
    def built(self) -> List[Plan]:
        """The plans cuDNN built, in the heuristic's order, checked or not."""
        return [p for p in self.plans if p.built]

    @property
    def runnable(self) -> List[Plan]:
        """The plans that built and computed the right result (each checked once: `check`). When
        none did, candidates left unbuilt are built for one that does (`_fall_through`)."""
        plans = self._runnable
        if plans is None:
            verdicts = self.check()
            plans = [p for p in self.plans if p.built and verdicts[p.index].ok] or self._fall_through()
            self._runnable = plans
        return list(plans)

    @property
    def wrong(self) -> List[Tuple[Plan, plan_checks.Verdict]]:
        """(plan, verdict) of every plan excluded for computing a wrong result (or failing its run)."""
        return [(p, self.verdicts[p.index]) for p in self.plans if not self.verdicts.get(p.index, _OK).ok]

    @property
    def heuristic_plan(self) -> Plan:
        """cuDNN's first choice: the first candidate that built (or that was left unbuilt because
        this process had found it wrong), right or wrong."""
        return next((p for p in self.plans if p.built or p.index in self.verdicts), self.plans[0])

    @property
    def default_plan(self) -> Plan:
        """The plan run when none is named: the heuristic's first choice when it computes the right
        result, else its next plan that does (`runnable`). `WrongResult` when no plan is right."""
        plans = self.runnable
        if plans:
            return plans[0]
        wrong = "; ".join(f"plan {p.index} ({p.name}) {v.status}" for p, v in self.wrong[:3])
        raise WrongResult(self.spec.label, f"no plan cuDNN built computes the right result: {wrong}")

    def _fall_through(self) -> List[Plan]:
        """No plan built so far computes the right result: build the candidates left unbuilt (in
        a graph built with the heuristic's pick only, every other one; in a graph whose budget
        cut plans, those) one at a time, in the heuristic's order, and check each, until one is
        right. Returns [that plan], or [] when none is."""
        for i, p in enumerate(self.plans):
            if p.built or i in self.verdicts or (self.all_plans and not was_cut(p.error)):
                continue
            checkpoint()
            if self.build_plan(i).built and self.check()[i].ok:
                return [self.plans[i]]
        return []

    def build_plan(self, index: int) -> Plan:
        """Build one candidate of a graph that was built without it (with the heuristic's pick only).

        The plan is not checked against float64 here.

        Args:
            index: the candidate's index.

        Returns:
            The `Plan`: built, or not built with cuDNN's reason.
        """
        p = self.plans[index]
        if p.built:
            return p
        with self._check_lock:
            try:
                self.graph.build_plan_at_index(index)
            except Exception as exc:  # noqa: BLE001  (declined by cuDNN: its reason is kept)
                why = " ".join(str(exc).split())[:200]
                self.plans[index] = dataclasses.replace(p, workspace_bytes=None, built=False, error=why)
                return self.plans[index]
            self.plans[index] = self._describe_plan(index, {})
            self._cpp_index = self._backend_indices()
            self._runnable = self._note = None
        return self.plans[index]

    @property
    def fell_through(self) -> str:
        """The sentence saying the heuristic's first choice computes wrong results and which plan
        runs instead; empty when the plan run by default is that first choice."""
        if self._note is not None:
            return self._note
        try:
            used = self.default_plan
            ran = (used.index, used.name)
        except WrongResult:
            ran = None
        first = self.heuristic_plan
        verdict = self.verdicts.get(first.index)
        wrong = verdict is not None and not verdict.ok
        self._note = plan_checks.fell_through_note((first.index, verdict), ran) if wrong else ""
        return self._note

    def plan(self, index: Optional[int] = None) -> Plan:
        """A plan, checked against float64 first.

        Args:
            index: the plan's index; None for the default plan.

        Returns:
            The `Plan`; `InvalidSpec` for a bad index, `Unsupported` for one that did not build,
            `WrongResult` for one whose result was wrong.
        """
        if index is None:
            return self.default_plan
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.plans):
            raise InvalidSpec("plan index", index, f"must be an int in 0..{len(self.plans) - 1}")
        p = self.plans[index]
        verdict = self.verdicts.get(index)
        if verdict is None and p.built:
            verdict = self.check()[index]
        if verdict is not None and not verdict.ok:
            raise WrongResult(
                f"plan {index} ({p.name}) of {self.spec.label}", f"labkit does not run it: {verdict.status}"
            )
        if not p.built:
            raise Unsupported(f"plan {index} ({p.name})", p.error or "it did not build")
        return p
