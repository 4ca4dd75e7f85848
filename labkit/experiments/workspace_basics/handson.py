"""Lesson 01's hands-on cells: one convolution run through the frontend with a workspace the learner
allocates, its reference solution (`labkit.session.handson`) and its check against float64 (on a GPU)."""

from __future__ import annotations

from ...draw.plots import (
    fmt_bytes,
)
from ...errors import InvalidSpec
from ..checking import CheckResult, emit, say

# ---- hands-on: one convolution with a workspace you allocate ---------------------------------------
#: the setup cell, run as it is (the learner reads it)
CONV_SETUP_SOURCE = """\
import cupy
from labkit.gpu import engine, frontend
spec = lessons.base(layout="NCHW")                 # fp16 NCHW: its heuristic plan needs a workspace
index = engine.get_graph(spec).default_plan.index  # the heuristic's pick (labkit built every plan)
g = frontend.planned_graph(spec)                   # define, validate, list the candidate plans
g.build_plan_at_index(index)                       # build that one plan
ops = engine.Operands(spec)                        # seeded random inputs, a NaN-filled output
pointers = {frontend.UIDS[role]: array.data.ptr for role, array in ops.arrays.items()}
"""
#: the reference solution of the cell the learner completes
OWN_WORKSPACE_SOURCE = """\
size = g.get_workspace_size_plan_at_index(index)
workspace = cupy.empty(size, dtype=cupy.uint8)
if workspace.nbytes >= engine.get_graph(spec).plan(index).workspace_bytes:  # never hand cuDNN less
    g.execute_plan_at_index(pointers, workspace.data.ptr, index, handle=frontend.handle_for())
assert check.own_workspace(ops, workspace)
"""


def own_workspace(ops=None, workspace=None) -> CheckResult:
    """Lesson 01 hands-on: the convolution you ran with your workspace, against float64 (GPU).

    Args:
        ops: the `labkit.gpu.engine.Operands` you ran it on.
        workspace: the CuPy array you gave cuDNN as its workspace.

    Returns:
        A `CheckResult`: correct when the workspace is large enough and the output matches the
        float64 reference.
    """
    from ... import env

    m = env.mode()
    if not m.live:
        return emit(
            False,
            f"this check needs your convolution on a CUDA GPU; labkit is in recorded mode ({m.reason}).",
            lead="skipped",
        )
    from ...gpu import engine, reference, verify

    if not isinstance(ops, engine.Operands):
        raise InvalidSpec("ops", ops, "must be the engine.Operands your convolution ran on")
    if not hasattr(workspace, "nbytes") or not hasattr(workspace, "data"):
        raise InvalidSpec("workspace", workspace, "must be the CuPy array you allocated as the workspace")
    spec = ops.spec
    need = int(engine.get_graph(spec).default_plan.workspace_bytes)
    got = int(workspace.nbytes)
    import cupy

    cupy.cuda.runtime.deviceSynchronize()  # the kernels were only queued: wait for them before reading
    if got < need:
        return say(
            False, f"your workspace holds {got:,} B and the plan asks {need:,} B: never hand cuDNN less."
        )
    err = reference.relative_error(ops.output(), verify.expected(spec, ops))
    tol = reference.tolerance_for(spec)
    if not err <= tol:
        return say(
            False,
            f"the output is off: relative error {err:.2e} against float64 (tolerance {tol:.0e}). Did "
            "execute_plan_at_index run with your workspace's pointer, after you allocated it?",
        )
    return say(
        True,
        f"{spec.label}: your {fmt_bytes(got)} workspace, relative error {err:.1e} against the float64 "
        "reference "
        f"(tolerance {tol:.0e}). execute_plan_at_index returned as soon as the kernels were queued; the "
        "workspace had to stay yours until they had run, which this check waited for.",
    )
