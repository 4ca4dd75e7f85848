"""Lesson 03's experiments: every dtype's speed and error (`precision`), NCHW against NHWC with the
conversion a user pays (`layout`), and ResNet-50's convolutions against this GPU's roofline
(`roofline`). Live they measure now; recorded they answer from the recording."""

from __future__ import annotations

from typing import Sequence

from ... import ceilings, env
from ...errors import LabkitError, status_row
from ...signals.progress import report
from ...spec import DTYPES, LAYOUTS, ConvSpec
from ..core import (
    BASE,
    as_spec,
    experiment,
    heuristic_row,
    model,
    tflops_of,
    timed_plan,
    to_frame,
)


# ---- experiments ------------------------------------------------------------------------------
@experiment
def precision(spec: ConvSpec = BASE, dtypes: Sequence[str] = DTYPES):
    """Error vs float64, GPU time, TFLOP/s, workspace and plan per dtype (the heuristic plan each).

    Args:
        spec: the convolution; its dtype is replaced.
        dtypes: the dtypes measured.

    Returns:
        One row per dtype: plan, ``workspace_bytes``, ``gpu_us`` (median, with ``gpu_us_p10`` and
        ``gpu_us_p90``), ``tflops``, ``status``. Two errors, both relative L2 on the same seeded data:
        ``rel_error`` against the float64 convolution of the inputs as cuDNN read them (rounded to the
        dtype: the arithmetic alone), and ``rel_error_vs_fp64_inputs`` against the float64 convolution
        of the data before rounding (what choosing the dtype costs in total).
    """
    from ...gpu.audits import verify  # heavy: CuPy, live only
    from ...gpu.cudnn import graph_cache  # heavy: CuPy, live only

    spec, rows = as_spec(spec), []
    for d in dtypes:
        s = spec.replace(dtype=d)
        row = dict(dtype=d, layout=s.layout, direction=s.direction, flops=s.flops)
        try:
            cg = graph_cache.get_graph(s, all_plans=False)
            check = verify.check_plan(s, graph=cg, vs_unrounded=True)
            plan, t = timed_plan(cg)
            row.update(
                plan_index=plan.index,
                plan_name=plan.name,
                workspace_bytes=plan.workspace_bytes,
                gpu_us=t.median_us,
                gpu_us_p10=t.p10_us,
                gpu_us_p90=t.p90_us,
                tflops=tflops_of(s, t.median_us),
                rel_error=check.rel_error,
                max_abs_error=check.max_abs_error,
                tolerance=check.tolerance,
                rel_error_vs_fp64_inputs=check.rel_error_vs_unrounded,
                status="ok",
                reason=cg.fell_through,
            )
        except LabkitError as exc:
            row.update(status_row(exc))
        rows.append(row)
        report(lambda: to_frame(rows), len(rows), len(dtypes), "dtypes")
    return to_frame(rows)


@experiment
def layout(spec: ConvSpec = BASE):
    """NCHW vs NHWC for one convolution, plus converting NCHW tensors to NHWC and back.

    The conversion is a CuPy transpose-copy of the inputs to NHWC and of the output back, so
    ``end_to_end_us`` shows when NHWC pays off.

    Args:
        spec: the convolution; its layout is replaced.

    Returns:
        One row per layout: plan, ``workspace_bytes``, ``conv_gpu_us``, ``convert_gpu_us`` (0 for
        NCHW), ``end_to_end_us``, ``status``.
    """
    import cupy  # heavy: CuPy, live only

    from ...gpu.cudnn import frontend, graph_cache, operands  # heavy: CuPy, live only
    from ...gpu.timing import measure  # heavy: CuPy, live only

    spec, rows = as_spec(spec), []
    for lay in LAYOUTS:
        s = spec.replace(layout=lay)
        row = dict(layout=lay, dtype=s.dtype, direction=s.direction)
        try:
            cg = graph_cache.get_graph(s, all_plans=False)
            ops = operands.Operands(s)  # timed, then reused as the conversion's buffers
            plan, t = timed_plan(cg, ops=ops)
            convert = 0.0
            if lay == "NHWC":
                stream = measure.timing_stream()
                ins = [r for r in frontend.INPUT_ROLES[s.direction] if r != "w"]
                out = frontend.OUTPUT_ROLE[s.direction]
                with stream:  # copied on the stream that then times the conversion, in order
                    nchw = {
                        r: cupy.ascontiguousarray(frontend.logical_view(ops.arrays[r], "NHWC"))
                        for r in ins + [out]
                    }

                def to_nhwc_and_back():
                    for r in ins:  # user's NCHW input -> NHWC for cuDNN
                        ops.arrays[r][...] = nchw[r].transpose(0, 2, 3, 1)
                    nchw[out][...] = ops.arrays[out].transpose(0, 3, 1, 2)  # result back to NCHW

                convert = measure.graph_replay(to_nhwc_and_back, stream, calls=5).median_us
            row.update(
                plan_name=plan.name,
                workspace_bytes=plan.workspace_bytes,
                conv_gpu_us=t.median_us,
                convert_gpu_us=convert,
                end_to_end_us=t.median_us + convert,
                status="ok",
                reason="",
            )
        except LabkitError as exc:
            row.update(status_row(exc))
        rows.append(row)
        report(lambda: to_frame(rows), len(rows), len(LAYOUTS), "layouts")
    return to_frame(rows)


def resnet50_shapes(N: int = 32):
    """The ResNet-50 forward convolution shapes the benchmarks and roofline use.

    Args:
        N: the batch size (the batch-1 shape keeps 1).

    Returns:
        (name, `ConvSpec`) pairs, in fp16 NHWC.
    """
    return [
        ("conv1 7x7/2", ConvSpec(N=N, C=3, H=224, W=224, K=64, R=7, S=7, stride=2, padding=3)),
        ("3x3 @56", ConvSpec(N=N, C=64, H=56, W=56, K=64)),
        ("1x1 @56", ConvSpec(N=N, C=64, H=56, W=56, K=256, R=1, S=1, padding=0)),
        ("3x3 @28", ConvSpec(N=N, C=128, H=28, W=28, K=128)),
        ("3x3 @14", ConvSpec(N=N, C=256, H=14, W=14, K=256)),
        ("3x3 @7", ConvSpec(N=N, C=512, H=7, W=7, K=512)),
        ("1x1/2 ds @28", ConvSpec(N=N, C=256, H=56, W=56, K=512, R=1, S=1, stride=2, padding=0)),
        ("batch-1 3x3 @56", ConvSpec(N=1, C=64, H=56, W=56, K=64)),
    ]


@experiment
def roofline(dtype: str = "fp16", layout: str = "NHWC", N: int = 32):
    """Arithmetic intensity and achieved TFLOP/s of the ResNet-50 shapes against this GPU's ceilings.

    Args:
        dtype: the shapes' dtype.
        layout: their layout.
        N: their batch size.

    Returns:
        One row per shape: `heuristic_row`'s columns, ``peak_tflops`` and ``bandwidth_gb_s`` from
        `labkit.ceilings` (empty for a GPU not in the table), and the model's ``min_bytes``,
        ``intensity_flops_per_byte`` (FLOP/B) and ``achieved_gb_s``.
    """
    ceiling = ceilings.for_gpu(env.environment().gpu_name)
    rows, shapes = [], resnet50_shapes(N)
    for name, s in shapes:
        s = s.replace(dtype=dtype, layout=layout)
        row = dict(
            shape=name,
            dtype=dtype,
            layout=layout,
            flops=s.flops,
            peak_tflops=ceiling.peak_tflops(dtype) if ceiling else None,
            bandwidth_gb_s=ceiling.bandwidth_bytes_per_s / 1e9 if ceiling else None,
            ceiling_gpu=ceiling.gpu if ceiling else None,
        )
        row.update(heuristic_row(s))
        rows.append(row)
        report(
            lambda: _roofline_model(to_frame(rows), dtype=dtype, layout=layout, N=N),
            len(rows),
            len(shapes),
            "shapes",
        )
    return _roofline_model(to_frame(rows), dtype=dtype, layout=layout, N=N)


@model("roofline")
def _roofline_model(df, dtype: str = "fp16", layout: str = "NHWC", N: int = 32):
    """The roofline's model columns from each row's shape: ``min_bytes`` (`ConvSpec.min_bytes`:
    the input pixels some window covers, the filter and the output, each moved once),
    ``intensity_flops_per_byte`` and ``achieved_gb_s`` (that model over the measured time)."""
    df = df.copy()
    shapes = dict(resnet50_shapes(N))
    specs = [
        shapes[name].replace(dtype=dtype, layout=layout) if name in shapes else None for name in df["shape"]
    ]
    df["min_bytes"] = [s.min_bytes if s else None for s in specs]
    df["intensity_flops_per_byte"] = [s.arithmetic_intensity if s else None for s in specs]
    if "gpu_us" in df.columns:
        df["achieved_gb_s"] = [
            s.min_bytes / (us * 1e-6) / 1e9 if s and us == us and us else None
            for s, us in zip(specs, df["gpu_us"])
        ]
    return df
