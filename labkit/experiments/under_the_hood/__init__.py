"""Lesson 10, under the hood: the kernels each plan launches, the GPU timeline of each workspace
strategy, the race's overlapping streams, and cuDNN's own log of a build.

Every number here comes from a traced run (`labkit.gpu.timing.trace`: CUPTI activity records), separate
from any timing run: a trace adds host time to every CUDA call, so traced durations are what the
GPU did while traced, and the host times shown (``host_us``) were measured untraced before it.

Everything about these experiments lives in this package, one part per concept: `runs` (the run
functions, live: measured now; recorded: answered from the recording), `charts`, `summaries` (the
summaries under the charts), `exercises` (the lesson's exercises); the calls the recorded grid holds
are below."""

from __future__ import annotations

from ..core import BASE
from ..panel_config import plain_panel
from .charts import (
    CHART_PLANS,
    ROLE_COLORS,
    ROLES,
    TIMELINE_KINDS,
    build_log_chart,
    fusion_kernels_chart,
    kernels_chart,
    race_timeline_chart,
    strategy_timeline_chart,
)
from .exercises import gpu_idles, idle_strategy, launch_headroom, nchw_kernels, python_overlap
from .handson import HANDS_ON, IDLE_TIME, idle_time
from .runs import (
    RACE_CONVS,
    TRACED_CALLS,
    build_log,
    fusion_kernels,
    kernels,
    race_timeline,
    strategy_timeline,
)
from .summaries import (
    build_log_summary,
    fusion_kernels_summary,
    kernels_summary,
    race_timeline_summary,
    strategy_timeline_summary,
)

__all__ = [
    "TRACED_CALLS",
    "RACE_CONVS",
    "ROLES",
    "ROLE_COLORS",
    "CHART_PLANS",
    "TIMELINE_KINDS",
    "kernels",
    "fusion_kernels",
    "strategy_timeline",
    "race_timeline",
    "build_log",
    "kernels_chart",
    "fusion_kernels_chart",
    "strategy_timeline_chart",
    "race_timeline_chart",
    "build_log_chart",
    "kernels_summary",
    "fusion_kernels_summary",
    "strategy_timeline_summary",
    "race_timeline_summary",
    "build_log_summary",
    "launch_headroom",
    "nchw_kernels",
    "idle_strategy",
    "gpu_idles",
    "python_overlap",
    "HANDS_ON",
    "HANDS_ON_CHECKS",
    "IDLE_TIME",
    "idle_time",
    "recorded_calls",
    "LESSON",
    "CHARTS",
    "EXERCISES",
    "PANELS",
]


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    Args:
        quick: the base calls only.

    Returns:
        (experiment, kwargs) pairs.
    """
    calls = [
        ("kernels", dict(spec=BASE)),
        ("strategy_timeline", dict(workload="one_conv", calls=8)),
        ("race_timeline", dict(launch="graph", streams=2)),
        ("fusion_kernels", dict(spec=BASE, epilogue="bias_relu")),
        ("build_log", dict(spec=BASE, epilogue="none")),
    ]
    if quick:
        return calls
    calls += [
        ("kernels", dict(spec=BASE.replace(layout="NCHW"))),
        ("kernels", dict(spec=BASE.replace(dtype="fp32"))),
        ("kernels", dict(spec=BASE.replace(dtype="fp32", layout="NCHW"))),
        ("kernels", dict(spec=BASE.replace(dtype="fp8_e4m3"))),
        ("race_timeline", dict(launch="python", streams=2)),
        ("fusion_kernels", dict(spec=BASE, epilogue="bias_relu_add")),
    ]
    return calls


LESSON = "10"
CHARTS = {
    "kernels": (kernels_chart, len(ROLES) + 1, kernels_summary),
    "fusion_kernels": (fusion_kernels_chart, len(ROLES), fusion_kernels_summary),
    "strategy_timeline": (strategy_timeline_chart, len(TIMELINE_KINDS), strategy_timeline_summary),
    "race_timeline": (race_timeline_chart, len(TIMELINE_KINDS), race_timeline_summary),
    "build_log": (build_log_chart, 1, build_log_summary),
}
#: the exercises, in the order the lesson asks them
EXERCISES = (launch_headroom, nchw_kernels, idle_strategy, gpu_idles, python_overlap)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (idle_time,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "race_timeline": plain_panel(
        "race_timeline",
        "The race, traced",
        dict(launch="graph"),
        "graph launch, 2 streams",
        lambda s: dict(launch=s["launch"], streams=2),
        describe=lambda s: f"{s['launch']} launch, 2 streams",
    )
}
