"""Lesson 03's summaries: what the charts show, and why, in sentences made from the results (the
fp8 surprise from its plans and kernels, the NCHW plan kernel by kernel)."""

from __future__ import annotations

from typing import Optional

from ... import ceilings, env
from ...draw.plots import first_value, num, ok_rows, request_spec, shape_label
from ...draw.prose import Text, where
from ...draw.units import size_text, us_text
from ...errors import LabkitError
from ...spec import ConvSpec
from ...store import recordings
from .. import core
from ..core import BASE, as_spec, result
from .charts import sci

# ---- summaries --------------------------------------------------------------------------------


def _precision_at(spec: ConvSpec = BASE):
    return ok_rows(result("precision", spec=spec)).set_index("dtype")


def _spread(row) -> Optional[float]:
    """A row's p10-p90 spread over its median (a fraction), or None if not recorded."""
    lo, hi, mid = (num(row.get(k)) for k in ("gpu_us_p10", "gpu_us_p90", "gpu_us"))
    return (hi - lo) / mid if None not in (lo, hi, mid) and mid else None


def _times(a, b) -> str:
    """``1.6x slower`` / ``1.4x faster``: ``a`` against ``b`` (both times)."""
    return f"{max(a, b) / min(a, b):.1f}x {'slower' if a > b else 'faster'}"


def precision_summary(df) -> Text:
    """Time, throughput and both errors per dtype, and how far apart the fastest dtypes are.

    Args:
        df: `precision`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df).set_index("dtype")
    parts = [f"{where(df)}:"]
    for d, r in ok.iterrows():
        parts.append(
            f"**{d}** {us_text(r.gpu_us)} ({r.tflops:.0f} TFLOP/s), error {sci(r.rel_error)} from the "
            "arithmetic, "
            f"{sci(r.rel_error_vs_fp64_inputs)} in total;"
        )
    if "fp32" in ok.index and "fp16" in ok.index:
        parts.append(
            f"fp16 is {ok.loc['fp32', 'gpu_us'] / ok.loc['fp16', 'gpu_us']:.1f}x faster than true fp32."
        )
    if {"fp16", "bf16"} <= set(ok.index):
        a, b = ok.loc["fp16"], ok.loc["bf16"]
        gap = abs(a.gpu_us - b.gpu_us) / min(a.gpu_us, b.gpu_us)
        spreads = [s for s in (_spread(a), _spread(b)) if s is not None]
        noise = f" (their p10–p90 spreads: up to {max(spreads):.1%})" if spreads else ""
        others = [
            (
                abs(ok.loc[x, "gpu_us"] - ok.loc[y, "gpu_us"])
                / min(ok.loc[x, "gpu_us"], ok.loc[y, "gpu_us"]),
                x,
                y,
            )
            for i, x in enumerate(ok.index)
            for y in list(ok.index)[i + 1 :]
            if {x, y} != {"fp16", "bf16"}
        ]
        near = min(others) if others else None
        within = bool(spreads) and gap <= max(spreads)
        plans = "the same plan" if a.plan_name == b.plan_name else "different plans"
        verdict = ": within the noise" if within else ""
        pair = f"; the next closest pair, {near[1]} and {near[2]}, differ by {near[0]:.0%}" if near else ""
        parts.append(f"fp16 and bf16 run {plans} and differ by {gap:.1%}{noise}{verdict}{pair}.")
    if "fp8_e4m3" in ok.index:
        r = ok.loc["fp8_e4m3"]
        if "fp16" in ok.index:
            parts.append(
                f"fp8_e4m3's heuristic plan is {_times(r.gpu_us, ok.loc['fp16', 'gpu_us'])} than fp16's."
            )
        fp16 = f" (fp16: {sci(ok.loc['fp16', 'rel_error'])})" if "fp16" in ok.index else ""
        parts.append(
            f"fp8's arithmetic error is {sci(r.rel_error)}{fp16}, but its total error is "
            f"{r.rel_error_vs_fp64_inputs / r.rel_error:.0f}x that."
        )
    return Text(" ".join(parts))


#: what a kernel's name says about where it comes from (the first prefix that matches), as a predicate
KERNEL_ORIGINS = (
    ("cudnn_generated", "cuDNN generates and compiles at run time"),
    ("sm90_xmma", "is a precompiled, hand-tuned Hopper (sm90) kernel of cuDNN's library"),
    ("sm80_xmma", "is a precompiled Ampere (sm80) kernel of cuDNN's library"),
    ("cutlass", "is a precompiled CUTLASS kernel"),
    ("cudnn::engines_precompiled", "is a precompiled kernel of cuDNN's library"),
)


def kernel_origin(kernel: str) -> str:
    """Where a kernel comes from, as its name says (`KERNEL_ORIGINS`).

    Args:
        kernel: the kernel's name.

    Returns:
        The words; empty when the name says nothing.
    """
    return next((what for prefix, what in KERNEL_ORIGINS if kernel.startswith(prefix)), "")


def _short(kernel: str, chars: int = 46) -> str:
    return kernel if len(kernel) <= chars else kernel[:chars] + "…"


def _main_kernels(spec: ConvSpec) -> Optional[dict]:
    """plan name -> the main kernel it runs, from the `kernels` trace of ``spec``; None when there
    is no trace of it (a recording without one, or a GPU that cannot trace)."""
    try:
        df = ok_rows(result("kernels", spec=spec))
    except LabkitError:
        return None
    main = df[df["role"] == "main convolution"] if "role" in df.columns else df
    longest = main.sort_values("kernel_us", ascending=False).drop_duplicates("plan_name")
    return dict(zip(longest["plan_name"], longest["kernel"]))


def _traced_elsewhere(spec: ConvSpec) -> list:
    """Recorded mode: the other shipped recordings that hold a `kernels` trace of ``spec``."""
    if env.mode().live:
        return []
    here = recordings.current().path
    request = core.request_of("kernels", spec=spec)
    return [
        env.gpu_label(r.metadata.get("gpu"))
        for r in recordings.shipped()
        if r.path != here and r.has("kernels", request)
    ]


def fp8_vs_fp16(spec: ConvSpec = BASE) -> Text:
    """Why fp8_e4m3 is slower (or faster) than fp16 for ``spec``, from every plan cuDNN offers for
    each (`plans`: the heuristic's pick and the fastest) and, where traced, the kernel each plan
    runs (`kernels`).

    Args:
        spec: the convolution (its dtype is replaced by each of the two).

    Returns:
        Markdown text, every number and name from those results.
    """
    spec = as_spec(spec)
    fp8, fp16 = spec.replace(dtype="fp8_e4m3"), spec.replace(dtype="fp16")
    plans = {d: ok_rows(result("plans", spec=s)) for d, s in (("fp8_e4m3", fp8), ("fp16", fp16))}
    pick = {d: p[p["heuristic_pick"]].iloc[0] for d, p in plans.items()}
    best = {d: p.loc[p["gpu_us"].idxmin()] for d, p in plans.items()}
    kernels = {"fp8_e4m3": _main_kernels(fp8), "fp16": _main_kernels(fp16)}

    def ran(d, row) -> str:
        k = (kernels[d] or {}).get(row.plan_name)
        if not k:
            return f"plan `{row.plan_name}`"
        origin = kernel_origin(k)
        return (
            f"plan `{row.plan_name}`, whose kernel `{_short(k)}` {origin}"
            if origin
            else f"plan `{row.plan_name}` (kernel `{_short(k)}`)"
        )

    p8, p16 = pick["fp8_e4m3"], pick["fp16"]
    spreads = [s for s in (_spread(r) for r in (p8, p16, best["fp8_e4m3"], best["fp16"])) if s is not None]
    noise = f" (p10–p90 of each: within {max(spreads):.1%})" if spreads else ""
    text = [
        f"**fp8 against fp16, plan by plan** ({where(plans['fp16'])}, {shape_label(spec)}). cuDNN's "
        "heuristic runs fp16 "
        f"with {ran('fp16', p16)}: {us_text(p16.gpu_us)}. It runs fp8_e4m3 with {ran('fp8_e4m3', p8)}: "
        f"{us_text(p8.gpu_us)}, {_times(p8.gpu_us, p16.gpu_us)}{noise}."
    ]
    text.append(_timed_in_precision(spec, pick))
    k8 = kernels["fp8_e4m3"]
    if k8:
        gen = sum(1 for k in k8.values() if k.startswith("cudnn_generated"))
        if gen == len(k8):
            text.append(
                f"All {len(k8)} fp8 plans traced run kernels cuDNN generates at run time "
                "(`cudnn_generated_…`): "
                "no precompiled library kernel runs fp8 here."
            )
        elif gen:
            text.append(f"{gen} of the {len(k8)} fp8 plans traced run kernels cuDNN generates at run time.")
    else:
        other = _traced_elsewhere(fp8)
        text.append(
            f"This recording holds no kernel trace of fp8 ({', '.join(other)}'s does: pick it with "
            "`LABKIT_RECORDING`)."
            if other
            else "This recording holds no kernel trace of fp8."
        )
    b8, b16 = best["fp8_e4m3"], best["fp16"]
    n8 = len(plans["fp8_e4m3"])
    rank = int(b8.plan_index) + 1
    if b8.gpu_us > b16.gpu_us:
        text.append(
            f"Timing all {n8} fp8 plans does not change the verdict: the fastest, `{b8.plan_name}`, takes "
            f"{us_text(b8.gpu_us)}, still {_times(b8.gpu_us, b16.gpu_us)} than fp16's fastest "
            f"({us_text(b16.gpu_us)})."
        )
    else:
        text.append(
            f"Timing all {n8} fp8 plans does change it: `{b8.plan_name}` takes {us_text(b8.gpu_us)}, "
            f"{_times(b8.gpu_us, b16.gpu_us)} than fp16's fastest ({us_text(b16.gpu_us)}), but cuDNN's "
            "heuristics rank it "
            f"{_ordinal(rank)} of {n8}: only timing every plan (autotuning, lesson 05) finds it."
        )

    ceiling = ceilings.for_gpu((plans["fp16"].attrs or {}).get("gpu"))
    peaks = (ceiling.peak_tflops("fp8_e4m3"), ceiling.peak_tflops("fp16")) if ceiling else (None, None)
    if None not in peaks:
        text.append(
            f"The datasheet gives fp8 {peaks[0] / peaks[1]:.0f}x fp16's peak; a dtype is only as fast as "
            "the kernel "
            "cuDNN has for it at this shape."
        )
    return Text(" ".join(t for t in text if t))


def _timed_in_precision(spec: ConvSpec, pick: dict) -> str:
    """The precision chart's times of the heuristic's picks, where it ran the same plan: that chart
    and `fp8_vs_fp16` time one plan in two runs, so the sentence gives both times.

    Args:
        spec: the convolution.
        pick: dtype -> the heuristic's pick (a row of `plans`), for fp16 and fp8_e4m3.

    Returns:
        The sentence in brackets; empty when the precision chart is not at hand or ran other plans.
    """
    try:
        chart = _precision_at(spec.replace(dtype="fp16"))
    except LabkitError:
        return ""
    same = [
        (d, float(chart.loc[d, "gpu_us"]), float(pick[d].gpu_us))
        for d in ("fp16", "fp8_e4m3")
        if d in chart.index and chart.loc[d, "plan_name"] == pick[d].plan_name
    ]
    if not same:
        return ""
    times = ", ".join(f"{d} at {us_text(there)}" for d, there, _ in same)
    gap = max(abs(there - here) / here for _, there, here in same)
    plans, most = ("plan", "") if len(same) == 1 else ("plans", "up to ")
    return (
        f"(The precision chart timed the same {plans} in a run of its own: {times}; two measurements of one "
        f"plan differ by {most}{gap:.1%}.)"
    )


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def layout_summary(df) -> Text:
    """NCHW vs NHWC: the convolution in each, the conversion's cost, and whether converting pays off.

    Args:
        df: `layout`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df).set_index("layout")
    n, h = ok.loc["NCHW"], ok.loc["NHWC"]
    verdict = (
        "converting pays off even for one convolution"
        if h.end_to_end_us < n.end_to_end_us
        else "for a user whose tensors are NCHW, converting for one convolution does not pay off"
    )
    faster = (
        f"{n.conv_gpu_us / h.conv_gpu_us:.1f}x faster"
        if h.conv_gpu_us < n.conv_gpu_us
        else f"{h.conv_gpu_us / n.conv_gpu_us:.1f}x slower"
    )
    return Text(
        f"{where(df)}: the convolution takes {us_text(n.conv_gpu_us)} in NCHW (workspace "
        f"{size_text(n.workspace_bytes)}) "
        f"and {us_text(h.conv_gpu_us)} in NHWC (workspace {size_text(h.workspace_bytes)}): "
        f"{faster}. Converting NCHW tensors to NHWC and back costs "
        f"{us_text(h.convert_gpu_us)}: NHWC end to end is {us_text(h.end_to_end_us)}, and {verdict}. "
        "Keep the whole network in NHWC and the conversion disappears." + _timed_again(df, h)
    )


def _timed_again(df, nhwc) -> str:
    """The same NHWC plan as timed by the precision run of this spec, if at hand: how far apart two
    measurements of one plan are (the layout run records medians only)."""
    spec = request_spec(df)
    try:
        prec = result("precision", at_hand_only=True, spec=spec.replace(layout="NHWC")) if spec else None
    except LabkitError:
        return ""
    if prec is None:
        return ""
    rows = ok_rows(prec).set_index("dtype")
    if spec.dtype not in rows.index or rows.loc[spec.dtype, "plan_name"] != nhwc.plan_name:
        return ""
    again = rows.loc[spec.dtype, "gpu_us"]
    return (
        f" (The precision run timed the same NHWC plan at {us_text(again)}: two measurements of one plan "
        "differ "
        f"by {abs(again - nhwc.conv_gpu_us) / nhwc.conv_gpu_us:.1%}, the noise behind these ratios.)"
    )


def nchw_kernels(spec: ConvSpec = BASE) -> Text:
    """What the heuristic's NCHW plan of ``spec`` spends converting layouts (`kernels` trace), next to
    the conversion the layout chart measured (`layout`). It counts no kernels: lesson 10 asks the
    learner to predict how many the plan launches.

    Args:
        spec: the convolution (its layout is replaced by NCHW and NHWC).

    Returns:
        Markdown text from those results (a sentence saying so when this recording holds no trace).
    """
    spec = as_spec(spec)
    nchw = spec.replace(layout="NCHW")
    lay = ok_rows(result("layout", spec=spec)).set_index("layout")
    try:
        trace = ok_rows(result("kernels", spec=nchw))
    except LabkitError:
        return Text(f"This recording holds no kernel trace of {nchw.label}.")
    pick = lay.loc["NCHW", "plan_name"]
    rows = trace[trace["plan_name"] == pick]
    if rows.empty:
        rows = trace[trace["plan_index"] == trace["plan_index"].min()]

    def gpu_us(role: str) -> float:
        part = rows[rows["role"] == role]
        return float((part["kernel_us"] * part["launches_per_call"]).sum())

    convert, main = gpu_us("layout conversion"), gpu_us("main convolution")
    traced, workspace = where(trace), size_text(lay.loc["NCHW", "workspace_bytes"])
    if not convert:
        return Text(
            f"**Inside the NCHW plan** ({traced}): cuDNN's heuristic pick for NCHW, `{pick}`, asks a "
            f"workspace of {workspace} and converts no layout itself."
        )
    return Text(
        f"**Inside the NCHW plan** ({traced}): cuDNN's heuristic pick for NCHW, `{pick}`, asks a "
        f"workspace of {workspace}: it converts between the layouts around its tensor-core kernel. "
        f"Its own layout conversions take {us_text(convert)} a call together, beside {us_text(main)} of "
        "main convolution; the CuPy transpose-copies of the layout chart, "
        f"{us_text(lay.loc['NHWC', 'convert_gpu_us'])}: converting is cheap or dear depending on who "
        "does it. Lesson 10 traces the plan kernel by kernel."
    )


def roofline_summary(df) -> Text:
    """The best and worst shapes' throughput against the datasheet peak and the ridge point.

    Args:
        df: `roofline`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    best = ok.loc[ok["tflops"].idxmax()]
    worst = ok.loc[ok["tflops"].idxmin()]
    peak, bw = first_value(df, "peak_tflops"), first_value(df, "bandwidth_gb_s")
    text = (
        f"{where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}: the best shape, {best['shape']}, "
        "reaches "
        f"{best.tflops:.0f} TFLOP/s; the worst, {worst['shape']}, {worst.tflops:.0f} TFLOP/s."
    )
    if peak and bw:
        ridge = peak * 1e3 / bw
        past = ok[ok["intensity_flops_per_byte"] > ridge]
        text += f" Against the datasheet peak of {peak:.0f} TFLOP/s that is {best.tflops / peak:.0%} at best."
        if len(past):
            top = past.loc[past["tflops"].idxmax()]
            text += (
                f" {len(past)} of {len(ok)} shapes lie past the ridge ({ridge:.0f} FLOP/B), where only the "
                "compute roof "
                f"bounds them, and the best of those reaches {top.tflops / peak:.0%} of it: the roof is a "
                "bound, "
                "not a promise."
            )
    else:
        gpu = env.gpu_label((getattr(df, "attrs", {}) or {}).get("gpu"))
        text += f" No roof is drawn: no ceilings known for {gpu} ({df['dtype'].iloc[0]}) in labkit.ceilings."
    return Text(text)
