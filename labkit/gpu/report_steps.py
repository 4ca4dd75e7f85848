"""The steps of a network report (`labkit.experiments.your_network`) that run in the worker process
(`labkit.gpu.host.isolated`), each within its budget (seconds): `spec_step` measures one distinct
convolution (every plan autotuned, the heuristic, fastest and smallest-workspace plans checked against
the float64 reference), `strategy_step` runs the whole pass under one workspace strategy (the memory
timeline and a timed pass), `ahead_step` queues every layer's plan builds at once (the worker's
warm-up, `labkit.gpu.worker_warmup`, queues them before the first step), and `ready_step` says
which layers have no compile left running. Bytes; microseconds.

The steps are called by name (``"<this module>:spec_step"``), so they stay module-level functions here;
the pass's inputs and outputs are kept between strategy steps in this module. They live in
``labkit.gpu``, above its rooms, not beside the lesson: the worker imports this module while it makes
CUDA's context (`labkit.gpu.worker_warmup`), and importing it pulls in none of the lessons, their
charts or plotly.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Dict, List, Optional, Sequence, Tuple

from ..draw.prose import counted
from ..errors import LabkitError, status_row
from ..signals.cancel import Budget, checkpoint, was_cut
from ..signals.progress import announce
from ..spec import ConvSpec
from .checks import reference
from .cudnn import builds
from .workspaces import workspace
from .workspaces.runner import Runner


def _measure_spec(spec: ConvSpec, budget: Budget) -> Tuple[dict, List[dict]]:
    """Autotune every plan of ``spec`` (each checked against the float64 reference before it is
    timed: `labkit.gpu.timing.autotune`) within ``budget`` (the build gets at most half of it); the
    heuristic, fastest and smallest-workspace plans report their errors. (summary, plan rows)."""
    import cupy  # heavy: CuPy, live only

    from .cudnn import graph_cache, operands  # heavy: CuPy, live only
    from .timing import autotune  # heavy: CuPy, live only

    cg = graph_cache.get_graph(spec, build_budget_s=budget.left / 2)
    ops = operands.Operands(spec)
    try:
        tuned = autotune.autotune(cg, ops, budget=budget)
        rows = tuned.rows  # plain dicts: this path reads a few rows a layer, no table needed
        ok = [r for r in rows if r["status"] == "ok"]
        smallest = int(min(ok, key=lambda r: (r["workspace_bytes"], r["gpu_us"]))["plan_index"])
        picks = {"heuristic": tuned.heuristic_index, "fastest": tuned.best_index, "smallest": smallest}
        errors = {i: cg.verdicts[i].rel_error for i in dict.fromkeys(picks.values())}
    finally:
        del ops
        cupy.get_default_memory_pool().free_all_blocks()
    tol = reference.tolerance_for(spec)
    cut = tuned.cut + cg.build_cut
    out = dict(
        tolerance=tol,
        max_rel_error=max(errors.values()),
        checked=all(e <= tol for e in errors.values()),
        plans_timed=len(ok),
        plans_cut=cut,
        plans_wrong=tuned.wrong,
        status="ok",
        reason=" ".join(
            filter(
                None,
                [
                    f"{counted(cut, 'plan')} cut (not built or not timed to the end: see the plans table)."
                    if cut
                    else "",
                    f"{counted(tuned.wrong, 'plan')} computed wrong results vs float64: not timed."
                    if tuned.wrong
                    else "",
                    (tuned.fell_through[0].upper() + tuned.fell_through[1:] + ".")
                    if tuned.fell_through
                    else "",
                ],
            )
        ),
    )
    for role, index in picks.items():
        row = tuned.row(index)
        out.update(
            {
                f"{role}_plan": str(row["plan_name"]),
                f"{role}_gpu_us": float(row["gpu_us"]),
                f"{role}_workspace_bytes": int(row["workspace_bytes"]),
                f"{role}_plan_index": int(index),
            }
        )
    if not out["checked"]:
        bad = [cg.plan(i).name for i, e in errors.items() if e > tol]
        exceed = (
            f"plan {bad[0]} exceeds the {spec.dtype} tolerance {tol:.1e}"
            if len(bad) == 1
            else f"plans {', '.join(bad)} exceed the {spec.dtype} tolerance {tol:.1e}"
        )
        out.update(status="wrong", reason=exceed)
    plans = [
        dict(
            plan_index=int(r["plan_index"]),
            plan_name=str(r["plan_name"]),
            workspace_bytes=int(r["workspace_bytes"]),
            gpu_us=float(r["gpu_us"]),
            tune_seconds=float(r["seconds"]),
            status="ok" if r["status"] == "ok" else str(r["status"])[:200],
        )
        for r in rows
    ]
    plans += [
        dict(
            plan_index=p.index,
            plan_name=p.name,
            workspace_bytes=-1,
            gpu_us=float("nan"),
            status=p.error[:200],
        )
        for p in cg.plans
        if was_cut(p.error)
    ]  # cut from the build
    return out, plans


def _keep_graphs(room: int) -> None:
    """Room in this process's graph cache for ``room`` graphs: every graph of the pass stays built
    from its spec's step to the strategies' passes."""
    from .cudnn import graph_cache  # heavy: CuPy, live only

    graph_cache.graphs.max_entries = max(graph_cache.graphs.max_entries, room)


#: seconds the report's worker may take to plan every layer's graph ahead (about 10-40 ms each)
AHEAD_BUDGET_S = 30.0


def ahead_step(specs: Sequence[ConvSpec]) -> List[bool]:
    """In the worker process: plan every layer's graph and queue its runtime-compiled plans, and
    say which layers still wait for one.

    The plans go to the build workers (`labkit.gpu.cudnn.graph_cache.build_ahead`), so each `spec_step` finds
    its compiles under way or done. The answer lets the report measure the other layers first,
    without asking each layer in turn.

    Args:
        specs: the distinct convolutions of the report.

    Returns:
        Per spec, in order, whether a build worker still compiles one of its plans.
    """
    from .cudnn import graph_cache  # heavy: CuPy, live only

    graph_cache.build_ahead([(s, "none", None) for s in specs])
    return [builds.compiles_pending(s, "none", None) > 0 for s in specs]


#: seconds a report waits for any layer's compiles before it measures the next layer anyway (whose
#: step then waits for its own, within its budget)
READY_WAIT_S = 10.0


def ready_step(specs: Sequence[ConvSpec], wait_s: float = READY_WAIT_S) -> List[int]:
    """In the worker process: which layers the report can measure now without waiting for a
    compile `ahead_step` queued, waiting for the first to be ready when none is.

    Args:
        specs: the layers left, in the order the report would measure them.
        wait_s: the longest to wait when none is ready, in seconds.

    Returns:
        Their positions in ``specs``, in order; [] when none was ready within ``wait_s``.
    """
    return builds.ready_ahead([(s, "none", None) for s in specs], wait_s=wait_s)


#: in the worker process: the inputs and outputs of the pass the strategy steps run, made by the
#: first and reused by the others (``key``: the pass's spec keys)
_PASS_OPERANDS: dict = dict(key=None, operands={})


def _drop_pass_operands() -> None:
    import cupy  # heavy: CuPy, live only

    if _PASS_OPERANDS["operands"]:
        _PASS_OPERANDS.update(key=None, operands={})
        cupy.get_default_memory_pool().free_all_blocks()


def _pass_operands(steps) -> dict:
    key = tuple(spec.key for _, spec in steps)
    if _PASS_OPERANDS["key"] != key:
        _drop_pass_operands()
        _PASS_OPERANDS["key"] = key
    return _PASS_OPERANDS["operands"]


def spec_step(
    spec: ConvSpec, budget_s: float, room: int, defer_compiling: bool = False
) -> Optional[Tuple[dict, List[dict]]]:
    """One report step, run in the worker process (`labkit.gpu.host.isolated`): `_measure_spec` of a
    convolution.

    A pass's operands kept by the strategy steps of a report that did not finish are freed first.

    Args:
        spec: the convolution.
        budget_s: the step's budget, in seconds.
        room: graphs the graph cache keeps (every graph of the pass stays built for the strategies'
            passes).
        defer_compiling: measure nothing while a build worker still compiles one of the plans
            `ahead_step` queued for it (the report measures another layer meanwhile).

    Returns:
        (the layer's summary, its ``plans`` rows); None when deferred.
    """
    if defer_compiling and builds.compiles_pending(spec, "none", None):
        return None
    _drop_pass_operands()
    _keep_graphs(room)
    return _measure_spec(spec, Budget(budget_s, f"measuring {spec.label}"))


def strategy_step(
    label: str,
    name: str,
    options: dict,
    steps,
    choice: Dict[tuple, str],
    budget_s: float,
    room: int,
    last: bool = True,
) -> Tuple[dict, List[dict]]:
    """One report step, run in the worker process: `_strategy_pass` under one strategy.

    The pass's inputs and outputs are made by the first strategy step and kept for the next ones
    (about 1.3 s of a ResNet-50 pass at batch 32 on the H200, per strategy).

    Args:
        label: the strategy's label in the report.
        name: its name for `labkit.gpu.workspaces.workspace.make`.
        options: its options.
        steps: (layer name, spec) per call of the pass.
        choice: spec key -> the name of the plan each call runs.
        budget_s: the step's budget, in seconds.
        room: graphs the graph cache keeps.
        last: the last strategy step: it frees the pass's inputs and outputs.

    Returns:
        (the ``strategies`` row, the ``timeline`` rows).
    """
    _keep_graphs(room)
    try:
        return _strategy_step(label, name, options, steps, choice, budget_s)
    finally:
        if last:
            _drop_pass_operands()


def _strategy_step(label, name, options, steps, choice, budget_s):
    from .cudnn import graph_cache  # heavy: CuPy, live only

    index = {}
    for _, spec in steps:
        if spec.key not in index:
            named = [p.index for p in graph_cache.get_graph(spec).runnable if p.name == choice[spec.key]]
            if not named:
                raise LabkitError(
                    f"plan {choice[spec.key]} of {spec.label} did not build again in this worker"
                )
            index[spec.key] = named[0]
    return _strategy_pass(
        label, name, options, steps, index, Budget(budget_s, f"strategy {label}"), _pass_operands(steps)
    )


def _strategy_pass(
    label: str,
    name: str,
    options: dict,
    steps,
    choice: Dict[tuple, int],
    budget: Budget,
    operands: Optional[dict] = None,
) -> Tuple[dict, List[dict]]:
    """Run the pass under one strategy: a first pass from nothing held (the timeline), then a
    timed pass, checking ``budget`` between calls; ``operands`` the pass's inputs and outputs
    kept between strategies (`runner.Runner`). (strategy row, timeline rows)."""
    import cupy  # heavy: CuPy, live only

    checkpoint()
    announce(f"strategy {label}: first pass")
    row = dict(table="strategies", strategy=label, calls=len(steps))
    timeline: List[dict] = []
    strategy = runner = None
    try:
        strategy = workspace.make(name, **options)
        runner = Runner(strategy, fallback=True, operands=operands)
        st = strategy.stats
        for _, spec in steps:  # inputs and outputs first: not workspace, not in the timeline
            runner.operands(spec)
        for i, (layer, spec) in enumerate(steps):
            outer = st.peak_held_bytes
            st.peak_held_bytes = st.held_bytes
            call = runner.run(spec, choice[spec.key])
            during = st.peak_held_bytes
            st.peak_held_bytes = max(outer, during)
            timeline.append(
                dict(
                    table="timeline",
                    strategy=label,
                    step=i,
                    layer=layer,
                    direction=spec.direction,
                    held_bytes=during,
                    held_after_bytes=st.held_bytes,
                    workspace_bytes=call.workspace_bytes,
                    fell_back=call.fell_back_from is not None,
                )
            )
            budget.check(f"the first pass, call {i} ({layer})")
        runner.stream.synchronize()
        announce(f"strategy {label}: timed pass")
        first = dataclasses.replace(st)
        first_fallbacks = runner.fallbacks
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(runner.stream)
        t0 = time.perf_counter()
        for _, spec in steps:
            runner.run(spec, choice[spec.key])
        host_us = (time.perf_counter() - t0) * 1e6
        end.record(runner.stream)
        end.synchronize()
        row.update(
            pass_gpu_us=cupy.cuda.get_elapsed_time(start, end) * 1000,
            pass_host_us=host_us,
            host_us_per_call=host_us / len(steps),
            peak_workspace_bytes=max(t["held_bytes"] for t in timeline),
            stats_peak_bytes=st.peak_held_bytes,
            held_after_bytes=st.held_bytes,
            alloc_calls_first_pass=first.alloc_calls,
            alloc_calls_per_pass=st.alloc_calls - first.alloc_calls,
            alloc_us_first_pass=first.alloc_us_total,
            fallbacks_first_pass=first_fallbacks,
            fallbacks_per_pass=runner.fallbacks - first_fallbacks,
            describe=strategy.describe(),
            status="ok",
            reason="",
        )
    except LabkitError as exc:
        row.update(status_row(exc))
        timeline = []
    finally:
        if runner is not None:
            runner.close()
        elif strategy is not None:
            strategy.close()
    return row, timeline
