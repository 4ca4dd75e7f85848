"""Lesson 01, what is a workspace: the classic algorithms and their workspaces, the workspace of every
plan per dtype x layout x direction, and how workspace grows with the shape.

Everything about these experiments lives in this package, one part per concept: `runs` (the run
functions, live: measured now; recorded: answered from the recording), `charts`, `summaries`,
`exercises` and `handson` (the hands-on cells' reference solutions and checks); the calls the
recorded grid holds and the lesson's panels are below."""

from __future__ import annotations

from ...draw.plots import shape_label
from ..core import BASE
from ..panel_config import SHAPE, PanelConfig, spec_of, spec_panel, spec_text, state_of
from .charts import SWEEP_AXIS, algorithms_chart, sweep_chart, workspace_sizes_chart  # noqa: F401
from .exercises import BATCH_WORKSPACE, COPY_TIME, LESS_WORKSPACE, NCHW_WORKSPACE
from .handson import CONV_SETUP_SOURCE, OWN_WORKSPACE_SOURCE, own_workspace
from .runs import (  # noqa: F401
    LEGACY_DTYPES,
    SWEEP_BASE,
    SWEEP_FIELD,
    SWEEP_FIELDS,
    SWEEP_VALUES,
    algorithms,
    sweep,
    workspace_sizes,
)
from .summaries import algorithms_summary, sweep_summary, workspace_sizes_summary

# ---- the recorded grid ---------------------------------------------------------------------------


def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    Args:
        quick: the base calls only.

    Returns:
        (experiment, kwargs) pairs.
    """
    nchw = BASE.replace(layout="NCHW")
    calls = [
        ("algorithms", dict(spec=nchw)),
        ("sweep", dict(field="N", values=SWEEP_VALUES["N"])),
        ("workspace_sizes", dict(spec=BASE)),
    ]
    if quick:
        return calls
    for d in ("fp16", "fp32", "tf32", "bf16"):
        for lay in ("NCHW", "NHWC"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("algorithms", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for field in ("C=K", "H=W", "R=S"):
        calls.append(("sweep", dict(field=field, values=SWEEP_VALUES[field])))
    for field in ("N", "C=K"):
        calls.append(
            (
                "sweep",
                dict(field=field, values=SWEEP_VALUES[field], base=BASE.replace(dtype="fp32", layout="NCHW")),
            )
        )
    return calls


LESSON = "01"
#: experiment -> (chart, number of traces the chart always has, summary)
CHARTS = {
    "algorithms": (algorithms_chart, 3, algorithms_summary),
    "workspace_sizes": (workspace_sizes_chart, 9, workspace_sizes_summary),
    "sweep": (sweep_chart, 2, sweep_summary),
}
EXERCISES = (LESS_WORKSPACE, BATCH_WORKSPACE, NCHW_WORKSPACE, COPY_TIME)
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {
    "conv_setup": (CONV_SETUP_SOURCE, True),
    "own_workspace": (OWN_WORKSPACE_SOURCE, False),
}
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (own_workspace,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "algorithms": spec_panel(
        "algorithms",
        "Classic algorithm table",
        SHAPE + ("dtype", "layout"),
        BASE.replace(layout="NCHW"),
        live_options=dict(dtype=LEGACY_DTYPES),
    ),
    "workspace_sizes": spec_panel("workspace_sizes", "Workspace by dtype/layout/direction", SHAPE, BASE),
    "sweep": PanelConfig(
        "sweep",
        "Sweep one dimension",
        ("field", "dtype", "layout", "direction"),
        state_of(SWEEP_BASE, field=SWEEP_FIELD),
        lambda s: dict(field=s["field"], values=SWEEP_VALUES[s["field"]], base=spec_of(s)),
        "base.",
        base_text=(
            f"swept field {SWEEP_FIELD}, {SWEEP_BASE.dtype} {SWEEP_BASE.layout} fprop "
            f"{shape_label(SWEEP_BASE)}"
        ),
        recorded_controls=("field", "dtype_layout"),
        describe=lambda s: f"swept field {s['field']}, {spec_text(spec_of(s))}",
    ),
}
