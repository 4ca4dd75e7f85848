"""A graph's runtime-compiled plans, built in parallel in worker processes.

Where an all-plan build's time goes (H200, cuDNN 9.19, ``scripts/probe_build_costs.py``, kept in
``data/bench/build_costs_h200.csv``): lesson 01's 26 graphs hold about 930 candidate plans. The
38 that cuDNN marks ``RUNTIME_COMPILATION`` (their kernel is compiled with NVRTC when the plan is
built) took 27.6 of the 27.7 s in a fresh process and 12.2 s for a new batch size once warm;
the other plans built in 0.05 s together. Python threads do not help: the binding holds the GIL
while it compiles (``scripts/probe_gil.py``). So `build_plans` builds a graph's precompiled plans
here, at once, and hands its runtime-compiled ones to worker processes
(`labkit.gpu.isolated.Worker`, each with its own CUDA context): a worker plans the same graph,
builds the one plan, serializes it (the compiled kernel travels with it) and this process
deserializes it in milliseconds. While the workers compile, this process builds as well,
taking the jobs no worker has started; only building is parallel, timing stays in this process.

A build with a compile budget (an interactive request: `compile_budget_s`) builds every
precompiled plan, takes the runtime-compiled plans whose compiles finished in time and cuts the
rest; a compile already running in a worker goes on, and its plan is kept (`_late`) for the next build of the same graph, which then takes it in
milliseconds ("measure again" once it is done). Such a build never compiles here (a single
compile took 21 s: a fused graph at C=K=128 on the H200).

Faults: a worker that dies, or takes longer than `PLAN_BUDGET_S` over one plan, is killed (the
next job starts a new one) and its plan is built here; a plan a worker could not reproduce (another
name at its index) or cuDNN would not deserialize is built here too. Ctrl-C while waiting stops
the workers. ``LABKIT_BUILD_WORKERS``: how many workers (0: every plan built here, as before);
default `default_workers`. Times in seconds.
"""
from __future__ import annotations

import atexit
import collections
import concurrent.futures
import itertools
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..signals.cancel import Budget, checkpoint
from ..errors import InvalidSpec, LabkitError

#: cuDNN's behaviour note for a plan whose kernel is compiled when the plan is built
RUNTIME_COMPILATION = "RUNTIME_COMPILATION"
#: seconds one plan may take in a worker before the worker is killed and the plan built here
PLAN_BUDGET_S = 60.0
#: most workers by default (8 gave the most in ``probe_parallel_builds.py`` on 16 cores)
MAX_WORKERS = 8
#: a budget shorter than this (seconds) never compiles a plan here: one compile can outlast it
STEAL_MIN_BUDGET_S = 30.0
#: seconds an interactive request waits for runtime-compiled plans (`compile_budget_s`)
INTERACTIVE_COMPILE_BUDGET_S = 3.0
#: a worker keeps this many planned graphs, so several plans of one graph are planned once there
_KEEP_PLANNED = 8


def default_workers() -> int:
    """``LABKIT_BUILD_WORKERS`` if set (0 turns workers off), else min(`MAX_WORKERS`, CPU cores - 1)."""
    raw = os.environ.get("LABKIT_BUILD_WORKERS", "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise InvalidSpec("LABKIT_BUILD_WORKERS", raw, "must be a whole number of worker processes (0: none)") from None
        if n < 0:
            raise InvalidSpec("LABKIT_BUILD_WORKERS", raw, "must be >= 0")
        return n
    return max(0, min(MAX_WORKERS, (os.cpu_count() or 1) - 1))


def compile_budget_s() -> Optional[float]:
    """Seconds an interactive request (a panel's change) waits for the runtime-compiled plans of a
    graph it autotunes before timing the plans it has: ``LABKIT_COMPILE_BUDGET_S`` if set (``none``
    or 0: wait for every plan, as ``python -m labkit fill`` and ``record`` do), else
    `INTERACTIVE_COMPILE_BUDGET_S`."""
    from .. import env

    return env.seconds_setting("LABKIT_COMPILE_BUDGET_S", INTERACTIVE_COMPILE_BUDGET_S, ("none", "0", "inf"))


# ---- in the worker ------------------------------------------------------------------------------
_planned: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()


def build_remote(spec_fields: dict, epilogue: str, workspace_cap: Optional[int], index: int, name: str) -> dict:
    """In a worker: plan the graph as this process's `engine.ConvGraph` does, build plan ``index``
    (checked to be ``name``), and return it serialized with its workspace bytes, notes and seconds."""
    from ..spec import ConvSpec
    from . import frontend

    spec = ConvSpec.from_dict(spec_fields)
    key = (spec.key, epilogue, workspace_cap)
    g = _planned.pop(key, None)
    if g is None:
        g = frontend.planned_graph(spec, epilogue, workspace_cap)
    _planned[key] = g
    while len(_planned) > _KEEP_PLANNED:
        _planned.popitem(last=False)
    found = g.get_plan_name_at_index(index)
    if found != name:
        raise InvalidSpec("plan index", index, f"names {found} in the worker, {name} in the caller: built there instead")
    t0 = time.perf_counter()
    g.build_plan_at_index(index)  # selects it, so serialize() holds this plan
    seconds = time.perf_counter() - t0
    workspace = int(g.get_workspace_size_plan_at_index(index))
    notes = ",".join(str(n).split(".")[-1] for n in g.get_behavior_notes_for_plan_at_index(index))
    return dict(index=index, name=name, workspace_bytes=workspace, notes=notes, data=bytes(g.serialize()),
                seconds=seconds, pid=os.getpid())


def warm_up() -> int:
    """In a worker: load CuPy, cuDNN and a handle (what the first job would otherwise wait for)."""
    from . import frontend

    frontend.handle_for()
    return os.getpid()


# ---- in this process ----------------------------------------------------------------------------
@dataclass
class Job:
    """One plan for a worker: the graph's spec, epilogue and cap, the plan's index and name."""

    spec_fields: dict
    epilogue: str
    workspace_cap: Optional[int]
    index: int
    name: str
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


@dataclass
class PoolStats:
    """What the pool did: plans built by workers and here, faults, seconds (summed over plans)."""

    remote: int = 0
    local: int = 0
    worker_faults: int = 0
    remote_seconds: float = 0.0
    #: the longest single plan a worker built (seconds): the floor of a wait no pool size removes
    remote_max_seconds: float = 0.0
    last_fault: str = ""


class BuildPool:
    """``size`` worker processes fed from one queue by one thread each (see the module doc)."""

    def __init__(self, size: int):
        from . import isolated

        self.size = size
        self._workers = [isolated.Worker() for _ in range(size)]
        #: (priority, sequence, job): the newest batch first (an older request's compiles wait),
        #: within a batch in order; None (priority inf) ends a thread
        self._queue: "queue.PriorityQueue" = queue.PriorityQueue()
        self._seq = itertools.count()
        self._batch = itertools.count()
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        self.stats = PoolStats()
        #: what a worker runs for a job ("module:function"; tests put a failing one here)
        self.target = "labkit.gpu.builds:build_remote"

    def start(self) -> None:
        """Start the workers in the background (each loads CUDA and cuDNN: about 1-2 s); at once."""
        with self._lock:
            if self._threads:
                return
            for i, w in enumerate(self._workers):
                t = threading.Thread(target=self._serve, args=(w,), daemon=True, name=f"labkit-build-{i}")
                t.start()
                self._threads.append(t)

    def _serve(self, worker) -> None:
        from .isolated import WorkerDied
        from ..errors import TimedOut

        try:
            worker.call("labkit.gpu.builds:warm_up", (), budget_s=PLAN_BUDGET_S, what="starting a build worker")
        except (LabkitError, OSError):
            pass  # the first job tries again
        while True:
            _, _, job = self._queue.get()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue  # built here meanwhile, or no longer wanted
            try:
                value = worker.call(self.target, (job.spec_fields, job.epilogue, job.workspace_cap, job.index, job.name),
                                    budget_s=PLAN_BUDGET_S, what=f"building plan {job.index} ({job.name}) in a worker")
                with self._lock:
                    self.stats.remote += 1
                    self.stats.remote_seconds += value["seconds"]
                    self.stats.remote_max_seconds = max(self.stats.remote_max_seconds, value["seconds"])
                job.future.set_result(value)
            except BaseException as exc:  # noqa: BLE001  (every failure goes to the caller, who builds it here)
                if isinstance(exc, (WorkerDied, TimedOut)):
                    with self._lock:
                        self.stats.worker_faults += 1
                        self.stats.last_fault = str(exc)[:200]
                job.future.set_exception(exc)

    def built_here(self) -> None:
        """Count one runtime-compiled plan built in the notebook's process instead of a worker."""
        with self._lock:
            self.stats.local += 1

    def batch(self) -> int:
        """A new batch number: jobs submitted with a higher one are taken first."""
        return next(self._batch)

    def submit(self, job: Job, batch: int = 0) -> Job:
        self.start()
        self._queue.put((-batch, next(self._seq), job))
        return job

    def stop(self) -> None:
        """Kill every worker (their CUDA contexts and GPU memory go with them); a later job restarts them."""
        for w in self._workers:
            w.stop()

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put((float("inf"), next(self._seq), None))
        self.stop()

    def pids(self) -> List[int]:
        """Process ids of the workers running now."""
        procs = [w._proc for w in self._workers]
        return [p.pid for p in procs if p is not None and p.is_alive()]


_pool: Optional[BuildPool] = None
_pool_lock = threading.Lock()


def pool() -> Optional[BuildPool]:
    """This process's build pool (made on first use, closed at exit), or None when
    `default_workers` is 0 or this process is itself a daemonic worker (it may not have children)."""
    global _pool
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return None
    with _pool_lock:
        n = default_workers()
        if _pool is None or _pool.size != n:
            if _pool is not None:
                _pool.close()
            _pool = BuildPool(n) if n > 0 else None
            if _pool is not None:
                atexit.register(_pool.close)
        return _pool


def start_workers() -> Optional[BuildPool]:
    """Start this process's build workers now, in the background (a live panel calls this when it
    is made, so the workers are ready when its first graph needs them). Never raises."""
    try:
        p = pool()
        if p is not None:
            p.start()
        return p
    except Exception:  # noqa: BLE001  (workers are an optimisation)
        return None


@dataclass
class RemotePlan:
    """A plan built in a worker and deserialized here: its own one-plan frontend graph."""

    workspace_bytes: int
    notes: str
    graph: object
    data: bytes
    seconds: float


def runtime_compiled(g, count: int) -> List[int]:
    """Indices of the plans of planned frontend graph ``g`` that cuDNN compiles at build time."""
    out = []
    for i in range(count):
        try:
            notes = g.get_behavior_notes_for_plan_at_index(i)
        except Exception:  # noqa: BLE001  (no notes for this plan: build it here)
            continue
        if any(str(n).endswith(RUNTIME_COMPILATION) for n in notes):
            out.append(i)
    return out


#: graphs planned ahead (`ahead`): graph key -> (planned frontend graph, {plan index: `Job`})
_ahead: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_ahead_lock = threading.Lock()
#: most graphs kept planned ahead; the oldest are dropped (their jobs cancelled) beyond it
MAX_AHEAD = 64


def _jobs_for(workers: BuildPool, spec, epilogue: str, workspace_cap, g, indices, batch: Optional[int] = None) -> Dict[int, Job]:
    fields, batch = spec.to_dict(), workers.batch() if batch is None else batch
    return {i: workers.submit(Job(fields, epilogue, workspace_cap, i, g.get_plan_name_at_index(i)), batch) for i in indices}


def ahead(graphs) -> int:
    """Plan these graphs now (``graphs``: (spec, epilogue, workspace cap) triples; about 10-40 ms
    each) and queue every runtime-compiled plan of all of them for the workers at once, so an
    experiment that then builds them one after another (`engine.get_graph`) finds their compiles
    under way or done: the workers compile across graphs, not only within one. Graphs already
    planned ahead, or that fail to plan, are skipped (the build says why). Returns how many plans
    were queued; 0 without workers. (`engine.build_ahead` leaves out the graphs built already.)"""
    workers = pool()
    if workers is None:
        return 0
    from . import frontend

    queued, batch = 0, workers.batch()
    for spec, epilogue, cap in graphs:
        key = (spec.key, epilogue, cap)
        with _ahead_lock:
            if key in _ahead:
                continue
        try:
            g = frontend.planned_graph(spec, epilogue, cap)
        except Exception:  # noqa: BLE001  (the real build reports it)
            continue
        jobs = _jobs_for(workers, spec, epilogue, cap, g, runtime_compiled(g, g.get_execution_plan_count()), batch)
        queued += len(jobs)
        with _ahead_lock:
            _ahead[key] = (g, jobs)
            while len(_ahead) > MAX_AHEAD:
                for job in _ahead.popitem(last=False)[1][1].values():
                    job.future.cancel()
    return queued


def take_ahead(spec, epilogue: str, workspace_cap) -> tuple:
    """(planned frontend graph, {index: `Job`}) for a graph planned `ahead`, or (None, {})."""
    with _ahead_lock:
        return _ahead.pop((spec.key, epilogue, workspace_cap), (None, {}))


#: compiles a budget cut while a worker ran them: graph key -> {plan index: `Job`} (they finish
#: anyway; the next build of the graph takes them)
_late: "collections.OrderedDict[tuple, Dict[int, Job]]" = collections.OrderedDict()


def _keep_late(cg, job: Job) -> None:
    with _ahead_lock:
        _late.setdefault((cg.spec.key, cg.epilogue, cg.workspace_cap), {})[job.index] = job
        while len(_late) > MAX_AHEAD:
            _late.popitem(last=False)


def late_compiles(spec, epilogue: str, workspace_cap) -> Dict[int, Job]:
    """The compiles of this graph that a budget cut and workers still run or have finished
    (index -> `Job`; ``job.future.done()`` once its plan is ready), left in place."""
    with _ahead_lock:
        return dict(_late.get((spec.key, epilogue, workspace_cap), {}))


def _take_late(cg, g) -> Dict[int, Job]:
    """This graph's `_late` jobs whose plan names still match ``g``'s (then removed from `_late`)."""
    with _ahead_lock:
        jobs = _late.pop((cg.spec.key, cg.epilogue, cg.workspace_cap), {})
    return {i: j for i, j in jobs.items() if not j.future.cancelled() and g.get_plan_name_at_index(i) == j.name}


def build_plans(cg, budget: Budget, workers: Optional[BuildPool] = None, parallel: bool = True,
                jobs: Optional[Dict[int, Job]] = None, compile_budget: Optional[Budget] = None):
    """Build every candidate plan of `engine.ConvGraph` ``cg`` (planned, nothing built), checking
    ``budget`` between plans. Returns ({index: why it was not built}, {index: `RemotePlan`}):
    precompiled plans are built in ``cg.graph`` here; runtime-compiled ones in the workers when
    there are any (``workers``: this process's `pool` by default; ``parallel=False``: none), or by
    the ``jobs`` queued for them already (`ahead`). Plans not built when the budget is spent say
    ``cut: ...``; ``compile_budget`` (shorter): how long to wait for the workers' compiles (with
    it, every compile goes to a worker, where it can be left to finish: `_late`)."""
    from .frontend import build_every_plan

    g = cg.graph
    count = g.get_execution_plan_count()
    jobs = dict(jobs or {})
    workers = (workers or pool()) if parallel else None
    if workers is not None:
        jobs.update({i: j for i, j in _take_late(cg, g).items() if i not in jobs})
    # a graph planned ahead knows its compiled plans already: its jobs are exactly those
    compiled = (sorted(jobs) or runtime_compiled(g, count)) if workers is not None else []
    # no workers, or one compile and no hurry: nothing to run beside it
    if workers is None or (not jobs and len(compiled) < (1 if compile_budget is not None else 2)):
        for job in jobs.values():
            job.future.cancel()
        return build_every_plan(g, budget), {}
    jobs.update(_jobs_for(workers, cg.spec, cg.epilogue, cg.workspace_cap, g, [i for i in compiled if i not in jobs]))
    now = [i for i in range(count) if i not in jobs]
    jobs = [jobs[i] for i in sorted(jobs)]
    why_not: Dict[int, str] = {}
    remote: Dict[int, RemotePlan] = {}
    try:
        why_not.update(build_every_plan(g, budget, now))
        waiting = compile_budget or budget
        for job in reversed(jobs):  # steal from the end of the queue: the workers take from its start
            if waiting.over or waiting.left < STEAL_MIN_BUDGET_S:  # a compile here cannot be cut
                break
            checkpoint()
            if job.future.cancel():
                why_not.update(build_every_plan(g, budget, [job.index]))
                workers.built_here()
        for job in jobs:
            _collect(cg, job, waiting, why_not, remote, workers)
    except BaseException as exc:
        for job in jobs:
            job.future.cancel()
        if isinstance(exc, KeyboardInterrupt):
            workers.stop()
        raise
    return why_not, remote


def _collect(cg, job: Job, budget: Budget, why_not: dict, remote: dict, workers: BuildPool) -> None:
    """Wait for one job within ``budget``: deserialize its plan, or build it here when the worker failed."""
    from .frontend import build_every_plan, handle_for

    if job.future.cancelled():  # only `build_plans` cancels this graph's jobs before collecting: it built them here
        return
    while True:
        try:
            value = job.future.result(timeout=0.05)
            break
        except concurrent.futures.TimeoutError:
            checkpoint()
            if budget.over:
                if job.future.cancel():  # no worker had taken it yet
                    why_not[job.index] = f"cut: not compiled when the budget ({budget.what}, {budget.spent:.1f} s) was spent"
                else:  # a worker compiles it now: the next build of this graph takes it
                    _keep_late(cg, job)
                    why_not[job.index] = (f"cut: still compiling after {budget.spent:.1f} s ({budget.what}; "
                                          "runtime-compiled: a worker finishes it for the next build)")
                return
        except Exception:  # noqa: BLE001  (the worker failed, died, hung or declined: built here, for cuDNN's own reason)
            value = None
            break
    if value is not None:
        try:
            import cudnn

            g2 = cudnn.pygraph(handle=handle_for())
            t0 = time.perf_counter()
            g2.deserialize(handle_for(), list(value["data"]))
            remote[job.index] = RemotePlan(value["workspace_bytes"], value["notes"], g2, value["data"],
                                           value["seconds"] + time.perf_counter() - t0)
            return
        except Exception:  # noqa: BLE001  (cuDNN would not load it here: build it here)
            pass
    workers.built_here()
    why_not.update(build_every_plan(cg.graph, budget, [job.index]))
