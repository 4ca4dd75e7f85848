"""Run one cuDNN plan on fresh random inputs and check it against the float64 reference.

Every run uses a poisoned, guard-banded workspace (`memory.GuardedBuffer`) and a poisoned
output, so a plan that reads scratch it never wrote, writes outside its workspace, or leaves
output elements unwritten, fails the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cupy

from ..signals.progress import announce
from ..spec import ConvSpec
from . import engine, memory, reference


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one checked run: relative (L2) and max-abs error vs the float64 reference."""

    spec: ConvSpec
    epilogue: str
    plan_index: int
    plan_name: str
    workspace_bytes: int
    rel_error: float
    max_abs_error: float
    tolerance: float
    rel_error_vs_unrounded: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.rel_error <= self.tolerance


def expected(spec: ConvSpec, ops: engine.Operands, unrounded: bool = False) -> cupy.ndarray:
    """The float64 answer for ``ops`` (fused epilogues included: relu(conv + b [+ z])).

    ``unrounded=False``: from the exact values cuDNN read (judges the arithmetic alone);
    ``True``: from the values before rounding to the dtype (judges the whole precision choice).
    """
    value = ops.unrounded if unrounded else ops.exact.__getitem__
    names = {"x": "x", "w": "w", "y": "dy"}
    ref = reference.reference(spec, {names[r]: value(r) for r in ops.exact if r in names})
    if ops.epilogue != "none":
        ref = ref + value("b")
        if ops.epilogue == "bias_relu_add":
            ref = ref + value("z")
        ref = cupy.maximum(ref, 0.0)
    return ref


def check_plan(
    spec: ConvSpec,
    epilogue: str = "none",
    plan_index: Optional[int] = None,
    seed: int = 0,
    workspace_cap: Optional[int] = None,
    graph: Optional[engine.ConvGraph] = None,
    vs_unrounded: bool = False,
) -> CheckResult:
    """Run the plan (default: the heuristic's pick) once and compare with the reference
    (and, with ``vs_unrounded``, with the float64 convolution of the inputs before rounding)."""
    g = graph if graph is not None else engine.get_graph(spec, epilogue, workspace_cap)
    ops = engine.Operands(spec, epilogue, seed)
    return check_plans(g, [g.plan(plan_index).index], ops, seed, vs_unrounded)[0]


def check_plans(
    graph: engine.ConvGraph, plan_indices, ops: engine.Operands, seed: int = 0, vs_unrounded: bool = False
) -> list:
    """Run each plan of ``plan_indices`` once on ``ops`` (output poisoned before each, guarded
    workspace) and compare with one float64 reference: a `CheckResult` per plan, in order."""
    spec = graph.spec
    announce(f"computing the float64 reference of {spec.label}")
    ref = expected(spec, ops)
    unrounded = expected(spec, ops, unrounded=True) if vs_unrounded else None
    out = []
    for index in plan_indices:
        plan = graph.plan(index)
        announce(f"checking plan {plan.index} ({plan.name}) of {spec.label} against float64")
        ops.poison_output()
        ws = memory.GuardedBuffer(plan.workspace_bytes, "workspace", seed)
        graph.execute(ops.arrays, ws.ptr, plan.index)
        ws.check()
        got = ops.output()
        out.append(
            CheckResult(
                spec,
                ops.epilogue,
                plan.index,
                plan.name,
                plan.workspace_bytes,
                reference.relative_error(got, ref),
                reference.max_abs_error(got, ref),
                reference.tolerance_for(spec),
                reference.relative_error(got, unrounded) if vs_unrounded else None,
            )
        )
    return out
