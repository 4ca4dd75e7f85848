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


def autotune(cg: engine.ConvGraph, ops: Optional[engine.Operands] = None, calls: int = 10,
             early_stop_ratio: float = 3.0, max_plans: Optional[int] = None,
             on_row: Optional[Callable[[List[dict], int], None]] = None) -> TuneResult:
    """Time every runnable plan of ``cg`` (the first ``max_plans`` if given) and pick the fastest.
    Plans are timed in the heuristic's order (its pick first). ``on_row(rows, total)`` is called
    after each plan with the rows so far (charts that fill in: `labkit.progress`)."""
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
            ws = memory.alloc(plan.workspace_bytes, f"workspace of plan {plan.index}")
            bound = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
            t = measure.graph_replay(bound.run, stream, calls=calls,
                                     stop_above_us=None if best is None else early_stop_ratio * best)
            row.update(gpu_us=t.median_us, gpu_us_p10=t.p10_us, gpu_us_p90=t.p90_us, samples=t.samples, status="ok")
            best = t.median_us if best is None else min(best, t.median_us)
            del ws, bound
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
    return TuneResult(table, best_index, cg.default_plan.index, time.perf_counter() - t0)
