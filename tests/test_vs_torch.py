"""The vs-torch bench's reading of its own measurements (`labkit.cli.vs_torch`), on CPU: the kernel
names both tracers agree on, the reason given where labkit is slower, and the summary's counts.
The rows here are shapes of the bench's table, not measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from labkit.cli import vs_torch
from labkit.spec import DIRECTIONS, DTYPES, LAYOUTS


def test_the_bench_covers_every_class_the_goals_name():
    convs = vs_torch.CONVOLUTIONS
    specs = [s for _, _, s in convs]
    assert len([s for s in specs if s.dtype != "fp8_e4m3"]) >= 40
    assert {s.dtype for s in specs} == set(DTYPES)
    assert {s.layout for s in specs} == set(LAYOUTS)
    assert {s.direction for s in specs} == set(DIRECTIONS)
    assert any(s.groups == s.C > 1 and s.R == 3 and s.stride == (1, 1) for s in specs)  # depthwise 3x3
    assert any(s.groups == s.C > 1 and s.R == 7 and s.dtype == "fp32" for s in specs)  # 7x7 depthwise
    assert any(s.C == 3 and s.dtype in ("fp16", "bf16") for s in specs)  # 3-channel stems
    assert any(s.R != s.S for s in specs)  # asymmetric kernels
    assert any(s.K % 8 or s.C % 8 for s in specs if s.C != 3)  # channels not multiples of 8
    assert any(1 < s.groups < s.C for s in specs) and any(s.dilation != (1, 1) for s in specs)
    assert len({s.key for s in specs}) == len(specs)


def test_kernel_keys_agree_between_cupti_and_the_profiler():
    mangled = "_ZN5cudnn3ops16nchwToNhwcKernelIfEEvPKT_PS2_i"  # what CUPTI reports
    demangled = "void cudnn::ops::nchwToNhwcKernel<float>(float const*, float*, int)"  # torch.profiler
    assert vs_torch.kernel_key(mangled) == vs_torch.kernel_key(demangled)
    assert vs_torch.kernel_key(demangled) == "cudnn::ops::nchwToNhwcKernel<float>"
    assert vs_torch.kernel_key("Memset (Device)") == vs_torch.kernel_key("memset") == "memset"
    assert vs_torch.kernel_key("sm90_xmma_fprop<1>") != vs_torch.kernel_key("sm90_xmma_fprop<2>")


def _row(**kw):
    base = dict(ratio=1.03, noise=0.005, labkit_plan_index=0, torch_keys=("a",), exhaustive={0: 10.0, 1: 9.0})
    return {**base, **kw}


TABLE = pd.DataFrame(dict(plan_index=[0, 1, 2], status=["ok", "ok", "slower: one eager call took 1 ms"]))


def test_why_names_the_cause():
    assert vs_torch.why(_row(ratio=0.99), {0: ("a",)}, TABLE) == ""
    assert "timing noise" in vs_torch.why(_row(ratio=1.004), {0: ("a",)}, TABLE)
    assert "beyond the noise" in vs_torch.why(_row(ratio=1.05), {0: ("a",)}, TABLE)
    assert "no labkit plan" in vs_torch.why(_row(), {0: ("b",), 1: ("c",)}, TABLE)
    native = _row(torch_keys=("at::native::conv_depthwise2d_forward_kernel<float>",))
    assert "PyTorch ran its own kernel, not cuDNN's" in vs_torch.why(native, {0: ("b",)}, TABLE)
    assert "autotune picked another plan: plan 1" in vs_torch.why(_row(), {0: ("b",), 1: ("a",)}, TABLE)
    assert "left out: plan 2" in vs_torch.why(_row(), {0: ("b",), 2: ("a",)}, TABLE)
    equal = _row(ratio=1.004, exhaustive={0: 10.0, 1: 10.0})
    assert "timing noise" in vs_torch.why(equal, {0: ("b",), 1: ("a",)}, TABLE)


def test_summary_counts_what_the_goals_ask():
    df = pd.DataFrame(
        [
            dict(status="ok", torch_us=1.0, ratio=0.99, why="", same_kernels=True, pick_within_noise=True),
            dict(status="ok", torch_us=1.0, ratio=1.03, why="another kernel", same_kernels=False),
            dict(status="ok", torch_us=float("nan"), pick_within_noise=False, pick_vs_best=1.04),
            dict(status="cut: the run's budget was spent"),
        ]
    )
    s = vs_torch.summary(df)
    assert (s["convolutions"], s["measured"], s["against_torch"]) == (4, 3, 2)
    assert (s["above_1.02"], s["above_1.00"], s["above_1.00_explained"]) == (1, 1, 1)
    assert s["same_kernels"] == 1 and s["pick_within_noise_of_best"] == 1 and s["pick_vs_best_max"] == 1.04
    assert vs_torch.summary(pd.DataFrame([dict(status="ok")]))["median_ratio"] is None


def _figure(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def test_the_readmes_figures_are_the_benchs():
    """The README's "How it measures up" says what data/bench holds, number for number."""
    root = Path(__file__).resolve().parents[1]
    readme = " ".join((root / "README.md").read_text().split())
    df = pd.read_csv(root / "data" / "bench" / "vs_torch_h100-80gb-hbm3.csv")
    vs = df[df.torch_us.notna() & (df.status == "ok")]
    own_kernel = vs.why.fillna("").str.startswith("PyTorch ran its own kernel")
    over = vs[vs.ratio > 1.02]
    native, same = over[own_kernel[over.index]], over[over.why.fillna("").str.startswith("the same kernels")]
    assert len(over) == len(native) + len(same)
    assert native.conv.str.startswith("fp32 NCHW").all() and native.conv.str.contains(r" g\d+$").all()
    expected = [
        f"on {len(vs)} convolutions from {vs.network.nunique()} real networks",
        f"takes {_figure(vs.ratio.median(), 3)}x PyTorch's time at the median",
        f"{int((vs.ratio > 1).sum())} are slower",
        f"{len(over)} are more than 1.02x slower: {len(native)} fp32 NCHW depthwise convolutions where "
        "PyTorch runs its own kernel"
        if len(same)
        else f"{len(over)} are more than 1.02x slower, both fp32 NCHW depthwise convolutions where PyTorch "
        "runs its own kernel, not cuDNN's",
        f"on {int(df.pick_within_noise.sum())} of {len(df)} convolutions",
        f"{_figure(vs.labkit_host_us.median(), 1)} us against PyTorch's "
        f"{_figure(vs.torch_host_us.median(), 1)} us",
    ]
    expected += [f"and {len(same)} where both sides run the same kernels"] if len(same) else []
    expected += [f"({r.conv}, {r.ratio:.3f}x, beyond the {r.noise:.1%} noise" for r in same.itertuples()]
    assert (vs[vs.ratio > 1].why.fillna("") != "").all()
    # docs/findings.md: where both run cuDNN and labkit is slower, both run the same kernels
    assert vs[(vs.ratio > 1) & ~own_kernel].why.str.startswith("the same kernels").all()
    h200 = pd.read_csv(root / "data" / "bench" / "vs_torch_h200.csv")
    h200_date = json.loads((root / "data" / "bench" / "vs_torch_h200.json").read_text())["date"]
    h200_vs = h200[h200.torch_us.notna() & (h200.status == "ok")]
    h200_over = h200_vs[h200_vs.ratio > 1.02]
    expected += [
        f"On an H200 (a run of an earlier autotune, {h200_date}): "
        f"{_figure(h200_vs.ratio.median(), 3)}x at the median, "
        f"{len(h200_over)} more than 1.02x slower (the two where PyTorch runs its own kernel)",
        f"on {int(h200.pick_within_noise.sum())} of {len(h200)}.",
    ]
    assert len(h200_over) == 2 and set(h200_over.conv) == set(native.conv)
    assert h200_over.why.str.startswith("PyTorch ran its own kernel").all()
    rep = pd.read_csv(root / "data" / "bench" / "report_h100-80gb-hbm3.csv")
    rep = rep[rep.net == "resnet50"].set_index("condition")
    empty, torch_ = rep.report_seconds["empty cache"], rep.report_seconds["PyTorch warm-up"]
    expected += [
        f"takes {_figure(empty, 1)} s with an empty cache",
        f"That is {_figure(empty / torch_, 1)}x PyTorch's own warm-up",
        f"its first forward pass, {_figure(torch_, 3)} s",
        f"it takes {_figure(rep.report_seconds['cached'], 3)} s",
    ]
    h200_rep = pd.read_csv(root / "data" / "bench" / "report_h200.csv")
    said, runs = {}, {}
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    for net in ("resnet50", "torchvision.models:mobilenet_v3_large"):
        r = h200_rep[h200_rep.net == net].set_index("condition")
        assert r.runs.nunique() == 1 and (r.warmup_runs == 1).all(), net  # "after one uncounted round"
        runs[net] = words[int(r.runs.iloc[0])]
        e, t = r.report_seconds["empty cache"], r.report_seconds["PyTorch warm-up"]
        # two decimals: a ratio just over the report's 3x goal must not read as 3.0x
        said[net] = f"{_figure(e, 2)} s against", f"{_figure(t, 2)} s", f"({_figure(e / t, 2)}x)"
        if net == "resnet50":  # lesson 09: the banner warmed the report's worker
            w = r.report_seconds["empty cache, worker warmed"]
            expected += [f"ResNet-50's report takes {_figure(w, 2)} s ({_figure(w / t, 1)}x) on that H200"]
    r50, mnv3 = said["resnet50"], said["torchvision.models:mobilenet_v3_large"]
    torch_r50 = h200_rep[(h200_rep.net == "resnet50") & (h200_rep.condition == "PyTorch warm-up")].iloc[0]
    mnv3_runs = runs["torchvision.models:mobilenet_v3_large"]
    expected += [
        f"the median of {runs['resnet50']} runs for ResNet-50",
        f"of {mnv3_runs} for MobileNetV3-Large, after one uncounted round",
        f"{r50[0]} PyTorch's {r50[1]}",
        f"{r50[2]} for ResNet-50",
        f"{mnv3[0]} {mnv3[1]} {mnv3[2]} for",
        f"Over those {runs['resnet50']} runs PyTorch's warm-up of ResNet-50 alone took "
        f"{_figure(torch_r50.report_seconds_min, 2)}-{_figure(torch_r50.report_seconds_max, 2)} s",
    ]
    from labkit.cli.bench_summary import p90

    visits = pd.read_csv(root / "data" / "bench" / "widget_latency.csv")
    first = visits[
        (
            visits.condition
            == "first visit, 5 s reading before the first panel, nothing measured, compiled at setup"
        )
        & (visits.gpu == "NVIDIA H100 80GB HBM3")
    ]
    changes = first[first.control != "(build)"]
    lessons, report = changes[changes.panel != "network_report"], changes[changes.panel == "network_report"]
    cell = first[first.panel == "(first cell)"].latency_ms.iloc[0]
    builds = first[(first.control == "(build)") & (first.panel != "(first cell)")]
    expected += [
        f"a lesson's first cell takes {_figure(cell / 1000, 2)} s in a Jupyter kernel",
        f"every panel first paints within {_figure(builds.first_paint_ms.max() / 1000, 2)} s",
        f"completes in {_figure(changes.latency_ms.median() / 1000, 2)} s at the median and "
        f"{_figure(p90(changes.latency_ms) / 1000, 2)} s at the 90th percentile, "
        f"{_figure(lessons.latency_ms.max() / 1000, 2)} s at most in the lessons and "
        f"{_figure(report.latency_ms.max() / 1000, 1)} s for a network report",
    ]
    for text in expected:
        assert text in readme, text


def test_the_findings_warmed_report_figures_are_the_benchs():
    """docs/findings.md's latest report finding quotes the committed H200 report bench, number for number."""
    root = Path(__file__).resolve().parents[1]
    findings = " ".join((root / "docs" / "findings.md").read_text().split())
    rep = pd.read_csv(root / "data" / "bench" / "report_h200.csv")
    r = rep[rep.net == "resnet50"].set_index("condition")
    m = rep[rep.net != "resnet50"].set_index("condition").report_seconds
    e, t, w = (r.loc[c] for c in ("empty cache", "PyTorch warm-up", "empty cache, worker warmed"))

    def spread(row) -> str:
        return f"{_figure(row.report_seconds_min, 2)}-{_figure(row.report_seconds_max, 2)} s"

    said = (
        f"In the bench committed with these changes, on an H200 host, ResNet-50's report from a "
        f"fresh process took a median of {_figure(e.report_seconds, 2)} s ({spread(e)}) against "
        f"PyTorch's {_figure(t.report_seconds, 2)} s ({spread(t)}), "
        f"{_figure(e.report_seconds / t.report_seconds, 2)}x, and {_figure(w.report_seconds, 2)} s with "
        f"its worker warmed first; MobileNetV3-Large's, {_figure(m['empty cache'], 1)} s against "
        f"{_figure(m['PyTorch warm-up'], 2)} s, {_figure(m['empty cache'] / m['PyTorch warm-up'], 2)}x."
    )
    assert said in findings


def test_the_findings_plans_past_the_first_ten_are_the_recordings():
    """docs/findings.md's finding on the plans the report times past the heuristic's first ten
    (PyTorch's `benchmark_limit`) quotes ResNet-50's rows of both shipped recordings."""
    root = Path(__file__).resolve().parents[1]
    findings = " ".join((root / "docs" / "findings.md").read_text().split())
    limit, said = 10, {}
    for gpu in ("h200", "h100-sxm"):
        rep = pd.read_csv(root / "data" / "recordings" / gpu / "network_report.csv")
        rep = rep[rep.request.str.contains('"net":"resnet50"', regex=False)]
        layers = rep[rep.table == "layers"]
        distinct = layers.drop_duplicates("spec_id")
        plans = rep[(rep.table == "plans") & rep.gpu_us.notna()].drop_duplicates(["spec_id", "plan_index"])
        past = plans[plans.plan_index >= limit]
        first = plans[plans.plan_index < limit]
        best_first = first.groupby("spec_id").gpu_us.min()
        fastest = (layers.fastest_gpu_us * layers["count"]).sum()
        within_first = (layers.spec_id.map(best_first) * layers["count"]).sum()
        least_ws = first.groupby("spec_id").workspace_bytes.min()
        said[gpu] = dict(
            distinct=len(distinct),
            layers=len(layers),
            timed=len(plans),
            past=len(past),
            share=f"{100 * past.gpu_us.sum() / plans.gpu_us.sum():.0f}%",
            past_ms=f"{past.gpu_us.sum() / 1000:.1f}",
            all_ms=f"{plans.gpu_us.sum() / 1000:.1f}",
            kept=int((distinct.fastest_plan_index < limit).sum()),
            loss=f"{100 * (within_first / fastest - 1):.2f}%",
            smallest_past=int((distinct.smallest_plan_index >= limit).sum()),
            no_free=int((distinct.spec_id.map(least_ws) > 0).sum()),
            times_pytorch=len(plans) / (limit * len(distinct)),
        )
    h200, h100 = said["h200"], said["h100-sxm"]
    assert h200["distinct"] == h100["distinct"] == 23 and h200["layers"] == h100["layers"] == 53
    assert 3.5 < min(h200["times_pytorch"], h100["times_pytorch"]) < 4  # "almost four times"
    for text in (
        "ResNet-50 (batch 32, fp16 NHWC, 23 distinct convolutions)",
        f"the report times {h200['timed']} plans on the H200 and {h100['timed']} on the H100",
        f"{h200['past']} and {h100['past']} come after the heuristic's first ten",
        f"add up to {h200['share']} of all the timed plans'",
        f"({h200['past_ms']} of {h200['all_ms']} ms on the H200, "
        f"{h100['past_ms']} of {h100['all_ms']} ms on the H100)",
        f"keep the fastest plan of {h200['kept']} of the 23 convolutions",
        f"the 53 layers' fastest times within {h200['loss']} on the H200 and {h100['loss']} on the H100",
        f"past the first ten for {h200['smallest_past']} of the 23 on both GPUs",
        f"for {h200['no_free']} of them no plan among the first ten runs without a workspace",
    ):
        assert text in findings, text
    assert h100["share"] == h200["share"] and h100["kept"] == h200["kept"]
    assert h100["smallest_past"] == h200["smallest_past"] and h100["no_free"] == h200["no_free"]
