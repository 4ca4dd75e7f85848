"""Lesson 11, PyTorch's knobs measured: each setting a PyTorch user has over cuDNN
(``torch.backends.cudnn.benchmark`` and ``benchmark_limit``, ``allow_tf32``, ``deterministic``,
the memory format, autocast, the plan cache's and the workspace cap's environment variables) run
through PyTorch in a fresh process, beside labkit's measurement of what cuDNN runs underneath.

Its parts, one concept each: `settings` (the settings, each one's process and its labkit
counterpart), `torch_child` (the process that measures one setting, PyTorch alone), `runs` (the
experiment), `charts`, `summaries`, `exercises`, `handson` (the settings that changed nothing: the
reference solution and its check); here, the calls the recorded grid holds."""

from __future__ import annotations

from ..panel_config import PanelConfig, spec_text
from .charts import TRACES, knobs_chart
from .exercises import benchmark_faster, benchmark_memory, resnet_first_forward
from .handson import HANDS_ON, UNCHANGED_KNOBS, unchanged_knobs
from .runs import (
    CHILD_TIMEOUT_S,
    KNOBS_SPEC,
    beside,
    kernel_key,
    knobs_result,
    parse_child,
    torch_knobs,
)
from .settings import KNOB_ENV, NETS, Setting, settings_for
from .summaries import knobs_summary, knobs_table, unchanged

__all__ = [
    "KNOBS_SPEC",
    "CHILD_TIMEOUT_S",
    "KNOB_ENV",
    "NETS",
    "Setting",
    "settings_for",
    "torch_knobs",
    "knobs_chart",
    "knobs_summary",
    "knobs_table",
    "unchanged",
    "beside",
    "knobs_result",
    "kernel_key",
    "parse_child",
    "benchmark_faster",
    "benchmark_memory",
    "resnet_first_forward",
    "HANDS_ON",
    "HANDS_ON_CHECKS",
    "UNCHANGED_KNOBS",
    "unchanged_knobs",
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
    calls = [("torch_knobs", dict(spec=KNOBS_SPEC, net=None))]
    if quick:
        return calls
    return calls + [("torch_knobs", dict(spec=KNOBS_SPEC, net="resnet50"))]


LESSON = "11"
CHARTS = {"torch_knobs": (knobs_chart, len(TRACES), knobs_summary)}
#: the exercises, in the order the lesson asks them
EXERCISES = (benchmark_faster, benchmark_memory, resnet_first_forward)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (unchanged_knobs,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`): the convolution's knobs, on the GPU picked
PANELS = {
    "torch_knobs": PanelConfig(
        "torch_knobs",
        "PyTorch's switches for cuDNN, measured",
        (),
        {},
        lambda s: dict(spec=KNOBS_SPEC, net=None),
        "",
        base_text=spec_text(KNOBS_SPEC),
        describe=lambda s: spec_text(KNOBS_SPEC),
    )
}
