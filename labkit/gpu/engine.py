"""cuDNN frontend graphs for a `ConvSpec`: build, list plans, execute, cache, autotune, cap.

One `ConvGraph` per (spec, epilogue, workspace cap). It is built through ``cudnn.pygraph`` with
heuristics A + FALLBACK and *every* candidate plan built (``build_plan_policy.ALL``), so a lesson
can run any plan by index. labkit always supplies the workspace itself (``cudnn.Graph``'s own
allocator needs torch; the workspace strategies are the point of this workbook).

No plan is handed out before it has been run once against the float64 reference
(`ConvGraph.check`, `labkit.gpu.plan_checks`): ``runnable``, ``default_plan`` and ``plan(i)`` hold
only plans whose result was right, and a heuristic's pick that was wrong falls through to its next
correct plan (``fell_through`` says so).

Tensors are described in logical NCHW order with strides for the chosen layout; CuPy arrays hold
them in storage order (``storage_shape``). Roles: ``x`` image, ``w`` filter, ``y`` output image,
``b`` bias (1,K,1,1), ``z`` residual (like y). Which one a direction writes: `OUTPUT_ROLE`.
Fused epilogues (fprop only): ``bias_relu`` = relu(conv + b); ``bias_relu_add`` =
relu(conv + b + z) (the ResNet block order).

The device tensors a graph runs on are `Operands` (`labkit.gpu.operands`, re-exported here).
Sizes (workspace caps, plan workspaces) are in bytes; build and load times in seconds.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import cudnn

from ..errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported, WrongResult
from ..signals.cancel import Budget, checkpoint, was_cut
from ..signals.progress import announce
from ..spec import ConvSpec
from . import lock, memory, plan_checks
from .bound import BoundConv, _ptr  # noqa: F401  (engine.BoundConv stays the public name)
from .checked_plans import CheckedPlans, Plan
from .frontend import (  # noqa: F401  (engine.X for these stays the public name)
    _CUDNN_DTYPE,
    BUILD_BUDGET_S,
    EPILOGUES,
    INPUT_ROLES,
    OUTPUT_ROLE,
    UIDS,
    _check_cap,
    _check_epilogue,
    _check_spec,
    build_every_plan,
    define_graph,
    handle_for,
    logical_view,
    planned_graph,
    release_handle,
    role_dtype,
    role_shapes,
    storage_shape,
    strides,
)
from .operands import Operands  # noqa: F401  (engine.Operands stays the public name)


# ---- graphs ---------------------------------------------------------------------------------
def _wrap_cudnn_error(what: str, exc: Exception) -> LabkitError:
    msg = str(exc).strip() or type(exc).__name__
    if "out of memory" in msg.lower() or "alloc" in msg.lower() and "fail" in msg.lower():
        return OutOfMemory(what, 0, memory.free_bytes())
    return Unsupported(what, msg)


class ConvGraph(CheckedPlans):
    """A built cuDNN graph for one spec/epilogue/cap with every candidate plan built.

    ``plans``: every candidate (heuristics A then FALLBACK), built or not. ``default_plan``: the
    first plan that built and computes the right result (the heuristic's pick unless that one is
    wrong: `CheckedPlans`). ``build_seconds``: wall time of the build.
    ``build_budget_s``: once an all-plan build has taken this long, the plans not yet built are
    left unbuilt, each saying so (``build_cut`` counts them). None: `BUILD_BUDGET_S`.
    ``parallel``: the runtime-compiled plans of an all-plan build are built in worker processes
    (`labkit.gpu.builds`; each then runs from its own deserialized one-plan graph, ``remote``);
    False builds every plan here, one after another (what lesson 05's build-cost chart times).
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
        _check_spec(spec)
        self.spec, self.all_plans, self.parallel = spec, bool(all_plans), bool(parallel)
        #: plan index -> `labkit.gpu.builds.RemotePlan`: the plans a worker built
        self.remote: Dict[int, object] = {}
        self._checks_start()
        self._deterministic_only = _deterministic_only
        self._deterministic: Optional[set] = None
        self.epilogue = _check_epilogue(spec, epilogue)
        self.workspace_cap = _check_cap(workspace_cap)
        budget = Budget(
            BUILD_BUDGET_S if build_budget_s is None else build_budget_s, f"building {spec.label}"
        )
        #: seconds this build waits for runtime-compiled plans (None: as long as ``budget`` lasts)
        self.compile_budget_s = compile_budget_s
        announce(
            f"building {'every plan' if all_plans else 'the heuristic plan'} of {spec.label}"
            + ("" if epilogue == "none" else f" + {epilogue}")
        )
        t0 = time.perf_counter()
        try:
            with lock.released():  # building needs no turn on the GPU: another notebook may time meanwhile
                why_not = self._plan_all(budget)
        except LabkitError:
            raise
        except Exception as exc:
            raise _wrap_cudnn_error(
                spec.label + ("" if epilogue == "none" else f" + {epilogue}"), exc
            ) from exc
        self.build_seconds = time.perf_counter() - t0
        self.plans: List[Plan] = self._describe_plans(why_not)
        if not any(p.built for p in self.plans):
            raise Unsupported(spec.label, "no plan built: " + "; ".join(p.error for p in self.plans[:3]))
        self._cpp_index = self._backend_indices()

    def _plan_all(self, budget: Budget) -> Dict[int, str]:
        from . import builds

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
        """Names of the plans cuDNN does not mark NONDETERMINISTIC (the frontend has no per-plan
        query for numerical notes, so a sibling graph is built with those plans deselected; once)."""
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
        """Every candidate plan as a tidy DataFrame: index, name, workspace_bytes, built, notes
        (cuDNN's behaviour notes), error, ``verdict`` (``ok``, a ``wrong result`` sentence, or ""
        when not checked) and ``rel_error`` vs float64 (NaN when not checked); with
        ``determinism`` also ``deterministic`` (bool)."""
        import pandas as pd

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
        """Prebind device pointers for fast repeated execution (see `BoundConv`)."""
        return BoundConv(self, arrays, workspace_ptr, self.plan(plan_index).index, stream)

    def execute(
        self, arrays: Dict[str, object], workspace_ptr: int, plan_index: Optional[int] = None, stream=None
    ) -> None:
        """Run one plan once on ``stream`` (CuPy current by default). ``workspace_ptr``: device
        address of at least ``plan.workspace_bytes`` bytes (0 when the plan needs none)."""
        self.bind(arrays, workspace_ptr, plan_index, stream).run()

    @property
    def key(self) -> tuple:
        return graph_key(self.spec, self.epilogue, self.workspace_cap, self.all_plans)


# ---- saved plans: a graph's chosen plan on disk (labkit.store.plan_store) ----------------------------
class LoadedGraph(ConvGraph):
    """A graph with one plan, deserialized from disk instead of built (`load_plan`). It runs like a
    `ConvGraph` (``plans`` holds that one plan, index 0); ``build_seconds`` is the load time
    (reading the file and ``deserialize``), ``saved`` the `labkit.store.plan_store.SavedPlan`."""

    def __init__(
        self, spec: ConvSpec, epilogue: str, workspace_cap: Optional[int], saved, graph, seconds: float
    ):
        self.spec, self.all_plans, self.epilogue, self.workspace_cap = spec, False, epilogue, workspace_cap
        self._deterministic_only, self._deterministic, self.parallel, self.remote = False, None, False, {}
        self.graph, self.saved, self.build_seconds = graph, saved, seconds
        self.plans = [Plan(0, saved.plan_name, int(saved.workspace_bytes), True, notes=saved.notes)]
        self._cpp_index = {0: 0}  # a deserialized graph holds its one plan at index 0
        self._checks_start()
        from .reference import tolerance_for

        known = plan_checks.from_info(saved.plan_name, saved.info, tolerance_for(spec))
        if known is not None:  # checked when it was saved, under this same cuDNN
            self.verdicts[0] = known

    def _fall_through(self) -> List[Plan]:
        return []  # its one plan is all it holds: `load_plan` sets a wrong one aside

    @property
    def fell_through(self) -> str:
        """What the graph this plan was saved from said (`ConvGraph.fell_through`)."""
        return str(self.saved.info.get("fell_through") or "")


def _plan_store(kind: Optional[str] = None):
    """This machine's `labkit.store.plan_store.PlanStore` (None: saving off, no GPU, or ``LABKIT_CACHE``
    unusable); ``kind`` is checked first (`InvalidSpec` for one that is not a plan kind)."""
    from ..store import plan_store

    if kind is not None:
        plan_store.check_kind(kind)
    try:
        return plan_store.current()
    except LabkitError:  # LABKIT_CACHE names a file: the error is raised where the cache is used for results
        return None


def _shared_plans():
    """The class's shared saved plans (`labkit.store.plan_store.shared`), or None."""
    from ..store import plan_store

    try:
        return plan_store.shared()
    except LabkitError:
        return None


def save_plan(cg: ConvGraph, plan_index: int, kind: str, *, info: Optional[dict] = None, store=None):
    """Serialize plan ``plan_index`` of ``cg`` to disk as this graph's ``kind`` plan ("heuristic" or
    "autotuned"; `labkit.store.plan_store`), with its check against float64 (``info["check"]``: a
    later process loads it without running it again). Returns the file, or None (saving off, a
    loaded graph, or cuDNN would not serialize it: that is not an error, the plan is simply built
    next time). `WrongResult` for a plan whose result was wrong: it is never saved."""
    store = store if store is not None else _plan_store(kind)
    if store is None or isinstance(cg, LoadedGraph):
        return None
    plan = cg.plan(plan_index)  # checked against float64 first
    info = dict(info or {}, check=plan_checks.as_info(cg.verdicts[plan.index]))
    try:
        remote = cg.remote.get(plan.index)
        if remote is not None:  # built in a worker: its serialized form is at hand
            data = bytes(remote.data)
        else:
            g = cg.graph
            if cg.all_plans or plan.index != cg.heuristic_plan.index:
                g.build_plan_at_index(
                    plan.index
                )  # selects it (already built: no rebuild) so serialize() holds it
            data = bytes(g.serialize())
    except Exception:  # noqa: BLE001  (a plan cuDNN cannot serialize is built again next time)
        return None
    key = graph_key(cg.spec, cg.epilogue, cg.workspace_cap, False)
    return store.put(key, kind, data, plan.name, plan.workspace_bytes or 0, plan.notes, info)


def load_plan(
    spec: ConvSpec,
    epilogue: str = "none",
    *,
    workspace_cap: Optional[int] = None,
    kind: str = "heuristic",
    store=None,
) -> Optional[LoadedGraph]:
    """This graph's saved ``kind`` plan, deserialized (about 10 ms), or None when none is saved.
    A file cuDNN will not load is set aside with one warning naming it, and None is returned; so
    is a plan whose result is wrong. A plan saved without its check against float64 is checked
    here (one run and the reference), and its file given the verdict when it may be written."""
    t0 = time.perf_counter()
    spec = _check_spec(spec)  # bad input is an error whether or not anything is saved
    epilogue, workspace_cap = _check_epilogue(spec, epilogue), _check_cap(workspace_cap)
    stores = [store] if store is not None else [_plan_store(kind), _shared_plans()]
    key = graph_key(spec, epilogue, workspace_cap, False)
    saved = None
    for store in filter(None, stores):  # this machine's own plans, then the class's shared folder
        saved = store.get(key, kind)
        if saved is not None:
            break
    if saved is None:
        return None
    try:
        g = cudnn.pygraph(handle=handle_for())
        g.deserialize(handle_for(), list(saved.data))  # the binding takes the list of ints serialize() gave
        loaded = LoadedGraph(spec, epilogue, workspace_cap, saved, g, time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001  (cuDNN refused it: build instead, and say which file)
        store.set_aside(
            saved, f"cuDNN would not deserialize it: {type(exc).__name__}: {str(exc).strip()[:120]}"
        )
        return None
    unchecked = 0 not in loaded.verdicts
    verdict = loaded.check()[0]
    if verdict.transient:  # its workspace does not fit now: not checked, not used
        return None
    if not verdict.ok:
        store.set_aside(saved, f"its plan {saved.plan_name} {verdict.status}")
        return None
    if unchecked and store.writable:  # the next process need not run it again
        info = dict(saved.info, check=plan_checks.as_info(verdict))
        store.put(key, kind, saved.data, saved.plan_name, saved.workspace_bytes, saved.notes, info)
    return loaded


# ---- the graph cache ------------------------------------------------------------------------
def graph_key(
    spec: ConvSpec, epilogue: str = "none", workspace_cap: Optional[int] = None, all_plans: bool = True
) -> tuple:
    """Everything that makes two graphs different: every spec field, the epilogue, the workspace
    cap, and whether every plan was built (``all_plans``) or only the heuristic's first choice."""
    return (spec.key, epilogue, workspace_cap, bool(all_plans))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    build_seconds: List[float] = field(default_factory=list)
    hit_seconds: List[float] = field(default_factory=list)
    #: graphs deserialized from saved plans instead of built (not counted in ``misses``)
    loads: int = 0
    load_seconds: List[float] = field(default_factory=list)


class GraphCache:
    """Built graphs keyed by `graph_key`, least-recently-used eviction beyond ``max_entries``.

    Policy: LRU, as PyTorch's cuDNN plan cache is (bounded since unbounded growth was reported there).
    Evicting drops labkit's reference; the frontend frees the plans when nothing else holds them.

    With ``saved_plans`` (the default), a miss for a graph holding only the heuristic's pick
    (``all_plans=False``) loads that plan from disk when it was saved before (`load_plan`), and a
    graph built for such a miss is saved (`save_plan`): a later process deserializes instead of
    building. ``stats.loads`` counts the loads; ``stats.misses`` counts builds only.
    """

    def __init__(self, max_entries: int = 64, saved_plans: bool = True):
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidSpec("max_entries", max_entries, "must be an int >= 1")
        self.max_entries = max_entries
        self.saved_plans = bool(saved_plans)
        self._entries: "collections.OrderedDict[tuple, ConvGraph]" = collections.OrderedDict()
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(
        self,
        spec: ConvSpec,
        epilogue: str = "none",
        *,
        workspace_cap: Optional[int] = None,
        all_plans: bool = True,
        build_budget_s: Optional[float] = None,
        compile_budget_s: Optional[float] = None,
    ) -> ConvGraph:
        """The graph for these arguments: cached, loaded (a one-plan graph saved before) or built
        (within ``build_budget_s``, waiting at most ``compile_budget_s`` for runtime-compiled plans,
        see `ConvGraph`). A graph cut short is cached as it is, and built again when a caller wants
        every plan (no budgets) or the compiles its budget cut have finished (`_rebuild_cut`)."""
        t0 = time.perf_counter()
        key = graph_key(
            _check_spec(spec), _check_epilogue(spec, epilogue), _check_cap(workspace_cap), all_plans
        )
        with self._lock:
            g = self._entries.get(key)
            if (
                g is not None
                and g.build_cut
                and _rebuild_cut(g, build_budget_s is None and compile_budget_s is None)
            ):
                del self._entries[key]
                g = None
            if g is not None:
                self._entries.move_to_end(key)
                self.stats.hits += 1
                self.stats.hit_seconds.append(time.perf_counter() - t0)
                return g
        checkpoint()  # a build is 0.5-10 s: let the foreground have the GPU first
        saved = self.saved_plans and not all_plans  # a one-plan graph: its plan can come from disk
        g = load_plan(spec, epilogue, workspace_cap=workspace_cap, kind="heuristic") if saved else None
        built = g is None
        if built:
            g = ConvGraph(
                spec,
                epilogue,
                workspace_cap=workspace_cap,
                all_plans=all_plans,
                build_budget_s=build_budget_s,
                compile_budget_s=compile_budget_s,
            )
            if saved:
                try:
                    info = dict(build_seconds=round(g.build_seconds, 6), fell_through=g.fell_through)
                    save_plan(g, g.default_plan.index, "heuristic", info=info)
                except WrongResult:  # nothing right to save: asking the graph for a plan says so
                    pass
        with self._lock:
            if built:
                self.stats.misses += 1
                self.stats.build_seconds.append(g.build_seconds)
            else:
                self.stats.loads += 1
                self.stats.load_seconds.append(g.build_seconds)
            self._entries[key] = g
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.stats.evictions += 1
        return g

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _rebuild_cut(g: ConvGraph, wants_every_plan: bool) -> bool:
    """Whether a cached graph whose budget cut plans should be built again now: the caller wants
    every plan (no budget of its own), or every compile the budget cut has finished in its worker
    since (`labkit.gpu.builds.late_compiles`: the rebuild takes them in milliseconds)."""
    from . import builds

    if wants_every_plan:
        return True
    late = builds.late_compiles(g.spec, g.epilogue, g.workspace_cap)
    return bool(late) and all(j.future.done() for j in late.values())


#: the process-wide cache the experiments and strategies use
graphs = GraphCache()


def get_graph(
    spec: ConvSpec,
    epilogue: str = "none",
    *,
    workspace_cap: Optional[int] = None,
    all_plans: bool = True,
    build_budget_s: Optional[float] = None,
    compile_budget_s: Optional[float] = None,
) -> ConvGraph:
    """A built graph from the process-wide cache (built on first use: 0.5-1.3 s cold; fused or
    fp8 graphs with runtime-compiled engines take several seconds when ``all_plans``; at most
    ``build_budget_s``, `BUILD_BUDGET_S` by default, before the plans left are cut, and at most
    ``compile_budget_s`` waiting for runtime-compiled plans: the precompiled ones are all built)."""
    return graphs.get(
        spec,
        epilogue,
        workspace_cap=workspace_cap,
        all_plans=all_plans,
        build_budget_s=build_budget_s,
        compile_budget_s=compile_budget_s,
    )


def build_ahead(wanted) -> int:
    """Plan the all-plan graphs ``wanted`` ((spec, epilogue, workspace cap) triples) that are not
    built yet and queue their runtime-compiled plans for the build workers at once
    (`labkit.gpu.builds.ahead`), before building them one by one with `get_graph`. Returns how
    many plans were queued (0 without workers)."""
    from . import builds

    return builds.ahead([(s, e, c) for s, e, c in wanted if graph_key(s, e, c, True) not in graphs])
