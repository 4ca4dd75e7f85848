"""Lesson 09's checklist exercise: predict which of three checklist items saves ResNet-50's pass the
most GPU time on this GPU. The answer comes from the checklist of the reports in use (batch 32, fp16
NHWC, production batch `PRODUCTION_BATCH`: `core.result`, the same measurements the lesson draws).
"""

from __future__ import annotations

from ...draw.units import us_text
from ..core import result
from ..exercise import Exercise, equal, one_of
from .checklist import checklist_table
from .checklist_run import PRODUCTION_BATCH
from .exercises import report_frame
from .tables import table_of

#: the items the learner chooses among: each saves GPU time per pass
GAIN_ITEMS = ("precision", "layout", "autotune")


def checklist_rows(net: str = "resnet50"):
    """The checklist's rows the lesson draws for a network, by item.

    Args:
        net: a preset name.

    Returns:
        `checklist_table`'s rows indexed by item (this GPU's memory not needed here).
    """
    items = result(
        "checklist_items",
        net=net,
        batch=32,
        dtype="fp16",
        layout="NHWC",
        production_batch=PRODUCTION_BATCH,
        image=224,
    )
    return checklist_table(report_frame(net), items, production_batch=PRODUCTION_BATCH).set_index("item")


def _truth() -> str:
    rows = checklist_rows().loc[list(GAIN_ITEMS)]
    return str(rows["gain_us"].astype(float).idxmax())


def _counts() -> tuple:
    """(distinct layers faster in fp16 than fp32, distinct layers measured in both; distinct layers
    whose fastest plan is not the heuristic's, distinct layers of the report)."""
    items = result(
        "checklist_items",
        net="resnet50",
        batch=32,
        dtype="fp16",
        layout="NHWC",
        production_batch=PRODUCTION_BATCH,
        image=224,
    )
    convs = items[(items["table"] == "convs") & (items["status"] == "ok") & (items["N"] == 32)]
    convs = convs[convs["layout"] == "NHWC"].pivot_table(index="spec_id", columns="dtype", values="gpu_us")
    both = convs[["fp16", "fp32"]].dropna()
    layers = table_of(report_frame(), "layers")
    layers = layers[layers["status"] == "ok"].drop_duplicates("spec_id")
    swapped = int((layers["fastest_plan"] != layers["heuristic_plan"]).sum())
    return int((both["fp16"] < both["fp32"]).sum()), len(both), swapped, len(layers)


def _why(truth: str) -> str:
    rows = checklist_rows()
    parts = [
        f"{item} {us_text(rows.loc[item, 'gain_us'])} ({rows.loc[item, 'before']} "
        f"{us_text(rows.loc[item, 'before_us'])} to {rows.loc[item, 'after']} "
        f"{us_text(rows.loc[item, 'after_us'])})"
        for item in GAIN_ITEMS
    ]
    faster, measured, swapped, distinct = _counts()
    return (
        f"A pass of ResNet-50's convolutions saves: {'; '.join(parts)}. The layout's NHWC time counts "
        f"converting the network's input once. fp16 is faster than fp32 on {faster} of the {measured} "
        f"distinct layers; autotuning picks another plan than the heuristic's on {swapped} of "
        f"{distinct}."
    )


checklist_gain = Exercise(
    name="checklist_gain",
    lesson="09",
    kind="predict",
    question="Before the checklist's chart: which item saves ResNet-50's pass (batch 32) the most GPU time "
    "on this GPU: 'precision' (fp32 to fp16), 'layout' (NCHW to NHWC, its input converted once) or "
    "'autotune' (the heuristic's plans to the fastest)?",
    truth=_truth,
    parse=one_of(GAIN_ITEMS, "a checklist item"),
    judge=equal,
    why=_why,
    hints=(
        "lesson 03 timed one convolution in each dtype and layout, lesson 05 every plan of one: how far "
        "apart were the times there?",
        "a pass is the sum of its calls: weigh how many layers each item changes by how much it changes "
        "each one (fp16 and NHWC change every layer; autotune only those whose fastest plan is not the "
        "heuristic's).",
    ),
    wrong=lambda answer, truth: "that item saves less GPU time a pass than another one here.",
    example="layout",
    leaks=lambda truth: (),  # the choices are the checklist's items, which the lesson names above
    wrong_answers=lambda truth: [i for i in GAIN_ITEMS if i != truth],
)
