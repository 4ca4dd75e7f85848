"""Lesson 04, fusion: convolution + bias + activation (+ residual add) as one cuDNN graph against
the unfused sequence: time, memory traffic and allocations.

Its parts, one concept each: `runs` (the experiment), `charts`, `summaries`, `exercises`; here,
the calls the recorded grid holds and what the lesson's panel shows."""

from __future__ import annotations

from ..core import BASE, variants
from ..panel_config import SHAPE, spec_panel
from .charts import fusion_chart, repeat_spread
from .exercises import fusion_loses_by, fusion_speedup, unfused_extra_time, unfused_tensors
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
    "unfused_extra_time",
    "fusion_loses_by",
]


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base call only."""
    calls = [("fusion", dict(spec=BASE))]
    if quick:
        return calls
    calls += [("fusion", dict(spec=s)) for s in variants()[1:] if s.N <= 64 and s.H <= 56]
    calls.append(("fusion", dict(spec=BASE.replace(dtype="fp32"))))
    return calls


LESSON = "04"
CHARTS = {"fusion": (fusion_chart, 9, fusion_summary)}
EXERCISES = (fusion_speedup, unfused_tensors, unfused_extra_time, fusion_loses_by)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "fusion": spec_panel(
        "fusion", "Fusion", SHAPE + ("dtype", "layout"), BASE, live_options=dict(dtype=FUSION_DTYPES)
    )
}
