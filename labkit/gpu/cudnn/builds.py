"""A graph's runtime-compiled plans, built in parallel in worker processes.

Where an all-plan build's time goes (H200, cuDNN 9.19, ``data/bench/build_costs_h200.csv``,
docs/findings.md): lesson 01's 26 graphs hold about 930 candidate plans. The
38 that cuDNN marks ``RUNTIME_COMPILATION`` (their kernel is compiled with NVRTC when the plan is
built) take 27.6 of the 27.7 s in a fresh process and 12.2 s for a new batch size once warm;
the other plans build in 0.05 s together. Python threads do not help: the binding holds the GIL
while it compiles (docs/findings.md). So `build_plans` builds a graph's precompiled plans
here, at once, and hands its runtime-compiled ones to worker processes
(`labkit.gpu.host.isolated.Worker`, each with its own CUDA context): a worker plans the same graph,
builds the one plan, serializes it (the compiled kernel travels with it) and this process
deserializes it in milliseconds. While the workers compile, this process builds as well,
taking the jobs no worker has started; only building is parallel, timing stays in this process.

A build with a compile budget (an interactive request: `compile_budget_s`) builds every precompiled
plan, takes the runtime-compiled plans whose compiles finished in time and cuts the rest; a compile
already running in a worker goes on, and its plan is kept (`_late`) for the next build of the same
graph, which then takes it in milliseconds ("measure again" once it is done). Such a build never
compiles here (a single compile took 21 s: a fused graph at C=K=128 on the H200). Once the budget is
spent, the request's queued compiles that no worker has started are cancelled together
(`BuildPool.cancel_queued`) and its later graphs start none, so the workers are free for the next
panel; a graph left with no plan at all (every plan runtime-compiled, as fp8 ones are) waits for its
compiles within the build budget instead (`_nothing_built`).

A runtime-compiled plan compiled once, by any process on this machine, is kept on disk
(`labkit.gpu.cudnn.compiled_plans`): a build of its graph (``parallel``) deserializes it in milliseconds
and queues no compile for it. A build that measures what building costs (``parallel=False``) loads
and keeps nothing.

Faults: a worker that dies, or takes longer than `PLAN_BUDGET_S` over one plan, is killed (the
next job starts a new one) and its plan is built here; a plan a worker could not reproduce (another
name at its index) or cuDNN would not deserialize is built here too. Ctrl-C while waiting stops
the workers. ``LABKIT_BUILD_WORKERS``: how many workers (0: every plan built here, one at a time);
default `default_workers`. Times in seconds.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from ... import env
from ...signals.cancel import Budget, checkpoint, was_cut
from ...signals.progress import announce
from ..checks.plan_checks import BOOK
from . import compiled_plans
from .build_pool import BuildPool, Job, pool

#: cuDNN's behaviour note for a plan whose kernel is compiled when the plan is built
RUNTIME_COMPILATION = "RUNTIME_COMPILATION"
#: a budget shorter than this (seconds) never compiles a plan here: one compile can outlast it
STEAL_MIN_BUDGET_S = 30.0
#: seconds an interactive request waits for runtime-compiled plans (`compile_budget_s`)
INTERACTIVE_COMPILE_BUDGET_S = 3.0


def compile_budget_s() -> Optional[float]:
    """Seconds an interactive request waits for a graph's runtime-compiled plans before timing the rest.

    Returns:
        ``LABKIT_COMPILE_BUDGET_S`` if set (``none`` or 0: None, wait for every plan, as ``python -m
        labkit fill`` and ``record`` do), else `INTERACTIVE_COMPILE_BUDGET_S`.
    """
    return env.seconds_setting("LABKIT_COMPILE_BUDGET_S", INTERACTIVE_COMPILE_BUDGET_S, ("none", "0", "inf"))


@dataclass
class RemotePlan:
    """A plan built in a worker and deserialized here, as its own one-plan frontend graph.

    Attributes:
        workspace_bytes: bytes the plan needs.
        notes: cuDNN's behaviour notes.
        graph: the deserialized frontend graph.
        data: its serialized bytes (what `labkit.gpu.cudnn.saved_plans.save_plan` writes).
        seconds: how long the worker took to build it.
    """

    workspace_bytes: int
    notes: str
    graph: object
    data: bytes
    seconds: float


def runtime_compiled(g, count: int) -> List[int]:
    """The plans of a planned frontend graph that cuDNN compiles when they are built.

    Args:
        g: the planned frontend graph.
        count: its number of candidate plans.

    Returns:
        Their indices.
    """
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


def _jobs_for(
    workers: BuildPool, spec, epilogue: str, workspace_cap, g, indices, batch: Optional[int] = None
) -> Dict[int, Job]:
    fields, batch = spec.to_dict(), workers.batch() if batch is None else batch
    return {
        i: workers.submit(Job(fields, epilogue, workspace_cap, i, g.get_plan_name_at_index(i)), batch)
        for i in indices
    }


def ahead(graphs) -> int:
    """Plan graphs now and queue every runtime-compiled plan of all of them for the workers at once.

    An experiment that then builds them one after another (`graph_cache.get_graph`) finds their compiles
    under way or done: the workers compile across graphs, not only within one. The first compile of
    each graph that has no precompiled plan is queued before all others. Graphs already planned
    ahead, or that fail to plan, are skipped (the build says why). `graph_cache.build_ahead` leaves out the
    graphs built already.

    Args:
        graphs: (spec, epilogue, workspace cap) triples; planning takes about 10-40 ms each.

    Returns:
        How many plans were queued; 0 without workers.
    """
    workers = pool()
    if workers is None:
        return 0
    from . import frontend  # heavy: CuPy, live only

    planned = []
    for spec, epilogue, cap in graphs:
        key = (spec.key, epilogue, cap)
        with _ahead_lock:
            if key in _ahead:
                continue
        try:
            g = frontend.planned_graph(spec, epilogue, cap)
        except Exception:  # noqa: BLE001  (the real build reports it)
            continue
        count = g.get_execution_plan_count()
        never = _never_run(spec, epilogue, g, count)
        compiled = [i for i in runtime_compiled(g, count) if i not in never]
        on_disk = _kept(spec, epilogue, cap, g, compiled)  # loaded by the build, not compiled again
        compiled = [i for i in compiled if i not in on_disk]
        # a graph with no precompiled plan (fp8) has no plan at all until one compile is done: that one first
        first = compiled[:1] if compiled and len(compiled) + len(never) == count else []
        planned.append((key, spec, epilogue, cap, g, first, [i for i in compiled if i not in first]))
    batch, jobs = workers.batch(), {p[0]: {} for p in planned}
    for key, spec, epilogue, cap, g, first, _ in planned:  # queued in this order: the firsts, then the rest
        jobs[key].update(_jobs_for(workers, spec, epilogue, cap, g, first, batch))
    for key, spec, epilogue, cap, g, _, rest in planned:
        jobs[key].update(_jobs_for(workers, spec, epilogue, cap, g, rest, batch))
    for key, spec, epilogue, cap, g, *_ in planned:
        with _ahead_lock:
            _ahead[key] = (g, jobs[key])
            while len(_ahead) > MAX_AHEAD:
                for job in _ahead.popitem(last=False)[1][1].values():
                    job.future.cancel()
    return sum(len(j) for j in jobs.values())


def take_ahead(spec, epilogue: str, workspace_cap) -> tuple:
    """A graph planned `ahead`, with its queued jobs, taken out of the ahead list.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap.

    Returns:
        (planned frontend graph, {index: `Job`}); (None, {}) for a graph not planned ahead.
    """
    with _ahead_lock:
        return _ahead.pop((spec.key, epilogue, workspace_cap), (None, {}))


def compiles_pending(spec, epilogue: str, workspace_cap) -> int:
    """How many runtime-compiled plans of a graph planned `ahead` no worker has finished yet.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap.

    Returns:
        The count; 0 for a graph not planned ahead, or taken by its build.
    """
    with _ahead_lock:
        return len(_running((spec.key, epilogue, workspace_cap)))


def _running(key: tuple) -> List[concurrent.futures.Future]:
    """The futures of a graph's compiles `ahead` queued that no worker has finished (the caller holds
    ``_ahead_lock``); none for a graph not planned ahead, or taken by its build."""
    return [job.future for job in _ahead.get(key, (None, {}))[1].values() if not job.future.done()]


def ready_ahead(graphs, *, wait_s: float) -> List[int]:
    """Which graphs have no compile that `ahead` queued still running, waiting for the first to
    finish when every one still has one: their compiles do not finish in the graphs' order (a new
    kernel takes about half a second, a rebuild of one tens of milliseconds).

    Args:
        graphs: (spec, epilogue, workspace cap) triples, in the order they would be built.
        wait_s: the longest to wait when none is ready, in seconds.

    Returns:
        Their positions in ``graphs``, in order (a graph not planned ahead has none running); []
        when none was ready within ``wait_s``.
    """
    deadline = time.monotonic() + wait_s
    while True:
        with _ahead_lock:
            running = [_running((s.key, e, c)) for s, e, c in graphs]
        ready = [i for i, futures in enumerate(running) if not futures]
        left = deadline - time.monotonic()
        if ready or left <= 0:
            return ready
        concurrent.futures.wait(
            [f for futures in running for f in futures],
            timeout=left,
            return_when=concurrent.futures.FIRST_COMPLETED,
        )


#: compiles a budget cut while a worker ran them: graph key -> {plan index: `Job`} (they finish
#: anyway; the next build of the graph takes them)
_late: "collections.OrderedDict[tuple, Dict[int, Job]]" = collections.OrderedDict()


def _keep_late(cg, job: Job) -> None:
    with _ahead_lock:
        _late.setdefault((cg.spec.key, cg.epilogue, cg.workspace_cap), {})[job.index] = job
        while len(_late) > MAX_AHEAD:
            _late.popitem(last=False)


def late_compiles(spec, epilogue: str, workspace_cap) -> Dict[int, Job]:
    """The compiles of a graph that a budget cut and workers still run or have finished; left in place.

    Args:
        spec: the convolution.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap.

    Returns:
        Plan index -> `Job`; ``job.future.done()`` once its plan is ready.
    """
    with _ahead_lock:
        return dict(_late.get((spec.key, epilogue, workspace_cap), {}))


def _take_late(cg, g) -> Dict[int, Job]:
    """This graph's `_late` jobs whose plan names still match ``g``'s (then removed from `_late`)."""
    with _ahead_lock:
        jobs = _late.pop((cg.spec.key, cg.epilogue, cg.workspace_cap), {})
    return {
        i: j for i, j in jobs.items() if not j.future.cancelled() and g.get_plan_name_at_index(i) == j.name
    }


def build_plans(
    cg,
    budget: Budget,
    *,
    workers: Optional[BuildPool] = None,
    parallel: bool = True,
    jobs: Optional[Dict[int, Job]] = None,
    compile_budget: Optional[Budget] = None,
):
    """Build every candidate plan of a planned graph, checking a budget between plans.

    Precompiled plans are built in ``cg.graph`` here; runtime-compiled ones in the workers when
    there are any, or by the ``jobs`` queued for them already (`ahead`). Plans not built when the
    budget is spent say ``cut: ...``.

    Args:
        cg: the `ConvGraph` being built (planned, nothing built).
        budget: the build's budget.
        workers: default this process's `pool`.
        parallel: False builds every plan here.
        jobs: plan index -> `Job` queued already.
        compile_budget: how long to wait for the workers' compiles (shorter than ``budget``); with
            it, every compile goes to a worker, where it can be left to finish (`_late`).

    Returns:
        ({index: why it was not built}, {index: `RemotePlan`}).
    """
    from .frontend import build_every_plan  # heavy: CuPy, live only

    g = cg.graph
    count = g.get_execution_plan_count()
    never = _never_run(cg.spec, cg.epilogue, g, count)  # never built: no time on them, here or in a worker
    at_run_time = runtime_compiled(g, count) if parallel else []
    loaded = _load_kept(cg, g, at_run_time, never) if parallel else {}  # compiled by an earlier process
    for i in loaded:
        if i in (jobs or {}):
            jobs[i].future.cancel()
    given = {i: j for i, j in (jobs or {}).items() if i not in loaded}
    jobs = {i: j for i, j in given.items() if not j.future.cancelled()}  # cancelled with their batch: anew
    workers = (workers or pool()) if parallel else None
    if workers is not None:
        jobs.update({i: j for i, j in _take_late(cg, g).items() if i not in jobs and i not in loaded})
    # a graph planned ahead knows its compiled plans already: its jobs are exactly those
    compiled = (
        [i for i in (sorted(set(given) | set(jobs)) or at_run_time) if i not in loaded]
        if workers is not None
        else []
    )
    # no workers, or one compile and no hurry: nothing to run beside it
    if workers is None or (not jobs and len(compiled) < (1 if compile_budget is not None else 2)):
        for job in jobs.values():
            job.future.cancel()
        why_not = dict(never)
        why_not.update(
            build_every_plan(g, budget, [i for i in range(count) if i not in never and i not in loaded])
        )
        if parallel:
            _keep_built_here(cg, g, [i for i in at_run_time if i not in loaded], why_not)
        return why_not, loaded
    why_not: Dict[int, str] = dict(never)
    missing = [i for i in compiled if i not in jobs and i not in why_not]
    if compile_budget is not None and compile_budget.over:  # started now, they would only run late
        why_not.update(
            {
                i: f"cut: not compiled; the request's compile budget ({compile_budget.what}) was spent"
                for i in missing
            }
        )
    else:
        jobs.update(_jobs_for(workers, cg.spec, cg.epilogue, cg.workspace_cap, g, missing))
    now = [i for i in range(count) if i not in jobs and i not in why_not and i not in loaded]
    jobs = [jobs[i] for i in sorted(jobs)]
    remote: Dict[int, RemotePlan] = dict(loaded)
    stolen = set()
    try:
        why_not.update(build_every_plan(g, budget, now))
        waiting = compile_budget or budget
        for job in reversed(jobs):  # steal from the end of the queue: the workers take from its start
            if waiting.over or waiting.left < STEAL_MIN_BUDGET_S:  # a compile here cannot be cut
                break
            checkpoint()
            if job.future.cancel():
                stolen.add(job.index)
                why_not.update(build_every_plan(g, budget, [job.index]))
                workers.built_here()
                _keep_built_here(cg, g, [job.index], why_not)
        for job in jobs:
            if job.index in stolen:
                continue
            _collect(cg, job, waiting, why_not, remote, workers, compile_cut=compile_budget is not None)
        if compile_budget is not None and len(why_not) >= count:  # every plan failed, excluded or cut
            jobs = _nothing_built(cg, g, budget, why_not, remote, workers)
    except BaseException as exc:
        for job in jobs:
            job.future.cancel()
        if isinstance(exc, KeyboardInterrupt):
            workers.stop()
        raise
    return why_not, remote


def _kept(spec, epilogue: str, workspace_cap, g, indices) -> set:
    """The plans among ``indices`` whose compiled kernel an earlier process kept on disk
    (`labkit.gpu.cudnn.compiled_plans`; their files exist, unread)."""
    names = compiled_plans.names_of(g, indices)
    return {i for i, name in names.items() if compiled_plans.kept(spec.key, epilogue, workspace_cap, name)}


def _keep_built_here(cg, g, indices, why_not: Dict[int, str]) -> None:
    """Keep on disk the runtime-compiled plans among ``indices`` that were built in this process
    (`labkit.gpu.cudnn.compiled_plans`), as the workers keep theirs."""
    for i in indices:
        if i not in why_not:
            compiled_plans.keep_built(cg.spec.key, cg.epilogue, cg.workspace_cap, g, i)


def _load_kept(cg, g, compiled, never: Dict[int, str]) -> Dict[int, RemotePlan]:
    """This graph's runtime-compiled plans (``compiled``: their indices) kept on disk
    (`labkit.gpu.cudnn.compiled_plans`), deserialized: plan index -> `RemotePlan` (``seconds``: reading and
    deserializing it)."""
    wanted = [i for i in compiled if i not in never]
    found = compiled_plans.load(
        cg.spec.key, cg.epilogue, cg.workspace_cap, compiled_plans.names_of(g, wanted)
    )
    return {
        i: RemotePlan(saved.workspace_bytes, saved.notes, g2, saved.data, seconds)
        for i, (g2, saved, seconds) in found.items()
    }


def _never_run(spec, epilogue: str, g, count: int) -> Dict[int, str]:
    """Plans this process found wrong for this convolution (`plan_checks.BOOK`): index -> their
    verdict. They are not built again, here or in a worker."""
    wrong = {v.plan_name: v.status for _, _, v in BOOK.wrong(spec.key, epilogue)}
    if not wrong:
        return {}
    out = {}
    for i in range(count):
        try:
            name = g.get_plan_name_at_index(i)
        except Exception:  # noqa: BLE001  (a plan without a name: the build says why)
            continue
        if name in wrong:
            out[i] = wrong[name]
    return out


def _nothing_built(cg, g, budget: Budget, why_not: dict, remote: dict, workers: BuildPool) -> List[Job]:
    """A graph whose every plan is compiled at run time (fp8 on the H200) and all of them cut by a
    compile budget would have no plan: "not supported", which is untrue. Its cut compiles are
    waited for within the build ``budget`` instead (the running ones taken back from `_late`, the
    others queued again), until one plan is built; the others stay cut. Returns the jobs."""
    cut = sorted(i for i, why in why_not.items() if was_cut(why))
    if not cut:
        return []
    late = _take_late(cg, g)
    jobs = {i: late[i] for i in cut if i in late}
    jobs.update(
        _jobs_for(workers, cg.spec, cg.epilogue, cg.workspace_cap, g, [i for i in cut if i not in jobs])
    )
    pending, count = dict(jobs), g.get_execution_plan_count()
    while pending and len(why_not) >= count and not budget.over:  # until a plan is built, here or in a worker
        done = [i for i, job in pending.items() if job.future.done()]
        if not done:
            checkpoint()
            time.sleep(0.02)
            continue
        for i in done:
            why_not.pop(i, None)
            _collect(cg, pending.pop(i), budget, why_not, remote, workers)
    for i, job in pending.items():  # one plan is enough for an interactive answer; the rest stay cut
        if not job.future.cancel():
            _keep_late(cg, job)
    return list(jobs.values())


#: seconds between the "still compiling" notes of a wait for a worker's plan (`_collect`)
WAIT_NOTE_S = 5.0


def _collect(
    cg, job: Job, budget: Budget, why_not: dict, remote: dict, workers: BuildPool, compile_cut: bool = False
) -> None:
    """Wait for one job within ``budget``: deserialize its plan, or build it here when the worker
    failed. ``compile_cut``: ``budget`` is a compile budget; once it is spent, the job's whole
    batch is cancelled where no worker has started it (`BuildPool.cancel_queued`)."""
    if (
        job.future.cancelled()
    ):  # cancelled with its batch when an earlier graph of the request ran out of time
        why_not[job.index] = f"cut: not compiled; the request's compile budget ({budget.what}) was spent"
        return
    t0 = said = time.monotonic()
    while True:
        try:
            value = job.future.result(timeout=0.05)
            break
        except concurrent.futures.TimeoutError:
            checkpoint()
            if time.monotonic() - said >= WAIT_NOTE_S:  # a compile of minutes is not a hang: say so
                said = time.monotonic()
                announce(
                    f"plan {job.index} ({job.name}) of {cg.spec.label}: compiled at run time in a worker, "
                    f"{said - t0:.0f} s so far"
                )
            if budget.over:
                if compile_cut:  # the rest of this request's queued compiles would only run late
                    workers.cancel_queued(job.batch)
                if job.future.cancel():  # no worker had taken it yet
                    why_not[job.index] = (
                        f"cut: not compiled when the budget ({budget.what}, {budget.spent:.1f} s) was spent"
                    )
                else:  # a worker compiles it now: the next build of this graph takes it
                    _keep_late(cg, job)
                    why_not[job.index] = (
                        f"cut: still compiling after {budget.spent:.1f} s ({budget.what}; "
                        "runtime-compiled: a worker finishes it for the next build)"
                    )
                return
        # the worker failed, died, hung or declined: built here, for cuDNN's own reason
        except Exception:  # noqa: BLE001
            value = None
            break
    # CUDA's: only once a plan came or must be built here
    from .frontend import build_every_plan, handle_for  # heavy: CuPy, live only

    if value is not None:
        try:
            import cudnn  # heavy: the cuDNN frontend loads cuDNN

            g2 = cudnn.pygraph(handle=handle_for())
            t0 = time.perf_counter()
            g2.deserialize(handle_for(), list(value["data"]))
            remote[job.index] = RemotePlan(
                value["workspace_bytes"],
                value["notes"],
                g2,
                value["data"],
                value["seconds"] + time.perf_counter() - t0,
            )
            return
        except Exception:  # noqa: BLE001  (cuDNN would not load it here: build it here)
            pass
    workers.built_here()
    why_not.update(build_every_plan(cg.graph, budget, [job.index]))
