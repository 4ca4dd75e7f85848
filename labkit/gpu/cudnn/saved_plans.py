"""Saved plans: a graph's chosen plan serialized to disk, and loaded by a later process.

`save_plan` writes plan ``i`` of a built `ConvGraph` as its graph's "heuristic" or "autotuned"
plan, with its check against float64; `load_plan` deserializes it (about 10 ms instead of a
0.5-10 s build) as a `LoadedGraph`, which runs like a `ConvGraph` with that one plan. The files
are `labkit.store.plan_store`'s: this machine's own, then a class's shared folder.
"""

from __future__ import annotations

import time
from typing import List, Optional

import cudnn

from ...errors import LabkitError
from ...spec import ConvSpec
from ...store import plan_store
from ..checks import plan_checks
from ..checks.reference import tolerance_for
from .checked_plans import Plan
from .conv_graph import ConvGraph, graph_key
from .frontend import check_cap, check_epilogue, check_spec, handle_for


class LoadedGraph(ConvGraph):
    """A graph with one plan, deserialized from disk instead of built (`load_plan`).

    It runs like a `ConvGraph`: ``plans`` holds that one plan, at index 0.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        saved: the `labkit.store.plan_store.SavedPlan` (kept as ``saved``).
        graph: the deserialized frontend graph.
        seconds: the load time, reading the file and ``deserialize`` (``build_seconds``).
    """

    def __init__(
        self, spec: ConvSpec, epilogue: str, workspace_cap: Optional[int], saved, graph, seconds: float
    ):
        self.spec, self.all_plans, self.epilogue, self.workspace_cap = spec, False, epilogue, workspace_cap
        self._deterministic_only, self._deterministic, self.parallel, self.remote = False, None, False, {}
        self.graph, self.saved, self.build_seconds = graph, saved, seconds
        self.plans = [Plan(0, saved.plan_name, int(saved.workspace_bytes), True, notes=saved.notes)]
        self._cpp_index = {0: 0}  # a deserialized graph holds its one plan at index 0
        self._checks_start()

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
    if kind is not None:
        plan_store.check_kind(kind)
    try:
        return plan_store.current()
    except LabkitError:  # LABKIT_CACHE names a file: the error is raised where the cache is used for results
        return None


def _shared_plans():
    """The class's shared saved plans (`labkit.store.plan_store.shared`), or None."""
    try:
        return plan_store.shared()
    except LabkitError:
        return None


def save_plan(cg: ConvGraph, plan_index: int, kind: str, *, info: Optional[dict] = None, store=None):
    """Serialize one plan of a graph to disk as this graph's "heuristic" or "autotuned" plan.

    The plan is saved with its check against float64 (``info["check"]``), so a later process loads
    it without running it again. A plan whose result was wrong is never saved.

    Args:
        cg: the built graph.
        plan_index: the plan.
        kind: "heuristic" or "autotuned" (`labkit.store.plan_store.KINDS`).
        info: what finding it cost (seconds, plans timed, GPU microseconds).
        store: the `labkit.store.plan_store.PlanStore`; default this machine's.

    Returns:
        The file; None when saving is off, ``cg`` is a loaded graph, or cuDNN would not serialize
        the plan (not an error: the plan is built next time). `WrongResult` for a wrong plan.
    """
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
    """A graph's saved plan, deserialized (about 10 ms).

    A file cuDNN will not load is set aside with one warning naming it. A plan saved without its check
    against float64 is checked here (one run and the reference), and its file given the verdict when
    it may be written.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        kind: "heuristic" or "autotuned".
        store: where to look; default this machine's plans, then the class's shared folder.

    Returns:
        A `LoadedGraph`; None when none is saved, cuDNN will not load it, or its result is wrong.
    """
    t0 = time.perf_counter()
    spec = check_spec(spec)  # bad input is an error whether or not anything is saved
    epilogue, workspace_cap = check_epilogue(spec, epilogue), check_cap(workspace_cap)
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
