"""The experiments, one module per lesson topic. Each returns a tidy pandas DataFrame (units in
column names: ``_us`` microseconds, ``_bytes`` bytes, ``_tflops``, ``_gb_s`` GB/s) with provenance
in ``df.attrs`` (mode, GPU, cuDNN, frontend, CuPy, date, source).

The same call works live and recorded: live on a GPU it measures now; in recorded mode it
answers with the rows measured for exactly these arguments on a real GPU (`labkit.store.recordings`),
or raises `RecordedDataError` naming the nearest recorded values. Nothing is interpolated. GPU
times are CUDA-graph replay medians (the kernels' own time) unless a column says otherwise.

Where things live:

* `core`: the ``@experiment`` decorator (requests, provenance, live/recorded dispatch), the
  lessons' base convolution, and `core.result` (another experiment's result for a summary or check);
* `checking`: what exercise checks are written with;
* one module per lesson topic, holding everything about its experiments: the run functions, their
  charts, the summaries under them, the exercise checks and the calls of the recorded grid
  (`workspace_basics` 01, `workspace_strategies` 02, `precision_layout` 03, `epilogue_fusion` 04,
  `plans_autotune` 05, `streams` 06, `lab` 07 (its exercises only), `your_network` 09,
  `under_the_hood` 10, `pytorch_knobs` 11). A large topic is a folder of parts, one concept each
  (``workspace_basics/``, ``workspace_strategies/``, ``precision_layout/``, ``epilogue_fusion/``,
  ``plans_autotune/``, ``your_network/``, ``under_the_hood/``, ``pytorch_knobs/``: run
  functions, charts, summaries, exercises, hands-on cells, ...); its ``__init__`` exposes the same
  names a module would. A topic's ``HANDS_ON`` (cell
  name -> reference solution source, whether the cell starts on a fresh GPU, and, for a lesson with no
  topic of its own, that lesson) and ``HANDS_ON_CHECKS``
  (the checks those cells call) are gathered by `hands_on` and `hands_on_checks`.

To add an experiment: write its run function (``@experiment``), chart, summary and checks in its
topic's module (or a new topic module listed in `TOPICS`), add it to that module's ``CHARTS`` and
``recorded_calls`` (and ``PANELS`` for a panel: `panel_config`), and use it from the lesson's notebook
(``widgets.Panel("<name>")``). A new topic module is one more line in `TOPICS`.
"""

from __future__ import annotations

from ..errors import InvalidSpec
from . import (
    epilogue_fusion,
    lab,
    plans_autotune,
    precision_layout,
    pytorch_knobs,
    streams,
    under_the_hood,
    workspace_basics,
    workspace_strategies,
    your_network,
)
from .core import (
    BASE,
    MIB,
    SWEEPS,
    experiment,
    provenance,
    registry,
    request_key,
    request_of,
    variants,
    with_model,
)
from .epilogue_fusion import FUSION_DTYPES, fusion
from .plans_autotune import CAPS, build_cost, caps, plans
from .precision_layout import layout, precision, resnet50_shapes, roofline
from .pytorch_knobs import KNOBS_SPEC, torch_knobs
from .streams import race
from .under_the_hood import build_log, fusion_kernels, kernels, race_timeline, strategy_timeline
from .workspace_basics import SWEEP_FIELDS, SWEEP_VALUES, algorithms, sweep, workspace_sizes
from .workspace_strategies import strategies
from .your_network import checklist_items, network_report

__all__ = [
    "BASE",
    "MIB",
    "SWEEPS",
    "KNOBS_SPEC",
    "CAPS",
    "FUSION_DTYPES",
    "SWEEP_FIELDS",
    "SWEEP_VALUES",
    "TOPICS",
    "TRACES",
    "experiment",
    "provenance",
    "registry",
    "request_key",
    "request_of",
    "variants",
    "with_model",
    "resnet50_shapes",
    "chart",
    "summary",
    "exercises",
    "hands_on",
    "hands_on_checks",
    "algorithms",
    "workspace_sizes",
    "sweep",
    "strategies",
    "precision",
    "layout",
    "roofline",
    "fusion",
    "plans",
    "caps",
    "build_cost",
    "race",
    "network_report",
    "checklist_items",
    "kernels",
    "fusion_kernels",
    "strategy_timeline",
    "race_timeline",
    "build_log",
    "torch_knobs",
    "PANELS",
]

#: the topic modules, in lesson order
TOPICS = (
    workspace_basics,
    workspace_strategies,
    precision_layout,
    epilogue_fusion,
    plans_autotune,
    streams,
    lab,
    your_network,
    under_the_hood,
    pytorch_knobs,
)
_CHARTS = {name: entry for topic in TOPICS for name, entry in topic.CHARTS.items()}
#: experiment -> its chart builder
CHARTS = {name: entry[0] for name, entry in _CHARTS.items()}
#: experiment -> the number of traces its chart always has (whatever the data: panels update them in place)
TRACES = {name: entry[1] for name, entry in _CHARTS.items()}
#: experiment -> its summary
SUMMARIES = {name: entry[2] for name, entry in _CHARTS.items()}
#: experiment -> its lesson panel's configuration (`labkit.present.widgets.Panel` builds it)
PANELS = {name: cfg for topic in TOPICS for name, cfg in getattr(topic, "PANELS", {}).items()}


def _name_of(df) -> str:
    name = (getattr(df, "attrs", {}) or {}).get("experiment")
    if name not in _CHARTS:
        raise InvalidSpec("df", name, f"attrs['experiment'] must name one of {', '.join(_CHARTS)}")
    return name


def chart(df):
    """The chart for any experiment's result, chosen by ``df.attrs['experiment']``.

    Args:
        df: a result of a registered experiment.

    Returns:
        A plotly ``go.Figure``; `InvalidSpec` when ``df`` names no experiment with a chart.
    """
    return CHARTS[_name_of(df)](df)


def summary(df):
    """The summary for any experiment's result, chosen by ``df.attrs['experiment']``.

    Args:
        df: a result of a registered experiment.

    Returns:
        Markdown, as a `labkit.draw.prose.Text`.
    """
    return SUMMARIES[_name_of(df)](df)


def exercises() -> dict:
    """Every topic's exercise checks.

    Returns:
        Lesson number -> that lesson's ``EXERCISES``.
    """
    return {topic.LESSON: topic.EXERCISES for topic in TOPICS}


def hands_on_checks() -> tuple:
    """The checks every topic's hands-on cells call (a topic's ``HANDS_ON_CHECKS``).

    Returns:
        The check functions.
    """
    return tuple(fn for topic in TOPICS for fn in getattr(topic, "HANDS_ON_CHECKS", ()))


def hands_on() -> dict:
    """Every topic's hands-on cells (``HANDS_ON``; `labkit.session.handson` registers them).

    Returns:
        Cell name -> (lesson, reference solution source, whether it starts on a fresh GPU, whether it
        runs on every GPU of its lesson: a topic's ``HANDS_ON_EVERY_GPU``).
    """
    return {
        name: (
            entry[2] if len(entry) > 2 else topic.LESSON,
            entry[0],
            entry[1],
            name in getattr(topic, "HANDS_ON_EVERY_GPU", ()),
        )
        for topic in TOPICS
        for name, entry in getattr(topic, "HANDS_ON", {}).items()
    }


def recorded_calls(quick: bool = False) -> list:
    """Every topic's calls of the recorded grid.

    Args:
        quick: the base calls only.

    Returns:
        (experiment, kwargs) pairs.
    """
    return [c for topic in TOPICS for c in topic.recorded_calls(quick)]
