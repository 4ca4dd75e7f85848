"""Lesson 03, precision and layout: fp32/tf32/fp16/bf16/fp8 and NCHW/NHWC, speed, error and
workspace, and where ResNet-50's layers sit on this GPU's roofline.

Its parts, one concept each: `runs` (the experiments), `charts` (their point labels placed by
`labkit.draw.labels`), `summaries` (the sentences under the charts, the fp8 and NCHW explanations),
`exercises`, `handson` (does converting to NHWC pay: the reference solution and its check); here,
the calls the recorded grid holds and what the lesson's panels show."""

from __future__ import annotations

from ..core import BASE, variants
from ..panel_config import SHAPE, plain_panel, spec_panel
from .charts import layout_chart, precision_chart, roofline_chart
from .exercises import (
    dtype_speed_order,
    fp8_total_error,
    fp8_wins_up_to,
    nhwc_closest_batch,
    nhwc_payoff_layers,
)
from .handson import HANDS_ON, NHWC_PAYS, nhwc_pays
from .runs import layout, precision, resnet50_shapes, roofline
from .summaries import (
    fp8_vs_fp16,
    kernel_origin,
    layout_summary,
    nchw_kernels,
    precision_summary,
    roofline_summary,
)

__all__ = [
    "layout",
    "precision",
    "resnet50_shapes",
    "roofline",
    "precision_chart",
    "layout_chart",
    "roofline_chart",
    "precision_summary",
    "layout_summary",
    "roofline_summary",
    "fp8_vs_fp16",
    "nchw_kernels",
    "kernel_origin",
    "dtype_speed_order",
    "fp8_total_error",
    "fp8_wins_up_to",
    "nhwc_closest_batch",
    "HANDS_ON",
    "HANDS_ON_CHECKS",
    "NHWC_PAYS",
    "nhwc_pays",
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
        ("precision", dict(spec=BASE)),
        ("precision", dict(spec=BASE.replace(layout="NCHW"))),
        ("layout", dict(spec=BASE)),
        ("roofline", dict(dtype="fp16", layout="NHWC")),
    ]
    if quick:
        return calls
    for s in variants()[1:]:
        calls += [("precision", dict(spec=s)), ("layout", dict(spec=s))]
    calls.append(("layout", dict(spec=BASE.replace(dtype="fp32"))))
    for d, lay in (
        ("bf16", "NHWC"),
        ("fp16", "NCHW"),
        ("fp32", "NCHW"),
        ("tf32", "NHWC"),
        ("fp8_e4m3", "NHWC"),
    ):
        calls.append(("roofline", dict(dtype=d, layout=lay)))
    return calls


LESSON = "03"
CHARTS = {
    "precision": (precision_chart, 4, precision_summary),
    "layout": (layout_chart, 2, layout_summary),
    "roofline": (roofline_chart, 2, roofline_summary),
}
EXERCISES = (dtype_speed_order, fp8_total_error, fp8_wins_up_to, nhwc_closest_batch, nhwc_payoff_layers)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (nhwc_pays,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "precision": spec_panel("precision", "Precision: speed and error", SHAPE + ("layout", "direction"), BASE),
    "layout": spec_panel("layout", "NCHW vs NHWC", SHAPE + ("dtype", "direction"), BASE),
    "roofline": plain_panel(
        "roofline",
        "Roofline",
        dict(dtype="fp16", layout="NHWC", N=32),
        "fp16 NHWC, batch 32",
        describe=lambda s: f"{s['dtype']} {s['layout']}, batch {s['N']}",
    ),
}
