"""The shared-scratchpad hazard, for real: convolutions on concurrent streams sharing one workspace.

oneDNN's "user scratchpad" mode hands the library one buffer; its docs warn that primitives
running concurrently must not share it. Here two (or more) CUDA streams each run a batch of
convolutions, either with one workspace shared by all streams or one per stream, and every
output is compared bit-for-bit with the same convolution run alone (and with the float64
reference).

Why plain Python launches usually hide the hazard: one launch costs ~10-40 us of host time,
longer than a small convolution runs, so the GPU rarely has two streams' kernels in flight at
once. CUDA graphs take the host out of the loop; then the kernels overlap and a shared
workspace corrupts results.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields

import cupy
import numpy

from ...errors import InvalidSpec
from ...signals.cancel import checkpoint
from ...spec import ConvSpec
from ..buffers import memory, numerics
from ..checks import reference
from ..cudnn import frontend, graph_cache, operands, reference_runs
from ..timing.measure import capture
from .workloads import RACE_SPEC  # noqa: F401  (the race's convolution, named where no CuPy is needed)

LAUNCHES = ("graph", "python")


@dataclass(frozen=True)
class RaceResult:
    """What a scratchpad race counted over ``runs`` convolutions (streams x convs_per_launch x rounds).

    Attributes:
        shared: one workspace for every stream.
        launch: "graph" (CUDA graphs) or "python" (launched one by one).
        streams: concurrent streams.
        runs: convolutions in all.
        mismatches_bitwise: outputs that differ in any bit from the stream's solo run.
        mismatches_vs_reference: outputs whose error against float64 is over the tolerance.
        workspace_bytes: the plan's workspace.
        plan_index: the plan raced.
        solo_rel_error: the worst solo run's error against float64.
        worst_rel_error: the worst output's error in the race.
        spec_label: the convolution.
        trace: the traced first round's `labkit.gpu.timing.trace` frame, when a tracer was given.
    """

    shared: bool
    launch: str
    streams: int
    runs: int
    mismatches_bitwise: int
    mismatches_vs_reference: int
    workspace_bytes: int
    plan_index: int
    solo_rel_error: float
    worst_rel_error: float
    spec_label: str
    #: the traced first round's `labkit.gpu.timing.trace` frame, when a tracer was given
    trace: object = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        """The counts as a plain dict, the trace left out.

        Returns:
            Field name -> value.
        """
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}


def _stream_batch(graph, plan, ops, outs, workspace_ptr, stream):
    """One stream's batch: the plan bound once per output, all to the same inputs and workspace."""
    return [
        graph.bind({**ops.arrays, ops.output_role: outs[j]}, workspace_ptr, plan.index, stream)
        for j in range(outs.shape[0])
    ]


def scratchpad_race(
    shared: bool,
    launch: str = "graph",
    *,
    spec: ConvSpec = RACE_SPEC,
    streams: int = 2,
    convs_per_launch: int = 64,
    min_runs: int = 1000,
    seed: int = 0,
    tracer=None,
) -> RaceResult:
    """Run convolutions on concurrent streams, sharing one workspace or not, and count corrupted outputs.

    Each stream's answer is first computed alone, with a private workspace, and checked against
    float64; every output of the race is then compared with it bit for bit and with float64.

    Args:
        shared: one workspace for all streams.
        launch: "graph" (each stream's convolutions as a CUDA graph) or "python".
        spec: an fprop convolution whose plan uses a workspace.
        streams: concurrent streams (>= 2).
        convs_per_launch: convolutions per stream in one launch.
        min_runs: the fewest convolutions in all.
        seed: the first stream's inputs' seed; the others count up.
        tracer: a `labkit.gpu.timing.trace.Tracer` factory. The first round's launches run under it, after
            one launch under it that is not kept (`labkit.gpu.timing.trace.Tracer.keep_from_now`: CUPTI's
            set-up of each kernel would delay the first stream's launch past the others').

    Returns:
        A `RaceResult`; its ``trace`` is a separate, traced run, and counts from it are labelled so.
    """
    if launch not in LAUNCHES:
        raise InvalidSpec("launch", launch, f"must be one of {', '.join(LAUNCHES)}")
    for name, v, lo in (
        ("streams", streams, 2),
        ("convs_per_launch", convs_per_launch, 1),
        ("min_runs", min_runs, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InvalidSpec(name, v, f"must be an int >= {lo}")
    if spec.direction != "fprop":
        raise InvalidSpec("spec.direction", spec.direction, "the race runs fprop convolutions")
    cg = graph_cache.get_graph(spec)
    plan = next((p for p in cg.runnable if p.workspace_bytes > 0), None)
    if plan is None:
        raise InvalidSpec(
            "spec", spec.label, "no plan of this spec uses a workspace, so there is nothing to share"
        )
    strs = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]
    ops = [operands.Operands(spec, seed=seed + i) for i in range(streams)]
    role, out_dtype = ops[0].output_role, frontend.role_dtype(spec, ops[0].output_role)
    out_shape = ops[0].arrays[role].shape
    outs = [
        memory.empty((convs_per_launch,) + out_shape, ops[0].arrays[role].dtype, "race outputs") for _ in strs
    ]
    # solo runs: each stream's answer alone, with a private workspace, checked against float64
    solo, solo_err = [], 0.0
    for o in ops:
        ws = memory.alloc(plan.workspace_bytes, "solo workspace")
        cg.execute(o.arrays, int(ws.data.ptr), plan.index)
        cupy.cuda.get_current_stream().synchronize()
        ref = reference_runs.expected(spec, o)
        solo_err = max(solo_err, reference.relative_error(o.output(), ref))
        solo.append((o.arrays[role].copy(), ref, float(cupy.sqrt((ref**2).sum()))))
    wss = [memory.alloc(plan.workspace_bytes, "race workspace") for _ in range(1 if shared else streams)]
    ptr = lambda i: int(wss[0 if shared else i].data.ptr)  # noqa: E731
    try:
        batches = [_stream_batch(cg, plan, ops[i], outs[i], ptr(i), strs[i]) for i in range(streams)]
        graphs = None
        if launch == "graph":
            graphs = [capture(lambda b=b: [c.run() for c in b], strs[i], 1) for i, b in enumerate(batches)]
        rounds = -(-min_runs // (streams * convs_per_launch))
        bad_bits = bad_ref = 0
        worst = 0.0
        tol = reference.tolerance_for(spec)
        traced = None

        def mark_unwritten():
            for i, s in enumerate(strs):
                with s:
                    outs[i].view(cupy.uint8)[...] = 0xFF
                s.synchronize()

        def launch_round():
            if graphs is not None:
                for g, s in zip(graphs, strs):
                    g.launch(s)
            else:
                for j in range(convs_per_launch):
                    for b in batches:
                        b[j].run()
            for s in strs:
                s.synchronize()

        for r in range(rounds):
            checkpoint()
            with tracer() if tracer is not None and r == 0 else contextlib.nullcontext() as t:
                if t is not None:  # CUPTI sets up each kernel at its first launch under a tracer: not kept
                    launch_round()
                mark_unwritten()
                if t is not None:
                    t.keep_from_now()
                launch_round()
            if t is not None:
                traced = t.frame()
            for i in range(streams):
                want, ref, ref_norm = solo[i]
                flat = outs[i].reshape(convs_per_launch, -1)
                differ = flat.view(cupy.uint8).reshape(convs_per_launch, -1) != want.reshape(1, -1).view(
                    cupy.uint8
                )
                # per-output counts on the GPU, counted on the host: a full reduction of a bool array is
                # one CuPy compiles with CUB (3.5 s at its first use on the H200), a row sum is not
                bad_bits += int(numpy.count_nonzero(differ.sum(axis=1).get()))
                got = numerics.decode(outs[i], out_dtype)  # (convs,) + storage shape
                if spec.layout == "NHWC":
                    got = got.transpose(0, 1, 4, 2, 3)
                diff = cupy.sqrt(((got - ref[None]) ** 2).reshape(convs_per_launch, -1).sum(axis=1))
                rel = diff / ref_norm
                rel = cupy.where(cupy.isnan(rel), cupy.inf, rel).get()  # one value per output
                bad_ref += int(numpy.count_nonzero(rel > tol))
                worst = max(worst, float(rel.max()))
    finally:  # the per-stream cuDNN handles go with the streams, also when a prefetch job stops here
        for s in strs:
            frontend.release_handle(s)
    return RaceResult(
        bool(shared),
        launch,
        streams,
        rounds * streams * convs_per_launch,
        bad_bits,
        bad_ref,
        plan.workspace_bytes,
        plan.index,
        solo_err,
        worst,
        spec.label,
        traced,
    )
