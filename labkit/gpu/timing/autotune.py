"""Autotune: time every plan of a graph properly and pick the fastest.

Before any plan is timed, every plan is run once and compared with the float64 reference
(`conv_graph.ConvGraph.check`, on the autotune's own inputs: one reference for all plans). A plan
whose result is wrong is not timed: its row says ``wrong result: relative error ...`` and has no
time, and it can never be the pick or be saved. Every row carries ``rel_error`` (vs float64).

The frontend's Python API has no autotune (its C++ ``autotune`` does what this does): each plan
gets its own workspace, runs eagerly, and a CUDA graph of back-to-back calls is captured and
replayed (`FIRST_PASS_WARMUP_REPLAYS` to warm up, then repeats until the median is stable: a graph
of about `FIRST_PASS_REPLAY_TARGET_US` of calls, stable from `FIRST_PASS_MIN_REPEATS` replays); a plan
whose median is already `EARLY_STOP_RATIO` x the best so far stops there (it cannot be the pick;
its row keeps that median), and one whose eager call alone is over `EAGER_STOP_RATIO` x the fastest
eager call so far is not captured at all (`measure.TooSlow`: its row says "slower: ...";
``eager_stop=False`` times it anyway). A plan its check ran in this process (``ran_here``: its
kernels are loaded) is not called eagerly at all when the GPU time of that run is within the
bound (what a first call adds only makes it slower; the bound itself comes from eager calls made
here). Otherwise it is called eagerly once when that call is within the bound, and not a second
time when it is already `measure.FIRST_CALL_MARGIN_US` over it: a depthwise convolution's slowest
plans take tens of milliseconds a call. Other plans are called twice, the second timed. Eager
calls are compared with eager calls: one eager call of a short convolution is bound by the host's
launch, so against a replayed time every plan of it would look 6x slower. The plans that finish
within `FINAL_MARGIN` of the best are then timed again, in turns, for `FINAL_ROUNDS` rounds (each
round a new workspace and graph, warmed up by `measure.WARMUP_REPLAYS`, timed as any timing is),
and the pick is the fastest median over those rounds: the first pass only sorts the plans and
stops the slow ones, and two plans a few per cent apart are told apart by alternating
measurements, not by one each. Times are GPU microseconds per call (`measure.graph_replay`).

Bounded: every plan is timed under a budget derived from the best plan so far (`plan_budget_s`:
50x what timing the best plan took, at least `PLAN_BUDGET_FLOOR_S`; `FIRST_PLAN_BUDGET_S` for the
first), and the whole autotune under ``budget`` when one is given. A plan over its budget is a
row ``timed out after ... in <phase>``; plans left when the whole budget is spent are rows
``cut: ...``. Neither ends the autotune.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Dict, List, Optional

from ...errors import LabkitError, OutOfMemory, TimedOut
from ...signals.cancel import Budget, checkpoint, not_timed, was_cut
from ...signals.progress import announce
from ..checks import plan_checks
from ..cudnn import conv_graph, graph_cache, operands, saved_plans
from . import measure
from .ranges import annotate
from .stops import EAGER_STOP_RATIO, FINAL_MARGIN  # written in stops: lessons and the report quote them

#: a plan's timing budget is this many times what timing the best plan so far took ...
PLAN_BUDGET_FACTOR = 50.0
#: ... and at least this many seconds
PLAN_BUDGET_FLOOR_S = 0.5
#: the first plan's budget (no best yet), seconds
FIRST_PLAN_BUDGET_S = 20.0
#: a plan's timing stops once its median is this many times the best plan's so far: it cannot be
#: the pick (the final rounds take only plans within `FINAL_MARGIN` of the best)
EARLY_STOP_RATIO = 1.5
#: replays of a plan's new graph before its first timing (its check and eager call loaded the kernels):
#: that timing sorts the plans; the final rounds, which decide between the fastest, warm up as
#: long as any timing (`measure.WARMUP_REPLAYS`)
FIRST_PASS_WARMUP_REPLAYS = 1
#: the first pass's graphs hold about this many microseconds of calls (`measure.calls_for`): on the
#: H200, ResNet-50's autotune (batch 32, fp16 NHWC) took 0.98 s with graphs of 150 us against 1.51 s
#: with 500 us, and MobileNetV2's 1.76 s against 2.15 s, for picks 0.1-0.7% slower than the fastest
#: plan on average against 0.1-0.3% (docs/findings.md) ...
FIRST_PASS_REPLAY_TARGET_US = 150.0
#: ... and its median may be called stable after this many replays: it sorts the plans and stops
#: the slow ones; the plans that can be the pick are timed again in the final rounds, as any
#: timing is (`measure.REPLAY_TARGET_US`, `measure.MIN_REPEATS`)
FIRST_PASS_MIN_REPEATS = 3
#: the plans within `FINAL_MARGIN` of the best are timed again, in turns, before the pick, for this
#: many rounds ...
FINAL_ROUNDS = 3
#: ... at most this many of them (the fastest)
FINAL_PLANS = 4
#: the columns of a plan's row that its timing fills (what ``timed`` hands `autotune` to reuse)
TIMING_COLUMNS = (
    "gpu_us",
    "gpu_us_p10",
    "gpu_us_p90",
    "samples",
    "calls",
    "eager_us",
    "capture_s",
    "first_pass_us",
    "final_rounds",
)


def plan_budget_s(best_us: Optional[float], calls: int = 10, *, samples: int = 20) -> float:
    """Seconds a plan may take to be timed.

    That is `PLAN_BUDGET_FACTOR` x the GPU time of timing the best plan so far (at most two eager calls and
    ``samples`` replays of its graph), at least `PLAN_BUDGET_FLOOR_S`.

    Args:
        best_us: the best plan's GPU time per call so far, in microseconds; None before the first.
        calls: the most calls in a timing graph.
        samples: the replays a timing takes.

    Returns:
        The budget in seconds; `FIRST_PLAN_BUDGET_S` when there is no best yet.
    """
    if best_us is None or not best_us > 0:
        return FIRST_PLAN_BUDGET_S
    per_graph = measure.calls_for(best_us, calls)
    return max(PLAN_BUDGET_FLOOR_S, PLAN_BUDGET_FACTOR * best_us * 1e-6 * (2 + per_graph * samples))


@dataclass(frozen=True)
class TuneResult:
    """What an autotune found.

    Attributes:
        rows: one dict per plan that built, in the order timed; a wrong one has its ``wrong result``
            status and no time (``table`` is the same rows as a DataFrame).
        best_index: the fastest plan's index.
        heuristic_index: the plan run by default: the heuristic's first choice, unless that one is
            wrong (``fell_through`` then says so).
        seconds: wall time of the whole autotune.
        complete: no plan timed out and the autotune's budget was not spent. Plans cut because one
            eager call was far slower than the best do not count: they are known to be slower.
        check_seconds: the part of ``seconds`` spent checking plans against float64.
        fell_through: what happened when the heuristic's pick was wrong; "" when it was right.
    """

    rows: tuple
    best_index: int
    heuristic_index: int
    seconds: float
    complete: bool = True
    check_seconds: float = 0.0
    fell_through: str = ""

    @cached_property
    def table(self):
        """The rows as a DataFrame, one row per plan (made at first use: a network report reads
        the rows, a lesson's chart the table)."""
        import pandas as pd  # heavy: pandas (0.3 s), which the report's worker never imports

        return pd.DataFrame(list(self.rows))

    def row(self, index: int) -> dict:
        """One plan's row.

        Args:
            index: the plan's index.

        Returns:
            Its row (a dict of `rows`).
        """
        return next(r for r in self.rows if r["plan_index"] == index)

    def gpu_us(self, index: int) -> float:
        """The GPU time per call of one plan (its row's ``gpu_us``).

        Args:
            index: the plan's index.

        Returns:
            Microseconds.
        """
        return float(self.row(index)["gpu_us"])

    @property
    def cut(self) -> int:
        """How many plans a budget stopped (cut or timed out: unknown)."""
        return sum(map(was_cut, (r["status"] for r in self.rows)))

    @property
    def wrong(self) -> int:
        """How many plans were excluded for a wrong result (`labkit.gpu.checks.plan_checks`)."""
        return sum(map(plan_checks.is_wrong, (r["status"] for r in self.rows)))

    @property
    def slower(self) -> int:
        """How many plans were left after one eager call far slower than the best (known to lose)."""
        return sum(map(not_timed, (r["status"] for r in self.rows))) - self.cut


def time_plan(
    graph: conv_graph.ConvGraph,
    plan_index: int,
    ops: operands.Operands,
    *,
    stream=None,
    calls: int = 10,
    stop_above_us: Optional[float] = None,
    budget: Optional[Budget] = None,
    eager_stop: bool = True,
    eager_stop_above_us: Optional[float] = None,
    warmup: int = measure.WARMUP_REPLAYS,
    min_repeats: int = measure.MIN_REPEATS,
    replay_target_us: float = measure.REPLAY_TARGET_US,
) -> measure.Timing:
    """GPU time of one plan as autotuning measures it.

    The plan gets its own workspace, and a CUDA graph of up to ``calls`` back-to-back calls is
    replayed until the median is stable (`measure.graph_replay`).

    Args:
        graph: the built graph.
        plan_index: the plan.
        ops: the operands it runs on.
        stream: the stream; default this thread's timing stream.
        calls: the most calls in the graph.
        stop_above_us: stop once the median is above this, in microseconds.
        budget: the timing's budget; `labkit.TimedOut` past it.
        eager_stop: raise `measure.TooSlow` when one eager call is already far over
            ``stop_above_us`` (or over ``eager_stop_above_us``).
        eager_stop_above_us: the eager call's own bound, in microseconds (`measure.graph_replay`).
        warmup: replays of the new graph before the timed ones.
        min_repeats: replays before the median may be called stable.
        replay_target_us: the calls' time the graph holds, in microseconds (`measure.calls_for`).

    Returns:
        A `measure.Timing`, in microseconds per call.
    """
    plan = graph.plan(plan_index)
    stream = stream if stream is not None else measure.timing_stream()
    bound = graph.bind_with_workspace(ops.arrays, plan.index, stream)  # the plan's own workspace
    return measure.graph_replay(
        bound.run,
        stream,
        calls=calls,
        warmup=warmup,
        stop_above_us=stop_above_us,
        budget=budget,
        eager_stop=eager_stop,
        eager_stop_above_us=eager_stop_above_us,
        ran_before=plan_index in graph.ran_here,
        first_us=graph.ran_here.get(plan_index),
        min_repeats=min_repeats,
        replay_target_us=replay_target_us,
    )


def _row_for_failure(exc: BaseException, best_eager_us: Optional[float]) -> dict:
    if isinstance(exc, measure.TooSlow):
        return dict(
            status=f"slower: one eager call took {measure.us_words(exc.eager_us)}, "
            f"{exc.eager_us / best_eager_us:.0f}x the fastest eager call so far "
            f"({measure.us_words(best_eager_us)}): not timed further",
            eager_us=exc.eager_us,
        )
    if isinstance(exc, TimedOut):
        return dict(
            status=f"timed out after {exc.seconds:.1f} s in {exc.phase} (budget {exc.budget_s:.1f} s)"
        )
    if isinstance(exc, OutOfMemory):
        return dict(status=f"out of memory: {exc}")
    if isinstance(exc, LabkitError):
        return dict(status=f"failed: {exc}")
    return dict(
        status=f"failed: {type(exc).__name__}: {str(exc)[:160]}"
    )  # a plan that builds but will not run or capture


def _final_rounds(cg, ops, rows: List[dict], *, stream, calls: int, budget: Optional[Budget]) -> bool:
    """Time the plans within `FINAL_MARGIN` of the best again, in turns (see the module doc).

    Each contender's row gets ``gpu_us`` = the median of its round medians (``first_pass_us`` keeps
    the first timing, ``final_rounds`` the rounds). A round that fails or runs out of budget ends
    the rounds; the rows keep what was measured. Contenders whose times all came from final rounds
    already (rows reused from another graph of the convolution: `autotune`'s ``timed``) are not
    timed again.

    Returns:
        Whether any row changed.
    """
    ok = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: r["gpu_us"])
    if len(ok) < 2:
        return False
    contenders = [r for r in ok if r["gpu_us"] <= ok[0]["gpu_us"] * (1 + FINAL_MARGIN)][:FINAL_PLANS]
    if len(contenders) < 2 or all(r.get("final_rounds", 0) >= FINAL_ROUNDS for r in contenders):
        return False
    medians: Dict[int, List[float]] = {r["plan_index"]: [] for r in contenders}
    announce(f"timing the {len(contenders)} fastest plans of {cg.spec.label} again, in turns")
    for _ in range(FINAL_ROUNDS):
        if budget is not None and budget.over:
            break
        try:
            for r in contenders:  # each round a new workspace and graph: a plan's time can depend on them
                with annotate(f"autotune final round, plan {r['plan_index']}", "plan"):
                    t = time_plan(cg, r["plan_index"], ops, stream=stream, calls=calls, eager_stop=False)
                medians[r["plan_index"]].append(t.median_us)
        except Exception:  # noqa: BLE001  (the first pass stands for a plan whose rounds did not finish)
            break
    changed = False
    for r in contenders:
        got = medians[r["plan_index"]]
        if len(got) == FINAL_ROUNDS:
            med = statistics.median(got)
            r.update(
                first_pass_us=r["gpu_us"],
                gpu_us=med,
                gpu_us_p10=min(r.get("gpu_us_p10", med), med),  # the spread drawn holds the median
                gpu_us_p90=max(r.get("gpu_us_p90", med), med),
                final_rounds=len(got),
            )
            changed = True
    return changed


def autotune(
    cg: conv_graph.ConvGraph,
    ops: Optional[operands.Operands] = None,
    *,
    calls: int = 10,
    early_stop_ratio: float = EARLY_STOP_RATIO,
    max_plans: Optional[int] = None,
    on_row: Optional[Callable[[List[dict], int], None]] = None,
    save: bool = True,
    budget: Optional[Budget] = None,
    eager_stop: bool = True,
    timed: Optional[Dict[str, dict]] = None,
) -> TuneResult:
    """Time every plan of a graph whose result is right, and pick the fastest.

    Every plan is checked against float64 first (`conv_graph.ConvGraph.check`, on ``ops``). Plans are
    timed in the heuristic's order (its pick first), each within `plan_budget_s`. With ``save``, and
    every plan timed or known slower, the winner is saved on disk as this graph's "autotuned" plan
    (`saved_plans.save_plan`), for `tuned_graph` in a later need or process.

    Args:
        cg: the built graph (every plan, for a full autotune).
        ops: the operands; default new ones of the graph's spec and epilogue.
        calls: the most calls in a timing graph.
        early_stop_ratio: a plan's timing stops once it is this many times slower than the best.
        max_plans: time only the first this many plans whose result is right.
        on_row: called as ``on_row(rows, total)`` after each plan, with the rows so far (charts that
            fill in: `labkit.signals.progress`).
        save: save the winner on disk.
        budget: the whole autotune's budget; plans left when it is spent are rows ``cut: ...``.
        eager_stop: False gives every plan at least one replay, even one whose eager call is far
            slower than the best (a lesson that charts every plan's time).
        timed: plan name -> its row from an autotune of the same convolution and epilogue in this
            run (another workspace cap of it: the same plan runs the same kernels); a plan whose row
            there is ``ok`` takes its `TIMING_COLUMNS` from it instead of being timed again.

    Returns:
        A `TuneResult`; `LabkitError` when no plan could be timed.
    """
    t0 = time.perf_counter()
    ops = ops if ops is not None else operands.Operands(cg.spec, cg.epilogue)
    checked = cg.check_seconds
    verdicts = cg.check(ops=ops)  # every plan against float64 before any is timed
    checked = cg.check_seconds - checked
    stream = measure.timing_stream()
    rows, best, best_eager, complete = [], None, None, not cg.build_cut
    runnable = {p.index for p in cg.runnable}
    plans = [p for p in cg.plans if p.index in runnable or p.index in verdicts]
    if max_plans is not None:
        plans = [p for p in plans if p.index in runnable][:max_plans]
    for plan in plans:
        checkpoint()
        verdict = verdicts.get(plan.index)
        row: Dict[str, object] = dict(
            plan_index=plan.index,
            plan_name=plan.name,
            workspace_bytes=-1 if plan.workspace_bytes is None else plan.workspace_bytes,  # -1: not built
            gpu_us=float("nan"),
            rel_error=float("nan") if verdict is None else verdict.rel_error,
            first_pass_us=float("nan"),  # set for the plans timed again in the final rounds
            final_rounds=0,
        )
        what = f"plan {plan.index} ({plan.name}) of {cg.spec.label}"
        started, eager_from_check = time.perf_counter(), False
        if plan.index not in runnable:  # its result was wrong: never timed
            row.update(status=verdict.status, seconds=0.0)
            rows.append(row)
            if on_row is not None:
                on_row(rows, len(plans))
            continue
        prior = (timed or {}).get(plan.name)
        reused = prior is not None and prior.get("status") == "ok"
        if not reused:
            announce(f"timing {what}")
        if reused:
            row.update({k: prior[k] for k in TIMING_COLUMNS if k in prior}, status="ok")
        elif budget is not None and budget.over:
            row.update(
                status=f"cut: the autotune's budget ({budget.seconds:.1f} s) was spent before this plan"
            )
            complete = False
        else:
            mine = (
                Budget(plan_budget_s(best, calls), what)
                if budget is None
                else budget.within(plan_budget_s(best, calls), what)
            )
            try:
                with annotate(f"autotune {what}", "plan"):
                    t = time_plan(
                        cg,
                        plan.index,
                        ops,
                        stream=stream,
                        calls=calls,
                        warmup=FIRST_PASS_WARMUP_REPLAYS,
                        min_repeats=FIRST_PASS_MIN_REPEATS,
                        replay_target_us=FIRST_PASS_REPLAY_TARGET_US,
                        stop_above_us=None if best is None else early_stop_ratio * best,
                        budget=mine,
                        eager_stop=eager_stop,
                        eager_stop_above_us=None
                        if best is None
                        else EAGER_STOP_RATIO * (best if best_eager is None else best_eager),
                    )
                row.update(
                    gpu_us=t.median_us,
                    gpu_us_p10=t.p10_us,
                    gpu_us_p90=t.p90_us,
                    samples=t.samples,
                    calls=t.calls,
                    eager_us=t.eager_us,
                    capture_s=t.capture_s,
                    status="ok",
                )
                eager_from_check = t.eager_reused
            except Exception as exc:  # noqa: BLE001  (Superseded is a BaseException: it ends the autotune)
                row.update(_row_for_failure(exc, best_eager))
                complete = complete and not isinstance(exc, TimedOut)
        if row["status"] == "ok":
            best = row["gpu_us"] if best is None else min(best, row["gpu_us"])
            # a check's run may have had no launch gap before it (the GPU still busy): the bound stays
            # one of eager calls made here
            if row.get("eager_us", 0) > 0 and not eager_from_check:
                best_eager = row["eager_us"] if best_eager is None else min(best_eager, row["eager_us"])
        row["seconds"] = 0.0 if reused else time.perf_counter() - started
        rows.append(row)
        if on_row is not None:
            on_row(rows, len(plans))
    if _final_rounds(cg, ops, rows, stream=stream, calls=calls, budget=budget) and on_row is not None:
        on_row(rows, len(plans))
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        raise LabkitError(f"no plan of {cg.spec.label} could be timed: {[r['status'] for r in rows][:3]}")
    best_index = int(min(ok, key=lambda r: r["gpu_us"])["plan_index"])  # the first of equal times
    result = TuneResult(
        tuple(rows),
        best_index,
        cg.default_plan.index,
        time.perf_counter() - t0,
        complete,
        checked,
        cg.fell_through,
    )
    if save and complete and max_plans is None and cg.all_plans:
        saved_plans.save_plan(
            cg,
            best_index,
            "autotuned",
            info=dict(
                plans_timed=len(ok),
                plans_wrong=result.wrong,
                autotune_seconds=round(result.seconds, 6),
                check_seconds=round(checked, 6),
                build_seconds=round(cg.build_seconds, 6),
                gpu_us=float(result.gpu_us(best_index)),
                heuristic_plan=cg.default_plan.name,
                heuristic_gpu_us=float(result.gpu_us(result.heuristic_index)),
                fell_through=result.fell_through,
            ),
        )
    return result


@dataclass(frozen=True)
class Tuned:
    """The autotune winner of a graph, ready to run.

    Plans the build's budgets left unbuilt are still compiling: they are not timed, so the winner is
    the fastest of the others, and it is not saved.

    Attributes:
        graph: a `saved_plans.LoadedGraph` with that one plan when ``from_disk``, else the graph with every
            plan.
        plan_index: the winner's index in ``graph``.
        gpu_us: its GPU time per call, measured in this call, in microseconds.
        plans_timed: how many plans the autotune that found it timed.
        from_disk: whether the winner was loaded from a saved plan.
        seconds: wall time of this call: a load and one timing, or a build and a full autotune.
        tune: the full `TuneResult` when it was autotuned here; None when loaded.
        plans_cut: how many plans the build's budgets left unbuilt.
    """

    graph: object
    plan_index: int
    gpu_us: float
    plans_timed: int
    from_disk: bool
    seconds: float
    tune: Optional[TuneResult] = None
    plans_cut: int = 0

    @property
    def plan(self):
        """The winning `Plan`."""
        return self.graph.plan(self.plan_index)


def tuned_graph(
    spec,
    epilogue: str = "none",
    *,
    workspace_cap: Optional[int] = None,
    ops: Optional[operands.Operands] = None,
    calls: int = 10,
    compile_budget_s: Optional[float] = None,
) -> Tuned:
    """The fastest plan of a graph: its saved autotune winner, or a new autotune.

    A saved winner is loaded from disk and timed once (about 10 ms plus the timing). When none is
    saved, every plan is built and autotuned (0.1 s to tens of seconds for large fused graphs) and the
    winner saved for next time.

    Args:
        spec: the convolution.
        epilogue: one of `frontend.EPILOGUES`.
        workspace_cap: leave out plans that need more workspace, in bytes.
        ops: the operands; default new ones.
        calls: the most calls in a timing graph.
        compile_budget_s: seconds the build may wait for runtime-compiled plans (`graph_cache.get_graph`);
            plans still compiling then are left out (``plans_cut``) and nothing is saved.

    Returns:
        A `Tuned`.
    """
    t0 = time.perf_counter()
    loaded = saved_plans.load_plan(spec, epilogue, workspace_cap=workspace_cap, kind="autotuned")
    if loaded is not None:
        ops = ops if ops is not None else operands.Operands(spec, epilogue)
        t = time_plan(loaded, 0, ops, calls=calls)
        return Tuned(
            loaded,
            0,
            t.median_us,
            int(loaded.saved.info.get("plans_timed") or 0),
            True,
            time.perf_counter() - t0,
        )
    full = graph_cache.get_graph(
        spec, epilogue, workspace_cap=workspace_cap, compile_budget_s=compile_budget_s
    )
    tune = autotune(full, ops, calls=calls)
    return Tuned(
        full,
        tune.best_index,
        tune.gpu_us(tune.best_index),
        sum(r["status"] == "ok" for r in tune.rows),
        False,
        time.perf_counter() - t0,
        tune,
        int(full.build_cut),
    )
