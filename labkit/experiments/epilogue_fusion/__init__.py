"""Lesson 04, fusion: convolution + bias + activation (+ residual add) as one cuDNN graph against
the unfused sequence: time, memory traffic and allocations.

Its parts, one concept each: `runs` (the experiment), `charts`, `summaries`, `exercises`; here,
the calls the recorded grid holds and what the lesson's panel shows. Its hands-on cell (`handson`):
build the fused graph and time it against the unfused path."""

from __future__ import annotations

from ..core import BASE
from ..panel_config import SHAPE, spec_panel
from .calls import recorded_calls
from .charts import fusion_chart, repeat_spread
from .exercises import (
    fusion_least_gain,
    fusion_speedup,
    unfused_extra_time,
    unfused_tensors,
    unfused_traffic_time,
)
from .handson import FUSED_GRAPH, HANDS_ON, fused_graph  # noqa: F401
from .runs import FUSION_DTYPES, fusion
from .summaries import fusion_summary

__all__ = [
    "FUSION_DTYPES",
    "fusion",
    "fusion_chart",
    "fusion_summary",
    "repeat_spread",
    "fusion_speedup",
    "unfused_tensors",
    "unfused_traffic_time",
    "unfused_extra_time",
    "fusion_least_gain",
    "recorded_calls",
]


LESSON = "04"
CHARTS = {"fusion": (fusion_chart, 9, fusion_summary)}
EXERCISES = (fusion_speedup, unfused_tensors, unfused_traffic_time, unfused_extra_time, fusion_least_gain)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (fused_graph,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "fusion": spec_panel(
        "fusion", "Fusion", SHAPE + ("dtype", "layout"), BASE, live_options=dict(dtype=FUSION_DTYPES)
    )
}
