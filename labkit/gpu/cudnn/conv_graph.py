"""`ConvGraph`: one built cuDNN frontend graph of a `ConvSpec`, with its candidate plans.

One graph per (spec, epilogue, workspace cap). It is built through ``cudnn.pygraph`` with
heuristics A + FALLBACK and *every* candidate plan built (``build_plan_policy.ALL``), so a lesson
can run any plan by index; ``all_plans=False`` builds only the heuristic's first choice. labkit
always supplies the workspace itself (``cudnn.Graph``'s own allocator needs torch; the workspace
strategies are the point of this workbook).

No plan is handed out before it has been run once against the float64 reference
(`labkit.gpu.cudnn.checked_plans`). The graph's definition and planning are `labkit.gpu.cudnn.frontend`'s;
its runtime-compiled plans are built in worker processes (`labkit.gpu.cudnn.builds`). Sizes are in
bytes, build times in seconds.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional

import cudnn

from ...errors import LabkitError, OutOfMemory, Unsupported
from ...signals.cancel import Budget, was_cut
from ...signals.progress import announce
from ...spec import ConvSpec
from ..buffers import memory
from ..checks import plan_checks
from ..host import lock
from . import builds
from .bound import BoundConv
from .checked_plans import CheckedPlans, Plan
from .frontend import BUILD_BUDGET_S, check_cap, check_epilogue, check_spec, planned_graph


def _wrap_cudnn_error(what: str, exc: Exception) -> LabkitError:
    msg = str(exc).strip() or type(exc).__name__
    if "out of memory" in msg.lower() or "alloc" in msg.lower() and "fail" in msg.lower():
        return OutOfMemory(what, 0, memory.free_bytes())
    return Unsupported(what, msg)


class ConvGraph(CheckedPlans):
    """A built cuDNN graph for one spec, epilogue and workspace cap, with its candidate plans.

    ``plans`` holds every candidate (heuristics A then FALLBACK), built or not; ``default_plan`` is the
    first plan that built and computes the right result (the heuristic's pick unless that one is
    wrong: `CheckedPlans`); ``build_seconds`` is the build's wall time.

    Args:
        spec: the convolution.
        epilogue: one of `EPILOGUES` (fprop only).
        workspace_cap: leave out plans that need more workspace, in bytes; None for no cap.
        all_plans: build every candidate; False builds only the heuristic's first choice.
        build_budget_s: once an all-plan build has taken this long (seconds), the plans not yet built
            are left unbuilt, each saying so (``build_cut`` counts them); None for `BUILD_BUDGET_S`.
        parallel: build the runtime-compiled plans of an all-plan build in worker processes
            (`labkit.gpu.cudnn.builds`; each then runs from its own deserialized one-plan graph,
            ``remote``); False builds every plan here, one after another (what lesson 05's
            build-cost chart times).
        compile_budget_s: seconds the build waits for runtime-compiled plans; None for as long as
            the build budget lasts.
    """

    build_cut = 0

    def __init__(
        self,
        spec: ConvSpec,
        epilogue: str = "none",
        *,
        workspace_cap: Optional[int] = None,
        all_plans: bool = True,
        _deterministic_only: bool = False,
        build_budget_s: Optional[float] = None,
        parallel: bool = True,
        compile_budget_s: Optional[float] = None,
    ):
        check_spec(spec)
        self.spec, self.all_plans, self.parallel = spec, bool(all_plans), bool(parallel)
        #: plan index -> `labkit.gpu.cudnn.builds.RemotePlan`: the plans a worker built
        self.remote: Dict[int, object] = {}
        self._checks_start()
        self._deterministic_only = _deterministic_only
        self._deterministic: Optional[set] = None
        self.epilogue = check_epilogue(spec, epilogue)
        self.workspace_cap = check_cap(workspace_cap)
        budget = Budget(
            BUILD_BUDGET_S if build_budget_s is None else build_budget_s, f"building {spec.label}"
        )
        #: seconds this build waits for runtime-compiled plans (None: as long as ``budget`` lasts)
        self.compile_budget_s = compile_budget_s
        fused = "" if epilogue == "none" else f" + {epilogue}"
        announce(f"building {'every plan' if all_plans else 'the heuristic plan'} of {spec.label}{fused}")
        t0 = time.perf_counter()
        try:
            with lock.released():  # building needs no turn on the GPU: another notebook may time meanwhile
                why_not = self._plan_all(budget)
        except LabkitError:
            raise
        except Exception as exc:
            raise _wrap_cudnn_error(f"{spec.label}{fused}", exc) from exc
        self.build_seconds = time.perf_counter() - t0
        self.plans: List[Plan] = self._describe_plans(why_not)
        if not any(p.built for p in self.plans):
            errors = "; ".join(p.error for p in self.plans[:3])
            raise Unsupported(spec.label, f"no plan built: {errors}")
        self._cpp_index = self._backend_indices()

    def _plan_all(self, budget: Budget) -> Dict[int, str]:
        g, jobs = None, {}
        if (
            self.all_plans and self.parallel and not self._deterministic_only
        ):  # planned ahead, compiles under way?
            g, jobs = builds.take_ahead(self.spec, self.epilogue, self.workspace_cap)
        g = self.graph = g or planned_graph(
            self.spec, self.epilogue, self.workspace_cap, self._deterministic_only
        )
        if not self.all_plans:
            g.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
            return {}
        compiles = (
            None if self.compile_budget_s is None else budget.within(self.compile_budget_s, "compiling plans")
        )
        why_not, self.remote = builds.build_plans(
            self, budget, parallel=self.parallel, jobs=jobs, compile_budget=compiles
        )
        self.build_cut = sum(map(was_cut, why_not.values()))
        return why_not

    def _describe_plans(self, why_not: Dict[int, str]) -> List[Plan]:
        """Every candidate as a `Plan`; ``why_not``: plan index -> why its build failed or was cut."""
        return [self._describe_plan(i, why_not) for i in range(self.graph.get_execution_plan_count())]

    def _describe_plan(self, i: int, why_not: Dict[int, str]) -> Plan:
        """Candidate ``i`` as a `Plan` (a plan this process found wrong for this convolution keeps
        its verdict: `plan_checks.BOOK`)."""
        g = self.graph
        try:
            name = g.get_plan_name_at_index(i)
        except Exception as exc:  # noqa: BLE001
            name = f"plan{i} ({exc})"
        known = plan_checks.BOOK.get(self.spec.key, self.epilogue, name)
        if known is not None and not known.ok:
            self.verdicts[i] = known
        if i in why_not:
            return Plan(i, name, None, False, error=why_not[i])
        remote = self.remote.get(i)
        try:
            ws = int(remote.workspace_bytes if remote is not None else g.get_workspace_size_plan_at_index(i))
        except Exception as exc:  # did not build, or barred by a filter/cap
            return Plan(i, name, None, False, error=str(exc).strip().splitlines()[0][:200])
        if self.workspace_cap is not None and ws > self.workspace_cap:
            return Plan(i, name, ws, False, error=f"needs {ws} B > cap {self.workspace_cap} B")
        try:
            notes = (
                remote.notes
                if remote is not None
                else ",".join(str(n).split(".")[-1] for n in g.get_behavior_notes_for_plan_at_index(i))
            )
        except Exception:  # noqa: BLE001
            notes = ""
        return Plan(i, name, ws, True, notes=notes)

    def _backend_indices(self) -> Dict[int, int]:
        """Plan index -> the lowered C++ graph's own index (for the low-overhead path)."""
        try:
            cfgs = self.graph._plans
            return {i: cfg.cpp_index for i, cfg in enumerate(cfgs) if cfg.cpp_index is not None}
        except Exception:  # noqa: BLE001  (a frontend without this internal: use the public path)
            return {}

    def deterministic_names(self) -> set:
        """Names of the plans cuDNN does not mark NONDETERMINISTIC.

        The frontend has no per-plan query for numerical notes, so a sibling graph is built once with
        those plans deselected.

        Returns:
            The plans' names; empty when every plan is nondeterministic.
        """
        if self._deterministic is None:
            try:
                sibling = ConvGraph(
                    self.spec,
                    self.epilogue,
                    workspace_cap=self.workspace_cap,
                    all_plans=self.all_plans,
                    _deterministic_only=True,
                    parallel=self.parallel,
                )
                self._deterministic = {p.name for p in sibling.built}
            except Unsupported:  # every plan is nondeterministic
                self._deterministic = set()
        return self._deterministic

    def plan_table(self, determinism: bool = False):
        """Every candidate plan as a tidy DataFrame.

        Args:
            determinism: add ``deterministic`` (bool), which builds a sibling graph once.

        Returns:
            index, name, workspace_bytes, built, notes (cuDNN's behaviour notes), error, ``verdict``
            (``ok``, a ``wrong result`` sentence, or "" when not checked) and ``rel_error`` vs float64
            (NaN when not checked).
        """
        import pandas as pd  # heavy: pandas (0.3 s), which the report's worker never imports

        df = pd.DataFrame([p.__dict__ for p in self.plans])
        verdicts = [self.verdicts.get(p.index) for p in self.plans]
        df["verdict"] = [v.status if v is not None else "" for v in verdicts]
        df["rel_error"] = [v.rel_error if v is not None else float("nan") for v in verdicts]
        if determinism:
            names = self.deterministic_names()
            df["deterministic"] = df.name.isin(names)
        return df

    # -- execution --
    def bind(
        self, arrays: Dict[str, object], workspace_ptr: int, plan_index: Optional[int] = None, stream=None
    ) -> "BoundConv":
        """Prebind device pointers for fast repeated execution.

        Args:
            arrays: role -> device array, for every tensor of the graph.
            workspace_ptr: the workspace's device address.
            plan_index: the plan; default ``default_plan``.
            stream: the CuPy stream; default the current one.

        Returns:
            A `BoundConv`.
        """
        return BoundConv(self, arrays, workspace_ptr, self.plan(plan_index).index, stream)

    def bind_with_workspace(
        self, arrays: Dict[str, object], plan_index: Optional[int] = None, stream=None
    ) -> "BoundConv":
        """`bind` a plan to a workspace of its own, allocated here from CuPy's pool.

        Args:
            arrays: role -> device array, for every tensor of the graph.
            plan_index: the plan; default ``default_plan``.
            stream: the CuPy stream; default the current one.

        Returns:
            A `BoundConv` whose ``workspace`` (a uint8 CuPy array of ``plan.workspace_bytes``)
            lives as long as it does; `OutOfMemory` when the workspace does not fit.
        """
        plan = self.plan(plan_index)
        workspace = memory.alloc(plan.workspace_bytes, f"workspace of plan {plan.index}")  # CuPy's pool
        bound = BoundConv(self, arrays, int(workspace.data.ptr), plan.index, stream)
        bound.workspace = workspace
        return bound

    def execute(
        self, arrays: Dict[str, object], workspace_ptr: int, plan_index: Optional[int] = None, stream=None
    ) -> None:
        """Run one plan once.

        Args:
            arrays: role -> device array, for every tensor of the graph.
            workspace_ptr: the device address of at least ``plan.workspace_bytes`` bytes (0 when the plan
                needs none).
            plan_index: the plan; default ``default_plan``.
            stream: the CuPy stream; default the current one.
        """
        self.bind(arrays, workspace_ptr, plan_index, stream).run()

    @property
    def key(self) -> tuple:
        """The graph's `graph_key`."""
        return graph_key(self.spec, self.epilogue, self.workspace_cap, self.all_plans)


def graph_key(
    spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None, all_plans: bool = True
) -> tuple:
    """Everything that makes two graphs different.

    Args:
        spec: the convolution (every field counts).
        epilogue: the graph's epilogue.
        workspace_cap: its workspace cap, in bytes.
        all_plans: whether every plan was built, or only the heuristic's first choice.

    Returns:
        A hashable tuple.
    """
    return (spec.key, epilogue, workspace_cap, bool(all_plans))
