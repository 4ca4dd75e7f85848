"""Lesson 04's exercises: predict fusion's gain and the unfused path's extra tensors, explain where
the unfused path's time goes, explore where fusion gains least. Every answer comes from the results in use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ... import ceilings
from ...draw.plots import fmt_bytes, fmt_us, ok_rows, shape_label
from ...draw.units import as_written
from ...errors import LabkitError
from ..core import BASE, result
from ..exercise import Exercise, count, equal, explain, number, one_of, within
from ..worked import bandwidth, bandwidth_given, gpu_of, rate, slips, worked
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
    total = int(s.loc["unfused", "intermediate_bytes"])
    return (
        f"{truth} tensors of {_output_bytes():,} B each = {total:,} B ({fmt_bytes(total)}): "
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
    parse=count("a count of tensors"),
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
    trace = _trace()
    if trace is None:
        return None
    sub = trace[(trace["path"] == path) & (trace["role"] != "zeroing (memset)")]
    return [(str(k), float(us)) for k, us in zip(sub["kernel"], sub["kernel_us"])]


def _trace():
    """The base bias_relu trace of both paths (`fusion_kernels`), or None without one."""
    try:
        return result("fusion_kernels", spec=BASE, epilogue="bias_relu")
    except LabkitError:
        return None


@dataclass(frozen=True)
class ExtraTime:
    """Where the unfused bias_relu path's extra time goes: the replay medians (`fusion`), the
    traced kernels of both paths (`fusion_kernels`) and the datasheet bandwidth. Microseconds; bytes.

    Attributes:
        extra_us: unfused minus fused, replay medians.
        moved_bytes: the unfused path's modelled HBM bytes less the fused path's.
        elementwise: (kernel, us per call) of each elementwise kernel only the unfused path runs.
        conv_us: the convolution kernel's traced time, (fused, unfused).
        between_us: replay median less traced kernel time, (fused, unfused).
        kernels: kernels per call, memsets included, (fused, unfused).
        peak_bytes_per_s: the GPU's datasheet bandwidth; None for a GPU `labkit.ceilings` lacks.
    """

    extra_us: float
    moved_bytes: float
    elementwise: tuple
    conv_us: tuple
    between_us: tuple
    kernels: tuple
    peak_bytes_per_s: Optional[float]

    @property
    def elementwise_us(self) -> float:
        return sum(us for _, us in self.elementwise)

    @property
    def rest_us(self) -> float:
        """The gap less the elementwise kernels and the convolution's difference: between kernels."""
        return self.extra_us - self.elementwise_us - (self.conv_us[1] - self.conv_us[0])

    @property
    def at_peak_us(self) -> Optional[float]:
        """How long the extra bytes take at the datasheet bandwidth."""
        return None if not self.peak_bytes_per_s else self.moved_bytes / self.peak_bytes_per_s * 1e6


def extra_time() -> Optional[ExtraTime]:
    """Where the unfused path's extra time goes, for the base convolution, from the results in use.

    Returns:
        The `ExtraTime`; None without a trace of both paths.
    """
    s, trace = _paths(), _trace()
    if trace is None:
        return None
    paths = {p: trace[trace["path"] == p] for p in ("fused", "unfused")}
    if any(t.empty for t in paths.values()):
        return None

    def per_call(t):
        return t["kernel_us"] * t["launches_per_call"]

    def conv(t):
        return float(per_call(t[t["role"] == "main convolution"]).sum())

    unfused = paths["unfused"]
    element = unfused[unfused["role"] == "epilogue"]
    peak = ceilings.for_gpu(result("fusion", spec=BASE).attrs.get("gpu"))
    return ExtraTime(
        extra_us=float(s.loc["unfused", "gpu_us"] - s.loc["fused", "gpu_us"]),
        moved_bytes=float(s.loc["unfused", "modelled_hbm_bytes"] - s.loc["fused", "modelled_hbm_bytes"]),
        elementwise=tuple((str(k), float(us)) for k, us in zip(element["kernel"], per_call(element))),
        conv_us=(conv(paths["fused"]), conv(unfused)),
        between_us=tuple(float(s.loc[p, "gpu_us"] - per_call(paths[p]).sum()) for p in ("fused", "unfused")),
        kernels=tuple(int(paths[p]["launches_per_call"].sum()) for p in ("fused", "unfused")),
        peak_bytes_per_s=peak.bandwidth_bytes_per_s if peak else None,
    )


def written_gap() -> float:
    """The unfused path's time less the fused graph's, as the times are written (`fmt_us`): the gap
    Exercises 3 and 4 state is the difference of the two times the chart writes.

    Returns:
        Microseconds.
    """
    s = _paths()
    return as_written(s.loc["unfused", "gpu_us"], fmt_us) - as_written(s.loc["fused", "gpu_us"], fmt_us)


def _extra_time_why(truth) -> str:
    s, parts = _paths(), extra_time()
    extra = written_gap()
    moved = s.loc["unfused", "modelled_hbm_bytes"] - s.loc["fused", "modelled_hbm_bytes"]
    if parts is None:
        return (
            f"the unfused path takes {fmt_us(extra)} more and moves {fmt_bytes(moved)} more (the model): "
            "its elementwise kernels do next to no arithmetic; they write the intermediate tensors and read "
            "them back. Lesson 10's trace times each kernel."
        )
    p = parts
    adds = " and ".join(f"`{k[:40]}` {fmt_us(us)}" for k, us in p.elementwise)
    added = sum(as_written(us, fmt_us) for _, us in p.elementwise)  # adds up as read
    text = (
        f"the unfused path takes {fmt_us(extra)} more (replay medians: "
        f"{fmt_us(s.loc['unfused', 'gpu_us'])} against {fmt_us(s.loc['fused', 'gpu_us'])}). "
        "Lesson 10's trace of both paths says where: the convolution kernel takes "
        f"{fmt_us(p.conv_us[0])} fused and {fmt_us(p.conv_us[1])} unfused; the unfused path adds {adds}, "
        f"{fmt_us(added)} in all, {p.elementwise_us / p.extra_us:.0%} of the gap; the rest lies between "
        f"kernels (replay time less traced kernel time: {fmt_us(p.between_us[1])} around the unfused path's "
        f"{p.kernels[1]} kernels, {fmt_us(p.between_us[0])} around the fused path's {p.kernels[0]}). Those "
        "elementwise kernels do "
        "next to no arithmetic: they write the intermediate tensors and read them back, "
        f"{fmt_bytes(p.moved_bytes)} more than fused (the model), at "
        f"{p.moved_bytes / (p.elementwise_us * 1e-6) / 1e9:.0f} GB/s."
    )
    if p.at_peak_us is not None:
        text += (
            f" At this GPU's datasheet bandwidth ({p.peak_bytes_per_s / 1e12:.2f} TB/s) those bytes would "
            f"take {fmt_us(p.at_peak_us)}: these kernels move them at "
            f"{p.at_peak_us / p.elementwise_us:.0%} of that rate. Their {fmt_us(added)} is "
            f"{p.elementwise_us / p.at_peak_us:.1f}x what the bytes alone would cost (the whole gap, "
            f"{fmt_us(extra)}, is {extra / p.at_peak_us:.1f}x, as Exercise 3 found): "
            f"{p.elementwise_us / p.extra_us:.0%} of the gap is those kernels' time, and only fewer kernels "
            "(fusion) remove it."
        )
    return text


def _extra_time_wrong(answer, truth) -> Optional[str]:
    s = _paths()
    fused, unfused = _kernels("fused"), _kernels("unfused")
    plan = f"the unfused convolution runs the heuristic's plan `{s.loc['unfused', 'plan_name']}`."
    traces = (
        f"The traces show the same convolution kernel in both, {fmt_us(fused[-1][1])} fused and "
        f"{fmt_us(unfused[0][1])} unfused."
    )
    return {
        "workspace_allocation": "the workspace is allocated once, before the timing (`UnfusedPath`), and the "
        "timing replays a CUDA graph, which allocates nothing.",
        "host_launches": "the timing replays a CUDA graph: the GPU runs every kernel of it without waiting "
        "for Python or any host call.",
        "slower_convolution": f"{plan} {traces}" if fused and unfused else plan,
        "intermediate_traffic": "here the unfused path is not the slower one.",
    }.get(answer)


unfused_extra_time = explain(
    name="unfused_extra_time",
    lesson="04",
    question="The unfused bias_relu path takes longer than the fused graph. Where does the extra time go?",
    truth=_extra_time_reason,
    why=_extra_time_why,
    hints=(
        "Count the kernels: the unfused path runs the same convolution, then one elementwise kernel per "
        "step, each on a tensor the size of the output. What does such a kernel do besides moving bytes?",
        "The extra bytes in the HBM traffic panel, at this GPU's datasheet bandwidth (lesson 03's roofline "
        "names it), take only part of the extra time: the rest is how slowly the kernels that move them "
        "run. The timing replays a CUDA graph with every buffer made beforehand: no host, no allocator.",
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
        else "not that little: in fp16 the ratio is lower everywhere the panel reaches (the question is "
        "about fp16; fp32 is another story)."
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


# ---- explain, worked out: what the unfused path's extra bytes take at the bandwidth ---------------
def _traffic_inputs() -> dict:
    s = _paths()
    return dict(
        unfused_bytes=float(s.loc["unfused", "modelled_hbm_bytes"]),
        fused_bytes=float(s.loc["fused", "modelled_hbm_bytes"]),
        bandwidth=bandwidth(gpu_of(result("fusion", spec=BASE))),
    )


def _traffic_model(unfused_bytes, fused_bytes, bandwidth) -> float:
    """Microseconds the unfused path's extra modelled HBM bytes take at ``bandwidth`` (B/s)."""
    return (unfused_bytes - fused_bytes) / bandwidth * 1e6


def _traffic_why(truth: float) -> str:
    x, gap = _traffic_inputs(), written_gap()
    return (
        f"({x['unfused_bytes']:,.0f} - {x['fused_bytes']:,.0f}) B / {rate(x['bandwidth'])} = {truth:.1f} us: "
        f"the least time those bytes can take. The measured gap between the two paths is {gap:.1f} us, "
        f"{gap / truth:.1f}x that: the bytes at the datasheet bandwidth do not account for it. Where the "
        "rest goes is the next exercise."
    )


def _traffic_slips() -> list:
    x, s = _traffic_inputs(), _paths()
    return [
        (
            float(s.loc["unfused", "intermediate_bytes"]) / x["bandwidth"] * 1e6,
            "that is the intermediates' size moved once; each is written and then read back (the modelled "
            "traffic counts both).",
        ),
        (
            x["unfused_bytes"] / x["bandwidth"] * 1e6,
            "that is all the unfused path's traffic; the question asks what it moves beyond the fused graph.",
        ),
    ]


unfused_traffic_time = worked(
    name="unfused_traffic_time",
    lesson="04",
    question=(
        "In fp16 at the base shape, the unfused bias_relu path moves more bytes through HBM than the fused "
        "graph (the table's modelled_hbm_bytes). At this GPU's datasheet memory bandwidth, how many "
        "microseconds do those extra bytes take?"
    ),
    inputs=_traffic_inputs,
    model=_traffic_model,
    rel=0.1,
    unit="microseconds",
    given=bandwidth_given("fusion", spec=BASE),
    why=_traffic_why,
    hints=(
        "time = bytes / bandwidth; the bytes are the difference between the two paths' modelled traffic.",
        "Take the bias_relu rows of the table: unfused minus fused modelled_hbm_bytes, over the bandwidth in "
        "bytes per second, gives seconds; x 1e6 for microseconds.",
    ),
    wrong=slips(
        _traffic_slips,
        rel=0.1,
        unit="microseconds",
        high="more than the model gives: take the difference between the two paths' bytes.",
        low="less than the model gives: take the modelled traffic, both written and read.",
    ),
    wrong_answers=lambda truth: [truth / 2, truth * 1.5, truth * 1e3],
)
