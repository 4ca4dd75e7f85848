"""Lesson 03, precision and layout: fp32/tf32/fp16/bf16/fp8 and NCHW/NHWC, speed, error and
workspace, and where ResNet-50's layers sit on this GPU's roofline.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import plotly.graph_objects as go

from ..draw.plots import (
    COLORS,
    DTYPE_COLORS,
    finish,
    first_value,
    fmt_bytes,
    fmt_us,
    log_axis,
    log_ticks,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from ..signals.progress import report
from ..spec import DTYPES, LAYOUTS, ConvSpec
from .checking import CheckResult, as_flag, as_number, frame_for, is_close, pending, say
from .core import (
    BASE,
    as_spec,
    experiment,
    heuristic_row,
    model,
    status_row,
    tflops_of,
    timed_plan,
    to_frame,
    variants,
)
from .panel_config import SHAPE, plain_panel, spec_panel


# ---- experiments ------------------------------------------------------------------------------
@experiment
def precision(spec: ConvSpec = BASE, dtypes: Sequence[str] = DTYPES):
    """Error vs float64, GPU time, TFLOP/s, workspace and plan per dtype (heuristic plan each).

    Two errors, both relative L2 on the same seeded data: ``rel_error`` against the float64
    convolution of the inputs as cuDNN read them (rounded to the dtype: the arithmetic alone), and
    ``rel_error_vs_fp64_inputs`` against the float64 convolution of the data before rounding
    (what choosing the dtype costs in total).
    """
    from ..gpu import engine, verify

    spec, rows = as_spec(spec), []
    for d in dtypes:
        s = spec.replace(dtype=d)
        row = dict(dtype=d, layout=s.layout, direction=s.direction, flops=s.flops)
        try:
            cg = engine.get_graph(s, all_plans=False)
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
    """NCHW vs NHWC for one spec, plus converting a user's NCHW input to NHWC (and the output
    back) with a CuPy transpose-copy, so ``end_to_end_us`` shows when NHWC pays off."""
    import cupy

    from ..gpu import engine, measure

    spec, rows = as_spec(spec), []
    for lay in LAYOUTS:
        s = spec.replace(layout=lay)
        row = dict(layout=lay, dtype=s.dtype, direction=s.direction)
        try:
            cg = engine.get_graph(s, all_plans=False)
            ops = engine.Operands(s)  # timed, then reused as the conversion's buffers
            plan, t = timed_plan(cg, ops=ops)
            convert = 0.0
            if lay == "NHWC":
                stream = measure.timing_stream()
                ins = [r for r in engine.INPUT_ROLES[s.direction] if r != "w"]
                out = engine.OUTPUT_ROLE[s.direction]
                nchw = {
                    r: cupy.ascontiguousarray(engine.logical_view(ops.arrays[r], "NHWC")) for r in ins + [out]
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
    """The ResNet-50 forward convolution shapes the benchmarks and roofline use (name, spec)."""
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
    """Arithmetic intensity and achieved TFLOP/s of the ResNet-50 shapes against this GPU's
    ceilings (`labkit.ceilings`); a GPU not in the table gets empty ceiling columns."""
    from .. import ceilings, env

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


# ---- charts --------------------------------------------------------------------------------


def precision_chart(df) -> go.Figure:
    """Error vs GPU time per dtype, log-log. Traces: 0 arithmetic error (vs fp64 on the inputs
    cuDNN read), 1 total error (vs fp64 on the unrounded data), 2 the segment between them
    (what rounding the inputs to the dtype adds)."""
    ok = ok_rows(df)
    x = [num(v) for v in ok["gpu_us"]]
    e1 = [num(v) for v in ok["rel_error"]]
    e2 = (
        [num(v) for v in ok["rel_error_vs_fp64_inputs"]]
        if "rel_error_vs_fp64_inputs" in ok
        else [None] * len(ok)
    )
    dts = list(ok["dtype"])
    colors = [DTYPE_COLORS.get(d, COLORS["dark"]) for d in dts]
    fig = new_figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=e1,
            mode="markers+text",
            name="arithmetic error (vs fp64 on the same rounded inputs)",
            text=dts,
            textposition="middle left",
            marker=dict(size=12, color=colors, symbol="circle"),
            customdata=[[fmt_bytes(w), str(p)] for w, p in zip(ok["workspace_bytes"], ok["plan_name"])],
            hovertemplate="%{text}: %{x:.1f} us, arithmetic error %{y:.2e}<br>workspace %{customdata[0]}, "
            "plan %{customdata[1]}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=e2,
            mode="markers",
            name="total error (vs fp64 on the original data)",
            text=dts,
            marker=dict(size=12, color=colors, symbol="diamond-open", line=dict(width=2)),
            hovertemplate="%{text}: %{x:.1f} us, total error %{y:.2e}<extra></extra>",
        )
    )
    sx, sy = [], []
    for xi, a, b in zip(x, e1, e2):
        if None not in (xi, a, b):
            sx += [xi, xi, None]
            sy += [a, b, None]
    fig.add_trace(
        go.Scatter(
            x=sx,
            y=sy,
            mode="lines",
            name="added by rounding the inputs",
            hoverinfo="skip",
            line=dict(color=COLORS["muted"], dash="dot"),
        )
    )
    fig.update_xaxes(title_text="GPU time per call (us, log)", type="log", **log_axis(x))
    fig.update_yaxes(title_text="relative L2 error vs float64 (log)", type="log", **log_axis(e1 + e2))
    spec = request_spec(df)
    detail = (
        f"{spec.layout} {spec.direction} {shape_label(spec)}; heuristic plan per dtype; lower-left is better"
        if spec
        else ""
    )
    return finish(
        fig, df, "Precision: error vs speed per dtype", detail, note=not_ok_note(df, ("dtype",)), height=480
    )


def layout_chart(df) -> go.Figure:
    """NCHW vs NHWC: convolution GPU time stacked with the cost of converting a user's NCHW
    tensors to NHWC and back. Traces: 0 convolution (us), 1 conversion (us)."""
    ok = ok_rows(df)
    lays = list(ok["layout"])
    conv = [num(v) for v in ok["conv_gpu_us"]]
    conv_txt = [f"{fmt_us(c)} conv<br>workspace {fmt_bytes(w)}" for c, w in zip(conv, ok["workspace_bytes"])]
    cvt = [num(v) for v in ok["convert_gpu_us"]]
    fig = new_figure()
    fig.add_trace(
        go.Bar(
            x=lays,
            y=conv,
            name="convolution",
            marker_color=COLORS["primary"],
            text=conv_txt,
            textposition="inside",
            customdata=[str(p) for p in ok["plan_name"]],
            hovertemplate="%{x}: convolution %{y:.1f} us<br>plan %{customdata}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=lays,
            y=cvt,
            name="NCHW → NHWC → NCHW conversion (CuPy transposes)",
            marker_color=COLORS["secondary"],
            text=[f"+{fmt_us(c)} convert" if c else "" for c in cvt],
            textposition="inside",
            customdata=[num(v) for v in ok["end_to_end_us"]],
            hovertemplate="%{x}: conversion %{y:.1f} us (end to end %{customdata:.1f} us)<extra></extra>",
        )
    )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="memory layout cuDNN runs in")
    fig.update_yaxes(title_text="GPU time per call (us)")
    spec = request_spec(df)
    detail = (
        (
            f"{spec.dtype} {spec.direction} {shape_label(spec)}; the conversion is what a user whose tensors are "
            "NCHW pays to run in NHWC"
        )
        if spec
        else ""
    )
    return finish(
        fig, df, "NCHW vs NHWC, conversion included", detail, note=not_ok_note(df, ("layout",)), height=460
    )


def roofline_chart(df) -> go.Figure:
    """Arithmetic intensity vs achieved TFLOP/s (log-log), with the roof of the df's GPU: the
    compute roof (``peak_tflops`` for the dtype) and the bandwidth roof (``bandwidth_gb_s``).
    A GPU with no known ceiling (empty columns) gets no roof, and a note says so.
    Traces: 0 measured shapes, 1 roof (empty without a ceiling)."""
    ok = ok_rows(df)
    xi = [num(v) for v in ok["intensity_flops_per_byte"]]
    ty = [num(v) for v in ok["tflops"]] if "tflops" in ok.columns else [None] * len(ok)
    dtype = str(df["dtype"].iloc[0]) if len(df) else "?"
    peak, bw = first_value(df, "peak_tflops"), first_value(df, "bandwidth_gb_s")
    roof_at = (lambda x: min(peak, x * bw / 1e3)) if peak and bw else None
    fig = new_figure()
    fig.add_trace(
        go.Scatter(
            x=xi,
            y=ty,
            mode="markers+text",
            name=f"measured ({dtype})",
            text=list(ok["shape"]),
            textposition=_label_positions(xi, ty, roof_at),
            textfont=dict(size=10),
            marker=dict(size=11, color=DTYPE_COLORS.get(dtype, COLORS["primary"])),
            customdata=[
                [num(u), num(g)]
                for u, g in zip(ok.get("gpu_us", [None] * len(ok)), ok.get("achieved_gb_s", [None] * len(ok)))
            ],
            hovertemplate="%{text}: %{x:.0f} FLOP/B, %{y:.0f} TFLOP/s<br>%{customdata[0]:.1f} us, %{customdata[1]:.0f} GB/s "
            "(min-bytes model)<extra></extra>",
        )
    )
    gpu = (getattr(df, "attrs", {}) or {}).get("gpu") or "this GPU"
    notes = []
    known = [v for v in xi if v]
    lo, hi = (min(known) / 3, max(known) * 3) if known else (1.0, 1e4)
    if peak and bw:
        ridge = peak * 1e3 / bw  # FLOP/B where peak TFLOP/s = intensity * GB/s / 1000
        lo, hi = min(lo, ridge / 3), max(hi, ridge * 3)
        rx = [lo, ridge, hi]
        ry = [min(peak, x * bw / 1e3) for x in rx]
        cg = first_value(df, "ceiling_gpu") or gpu
        fig.add_trace(
            go.Scatter(
                x=rx,
                y=ry,
                mode="lines",
                name=f"roof: {cg}, {dtype} {peak:.0f} TFLOP/s, {bw:.0f} GB/s",
                line=dict(color=COLORS["dark"], width=2),
                hovertemplate="roof: %{y:.0f} TFLOP/s at %{x:.0f} FLOP/B<extra></extra>",
            )
        )
        notes.append(
            f"roof: datasheet peak (dense) from labkit.ceilings; ridge at {ridge:.0f} FLOP/B. "
            "Intensity: FLOPs over a byte model (filter, output, and the input pixels some window "
            "covers, each moved once)."
        )
    else:
        fig.add_trace(
            go.Scatter(
                x=[],
                y=[],
                mode="lines",
                name="roof (unknown GPU: not drawn)",
                line=dict(color=COLORS["dark"], width=2),
            )
        )
        cg = first_value(df, "ceiling_gpu")
        why = (
            f"labkit.ceilings has no {dtype} peak for {cg}"
            if cg and bw
            else f"no ceilings known for {gpu} (labkit.ceilings lists vendor datasheet figures only)"
        )
        notes.append(f"No roof drawn: {why}. Only the measured points are shown.")
    fig.update_xaxes(
        title_text="arithmetic intensity (FLOP/byte, log)",
        type="log",
        range=[math.log10(lo), math.log10(hi)],
        **log_ticks([lo, hi]),
    )
    ys = [v for v in ty if v] + ([peak] if peak else [])
    fig.update_yaxes(title_text="achieved TFLOP/s (log)", type="log", **log_axis(ys))
    lay = str(df["layout"].iloc[0]) if len(df) else ""
    note = " ".join(notes)
    bad = not_ok_note(df, ("shape",))
    return finish(
        fig,
        df,
        f"Roofline: ResNet-50 convolutions, {dtype} {lay}",
        "heuristic plan per shape",
        note=note + (" · " + bad if bad else ""),
        height=500,
    )


def _label_positions(xs, ys, roof_at=None) -> list:
    """Text positions for labelled points on log-log axes: above the point, but below it when the
    roof (``roof_at(x)``) runs just above (the line would cross the label), and to the left /
    right for two points close together (their labels would overlap)."""
    lx = [math.log10(x) if x else None for x in xs]
    ly = [math.log10(y) if y else None for y in ys]
    pos = []
    for x, y, a in zip(xs, ys, ly):
        near_roof = roof_at is not None and x and y and math.log10(roof_at(x)) - a < 0.3
        pos.append("bottom center" if near_roof else "top center")
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if None in (lx[i], lx[j], ly[i], ly[j]):
                continue
            if abs(lx[i] - lx[j]) < 0.15 and abs(ly[i] - ly[j]) < 0.15:
                left, right = (i, j) if lx[i] <= lx[j] else (j, i)
                pos[left], pos[right] = "middle left", "middle right"
    return pos


# ---- summaries --------------------------------------------------------------------------------


def precision_summary(df) -> Text:
    ok = ok_rows(df).set_index("dtype")
    parts = [f"{where(df)}:"]
    for d, r in ok.iterrows():
        parts.append(
            f"**{d}** {fmt_us(r.gpu_us)} ({r.tflops:.0f} TFLOP/s), error {r.rel_error:.1e} from the arithmetic, "
            f"{r.rel_error_vs_fp64_inputs:.1e} in total;"
        )
    if "fp32" in ok.index and "fp16" in ok.index:
        parts.append(
            f"fp16 is {ok.loc['fp32', 'gpu_us'] / ok.loc['fp16', 'gpu_us']:.1f}x faster than true fp32 here."
        )
    if "fp8_e4m3" in ok.index:
        r = ok.loc["fp8_e4m3"]
        fp16 = f" (fp16: {ok.loc['fp16', 'rel_error']:.1e})" if "fp16" in ok.index else ""
        parts.append(
            f"fp8's arithmetic error is {r.rel_error:.1e}{fp16}, but rounding the inputs to fp8 makes its total "
            f"error {r.rel_error_vs_fp64_inputs / r.rel_error:.0f}x its arithmetic error."
        )
    return Text(" ".join(parts))


def layout_summary(df) -> Text:
    ok = ok_rows(df).set_index("layout")
    n, h = ok.loc["NCHW"], ok.loc["NHWC"]
    verdict = (
        "converting pays off even for one convolution"
        if h.end_to_end_us < n.end_to_end_us
        else "for a user whose tensors are NCHW, converting for one convolution does not pay off"
    )
    return Text(
        f"{where(df)}: the convolution takes {fmt_us(n.conv_gpu_us)} in NCHW (workspace {fmt_bytes(n.workspace_bytes)}) "
        f"and {fmt_us(h.conv_gpu_us)} in NHWC (workspace {fmt_bytes(h.workspace_bytes)}): "
        f"{n.conv_gpu_us / h.conv_gpu_us:.1f}x faster. Converting NCHW tensors to NHWC and back costs "
        f"{fmt_us(h.convert_gpu_us)}: NHWC end to end is {fmt_us(h.end_to_end_us)}, and {verdict}. "
        "Keep the whole network in NHWC and the conversion disappears."
    )


def roofline_summary(df) -> Text:
    ok = ok_rows(df)
    best = ok.loc[ok["tflops"].idxmax()]
    worst = ok.loc[ok["tflops"].idxmin()]
    peak = first_value(df, "peak_tflops")
    text = (
        f"{where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}: the best shape, {best['shape']}, reaches "
        f"{best.tflops:.0f} TFLOP/s; the worst, {worst['shape']}, {worst.tflops:.0f} TFLOP/s."
    )
    if peak:
        text += (
            f" Against the datasheet peak of {peak:.0f} TFLOP/s that is {best.tflops / peak:.0%} at best, even for "
            "shapes whose intensity is past the ridge: these are small GEMMs that do not fill the tensor cores, "
            "and the roof is a bound, not a promise."
        )
    else:
        gpu = (getattr(df, "attrs", {}) or {}).get("gpu") or "this GPU"
        text += f" No roof is drawn: no ceilings known for {gpu} ({df['dtype'].iloc[0]}) in labkit.ceilings."
    return Text(text)


# ---- exercise checks --------------------------------------------------------------------------------


def precision_order(answer: Optional[Sequence[str]] = None, df=None) -> CheckResult:
    """Lesson 03: the dtypes ordered from most to least accurate by total error (vs float64 on the
    original data, ``rel_error_vs_fp64_inputs``) at the base spec."""
    df = ok_rows(frame_for(df, "precision"))
    truth = list(df.sort_values("rel_error_vs_fp64_inputs")["dtype"])
    if answer is None:
        return pending(
            f"Order {', '.join(truth and sorted(truth))} from most to least accurate (total error).",
            "the diamonds of the precision chart, bottom to top.",
        )
    if (
        isinstance(answer, str)
        or not isinstance(answer, (list, tuple))
        or not all(isinstance(x, str) for x in answer)
    ):
        raise InvalidSpec("answer", answer, f"must be a list of dtype names, e.g. {list(DTYPES)!r}")
    a = [x.strip().lower() for x in answer]
    if sorted(a) != sorted(truth):
        raise InvalidSpec("answer", answer, f"must list each of {', '.join(sorted(truth))} once")
    if a == truth:
        e = df.set_index("dtype")["rel_error_vs_fp64_inputs"]
        return say(
            True,
            f"{' < '.join(f'{d} ({e[d]:.1e})' for d in truth)}: the order follows how many bits the "
            "inputs keep; fp8's inputs lose the most before any arithmetic happens.",
        )
    right = sum(x == y for x, y in zip(a, truth))
    first_wrong = next(i for i, (x, y) in enumerate(zip(a, truth)) if x != y)
    return say(
        False,
        f"{right} of {len(truth)} in the right place; position {first_wrong + 1} ({a[first_wrong]}) is "
        "off. Compare the total-error diamonds, not the arithmetic-error circles.",
    )


def nhwc_speedup(answer=None, df=None) -> CheckResult:
    """Lesson 03: how many times faster is the convolution itself in NHWC than in NCHW (base
    spec, conversion excluded)? (within 10%)"""
    df = ok_rows(frame_for(df, "layout")).set_index("layout")
    truth = df.loc["NCHW", "conv_gpu_us"] / df.loc["NHWC", "conv_gpu_us"]
    if answer is None:
        return pending(
            "How many times faster is the NHWC convolution than the NCHW one (conversion excluded)?",
            "divide the two convolution (lower) bars.",
        )
    a = as_number(answer, "a ratio", 1.5)
    if is_close(a, truth, 0.10):
        return say(
            True,
            f"{fmt_us(df.loc['NCHW', 'conv_gpu_us'])} / {fmt_us(df.loc['NHWC', 'conv_gpu_us'])} = {truth:.2f}x: "
            "tensor cores want channels innermost; NCHW plans transpose first (in their workspace).",
        )
    if is_close(1 / a, truth, 0.10):
        return say(False, "inverted: NCHW time over NHWC time.")
    return say(
        False, f"{a:g}x is {'too high' if a > truth else 'too low'}; leave the conversion (upper bar) out."
    )


def nhwc_pays_off(answer: Optional[bool] = None, df=None) -> CheckResult:
    """Lesson 03: your tensors are NCHW. For this one convolution, is converting to NHWC, running
    there and converting back faster than running in NCHW? (True/False)"""
    df = ok_rows(frame_for(df, "layout")).set_index("layout")
    truth = bool(df.loc["NHWC", "end_to_end_us"] < df.loc["NCHW", "end_to_end_us"])
    if answer is None:
        return pending(
            "Does converting NCHW -> NHWC -> NCHW pay off for one convolution? (True/False)",
            "compare the full height of the two stacked bars.",
        )
    a = as_flag(answer, "does it pay off?")
    why = f"NHWC end to end {fmt_us(df.loc['NHWC', 'end_to_end_us'])} vs NCHW {fmt_us(df.loc['NCHW', 'end_to_end_us'])}"
    if a == truth:
        return say(
            True,
            why
            + (
                ": the conversion eats the gain; convert once per network, not per layer."
                if not truth
                else ": the faster convolution outweighs the conversion."
            ),
        )
    return say(False, "compare the whole stacked bars, conversion included.")


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, model, kwargs) calls in the recorded grid; ``quick``: the base calls only."""
    calls = [
        ("precision", dict(spec=BASE)),
        ("precision", dict(spec=BASE.replace(layout="NCHW"))),
        ("layout", dict(spec=BASE)),
        ("roofline", dict(dtype="fp16", layout="NHWC")),
    ]
    if quick:
        return calls
    for s in variants()[1:]:
        calls += [("precision", dict(spec=s)), ("layout", dict(spec=s))]
    calls.append(("layout", dict(spec=BASE.replace(dtype="fp32"))))
    for d, lay in (
        ("bf16", "NHWC"),
        ("fp16", "NCHW"),
        ("fp32", "NCHW"),
        ("tf32", "NHWC"),
        ("fp8_e4m3", "NHWC"),
    ):
        calls.append(("roofline", dict(dtype=d, layout=lay)))
    return calls


LESSON = "03"
CHARTS = {
    "precision": (precision_chart, 3, precision_summary),
    "layout": (layout_chart, 2, layout_summary),
    "roofline": (roofline_chart, 2, roofline_summary),
}
EXERCISES = (precision_order, nhwc_speedup, nhwc_pays_off)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "precision": spec_panel("precision", "Precision: error vs speed", SHAPE + ("layout", "direction"), BASE),
    "layout": spec_panel("layout", "NCHW vs NHWC", SHAPE + ("dtype", "direction"), BASE),
    "roofline": plain_panel(
        "roofline", "Roofline", dict(dtype="fp16", layout="NHWC", N=32), "fp16 NHWC, batch 32"
    ),
}
