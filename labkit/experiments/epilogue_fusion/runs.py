"""Lesson 04's experiment: the fused convolution + bias + ReLU (+ residual add), one cuDNN graph,
against the unfused sequence (cuDNN's convolution, then CuPy's elementwise kernels): time, bytes
allocated and a model of the bytes moved. Live it measures now; recorded it answers from the
recording."""

from __future__ import annotations

from typing import Sequence

from ...errors import LabkitError, status_row
from ...gpu.buffers import numerics
from ...gpu.checks import reference
from ...gpu.cudnn.unfused import DTYPES, UnfusedPath, check_spec
from ...signals.cancel import Budget
from ...signals.progress import report
from ...spec import ConvSpec
from ..core import BASE, as_spec, experiment, timed_plan, to_frame

# ---- experiments ------------------------------------------------------------------------------
#: the dtypes `fusion` compares (its unfused path needs CuPy elementwise kernels: no bf16 or fp8)
FUSION_DTYPES = DTYPES


def _bytes_model(spec: ConvSpec, epilogue: str, fused: bool) -> int:
    """Bytes a path must move through HBM, from tensor sizes (a model, not a counter reading)."""
    tb = spec.touched_bytes  # the conv reads the input pixels its windows cover
    y, b = tb["y"], spec.K * (2 if spec.output_dtype != "fp32" else 4)
    z = y if epilogue == "bias_relu_add" else 0
    if fused:
        return tb["x"] + tb["w"] + b + z + y
    moved = tb["x"] + tb["w"] + y  # conv
    moved += y + b + y  # + bias: read y and b, write t
    if z:
        moved += y + z + y  # + residual: read t and z, write t2
    moved += y + y  # relu: read, write
    return moved


@experiment
def fusion(spec: ConvSpec = BASE, epilogues: Sequence[str] = ("bias_relu", "bias_relu_add")):
    """Fused conv+bias+relu(+add) vs the unfused sequence, per epilogue.

    Fused is one cuDNN graph with virtual intermediates; unfused is the cuDNN conv, then CuPy kernels
    for bias, add and relu, each writing a real tensor.

    Args:
        spec: the convolution (fprop).
        epilogues: "bias_relu" and/or "bias_relu_add".

    Returns:
        One row per (epilogue, ``path``). ``path``: ``fused`` runs the heuristic's first plan for the
        fused graph (what a framework that does not autotune gets); ``fused, autotuned`` the fastest
        of every plan cuDNN offers for it (`labkit.gpu.timing.autotune`); ``unfused`` the heuristic conv plan
        and three (or two) CuPy kernels. ``gpu_us`` is the replay median; ``allocated_bytes`` the
        tensors and workspace each path allocates (real allocations); ``modelled_hbm_bytes`` what each
        path must move through HBM (a model from tensor sizes); ``achieved_gb_s`` that model over the
        measured time.
    """
    import cupy  # heavy: CuPy, live only

    from ...gpu.cudnn import (  # heavy: CuPy, live only
        builds,
        frontend,
        graph_cache,
        operands,
        reference_runs,  # heavy: CuPy, live only
    )
    from ...gpu.timing import autotune, measure  # heavy: CuPy, live only

    spec = as_spec(spec)
    check_spec(spec)
    paths = ("fused", "fused, autotuned", "unfused")
    done = {}  # (epilogue index, path index) -> row
    cases = {}  # epilogue -> (operands, float64 reference)

    def table():
        df = to_frame([done[k] for k in sorted(done)])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    def case(epi):
        if epi not in cases:
            ops = operands.Operands(spec, epi)
            cases[epi] = (ops, reference_runs.expected(spec, ops))
        return cases[epi]

    def fused_row(epi, cg, plan, us, **extra):
        """Run ``plan`` once more on a poisoned output, check it against the reference, make its row."""
        ops, want = case(epi)
        ops.poison_output()
        cg.bind_with_workspace(ops.arrays, plan.index).run()
        cupy.cuda.get_current_stream().synchronize()
        moved = _bytes_model(spec, epi, True)
        return dict(
            gpu_us=us,
            allocated_bytes=ops.nbytes + plan.workspace_bytes,
            intermediate_bytes=0,
            modelled_hbm_bytes=moved,
            achieved_gb_s=moved / (us * 1e-6) / 1e9,
            rel_error=reference.relative_error(ops.output(), want),
            kernels_per_call="1 graph",
            plan_name=plan.name,
            **extra,
            status="ok",
            reason="",
        )

    def fused(epi):  # the heuristic's fused plan: what a framework that does not autotune gets
        cg = graph_cache.get_graph(spec, epi, all_plans=False)
        plan, t = timed_plan(cg, ops=case(epi)[0])
        return fused_row(epi, cg, plan, t.median_us)

    def autotuned(
        epi,
    ):  # the fastest plan of the fused graph (saved winner, or every plan timed), checked as the heuristic's
        left = None if compiles is None else max(0.05, compiles.left)
        tuned = autotune.tuned_graph(spec, epi, ops=case(epi)[0], compile_budget_s=left)
        return fused_row(
            epi,
            tuned.graph,
            tuned.plan,
            tuned.gpu_us,
            plans_timed=tuned.plans_timed,
            plans_cut=tuned.plans_cut,
            compile_budget_s=None if compiles is None else compiles.seconds,
        )

    def unfused(epi):  # conv alone, then elementwise kernels on real tensors
        ops, want = case(epi)
        stream = measure.timing_stream()
        path = UnfusedPath(spec, ops, stream)
        tu = measure.graph_replay(path.run, stream, calls=5)
        ops.poison_output()
        with stream:
            path.run()
        stream.synchronize()
        got = frontend.logical_view(numerics.decode(path.output, spec.output_dtype), spec.layout)
        inter = path.intermediate_bytes
        moved = _bytes_model(spec, epi, False)
        return dict(
            gpu_us=tu.median_us,
            allocated_bytes=ops.nbytes + inter + path.plan.workspace_bytes,
            intermediate_bytes=inter,
            modelled_hbm_bytes=moved,
            achieved_gb_s=moved / (tu.median_us * 1e-6) / 1e9,
            rel_error=reference.relative_error(got, want),
            kernels_per_call=f"conv + {path.elementwise_kernels} elementwise",
            plan_name=path.plan.name,
            status="ok",
            reason="",
        )

    # cheapest and most telling first: the heuristic's fused plan and the unfused sequence for
    # every epilogue, then the autotuned fused plans (every plan of a fused graph: seconds)
    order = [(e, p) for p in (0, 2) for e in range(len(epilogues))] + [(e, 1) for e in range(len(epilogues))]
    make = {0: fused, 1: autotuned, 2: unfused}
    # the fused graphs' compiles run while the rest is timed; a plan still compiling when the
    # compile budget is spent is left out of the autotune (its row says how many: plans_cut)
    seconds = builds.compile_budget_s()
    compiles = None if seconds is None else Budget(seconds, "compiling the fused graphs' plans")
    graph_cache.build_ahead([(spec, epi, None) for epi in epilogues])
    for e, p in order:
        epi = epilogues[e]
        try:
            row = make[p](epi)
        except LabkitError as exc:
            if p == 2:
                raise
            row = status_row(exc)
        done[(e, p)] = dict(epilogue=epi, path=paths[p], **row)
        report(table, len(done), len(order), "paths measured")
    return table()
