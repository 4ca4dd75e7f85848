"""Lesson 02, workspace strategies: fixed arena, malloc per call, keyed cache, per-stream scratchpad
and the caching pools on one workload, and under memory pressure.

Everything about these experiments lives in this package, one part per concept: `runs` (the run
function, live: measured now; recorded: answered from the recording), `charts`, `summaries`,
`exercises` and `handson` (a strategy of the learner's own: reference solution and check); the
calls the recorded grid holds and the lesson's panel are below."""

from __future__ import annotations

from ..panel_config import plain_panel
from .charts import POOL_ALLOCATORS, allocator_of, strategies_chart  # noqa: F401
from .exercises import FALLS_BACK, MALLOC_IDLE, MALLOC_SLOWDOWN, POOL_UNDER_PRESSURE
from .handson import OWN_STRATEGY_CHECK_SOURCE, OWN_STRATEGY_SOURCE, own_strategy
from .runs import WORKLOADS, strategies, strategies_repeats  # noqa: F401
from .summaries import dims_only_summary, noise_sentence, pressure_summary, strategies_summary  # noqa: F401

# ---- the recorded grid ---------------------------------------------------------------------------


def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    Args:
        quick: the base call only.

    Returns:
        (experiment, kwargs) pairs.
    """
    return [
        ("strategies", dict(workload=w, repeats=strategies_repeats(w)))
        for w in (WORKLOADS[:1] if quick else WORKLOADS)
    ]


LESSON = "02"
CHARTS = {"strategies": (strategies_chart, 8, strategies_summary)}
#: in the order the lesson asks them (`check.solutions` numbers them so)
EXERCISES = (MALLOC_SLOWDOWN, MALLOC_IDLE, POOL_UNDER_PRESSURE, FALLS_BACK)
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU): the check
#: runs the strategy on fresh GPUs of its own
HANDS_ON = {
    "own_strategy": (OWN_STRATEGY_SOURCE, False),
    "check_own_strategy": (OWN_STRATEGY_CHECK_SOURCE, False),
}
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (own_strategy,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "strategies": plain_panel(
        "strategies",
        "Workspace strategies",
        dict(workload="one_conv"),
        "workload one_conv",
        lambda s: dict(workload=s["workload"], repeats=strategies_repeats(s["workload"])),
        describe=lambda s: f"workload {s['workload']}",
    )
}
