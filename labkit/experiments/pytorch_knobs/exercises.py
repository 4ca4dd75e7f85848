"""Lesson 11's exercises (`labkit.experiments.exercise.Exercise`): predict whether
``cudnn.benchmark`` makes a steady call faster, explain where its first call's memory goes, and find
how much longer ResNet-50's first forward pass takes with it. Answers come from the knobs measured
in use (`core.result`, the same the lesson draws)."""

from __future__ import annotations

from ...draw.units import size_text, us_text
from ..core import MIB
from ..exercise import Exercise, equal, explain, flag, number, within
from .runs import knobs_result
from .summaries import BENCHMARK, DEFAULTS, row_of, same_time


def _conv():
    df = knobs_result()
    return row_of(df, DEFAULTS), row_of(df, BENCHMARK)


# ---- predict: does benchmark make a steady call faster ---------------------------------------------
def _faster() -> bool:
    base, bench = _conv()
    return bool(bench.gpu_us < base.gpu_us and not same_time(bench, base))


def _faster_times(truth: bool) -> str:
    """The two settings' times per call with their spread, and how they compare (no reason)."""
    base, bench = _conv()
    verdict = (
        "faster beyond the spread."
        if truth
        else "the ranges overlap, so this convolution is no faster with benchmark."
        if same_time(bench, base)
        else "slower."
    )
    return (
        f"`{BENCHMARK}` took {us_text(bench.gpu_us)} per call (p10 {us_text(bench.gpu_us_p10)}, p90 "
        f"{us_text(bench.gpu_us_p90)}), the defaults {us_text(base.gpu_us)} (p10 {us_text(base.gpu_us_p10)}, "
        f"p90 {us_text(base.gpu_us_p90)}): {verdict}"
    )


def _faster_why(truth: bool) -> str:
    base, bench = _conv()
    if base.get("labkit_plan") and base.get("labkit_plan") == bench.get("labkit_plan"):
        other = (
            " and benchmark's own pick launched another kernel" if bench.get("same_kernels") is False else ""
        )
        labkit = (
            f" Underneath, labkit's autotune of the same convolution keeps the heuristic's own pick "
            f"({base.labkit_plan}): there was nothing to win{other}."
        )
    else:
        labkit = (
            " Underneath, labkit's heuristic plan of the same convolution takes "
            f"{us_text(base.labkit_gpu_us)} and its autotuned one {us_text(bench.labkit_gpu_us)}: "
            "autotuning can win only how far the heuristic's pick is from the fastest plan."
        )
    return _faster_times(truth) + labkit


benchmark_faster = Exercise(
    name="benchmark_faster",
    lesson="11",
    kind="predict",
    question="Before the chart: will `torch.backends.cudnn.benchmark = True` make a steady call of this "
    "convolution faster than PyTorch's defaults, beyond the spread of their timings? True or False.",
    truth=_faster,
    parse=flag("whether benchmark is faster"),
    judge=equal,
    why=_faster_why,
    wrong=lambda answer, truth: _faster_times(truth),
    # the hints stay on this convolution: lesson 05's fp32 NCHW pick is several percent off its fastest,
    # which would predict a gain here
    hints=(
        "the defaults run cuDNN's heuristic pick; benchmark times the candidates on its first call and "
        "keeps the one fastest then: it can win only where the heuristic's pick is not already this "
        "convolution's fastest plan.",
        "labkit's counterpart rows under the chart time this very convolution's heuristic plan and its "
        "autotuned one (the summary says whether they are one plan): that gap is all benchmark can win.",
    ),
    example=False,
)


# ---- explain: where the first call's memory goes ---------------------------------------------------
LIMIT_1, LIMIT_0 = "benchmark=True, benchmark_limit=1", "benchmark=True, benchmark_limit=0"


def _memory_reason() -> str:
    df = knobs_result()
    bench, one, every = row_of(df, BENCHMARK), row_of(df, LIMIT_1), row_of(df, LIMIT_0)
    if bench.first_peak_bytes <= 1.5 * bench.steady_peak_bytes:
        return "winner"
    if one is not None and every is not None and abs(one.first_peak_bytes - every.first_peak_bytes) < MIB:
        return "up_front"
    return "candidates"


def _same_size_plan(df, peak_bytes: float, out_bytes: float) -> str:
    """A labkit row whose plan's workspace plus the output is the peak (within 1 MiB), in words."""
    lab = df[(df.source == "labkit") & (df.status == "ok")]
    for r in lab.itertuples():
        if abs(r.workspace_bytes + out_bytes - peak_bytes) < MIB:
            return (
                f" That peak less the output ({size_text(out_bytes)}) is "
                f"{size_text(peak_bytes - out_bytes)}: the workspace labkit measured for {r.plan_name}, "
                f"its {r.setting} plan."
            )
    return ""


def _memory_why(truth: str) -> str:
    df = knobs_result()
    base, bench, one = row_of(df, DEFAULTS), row_of(df, BENCHMARK), row_of(df, LIMIT_1)
    figures = (
        f"`{BENCHMARK}` peaked {size_text(bench.first_peak_bytes)} above the inputs in its first call and "
        f"{size_text(bench.steady_peak_bytes)} in steady calls; the defaults "
        f"{size_text(base.first_peak_bytes)} and {size_text(base.steady_peak_bytes)}. "
    )
    if truth == "up_front":
        return (
            figures
            + f"`{LIMIT_1}`, which lets benchmark try one plan, peaked {size_text(one.first_peak_bytes)} "
            "too, as much as trying every plan: the first call sets its workspace aside before it tries any "
            "plan, and its size does not depend on how many plans it tries."
            + _same_size_plan(df, bench.first_peak_bytes, bench.out_bytes)
        )
    return (
        figures
        + {
            "candidates": "The more plans benchmark tries, the higher the first call peaks: each one tried "
            "holds the workspace it asks for.",
            "winner": "The steady calls peak as high as the first: the plan benchmark keeps asks for that "
            "workspace on every call.",
        }[truth]
    )


benchmark_memory = explain(
    name="benchmark_memory",
    lesson="11",
    question="With benchmark=True, the first call peaks far above the steady calls. Where does the first "
    "call's peak come from?",
    choices={
        "up_front": "a workspace set aside before any plan is tried, the same size however many are tried",
        "candidates": "each plan benchmark tries holds its own workspace, so trying more plans takes more "
        "memory",
        "winner": "the plan benchmark keeps asks for that much workspace on every call",
        "tf32": "benchmark turns TF32 on, and TF32 needs more memory",
    },
    truth=_memory_reason,
    why=_memory_why,
    hints=(
        "compare the first-call peaks of benchmark_limit=1 (one plan tried) and benchmark_limit=0 (every "
        "plan tried), in the chart's right panel.",
        "if trying more plans took more memory, which of those two rows would peak higher?",
    ),
    wrong=lambda answer, truth: {
        "tf32": "each setting's process reads allow_tf32 back: it is the same with and without benchmark "
        "(the table's 'convolutions run as' column).",
        "winner": "the steady calls, which run only the kept plan, peak far lower than the first call.",
        "candidates": "trying one plan (benchmark_limit=1) peaked as high as trying every plan.",
        "up_front": "the peak grows with the plans tried here.",
    }.get(answer),
)


# ---- explore: ResNet-50's first forward pass with benchmark ------------------------------------------
def _resnet():
    df = knobs_result("resnet50")
    return row_of(df, DEFAULTS), row_of(df, BENCHMARK)


def _first_forward_ratio() -> float:
    base, bench = _resnet()
    return float(bench.first_call_ms / base.first_call_ms)


def _first_forward_why(truth: float) -> str:
    base, bench = _resnet()
    extra_us = (bench.first_call_ms - base.first_call_ms) * 1e3
    saved_us = base.gpu_us - bench.gpu_us
    repaid = (
        f"each steady pass saves {us_text(saved_us)}, so the first pass's extra {us_text(extra_us)} is "
        f"repaid after {extra_us / saved_us:,.0f} passes, in the same process."
        if saved_us > 0 and not same_time(bench, base)
        else "the steady pass is no faster, so the first pass's extra time is never repaid."
    )
    return (
        f"{bench.first_call_ms:,.1f} ms / {base.first_call_ms:,.1f} ms = {truth:.1f}: with benchmark each "
        "distinct convolution of the network times its candidate plans on its first call. In steady calls "
        f"the forward pass took {us_text(bench.gpu_us)} with benchmark against {us_text(base.gpu_us)} "
        f"without: {repaid}"
    )


resnet_first_forward = Exercise(
    name="resnet_first_forward",
    lesson="11",
    kind="explore",
    question="Draw the same switches on ResNet-50 in a cell of your own: how many times the defaults' first "
    "forward pass did the first forward pass take with benchmark=True?",
    truth=_first_forward_ratio,
    parse=number("a ratio of two first-pass times"),
    judge=within(0.1),
    why=_first_forward_why,
    hints=(
        "the middle panel of the ResNet-50 chart: the first forward pass of each setting, in ms.",
        "divide benchmark=True's first forward pass by the defaults' one.",
    ),
    wrong=lambda answer, truth: (
        "that is the other way round: the defaults' over benchmark's."
        if abs(answer - 1 / truth) <= 0.1 / truth
        else None
    ),
)
