# ruff: noqa: E501  (sentences quoted from the lessons, verbatim)
"""Every sentence of a lesson that compares numbers holds on every shipped recording.

A lesson's prose (Markdown cells: text around charts, Recaps) states things the charts show. Each
sentence that compares measured numbers is either generated from the data when the cell runs (a
summary) or registered here with `claim`: its exact text, its lesson, and a check against a
recording. `test_claim_holds` runs every check on every shipped recording: a recording that
changes so that a sentence stops holding fails the test, and a claim that holds on one GPU and
not another must be rewritten to say when it holds.

`test_every_comparative_sentence_is_a_claim` reads every lesson's Markdown and finds sentences
with comparative words: each must be a registered claim or listed in `NOT_CLAIMS` (it compares
nothing measured: a definition, a rule, an instruction).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from labkit import experiments
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
LESSONS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
COMPARATIVE = re.compile(
    r"\b(faster|slower|fastest|slowest|more|less|fewer|larger|smaller|largest|smallest|higher|lower|"
    r"than|times|wins?|loses?|beats?|gains?|cheaper|costlier|idle|best|worst)\b|\d+(\.\d+)?\s*(x|%)",
    re.I,
)

#: (lesson, sentence, check) for every registered claim
CLAIMS: list = []


def claim(lesson: str, sentence: str):
    """Register ``check(recording) -> (holds, evidence)`` as the test of ``sentence`` in lesson
    ``lesson``'s Markdown (the sentence's exact words, whitespace aside)."""

    def register(check):
        CLAIMS.append((lesson, sentence, check))
        return check

    return register


def frame(rec, name, **kwargs):
    """Experiment ``name(**kwargs)`` answered from recording ``rec``."""
    return experiments.core.from_recording(name, rec, **kwargs)


# ---- the claims, by lesson (each checked on every shipped recording) -------------------------


# ---- lessons 05-07: plans, caps and build cost; the race; the lab ------------------------------------
def _plans_frames(rec):
    """(request, ok rows) of every recorded plans call in ``rec``."""
    return [(req, (lambda d: d[d.status == "ok"])(rec.lookup("plans", req))) for req in rec.requests("plans")]


@claim(
    "05",
    "Put two CUDA events around a single call and you time more than the convolution: the host's launch (Python, the frontend and the driver queue the kernels; for a short kernel that can take as long as the kernel itself), a GPU whose clocks may still be rising from idle, caches the first call has to fill (the kernel's code, the L2), and one draw from a spread you never see.",
)
def _launch_as_long_as_a_short_kernel(rec):
    df = frame(rec, "race_timeline", launch="python", streams=2)
    launch = float(df[(df.kind == "api") & (df.name == "cudaLaunchKernel")].dur_us.median())
    shortest = float(df[df.kind == "kernel"].groupby("role").dur_us.median().min())
    return launch >= shortest, f"median launch {launch:.1f} us, shortest kernel role median {shortest:.1f} us"


@claim(
    "05",
    "**Exercise 2 (explain).** Before you run the build-cost cells below: autotuning the base convolution pays for itself in fp32 NCHW, but far later or never in fp16 NHWC.",
)
def _autotune_pays_off_sooner_in_fp32(rec):
    base = experiments.BASE
    f32 = float(
        frame(
            rec, "build_cost", spec=base.replace(dtype="fp32", layout="NCHW")
        ).calls_to_pay_off_autotune.iloc[0]
    )
    f16 = float(frame(rec, "build_cost", spec=base).calls_to_pay_off_autotune.iloc[0])
    return f16 > 10 * f32, f"fp32 NCHW after {f32:,.0f} calls, fp16 NHWC after {f16:,.0f}"


@claim(
    "05",
    "* One convolution has dozens of plans, and the slowest runs more than ten times as long as the fastest.",
)
def _dozens_of_plans_ten_times_apart(rec):
    out = []
    for layout in ("NCHW", "NHWC"):
        ok = frame(rec, "plans", spec=experiments.BASE.replace(layout=layout))
        ok = ok[ok.status == "ok"]
        out.append((layout, len(ok), float(ok.gpu_us.max() / ok.gpu_us.min())))
    return all(n >= 24 and r > 10 for _, n, r in out), out


@claim(
    "05",
    "* The heuristic's pick is often within a few percent of the fastest plan, and not always the fastest: autotuning finds the fastest, at a price it recovers only over many calls.",
)
def _heuristic_close_not_always_best(rec):
    ratios = []
    for _, ok in _plans_frames(rec):
        h, b = ok[ok.heuristic_pick].gpu_us.iloc[0], ok[ok.best].gpu_us.iloc[0]
        ratios.append(float(h / b))
    calls = [
        float(v)
        for req in rec.requests("build_cost")
        for v in rec.lookup("build_cost", req).calls_to_pay_off_autotune[:1]
    ]
    close = sum(r <= 1.05 for r in ratios)
    holds = 2 * close >= len(ratios) and any(r > 1 for r in ratios) and all(c > 1000 for c in calls)
    return (
        holds,
        f"{close} of {len(ratios)} picks within 5%, worst {max(ratios):.2f}x; pay-off after {calls} calls",
    )


@claim("05", "A second measurement of the same plan can differ by more than its own spread.")
def _second_measurement_differs(rec):
    found = []
    for req in rec.requests("caps"):
        cp = rec.lookup("caps", req)
        unl = cp[(cp.cap_bytes == -1) & (cp.status == "ok")].iloc[0]
        ok = frame(rec, "plans", spec=experiments.core.ConvSpec.from_dict(req["spec"]))
        mine = ok[ok.plan_name == unl.best_plan].iloc[0]
        gap = abs(unl.gpu_us - mine.gpu_us) / mine.gpu_us
        spread = (mine.gpu_us_p90 - mine.gpu_us_p10) / mine.gpu_us
        found.append((req["spec"]["dtype"], req["spec"]["layout"], round(gap, 4), round(spread, 4)))
    return any(g > s for _, _, g, s in found), found


@claim(
    "05",
    "* Capping the workspace removes plans: below the fastest plan's need the cost can be large, at or above it nothing measurable.",
)
def _caps_cost_below_the_need_only(rec):
    from labkit.experiments import plans_autotune

    bad, large = [], []
    for req in rec.requests("caps"):
        cp = experiments.core.from_recording(
            "caps", rec, **{"spec": experiments.core.ConvSpec.from_dict(req["spec"])}
        )
        ok = cp[cp.status == "ok"]
        noise = plans_autotune.caps_noise(cp)
        need = int(ok[ok.cap_bytes == -1].workspace_bytes.iloc[0])
        for r in ok.itertuples():
            if (r.cap_bytes < 0 or r.cap_bytes >= need) and not noise.holds(r.slowdown_vs_unlimited):
                bad.append(
                    (req["spec"]["dtype"], req["spec"]["layout"], r.cap_bytes, r.slowdown_vs_unlimited)
                )
            if 0 <= r.cap_bytes < need and r.slowdown_vs_unlimited > 2:
                large.append(r.slowdown_vs_unlimited)
        fewer = ok[(ok.cap_bytes >= 0) & (ok.cap_bytes < need)]
        if (
            len(fewer)
            and not (fewer.plans_within_cap < ok[ok.cap_bytes == -1].plans_within_cap.iloc[0]).all()
        ):
            bad.append(("no plan removed", req["spec"]["dtype"], req["spec"]["layout"]))
    return not bad and bool(large), f"costs at or above the need: {bad}; large costs below it: {large}"


@claim(
    "05",
    "* Build once and cache the graph, and persist the autotuned choice: loading a saved plan takes about a millisecond, far less than building every plan and autotuning again.",
)
def _saved_plan_loads_in_a_millisecond(rec):
    out = []
    for req in rec.requests("build_cost"):
        s = rec.lookup("build_cost", req).set_index("stage").seconds
        load, cold = s["load the winner from disk"], s["build every plan"] + s["autotune (time every plan)"]
        out.append((round(load * 1e3, 3), round(cold / load)))
    return all(0.2 <= ms <= 3 and ratio >= 100 for ms, ratio in out), out


@claim(
    "06",
    "**Why Python launches can hide it.** Launching one convolution from Python costs the host longer than the convolution runs on the GPU, so by the time the second stream's kernels are launched, the first stream's have usually finished: the two rarely use the workspace at the same time.",
)
def _python_launch_outlasts_the_convolution(rec):
    df = frame(rec, "race_timeline", launch="python", streams=2)
    runs = int(df.runs.iloc[0])
    host = float(df[(df.kind == "api") & (df.name == "cudaLaunchKernel")].dur_us.sum()) / runs
    gpu = float(df[df.kind == "kernel"].dur_us.sum()) / runs
    race = frame(rec, "race", launch="python", streams=2, min_runs=1024)
    shared = race[race.scratchpad == "shared"].iloc[0]
    rare = shared.mismatches_bitwise <= 0.01 * shared.runs
    return (
        host > gpu and rare,
        f"host {host:.1f} us per convolution, GPU {gpu:.1f} us; python shared {shared.mismatches_bitwise} of {shared.runs}",
    )


@claim(
    "06", "* One scratchpad per stream, sized for the workspace its plans ask for, corrupted nothing here."
)
def _per_stream_scratchpad_corrupts_nothing(rec):
    rows = [
        (r.launch, r.streams, r.mismatches_bitwise)
        for req in rec.requests("race")
        for r in rec.lookup("race", req).itertuples()
        if r.scratchpad == "per-stream"
    ]
    return bool(rows) and all(m == 0 for *_, m in rows), rows


# ---- lesson 03 (precision and layout) ---------------------------------------------------------
def _precision_frames(rec):
    """(spec, ok rows by dtype) for every precision request in ``rec``."""
    from labkit.spec import ConvSpec

    out = []
    for req in rec.requests("precision"):
        df = rec.lookup("precision", req)
        out.append((ConvSpec.from_dict(req["spec"]), df[df.status == "ok"].set_index("dtype")))
    return out


@claim(
    "03",
    "* A dtype is as fast as the kernel cuDNN runs for it: fp16 and bf16 beat tf32, and tf32 beats true fp32, at every shape recorded here, while fp8's heuristic plan beats fp16's only on the smallest problems.",
)
def _dtype_speeds(rec):
    bad, wins, losses = [], [], []
    for spec, t in _precision_frames(rec):
        us = t.gpu_us
        if not max(us["fp16"], us["bf16"]) < us["tf32"] < us["fp32"]:
            bad.append(spec.label)
        (wins if us["fp8_e4m3"] < us["fp16"] else losses).append(spec.flops)
    smallest = bool(wins) and max(wins) < min(losses)
    return not bad and smallest, f"order broken at {bad}; fp8 wins at {wins} FLOP, loses at >= {min(losses)}"


@claim(
    "03",
    "* A dtype's error comes from two places, the arithmetic and the rounding of the inputs; for fp8 the second dominates.",
)
def _fp8_error_from_rounding(rec):
    t = frame(rec, "precision", spec=experiments.BASE).set_index("dtype")
    ratio = t.rel_error_vs_fp64_inputs["fp8_e4m3"] / t.rel_error["fp8_e4m3"]
    return ratio > 10, f"fp8 total / arithmetic error = {ratio:.0f}"


@claim(
    "03",
    "Look at the chart's right-hand plot: fp8's total error (diamond) is far above its arithmetic error (circle), while fp16's two sit close together.",
)
def _fp8_vs_fp16_error_gap(rec):
    t = frame(rec, "precision", spec=experiments.BASE).set_index("dtype")
    r = t.rel_error_vs_fp64_inputs / t.rel_error
    holds = r["fp8_e4m3"] > 10 and r["fp16"] < 2
    return holds, f"total/arithmetic: fp8 {r['fp8_e4m3']:.0f}, fp16 {r['fp16']:.2f}"


@claim(
    "03",
    "* In fp16 at the base shape, cuDNN's NCHW plan converts to NHWC and back around an NHWC kernel, in its workspace; converting per layer can eat the gain, so keep a network in one layout.",
)
def _nchw_plan_converts(rec):
    lay = frame(rec, "layout", spec=experiments.BASE).set_index("layout")
    k = frame(rec, "kernels", spec=experiments.BASE.replace(layout="NCHW"))
    run = list(k[k.plan_name == lay.plan_name["NCHW"]].sort_index().itertuples())
    roles = [r.role for r in run if r.role != "zeroing (memset)"]
    main = [r.kernel for r in run if r.role == "main convolution"]
    shape = roles == ["layout conversion", "main convolution", "layout conversion"] and "nhwc" in main[0]
    eats = lay.end_to_end_us["NHWC"] > lay.end_to_end_us["NCHW"]
    ws = lay.workspace_bytes["NCHW"] > 0
    return (
        shape and eats and ws,
        f"roles {roles}, main {main}, workspace {lay.workspace_bytes['NCHW']}, NHWC end to end {lay.end_to_end_us['NHWC']:.1f} vs NCHW {lay.end_to_end_us['NCHW']:.1f}",
    )


@claim(
    "03",
    "A point is named by its filter and the maps it writes: `3x3 @56` writes 56x56 maps, `/2` is a stride of 2, `ds` the 1x1 downsample on a block's shortcut and `conv1` the network's first layer; all run at batch 32 but `batch-1`.",
)
def _roofline_point_names(rec):
    shapes = experiments.precision_layout.runs.resnet50_shapes(32)
    wrong = []
    for name, spec in shapes:
        size, filt = re.search(r"@(\d+)", name), re.search(r"(\d+)x(\d+)", name)
        stride2 = spec.stride == (2, 2)
        if size and (spec.P, spec.Q) != (int(size[1]), int(size[1])):
            wrong.append((name, "maps", spec.P, spec.Q))
        if filt and (spec.R, spec.S) != (int(filt[1]), int(filt[2])):
            wrong.append((name, "filter", spec.R, spec.S))
        if ("/2" in name) != stride2 or ("ds" in name.split()) != (spec.R == 1 and stride2):
            wrong.append((name, "stride", spec.stride))
        if spec.N != (1 if name.startswith("batch-1") else 32):
            wrong.append((name, "batch", spec.N))
    recorded = set(frame(rec, "roofline")["shape"])
    named = {n for n, _ in shapes}
    return not wrong and recorded == named, (wrong, sorted(recorded ^ named))


# ---- lesson 04 (fusion) ------------------------------------------------------------------------
def _fusion_tables(rec):
    """(request, {(epilogue, path): row}) for every fusion request in ``rec``."""
    out = []
    for req in rec.requests("fusion"):
        df = rec.lookup("fusion", req)
        df = df[df.status == "ok"]
        out.append((req, {(r.epilogue, r.path): r for r in df.itertuples()}))
    return out


@claim("04", "* Fusion removes intermediate tensors: less memory allocated, less traffic, fewer kernels.")
def _fusion_removes(rec):
    bad = []
    for req, t in _fusion_tables(rec):
        for epi in {e for e, _ in t}:
            f, u = t[(epi, "fused")], t[(epi, "unfused")]
            ok = (
                f.intermediate_bytes == 0 < u.intermediate_bytes
                and f.allocated_bytes < u.allocated_bytes
                and f.modelled_hbm_bytes < u.modelled_hbm_bytes
                and f.kernels_per_call == "1 graph"
                and "elementwise" in u.kernels_per_call
            )
            if not ok:
                bad.append((req["spec"]["dtype"], req["spec"]["N"], epi))
    return not bad, f"not so at {bad}"


@claim("04", "* In fp16 the fused graph wins at every shape recorded here.")
def _fusion_wins_fp16(rec):
    bad = [
        (req["spec"], epi)
        for req, t in _fusion_tables(rec)
        if req["spec"]["dtype"] == "fp16"
        for epi in {e for e, _ in t}
        if t[(epi, "fused")].gpu_us >= t[(epi, "unfused")].gpu_us
    ]
    return not bad, f"fused loses at {bad}"


@claim(
    "04",
    "* A fused graph is only as fast as the plans cuDNN has for it: in fp32 the residual-add graph has a single plan, and it loses; autotune, in the precision you use, and measure before you trust fusion.",
)
def _fp32_residual_single_plan(rec):
    t = frame(rec, "fusion", spec=experiments.BASE.replace(dtype="fp32")).set_index(["epilogue", "path"])
    a, u = t.loc[("bias_relu_add", "fused, autotuned")], t.loc[("bias_relu_add", "unfused")]
    return (
        a.plans_timed == 1 and a.gpu_us > u.gpu_us,
        f"plans timed {a.plans_timed}, {a.gpu_us:.0f} vs {u.gpu_us:.0f} us",
    )


# ---- lesson 08: the same convolution on another GPU (both recordings side by side) -------------
def _compare(name, **kwargs):
    from labkit.present import compare

    df = compare.frames(name, **kwargs)
    return df, compare.ratios(df)


def _ceiling(rec_name):
    from labkit import ceilings

    return ceilings.for_gpu(recordings.named(rec_name).metadata["gpu"])


@claim(
    "08",
    "The H200 has HBM3e with more memory bandwidth, so its bandwidth roof sits higher and its ridge (where the two roofs meet) moves to a lower arithmetic intensity.",
)
def _h200_roof(rec):
    h100, h200 = _ceiling("h100-sxm"), _ceiling("h200")
    holds = (
        h200.bandwidth_bytes_per_s > h100.bandwidth_bytes_per_s
        and h200.ridge_intensity("fp16") < h100.ridge_intensity("fp16")
        and h200.peak_tflops("fp16") == h100.peak_tflops("fp16")
    )
    return holds, (h100, h200)


def _right_of_ridge():
    df, table = _compare("roofline")
    ridge = _ceiling(df.attrs["recordings"][0]).ridge_intensity("fp16")
    x = df.drop_duplicates("shape").set_index("shape")["intensity_flops_per_byte"]
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    return table[table["shape"].map(x) > ridge].set_index("shape")[col]


@claim("08", "Shapes right of the ridge run at the same speed on both GPUs, within a few percent")
def _right_same(rec):
    r = _right_of_ridge()
    return len(r) >= 2 and bool(((r - 1).abs() <= 0.03).all()), r.round(3).to_dict()


@claim("08", "A gain shows where a point runs close to the bandwidth roof.")
def _gain_at_roof(rec):
    df, table = _compare("roofline")
    base = df[df["recording"] == df.attrs["recordings"][0]].set_index("shape")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    gain = table.loc[table[col].idxmin(), "shape"]
    return gain == base["achieved_gb_s"].idxmax(), (gain, base["achieved_gb_s"].round(0).to_dict())


@claim(
    "08",
    "Left of the ridge is not enough: a shape far below both roofs (conv1, with its 3 input channels) is limited by something else, and more bandwidth leaves it where it was.",
)
def _conv1(rec):
    df, table = _compare("roofline")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    ratio = float(table.set_index("shape").loc["conv1 7x7/2", col])
    rows = df[df["shape"] == "conv1 7x7/2"]
    below = []
    for _, r in rows.iterrows():
        c = _ceiling(r["recording"])
        roof = min(c.peak_tflops("fp16"), r["intensity_flops_per_byte"] * c.bandwidth_bytes_per_s / 1e12)
        below.append(r["tflops"] < 0.5 * roof and r["intensity_flops_per_byte"] < c.ridge_intensity("fp16"))
    return all(below) and abs(ratio - 1) <= 0.03, (ratio, below)


def _precision_ranges():
    df, table = _compare("precision")
    t = table.set_index("dtype")
    other = df.attrs["recordings"][1]
    base = df.attrs["recordings"][0]
    low, high = t[f"ratio low {other}/{base}"], t[f"ratio high {other}/{base}"]
    same_plan = df.pivot(index="dtype", columns="recording", values="plan_name")
    return df, low, high, same_plan


@claim(
    "08",
    "The base convolution (batch 32, the precision chart) in fp32 and tf32 runs faster on the H200, while in fp16 and bf16 it runs at the same speed within their spread.",
)
def _wide_gain(rec):
    _, low, high, _ = _precision_ranges()
    holds = all(high[d] < 1 for d in ("fp32", "tf32")) and all(
        low[d] <= 1 <= high[d] for d in ("fp16", "bf16")
    )
    return holds, (low.round(3).to_dict(), high.round(3).to_dict())


@claim(
    "08",
    "for this small layer, the heuristic's fp8 plan runs slower than its fp16 plan on both GPUs, a plan of its own.",
)
def _fp8_slower(rec):
    df, _ = _compare("precision")
    t = df.set_index(["recording", "dtype"])
    holds = all(
        t.loc[(r, "fp8_e4m3"), "gpu_us"] > t.loc[(r, "fp16"), "gpu_us"]
        and t.loc[(r, "fp8_e4m3"), "plan_name"] != t.loc[(r, "fp16"), "plan_name"]
        for r in df.attrs["recordings"]
    )
    return holds, t[["gpu_us", "plan_name"]].to_dict()


@claim(
    "08",
    "Each experiment timed its calls in a run of its own: the sweep's N=32 point is the base call, on the same plan, that the precision chart further down times in fp16, so where their times differ, that is two measurements of one call.",
)
def _sweep_base_is_the_precision_call(rec):
    sweep, precision = frame(rec, "sweep", field="N"), frame(rec, "precision")
    base, spec = sweep.attrs["request"]["base"], precision.attrs["request"]["spec"]
    at32 = sweep[sweep["value"] == base["N"]].iloc[0]
    fp16 = precision[precision["dtype"] == "fp16"].iloc[0]
    holds = base["N"] == 32 and base == {**spec, "dtype": "fp16"} and at32.plan_name == fp16.plan_name
    return holds, (base, spec, at32.plan_name, fp16.plan_name, at32.gpu_us, fp16.gpu_us)


@claim("08", "The dtype changes the kernel cuDNN picks more than the peak.")
def _dtype_kernel(rec):
    holds, evidence = _fp8_slower(rec)
    c = _ceiling("h100-sxm")
    return holds and c.peak_tflops("fp8_e4m3") > c.peak_tflops("fp16"), evidence


@claim(
    "08",
    "A convolution gains where memory traffic holds it back: the low-intensity 1x1 shape, and the base convolution in fp32 (its plan reads and writes a workspace far larger than its tensors), tf32 (4-byte values) and fp8.",
)
def _recap_gains(rec):
    df, table = _compare("roofline")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    x = df.drop_duplicates("shape").set_index("shape")["intensity_flops_per_byte"]
    gain = table.loc[table[col].idxmin(), "shape"]
    pdf, low, high, _ = _precision_ranges()
    spec = experiments.BASE.replace(dtype="fp32")
    tensors = (
        spec.N * spec.C * spec.H * spec.W
        + spec.K * spec.C * spec.R * spec.S
        + spec.N * spec.K * spec.H * spec.W
    ) * 4
    ws = pdf[pdf["dtype"] == "fp32"]["workspace_bytes"]
    holds = (
        gain == "1x1 @56"
        and gain == x.idxmin()
        and all(high[d] < 1 for d in ("fp32", "tf32", "fp8_e4m3"))
        and bool((ws > 4 * tensors).all())
    )
    return holds, (gain, high.round(3).to_dict(), list(ws), tensors)


@claim(
    "08",
    "At the base convolution fp16 and bf16 run at the same speed within the spread of repeated timings, and the fp16 shapes right of the ridge within a few percent; other fp16 calls do gain, the most in the batch sweep at batch 64 and in the fused graphs for bias_relu_add, each on the same plan on both GPUs.",
)
def _recap_same(rec):
    _, low, high, _ = _precision_ranges()
    r = _right_of_ridge()
    holds = all(low[d] <= 1 <= high[d] for d in ("fp16", "bf16")) and bool(((r - 1).abs() <= 0.03).all())
    gains, plans = {}, {}
    for name, keys in (("sweep", ["value"]), ("fusion", ["epilogue", "path"])):
        df, table = _compare(name)
        col = [c for c in table.columns if c.startswith("ratio ")][0]
        row = table.loc[table[col].idxmin()]
        gains[name] = (row.get("value", row.get("epilogue")), round(float(row[col]), 2))
        mine = df[(df[keys] == row[keys]).all(axis=1)]
        plans[name] = set(mine.plan_name)
        holds = holds and set(df.dtype) == {"fp16"} and len(plans[name]) == 1
    holds = holds and [g[0] for g in gains.values()] == [64, "bias_relu_add"]
    holds = holds and all(g[1] < 0.95 for g in gains.values())  # beyond a few percent
    return holds, (low.round(3).to_dict(), high.round(3).to_dict(), r.round(3).to_dict(), gains, plans)


@claim(
    "08",
    "* Arithmetic intensity, from tensor sizes alone, says which layers a faster memory can help; where a point sits under its roof says whether it will.",
)
def _intensity_and_roof(rec):
    a, ev_a = _gain_at_roof(rec)
    b, ev_b = _conv1(rec)
    return a and b, (ev_a, ev_b)


@claim(
    "08",
    "* The heuristic's pick is the same on both; the autotuned best can swap between plans whose spreads overlap",
)
def _picks(rec):
    df, _ = _compare("plans")
    recs = df.attrs["recordings"]
    heur = {r: df[(df.recording == r) & df.heuristic_pick].plan_name.iloc[0] for r in recs}
    best = {r: df[(df.recording == r) & df.best].iloc[0] for r in recs}
    if best[recs[0]].plan_name == best[recs[1]].plan_name:
        return len(set(heur.values())) == 1, heur
    other = df[(df.recording == recs[1]) & (df.plan_name == best[recs[0]].plan_name)].iloc[0]
    overlap = other.gpu_us_p10 <= best[recs[1]].gpu_us_p90
    return len(set(heur.values())) == 1 and bool(overlap), (heur, other.gpu_us_p10, best[recs[1]].gpu_us_p90)


# ---- lesson 09: your network (the network reports of each recording) -------------------------
def _report(rec, net="resnet50"):
    from labkit.experiments.your_network import table_of

    df = frame(rec, "network_report", net=net, batch=32, dtype="fp16", layout="NHWC")
    return {t: table_of(df, t) for t in ("layers", "strategies", "timeline", "budget")}


@claim(
    "09",
    "A fixed arena here is sized for the network's largest workspace; a keyed cache evicts to stay within its budget, and here every workspace fits in either budget, so the two keyed caches do the same work.",
)
def _arena_and_caches(rec):
    r = _report(rec)
    s = r["strategies"].set_index("strategy")
    largest = r["layers"]["fastest_workspace_bytes"].max()
    k = s[s.index.str.startswith("keyed_cache")]
    holds = (
        abs(s.loc[s.index.str.startswith("fixed_arena")].peak_workspace_bytes.iloc[0] - largest)
        <= 0.01 * largest
        and len(k) == 2
        and k["peak_workspace_bytes"].nunique() == 1
        and (k["fallbacks_per_pass"] == 0).all()
        and k["alloc_calls_first_pass"].nunique() == 1
        and k["peak_workspace_bytes"].max() <= 32 * 2**20
    )
    return holds, s[["peak_workspace_bytes", "fallbacks_per_pass", "alloc_calls_first_pass"]].to_dict()


@claim(
    "09",
    "The check names a leak, a workspace too small, a race and a pass timed over one call, and sets your pass beside the report's strategies on the same layers, its fixed arena sized as the report sizes it: for the largest workspace of the pass.",
)
def _handson_arena_as_the_reports(rec):
    from labkit.experiments.your_network.handson import report_strategies, three_layers
    from labkit.experiments.your_network.request import REPORT_STRATEGIES
    from labkit.gpu.workspaces.labels import label

    r = _report(rec)
    layers, s = r["layers"], r["strategies"]
    largest = int(layers.iloc[: len(three_layers())].fastest_workspace_bytes.max())
    made = report_strategies(largest)
    arena = dict(made)["fixed_arena"]
    drawn = s[s.strategy.str.startswith("fixed_arena")].strategy.iloc[0]
    holds = (
        [n for n, _ in made] == [n for _, n, _ in REPORT_STRATEGIES]
        and arena == {"size_bytes": largest}
        and label("fixed_arena", **arena) == drawn
    )
    return holds, (largest, arena, drawn)


@claim(
    "09",
    "`async_pool` holds more workspace than any call of ResNet-50 asks for, from its first workspace until after the pass.",
)
def _async_holds(rec):
    r = _report(rec)
    p = r["strategies"].set_index("strategy").loc["async_pool"]
    line = r["timeline"][r["timeline"]["strategy"] == "async_pool"]["held_bytes"]
    held = line[line > 0]
    holds = (
        p["peak_workspace_bytes"] > r["layers"]["fastest_workspace_bytes"].max()
        and p["held_after_bytes"] == p["peak_workspace_bytes"]
        and held.nunique() == 1
    )
    return holds, (p["peak_workspace_bytes"], p["held_after_bytes"], list(held.unique()))


@claim(
    "09",
    "The depthwise networks (MobileNetV2, ConvNeXt) and the DeepLabV3 head get their fastest plans with a few bytes or kilobytes of workspace; VGG16 and the ResNets ask for megabytes.",
)
def _small_and_large(rec):
    most = {
        net: float(_report(rec, net)["layers"]["fastest_workspace_bytes"].max())
        for net in ("mobilenet_v2", "convnext_tiny", "deeplabv3_aspp", "vgg16", "resnet50", "resnext50_32x4d")
    }
    holds = all(most[n] < 2**20 for n in ("mobilenet_v2", "convnext_tiny", "deeplabv3_aspp")) and all(
        most[n] >= 2**20 for n in ("vgg16", "resnet50", "resnext50_32x4d")
    )
    return holds, most


@claim(
    "09",
    "Once Exercise 4 has an answer, the panel below opens on VGG16, where the timeline's lines part ways at its largest workspaces: the fixed arena holds its size from the first call, the caches and CuPy's pool grow when the large layers come and keep it, `async_pool` holds its chunk from its first workspace on, and `malloc_per_call` gives it back after each call.",
)
def _vgg16_timeline(rec):
    r = _report(rec, "vgg16")
    layers, t = r["layers"], r["timeline"]
    n = len(layers)
    big = layers[layers["fastest_workspace_bytes"] == layers["fastest_workspace_bytes"].max()]["order"]
    first_big = int(big.min())
    line = {k: sub.sort_values("step") for k, sub in t.groupby("strategy")}

    def at(k, step):
        return float(line[k][line[k]["step"] == step]["held_bytes"].iloc[0])

    def after(k):
        return float(line[k]["held_after_bytes"].iloc[-1])

    peak = {k: float(v["held_bytes"].max()) for k, v in line.items()}
    grows = [k for k in line if k.startswith(("preallocated", "keyed_cache", "cupy_pool"))]
    arena = next(k for k in line if k.startswith("fixed_arena"))
    pool = line["async_pool"]["held_bytes"]
    holds = (
        len(grows) == 4
        and at(arena, 0) == peak[arena]
        and all(at(k, 0) < peak[k] and at(k, first_big) == peak[k] and after(k) == peak[k] for k in grows)
        and pool[pool > 0].nunique() == 1
        and after("async_pool") == peak["async_pool"]
        and after("malloc_per_call") == 0
        and at("malloc_per_call", first_big) == peak["malloc_per_call"]
    )
    return holds, (first_big, n, peak)


# ---- lesson 10: under the hood (the traces of each recording) ----------------------------------
def _timeline(rec):
    df = frame(rec, "strategy_timeline", workload="one_conv", calls=8)
    s = df.drop_duplicates("strategy").set_index("strategy")
    return df, s[s.status == "ok"]


@claim(
    "03",
    "**Exercise 4 (predict).** Lesson 00's [layout chart](00_start_here.ipynb#A-chart-from-the-table) showed that at batch 32, converting NCHW tensors to NHWC and back costs more than the faster convolution saves.",
)
def _converting_does_not_pay_at_batch_32(rec):
    t = frame(rec, "layout", spec=experiments.BASE).set_index("layout")
    nchw, nhwc = float(t.loc["NCHW", "end_to_end_us"]), float(t.loc["NHWC", "end_to_end_us"])
    faster = float(t.loc["NHWC", "conv_gpu_us"]) < float(t.loc["NCHW", "conv_gpu_us"])
    return experiments.BASE.N == 32 and faster and nhwc > nchw, (nchw, nhwc)


@claim(
    "10",
    "Every runnable plan of the base convolution, each run 3 times under the tracer; the chart draws the fastest (its detail line says how many), the summary under it counts them all.",
)
def _traced_calls(rec):
    from labkit.experiments import under_the_hood

    k = frame(rec, "kernels", spec=experiments.BASE)
    plans = k[k.status == "ok"].plan_name.nunique()
    summary = str(under_the_hood.summaries.kernels_summary(k))
    drawn = {y for t in experiments.CHARTS["kernels"](k).data for y in (t.y or ())}
    holds = (
        under_the_hood.TRACED_CALLS == 3 and f"{plans} plans traced" in summary and 0 < len(drawn) <= plans
    )
    return holds, (under_the_hood.TRACED_CALLS, plans, len(drawn))


@claim(
    "10",
    "The strategy that idles longest does so for a reason its host lane shows (Exercise 3's answer says which). But no GPU lane is free of gaps.",
)
def _no_lane_free(rec):
    df, s = _timeline(rec)
    malloc = s.index[s.index.str.startswith("malloc_per_call")][0]
    frees = df[(df.strategy == malloc) & df.name.str.contains("free", case=False, na=False)]
    holds = (
        bool((s.idle_share_api > 0.05).all())
        and s.idle_share_api.idxmax() == malloc
        and len(frees) >= int(s.loc[malloc, "calls"])
    )
    return holds, (s.idle_share_api.round(3).to_dict(), len(frees))


@claim(
    "10",
    "* A strategy's cost is visible in a trace: the strategy that leaves the GPU idle longest shows why in its host lane, a call there that waits for the GPU on every call (Exercise 3's answer names both).",
)
def _malloc_idlest(rec):
    _, s = _timeline(rec)
    holds = str(s.idle_share_api.idxmax()).startswith("malloc_per_call") and str(
        s.idle_share.idxmax()
    ).startswith("malloc_per_call")
    return holds, (s.idle_share_api.round(3).to_dict(), s.idle_share.round(3).to_dict())


@claim(
    "10",
    "But in this lesson's passes a Python loop that launches one call at a time leaves gaps under every strategy: timed untraced between the traces, the host took about as long to launch each call as the GPU took to run it, or longer.",
)
def _python_gaps(rec):
    _, s = _timeline(rec)
    holds = bool(
        (s.idle_share > 0.05).all() and (s.host_us >= 0.95 * s.busy_us).all() and (s.gpu_us > s.busy_us).all()
    )
    return holds, s[["idle_share", "host_us", "busy_us", "gpu_us"]].round(3).to_dict()


@claim(
    "10",
    "Lesson 02, timing each call alone with no tracer attached, saw the host launch the same call faster than these kernels run (fixed_arena's median call; the timeline's summary gives both).",
)
def _lesson_02_host_outran(rec):
    from labkit.experiments import under_the_hood
    from labkit.gpu.workspaces.workloads import ONE_CONV

    df, s = _timeline(rec)
    arena = s.loc[s.index.str.startswith("fixed_arena")].iloc[0]
    one = _strategies(rec, "one_conv").set_index("name").loc["fixed_arena"]
    summary = str(under_the_hood.summaries.strategy_timeline_summary(df))
    same_call = set(df.workload) == {"one_conv"} and ONE_CONV == experiments.BASE.replace(layout="NCHW")
    holds = same_call and one.median_us < arena.busy_us / arena.calls and "Lesson 02 timed" in summary
    return holds, (one.median_us, arena.busy_us / arena.calls)


@claim(
    "10",
    "The trace shows the cause: with CUDA graph launches the two streams' kernels run at the same time, both using the one workspace (the shaded bands).",
)
def _graph_overlap(rec):
    r = frame(rec, "race_timeline", launch="graph", streams=2).iloc[0]
    return r.overlap_us > 0 and r.corrupted > 0, (r.overlap_us, r.corrupted)


def test_race_bands_add_up_to_the_overlap_stated():
    """The race chart's shaded bands, its detail line, its summary and Exercise 4 give one overlap:
    the bands' widths add up to the number the detail line and the summary state, on every round of
    every recording (joined bands would draw kernel boundaries as overlap)."""
    from labkit.draw.units import us_text
    from labkit.experiments import under_the_hood

    for rec in recordings.shipped():
        for launch in ("graph", "python"):
            df = frame(rec, "race_timeline", launch=launch, streams=2)
            fig = experiments.CHARTS["race_timeline"](df)
            drawn = sum(b.x1 - b.x0 for b in fig.layout.shapes)
            stated = us_text(df.overlap_us.iloc[0])
            # the bands span stream 1's and stream 2's lanes, not the host's
            assert list(fig.layout.yaxis.categoryarray[:2]) == ["stream 1", "stream 2"], rec.name
            assert fig.layout.yaxis.categoryarray[-1] == "host", rec.name
            assert all((b.yref, b.y0, b.y1) == ("y", -0.5, 1.5) for b in fig.layout.shapes), rec.name
            assert abs(drawn - df.overlap_us.iloc[0]) < 0.01, (rec.name, launch, drawn, stated)
            title = fig.layout.title.text.replace("<br>", " ")
            assert f"overlap of stream 1 and 2: {stated}" in title, (rec.name, launch)
            summary = str(under_the_hood.summaries.race_timeline_summary(df))
            assert f"at the same time for {stated}" in summary, (rec.name, launch, summary)
            if drawn:
                assert stated in str(fig.layout.annotations[-1].text).replace("<br>", " "), (rec.name, launch)


@claim(
    "10",
    "* A shared workspace is wrong exactly when two streams' kernels overlap: graph launches make them overlap; with Python launches it depends on the host's timing, and a run that misses it proves nothing.",
)
def _overlap_exactly(rec):
    rows = [frame(rec, "race_timeline", launch=launch, streams=2).iloc[0] for launch in ("graph", "python")]
    holds = rows[0].overlap_us > 0 and all((r.overlap_us > 0) == (r.corrupted > 0) for r in rows)
    return holds, [(r.launch, r.overlap_us, r.corrupted) for r in rows]


# -- lessons 00-02 --
def test_the_sweep_base_point_says_which_run_it_is():
    """Lesson 01's sweep panel times its base point in each sweep's own run: the summary gives this
    run's value beside the same convolution's in the other sweeps and the layout table, on every
    recording (the same point reads differently as the swept field changes)."""
    from labkit.draw.plots import fmt_us
    from labkit.experiments.workspace_basics import summaries
    from labkit.experiments.workspace_basics.runs import SWEEP_BASE, SWEEP_VALUES

    for rec in recordings.shipped():
        points = {}
        for field in ("N", "C=K"):
            df = frame(rec, "sweep", field=field, values=SWEEP_VALUES[field], base=SWEEP_BASE)
            points[field] = summaries._base_point(df, SWEEP_BASE)[0]
        for field, other in (("N", "C=K"), ("C=K", "N")):
            df = frame(rec, "sweep", field=field, values=SWEEP_VALUES[field], base=SWEEP_BASE)
            text = str(summaries.sweep_summary(df))
            assert f"reads {fmt_us(points[field])} in this sweep's run" in text, (rec.name, field, text)
            assert f"{fmt_us(points[other])} in the {other} sweep" in text, (rec.name, field, text)
            assert "in the layout table" in text, (rec.name, field, text)


def _fp32_base():
    return experiments.BASE.replace(dtype="fp32")


@claim("00", "NHWC, the faster layout in fp16, becomes the slower one.")
def _layout_swaps_in_fp32(rec):
    half = frame(rec, "layout").set_index("layout").conv_gpu_us
    full = frame(rec, "layout", spec=_fp32_base()).set_index("layout").conv_gpu_us
    return half["NHWC"] < half["NCHW"] and full["NHWC"] > full["NCHW"], (dict(half), dict(full))


@claim(
    "01",
    "* Workspace buys time: the fastest plan of the base convolution in fp16 NCHW needs one, and the fastest plan that needs none is slower (the summary under the algorithm table gives the factor, from replay medians, not from Find's single runs); lesson 05 measures what refusing a workspace costs.",
)
def _workspace_buys_time(rec):
    df = frame(rec, "plans", spec=experiments.BASE.replace(layout="NCHW"))
    ok = df[df.status == "ok"]
    fast = ok.loc[ok.gpu_us.idxmin()]
    none = ok[ok.workspace_bytes == 0]
    best_none = none.loc[none.gpu_us.idxmin()]
    apart = best_none.gpu_us_p10 > fast.gpu_us_p90  # beyond both spreads
    return fast.workspace_bytes > 0 and apart, (
        fast.plan_name,
        fast.gpu_us,
        best_none.plan_name,
        best_none.gpu_us,
    )


def _strategies(rec, workload):
    df = frame(rec, "strategies", workload=workload, repeats=20)
    return df.assign(name=df.strategy.str.split(" ").str[0])


@claim("02", "each call's free stalls the host until the convolution it just launched is done")
def _malloc_idles_the_gpu(rec):
    df = _strategies(rec, "one_conv").set_index("name")
    m, a = df.loc["malloc_per_call"], df.loc["fixed_arena"]
    holds = m.gpu_us > 1.5 * a.gpu_us and m.strategy_us_per_call > 50 * a.strategy_us_per_call
    return holds, (m.gpu_us, a.gpu_us, m.strategy_us_per_call, a.strategy_us_per_call)


@claim(
    "02",
    "A strategy that cannot get the workspace the heuristic plan wants falls back to a plan that needs less",
)
def _pressure_fallbacks(rec):
    df = _strategies(rec, "pressure")
    fell = set(df[df.fallbacks > 0].name)
    return fell == set(df.name) - {"fixed_arena"}, sorted(fell)


@claim("02", "Under memory pressure, `cupy_pool` takes far longer per call than every other strategy.")
def _pool_under_pressure(rec):
    df = _strategies(rec, "pressure").set_index("strategy")
    pool = df[df.name == "cupy_pool"].median_us.iloc[0]
    rest = df[df.name != "cupy_pool"].median_us.max()
    return pool > 10 * rest, (pool, rest)


@claim("02", "One strategy runs some of its calls with a smaller plan than the heuristic's.")
def _one_falls_back_on_growing_batch(rec):
    df = frame(rec, "strategies", workload="growing_batch", repeats=20)
    return int((df.fallbacks > 0).sum()) == 1, list(df[df.fallbacks > 0].strategy)


def strategy_names() -> list:
    """The names of `labkit.gpu.workspaces.workspace.STRATEGIES`."""
    from labkit.gpu.workspaces import workspace

    return list(workspace.STRATEGIES)


#: how the prose spells a count
COUNT_WORDS = {5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


@claim(
    "02",
    "The charts below run all seven, `keyed_cache` at two byte budgets (256 MiB and 32 MiB), so they have eight rows.",
)
def _seven_strategies_eight_rows(rec):
    from labkit.gpu.workspaces import workloads

    names = strategy_names()
    bench = [n for n, _ in workloads.BENCH_STRATEGIES]
    budgets = sorted(o["budget_bytes"] >> 20 for n, o in workloads.BENCH_STRATEGIES if n == "keyed_cache")
    rows = {len(frame(rec, "strategies", **req)) for req in rec.requests("strategies")}
    holds = (
        COUNT_WORDS[len(names)] == "seven"
        and set(bench) == set(names)
        and budgets == [32, 256]
        and COUNT_WORDS[len(bench)] == "eight"
        and rows == {len(bench)}
    )
    return holds, dict(strategies=names, bench=bench, budgets_mib=budgets, rows=rows)


def test_the_strategy_count_is_said_alike_everywhere():
    """README, the package description, lesson 02, the benchmark page and its generator give the
    number of strategies of `labkit.gpu.workspaces.workspace.STRATEGIES`, in the same word; none gives another."""
    word = COUNT_WORDS[len(strategy_names())]
    places = {
        "README.md": ROOT / "README.md",
        "pyproject.toml": ROOT / "pyproject.toml",
        "lesson 02": LESSONS["02"],
        "docs/benchmarks.md": ROOT / "docs" / "benchmarks.md",
        "bench_summary": ROOT / "labkit" / "cli" / "bench_summary.py",
    }
    counted = re.compile(
        r"\b(" + "|".join(COUNT_WORDS.values()) + r")\b(?:\W+\w+){0,2}?\W+(?:strateg|side by side)", re.I
    )
    for where, path in places.items():
        said = {m.group(1).lower() for m in counted.finditer(path.read_text())}
        assert said == {word}, f"{where} counts the strategies as {sorted(said)}, the code has {word}"


@claim(
    "02",
    "A mean counts a strategy's slowest calls in full and a median does not, so where calls vary widely the mean time inside get/put can exceed the median host time that includes it; the chart says so under its times where it happens.",
)
def _mean_above_median_is_said_on_the_chart(rec):
    from labkit.experiments.workspace_strategies.charts import mean_above_median

    seen, wrong = [], []
    for req in rec.requests("strategies"):
        df = frame(rec, "strategies", **req)
        fig = experiments.CHARTS["strategies"](df)
        notes = " ".join(str(a.text) for a in fig.layout.annotations if a.name == "time-note")
        above = df[(df.status == "ok") & (df.strategy_us_per_call > df.median_us)]
        for r in above.itertuples():
            seen.append((req["workload"], r.strategy))
            if r.strategy not in notes:
                wrong.append((req["workload"], r.strategy))
        if len(above) == 0 and (notes or mean_above_median(df)):
            wrong.append((req["workload"], "a note where no mean exceeds its median"))
    return bool(seen) and not wrong, dict(seen=seen, wrong=wrong)


# ---- lesson 11: PyTorch's switches (the torch_knobs rows of each recording) -----------------------
def _knobs(rec, net=None):
    """The PyTorch rows that ran, and the labkit rows, of the torch_knobs call the lesson shows with
    ``rec`` in use."""
    from labkit.experiments.pytorch_knobs import KNOBS_SPEC

    df = frame(rec, "torch_knobs", spec=KNOBS_SPEC, net=net)
    ok = df[df.status == "ok"]
    return ok[ok.source == "pytorch"].set_index("setting"), ok[ok.source == "labkit"].set_index("setting")


@claim(
    "11",
    "* PyTorch's peak memory holds the output and the plan's workspace, and the first call of a shape can peak far "
    "higher (benchmark's did): size memory from the first call, not from a steady one.",
)
def _peaks_hold_output_and_workspace(rec):
    pt, lab = _knobs(rec)
    base = pt.loc["PyTorch's defaults"]
    twin = lab.loc[base.labkit_row]
    holds = abs(base.steady_peak_bytes - base.out_bytes - twin.workspace_bytes) < 2**20
    rows = pd.concat([pt, _knobs(rec, "resnet50")[0]])
    first_not_lower = bool((rows.first_peak_bytes >= rows.steady_peak_bytes - 2**20).all())
    bench = pt.loc["benchmark=True"]
    far = bool(bench.first_peak_bytes > 2 * bench.steady_peak_bytes)
    return holds and first_not_lower and far, dict(
        steady=base.steady_peak_bytes,
        out=base.out_bytes,
        workspace=twin.workspace_bytes,
        first_ge=first_not_lower,
    )


@claim(
    "11",
    "**Exercise 2 (explain).** With `benchmark=True`, the first call peaks far above the steady calls.",
)
def _benchmark_first_call_peaks_far_above_steady(rec):
    bench = _knobs(rec)[0].loc["benchmark=True"]
    return bool(bench.first_peak_bytes > 2 * bench.steady_peak_bytes), dict(
        first=bench.first_peak_bytes, steady=bench.steady_peak_bytes
    )


# ---- the premises of the worked-out exercises (a model's assumption that the data must bear) ------------
@claim(
    "02",
    "**Exercise 2 (explain, worked out).** Both strategies run the same kernels, and fixed_arena's host launches a call faster than its GPU runs one, so its GPU does not wait for the host: take its GPU wall time per call as the kernels' own (any gaps between its kernels count as busy, so the share you find is a lower bound).",
)
def _arena_host_outruns_its_gpu(rec):
    a = _strategies(rec, "one_conv").set_index("name").loc["fixed_arena"]
    return (
        a.median_us < a.gpu_us,
        f"fixed_arena host {a.median_us:.1f} us, GPU wall {a.gpu_us:.1f} us per call",
    )


@claim(
    "04",
    "The unfused bias_relu path moves more bytes through HBM than the fused graph (`modelled_hbm_bytes` above).",
)
def _unfused_moves_more(rec):
    df = frame(rec, "fusion", spec=experiments.BASE)
    s = df[(df.status == "ok") & (df.epilogue == "bias_relu")].set_index("path").modelled_hbm_bytes
    return s["unfused"] > s["fused"], dict(s)


@claim(
    "09",
    "**Exercise 2 (explain, worked out).** Now exactly, for the tightest cap: with no workspace at all (a 0 B cap), every call whose fastest plan needs a workspace runs its smallest-workspace plan instead (`smallest_gpu_us`; each of those needs none here), and the others keep their fastest.",
)
def _smallest_plans_need_none(rec):
    layers = _report(rec)["layers"]
    needs = layers[layers.fastest_workspace_bytes > 0]
    return bool((needs.smallest_workspace_bytes == 0).all()), sorted(set(needs.smallest_workspace_bytes))


#: (lesson, sentence) pairs with comparative words that compare nothing measured
NOT_CLAIMS: set = {
    # a definition: when autotuning repays its cost, not a measured comparison
    (
        "00",
        "It costs time once, and repays it a little on every later call when it finds a plan faster than the heuristic's pick.",
    ),
    # what the chart and its summary show; the summary's own sentence is computed
    (
        "10",
        "The left panel stacks each plan's GPU time by what its kernels do, its total written at the end; the right panel is the host time to launch one call (measured untraced before the trace, but with CUPTI attached to the process, as a mean over calls launched back to back: for the call lesson 02 times, the summary sets the two side by side), written with the number of kernels.",
    ),
    # a rule for reading the chart; the checklist's sentence applies it (test_checklist_claims.py)
    (
        "09",
        "Precision and layout time the network's heuristic plans again: autotune's label sets that second timing of the heuristic's pass beside the report's, and a gain smaller than the difference between the two is within the noise of one measurement.",
    ),
    (
        "11",
        "The labkit side times its plan by CUDA-graph replay, as every lesson does, so it counts no launch time.",
    ),
    (
        "11",
        "A 3x3 convolution of 256 channels on 56x56 images at batch 32, fp32 and NCHW: what a model nobody tuned runs.",
    ),
    (
        "11",
        "**Exercise 1 (predict).** Before the chart: will `torch.backends.cudnn.benchmark = True` make a steady call of this convolution faster than PyTorch's defaults, beyond the spread of their timings?",
    ),
    (
        "11",
        "How many times the defaults' first forward pass did the first forward pass take with `benchmark=True`?",
    ),
    (  # how the chart is drawn: which bars carry their size
        "05",
        'Every plan is one point, ordered by its GPU time (the bar through it: the 10th to 90th percentile of its timed replays, whose count its hover gives); under it, the workspace the same plan needs, its size written on the largest bar and on those too short to read ("0 MiB": none).',
    ),
    (  # lesson 00's glossary: definitions
        "00",
        '* <a id="autotune"></a>**autotune**: running and timing every plan of a graph on the GPU and keeping the fastest, as `torch.backends.cudnn.benchmark = True` does.',
    ),
    (
        "00",
        '* <a id="fallback"></a>**fallback**: running another plan, one that needs less workspace, when the workspace the chosen plan asks for cannot be had (memory is short, or a cap or an arena is smaller).',
    ),
    (  # questions: test_exercises checks their answers on every recording
        "02",
        "From the two GPU wall times per call in the summary, what share of malloc_per_call's did the GPU sit idle, in percent?",
    ),
    (
        "03",
        "Convert them to NHWC once, run a chain of L convolutions like the base one (batch 32: lesson 00's layout chart, or the panel above with N at 32) in NHWC, convert the result back once: from how many layers on does that beat running every layer in NCHW?",
    ),
    (
        "06",
        "On 4 streams (the panel's `graph 4`), how many bytes more does one scratchpad per stream hold than one scratchpad shared by all?",
    ),
    (  # a model the exercise defines, and its question
        "08",
        "**Exercise 2 (explain, worked out).** Model the 1x1 @56 convolution's time on each GPU as a fixed part plus a part that moves bytes at the GPU's bandwidth: t = F + M / bandwidth, with the same F and M on both.",
    ),
    (
        "08",
        "From its two times (written under its points in the chart above, and in the summary under it) and the two datasheet bandwidths (the ceilings table), how many microseconds of its H100 time is the bandwidth part, M / bandwidth?",
    ),
    (  # a question: test_exercises checks its answer on every recording
        "06",
        "**Exercise 3 (explore).** Before you set the race panel to `graph 4`: with CUDA graphs on 4 streams sharing one scratchpad, will more, fewer or about the same number of outputs be corrupted as on 2 streams?",
    ),
    (  # an instruction: what to compare, not a comparison
        "05",
        "Set the plans panel to fp32 NCHW, then to fp16 NHWC, and compare the heuristic pick's time with the fastest plan's (hover them).",
    ),
    (  # what the code does: test_lessons_05_07 ties the margin (stops.FINAL_MARGIN) and the rounds to
        # autotune's constants
        "05",
        "Before it picks, autotune times the plans within 3% of the fastest again, in full, in turns, for three rounds: two plans a few per cent apart are told apart by alternating measurements, not by one timing each.",
    ),
    (
        "00",
        "Ask for something that was not recorded (in recorded mode) and the panel says so, names the nearest recorded values and empties the chart: a chart never shows numbers measured for another convolution than the one on its controls.",
    ),
    ("00", "Here: the lessons' base convolution (a ResNet-50 3x3 layer at batch 32) in both memory layouts."),
    (
        "01",
        "For tf32 fprop at the base shape, which layout's heuristic plan asks for less workspace, `'NCHW'` or `'NHWC'`?",
    ),
    ("01", "**Exercise 2 (explore).** Does a larger batch make fp32 NCHW ask for a workspace?"),
    (
        "01",
        "Coloured bars (a colour per layout): the plan cuDNN's heuristic picks; grey bars behind them: the largest workspace any candidate plan asks.",
    ),
    (
        "01",
        "Find times each algorithm once, so no spread is measured: close ranks can swap from one run to the next.",
    ),
    (
        "01",
        "In the sweep panel above, keep *dtype · layout* at fp32 NCHW and set the swept field to N: what is the largest workspace along that sweep, in bytes?",
    ),
    (
        "01",
        "`planned_graph`, below, is how every cuDNN graph in this workbook is planned: `validate` and `build_operation_graph` check the graph, `create_execution_plans` asks cuDNN's heuristics for candidate plans (best first), the `select`/`deselect` calls filter them, and `check_support` drops those this GPU cannot run.",
    ),
    (
        "02",
        "**Exercise 1 (predict).** Before you run the chart's cell: on `one_conv` (one convolution, called again and again), how many times slower per call (median host time) will `malloc_per_call` be than `fixed_arena`?",
    ),
    (
        "02",
        "**Learning goals** * read a strategy's code: `get` hands a call its workspace, `put` hears that the call was queued; * compare the ways to provide a workspace on real workloads: per-call host time (and its noise), GPU wall time, allocations, peak and held memory; * explain why allocating per call hurts, what caching pools change, and what PyTorch does; * explain why a cache key without dtype and layout is a bug, from measured workspace sizes; * see what each strategy does when memory runs out, and why; * write a strategy of your own and have it checked for correct outputs, memory, leaks and races. | strategy | what it does | | --- | --- | | `preallocated` | the baseline: one exact-size buffer per convolution and plan, made at the first call that needs it, never freed | | `fixed_arena` | one big buffer made when the strategy is made; a plan that needs more falls back to one that fits | | `malloc_per_call` | ask the size, `cudaMalloc` it, run, `cudaFree` it: every call | | `keyed_cache` | one buffer per key (the full spec + plan), kept and reused; past its byte budget it frees the buffer used longest ago (*LRU*: least recently used) | | `scratchpad_per_stream` | oneDNN's user scratchpad (`STRATEGIES` names it `scratchpad`): one grow-only buffer per stream; to grow, it frees that buffer and allocates a larger one.",
    ),
    (
        "02",
        "GPU wall time is the kernels **plus any time the GPU sat idle waiting for the host**.",
    ),
    (
        "02",
        "Before each convolution the `Runner` calls `get(req)`: `req` says how many bytes (`req.nbytes`), for which plan and on which stream (`req.stream_ptr`); `get` returns a device pointer and how many bytes are usable there (never fewer than asked: the Runner refuses to run otherwise).",
    ),
    (
        "02",
        "Strategies may pick a plan with a smaller workspace when they cannot get the one the heuristic wants (a *fallback*).",
    ),
    (
        "02",
        "The price is memory held whether or not it is used (the *workspace memory held* column above), and a plan that needs more than the arena holds must fall back to another plan that fits (lesson 05 prices such a cap).",
    ),
    (
        "02",
        "When the allocation fails, PyTorch catches the out-of-memory error and tries the next plan (`try_configs`); when benchmarking (`torch.backends.cudnn.benchmark`) it halves the workspace it asks for until an allocation succeeds and drops the plans that need more (`generate_and_filter_plans`): a fallback, like the `Runner`'s below.",
    ),
    (
        "03",
        "**Exercise 1 (predict).** Before you run the chart: order fp32, tf32, fp16 and fp8_e4m3 from fastest to slowest at this shape, each with its heuristic plan, e.g.",
    ),
    (
        "03",
        "**Exercise 3 (explore).** Move N (the batch) in the panel above: what is the largest batch at which fp8_e4m3's heuristic plan is faster than fp16's?",
    ),
    (
        "03",
        "For the ResNet-50 convolution shapes: arithmetic intensity (FLOPs per byte, counting each tensor moved once, and of the input only the pixels some filter window covers: a 1x1 stride-2 convolution reads one pixel in four) against the TFLOP/s achieved.",
    ),
    (
        "04",
        "**Exercise 1 (predict).** Before you run the chart: in fp16 at the base shape, how many times faster is the fused conv + bias + ReLU than the unfused sequence?",
    ),
    (
        "04",
        "**Exercise 5 (explore).** In fp16, move the panel's shape controls: where does fusing conv + bias + ReLU (`bias_relu`) gain least?",
    ),
    (
        "04",
        "**Learning goals** * compare a fused convolution + bias + ReLU (+ residual add), one cuDNN graph, with the same work as separate kernels; * read how the fused graph is built with the cuDNN frontend, and find where the unfused path's extra time goes; * find a case where fusion loses, and learn to measure rather than assume.",
    ),
    (
        "04",
        "*fused* runs the plan cuDNN's heuristic ranks first for that pattern in that precision, as a framework that does not autotune would; *fused, autotuned* times every plan cuDNN offers for the fused graph and keeps the fastest.",
    ),
    ("04", "GPU times are CUDA-graph replay medians, on a log axis: equal steps are equal ratios."),
    (
        "04",
        "The summary under the chart says how many plans cuDNN offers for each graph, and what the fused plan achieves where it loses.",
    ),
    (
        "05",
        "**Learning goals** * see every plan cuDNN offers for one convolution: the heuristic pick, the fastest and the slowest; * know why one timed call is not a measurement, and time every plan yourself; * measure what a workspace cap costs, and tell a cost from timing noise; * measure what building a graph costs, what a cache hit saves, and when autotuning pays for itself. cuDNN's heuristics rank the engine configurations that can run a graph; labkit builds all of them, gives each its own workspace, and times each one.",
    ),
    (
        "05",
        "**When does autotuning pay off?** When the time it saves per call, times the number of calls, exceeds what it cost.",
    ),
    (
        "05",
        "A ratio inside that band is marked *within noise*: no gain or loss those timings can tell apart.",
    ),
    ("05", "So labkit times a plan as cuDNN's own C++ autotuner does."),
    (  # how labkit times a plan: held against the code by tests/test_lessons_05_07.py
        "05",
        "`autotune.time_plan` gives the plan its own workspace (allocated with CuPy) and binds its tensors once; "
        "`measure.graph_replay` then runs two eager calls (kernels loaded, caches warm), captures a CUDA graph of "
        "up to ten back-to-back calls (the host is out of the loop), replays it to warm up, then replays it again "
        "and again, each replay timed between two CUDA events, until the median stops moving: from the fifth "
        "timed replay on, each new median is checked against the one before, so a plan gets six timed replays "
        "at least and fifteen at most, unless autotune stops it early (already far behind the best so far, or "
        "out of its time budget).",
    ),
    (
        "05",
        "The chart: on top, the best plan left under each cap (every plan within the cap autotuned); below, its slowdown against no cap, with the band in which separate timings of one plan fall.",
    ),
    (
        "05",
        "The check names a plan timed over one call, not between events, or call by call without a CUDA graph, "
        "and compares your times with "
        "labkit's (live: its autotune; in recorded mode the cell runs on a GPU simulated from the recording, "
        "and labkit's figure is each plan's recorded kernels).",
    ),
    (
        "01",
        "In recorded mode it is a GPU simulated from the recording (`labkit.simgpu`): the same calls, answered "
        "with the recorded times under CUDA's stream and memory rules, and a sanitizer that names what "
        "compute-sanitizer would (a race, a use after free, a workspace too small, a leak).",
    ),
    (
        "09",
        "Write its loop yourself for ResNet-50's first three convolutions (`lessons.three_layers()`: the stem "
        "and the first block's 1x1 and 3x3): a `Runner` under one strategy (`gpu.runner(strategy)`, on a "
        "stream of its own), one `runner.run(spec)` per layer (its record says which plan ran and with how "
        "much workspace), two events on `runner.stream` around the pass, the peak the strategy held "
        "(`strategy.stats.peak_held_bytes`), and `runner.close()` at the end.",
    ),
    ("10", "Every summary above reads the GPU's idle time from the trace."),
    (  # lesson 07's hands-on: what the cell asks and what its check does
        "07",
        "Cap the workspace of lesson 05's fp16 NCHW convolution at each of the caps experiment's caps "
        "(`lessons.CAPS`, in bytes, smallest first; `None` is no cap): `gpu.conv(spec, workspace_cap=cap)` "
        "keeps the plans that need at most `cap` bytes (cuDNN's `deselect_workspace_greater_than(cap)`; in "
        "recorded mode, on a GPU simulated from the recording, the recorded plans within the cap).",
    ),
    (
        "07",
        "Under each cap, allocate one workspace that fits every plan kept, time each plan as [lesson 05's "
        "hands-on](05_plans_autotune_and_caching.ipynb#Your-turn:-time-every-plan-yourself) does, keep the "
        "fastest, and free the workspace (a plan kept under an earlier cap need not be timed again).",
    ),
    (
        "07",
        "The calls, as there: each plan of `conv.plans`, one call `conv.run(workspace, stream=stream, "
        "plan=plan)`; a warm-up, then two events (`gpu.event(stream)`) around a CUDA graph of many calls "
        "(`gpu.capture(fn, stream)`, `graph.launch(stream)`), `end.wait()` and `gpu.elapsed_us(start, end)` "
        "over the calls; the median of several samples.",
    ),
    ("07", "The **knee** is the smallest cap whose fastest time is within 5 % of no cap's."),
    (
        "07",
        "The check names a workspace too small, a leak and a timing of one call, and sets your times beside "
        "the caps experiment's.",
    ),
    (  # lesson 04's hands-on: what the cell asks and what its check does
        "04",
        "In recorded mode both run on a GPU simulated from the recording: lesson 10's traced kernels of each "
        "path, at the fusion experiment's times.",
    ),
    (
        "04",
        "Time each path with its heuristic plan and a workspace of its own (`path.plan.workspace_bytes`; "
        "`path.run(workspace, stream=s)` queues one call) as labkit times a call: a warm-up, a CUDA graph of "
        "many calls, two events around each of several replays, the median divided by the calls.",
    ),
    (
        "04",
        "The check names a race, a leak, a workspace too small, a timing of one call and a plain convolution "
        "timed as the fused graph, and sets your times beside the fusion experiment's.",
    ),
    (  # lesson 08's hands-on: what the cell asks
        "08",
        "`conv_us(gpu)` times the base convolution's heuristic plan on one GPU as labkit does: `gpu.conv(spec)`, "
        "a workspace of `conv.plan.workspace_bytes`, a warm-up call, a CUDA graph of many calls, two events "
        "around each of several replays, the median divided by the calls, and the workspace freed.",
    ),
    (  # lesson 03's hands-on: what the cell asks and what its check does
        "03",
        "Write `time_us` as labkit times a call: a warm-up call, a CUDA graph of many calls (`gpu.capture`), "
        "one replay to upload it and `stream.synchronize()`, then two events around each of several replays "
        "(`gpu.event`, `graph.launch`, `end.wait()`, `gpu.elapsed_us`), the median divided by the calls.",
    ),
    (
        "03",
        "Then decide, from your times: `pays`, does converting for one call (NHWC plus the conversion) beat "
        "running NCHW?",
    ),
    (
        "03",
        "The check names a leak, a workspace too small and a timing of one call, and sets your times beside "
        "the layout experiment's.",
    ),
    (
        "05",
        "The same stages for fp32 NCHW: **Exercise 4 (explore).** Move the caps panel above to layout NHWC: which is the smallest recorded cap that costs under 5%?",
    ),
    ("05", "`deselect_workspace_greater_than(cap)` drops every plan that needs more than `cap` bytes."),
    ("07", "* Compare the strategies on more layers: `python -m labkit bench strategies`."),
    (
        "07",
        "**Exercise 3 (predict, then explore).** Before you move the direction control: for which direction is the slowest plan the most times slower than the fastest?",
    ),
    (
        "07",
        "In recorded mode the controls offer the recorded values; live, set any convolution you like (an impossible one, say padding larger than the filter reaches, is explained in the panel instead of raising).",
    ),
    (
        "08",
        "**Exercise 1 (predict).** Which shape gains most on the GPU with more bandwidth (the smallest time ratio, H200 over H100)?",
    ),
    (
        "08",
        "**Exercise 3 (predict).** Before the chart: is the fastest (autotuned) plan of the base convolution a different plan on the H200?",
    ),
    (
        "08",
        "**Learning goals** * read two recordings of the same calls side by side, each with its provenance (GPU, cuDNN, date); * predict from arithmetic intensity which convolutions gain from more memory bandwidth, then check; * tell a real difference between two GPUs from the spread of repeated timings; * see whether cuDNN's heuristic and autotuned plans change between two GPUs of one architecture; * place the usual architecture advice (Ampere: TF32; Hopper: FP8; Ada: FP8 inference) next to what was measured.",
    ),
    (
        "08",
        "Which shape runs at least 5 % faster on the H200 (time ratio below 0.95) in tf32, but not in fp16?",
    ),
    ("08", "No times yet: predict from the intensity alone."),
    (  # what the roofline labels: test_compare checks each quoted number is written on the chart
        "08",
        "The shapes the summary under the chart quotes, its largest gain and loss, are labelled under their points "
        "with their time on each GPU and the ratio.",
    ),
    (
        "08",
        "The repeats give the median and the 10th and 90th percentiles, the spread you read ratios against: The same base convolution (fp16 NHWC, a ResNet-50 stage-1 3x3 layer at batch 32) through fusion and a batch-size sweep.",
    ),
    (
        "08",
        "The summary under each chart gives the largest gain and loss; the sweep labels those points in the same way.",
    ),
    (
        "08",
        "Where the whiskers of two plans overlap, a single run cannot say which is faster: autotune on the GPU you deploy on, and measure again before trusting a small margin.",
    ),
    ("09", "* A cap trades workspace for time; the budget curve says how much, from measured plan times."),
    (
        "09",
        "* A network's workspace question is per layer and per pass: the fastest plan of each layer, and what a strategy holds over the whole pass.",
    ),
    (
        "09",
        "* One timed pass is one sample: compare pass times only beyond the difference between two identical passes.",
    ),
    (
        "09",
        "**Exercise 1 (predict).** Before the chart below, which draws the answer: if every call had to fit its workspace in 4 MiB, how much slower would the pass be?",
    ),
    (
        "09",
        "`rep.layers` (its first rows above) gives each call's fastest plan and its smallest-workspace plan, with their times and workspaces (`fastest_workspace_bytes`); the summary above gives the whole pass with every call's fastest plan (`rep.layers.fastest_gpu_us.sum()`).",
    ),
    (
        "09",
        "Once you answer, the cell under the check lists the calls over the cap (`rep.over_cap(cap)`), each with its fastest plan (`fastest_gpu_us`) and its fastest plan within the cap (`within_cap_gpu_us`).",
    ),
    (
        "09",
        "A call whose fastest plan needs more runs its fastest plan that fits instead.",
    ),
    (
        "09",
        '**Exercise 4 (explore).** Run the report on VGG16 in a cell of your own (`labkit.report("vgg16")`; sort its tables with `sort_values`): which layer asks for the most workspace with its fastest plan (`fastest_workspace_bytes`), and under which strategy does the pass hold the most workspace at its peak (`peak_workspace_bytes`)?',
    ),
    (
        "09",
        "A plan that one eager call shows to be far slower than the best is not timed further, and the report says how many plans and layers were cut and why (`rep.cut`, the `status` columns).",
    ),
    (
        "09",
        "Each distinct convolution's plans are timed as autotuning times them: `graph.bind_with_workspace` allocates the plan's own workspace from CuPy's pool (`memory.alloc`, a `cupy.ndarray`) and binds the plan to its tensors and that workspace (the binding's `run()` calls the frontend's `execute_plan_at_index` on the stream); then a CUDA graph of back-to-back calls is replayed between two CUDA events until the median is stable (`measure.graph_replay`): The chart: the top panel is the time of each call with the heuristic's plan and the fastest plan; the middle panel is the **memory timeline** (the workspace part of a memory snapshot): how much workspace each strategy holds while each call runs, starting from nothing, and (the last step) after the pass; the bottom panel is the budget curve (below), Exercise 1's answer.",
    ),
    (
        "09",
        "For each, the heuristic's plan, the fastest plan and the plan with the smallest workspace, with GPU time (CUDA-graph replay median, microseconds) and workspace bytes.",
    ),
    (
        "09",
        "For every convolution call it builds every plan cuDNN offers, times them, and checks the heuristic's pick, the fastest and the one with the smallest workspace against a float64 reference.",
    ),
    (
        "09",
        'It is a sum of the plan times measured above (no new measurement), so it answers "I can spare 64 MiB" in time lost.',
    ),
    ("09", "The budget curve adds kernel times measured by graph replay, repeated until stable."),
    ("09", "`calls_changing_plan` counts the calls that must take a slower plan."),
    (
        "09",
        "`labkit.report(net, batch=..., dtype=..., layout=...)` takes a preset name (`resnet50`, `resnext50_32x4d`, `mobilenet_v2`, `convnext_tiny`, `vgg16`, `deeplabv3_aspp`), a list of `ConvSpec`, or a PyTorch model with an example input shape.",
    ),
    (
        "09",
        "`rep.budget`: for each workspace cap, the pass time if every call used its fastest plan within the cap.",
    ),
    (
        "09",
        "`rep.strategies` runs the same 53 calls, each with its fastest plan, under every strategy of lesson 02: GPU time of a pass (two events around it: kernels plus any time the GPU waited for the host), host time, the peak workspace held, what is still held afterwards, and allocator calls in the first pass and in a later one.",
    ),
    (
        "10",
        "**Exercise 3 (predict).** Before the timeline: under which strategy will the GPU sit idle the largest share of its pass?",
    ),
    (
        "10",
        "From the device records, a pass's idle share is the part of it in which no kernel or memset ran (`trace.idle_share`).",
    ),
    (
        "10",
        "The table keeps the lines about engines, warnings and errors, each kind of line once, with how many times it appears and where it first does.",
    ),
}

#: (lesson, sentence) pairs not yet reviewed: each must become a claim, a generated sentence or an
#: entry of NOT_CLAIMS (this set only shrinks)
UNREVIEWED: set = set()


#: a link to a term of lesson 00's glossary (tests/test_glossary.py: its anchors are lower case, a
#: heading's anchor keeps the heading's capitals)
GLOSSARY_LINK = re.compile(r"\[([^\]]*)\]\(00_start_here\.ipynb#[a-z][a-z-]*\)")


def markdown_sentences(path: Path) -> list:
    """The sentences of a notebook's Markdown cells, whitespace collapsed (headings and code left out)."""
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        text = re.sub(r"```.*?```", " ", text, flags=re.S)
        text = GLOSSARY_LINK.sub(r"\1", text)  # a word linked to lesson 00's glossary reads as the word
        for line in text.split("\n"):
            if line.lstrip().startswith("#"):
                continue
            out.append(line)
    joined = re.sub(r"\s+", " ", " ".join(out))
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*`(\[])", joined) if s.strip()]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize(
    "lesson, sentence, check", CLAIMS, ids=lambda v: v[:40] if isinstance(v, str) else ""
)
def test_claim_holds(recording, lesson, sentence, check):
    holds, evidence = check(recordings.named(recording))
    assert holds, f"lesson {lesson} on {recording}: {sentence!r} does not hold: {evidence}"


@pytest.mark.parametrize(
    "lesson, sentence, check", CLAIMS, ids=lambda v: v[:40] if isinstance(v, str) else ""
)
def test_claim_is_in_its_lesson(lesson, sentence, check):
    text = _norm(" ".join(markdown_sentences(LESSONS[lesson])))
    assert _norm(sentence) in text, f"lesson {lesson} no longer says {sentence!r}: update the claim"


def test_every_comparative_sentence_is_a_claim():
    claimed = {(lesson, _norm(s)) for lesson, s, _ in CLAIMS}
    listed = {(lesson, _norm(s)) for lesson, s in NOT_CLAIMS | UNREVIEWED}
    loose = []
    for lesson, path in LESSONS.items():
        for s in markdown_sentences(path):
            if not COMPARATIVE.search(s):
                continue
            if not any(lesson == cl and c in _norm(s) for cl, c in claimed | listed):
                loose.append((lesson, s))
    assert not loose, "sentences that compare, neither claims nor listed:\n" + "\n".join(
        f"  ({lesson!r}, {s!r})," for lesson, s in loose
    )


def test_the_unreviewed_list_only_names_sentences_still_there():
    present = {(lesson, _norm(s)) for lesson, path in LESSONS.items() for s in markdown_sentences(path)}
    stale = [(lesson, s) for lesson, s in UNREVIEWED | NOT_CLAIMS if (lesson, _norm(s)) not in present]
    assert not stale, f"no longer in the lessons, remove: {stale}"


# ---- generated sentences that compare: each summary read back on every shipped recording --------
SHIPPED = [r.name for r in recordings.shipped()]


def _factor(words: str) -> float:
    """A factor as a summary writes it: ``9.1x slower`` -> 9.1, ``8% slower`` -> 1.08."""
    number = float(re.match(r"[\d.]+", words).group())
    return 1 + number / 100 if "%" in words else number


@pytest.mark.parametrize("recording", SHIPPED)
def test_what_a_workspace_buys_is_read_from_replay_medians(recording):
    """Lesson 01: the factor a workspace buys is the plans table's replay medians (the fastest plan
    against the fastest that needs none), never a ratio of Find's one-run times."""
    from labkit.draw.plots import request_spec
    from labkit.experiments.workspace_basics import algorithms_summary

    rec, said = recordings.named(recording), 0
    for request in rec.requests("algorithms"):
        df = rec.lookup("algorithms", request)
        text = str(algorithms_summary(df))
        plans = frame(rec, "plans", spec=request_spec(df))
        ok = plans[plans.status == "ok"]
        fast, none = ok.loc[ok.gpu_us.idxmin()], ok[ok.workspace_bytes == 0]
        found = re.search(r"\*\*([\d.]+(?:x|%) slower)\*\*[^*]*That is what the workspace buys here", text)
        if fast.workspace_bytes == 0 or none.empty:
            assert not found, text
            continue
        best_none = none.loc[none.gpu_us.idxmin()]
        if best_none.gpu_us_p10 <= fast.gpu_us_p90:
            assert not found, text
            continue
        assert found, f"{request['spec']['dtype']} {request['spec']['layout']}: {text}"
        ratio = best_none.gpu_us / fast.gpu_us
        assert _factor(found.group(1)) == pytest.approx(ratio, abs=0.051), (found.group(1), ratio)
        said += 1
    assert said, "no recorded algorithms call says what a workspace buys"


@pytest.mark.parametrize("recording", SHIPPED)
def test_finds_times_beside_the_other_gpus_are_read_from_both_recordings(recording):
    """Lesson 01: Find's times of one call differ between the recorded GPUs (one run each); the
    summary names the algorithm whose time differs most, both times and their ratio, the others'
    range, what the recordings share, and, where Find's gap is `FIND_APART` or more, the fastest
    replayed plan on each GPU, all read from both recordings."""
    from labkit.draw.plots import request_spec
    from labkit.draw.units import us_text
    from labkit.env import gpu_label
    from labkit.experiments.workspace_basics import algorithms_summary, summaries

    rec, replayed = recordings.named(recording), 0
    for request in rec.requests("algorithms"):
        df = rec.lookup("algorithms", request)
        text = _norm(str(algorithms_summary(df)))
        other = next(r for r in recordings.shipped() if r.path != rec.path and r.has("algorithms", request))
        there = other.lookup("algorithms", request)
        here_ok, there_ok = (d[d.find_status == "ok"].set_index("algorithm").time_us for d in (df, there))
        ratio = there_ok / here_ok
        apart = ratio.where(ratio >= 1, 1 / ratio)
        top = apart.idxmax()
        slow_gpu = gpu_label((there if ratio[top] > 1 else df).attrs["gpu"])
        said = re.search(
            rf"On {re.escape(gpu_label(other.metadata['gpu']))}'s recording \(([\d-]+), here ([\d-]+); "
            rf"the same cuDNN ([\d.]+), the same (\d+) algorithms, each asking the same workspace\), Find's time "
            rf"differs most for (\w+): ([\d,.]+ us) here, ([\d,.]+ us) there, ([\d.]+)(x as long|% longer) on "
            rf"([\w ]+?)(?:; the other (?:\d+ )?took ([\d.]+)x(?: to ([\d.]+)x)? (?:its|their) time here)?\.",
            text,
        )
        assert said, (recording, request["spec"]["dtype"], request["spec"]["layout"], text)
        date, date_here, cudnn, n, algo, t_here, t_there, amount, how, gpu, lo, hi = said.groups()
        assert (date, date_here) == (other.provenance("algorithms")["date"], df.attrs["date"])
        assert cudnn == df.attrs["cudnn_backend"] == there.attrs["cudnn_backend"]
        assert int(n) == len(here_ok) == len(there_ok) and set(here_ok.index) == set(there_ok.index)
        assert algo == top and gpu == slow_gpu
        assert (t_here, t_there) == (us_text(here_ok[top]), us_text(there_ok[top]))
        factor = float(amount) if how.startswith("x") else 1 + float(amount) / 100
        assert factor == pytest.approx(apart[top], abs=0.051 if how.startswith("x") else 0.006)
        rest = ratio.drop(top)
        if len(rest):
            assert float(lo) == pytest.approx(rest.min(), abs=0.0051)
            assert float(hi or lo) == pytest.approx(rest.max(), abs=0.0051)
        plans = [frame(r, "plans", spec=request_spec(df)) for r in (rec, other)]
        mine, theirs = (float(p[p.status == "ok"].gpu_us.min()) for p in plans)
        replay = re.search(
            r"Replayed, the fastest frontend plan takes ([\d,.]+ us) here and ([\d,.]+ us) there", text
        )
        assert bool(replay) == (apart[top] >= summaries.FIND_APART), text
        if replay:
            assert replay.groups() == (us_text(mine), us_text(theirs))
            closer = max(mine, theirs) / min(mine, theirs) * summaries.FIND_APART <= apart[top]
            assert ("nothing in the recordings says why" in text) == closer, text
            replayed += closer
    assert replayed, f"{recording}: no Find time differs enough from the other GPU's to be set beside replays"


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_roofline_panels_first_line_names_the_recording_in_use(recorded_mode, monkeypatch, recording):
    """Lesson 08 sends the learner to the roofline panel's first line for the recording in use (its
    banner names both recordings, not the one in use)."""
    from labkit import env
    from labkit.present import widgets

    said = "the panel's first line names it"
    assert said in _norm(" ".join(markdown_sentences(LESSONS["08"]))), said
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    recordings._current = recordings._picked = None
    gpu = env.gpu_label(recordings.named(recording).metadata["gpu"])
    header = widgets.RooflinePanel(dtype="tf32").header.value
    note = header.split("</div>")[1]  # the title's div, then the first line
    assert f"<b>Recorded</b> on {gpu} with cuDNN" in note, note


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_layout_copies_gap_adds_up_as_written(recorded_mode, monkeypatch, recording):
    """Lesson 01, Exercise 4: the answer's measured gap is the difference of the two times it prints."""
    from labkit.experiments.workspace_basics.exercises import COPY_TIME

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    why = " ".join(COPY_TIME.why(COPY_TIME.truth()).split())
    found = re.search(r"NCHW plan takes ([\d.]+) us and the NHWC plan ([\d.]+) us: ([\d.]+) us more", why)
    if found is None:  # the layout table not at hand: the answer says the bound alone
        pytest.skip(f"no measured gap in the answer on {recording}: {why}")
    nchw, nhwc, gap = (float(v) for v in found.groups())
    assert nchw - nhwc == pytest.approx(gap, abs=0.001), why


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_unfused_paths_extra_time_adds_up(recorded_mode, monkeypatch, recording):
    """Lesson 04, Exercise 3: the answer's arithmetic closes. The elementwise kernels it names and
    the convolution's difference leave under a tenth of the gap, which is the time between kernels
    it states; the extra bytes at the datasheet bandwidth take far less than those kernels, and the
    answer says both. The gap and the kernels' total are written as their written terms add up
    (tests/test_written_numbers.py)."""
    from labkit.draw.plots import fmt_us
    from labkit.draw.units import as_written
    from labkit.experiments.epilogue_fusion.exercises import (
        extra_time,
        unfused_extra_time,
        unfused_traffic_time,
        written_gap,
    )

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    parts = extra_time()
    assert parts is not None and parts.at_peak_us is not None
    between = parts.between_us[1] - parts.between_us[0]
    assert abs(parts.rest_us) < 0.1 * parts.extra_us, parts
    assert abs(parts.rest_us - between) < 0.02 * parts.extra_us, (parts.rest_us, between)  # memsets aside
    assert parts.at_peak_us < 0.5 * parts.elementwise_us, parts
    why = unfused_extra_time.why(unfused_extra_time.truth())
    gap, added = written_gap(), sum(as_written(us, fmt_us) for _, us in parts.elementwise)
    for us in (gap, added, parts.between_us[0], parts.between_us[1], parts.at_peak_us):
        assert fmt_us(us) in why, (fmt_us(us), why)
    # two ratios to the same bound, each said with what it divides: the kernels' time, and the whole
    # gap, the latter as Exercise 3's answer says it
    kernels_x, gap_x = parts.elementwise_us / parts.at_peak_us, gap / parts.at_peak_us
    assert f"Their {fmt_us(added)} is {kernels_x:.1f}x what the bytes alone" in why, why
    assert f"(the whole gap, {fmt_us(gap)}, is {gap_x:.1f}x, as Exercise 3 found)" in why, why
    share = parts.elementwise_us / parts.extra_us  # how much of the gap the kernels are, said as measured
    assert f"{share:.0%} of the gap is those kernels' time, and only fewer kernels" in " ".join(
        why.split()
    ), why
    traffic = unfused_traffic_time.why(unfused_traffic_time.truth())
    assert f"{gap_x:.1f}x that" in traffic, traffic


@pytest.mark.parametrize("recording", SHIPPED)
def test_a_plan_the_caps_and_plans_charts_time_apart_is_explained(recording):
    """Lesson 05: a plan whose caps-chart time and plans-chart time lie further apart than the
    noise band the caps summary states spans is named in that summary, with both times."""
    from labkit.draw.plots import fmt_us
    from labkit.experiments.plans_autotune import caps_summary
    from labkit.experiments.plans_autotune.noise import caps_noise
    from labkit.spec import ConvSpec

    rec = recordings.named(recording)
    for request in rec.requests("caps"):
        df = rec.lookup("caps", request)
        noise, text = caps_noise(df), str(caps_summary(df))
        plans = frame(rec, "plans", spec=ConvSpec.from_dict(request["spec"]))
        there = plans[plans.status == "ok"].set_index("plan_name").gpu_us
        for row in df[df.status == "ok"].itertuples():
            apart = max(row.gpu_us, there[row.best_plan]) / min(row.gpu_us, there[row.best_plan])
            if noise is not None and apart > noise.hi / noise.lo and row.best_plan != noise.plan:
                assert f"`{row.best_plan}` {fmt_us(there[row.best_plan])} there" in text, (row, text)
                assert f"`{row.best_plan}`" in text.split("moved further than the noise band")[0], text


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_least_peak_names_every_strategy_that_ties(recording):
    """Lesson 09: the strategies the report's summary says held the least workspace at the peak are
    every one at the least, and none more than `SAME_PEAK` above it, on every recorded network."""
    from labkit.experiments.your_network.summary import SAME_PEAK, network_report_summary
    from labkit.experiments.your_network.tables import tables_of

    rec = recordings.named(recording)
    for request in rec.requests("network_report"):
        df = rec.lookup("network_report", request)
        (strategies,) = tables_of(df, "strategies")
        peaks = strategies[strategies.status == "ok"].set_index("strategy").peak_workspace_bytes
        text = str(network_report_summary(df))
        clause = next(
            (c for c in re.split(r"(?<=[.;])\s", text) if re.search(r"least workspace|at (its|the) peak", c)),
            "",
        )
        assert clause, (request["net"], text)
        bold = set(re.findall(r"\*\*(.+?)\*\*", clause.split(":")[0]))
        if clause.startswith("Every strategy but"):
            named = set(peaks.index) - bold
        elif clause.startswith(("Every strategy", "No call")):
            named = set(peaks.index)
        else:
            named = bold
        least = peaks.min()
        assert set(peaks.index[peaks == least]) <= named, (request["net"], clause)
        assert all(peaks[s] <= least * (1 + SAME_PEAK) for s in named), (request["net"], clause)


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_pressure_fallbacks_plan_is_timed_beside_the_heuristics(recording):
    """Lesson 02: the pressure summary says what the plan the strategies fell back to costs on the
    GPU, read from the replay medians of the same convolution's plans: the plan whose workspace
    they held, against the heuristic's pick, and how many times as long."""
    from labkit.draw.units import us_text
    from labkit.experiments.workspace_strategies import pressure_summary
    from labkit.gpu.workspaces.workloads import ONE_CONV

    rec = recordings.named(recording)
    df = _strategies(rec, "pressure")
    text = str(pressure_summary(df))
    held = df[(df.fallbacks > 0) & (df.peak_bytes > 0)].peak_bytes.mode().iloc[0]  # most held this
    plans = frame(rec, "plans", spec=ONE_CONV)
    ok = plans[plans.status == "ok"]
    (ran,) = [r for _, r in ok[ok.workspace_bytes == held].iterrows()]
    pick = ok[ok.heuristic_pick.astype(bool)].iloc[0]
    found = re.search(r"Falling back costs GPU time on every call: `(\w+)`.*?, ([\d.]+)x as long", text)
    assert found, text
    assert found.group(1) == ran.plan_name
    assert f"takes {us_text(ran.gpu_us)} per call on the GPU against {us_text(pick.gpu_us)}" in text
    assert float(found.group(2)) == pytest.approx(ran.gpu_us / pick.gpu_us, abs=0.051)
    assert ran.gpu_us > 5 * pick.gpu_us  # the fallback is several times slower on both GPUs


def test_a_fallback_plan_no_slower_than_the_heuristics_is_not_said_to_cost_time(monkeypatch):
    """Lesson 02: where the plan the strategies fell back to runs no slower than the heuristic's pick
    (possible live), the pressure summary says falling back cost no GPU time, never that it costs."""
    from labkit.experiments.workspace_strategies import pressure_summary, summaries
    from labkit.gpu.workspaces.workloads import ONE_CONV

    rec = recordings.named(SHIPPED[0])
    df = _strategies(rec, "pressure")
    plans = frame(rec, "plans", spec=ONE_CONV).copy()
    held = df[(df.fallbacks > 0) & (df.peak_bytes > 0)].peak_bytes.mode().iloc[0]
    pick = plans[plans.heuristic_pick.astype(bool)].gpu_us.iloc[0]
    plans.loc[plans.workspace_bytes == held, "gpu_us"] = 0.9 * pick  # the fallback, now the faster
    looked_up = summaries.beside
    monkeypatch.setattr(
        summaries, "beside", lambda d, name, **k: plans if name == "plans" else looked_up(d, name, **k)
    )
    text = " ".join(str(pressure_summary(df)).split())
    assert "Falling back costs no GPU time here: `" in text and "0.90x as long" in text, text
    assert "costs GPU time on every call" not in text, text


def test_a_fallback_plan_a_little_slower_than_the_heuristics_says_by_how_much_not_1_0x(monkeypatch):
    """Lesson 02: where the plan the strategies fell back to runs only a little slower than the
    heuristic's pick (possible live), the sentence that says falling back costs GPU time gives the
    cost as a percentage, never a ratio that reads 1.0x."""
    from labkit.experiments.workspace_strategies import pressure_summary, summaries
    from labkit.gpu.workspaces.workloads import ONE_CONV

    rec = recordings.named(SHIPPED[0])
    df = _strategies(rec, "pressure")
    plans = frame(rec, "plans", spec=ONE_CONV).copy()
    held = df[(df.fallbacks > 0) & (df.peak_bytes > 0)].peak_bytes.mode().iloc[0]
    pick = plans[plans.heuristic_pick.astype(bool)].gpu_us.iloc[0]
    plans.loc[plans.workspace_bytes == held, "gpu_us"] = 1.04 * pick  # the fallback, 4 % slower
    looked_up = summaries.beside
    monkeypatch.setattr(
        summaries, "beside", lambda d, name, **k: plans if name == "plans" else looked_up(d, name, **k)
    )
    text = " ".join(str(pressure_summary(df)).split())
    sentence = text[text.index("Falling back costs GPU time on every call: `") :].split(" plans chart).")[0]
    assert "for the heuristic's plan, 4% longer (CUDA-graph replay medians" in sentence, sentence
    assert not re.search(r"\b1\.0+x", sentence), sentence


def test_fixed_arenas_higher_median_is_put_outside_the_strategy_only_when_its_get_and_put_cost_less():
    """Lesson 02: where fixed_arena's median host time is above malloc_per_call's (possible live), the
    summary puts the gap outside the strategy only while the arena's own get and put cost less than
    malloc_per_call's; the ratio then reads with two decimals, below 1."""
    from labkit.experiments.workspace_strategies import strategies_summary

    df = _strategies(recordings.named(SHIPPED[0]), "one_conv").copy()
    m, a = (df.index[df.name == n][0] for n in ("malloc_per_call", "fixed_arena"))
    df.loc[a, "median_us"] = df.loc[m, "median_us"] / 0.97
    text = " ".join(str(strategies_summary(df)).split())
    assert "(0.97x)" in text and "lies outside the strategy" in text, text
    df.loc[a, "strategy_us_per_call"] = 2 * df.loc[m, "strategy_us_per_call"]
    text = " ".join(str(strategies_summary(df)).split())
    assert "(0.97x)" in text and "lies outside the strategy" not in text, text


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_idle_share_read_from_host_times_is_told_so(recording, recorded_mode, fresh_progress, capsys):
    """Lesson 02, Exercise 2: the share read from the two host times per call (or from fixed_arena's
    host time against malloc_per_call's GPU wall time) is told which times to compare, and lies far
    enough from the answer to be told apart from it."""
    from labkit.present import check

    recordings.use(recording)
    df = _strategies(recordings.named(recording), "one_conv").set_index("name")
    m, a = df.loc["malloc_per_call"], df.loc["fixed_arena"]
    truth = check.malloc_idle_share.exercise.truth()
    for share, said in (
        (100 * (1 - a.median_us / m.median_us), "compares the two host times per call"),
        (100 * (1 - a.median_us / m.gpu_us), "takes fixed_arena's host time per call for the kernels' time"),
    ):
        assert abs(share - truth) > 0.1 * truth, (share, truth)
        result = check.malloc_idle_share(round(share))
        assert not result and said in " ".join(result.message.split()), result.message
    capsys.readouterr()


@pytest.mark.parametrize("recording", SHIPPED)
def test_where_fp8s_heuristic_plan_wins_is_said_batch_by_batch(recorded_mode, monkeypatch, recording):
    """Lesson 03, Exercise 3: the answer names the batches where fp8's heuristic plan beats fp16's and
    those where it loses, as the precision runs time them; it makes no claim about fp8's kernels at
    large, which the paragraph under the chart finds faster than fp16's on some GPU once every plan
    is timed."""
    from labkit.experiments.core import BASE, SWEEPS
    from labkit.experiments.precision_layout.exercises import fp8_wins_up_to
    from labkit.experiments.precision_layout.summaries import _precision_at

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    wins = []
    for n in SWEEPS["N"]:
        p = _precision_at(BASE.replace(N=n))
        wins += [n] if p.loc["fp8_e4m3", "gpu_us"] < p.loc["fp16", "gpu_us"] else []
    losses = [n for n in SWEEPS["N"] if n not in wins]
    why = " ".join(str(fp8_wins_up_to.why(fp8_wins_up_to.truth())).split())
    assert "kernels win" not in why and "kernels lose" not in why, why
    if wins and losses:
        said = re.search(r"wins at N=([\d, and]+) here and loses at N=([\d, and]+)\.", why)
        assert said, why
        assert [int(x) for x in re.findall(r"\d+", said.group(1))] == wins, (wins, why)
        assert [int(x) for x in re.findall(r"\d+", said.group(2))] == losses, (losses, why)


def test_fp8s_batches_are_read_only_where_fp8_and_fp16_both_ran(recorded_mode, monkeypatch):
    """Lesson 03, Exercise 3 on a GPU where fp8 did not run at some batch (live, without fp8 support):
    the answer and a wrong answer's feedback leave those batches out instead of raising, and a batch
    where fp8 did not run is never said to be one it loses."""
    from labkit.experiments.core import SWEEPS
    from labkit.experiments.precision_layout import exercises
    from labkit.experiments.precision_layout.summaries import _precision_at

    gone = SWEEPS["N"][-1]
    monkeypatch.setattr(
        exercises,
        "_precision_at",
        lambda spec: _precision_at(spec).drop(index="fp8_e4m3") if spec.N == gone else _precision_at(spec),
    )
    ex = exercises.fp8_wins_up_to
    why = " ".join(str(ex.why(ex.truth())).split())
    assert f"N={gone}:" not in why and f"and {gone}." not in why, why
    assert exercises._fp8_wins_wrong(gone, ex.truth()) == f"at N={gone} fp8 and fp16 did not both run."
    monkeypatch.setattr(exercises, "_precision_at", lambda spec: _precision_at(spec).drop(index="fp8_e4m3"))
    assert ex.truth() == 0
    assert "never both ran" in ex.why(0)
