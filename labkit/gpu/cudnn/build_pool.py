"""The build workers: processes that each build one runtime-compiled plan at a time for
`labkit.gpu.cudnn.builds` (each with its own CUDA context), fed from one priority queue by one thread
each, and what runs inside them (`build_remote`). A job is one plan of one graph; a batch is one
request's jobs (the newest batch is taken first, and a request whose compile budget is spent
cancels the rest of its batch: `BuildPool.cancel_queued`). ``LABKIT_BUILD_WORKERS``: how many
(`default_workers`). Times in seconds.

A plan goes back to the worker that last built the same engine for the same dtype, layout,
direction and epilogue (its `kernel_key`): cuDNN keeps the kernels it compiled at run time in the
process, and many of them serve other shapes, so a rebuild at a new batch size or channel count
there takes tens of milliseconds instead of a new compile of about half a second
(``data/bench/build_costs_h200.csv``). Another worker takes such a job only while its own worker
is busy with another job of its own. Every plan a worker builds is kept on disk
(`labkit.gpu.cudnn.compiled_plans`), so a later build of the same graph loads it instead.
"""

from __future__ import annotations

import atexit
import bisect
import collections
import concurrent.futures
import itertools
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ...errors import InvalidSpec, LabkitError, TimedOut
from ...spec import ConvSpec
from ...store import localcache
from ..host import context, isolated
from ..host.isolated import WorkerDied
from . import compiled_plans

#: seconds one plan may take in a worker before the worker is killed and the plan built here
PLAN_BUDGET_S = 60.0
#: most workers by default (8 gave the most on 16 cores: ``data/bench/parallel_builds_h200.csv``)
MAX_WORKERS = 8
#: a worker keeps this many planned graphs, so several plans of one graph are planned once there
_KEEP_PLANNED = 8


#: most workers by default in a process that measures while they start (the network report's
#: worker: `capped_by_default`): each makes a CUDA context and loads cuDNN as that process makes
#: its own and measures its first layers. On H200 hosts ResNet-50's report took 4.3-4.9 s with 2-4
#: workers against 4.9-5.4 s with 8, and 4.77 s with 2 against 5.04 s with 4, lower in each of four
#: alternated rounds (medians: docs/findings.md)
MEASURING_WORKERS = 2
#: the most workers `default_workers` gives in this process, when set (`capped_by_default`)
_cap: Optional[int] = None

#: most workers by default in a class (``LABKIT_SHARED_CACHE`` set: `in_class`): each is a CUDA
#: context on the GPU every learner shares, and the class's CPU cores are shared too
CLASS_WORKERS = 2


def in_class() -> bool:
    """Whether this kernel reads a class's shared recording (``LABKIT_SHARED_CACHE`` is set).

    Returns:
        True in a class: its learners share the GPU and the CPU cores, and most values are read, not
        built.
    """
    return localcache.shared_root() is not None


def default_workers() -> int:
    """How many build workers this process runs.

    Returns:
        ``LABKIT_BUILD_WORKERS`` if set (0 turns workers off), else min(`MAX_WORKERS`, CPU cores - 1);
        in a class (`in_class`), at most `CLASS_WORKERS`; in a process `capped_by_default`, at most
        its cap.
    """
    raw = os.environ.get("LABKIT_BUILD_WORKERS", "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise InvalidSpec(
                "LABKIT_BUILD_WORKERS", raw, "must be a whole number of worker processes (0: none)"
            ) from None
        if n < 0:
            raise InvalidSpec("LABKIT_BUILD_WORKERS", raw, "must be >= 0")
        return n
    most = CLASS_WORKERS if in_class() else MAX_WORKERS
    if _cap is not None:
        most = min(most, _cap)
    return max(0, min(most, (os.cpu_count() or 1) - 1))


def capped_by_default(most: int = MEASURING_WORKERS) -> None:
    """Run at most ``most`` build workers in this process from now on, unless ``LABKIT_BUILD_WORKERS``
    says how many (`default_workers`). Called before the workers start (`start_workers`).

    Args:
        most: the most workers, a whole number >= 0.

    Raises:
        InvalidSpec: ``most`` is not a whole number >= 0.
    """
    global _cap
    if isinstance(most, bool) or not isinstance(most, int) or most < 0:
        raise InvalidSpec("most", most, "must be a whole number of build workers >= 0")
    _cap = most


# ---- in the worker ------------------------------------------------------------------------------
_planned: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()


def build_remote(
    spec_fields: dict, epilogue: str, workspace_cap: Optional[int], index: int, name: str
) -> dict:
    """In a worker: build one plan of a graph planned as the caller's is, and return it serialized.

    Args:
        spec_fields: the convolution, as `ConvSpec.to_dict` gives it.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes; None for none.
        index: the plan's index.
        name: the plan's name in the caller, checked against the worker's.

    Returns:
        index, name, workspace_bytes, notes, data (the serialized graph), seconds and pid.
    """
    from . import compiled_plans, frontend  # heavy: CuPy, live only

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
        raise InvalidSpec(
            "plan index", index, f"names {found} in the worker, {name} in the caller: built there instead"
        )
    t0 = time.perf_counter()
    g.build_plan_at_index(index)  # selects it, so serialize() holds this plan
    seconds = time.perf_counter() - t0
    return dict(compiled_plans.serialized(g, index), index=index, seconds=seconds, pid=os.getpid())


def warm_up() -> int:
    """In a worker: load CuPy, cuDNN and a handle (what the first job would otherwise wait for),
    with CUDA's context made meanwhile (`labkit.gpu.host.context`).

    Returns:
        The worker's process id.
    """
    context.make_soon()
    from . import frontend  # heavy: CuPy, live only

    frontend.handle_for()
    return os.getpid()


# ---- in this process ----------------------------------------------------------------------------
def kernel_key(job: "Job") -> tuple:
    """What the kernels a job compiles depend on besides the shape.

    Args:
        job: the `Job`.

    Returns:
        (dtype, layout, direction, epilogue, the engine configuration's name).
    """
    fields = job.spec_fields
    return (fields.get("dtype"), fields.get("layout"), fields.get("direction"), job.epilogue, job.name)


@dataclass
class Job:
    """One plan for a worker.

    Attributes:
        spec_fields: the graph's convolution, as `ConvSpec.to_dict` gives it.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        index: the plan's index.
        name: the plan's name.
        future: resolves to `build_remote`'s dict, or to the worker's error.
        batch: the batch it was queued in (`BuildPool.submit`): one request's compiles, cancelled
            together.
    """

    spec_fields: dict
    epilogue: str
    workspace_cap: Optional[int]
    index: int
    name: str
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    #: the batch it was queued in (`BuildPool.submit`): one request's compiles, cancelled together
    batch: int = 0


def _keep(job: Job, value: dict) -> None:
    """Keep a plan a worker built on disk (`labkit.gpu.cudnn.compiled_plans`): the next build of its
    graph, in this process or a later one, loads it instead of compiling it again."""
    try:
        key = ConvSpec.from_dict(job.spec_fields).key
    except LabkitError:
        return
    compiled_plans.keep(key, job.epilogue, job.workspace_cap, value)


@dataclass
class PoolStats:
    """What the pool did; seconds are summed over plans.

    Attributes:
        remote: plans built by workers.
        local: runtime-compiled plans built in the notebook's process.
        worker_faults: workers that died or ran out of time.
        remote_seconds: seconds workers spent building.
        remote_max_seconds: the longest single plan a worker built: the floor of a wait no pool size
            removes.
        last_fault: the last fault, in words.
    """

    remote: int = 0
    local: int = 0
    worker_faults: int = 0
    remote_seconds: float = 0.0
    #: the longest single plan a worker built (seconds): the floor of a wait no pool size removes
    remote_max_seconds: float = 0.0
    last_fault: str = ""


class BuildPool:
    """Worker processes fed from one queue by one thread each (see the module doc).

    Args:
        size: how many workers.
    """

    def __init__(self, size: int):
        self.size = size
        self._workers = [isolated.Worker() for _ in range(size)]
        #: (priority, sequence, job), kept sorted: the newest batch first (an older request's
        #: compiles wait), within a batch in order; None (priority inf) ends a thread
        self._queued: List[tuple] = []
        self._ready = threading.Condition()
        #: `kernel_key` -> the worker that last built it; which workers are building now
        self._home: Dict[tuple, int] = {}
        self._busy = [False] * size
        self._seq = itertools.count()
        self._batch = itertools.count()
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        #: batch -> its jobs not yet known to be done (`cancel_queued`)
        self._by_batch: Dict[int, List[Job]] = {}
        self.stats = PoolStats()
        #: what a worker runs for a job ("module:function"; tests put a failing one here)
        self.target = "labkit.gpu.cudnn.build_pool:build_remote"

    def start(self) -> None:
        """Start the workers in the background (each loads CUDA and cuDNN: about 1-2 s); at once."""
        with self._lock:
            if self._threads:
                return
            for i, w in enumerate(self._workers):
                t = threading.Thread(target=self._serve, args=(i, w), daemon=True, name=f"labkit-build-{i}")
                t.start()
                self._threads.append(t)

    def _pick(self, me: int) -> Optional[int]:
        """The position in the queue of the job worker ``me`` takes next, or None (caller holds
        ``_ready``): the first job that is its own or no worker's, else the first job whose worker
        is busy and has an earlier job of its own waiting."""
        waiting: Dict[int, int] = {}
        stealable = None
        for pos, (_, _, job) in enumerate(self._queued):
            home = None if job is None else self._home.get(kernel_key(job))
            if home is None or home == me:
                return pos
            if stealable is None and self._busy[home] and waiting.get(home, 0) > 0:
                stealable = pos
            waiting[home] = waiting.get(home, 0) + 1
        return stealable

    def _take(self, me: int) -> Optional[Job]:
        """Wait for the next job for worker ``me`` (`_pick`) and mark it this worker's; None ends
        the thread."""
        with self._ready:
            while True:
                pos = self._pick(me) if self._queued else None
                if pos is not None:
                    _, _, job = self._queued.pop(pos)
                    if job is not None:
                        self._home[kernel_key(job)] = me
                        self._busy[me] = True
                        self._ready.notify_all()  # its queued jobs may now be taken by others
                    return job
                self._ready.wait()

    def _idle(self, me: int, died: bool) -> None:
        """Worker ``me`` is free again; a worker that died lost its compiled kernels."""
        with self._ready:
            self._busy[me] = False
            if died:
                for key in [k for k, home in self._home.items() if home == me]:
                    del self._home[key]
            self._ready.notify_all()

    def _serve(self, me: int, worker) -> None:
        try:
            worker.call(
                "labkit.gpu.cudnn.build_pool:warm_up",
                (),
                budget_s=PLAN_BUDGET_S,
                what="starting a build worker",
            )
        except (LabkitError, OSError):
            pass  # the first job tries again
        while True:
            job = self._take(me)
            if job is None:
                return
            died = False
            if not job.future.set_running_or_notify_cancel():
                self._idle(me, died)
                continue  # built here meanwhile, or no longer wanted
            try:
                value = worker.call(
                    self.target,
                    (job.spec_fields, job.epilogue, job.workspace_cap, job.index, job.name),
                    budget_s=PLAN_BUDGET_S,
                    what=f"building plan {job.index} ({job.name}) in a worker",
                )
                with self._lock:
                    self.stats.remote += 1
                    self.stats.remote_seconds += value["seconds"]
                    self.stats.remote_max_seconds = max(self.stats.remote_max_seconds, value["seconds"])
                _keep(job, value)  # on disk before anyone waiting for it goes on
                job.future.set_result(value)
            except BaseException as exc:  # noqa: BLE001  (every failure goes to the caller: built there)
                if isinstance(exc, (WorkerDied, TimedOut)):
                    died = True
                    with self._lock:
                        self.stats.worker_faults += 1
                        self.stats.last_fault = str(exc)[:200]
                job.future.set_exception(exc)
            finally:
                self._idle(me, died)

    def built_here(self) -> None:
        """Count one runtime-compiled plan built in the notebook's process instead of a worker."""
        with self._lock:
            self.stats.local += 1

    def batch(self) -> int:
        """A new batch number: jobs submitted with a higher one are taken first.

        Returns:
            The number.
        """
        return next(self._batch)

    def submit(self, job: Job, batch: int = 0) -> Job:
        """Queue a job (starting the workers if needed).

        Args:
            job: the plan to build.
            batch: its request's batch (`batch`); the newest batch is taken first.

        Returns:
            ``job``; its ``future`` resolves when a worker has built it.
        """
        self.start()
        job.batch = batch
        with self._lock:
            self._by_batch.setdefault(batch, []).append(job)
            if len(self._by_batch) > 64:  # forget batches whose jobs are all over
                for b in [b for b, js in self._by_batch.items() if all(j.future.done() for j in js)]:
                    del self._by_batch[b]
        self._put((-batch, next(self._seq), job))
        return job

    def _put(self, entry: tuple) -> None:
        """Queue ``(priority, sequence, job)`` in order and wake the serving threads."""
        with self._ready:
            bisect.insort(self._queued, entry, key=lambda e: e[:2])
            self._ready.notify_all()

    def cancel_queued(self, batch: int) -> int:
        """Cancel every job of ``batch`` that no worker has started.

        A request whose compile budget is spent calls this: its queued compiles would otherwise
        run on as late compiles of up to 20 s and keep the next panel's compiles waiting (a
        lesson panel's first paint: 17.5 s on the H200).

        Args:
            batch: the request's batch number (`submit`).

        Returns:
            How many jobs were cancelled.
        """
        with self._lock:
            jobs = list(self._by_batch.get(batch, ()))
        return sum(1 for j in jobs if not j.future.done() and j.future.cancel())

    def waiting(self) -> List[Job]:
        """The queued jobs no worker has started and no one has cancelled.

        Returns:
            The jobs, in the order the workers would take them.
        """
        with self._ready:
            return [job for _, _, job in self._queued if job is not None and not job.future.done()]

    def stop(self) -> None:
        """Kill every worker (their CUDA contexts and GPU memory go with them); a later job restarts them."""
        for w in self._workers:
            w.stop()

    def close(self) -> None:
        """End the serving threads and kill the workers."""
        for _ in self._threads:
            self._put((float("inf"), next(self._seq), None))
        self.stop()

    def pids(self) -> List[int]:
        """The workers running now.

        Returns:
            Their process ids.
        """
        procs = [w._proc for w in self._workers]
        return [p.pid for p in procs if p is not None and p.is_alive()]


_pool: Optional[BuildPool] = None
_pool_lock = threading.Lock()


def pool() -> Optional[BuildPool]:
    """This process's build pool, made on first use and closed at exit.

    Returns:
        The `BuildPool`; None when `default_workers` is 0 or this process is itself a daemonic
        worker (it may not have children).
    """
    global _pool

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
    """Start this process's build workers now, in the background. Never raises.

    A live panel calls this when it is made, so the workers are ready when its first graph needs
    them.

    Returns:
        The `BuildPool`, or None.
    """
    try:
        p = pool()
        if p is not None:
            p.start()
        return p
    except Exception:  # noqa: BLE001  (workers are an optimisation)
        return None
