"""Lesson 05's exercises (`labkit.experiments.exercise`): predict what a 1 MiB cap costs, find the
smallest cap that costs under 5%, explain when autotuning pays off, work out what one rebuild of a
graph costs in calls."""

from __future__ import annotations

import math

from ...draw.plots import fmt_bytes, fmt_seconds, fmt_us, ok_rows
from ..core import BASE, MIB, result
from ..exercise import Exercise, equal, explain, number, one_of
from ..worked import slips, worked
from .charts import cap_label
from .runs import BUILD_STAGES

NCHW = BASE.replace(layout="NCHW")
#: the answers of the 1 MiB prediction, from a cap that costs nothing to one that costs a lot
SLOWDOWN_BUCKETS = ("under 1.1x", "1.1x to 2x", "2x to 5x", "over 5x")


def _bucket(ratio: float) -> str:
    return SLOWDOWN_BUCKETS[sum(ratio >= edge for edge in (1.1, 2.0, 5.0))]


def _cap_row(spec, cap_bytes: int):
    df = ok_rows(result("caps", spec=spec))
    return df[df["cap_bytes"] == cap_bytes].iloc[0]


def _1mib_why(truth: str) -> str:
    row = _cap_row(NCHW, MIB)
    unl = _cap_row(NCHW, -1)
    return (
        f"measured {row.slowdown_vs_unlimited:.2f}x ({fmt_us(row.gpu_us)} against {fmt_us(unl.gpu_us)}). "
        f"Only {int(row.plans_within_cap)} of {int(unl.plans_within_cap)} plans need 1 MiB or less; the "
        f"best of them, {row.best_plan}, needs {fmt_bytes(row.workspace_bytes)}, while every fast plan "
        f"needs about {fmt_bytes(unl.workspace_bytes)}: the cap removes them all."
    )


def _1mib_wrong(answer: str, truth: str) -> str:
    lower = SLOWDOWN_BUCKETS.index(answer) < SLOWDOWN_BUCKETS.index(truth)
    return "The cap costs more than that." if lower else "The cap costs less than that."


cap_1mib_prediction = Exercise(
    name="cap_1mib_prediction",
    lesson="05",
    kind="predict",
    question=(
        "Predict before the caps chart: fp16 NCHW with the workspace capped at 1 MiB, how many times "
        "slower will the best plan that fits be than the unlimited best? One of "
        f"{', '.join(map(repr, SLOWDOWN_BUCKETS))}."
    ),
    truth=lambda: _bucket(float(_cap_row(NCHW, MIB).slowdown_vs_unlimited)),
    parse=one_of(SLOWDOWN_BUCKETS, "a slowdown range"),
    judge=equal,
    why=_1mib_why,
    hints=(
        "which plans fit in 1 MiB? The workspace panel of the plans chart shows what each plan needs.",
        "find the fastest plan whose workspace is under 1 MiB on the plans chart and compare its time with "
        "the fastest plan's.",
    ),
    wrong=_1mib_wrong,
    example="2x to 5x",
    wrong_answers=lambda t: [b for b in SLOWDOWN_BUCKETS if b != t][:2],
)

FREE_CAP_SPEC = BASE  # fp16 NHWC: the caps panel's layout control reaches it


def _free_cap_mib() -> float:
    df = ok_rows(result("caps", spec=FREE_CAP_SPEC))
    fits = df[(df["slowdown_vs_unlimited"] < 1.05) & (df["cap_bytes"] >= 0)]
    mib = float(fits["cap_bytes"].min()) / MIB if len(fits) else float("inf")
    return int(mib) if mib.is_integer() else mib  # a whole number of MiB reads as one


def _free_cap_why(truth: float) -> str:
    df = ok_rows(result("caps", spec=FREE_CAP_SPEC)).sort_values("cap_bytes")
    row = df[df["cap_bytes"] == int(truth * MIB)].iloc[0]
    below = df[(df["cap_bytes"] >= 0) & (df["cap_bytes"] < row.cap_bytes)]
    text = (
        f"{cap_label(row.cap_bytes)}: its best plan ({row.best_plan}, workspace "
        f"{fmt_bytes(row.workspace_bytes)}) is {row.slowdown_vs_unlimited:.3f}x the unlimited best."
    )
    if len(below):
        b = below.iloc[-1]
        text += f" Below it, {cap_label(b.cap_bytes)} costs {b.slowdown_vs_unlimited:.2f}x."
    else:
        text += " No workspace at all: in fp16 NHWC a plan that needs none comes close to the fastest."
    return text


def _free_cap_wrong(answer: float, truth: float) -> str:
    recorded = {c / MIB for c in result("caps", spec=FREE_CAP_SPEC)["cap_bytes"] if c >= 0}
    if answer not in recorded:
        return f"Answer one of the recorded caps, in MiB: {', '.join(f'{c:g}' for c in sorted(recorded))}."
    return "That cap costs 5% or more." if answer < truth else "A smaller recorded cap also stays under 5%."


smallest_free_cap = Exercise(
    name="smallest_free_cap",
    lesson="05",
    kind="explore",
    question=(
        "Move the caps panel's layout to NHWC (fp16, the base convolution): what is the smallest recorded "
        "cap whose best plan costs less than 5% more than unlimited? Answer in MiB (0 for the 0 B cap)."
    ),
    truth=_free_cap_mib,
    parse=number("a cap in MiB"),
    judge=equal,
    why=_free_cap_why,
    hints=(
        "the caps panel, layout NHWC: read the bottom plot, slowdown against unlimited, from the left.",
        "under 5% is a slowdown below 1.05x; a label marked 'within noise' counts too.",
    ),
    wrong=_free_cap_wrong,
    example=16,
    wrong_answers=lambda t: [256, 64] if t < 64 else [0, 1],
)

PAYOFF_SPECS = {"fp32 NCHW": BASE.replace(dtype="fp32", layout="NCHW"), "fp16 NHWC": BASE}


def _payoff(name: str) -> dict:
    df = result("build_cost", spec=PAYOFF_SPECS[name])
    s = df.set_index("stage")["seconds"]
    h, b = float(df["heuristic_gpu_us"].iloc[0]), float(df["best_gpu_us"].iloc[0])
    return dict(
        heuristic=h,
        best=b,
        gain=h - b,
        tune=float(s[BUILD_STAGES[4]]),
        calls=float(df["calls_to_pay_off_autotune"].iloc[0]),
    )


PAYOFF_CHOICES = {
    "more_plans": "fp16 NHWC has more plans to time, so its autotune costs too much to ever pay off.",
    "fp16_is_slower": "fp16 convolutions run slower than fp32 ones, so each call has less to save.",
    "nothing_to_win": "In fp16 NHWC the heuristic's pick is already the fastest plan, or close to it: "
    "autotuning saves a call little or nothing there, in microseconds, against what it saves in fp32 NCHW.",
    "not_saved": "An fp16 plan cannot be saved to disk, so its autotune is paid again in every session.",
}


def _payoff_truth() -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    if f16["gain"] < 0.25 * f32["gain"]:
        return "nothing_to_win"
    return "more_plans" if f16["tune"] > 4 * f32["tune"] else "fp16_is_slower"


def _calls(p: dict) -> str:
    return "never" if math.isinf(p["calls"]) else f"after {p['calls']:,.0f} calls"


def _payoff_why(truth: str) -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    return (
        f"per call, autotuning saves {f32['gain']:.1f} us in fp32 NCHW (heuristic {f32['heuristic']:.1f} "
        f"us, best {f32['best']:.1f} us) and {f16['gain']:.1f} us in fp16 NHWC ({f16['heuristic']:.1f} us "
        f"against {f16['best']:.1f} us). Its cost divided by that saving: {_calls(f32)} in fp32 NCHW, "
        f"{_calls(f16)} in fp16 NHWC. These times are the build-cost runs' own; the plans panel timed the "
        "same plans in another run, so its figures can differ."
    )


def _payoff_wrong(answer: str, truth: str) -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    if answer == "more_plans":
        return (
            f"Its autotune does take longer ({fmt_seconds(f16['tune'])} against "
            f"{fmt_seconds(f32['tune'])}), but with fp32's saving per call that would pay off after "
            f"{f16['tune'] * 1e6 / f32['gain']:,.0f} calls: look at what each call saves."
        )
    if answer == "fp16_is_slower":
        return (
            f"fp16 NHWC runs in {f16['best']:.1f} us, fp32 NCHW in {f32['best']:.1f} us: fp16 is the fast "
            "one."
        )
    if answer == "not_saved":
        return (
            "Both are saved the same way: the green dots of both build-cost charts are the save and the load."
        )
    return None


autotune_payoff_reason = explain(
    name="autotune_payoff_reason",
    lesson="05",
    question=(
        "Autotuning the base convolution pays for itself in fp32 NCHW, but far later or never in fp16 NHWC. "
        "Why? "
        "Answer from the plans panel first (set it to fp32 NCHW, then to fp16 NHWC, and compare the "
        "heuristic pick's time with the fastest plan's), then check against the two build-cost summaries."
    ),
    truth=_payoff_truth,
    why=_payoff_why,
    hints=(
        "autotuning pays off after (what it cost) / (what it saves per call): which of the two differs most?",
        "compare the heuristic's time with the best plan's time in each build-cost chart's note.",
    ),
    wrong=_payoff_wrong,
    choices=PAYOFF_CHOICES,
)


# ---- explain, worked out: what one rebuild costs, in calls -------------------------------------------
def _rebuild_inputs() -> dict:
    df = result("build_cost", spec=BASE)
    s = df.set_index("stage")["seconds"]
    return dict(rebuild_s=float(s[BUILD_STAGES[1]]), call_us=float(df["heuristic_gpu_us"].iloc[0]))


def _rebuild_model(rebuild_s, call_us) -> float:
    """How many calls' GPU time (``call_us`` each) one rebuild of ``rebuild_s`` seconds takes."""
    return rebuild_s * 1e6 / call_us


def _rebuild_why(truth: float) -> str:
    df = result("build_cost", spec=BASE)
    s = df.set_index("stage")["seconds"]
    x = _rebuild_inputs()
    hit = float(s[BUILD_STAGES[2]]) * 1e6
    return (
        f"{fmt_seconds(x['rebuild_s'])} / {fmt_us(x['call_us'])} = {truth:,.0f} calls: rebuilt on every "
        f"call, each call would take {truth + 1:,.0f}x its GPU time, {truth / (truth + 1):.1%} of it "
        f"building. A hit in labkit's cache takes {fmt_us(hit)} of host time, {hit / x['call_us']:.1f} "
        "calls' worth of GPU time: a loop that keeps the graph it looked up pays neither."
    )


def _rebuild_slips() -> list:
    df = result("build_cost", spec=BASE)
    s = df.set_index("stage")["seconds"]
    x = _rebuild_inputs()
    return [
        (
            _rebuild_model(float(s[BUILD_STAGES[0]]), x["call_us"]),
            "that uses the first build, which carries one-time set-up; every later rebuild costs what the "
            "identical rebuild costs.",
        ),
        (
            _rebuild_model(float(s[BUILD_STAGES[3]]), x["call_us"]),
            "that uses building every plan; a framework without a cache rebuilds the one graph it runs.",
        ),
    ]


rebuild_calls = worked(
    name="rebuild_calls",
    lesson="05",
    question=(
        "A framework without a graph cache rebuilds the graph on every call. How many calls' worth of GPU "
        "time does one identical rebuild cost? (The rebuild's time is on the chart; one call's GPU time is "
        "bc.heuristic_gpu_us, the heuristic plan's.)"
    ),
    inputs=_rebuild_inputs,
    model=_rebuild_model,
    rel=0.05,
    unit="a number of calls",
    why=_rebuild_why,
    hints=(
        "Put the two in one unit: how many microseconds is the rebuild?",
        "Calls = the rebuild's time in microseconds (1 ms = 1,000 us) / one call's GPU time in microseconds.",
    ),
    wrong=slips(
        _rebuild_slips,
        rel=0.05,
        unit="calls (both times in microseconds)",
        high="more calls than the model gives: take the identical rebuild, not a first build.",
        low="fewer calls than the model gives: divide the rebuild's time by one call's GPU time.",
    ),
    wrong_answers=lambda truth: [truth * 1e3, truth / 3, truth * 20],
)
