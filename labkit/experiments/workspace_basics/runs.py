"""Lesson 01's run functions (live: measured now; recorded: answered from the recording): the classic
algorithm table, the workspace of every plan per dtype x layout x direction, and a sweep of one dimension;
and the values the recorded grid holds for the sweep."""

from __future__ import annotations

import itertools
from typing import Sequence

from ...errors import InvalidSpec, LabkitError, status_row
from ...gpu.classic import legacy
from ...gpu.classic.legacy import DTYPE_PLAN
from ...signals.cancel import Budget
from ...signals.progress import report
from ...spec import DTYPES, LAYOUTS, ConvSpec
from ..core import BASE, as_spec, experiment, heuristic_row, to_frame

#: the dtypes the classic API convolves (it has no fp8 convolution)
LEGACY_DTYPES = tuple(DTYPE_PLAN)


# ---- experiments ------------------------------------------------------------------------------
@experiment
def algorithms(spec: ConvSpec = BASE.replace(layout="NCHW"), workspace_limit_bytes: int = 1 << 30):
    """The classic algorithm table, as cuDNN's legacy ``cudnnFindConvolutionForwardAlgorithmEx`` reports it.

    Args:
        spec: the convolution (fprop).
        workspace_limit_bytes: the most workspace Find may use.

    Returns:
        One row per algorithm (IMPLICIT_GEMM ... WINOGRAD_NONFUSED): status, workspace (bytes) and time
        (us), after ``dtype`` and ``layout`` (`labkit.gpu.classic.legacy.algorithm_table`).
    """
    df = legacy.algorithm_table(as_spec(spec), workspace_limit_bytes=workspace_limit_bytes)
    df.insert(0, "dtype", spec.dtype)
    df.insert(1, "layout", spec.layout)
    return df


SWEEP_FIELDS = ("N", "C=K", "H=W", "R=S")


@experiment
def sweep(field: str = "N", values: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), base: ConvSpec = BASE):
    """GPU time, workspace and TFLOP/s of the heuristic plan as one dimension varies.

    Args:
        field: "N"; "C=K" (both channel counts); "H=W" (both spatial sizes); or "R=S" (the filter,
            with 'same' padding).
        values: the values it takes.
        base: the convolution varied.

    Returns:
        One row per value: ``field``, ``value``, dtype, layout, direction, ``flops``, then
        `heuristic_row`'s plan, workspace (bytes), time (us), TFLOP/s and status.
    """

    base = as_spec(base, "base")
    if field not in SWEEP_FIELDS:
        raise InvalidSpec("field", field, f"must be one of {', '.join(SWEEP_FIELDS)}")
    rows = []
    for v in values:
        change = {
            "N": dict(N=v),
            "C=K": dict(C=v, K=v),
            "H=W": dict(H=v, W=v),
            "R=S": dict(R=v, S=v, padding=(v - 1) // 2 * base.dilation[0]),
        }[field]
        s = base.replace(**change)
        rows.append(
            dict(
                field=field,
                value=v,
                dtype=s.dtype,
                layout=s.layout,
                direction=s.direction,
                flops=s.flops,
                **heuristic_row(s),
            )
        )
        report(lambda: to_frame(rows), len(rows), len(values), f"{field} values")
    return to_frame(rows)


@experiment
def workspace_sizes(spec: ConvSpec = BASE):
    """The workspace of every candidate plan, for each dtype x layout x direction of one shape.

    Args:
        spec: the convolution whose shape is kept.

    Returns:
        One row per variant: ``plans``, heuristic, min and max workspace (bytes), ``status``;
        ``plans_cut``: runtime-compiled plans still compiling when the compile budget was spent
        (`labkit.gpu.cudnn.builds.compile_budget_s`; fill and record wait for every plan).
    """
    from ...gpu.cudnn import builds, graph_cache  # heavy: CuPy, live only

    spec, rows = as_spec(spec), []
    variants = list(itertools.product(DTYPES, LAYOUTS, ("fprop", "dgrad", "wgrad")))
    specs = {}
    for d, lay, direction in variants:
        try:
            specs[d, lay, direction] = spec.replace(dtype=d, layout=lay, direction=direction)
        except LabkitError:
            pass  # an impossible variant: its row says why below
    graph_cache.build_ahead(
        [(s, "none", None) for s in specs.values()]
    )  # every variant's compiles at once, in the workers
    seconds = builds.compile_budget_s()
    compiles = None if seconds is None else Budget(seconds, "compiling the variants' plans")
    for d, lay, direction in variants:
        row = dict(dtype=d, layout=lay, direction=direction)
        try:
            s = specs.get((d, lay, direction)) or spec.replace(dtype=d, layout=lay, direction=direction)
            cg = graph_cache.get_graph(s, compile_budget_s=None if compiles is None else compiles.left)
            ws = [p.workspace_bytes for p in cg.built]  # what cuDNN asks for: no plan runs here
            row.update(
                plans=len(ws),
                heuristic_workspace_bytes=cg.heuristic_plan.workspace_bytes,
                min_workspace_bytes=min(ws),
                max_workspace_bytes=max(ws),
                plans_cut=int(cg.build_cut),
                status="ok",
                reason="",
            )
        except LabkitError as exc:
            row.update(status_row(exc))
        rows.append(row)
        report(lambda: to_frame(rows), len(rows), len(variants), "variants (each builds every plan)")
    return to_frame(rows)


#: the values each ``sweep`` field is recorded at (widgets offer exactly these)
SWEEP_VALUES = {
    "N": [1, 2, 4, 8, 16, 32, 64],
    "C=K": [16, 32, 64, 128, 256, 512],
    "H=W": [7, 14, 28, 56, 112],
    "R=S": [1, 3, 5, 7],
}

#: the sweep panel's first view: true fp32 in NCHW across channel counts, where the heuristic plan
#: switches to one that asks for a workspace (the fp16 NHWC sweeps ask for a few hundred bytes at most)
SWEEP_BASE = BASE.replace(dtype="fp32", layout="NCHW")
SWEEP_FIELD = "C=K"
