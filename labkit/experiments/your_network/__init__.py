"""Lesson 09, your network: every convolution layer of a network under every workspace strategy,
with the memory timeline of one pass and the time a workspace cap costs.

One experiment, `network_report`, answers "what do these strategies cost for *my* network, at
*my* batch size, on *my* GPU, and does it fit?". Its DataFrame is long: a ``table`` column says
which of five tables a row belongs to (`labkit.report` splits them into a `Report`):

==============  ===============================================================================
``layers``      one row per convolution call of the pass, in order (forward; with ``training``
                also the backward calls: dgrad and wgrad of each layer, last layer first; no
                dgrad for the first layer, whose input needs no gradient). Per row: the
                heuristic's plan, the fastest plan and the smallest-workspace plan, each with
                its GPU time (CUDA-graph replay median, us) and workspace bytes, and whether all
                three outputs matched the float64 reference (``checked``, ``max_rel_error``).
``plans``       every plan timed, per distinct spec (``spec_id``): what the budget curve is
                made of. Identical layers are measured once (`labkit.networks.unique`).
``strategies``  one row per workspace strategy running the whole pass with each call's fastest
                plan (falling back to a smaller plan when the strategy cannot give its
                workspace): GPU time of a pass (two events around it: kernels plus any GPU idle,
                us), host time of a pass (us), peak workspace held, bytes still held after,
                allocator calls in the first pass and in a later pass, fallbacks.
``timeline``    per strategy and call of the first pass (from nothing held): ``held_bytes``,
                the most workspace memory the strategy held while that call ran (its peak over
                the pass is the strategy's ``peak_workspace_bytes``), and ``held_after_bytes``.
``budget``      per workspace cap: the pass time if each call used its fastest plan within the
                cap (a sum of measured plan times, not a new measurement), and how many calls
                change plan or have none that fits.
==============  ===============================================================================

Bounded: each step of a report (one distinct convolution: its build, autotune and checks; one
strategy's pass) has a budget of `step_budget_s` seconds and runs in a worker process
(`labkit.gpu.host.isolated`): inside, the build, each plan's timing and the autotune stop between
their parts when their budgets are spent (a plan that took too long is a ``plans`` row ``timed
out after ... in capture``; one left when a budget was spent, ``cut: ...``; one far slower than
the best after one eager call, ``slower: ...``);
a step that still has not answered `KILL_GRACE_S` after its budget is killed with its worker,
and its layer is a row with status ``timed_out`` naming the phase it was in. The report goes
on, and `cut_counts` says how many plans and layers were cut (and how many plans were left as
known to be slower).

Everything about the experiment lives in this package, one part per concept: `request` (what a report
measures: the network, the calls of a pass, the strategies, caps and step budgets), `runs` (the run
function, `network_report`, whose steps run in the worker process: `labkit.gpu.report_steps`),
`checklist_run` and `checklist_steps` (the performance checklist's measurements, `checklist_items`, and
its steps in the worker process), `tables` (the long frame's tables), `charts`, `summary`, `exercises`
(the lesson's exercises); the calls of the recorded grid are below. Bytes; microseconds; seconds for
budgets.
"""

from __future__ import annotations

from ..panel_config import plain_panel
from .charts import STRATEGY_COLORS, STRATEGY_DASHES, network_report_chart
from .checklist_exercise import checklist_gain
from .checklist_run import (
    CHECKLIST_BUDGET_S,
    CHECKLIST_DTYPES,
    CHECKLIST_TABLES,
    LAYER_BUDGET_S,
    PRODUCTION_BATCH,
    VARIANT_BUDGET_S,
    WARM_BUDGET_S,
    check_production_batch,
    checklist_items,
    variants_of,
)
from .exercises import async_pool_holds, small_cap_cost, vgg16_workspace, zero_cap_pass
from .handson import HANDS_ON, NETWORK_PASS, network_pass, three_layers
from .request import (
    BUDGET_CAPS,
    KILL_GRACE_S,
    RECORDED_PRESETS,
    REPORT_STRATEGIES,
    STEP_BUDGET_S,
    TABLES,
    network_of,
    pass_steps,
    step_budget_s,
    strategy_labels,
)
from .runs import network_report
from .summary import network_report_summary
from .tables import budget_rows, cut_counts, layer_rows, over_cap_rows, table_of, whole_numbers

__all__ = [
    "REPORT_STRATEGIES",
    "strategy_labels",
    "BUDGET_CAPS",
    "TABLES",
    "RECORDED_PRESETS",
    "STEP_BUDGET_S",
    "KILL_GRACE_S",
    "STRATEGY_COLORS",
    "STRATEGY_DASHES",
    "step_budget_s",
    "network_of",
    "pass_steps",
    "network_report",
    "checklist_items",
    "CHECKLIST_DTYPES",
    "CHECKLIST_TABLES",
    "CHECKLIST_BUDGET_S",
    "LAYER_BUDGET_S",
    "VARIANT_BUDGET_S",
    "WARM_BUDGET_S",
    "PRODUCTION_BATCH",
    "variants_of",
    "check_production_batch",
    "table_of",
    "whole_numbers",
    "cut_counts",
    "layer_rows",
    "budget_rows",
    "over_cap_rows",
    "network_report_chart",
    "network_report_summary",
    "small_cap_cost",
    "zero_cap_pass",
    "vgg16_workspace",
    "checklist_gain",
    "async_pool_holds",
    "HANDS_ON",
    "HANDS_ON_CHECKS",
    "NETWORK_PASS",
    "network_pass",
    "three_layers",
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
        quick: ResNet-50 only.

    Returns:
        (experiment, kwargs) pairs.
    """
    calls = [("network_report", dict(net=n, batch=32, dtype="fp16", layout="NHWC")) for n in RECORDED_PRESETS]
    checklist = [
        (
            "checklist_items",
            dict(net=n, batch=32, dtype="fp16", layout="NHWC", production_batch=PRODUCTION_BATCH),
        )
        for n in RECORDED_PRESETS
    ]
    return calls[:1] + checklist[:1] if quick else calls + checklist


LESSON = "09"
CHARTS = {"network_report": (network_report_chart, 11, network_report_summary)}
#: the exercises, in the order the lesson asks them
EXERCISES = (small_cap_cost, zero_cap_pass, async_pool_holds, vgg16_workspace, checklist_gain)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (network_pass,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "network_report": plain_panel(
        "network_report",
        "Your network: every conv layer, every strategy",
        dict(net="resnet50", batch=32, dtype="fp16", layout="NHWC"),
        "resnet50, batch 32, fp16 NHWC, inference",
        describe=lambda s: f"{s['net']}, batch {s['batch']}, {s['dtype']} {s['layout']}, inference",
    )
}
