"""The steps of the performance checklist that run in the worker process
(`labkit.gpu.host.isolated`), each within its budget: `layer_step` measures one distinct
convolution of a network under each checklist variant (its heuristic plan checked against float64,
then timed), and what building, loading and reusing its graph cost; `input_step` times converting
the network's input from NCHW to NHWC. Bytes; microseconds; seconds.

The steps are called by name (``"<this module>:layer_step"``), so they stay module-level functions.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import List, Sequence

from ...errors import LabkitError, status_row
from ...signals.cancel import Budget, checkpoint
from ...signals.progress import announce
from ...spec import LAYOUTS, ConvSpec
from ...store import machine, plan_store

#: calls timed (host clock) per call kind in the graph-reuse item: rebuilding the graph per call,
#: and calling the graph already built
REBUILD_CALLS, REUSE_CALLS = 3, 20


def cut_row(reason: str) -> dict:
    """A row's status for a part a budget left out.

    Args:
        reason: the budget spent, in words.

    Returns:
        ``status`` (``cut: ...``, as `labkit.signals.cancel.was_cut` reads it) and ``reason``.
    """
    return dict(status=f"cut: {reason}"[:300], reason=reason)


def spec_columns(spec: ConvSpec) -> dict:
    """The columns that say which variant a row measured.

    Args:
        spec: the variant's convolution.

    Returns:
        ``spec`` (its label), ``dtype``, ``layout``, ``N``.
    """
    return dict(spec=spec.label, dtype=spec.dtype, layout=spec.layout, N=spec.N)


def _timed_conv(cg, ops, budget: Budget) -> dict:
    """The default plan of ``cg`` (the heuristic's pick, or its next right plan), checked against
    float64 on ``ops`` first, then timed by CUDA-graph replay within ``budget``."""
    from ...gpu.timing import autotune  # heavy: CuPy, live only

    cg.check(ops=ops)  # every plan the graph built, against float64, before anything is timed
    plan = cg.plan()
    verdict = cg.verdicts[plan.index]
    budget.check(f"checking {plan.name} against float64")
    t = autotune.time_plan(cg, plan.index, ops, budget=budget)
    return dict(
        plan_name=plan.name,
        workspace_bytes=int(plan.workspace_bytes or 0),
        gpu_us=t.median_us,
        gpu_us_p10=t.p10_us,
        gpu_us_p90=t.p90_us,
        rel_error=float(verdict.rel_error),
        tolerance=float(verdict.tolerance),
        operands_bytes=int(ops.nbytes),
        status="ok",
        reason=cg.fell_through,
    )


def _free_pool() -> None:
    import cupy  # heavy: CuPy, live only

    cupy.get_default_memory_pool().free_all_blocks()


def variant_row(spec: ConvSpec, budget: Budget) -> dict:
    """One variant of a layer: its heuristic plan (from labkit's graph cache, or loaded from a saved
    plan), checked against float64, then timed.

    Args:
        spec: the variant's convolution.
        budget: the layer's budget.

    Returns:
        The ``convs`` row (an error as its ``status``: out of memory, unsupported, timed out).
    """
    from ...gpu.cudnn import graph_cache, operands  # heavy: CuPy, live only

    row = dict(table="convs", **spec_columns(spec))
    ops = None
    try:
        checkpoint()
        announce(f"checklist: {spec.label}")
        cg = graph_cache.get_graph(spec, all_plans=False)
        ops = operands.Operands(spec)
        row.update(_timed_conv(cg, ops, budget))
    except LabkitError as exc:
        row.update(status_row(exc))
    finally:
        ops = None
        _free_pool()
    return row


def _build_and_load(cg, plan_index: int) -> dict:
    """The ``plans`` item: save the checked plan of a graph just built to a temporary plan store
    and load it back as a later process would (read, deserialize)."""
    from ...gpu.cudnn import saved_plans  # heavy: CuPy, live only

    announce(f"checklist: saving and loading the plan of {cg.spec.label}")
    with tempfile.TemporaryDirectory(prefix="labkit-checklist-") as tmp:
        store = plan_store.PlanStore(tmp, machine.this_identity() or machine.identity())
        path = saved_plans.save_plan(cg, plan_index, "heuristic", store=store)
        t0 = time.perf_counter()
        loaded = saved_plans.load_plan(cg.spec, kind="heuristic", store=store) if path else None
        load_s = time.perf_counter() - t0
    if loaded is None:
        return dict(load_seconds=float("nan"), reason="cuDNN did not serialize or deserialize this plan")
    return dict(load_seconds=load_s, serialized_bytes=len(loaded.saved.data))


def _reuse(cg, plan, ops, budget: Budget) -> dict:
    """The ``reuse`` item: host time per call, waited for, when the built graph is called again
    (call) and when the graph is built again for each call (build, plan, bind, call)."""
    from ...gpu.cudnn import conv_graph  # heavy: CuPy, live only
    from ...gpu.timing import measure  # heavy: CuPy, live only

    stream = measure.timing_stream()
    bound = cg.bind_with_workspace(ops.arrays, plan.index, stream)
    bound.run()
    stream.synchronize()
    reuse = []
    for _ in range(REUSE_CALLS):
        t0 = time.perf_counter()
        bound.run()
        stream.synchronize()
        reuse.append((time.perf_counter() - t0) * 1e6)
    budget.check("calling the built graph")
    announce(f"checklist: building the graph of {cg.spec.label} for each call")
    rebuild = []
    for _ in range(REBUILD_CALLS):
        t0 = time.perf_counter()
        again = conv_graph.ConvGraph(cg.spec, all_plans=False)
        same = again.plan()  # its verdict is known in this process: the check is not run again
        again.bind_with_workspace(ops.arrays, same.index, stream).run()
        stream.synchronize()
        rebuild.append((time.perf_counter() - t0) * 1e6)
        if budget.over:
            break
    return dict(
        reuse_call_us=statistics.median(reuse),
        rebuild_call_us=statistics.median(rebuild),
        reuse_calls=len(reuse),
        rebuild_calls=len(rebuild),
    )


def own_rows(spec: ConvSpec, budget: Budget) -> List[dict]:
    """The layer as the network runs it: its graph built here (the build timed), its plan checked
    and timed (a ``convs`` row), saved and loaded (a ``plans`` row), and called per call with and
    without building the graph again (a ``reuse`` row).

    Args:
        spec: the layer's convolution.
        budget: the layer's budget.

    Returns:
        The three rows; an error gives the rows not measured yet its status.
    """
    from ...gpu.cudnn import conv_graph, operands  # heavy: CuPy, live only

    conv = dict(table="convs", **spec_columns(spec))
    plans = dict(table="plans", **spec_columns(spec))
    reuse = dict(table="reuse", **spec_columns(spec))
    ops = None
    try:
        checkpoint()
        announce(f"checklist: building the heuristic plan of {spec.label}")
        t0 = time.perf_counter()
        cg = conv_graph.ConvGraph(spec, all_plans=False)
        build_s = time.perf_counter() - t0
        ops = operands.Operands(spec)
        conv.update(_timed_conv(cg, ops, budget))
        plan = cg.plan()
        plans.update(plan_name=plan.name, build_seconds=build_s, **_build_and_load(cg, plan.index))
        plans.setdefault("reason", "")
        plans["status"] = "ok"
        if budget.over:
            reuse.update(cut_row(f"the layer's budget of {budget.seconds:.1f} s was spent"))
        else:
            reuse.update(plan_name=plan.name, **_reuse(cg, plan, ops, budget), status="ok", reason="")
    except LabkitError as exc:
        for row in (conv, plans, reuse):
            if "status" not in row:
                row.update(status_row(exc))
    finally:
        ops = None
        _free_pool()
    return [conv, plans, reuse]


def layer_step(
    spec: ConvSpec, variants: Sequence[ConvSpec], own_budget_s: float, variant_budget_s: float
) -> List[dict]:
    """One distinct convolution of the network, in the worker process: `own_rows` within its budget,
    then each variant (`variant_row`) within a budget of its own.

    Args:
        spec: the layer's convolution, as the network runs it.
        variants: the same convolution in other dtypes, the other layout, the production batch.
        own_budget_s: the seconds `own_rows` may take.
        variant_budget_s: the seconds each variant may take.

    Returns:
        The rows (``table``: ``convs``, ``plans``, ``reuse``), without the layer's own columns.
    """
    rows = own_rows(spec, Budget(own_budget_s, f"the checklist of {spec.label}"))
    for v in variants:
        rows.append(variant_row(v, Budget(variant_budget_s, f"the checklist of {v.label}")))
    return rows


#: the small convolution `warm_step` runs in every dtype and layout
WARM_SPEC = ConvSpec(N=2, C=8, H=8, W=8, K=8, dtype="fp16", layout="NHWC")


def warm_step(dtypes: Sequence[str]) -> float:
    """Before the first layer, in the worker process: a small convolution through every step a layer
    takes, in every dtype and layout the checklist measures (CuPy's kernels for each dtype's inputs,
    the float64 reference and the checks compiled and loaded, cuDNN's handle made), so that no
    layer's budget pays for them. Its rows are not kept.

    Args:
        dtypes: the dtypes the checklist measures.

    Returns:
        The seconds it took.
    """
    t0 = time.perf_counter()
    own_rows(WARM_SPEC, Budget(None, "the checklist's warm-up"))
    for dtype in dtypes:
        for layout in LAYOUTS:
            variant_row(
                WARM_SPEC.replace(dtype=dtype, layout=layout), Budget(None, "the checklist's warm-up")
            )
    input_step(WARM_SPEC)
    return time.perf_counter() - t0


def input_step(spec: ConvSpec) -> dict:
    """The network's input converted from NCHW to NHWC once (a CuPy transpose-copy, timed by
    CUDA-graph replay): what a network run channels-last pays when its data arrives NCHW.

    Args:
        spec: the network's first convolution (its input is the network's).

    Returns:
        The ``convert`` row: ``convert_gpu_us``, ``input_bytes``, ``status``.
    """
    import cupy  # heavy: CuPy, live only

    from ...gpu.buffers import memory, numerics  # heavy: CuPy, live only
    from ...gpu.cudnn.frontend import role_shapes  # heavy: CuPy, live only
    from ...gpu.timing import measure  # heavy: CuPy, live only

    shape = role_shapes(spec)["x"]  # (N, C, H, W)
    row = dict(
        table="convert", spec=spec.label, dtype=spec.dtype, N=spec.N, input_shape="x".join(map(str, shape))
    )
    try:
        announce("checklist: converting the network's input to NHWC")
        storage = numerics.storage_dtype(spec.dtype)
        nchw = memory.empty(shape, storage, "the network's input (NCHW)")
        nhwc = memory.empty((shape[0], shape[2], shape[3], shape[1]), storage, "the network's input (NHWC)")
        nchw.view(cupy.uint8)[...] = 0
        cupy.cuda.get_current_stream().synchronize()  # written before the timing stream reads it
        stream = measure.timing_stream()

        def convert():
            nhwc[...] = nchw.transpose(0, 2, 3, 1)

        t = measure.graph_replay(convert, stream, calls=5)
        row.update(
            convert_gpu_us=t.median_us,
            convert_gpu_us_p10=t.p10_us,
            convert_gpu_us_p90=t.p90_us,
            input_bytes=int(nchw.nbytes),
            status="ok",
            reason="",
        )
    except LabkitError as exc:
        row.update(status_row(exc))
    finally:
        nchw = nhwc = None
        _free_pool()
    return row
