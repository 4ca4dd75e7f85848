"""Lesson 07, the lab: exercises answered only by moving the lab panel's controls
(`labkit.present.widgets.LabPanel`), and a hands-on cell (`handson`: cap the workspace, find the knee).

The lab draws the other lessons' experiments for any convolution, so this topic has no experiment,
chart or recorded call of its own: only its exercises, each computed from the same results the lab
draws (`core.result`: recorded, or measured on this GPU)."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import fmt_bytes, ok_rows
from ..core import BASE, result
from ..exercise import Exercise, equal, explain, one_of, same_value
from ..worked import bandwidth, bandwidth_given, gpu_of, rate, slips, worked
from .handson import HANDS_ON as _KNEE
from .handson import WORKSPACE_KNEE, workspace_knee  # noqa: F401
from .same_code import OTHER_GPU, other_gpu  # noqa: F401

LESSON = "07"
#: the dtypes and directions the lab's plans chart reaches from its base (fp16 NHWC fprop), recorded
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")
DIRECTIONS = ("fprop", "dgrad", "wgrad")


def _plans(**change):
    return ok_rows(result("plans", spec=BASE.replace(**change)))


# ---- explore: which dtype runs the fewest plans ---------------------------------------------------
def _plan_counts() -> dict:
    return {d: len(_plans(dtype=d)) for d in DTYPES}


def _fewest_why(truth: str) -> str:
    counts = _plan_counts()
    others = ", ".join(f"{d} {n}" for d, n in counts.items() if d != truth)
    return (
        f"{truth} runs {counts[truth]} plans at this shape (NHWC), against {others}. Fewer plans: fewer "
        "kernels cuDNN has for that precision at this shape, less for autotuning to choose from."
    )


lab_fewest_plans = Exercise(
    name="lab_fewest_plans",
    lesson=LESSON,
    kind="explore",
    question=(
        "In the lab, chart 'plans' (the base convolution, NHWC, fprop): move dtype. Which dtype has the "
        "fewest plans that run?"
    ),
    truth=lambda: min(_plan_counts().items(), key=lambda kv: kv[1])[0],
    parse=one_of(DTYPES, "a dtype"),
    judge=same_value(_plan_counts),
    why=_fewest_why,
    hints=(
        "the plans chart's subtitle says how many plans were timed.",
        "try every value of the dtype control; the fewest points on the chart wins.",
    ),
    wrong=lambda a, t: f"{a} runs {_plan_counts()[a]} plans: another dtype runs fewer.",
    example="bf16",
    wrong_answers=lambda t: [d for d, n in _plan_counts().items() if n != _plan_counts()[t]][:2],
)


# ---- explore: which direction has the most plans needing no workspace ----------------------------
def _zero_counts() -> dict:
    return {d: int((_plans(direction=d)["workspace_bytes"] == 0).sum()) for d in DIRECTIONS}


def _zero_why(truth: str) -> str:
    counts = ", ".join(f"{d} {n} of {len(_plans(direction=d))}" for d, n in _zero_counts().items())
    return f"plans needing 0 B: {counts}."


lab_zero_workspace = Exercise(
    name="lab_zero_workspace",
    lesson=LESSON,
    kind="explore",
    question=(
        "In the lab, chart 'plans' (fp16 NHWC): move direction. Which direction has the most plans that "
        "need no workspace at all?"
    ),
    truth=lambda: max(_zero_counts().items(), key=lambda kv: kv[1])[0],
    parse=one_of(DIRECTIONS, "a direction"),
    judge=same_value(_zero_counts),
    why=_zero_why,
    hints=(
        "the plans chart's lower panel writes '0 MiB' above every plan that needs no workspace.",
        "count the '0 MiB' labels for each value of the direction control.",
    ),
    wrong=lambda a, t: f"{a} has {_zero_counts()[a]} such plans: another direction has more.",
    example="fprop",
    wrong_answers=lambda t: [d for d, n in _zero_counts().items() if n != _zero_counts()[t]],
)


# ---- predict: where the plans spread most ------------------------------------------------------------
def _spreads() -> dict:
    out = {}
    for d in DIRECTIONS:
        ok = _plans(direction=d)
        out[d] = float(ok["gpu_us"].max() / ok["gpu_us"].min())
    return out


def _spread_why(truth: str) -> str:
    spreads = ", ".join(f"{d} {r:,.0f}x" for d, r in _spreads().items())
    return (
        f"slowest over fastest plan: {spreads}. The log axis of the plans chart shows it as the height "
        "between the first and the last point."
    )


lab_widest_spread = Exercise(
    name="lab_widest_spread",
    lesson=LESSON,
    kind="predict",
    question=(
        "Predict, then check by moving the lab's direction control (chart 'plans', fp16 NHWC): for which "
        "direction is the slowest plan the most times slower than the fastest?"
    ),
    truth=lambda: max(_spreads().items(), key=lambda kv: kv[1])[0],
    parse=one_of(DIRECTIONS, "a direction"),
    judge=equal,
    why=_spread_why,
    hints=(
        "a direction whose plans include very slow fallbacks spreads most.",
        "on each direction's plans chart, compare the lowest and the highest point (a log axis).",
    ),
    wrong=lambda a, t: (
        f"in {a}, the slowest plan takes {_spreads()[a]:,.0f}x the fastest's time: another direction's plans "
        "spread wider."
    ),
    example="fprop",
    wrong_answers=lambda t: [d for d in DIRECTIONS if d != t],
)


# ---- explain: a cap that costs nothing ---------------------------------------------------------------
FP32_NCHW = BASE.replace(dtype="fp32", layout="NCHW")
FREE_CAP_REASONS = {
    "caps_ignored": "cuDNN ignores workspace caps in fp32.",
    "noise_hides": "The cap does cost time, but the timing noise hides it.",
    "best_needs_none": "The fastest plan for fp32 NCHW needs no workspace at all, so no cap removes it.",
    "no_tensor_cores": "fp32 runs without tensor cores, and such plans never use a workspace.",
}


def _free_cap():
    caps = ok_rows(result("caps", spec=FP32_NCHW)).set_index("cap_bytes")
    return caps, caps.loc[-1], caps.loc[0]


def _free_cap_truth() -> str:
    _, unl, _ = _free_cap()
    return "best_needs_none" if int(unl.workspace_bytes) == 0 else "noise_hides"


def _free_cap_why(truth: str) -> str:
    _, unl, zero = _free_cap()
    return (
        f"with no cap the fastest plan is {unl.best_plan}, which needs {fmt_bytes(unl.workspace_bytes)}; "
        f"under the 0 B cap the best plan is {zero.best_plan} again ({zero.slowdown_vs_unlimited:.3f}x): "
        f"the cap removed {int(unl.plans_within_cap - zero.plans_within_cap)} plans, none of them the "
        "fastest."
    )


def _free_cap_wrong(answer: str, truth: str) -> Optional[str]:
    _, unl, zero = _free_cap()
    dropped = int(unl.plans_within_cap - zero.plans_within_cap)
    if answer == "caps_ignored":
        return (
            f"The 0 B cap left {int(zero.plans_within_cap)} of {int(unl.plans_within_cap)} plans: it did "
            "remove some."
        )
    if answer == "noise_hides":
        return (
            f"Under the 0 B cap the best plan is {zero.best_plan}, the same plan as with no cap: no cost to "
            "hide."
        )
    if answer == "no_tensor_cores":
        need = int(_plans(dtype="fp32", layout="NCHW")["workspace_bytes"].max())
        return (
            f"fp32 NCHW has plans that need a workspace (up to {fmt_bytes(need)}); the 0 B cap dropped "
            f"{dropped}."
        )
    return None


lab_free_cap = explain(
    name="lab_free_cap",
    lesson=LESSON,
    question=(
        "In the lab, chart 'caps' with dtype fp32 and layout NCHW: even the 0 B cap costs nothing "
        "measurable. Why?"
    ),
    truth=_free_cap_truth,
    why=_free_cap_why,
    hints=(
        "hover over the caps chart's bars: which plan is the best under each cap, and what does it need?",
        "compare the best plan under 0 B with the best plan with no cap.",
    ),
    wrong=_free_cap_wrong,
    choices=FREE_CAP_REASONS,
)

# ---- explain, worked out: what moving the largest workspace takes ------------------------------------
FP32_NHWC = BASE.replace(dtype="fp32", layout="NHWC")


def _traffic_inputs() -> dict:
    df = _plans(dtype="fp32", layout="NHWC")
    pick = df[df["heuristic_pick"].astype(bool)].iloc[0]
    return dict(
        workspace_bytes=int(pick.workspace_bytes),
        plan_us=float(pick.gpu_us),
        bandwidth=bandwidth(gpu_of(result("plans", spec=FP32_NHWC))),
    )


def _traffic_model(workspace_bytes, plan_us, bandwidth) -> float:
    """Percent of the plan's GPU time that writing and reading its workspace once takes at ``bandwidth``."""
    return 100 * (2 * workspace_bytes / bandwidth * 1e6) / plan_us


def _traffic_why(truth: float) -> str:
    x = _traffic_inputs()
    moved = 2 * x["workspace_bytes"] / x["bandwidth"] * 1e6
    df = _plans(dtype="fp32", layout="NHWC")
    best = df[df["best"].astype(bool)].iloc[0]
    tensors = sum(FP32_NHWC.tensor_bytes.values())
    return (
        f"2 x {x['workspace_bytes']:,} B / {rate(x['bandwidth'])} = {moved:.1f} us, of the "
        f"{x['plan_us']:.1f} us the plan takes: {truth:.0f}%. Its tensors are {fmt_bytes(tensors)} in all, "
        f"read or written once: its workspace traffic is {2 * x['workspace_bytes'] / tensors:.0f}x theirs. "
        f"The fastest fp32 NHWC plan asks {fmt_bytes(best.workspace_bytes)} and takes {best.gpu_us:.1f} us. "
        "A workspace costs time, not only memory."
    )


def _traffic_slips() -> list:
    x = _traffic_inputs()
    t = _traffic_model(**x)
    return [
        (t / 2, "that counts each workspace byte once: it is written, then read."),
        (
            2 * x["workspace_bytes"] / x["bandwidth"] * 1e6,
            "that is the traffic's time in microseconds; the "
            "question asks its share of the plan's time, in percent.",
        ),
    ]


lab_workspace_traffic = worked(
    name="lab_workspace_traffic",
    lesson=LESSON,
    question=(
        "In the lab, chart 'plans', dtype fp32, layout NHWC: the heuristic's plan asks for a large "
        "workspace. If it writes that workspace once and reads it once, what share of its "
        "GPU time does that traffic take at the datasheet memory bandwidth, in percent?"
    ),
    inputs=_traffic_inputs,
    model=_traffic_model,
    rel=0.1,
    unit="percent",
    given=bandwidth_given("plans", spec=FP32_NHWC),
    why=_traffic_why,
    hints=(
        "Two steps: the traffic's time (bytes / bandwidth), then its share of the plan's GPU time (hover "
        "the heuristic's pick for both its time and its workspace).",
        "Time = 2 x the workspace in bytes / the bandwidth in B/s, x 1e6 for microseconds; the share = that "
        "/ the plan's microseconds, x 100.",
    ),
    wrong=slips(
        _traffic_slips,
        rel=0.1,
        unit="percent",
        high="more than the model gives: twice the workspace, over the bandwidth, over the plan's time.",
        low="less than the model gives: take the heuristic's plan, the one with the largest workspace.",
    ),
    wrong_answers=lambda truth: [truth / 2, truth * 3, truth / 100],
)

CHARTS: dict = {}
EXERCISES = (lab_fewest_plans, lab_zero_workspace, lab_widest_spread, lab_free_cap, lab_workspace_traffic)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (workspace_knee, other_gpu)
#: hands-on cells: name -> (reference source, fresh GPU[, its lesson when not the lab's]); lesson 08 has
#: no topic of its own (its comparisons are `labkit.present.compare`): its cell is the lab's
HANDS_ON = {**_KNEE, "other_gpu": (OTHER_GPU, True, "08")}
#: the hands-on cells that run the same code on every GPU of their lesson (`labkit.practice.gpus`)
HANDS_ON_EVERY_GPU = ("other_gpu",)


def recorded_calls(quick: bool = False) -> list:
    """The lab records nothing of its own: it draws the other lessons' recorded calls.

    Args:
        quick: the base calls only (the same: none).

    Returns:
        An empty list.
    """
    return []
