"""Autotune: time every plan of a graph properly and pick the fastest.

The frontend's Python API has no autotune (its C++ ``autotune`` does what this does): each plan
gets its own workspace, a CUDA graph of back-to-back calls is captured and replayed (warm-up,
repeats until the median is stable), and a plan already 3x slower than the best so far stops
early. Times are GPU microseconds per call (`measure.graph_replay`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import cupy

from . import engine, measure, memory
from ..errors import LabkitError, OutOfMemory
from ..cancel import checkpoint


@dataclass(frozen=True)
class TuneResult:
    """``table``: one row per runnable plan; ``best_index``/``heuristic_index`` plan indices;
    ``seconds``: wall time of the whole autotune."""

    table: object
    best_index: int
    heuristic_index: int
    seconds: float

    def gpu_us(self, index: int) -> float:
        row = self.table[self.table.plan_index == index]
        return float(row.gpu_us.iloc[0])


def time_plan(cg: engine.ConvGraph, plan_index: int, ops: engine.Operands, stream=None, calls: int = 10,
              stop_above_us: Optional[float] = None) -> measure.Timing:
    """GPU time of one plan as autotuning measures it: its own workspace, a CUDA graph of
    ``calls`` back-to-back calls replayed until the median is stable (`measure.graph_replay`)."""
    plan = cg.plan(plan_index)
    stream = stream if stream is not None else cupy.cuda.Stream(non_blocking=True)
    ws = memory.alloc(plan.workspace_bytes, f"workspace of plan {plan.index}")
    bound = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
    return measure.graph_replay(bound.run, stream, calls=calls, stop_above_us=stop_above_us)


def autotune(cg: engine.ConvGraph, ops: Optional[engine.Operands] = None, calls: int = 10,
             early_stop_ratio: float = 3.0, max_plans: Optional[int] = None,
             on_row: Optional[Callable[[List[dict], int], None]] = None, save: bool = True) -> TuneResult:
    """Time every runnable plan of ``cg`` (the first ``max_plans`` if given) and pick the fastest.
    Plans are timed in the heuristic's order (its pick first). ``on_row(rows, total)`` is called
    after each plan with the rows so far (charts that fill in: `labkit.progress`). With ``save``
    (and every plan timed) the winner is saved on disk as this graph's "autotuned" plan
    (`engine.save_plan`), for `tuned_graph` in a later need or process."""
    import pandas as pd

    t0 = time.perf_counter()
    ops = ops if ops is not None else engine.Operands(cg.spec, cg.epilogue)
    stream = cupy.cuda.Stream(non_blocking=True)
    rows, best = [], None
    plans = cg.runnable if max_plans is None else cg.runnable[:max_plans]
    for plan in plans:
        checkpoint()
        row: Dict[str, object] = dict(plan_index=plan.index, plan_name=plan.name, workspace_bytes=plan.workspace_bytes)
        try:
            t = time_plan(cg, plan.index, ops, stream, calls, None if best is None else early_stop_ratio * best)
            row.update(gpu_us=t.median_us, gpu_us_p10=t.p10_us, gpu_us_p90=t.p90_us, samples=t.samples, status="ok")
            best = t.median_us if best is None else min(best, t.median_us)
        except OutOfMemory as exc:
            row.update(gpu_us=float("nan"), status=f"out of memory: {exc}")
        except LabkitError as exc:
            row.update(gpu_us=float("nan"), status=f"failed: {exc}")
        except Exception as exc:  # a plan that builds but will not run or capture
            row.update(gpu_us=float("nan"), status=f"failed: {type(exc).__name__}: {str(exc)[:160]}")
        rows.append(row)
        if on_row is not None:
            on_row(rows, len(plans))
    table = pd.DataFrame(rows)
    ok = table[table.status == "ok"]
    if ok.empty:
        raise LabkitError(f"no plan of {cg.spec.label} could be timed: {table.status.tolist()[:3]}")
    best_index = int(ok.loc[ok.gpu_us.idxmin(), "plan_index"])
    result = TuneResult(table, best_index, cg.default_plan.index, time.perf_counter() - t0)
    if save and max_plans is None and cg.all_plans:
        engine.save_plan(cg, best_index, "autotuned", dict(
            plans_timed=int(len(ok)), autotune_seconds=round(result.seconds, 6), build_seconds=round(cg.build_seconds, 6),
            gpu_us=float(result.gpu_us(best_index)), heuristic_plan=cg.default_plan.name,
            heuristic_gpu_us=float(result.gpu_us(result.heuristic_index))))
    return result


@dataclass(frozen=True)
class Tuned:
    """The autotune winner of a graph, ready to run: ``graph`` (a `engine.LoadedGraph` with that one
    plan when ``from_disk``, else the graph with every plan), ``plan_index`` in it, ``gpu_us`` its
    GPU time measured in this call, ``plans_timed`` how many plans the autotune that found it timed,
    ``seconds`` the wall time of this call (a load and one timing, or a build and a full autotune),
    ``tune`` the full `TuneResult` when it was autotuned here (None when loaded)."""

    graph: object
    plan_index: int
    gpu_us: float
    plans_timed: int
    from_disk: bool
    seconds: float
    tune: Optional[TuneResult] = None

    @property
    def plan(self):
        return self.graph.plan(self.plan_index)


def tuned_graph(spec, epilogue: str = "none", workspace_cap: Optional[int] = None,
                ops: Optional[engine.Operands] = None, calls: int = 10) -> Tuned:
    """The fastest plan of a graph: its saved autotune winner, loaded from disk and timed once
    (about 10 ms plus the timing), or, when none is saved, every plan built and autotuned (0.1 s to
    tens of seconds for large fused graphs) and the winner saved for next time."""
    t0 = time.perf_counter()
    loaded = engine.load_plan(spec, epilogue, workspace_cap, "autotuned")
    if loaded is not None:
        ops = ops if ops is not None else engine.Operands(spec, epilogue)
        t = time_plan(loaded, 0, ops, calls=calls)
        return Tuned(loaded, 0, t.median_us, int(loaded.saved.info.get("plans_timed") or 0), True, time.perf_counter() - t0)
    full = engine.get_graph(spec, epilogue, workspace_cap)
    tune = autotune(full, ops, calls=calls)
    return Tuned(full, tune.best_index, tune.gpu_us(tune.best_index), int((tune.table.status == "ok").sum()), False,
                 time.perf_counter() - t0, tune)
