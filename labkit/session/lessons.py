"""What the lesson notebooks call, by one name (``from labkit import lessons``): the session's
results (`labkit.session.results`: ``data``, ``prefetch``, ``forget``, ``base``), the lessons' texts
(`labkit.session.texts`: ``banner``, ``mode_note``, ``contents``, ``show_source``), every topic's
summaries, and ``chart``/``summary`` for any experiment's DataFrame. Summaries format every number
from the results at run time (no measured number is ever written into a notebook).
"""

from __future__ import annotations

import json
from typing import Optional

from .. import env, experiments, practice
from ..draw.plots import provenance_subtitle, request_spec
from ..draw.prose import Text, table  # noqa: F401
from ..errors import RecordedDataError
from ..experiments import (  # noqa: F401
    CAPS,  # lesson 07's hands-on: the caps experiment's caps
    KNOBS_SPEC,  # lesson 11's hands-on: the convolution its switches ran on
)

# the summaries, by the names notebooks use
from ..experiments.epilogue_fusion import fusion_summary  # noqa: F401
from ..experiments.plans_autotune import (  # noqa: F401
    build_cost_summary,
    caps_summary,
    plans_summary,
    timing_noise_summary,
)
from ..experiments.precision_layout import (  # noqa: F401
    fp8_vs_fp16,
    layout_summary,
    nchw_kernels,
    precision_summary,
    roofline_summary,
)
from ..experiments.start_here import fp32_layout_note, simulator_note  # noqa: F401  (lesson 00)
from ..experiments.streams import race_all, race_summary  # noqa: F401
from ..experiments.workspace_basics import (  # noqa: F401
    algorithms_summary,
    sweep_summary,
    workspace_sizes_summary,
)
from ..experiments.workspace_strategies import (  # noqa: F401
    dims_only_summary,
    pressure_summary,
    strategies_summary,
)
from ..experiments.your_network import three_layers  # noqa: F401  (lesson 09's hands-on)
from ..store import recordings
from .results import (  # noqa: F401
    base,
    contended,
    data,
    forget,
    is_cached,
    prefetch,
)
from .texts import (  # noqa: F401
    DRAWS,
    LESSONS,
    banner,
    contents,
    mode_note,
    recorded_sources,
    show_source,
    start_build_workers,
)


def device():
    """The GPU hands-on cells run on (`labkit.practice.Practice`): this machine's, or in recorded mode
    one simulated from the recording in use. A hands-on cell that starts a task makes a fresh one.

    Returns:
        The `labkit.practice.Practice` (``gpu.conv``, ``gpu.stream``, ``gpu.allocate``, ``gpu.event``...).
    """
    return practice.current()


def gpus():
    """The GPUs lesson 08's hands-on cell runs the same code on (`labkit.practice.gpus`): this GPU
    live and each other shipped recording's GPU simulated from it; in recorded mode, every one
    simulated.

    Returns:
        GPU name -> `labkit.practice.Practice`.
    """
    return practice.gpus()


def knobs(net: Optional[str] = None, *, measure: bool = False):
    """Lesson 11's switches measured through PyTorch (`torch_knobs` of `KNOBS_SPEC`).

    Recorded, from the recording in use. Live, this session's or this GPU's saved result, else measured
    now (a fresh process per setting); a network is measured only when asked (``measure``).

    Args:
        net: a network (``"resnet50"``), or None for the convolution.
        measure: live, measure the network when no result is at hand.

    Returns:
        The DataFrame; None live for a network not measured (a line says how to measure it).
    """
    kwargs = dict(spec=KNOBS_SPEC, net=net)
    if env.mode().live:
        if net is not None and not measure and not is_cached("torch_knobs", **kwargs):
            print(f'Not measured here yet: lessons.knobs(net="{net}", measure=True) measures it{_took(net)}.')
            return None
    return data("torch_knobs", **kwargs)


def _took(net: Optional[str]) -> str:
    """How long the recorded measurement of a call took, its processes end to end, in words (the
    recording a panel of `torch_knobs` answers from; nothing when no recording holds the call)."""
    try:
        rec = recordings.for_experiment("torch_knobs")
        df = experiments.core.from_recording("torch_knobs", rec, spec=KNOBS_SPEC, net=net)
    except RecordedDataError:
        return ""
    return f" (a fresh process per setting: {df.wall_s.sum():,.0f} s on the {env_label(rec)})"


def env_label(rec) -> str:
    """A recording's GPU, as the lessons name it.

    Args:
        rec: a `labkit.store.recordings.Recording`.

    Returns:
        The GPU's label, e.g. ``H100 SXM``.
    """
    return env.gpu_label(rec.metadata.get("gpu"))


def request_text(df) -> str:
    """The request behind a result, for the curious.

    Args:
        df: an experiment's result.

    Returns:
        Its ``attrs['request']`` as JSON, keys sorted.
    """
    return json.dumps(df.attrs.get("request"), sort_keys=True)


def provenance(df) -> Text:
    """Where a result's numbers come from, in two lines: the provenance line its chart carries
    (mode, GPU, cuDNN, date) and the call it answers. ``df.attrs`` holds each as a field.

    Args:
        df: a result of `labkit.experiments` (or `data`).

    Returns:
        Markdown `Text`; no machine's paths in it.
    """
    a = getattr(df, "attrs", {}) or {}
    args = dict(a.get("request") or {})
    spec = request_spec(df)
    for key in ("spec", "base"):
        if key in args and spec is not None:
            args[key] = spec.label
    call = ", ".join(f"{k}={v}" for k, v in args.items())
    return Text(
        f"**Measured**: {provenance_subtitle(df)}  \n**Answers**: `{a.get('experiment', '?')}({call})`"
    )


def chart(df):
    """The chart for any experiment's result, by ``attrs['experiment']`` (`labkit.experiments.chart`).

    Args:
        df: an experiment's result.

    Returns:
        The ``go.Figure``.
    """
    return experiments.chart(df)


def summary(df) -> Optional[Text]:
    """The summary for any experiment's result, by ``attrs['experiment']``.

    Args:
        df: an experiment's result.

    Returns:
        Markdown, as a `Text`; None for a DataFrame that names no experiment with a summary.
    """
    if (getattr(df, "attrs", {}) or {}).get("experiment") not in experiments.SUMMARIES:
        return None
    return experiments.summary(df)
