"""Lesson 05's run functions: every plan of a convolution, the best plan under each workspace cap,
and what building, autotuning, saving and loading a graph cost (live: measured now; recorded:
answered from the recording)."""

from __future__ import annotations

import tempfile
import time
from typing import Optional, Sequence

from ...errors import LabkitError, status_row
from ...signals.cancel import checkpoint
from ...signals.progress import report
from ...spec import ConvSpec
from ...store import machine, plan_store
from ..core import BASE, MIB, as_spec, experiment, to_frame

CAPS = (0, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, None)


@experiment
def plans(spec: ConvSpec = BASE):
    """Every plan's GPU time and workspace (autotuned), with the heuristic pick, best and worst.

    Every plan is checked against float64 first (``rel_error``); one whose result is wrong has status
    ``wrong result: ...`` and no time.

    Args:
        spec: the convolution.

    Returns:
        One row per plan: ``plan_index``, ``plan_name``, ``workspace_bytes``, ``gpu_us`` (with its p10
        and p90), ``status``; ``first_choice`` marks the heuristic's first choice, ``heuristic_pick``
        the plan run without autotuning (the first choice, or its next correct plan when the first
        choice is wrong); ``best``, ``worst``, ``candidates`` and ``deterministic`` (as cuDNN marks it).
    """
    from ...gpu.cudnn import graph_cache  # heavy: CuPy, live only
    from ...gpu.timing import autotune  # heavy: CuPy, live only

    spec = as_spec(spec)
    cg = graph_cache.get_graph(spec)
    heuristic, first = cg.default_plan.index, cg.heuristic_plan.index

    def table(rows, deterministic=None):
        df = to_frame(rows)
        ok = df[df.status == "ok"]
        df["first_choice"] = df.plan_index == first
        df["heuristic_pick"] = df.plan_index == heuristic
        df["best"] = df.plan_index == int(ok.loc[ok.gpu_us.idxmin(), "plan_index"]) if not ok.empty else False
        df["worst"] = (
            df.plan_index == int(ok.loc[ok.gpu_us.idxmax(), "plan_index"]) if not ok.empty else False
        )
        df["candidates"] = len(cg.plans)
        df["deterministic"] = df.plan_name.isin(deterministic if deterministic is not None else ())
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        df.insert(2, "direction", spec.direction)
        return df

    tuned = autotune.autotune(
        cg,
        on_row=lambda rows, total: report(lambda: table(list(rows)), len(rows), total, "plans timed"),
        eager_stop=False,
    )  # a bar for every plan
    df = table(tuned.table.to_dict("records"), cg.deterministic_names())
    assert int(df[df.best].plan_index.iloc[0]) == tuned.best_index
    return df


@experiment
def caps(spec: ConvSpec = BASE, caps: Sequence[Optional[int]] = CAPS):
    """The best plan under each workspace cap (``deselect_workspace_greater_than``) and what the cap costs.

    A plan is timed once: a cap's graph holds plans of the same convolution, and one timed under an
    earlier cap keeps its time, so the caps compare the same measurements.

    Args:
        spec: the convolution.
        caps: workspace caps in bytes; None for no cap.

    Returns:
        One row per cap: ``cap_bytes`` (-1 = unlimited), ``plans_within_cap``, ``best_plan``, its
        ``workspace_bytes`` and ``gpu_us`` (``gpu_us_p10``/``_p90``: the spread of its repeated
        timings), ``slowdown_vs_unlimited``, ``status``.
    """
    from ...gpu.cudnn import graph_cache  # heavy: CuPy, live only
    from ...gpu.timing import autotune  # heavy: CuPy, live only

    spec = as_spec(spec)
    order = sorted(range(len(caps)), key=lambda i: caps[i] is not None)  # unlimited first: the yardstick
    graph_cache.build_ahead(
        [(spec, "none", caps[i]) for i in order]
    )  # every cap's compiles at once, while the first is timed
    done = {}
    timed = {}  # plan name -> its autotune row, over every cap so far

    def table():
        df = to_frame([done[i] for i in sorted(done)])
        unlimited = df[(df.cap_bytes == -1) & (df.status == "ok")] if "status" in df.columns else df.iloc[0:0]
        if not unlimited.empty:
            df["slowdown_vs_unlimited"] = df.gpu_us / float(unlimited.gpu_us.iloc[0])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    for i in order:
        cap = caps[i]
        try:
            cg = graph_cache.get_graph(spec, workspace_cap=cap)
            tuned = autotune.autotune(cg, timed=timed)
            timed.update((r["plan_name"], r) for r in tuned.table.to_dict("records") if r["status"] == "ok")
            best = tuned.table[tuned.table.plan_index == tuned.best_index].iloc[0]
            done[i] = dict(
                cap_bytes=-1 if cap is None else cap,
                plans_within_cap=len(cg.runnable),
                best_plan=best.plan_name,
                workspace_bytes=int(best.workspace_bytes),
                gpu_us=float(best.gpu_us),
                gpu_us_p10=float(best.get("gpu_us_p10", float("nan"))),
                gpu_us_p90=float(best.get("gpu_us_p90", float("nan"))),
                status="ok",
                reason="",
            )
        except LabkitError as exc:
            done[i] = dict(cap_bytes=-1 if cap is None else cap, plans_within_cap=0, **status_row(exc))
        report(table, len(done), len(caps), "caps autotuned")
    return table()


#: build_cost's stages, in the order they run
BUILD_STAGES = (
    "build (heuristic plan)",
    "rebuild (same graph, new object)",
    "labkit cache hit",
    "build every plan",
    "autotune (time every plan)",
    "save the winner to disk",
    "load the winner from disk",
)


@experiment
def build_cost(spec: ConvSpec = BASE):
    """What building costs, stage by stage (`BUILD_STAGES`).

    The stages are the first build (heuristic plan), an identical rebuild (cuDNN's own caches warm), a
    labkit cache hit, a build of every plan, autotune; then what a later session does instead: save
    the autotune winner to disk (``graph.serialize`` and an atomic write) and load it back (read,
    check, ``graph.deserialize``). Saves go to a temporary folder, not this GPU's store.

    Args:
        spec: the convolution.

    Returns:
        One row per stage: ``seconds`` (wall time); with ``serialized_bytes`` (the saved plan's size)
        and ``calls_to_pay_off_autotune`` (how many calls autotuning needs to pay for itself).
    """
    from ...gpu.cudnn import conv_graph, graph_cache, saved_plans  # heavy: CuPy, live only
    from ...gpu.timing import autotune  # heavy: CuPy, live only

    spec = as_spec(spec)
    rows = []

    def timed(stage, fn):
        checkpoint()  # between stages: a prefetch job gives the GPU back here (labkit.session.prefetch)
        t0 = time.perf_counter()
        out = fn()
        rows.append(dict(stage=stage, seconds=time.perf_counter() - t0))
        report(lambda: to_frame(rows), len(rows), len(BUILD_STAGES), "build stages")
        return out

    cache = graph_cache.GraphCache(4, saved_plans=False)  # nothing loaded from disk: these are real builds
    timed(BUILD_STAGES[0], lambda: cache.get(spec, all_plans=False))
    timed(BUILD_STAGES[1], lambda: conv_graph.ConvGraph(spec, all_plans=False))
    timed(BUILD_STAGES[2], lambda: cache.get(spec, all_plans=False))
    full = timed(
        BUILD_STAGES[3], lambda: conv_graph.ConvGraph(spec, parallel=False)
    )  # what cuDNN costs in one process
    tuned = timed(BUILD_STAGES[4], lambda: autotune.autotune(full, save=False))
    with tempfile.TemporaryDirectory(prefix="labkit-build-cost-") as tmp:
        store = plan_store.PlanStore(tmp, machine.this_identity() or machine.identity())
        path = timed(
            BUILD_STAGES[5], lambda: saved_plans.save_plan(full, tuned.best_index, "autotuned", store=store)
        )
        loaded = (
            timed(BUILD_STAGES[6], lambda: saved_plans.load_plan(spec, kind="autotuned", store=store))
            if path
            else None
        )
    if loaded is None:  # reported, not hidden: the chart shows the stage without a bar
        if len(rows) < len(BUILD_STAGES):
            rows.append(dict(stage=BUILD_STAGES[6], seconds=float("nan")))
        rows[-1].update(seconds=float("nan"), reason="cuDNN did not serialize or deserialize this plan")
    gain = tuned.gpu_us(tuned.heuristic_index) - tuned.gpu_us(tuned.best_index)
    df = to_frame(rows)
    df["heuristic_gpu_us"] = tuned.gpu_us(tuned.heuristic_index)
    df["best_gpu_us"] = tuned.gpu_us(tuned.best_index)
    df["calls_to_pay_off_autotune"] = (tuned.seconds * 1e6 / gain) if gain > 0 else float("inf")
    df["serialized_bytes"] = len(loaded.saved.data) if loaded is not None else None
    return df
