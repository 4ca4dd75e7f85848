"""Lesson 04's exercises: predict fusion's gain and the unfused path's extra tensors, explain where
the unfused path's time goes, explore where fusion gains least. Every answer comes from the results in use."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import fmt_bytes, fmt_us, ok_rows, shape_label
from ...errors import LabkitError
from ..core import BASE, result
from ..exercise import Exercise, equal, explain, number, one_of, within
from .calls import recorded_calls

#: predict: fusion's gain as a range (fused bias_relu over unfused, base spec)
SPEEDUP_RANGES = ("under 1.2x", "1.2x to 2x", "2x to 5x", "over 5x")
_EDGES = (1.2, 2.0, 5.0)


def _paths(spec=BASE, epilogue: str = "bias_relu"):
    df = ok_rows(result("fusion", spec=spec))
    return df[df["epilogue"] == epilogue].set_index("path")


def _speedup() -> float:
    s = _paths()
    return float(s.loc["unfused", "gpu_us"] / s.loc["fused", "gpu_us"])


def _speedup_range() -> str:
    r = _speedup()
    return SPEEDUP_RANGES[sum(r >= e for e in _EDGES)]


def _speedup_why(truth) -> str:
    s = _paths()
    return (
        f"unfused {fmt_us(s.loc['unfused', 'gpu_us'])} / fused {fmt_us(s.loc['fused', 'gpu_us'])} = "
        f"{_speedup():.1f}x: "
        f"the unfused path writes {fmt_bytes(s.loc['unfused', 'intermediate_bytes'])} of intermediate "
        "tensors and "
        "reads them back; the fused graph keeps them on chip."
    )


def _speedup_wrong(answer, truth) -> str:
    more = SPEEDUP_RANGES.index(answer) < SPEEDUP_RANGES.index(truth)
    return "fusion gains more than that here." if more else "fusion gains less than that here."


fusion_speedup = Exercise(
    name="fusion_speedup",
    lesson="04",
    kind="predict",
    question=(
        "Before the chart: base spec, fp16. How many times faster is the fused conv + bias + ReLU than the "
        f"unfused sequence? Pick a range: {', '.join(map(repr, SPEEDUP_RANGES))}."
    ),
    truth=_speedup_range,
    parse=one_of(SPEEDUP_RANGES, "a range"),
    judge=equal,
    why=_speedup_why,
    hints=(
        "Unfused, the convolution writes its output to memory, the bias kernel reads it and writes a new "
        "tensor, and the ReLU kernel reads that and writes the result. How many times is a tensor of the "
        "output's size moved, against once when fused?",
        "An elementwise kernel on a tensor the size of the output takes about as long as moving it twice "
        "through memory; this convolution's output is as large as its input.",
    ),
    wrong=_speedup_wrong,
    example="under 1.2x",
    wrong_answers=lambda truth: [r for r in SPEEDUP_RANGES if r != truth][:2],
)


def _output_bytes(spec=BASE) -> int:
    n, k, (p, q) = spec.N, spec.K, spec.y_shape[2:]
    return n * k * p * q * (2 if spec.output_dtype != "fp32" else 4)


def _tensors() -> int:
    s = _paths(epilogue="bias_relu_add")
    return round(float(s.loc["unfused", "intermediate_bytes"]) / _output_bytes())


def _tensors_why(truth) -> str:
    s = _paths(epilogue="bias_relu_add")
    return (
        f"{truth} tensors of {fmt_bytes(_output_bytes())} each = "
        f"{fmt_bytes(s.loc['unfused', 'intermediate_bytes'])}: "
        "the convolution's output, the output plus the bias, and that plus the residual; the ReLU writes the "
        "result. The fused graph keeps all of them virtual: 0 B."
    )


unfused_tensors = Exercise(
    name="unfused_tensors",
    lesson="04",
    kind="predict",
    question=(
        "Before the chart: the unfused conv + bias + residual add + ReLU (bias_relu_add) runs one kernel per "
        "step. Besides the final output, how many tensors the size of the output does it write?"
    ),
    truth=_tensors,
    parse=number("a count of tensors"),
    judge=equal,
    why=_tensors_why,
    hints=(
        "Each kernel but the last writes its result to a new tensor that the next kernel reads.",
        "List the kernels in order: convolution, bias add, residual add, ReLU. Which of their results is the "
        "final output?",
    ),
    wrong=lambda answer, truth: "count again: one per kernel whose result the next kernel reads.",
    example=1,
)


#: explain: where the unfused path's extra time goes
EXTRA_TIME_CHOICES = {
    "intermediate_traffic": "the elementwise kernels write whole intermediate tensors to GPU memory and read "
    "them back",
    "workspace_allocation": "the unfused path allocates the convolution's workspace on every call",
    "host_launches": "Python launches three kernels instead of one, and the GPU waits for each launch",
    "slower_convolution": "the unfused path's convolution runs a slower plan",
}


def _extra_time_reason() -> str:
    s = _paths()
    slower = s.loc["unfused", "gpu_us"] > s.loc["fused", "gpu_us"]
    return (
        "intermediate_traffic"
        if slower and s.loc["unfused", "intermediate_bytes"] > 0
        else "slower_convolution"
    )


def _kernels(path: str) -> Optional[list]:
    """(kernel, us) of one path of the base bias_relu trace (`fusion_kernels`), or None without one."""
    try:
        df = result("fusion_kernels", spec=BASE, epilogue="bias_relu")
    except LabkitError:
        return None
    sub = df[(df["path"] == path) & (df["role"] != "zeroing (memset)")]
    return [(str(k), float(us)) for k, us in zip(sub["kernel"], sub["kernel_us"])]


def _extra_time_why(truth) -> str:
    s = _paths()
    extra = s.loc["unfused", "gpu_us"] - s.loc["fused", "gpu_us"]
    moved = s.loc["unfused", "modelled_hbm_bytes"] - s.loc["fused", "modelled_hbm_bytes"]
    text = (
        f"the unfused path takes {fmt_us(extra)} more and moves {fmt_bytes(moved)} more (the model), "
        f"{moved / (extra * 1e-6) / 1e9:.0f} GB/s: its elementwise kernels do next to no arithmetic, so "
        "their time is spent moving those bytes."
    )
    unfused = _kernels("unfused")
    if unfused:
        text += " Its trace: " + ", ".join(f"`{k[:40]}` {fmt_us(us)}" for k, us in unfused) + "."
    return text


def _extra_time_wrong(answer, truth) -> Optional[str]:
    s = _paths()
    fused, unfused = _kernels("fused"), _kernels("unfused")
    conv = (
        f" The traces show the same convolution kernel in both, {fmt_us(fused[-1][1])} fused and "
        f"{fmt_us(unfused[0][1])} unfused."
        if fused and unfused
        else ""
    )
    return {
        "workspace_allocation": "the workspace is allocated once, before the timing (`UnfusedPath`), and the "
        "timing replays a CUDA graph, which allocates nothing.",
        "host_launches": "the timing replays a CUDA graph: the GPU runs every kernel of it without waiting "
        "for "
        "Python or any host call.",
        "slower_convolution": "the unfused convolution runs the heuristic's plan "
        f"`{s.loc['unfused', 'plan_name']}`." + conv,
        "intermediate_traffic": "here the unfused path is not the slower one.",
    }.get(answer)


unfused_extra_time = explain(
    name="unfused_extra_time",
    lesson="04",
    question="The unfused bias_relu path takes longer than the fused graph. Where does the extra time go?",
    truth=_extra_time_reason,
    why=_extra_time_why,
    hints=(
        "Read the HBM traffic panel: how many more bytes does the unfused path move, and how long would "
        "that take at the GPU's memory bandwidth?",
        "The timing replays a CUDA graph of the whole sequence, with every buffer made beforehand.",
    ),
    wrong=_extra_time_wrong,
    choices=EXTRA_TIME_CHOICES,
    example="host_launches",
)


def _cases():
    """(spec, fusion table) for every fusion request the panel offers that is at hand (recorded: all)."""
    out = []
    for _, kwargs in recorded_calls():
        spec = kwargs["spec"]
        live_fp32 = spec == BASE.replace(dtype="fp32")  # the lesson's own second chart: measured if need be
        df = result("fusion", at_hand_only=not live_fp32, spec=spec)
        if df is not None:
            out.append((spec, ok_rows(df)))
    return out


def _least_gain():
    """(fused over unfused, spec) for ``bias_relu`` in fp16 where fusion gains least."""
    least = (0.0, None)
    for spec, df in _cases():
        if spec.dtype != "fp16":
            continue
        s = df[df["epilogue"] == "bias_relu"].set_index("path")
        if {"fused", "unfused"} <= set(s.index):
            r = float(s.loc["fused", "gpu_us"] / s.loc["unfused", "gpu_us"])
            least = max(least, (r, spec), key=lambda w: w[0])
    return least


def _least_gain_ratio() -> float:
    return round(_least_gain()[0], 2)


def _least_gain_why(truth) -> str:
    r, spec = _least_gain()
    s, base = _paths(spec), _paths()
    return (
        f"{shape_label(spec)}: fused {fmt_us(s.loc['fused', 'gpu_us'])} against unfused "
        f"{fmt_us(s.loc['unfused', 'gpu_us'])}, {r:.2f}x; at the base "
        f"({shape_label(BASE)}) {base.loc['fused', 'gpu_us'] / base.loc['unfused', 'gpu_us']:.2f}x. "
        "Fusion still wins there, by less: how much it saves depends on the shape, so measure the "
        "shapes you run."
    )


def _least_gain_wrong(answer, truth) -> Optional[str]:
    if answer >= 1:
        return "in fp16 the fused graph wins everywhere the panel reaches: fused over unfused is below 1."
    return (
        "somewhere the panel reaches, fusion gains less than that (a ratio closer to 1)."
        if answer < truth
        else "not that little: the ratio is lower everywhere the panel reaches."
    )


fusion_least_gain = Exercise(
    name="fusion_least_gain",
    lesson="04",
    kind="explore",
    question=(
        "In fp16, move the fusion panel's shape controls: where does fusing conv + bias + ReLU "
        "(bias_relu) gain least? Answer fused time over unfused time there (within 5 %)."
    ),
    truth=_least_gain_ratio,
    parse=number("a ratio"),
    judge=within(0.05),
    why=_least_gain_why,
    hints=(
        "Try every value of N, C and H; the ratio is the green dot's time over the grey one's.",
        "Both times change with the shape: compare their ratio, not their difference.",
    ),
    wrong=_least_gain_wrong,
    example=0.9,
)
