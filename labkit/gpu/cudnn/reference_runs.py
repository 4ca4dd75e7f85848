"""Run plans of a built graph once and compare their outputs with the float64 reference.

Every run uses a poisoned, guard-banded workspace (`memory.GuardedBuffer`) and a poisoned
output, so a plan that reads scratch it never wrote, writes outside its workspace, or leaves
output elements unwritten, fails the check. `check_plans` gives the errors (`CheckResult`);
`judge` gives the `plan_checks.Verdict` by which a graph decides which plans may run
(`labkit.gpu.cudnn.checked_plans`). A graph here is a `labkit.gpu.cudnn.conv_graph.ConvGraph`, taken
as an argument (this module does not import it); `labkit.gpu.audits.verify` checks one plan on
fresh inputs with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import cupy
import numpy

from ...errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from ...signals.cancel import checkpoint
from ...signals.progress import announce
from ...spec import ConvSpec
from ..buffers import memory
from ..checks import error_kernel, plan_checks, reference
from .bound import BoundConv
from .frontend import role_dtype
from .operands import Operands


@dataclass(frozen=True)
class CheckResult:
    """One checked run of a plan against the float64 reference.

    Attributes:
        spec: the convolution.
        epilogue: its epilogue.
        plan_index: the plan.
        plan_name: its name.
        workspace_bytes: its workspace.
        rel_error: the relative (L2) error.
        max_abs_error: the largest absolute error.
        tolerance: the largest relative error accepted (`reference.tolerance_for`).
        rel_error_vs_unrounded: the relative error against the inputs before rounding, when asked.
    """

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
        """Whether the error is within the tolerance."""
        return self.rel_error <= self.tolerance


def expected(spec: ConvSpec, ops: Operands, *, unrounded: bool = False) -> cupy.ndarray:
    """The float64 answer for some operands, fused epilogues included: relu(conv + b [+ z]).

    Args:
        spec: the convolution.
        ops: the operands.
        unrounded: False computes it from the exact values cuDNN read (judges the arithmetic alone);
            True from the values before rounding to the dtype (judges the whole precision choice).

    Returns:
        A float64 CuPy array, logical NCHW.
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


def check_plans(graph, plan_indices, ops: Operands, *, seed: int = 0, vs_unrounded: bool = False) -> list:
    """Run plans once and compare each with one float64 reference. This is the check itself.

    Each plan that built is run, whatever its verdict, with its output poisoned first and a guarded
    workspace.

    Args:
        graph: the built graph.
        plan_indices: the plans.
        ops: the operands.
        seed: the workspace poison's seed.
        vs_unrounded: also compare with the answer for the inputs before rounding.

    Returns:
        A `CheckResult` per plan, in order.
    """
    spec = graph.spec
    announce(f"computing the float64 reference of {spec.label}")
    refs = [_Reference(expected(spec, ops), spec.layout)]  # one reference for every plan
    if vs_unrounded:
        refs.append(_Reference(expected(spec, ops, unrounded=True), spec.layout))
    runs = _launch(graph, plan_indices, ops, refs, seed=seed)
    return [r.result(refs) for r in runs]


def warm_check(ops: Operands) -> None:
    """Run a check's CuPy kernels once on ``ops``, without cuDNN, and wait: the float64 reference,
    its copy in storage order and the error kernel on the output as it is. A process's first check
    then neither loads nor compiles them (`labkit.gpu.worker_warmup`, `labkit.gpu.kernel_warmup`).

    Args:
        ops: the operands; their output is read, not written.
    """
    spec = ops.spec
    ref = _Reference(expected(spec, ops), spec.layout)
    stored, dtype = ops.arrays[ops.output_role], role_dtype(spec, ops.output_role)
    error_kernel.ErrorSlots(1).launch(0, 0, stored, dtype, ref.stored, ref.norms[0])
    cupy.cuda.get_current_stream().synchronize()


class _Reference:
    """A float64 reference as the plans' checks read it: in the output's storage order
    (`error_kernel.storage_order`), with its norms (`reference.reference_norms`, read once).

    Args:
        ref: the reference, logical NCHW (`expected`); not kept.
        layout: the output's layout.
    """

    def __init__(self, ref, layout: str):
        self.norms = reference.reference_norms(ref)
        self.stored = error_kernel.storage_order(ref, layout)


def _built(graph, index: int):
    """Plan ``index`` of ``graph`` as built, whatever its verdict (`InvalidSpec`, `Unsupported`)."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(graph.plans):
        raise InvalidSpec("plan index", index, f"must be an int in 0..{len(graph.plans) - 1}")
    plan = graph.plans[index]
    if not plan.built:
        raise Unsupported(f"plan {index} ({plan.name})", plan.error or "it did not build")
    return plan


class _HostCopies:
    """What the checks of several plans copy to the host, taken once (a page-locked allocation is
    far slower than a copy): per plan, its guard bands, and its error terms' device slots
    (`error_kernel.ErrorSlots`), copied here in one copy after the last plan."""

    def __init__(self, plans: int, references: int):
        self.bands = memory.pinned(max(1, plans) * 2 * memory.GUARD_BYTES).reshape(max(1, plans), -1)
        self.slots = error_kernel.ErrorSlots(plans, references)
        self.terms = memory.pinned(self.slots.terms.nbytes, numpy.float64).reshape(self.slots.terms.shape)

    def row(self, k: int) -> tuple:
        """Plan ``k``'s (bands, terms)."""
        return self.bands[k], self.terms[k]


class _Run:
    """One plan's checked run, launched on the current stream and not waited for: its output
    poisoned, the plan run with a guarded workspace, its guard bands copied to the host and its
    errors against each reference computed into its slots (one kernel each,
    `error_kernel.ErrorSlots`). `_launch` copies the slots back and waits once for every run
    launched; then `result` reads one.

    The runs of one check share the operands: each run's fill of the output follows the previous
    run's error kernel on the same stream, so every plan is compared on its own output.
    """

    def __init__(
        self, graph, index: int, ops: Operands, refs: list, host: _HostCopies, k: int, *, seed: int = 0
    ):
        spec = graph.spec
        plan = _built(graph, index)
        self.spec, self.epilogue, self.plan = spec, ops.epilogue, plan
        announce(f"checking plan {plan.index} ({plan.name}) of {spec.label} against float64")
        ops.poison_output(wait=False)  # the plan runs on this stream too
        ws = memory.GuardedBuffer(plan.workspace_bytes, "workspace", seed=seed)
        self.bands, self.terms = host.row(k)
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()
        try:
            self._start.record()
            BoundConv(graph, ops.arrays, ws.ptr, plan.index).run()
            self._end.record()
            ws.copy_guards(self.bands)
        finally:
            ws.free()  # back to the pool: memory reused on this stream is reused after these runs
        stored, dtype = ops.arrays[ops.output_role], role_dtype(spec, ops.output_role)
        for j, ref in enumerate(refs):
            host.slots.launch(k, j, stored, dtype, ref.stored, ref.norms[0])

    @property
    def first_call_us(self) -> float:
        """The run's GPU time between two events around it, in microseconds, once `_launch` has
        waited: the plan's first call in this process (`labkit.gpu.timing.measure.eager_us`)."""
        return cupy.cuda.get_elapsed_time(self._start, self._end) * 1000.0

    def result(self, refs: list) -> CheckResult:
        """The run's `CheckResult`, once `_launch` has waited for it; `LabkitError` when the plan wrote
        into its workspace's guard bands.

        Args:
            refs: the `_Reference` s it was compared with: the reference, then the unrounded one.

        Returns:
            The `CheckResult`.
        """
        damage = memory.guard_damage(self.bands, self.plan.workspace_bytes)
        if damage:
            raise LabkitError(damage)
        rel, worst = reference.errors_from_terms(self.terms[:2], refs[0].norms)
        unrounded = None
        if len(refs) > 1:
            unrounded = reference.errors_from_terms(self.terms[2:4], refs[1].norms)[0]
        return CheckResult(
            self.spec,
            self.epilogue,
            self.plan.index,
            self.plan.name,
            self.plan.workspace_bytes,
            rel,
            worst,
            reference.tolerance_for(self.spec),
            unrounded,
        )


def _launch(graph, plan_indices, ops: Operands, refs: list, *, seed: int = 0, raised_as_run=False) -> list:
    """Launch a `_Run` of each plan on the current stream, copy their errors back, then wait once for
    all of them.

    Between plans, a superseded background job stops (`labkit.signals.cancel.checkpoint`). The
    wait comes even when a plan raised: the runs before it copy into memory they hold.

    Args:
        graph: the built graph.
        plan_indices: the plans, in order.
        ops: the operands, shared by the runs.
        refs: the `_Reference` s each plan is compared with.
        seed: the workspace poison's seed.
        raised_as_run: put what a plan raised in its place and go on to the next plan (``judge``),
            rather than raise it.

    Returns:
        A `_Run` per plan, in order (or, with ``raised_as_run``, the exception a plan raised).
    """
    runs, host = [], _HostCopies(len(plan_indices), len(refs))
    try:
        for k, index in enumerate(plan_indices):
            checkpoint()  # between plans: a superseded background job stops here, nothing judged yet kept
            try:
                runs.append(_Run(graph, index, ops, refs, host, k, seed=seed))
            except Exception as exc:  # noqa: BLE001  (cuDNN refused to run it, or it did not fit)
                if not raised_as_run:
                    raise
                runs.append(exc)
    finally:
        host.slots.copy_to_host(host.terms)  # every plan's errors in one copy
        cupy.cuda.get_current_stream().synchronize()
    return runs


def judge(graph, plan_indices, *, ops: Optional[Operands] = None, first_calls: Optional[dict] = None) -> list:
    """A `plan_checks.Verdict` for each plan, each run once and compared with one float64 reference.

    The plans are launched one after another on the current stream and read back after one wait
    for all of them (`_Run`): one plan's check costs its run and its error's kernel, not a round
    trip to the host each.

    A plan that raises when run (a cuDNN error, writes outside its workspace) gets a verdict that says
    so; one whose workspace does not fit now gets a ``transient`` one (checked again by a later
    graph).

    Args:
        graph: the built graph.
        plan_indices: the plans.
        ops: the operands; default seed-0 inputs of the graph's spec, made here.
        first_calls: a dict to fill with plan index -> the GPU time of its run here, in microseconds
            (`_Run.first_call_us`), for each plan that ran.

    Returns:
        The verdicts, in order; `OutOfMemory` when the inputs or the reference do not fit.
    """
    spec = graph.spec
    tolerance = reference.tolerance_for(spec)
    ops = Operands(spec, graph.epilogue) if ops is None else ops
    announce(f"computing the float64 reference of {spec.label}")
    try:
        refs = [_Reference(expected(spec, ops), spec.layout)]  # one reference for every plan
    except cupy.cuda.memory.OutOfMemoryError:
        copies = 1 if spec.layout == "NCHW" else 2  # the reference, and its copy in storage order
        need = 8 * copies * int(math.prod(ops.arrays[ops.output_role].shape))
        raise OutOfMemory(f"the float64 reference of {spec.label}", need, memory.free_bytes()) from None
    runs = dict(zip(plan_indices, _launch(graph, plan_indices, ops, refs, raised_as_run=True)))
    out = []
    for index in plan_indices:
        name = graph.plans[index].name
        try:
            run = runs[index]
            if isinstance(run, Exception):
                raise run
            r = run.result(refs)
            if first_calls is not None:
                first_calls[index] = run.first_call_us
        except OutOfMemory as exc:
            out.append(plan_checks.Verdict(name, math.inf, tolerance, error=str(exc), transient=True))
        except Exception as exc:  # noqa: BLE001  (cuDNN refused to run it, or it broke its guards)
            why = str(exc) if isinstance(exc, LabkitError) else f"{type(exc).__name__}: {exc}"
            out.append(plan_checks.Verdict(name, math.inf, tolerance, error=" ".join(why.split())[:200]))
        else:
            out.append(plan_checks.Verdict(name, r.rel_error, r.tolerance, r.max_abs_error))
    return out
