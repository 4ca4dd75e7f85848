"""Lesson 03's exercises: predict the dtypes' speed order and whether NHWC pays off, explain fp8's
error, explore the batch at which fp8 stops winning, work out after how many layers converting to NHWC
once pays. Every answer comes from the results in use."""

from __future__ import annotations

import math
import re
from typing import Optional

from ...draw.plots import fmt_us, ok_rows
from ...draw.prose import listed
from ...draw.units import as_written
from ...errors import InvalidSpec
from ..core import BASE, SWEEPS, result
from ..exercise import Exercise, count, equal, explain
from ..worked import slips, worked
from .charts import sci
from .summaries import _precision_at, _spread

# ---- exercises ----------------------------------------------------------------------------------
#: the dtypes the speed-order exercise asks about (bf16 runs fp16's plan: their order is noise)
SPEED_ORDER_DTYPES = ("fp32", "tf32", "fp16", "fp8_e4m3")


def _speed_order() -> list:
    t = _precision_at()["gpu_us"]
    return sorted(SPEED_ORDER_DTYPES, key=lambda d: t[d])


def _parse_order(answer) -> list:
    names = list(SPEED_ORDER_DTYPES)
    if (
        isinstance(answer, str)
        or not isinstance(answer, (list, tuple))
        or not all(isinstance(x, str) for x in answer)
    ):
        raise InvalidSpec("answer", answer, f"must be a list of the dtype names {names!r}, fastest first")
    a = [x.strip().lower() for x in answer]
    if sorted(a) != sorted(names):
        raise InvalidSpec("answer", answer, f"must list each of {', '.join(names)} once")
    return a


def _speed_order_why(truth) -> str:
    p = _precision_at()
    spread = max((s for s in (_spread(p.loc[d]) for d in truth) if s is not None), default=None)
    noise = f" (p10–p90 within {spread:.1%} each)" if spread is not None else ""
    times = ", ".join(f"{d} {fmt_us(p.loc[d, 'gpu_us'])}" for d in truth)
    return (
        f"fastest to slowest: {times}{noise}. The datasheet peaks would put fp8 first; the kernel cuDNN runs "
        "decides: the paragraph under the chart compares fp8's plans and kernels with fp16's."
    )


#: the order of the tensor cores' datasheet peaks, highest first (true fp32 does not use them)
PEAK_ORDER = ["fp8_e4m3", "fp16", "tf32", "fp32"]


def _speed_order_wrong(answer, truth) -> str:
    right = sum(a == t for a, t in zip(answer, truth))
    placed = f"{right} of {len(truth)} in the right place."
    if answer != PEAK_ORDER:
        return placed
    return (
        f"{placed} That is the order of the datasheet peaks; a dtype runs as fast as the kernel its plan "
        "launches at this shape, and the chart below times each."
    )


dtype_speed_order = Exercise(
    name="dtype_speed_order",
    lesson="03",
    kind="predict",
    question=(
        "Before the chart: order fp32, tf32, fp16 and fp8_e4m3 from fastest to slowest for the base "
        "convolution, each with the plan cuDNN's heuristic picks."
    ),
    truth=_speed_order,
    parse=_parse_order,
    judge=equal,
    why=_speed_order_why,
    hints=(
        "The tensor cores' peak doubles from tf32 to fp16 and again to fp8, and true fp32 does not use "
        "them at all; but a peak is reached only by a kernel made for the shape.",
        "Run the next cell: the left panel of the precision chart is the measurement.",
    ),
    wrong=_speed_order_wrong,
    example=["fp32", "tf32", "fp16", "fp8_e4m3"],
    leaks=lambda truth: (r"\W+".join(re.escape(d) for d in truth),),
    wrong_answers=lambda truth: [
        w for w in (list(reversed(truth)), [truth[1], truth[0], *truth[2:]], PEAK_ORDER) if w != truth
    ],
)


#: explain: why fp8's total error is so much larger than its arithmetic error
FP8_ERROR_CHOICES = {
    "mantissa_bits": "fp8_e4m3 keeps 3 bits after the leading 1 (fp16 keeps 10), so each input is rounded "
    "coarsely",
    "range_clipping": "fp8_e4m3's largest value is 448, so large inputs are clipped to it",
    "fp8_accumulation": "the tensor cores add up fp8 products in fp8, losing bits at every step",
    "fp8_output": "the result is stored in fp8, which cannot hold it precisely",
}


def _fp8_error_reason() -> str:
    p = _precision_at()
    a8, t8 = p.loc["fp8_e4m3", "rel_error"], p.loc["fp8_e4m3", "rel_error_vs_fp64_inputs"]
    if a8 > 5 * p.loc["fp16", "rel_error"]:
        return "fp8_accumulation"  # the arithmetic itself would be what is off
    return "mantissa_bits" if t8 > 10 * a8 else "fp8_output"


def _fp8_error_why(truth) -> str:
    p = _precision_at()
    a8, t8 = p.loc["fp8_e4m3", "rel_error"], p.loc["fp8_e4m3", "rel_error_vs_fp64_inputs"]
    t16 = p.loc["fp16", "rel_error_vs_fp64_inputs"]
    return (
        f"fp8's arithmetic on the inputs it read is off by {sci(a8)}, but those inputs are already off: its "
        "total "
        f"error is {sci(t8)}, {t8 / t16:.0f}x fp16's ({sci(t16)}). Each fewer bit doubles the rounding "
        "error; "
        "fp8 keeps 7 fewer than fp16. The numbers are computed in fp32 either way."
    )


def _fp8_error_wrong(answer, truth) -> Optional[str]:
    p = _precision_at()
    a8, a16 = p.loc["fp8_e4m3", "rel_error"], p.loc["fp16", "rel_error"]
    return {
        "range_clipping": "labkit's inputs are uniform in [-1, 1] (`numerics.random_inputs`): nothing comes "
        "near "
        "448, and nothing is clipped.",
        "fp8_accumulation": "fp8's arithmetic error, measured on the very inputs it read, is "
        f"{sci(a8)}: about "
        f"fp16's ({sci(a16)}). The sums are done in fp32 (the graph's compute type).",
        "fp8_output": "fp8 convolutions here write an fp16 output, as fp16 ones do, and fp16's total error "
        "is "
        f"close to its arithmetic error ({sci(p.loc['fp16', 'rel_error_vs_fp64_inputs'])} vs {sci(a16)}).",
        "mantissa_bits": "the arithmetic error would then be the large one; it is not.",
    }.get(answer)


fp8_total_error = explain(
    name="fp8_total_error",
    lesson="03",
    question=(
        "fp8's total error (diamond) is far above its arithmetic error (circle); fp16's two are close. Why? "
        "Pick a reason."
    ),
    truth=_fp8_error_reason,
    why=_fp8_error_why,
    hints=(
        "The circle judges the arithmetic on the values cuDNN read; the diamond judges the same result "
        "against the data before they were rounded to the dtype. Which of the two is far off?",
        "Before any arithmetic, every input is rounded to the nearest value fp8 can hold. How far apart are "
        "neighbouring fp8 values near 0.5, and neighbouring fp16 values?",
    ),
    wrong=_fp8_error_wrong,
    choices=FP8_ERROR_CHOICES,
    example="range_clipping",
)


def _fp8_vs_fp16() -> dict:
    """Each batch the panel offers at which both fp8's and fp16's heuristic plans ran: N -> (fp8's GPU
    time, fp16's), microseconds."""
    out = {}
    for n in SWEEPS["N"]:
        p = _precision_at(BASE.replace(N=n))
        if {"fp8_e4m3", "fp16"} <= set(p.index):
            out[n] = (float(p.loc["fp8_e4m3", "gpu_us"]), float(p.loc["fp16", "gpu_us"]))
    return out


def _fp8_wins_up_to() -> int:
    return max((n for n, (fp8, fp16) in _fp8_vs_fp16().items() if fp8 < fp16), default=0)


def _fp8_wins_why(truth) -> str:
    both = _fp8_vs_fp16()
    rows = "; ".join(f"N={n}: fp8 {fmt_us(fp8)} vs fp16 {fmt_us(fp16)}" for n, (fp8, fp16) in both.items())
    wins = [n for n, (fp8, fp16) in both.items() if fp8 < fp16]
    losses = [n for n in both if n not in wins]
    if not both:
        return "fp8 and fp16 never both ran at a batch the panel offers here: there is nothing to compare."
    if not truth:
        return f"{rows}: fp8's heuristic plan never wins here."
    if not losses:
        return f"{rows}: fp8's heuristic plan wins at every batch where both ran."
    return (
        f"{rows}. Which dtype wins depends on the kernel cuDNN has for the shape, not on the "
        f"dtype's peak: fp8's heuristic plan wins at N={listed(wins)} here and loses at N={listed(losses)}."
    )


def _fp8_wins_wrong(answer, truth) -> Optional[str]:
    if answer not in SWEEPS["N"] and answer != 0:
        return f"the panel offers N = {', '.join(map(str, SWEEPS['N']))}."
    both = _fp8_vs_fp16()
    if answer and int(answer) not in both:
        return f"at N={int(answer)} fp8 and fp16 did not both run."
    if answer and both[int(answer)][0] >= both[int(answer)][1]:
        return f"at N={int(answer)} fp8's plan is the slower one."
    return "fp8 beats fp16 at a larger batch than that." if answer < truth else None


fp8_wins_up_to = Exercise(
    name="fp8_wins_up_to",
    lesson="03",
    kind="explore",
    question=(
        "In the precision panel, move N (the batch): what is the largest batch at which fp8_e4m3's "
        "heuristic plan is faster than fp16's? (0 if it never is)"
    ),
    truth=_fp8_wins_up_to,
    parse=count("a batch size"),
    judge=equal,
    why=_fp8_wins_why,
    hints=(
        "Set N in the precision panel to each value it offers and compare the fp8_e4m3 and fp16 bars.",
        "Start from the smallest batch the panel offers.",
    ),
    wrong=_fp8_wins_wrong,
    example=64,
)


#: the batch sizes `nhwc_closest_batch` compares (the recorded N sweep)
NHWC_BATCHES = tuple(SWEEPS["N"])


def _conversion_ratios() -> dict:
    """N -> end-to-end time in NHWC with the conversions over the time in NCHW, per `NHWC_BATCHES`."""
    out = {}
    for n in NHWC_BATCHES:
        t = ok_rows(result("layout", spec=BASE.replace(N=n))).set_index("layout")["end_to_end_us"]
        out[n] = float(t["NHWC"] / t["NCHW"])
    return out


def _nhwc_closest_batch() -> int:
    ratios = _conversion_ratios()
    return min(ratios, key=ratios.get)


#: NHWC with its conversions within this ratio of NCHW's time is said to be close to even
CLOSE_CALL = 1.1


def _nhwc_why(truth) -> str:
    ratios = _conversion_ratios()
    df = ok_rows(result("layout", spec=BASE.replace(N=truth))).set_index("layout")
    n, h = df.loc["NCHW"], df.loc["NHWC"]
    each = ", ".join(f"N={b} {r:.2f}x" for b, r in ratios.items())
    if ratios[truth] < 1:
        there = "Converting pays off there."
    elif ratios[truth] < CLOSE_CALL:
        there = (
            f"There NHWC with its conversions takes {ratios[truth] - 1:.1%} longer than NCHW (one "
            "measurement of each part): close to even, not below it. Convert once per network, not per "
            "layer."
        )
    else:
        there = (
            "Even there the conversion costs more than the faster convolution saves: convert once per "
            "network, not per layer."
        )
    return (
        f"NHWC with the conversions over NCHW: {each}. At N={truth}: NCHW {fmt_us(n.end_to_end_us)}; "
        f"NHWC {fmt_us(h.conv_gpu_us)} + {fmt_us(h.convert_gpu_us)} of conversion. {there}"
    )


def _nhwc_wrong(answer, truth) -> Optional[str]:
    if answer not in NHWC_BATCHES:
        return f"answer one of the batch sizes {', '.join(map(str, NHWC_BATCHES))}."
    r, n = _conversion_ratios(), int(answer)
    return f"at N={n} NHWC with the conversions takes {r[n]:.2f}x NCHW's time; another batch comes closer."


nhwc_closest_batch = Exercise(
    name="nhwc_closest_batch",
    lesson="03",
    kind="predict",
    question=(
        "Before the chart: your tensors are NCHW. Converting them to NHWC, running there and converting the "
        f"result back: at which batch size, {', '.join(map(str, NHWC_BATCHES[:-1]))} or {NHWC_BATCHES[-1]}, "
        "does it come closest to paying off (the lowest time against NCHW's)?"
    ),
    truth=_nhwc_closest_batch,
    parse=count("a batch size"),
    judge=equal,
    why=_nhwc_why,
    hints=(
        "The conversion reads and writes every element of the input and the output once more; the "
        "convolution's time does not grow the same way with N.",
        "The layout panel below offers each batch size: compare the two stacked bars' heights.",
    ),
    wrong=_nhwc_wrong,
    example=8,
)


# ---- explain, worked out: after how many layers converting once pays -------------------------------
def _payoff_inputs() -> dict:
    t = ok_rows(result("layout")).set_index("layout")
    return dict(
        convert_us=float(t.loc["NHWC", "convert_gpu_us"]),
        nchw_us=float(t.loc["NCHW", "conv_gpu_us"]),
        nhwc_us=float(t.loc["NHWC", "conv_gpu_us"]),
    )


def _payoff_model(convert_us, nchw_us, nhwc_us) -> float:
    """Layers after which one conversion is repaid by what each layer saves in NHWC (inf: never)."""
    saved = nchw_us - nhwc_us
    return convert_us / saved if saved > 0 else math.inf


def _payoff_why(truth: float) -> str:
    x = {k: as_written(v, fmt_us) for k, v in _payoff_inputs().items()}  # the sums add up as read
    saved = x["nchw_us"] - x["nhwc_us"]
    if not math.isfinite(truth):
        return (
            f"NHWC runs this convolution no faster ({fmt_us(x['nhwc_us'])} against {fmt_us(x['nchw_us'])}): "
            "never."
        )
    per_layer = (
        "Converting around every layer never pays: each would spend "
        f"{fmt_us(x['convert_us'])} to save {fmt_us(saved)}."
        if x["convert_us"] > saved
        else "Here even converting around a single layer pays."
    )
    return (
        f"The layout chart at batch 32: {fmt_us(x['convert_us'])} / ({fmt_us(x['nchw_us'])} - "
        f"{fmt_us(x['nhwc_us'])}) = {x['convert_us'] / saved if saved > 0 else truth:.1f} layers: from "
        f"{math.ceil(truth)} layers of this kind on, converting once at the start and once at the end beats "
        f"staying in NCHW, and every further layer saves {fmt_us(saved)}. {per_layer} Keep a network in one "
        "layout, and convert at its edges if you must."
    )


def _payoff_slips() -> list:
    x = _payoff_inputs()
    saved = x["nchw_us"] - x["nhwc_us"]
    return [
        (saved / x["convert_us"], "that is the saving over the cost: turn it over."),
        (
            x["convert_us"] / x["nchw_us"],
            "divide the conversion by what one layer saves, not by its NCHW time.",
        ),
        (
            x["convert_us"] / x["nhwc_us"],
            "divide the conversion by what one layer saves, not by its NHWC time.",
        ),
    ]


nhwc_payoff_layers = worked(
    name="nhwc_payoff_layers",
    lesson="03",
    question=(
        "Your tensors are NCHW. Convert them to NHWC once, run a chain of L convolutions like the base one "
        "(batch 32) in NHWC, and convert the result back once: from how many layers L on does that beat "
        "running every layer in NCHW? Take the conversion measured at batch 32 as the one-time cost (the "
        "break-even as a real number, or the whole number of layers)."
    ),
    inputs=_payoff_inputs,
    model=_payoff_model,
    rel=0.1,
    unit="a number of layers",
    judge=lambda answer, truth: (
        abs(answer - truth) <= 0.1 * abs(truth) or (math.isfinite(truth) and answer == math.ceil(truth))
    ),
    why=_payoff_why,
    hints=(
        "Like autotuning, converting is a one-time cost repaid a little on every layer: how much does one "
        "layer save by running in NHWC?",
        "Layers to break even = the conversion's time / (the NCHW convolution's time - the NHWC one's); "
        "the layout panel above, with N at 32, writes all three on its bars.",
    ),
    wrong=slips(
        _payoff_slips,
        rel=0.1,
        unit="layers",
        high="more layers than the model gives: the saving per layer is the whole gap between the layouts.",
        low="fewer layers than the model gives: the conversion is paid once, in full.",
    ),
    wrong_answers=lambda truth: [1 / truth, truth * 3, 1.0],
)
