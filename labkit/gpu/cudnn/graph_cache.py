"""The process-wide graph cache: built graphs kept by `graph_key`, least recently used evicted.

`get_graph` answers every experiment's and strategy's request for a graph: from the cache, from a
saved plan (`labkit.gpu.cudnn.saved_plans`) or by building it (`labkit.gpu.cudnn.conv_graph.ConvGraph`).
`build_ahead` queues the runtime-compiled plans of graphs a request will need before it builds
them.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

from ...errors import InvalidSpec, WrongResult
from ...signals.cancel import checkpoint
from ...spec import ConvSpec
from . import builds
from .conv_graph import ConvGraph, graph_key
from .frontend import check_cap, check_epilogue, check_spec
from .saved_plans import load_plan, save_plan


@dataclass
class CacheStats:
    """What a `GraphCache` did.

    Attributes:
        hits: requests answered from the cache.
        misses: graphs built.
        evictions: graphs dropped beyond ``max_entries``.
        build_seconds: each build's wall time.
        hit_seconds: each hit's wall time.
        loads: graphs deserialized from saved plans instead of built (not counted in ``misses``).
        load_seconds: each load's wall time.
    """

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    build_seconds: List[float] = field(default_factory=list)
    hit_seconds: List[float] = field(default_factory=list)
    #: graphs deserialized from saved plans instead of built (not counted in ``misses``)
    loads: int = 0
    load_seconds: List[float] = field(default_factory=list)


class GraphCache:
    """Built graphs keyed by `graph_key`; least recently used evicted beyond ``max_entries``.

    Policy: LRU, as PyTorch's cuDNN plan cache is (bounded since unbounded growth was reported there).
    Evicting drops labkit's reference; the frontend frees the plans when nothing else holds them.

    Args:
        max_entries: the most graphs kept.
        saved_plans: a miss for a graph holding only the heuristic's pick (``all_plans=False``)
            loads that plan from disk when it was saved before (`load_plan`), and a graph built for
            such a miss is saved (`save_plan`): a later process deserializes instead of building.
            ``stats.loads`` counts the loads; ``stats.misses`` counts builds only.
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
        """The graph for these arguments: cached, loaded (a one-plan graph saved before) or built.

        A graph cut short is cached as it is, and built again when a caller wants every plan (no
        budgets) or the compiles its budget cut have finished (`_rebuild_cut`).

        Args:
            spec: the convolution.
            epilogue: one of `EPILOGUES`.
            workspace_cap: the workspace cap, in bytes; None for none.
            all_plans: build every candidate plan.
            build_budget_s: the build's budget, in seconds (`ConvGraph`).
            compile_budget_s: the most seconds to wait for runtime-compiled plans (`ConvGraph`).

        Returns:
            The `ConvGraph` (a `LoadedGraph` when loaded).
        """
        t0 = time.perf_counter()
        key = graph_key(check_spec(spec), check_epilogue(spec, epilogue), check_cap(workspace_cap), all_plans)
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
        """Drop every cached graph."""
        with self._lock:
            self._entries.clear()


def _rebuild_cut(g: ConvGraph, wants_every_plan: bool) -> bool:
    """Whether a cached graph whose budget cut plans should be built again now: the caller wants
    every plan (no budget of its own), or every compile the budget cut has finished in its worker
    since (`labkit.gpu.cudnn.builds.late_compiles`: the rebuild takes them in milliseconds)."""
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
    """A built graph from the process-wide cache, built on first use.

    A cold build takes 0.5-1.3 s; fused or fp8 graphs with runtime-compiled engines take several
    seconds when ``all_plans``.

    Args:
        spec: the convolution.
        epilogue: one of `EPILOGUES`.
        workspace_cap: the workspace cap, in bytes; None for none.
        all_plans: build every candidate plan.
        build_budget_s: the most seconds before the plans left are cut; None for `BUILD_BUDGET_S`.
        compile_budget_s: the most seconds to wait for runtime-compiled plans (the precompiled ones
            are all built).

    Returns:
        The `ConvGraph`.
    """
    return graphs.get(
        spec,
        epilogue,
        workspace_cap=workspace_cap,
        all_plans=all_plans,
        build_budget_s=build_budget_s,
        compile_budget_s=compile_budget_s,
    )


def build_ahead(wanted) -> int:
    """Queue the runtime-compiled plans of graphs a request will build, before it builds them.

    Graphs already built are left out; the rest are planned and their compiles queued for the build
    workers at once (`labkit.gpu.cudnn.builds.ahead`), before `get_graph` builds them one by one.

    Args:
        wanted: (spec, epilogue, workspace cap) triples of all-plan graphs.

    Returns:
        How many plans were queued; 0 without workers.
    """
    return builds.ahead([(s, e, c) for s, e, c in wanted if graph_key(s, e, c, True) not in graphs])
