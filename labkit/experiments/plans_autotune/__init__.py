"""Lesson 05, plans, autotuning and caching: every plan cuDNN offers, workspace caps, and what
building, autotuning and loading a graph cost.

Everything about these experiments lives in this package, one part per concept: `runs` (the run
functions: live, measured now; recorded, answered from the recording), `noise` (how far separate
timings of one plan fall apart), `charts`, `summaries` (the sentences under the charts),
`exercises` and `handson` (the hands-on cell's reference solution and its check); the calls
the recorded grid holds are below."""

from __future__ import annotations

from ..core import BASE
from ..panel_config import SHAPE, spec_panel
from .charts import CAPS_GRID, PLANS_GRID, build_cost_chart, cap_label, caps_chart, plans_chart
from .exercises import autotune_payoff_reason, cap_1mib_prediction, rebuild_calls, smallest_free_cap
from .handson import HANDS_ON, TIME_EVERY_PLAN, plan_times
from .noise import Noise, caps_noise
from .runs import BUILD_STAGES, CAPS, build_cost, caps, plans
from .summaries import (
    build_cost_summary,
    caps_summary,
    fmt_error,
    plans_summary,
    timing_noise_summary,
    wrong_plans_sentence,
)

__all__ = [
    "wrong_plans_sentence",
    "fmt_error",
    "CAPS",
    "BUILD_STAGES",
    "PLANS_GRID",
    "CAPS_GRID",
    "plans",
    "caps",
    "build_cost",
    "Noise",
    "caps_noise",
    "cap_label",
    "plans_chart",
    "caps_chart",
    "build_cost_chart",
    "plans_summary",
    "timing_noise_summary",
    "caps_summary",
    "build_cost_summary",
    "cap_1mib_prediction",
    "smallest_free_cap",
    "rebuild_calls",
    "autotune_payoff_reason",
    "TIME_EVERY_PLAN",
    "HANDS_ON",
    "plan_times",
    "recorded_calls",
    "LESSON",
    "CHARTS",
    "EXERCISES",
    "PANELS",
]


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    ``build_cost`` of the base comes first: the recorder runs it while its process has built nothing.

    Args:
        quick: the base calls only.

    Returns:
        (experiment, kwargs) pairs.
    """
    nchw = BASE.replace(layout="NCHW")
    calls = [
        ("build_cost", dict(spec=BASE)),
        ("plans", dict(spec=BASE)),
        ("plans", dict(spec=nchw)),
        ("caps", dict(spec=nchw)),
    ]
    if quick:
        return calls
    for d in ("fp32", "tf32", "bf16", "fp8_e4m3"):
        for lay in ("NHWC", "NCHW"):
            calls.append(("plans", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for direction in ("dgrad", "wgrad"):
        calls.append(("plans", dict(spec=BASE.replace(direction=direction))))
    for d in ("fp16", "fp32"):
        for lay in ("NHWC", "NCHW"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("caps", dict(spec=BASE.replace(dtype=d, layout=lay))))
    calls.append(("build_cost", dict(spec=BASE.replace(dtype="fp32", layout="NCHW"))))
    return calls


LESSON = "05"
CHARTS = {
    "plans": (plans_chart, 5, plans_summary),
    "caps": (caps_chart, 3, caps_summary),
    "build_cost": (build_cost_chart, 1, build_cost_summary),
}
#: in the order the lesson asks them (`check.solutions` numbers them so)
EXERCISES = (cap_1mib_prediction, autotune_payoff_reason, rebuild_calls, smallest_free_cap)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (plan_times,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "plans": spec_panel("plans", "Every plan", SHAPE + ("dtype", "layout", "direction"), BASE),
    "caps": spec_panel(
        "caps", "Workspace cap", SHAPE + ("dtype", "layout", "direction"), BASE.replace(layout="NCHW")
    ),
    "build_cost": spec_panel(
        "build_cost",
        "Build cost",
        SHAPE + ("dtype", "layout", "direction"),
        BASE,
        recorded_controls=("dtype_layout",),
    ),
}
