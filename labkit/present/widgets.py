"""Interactive panels: ipywidgets controls that call an experiment and update a plotly
``FigureWidget`` in place (no flicker, no new figure per change).

Every panel is a ``VBox`` of a header, the controls, a status line, a message line and one
``FigureWidget``. Move a control and the panel calls its experiment (`labkit.experiments`) with
the values on screen, builds the chart and copies the new traces into the existing figure inside
``batch_update()``. A panel is made of parts (`labkit.present.panel`); what it shows for an
experiment is data beside that experiment (``PANELS`` in its topic module).

* **Recorded mode** (no GPU): every control offers only the values recorded for the request on
  screen, so controls move one factor at a time around the lesson's base; a control with one
  recorded value is greyed; "reset to base" brings all back. A request that was not recorded
  (possible from code, e.g. ``panel.set(N=7)``) shows the `RecordedDataError` text with the
  nearest recorded values and empties the chart.
* **Live mode** (a GPU): controls move freely and every change measures; the status line says
  "measuring ..." while it runs, and any `LabkitError` (unsupported, out of memory, invalid spec)
  is shown in the panel: the kernel goes on.

Panels work with no browser attached: ``panel.set(dtype="bf16")`` sets the widget's value (the
same observer a click triggers runs) and returns once the figure holds the new data. That is what
the notebooks (under nbmake) and ``scripts/bench_widgets.py`` use. ``panel.to_csv(path)`` writes
the numbers on screen with their provenance.
"""

from __future__ import annotations

from typing import Optional

import ipywidgets as W

from .. import experiments
from ..errors import InvalidSpec
from ..experiments import SWEEP_VALUES  # noqa: F401  (widgets.SWEEP_VALUES: the sweep panel's values)
from ..store.recordings import flatten  # noqa: F401  (widgets.flatten: tests and panels use it)
from .panel import panel as _parts
from .panel.controls import CONTROLS, MAX_PREFETCH  # noqa: F401  (names callers know)
from .panel.panel import live_note  # noqa: F401
from .panel.view import FIG_WIDTH

#: the experiments the lab panel can chart (each takes one convolution)
SPEC_EXPERIMENTS = (
    "precision",
    "layout",
    "fusion",
    "plans",
    "caps",
    "algorithms",
    "build_cost",
    "workspace_sizes",
)


class Panel(_parts.Panel):
    """The panel of one experiment, by name: its configuration is the ``PANELS`` entry of its
    topic module (`labkit.experiments.PANELS`). Subclasses name their experiment."""

    experiment: str = ""

    def __init__(self, experiment: Optional[str] = None, **options):
        name = experiment or self.experiment
        if name not in experiments.PANELS:
            raise InvalidSpec("experiment", name, f"must be one of {', '.join(experiments.PANELS)}")
        super().__init__(experiments.PANELS[name], **options)


# ---- the lessons' panels, by the names the notebooks use --------------------------------------------
class AlgorithmsPanel(Panel):
    """Lesson 01: the classic algorithm table (dtype, layout; the shape live)."""

    experiment = "algorithms"


class WorkspaceSizesPanel(Panel):
    """Lesson 01: workspace per dtype x layout x direction of one shape."""

    experiment = "workspace_sizes"


class SweepPanel(Panel):
    """Lesson 01: time and workspace as N, C=K, H=W or R=S varies."""

    experiment = "sweep"


class StrategiesPanel(Panel):
    """Lesson 02: every workspace strategy on a workload."""

    experiment = "strategies"


class PrecisionPanel(Panel):
    """Lesson 03: error vs speed per dtype."""

    experiment = "precision"


class LayoutPanel(Panel):
    """Lesson 03: NCHW vs NHWC, conversion included."""

    experiment = "layout"


class RooflinePanel(Panel):
    """Lesson 03: the roofline per dtype and layout."""

    experiment = "roofline"


class FusionPanel(Panel):
    """Lesson 04: fused vs unfused."""

    experiment = "fusion"


class PlansPanel(Panel):
    """Lesson 05: every plan's workspace and time."""

    experiment = "plans"


class CapsPanel(Panel):
    """Lesson 05: what a workspace cap costs."""

    experiment = "caps"


class BuildCostPanel(Panel):
    """Lesson 05: what a build costs."""

    experiment = "build_cost"


class RacePanel(Panel):
    """Lesson 06: shared vs per-stream scratchpad."""

    experiment = "race"


class RaceTimelinePanel(Panel):
    """Lesson 10: the race's traced round, graph or Python launches."""

    experiment = "race_timeline"


class ReportPanel(Panel):
    """A network's workspace report (`labkit.report`): pick a preset, batch, dtype and layout."""

    experiment = "network_report"


class LabPanel(Panel):
    """Lesson 07: one convolution, every spec control, any of the spec experiments as the chart
    (``chart`` control), CSV export to ``results.csv``.

    Switching the chart keeps the convolution on screen when it can; in recorded mode, when the
    new chart was not recorded for it, the controls go back to that chart's base, and the status
    line says so."""

    def __init__(
        self,
        chart: str = "plans",
        *,
        live: Optional[bool] = None,
        fig_width: Optional[int] = FIG_WIDTH,
        **initial,
    ):
        if chart not in SPEC_EXPERIMENTS:
            raise InvalidSpec("chart", chart, f"must be one of {', '.join(SPEC_EXPERIMENTS)}")
        self.chart = W.Dropdown(
            options=list(SPEC_EXPERIMENTS),
            value=chart,
            description="chart",
            style={"description_width": "110px"},
        )
        self.chart.observe(lambda change: self.switch(change["new"]), names="value")
        super().__init__(chart, live=live, csv_name="results.csv", fig_width=fig_width, **initial)
        self.box.children = (self.box.children[0], self.chart) + tuple(self.box.children[1:])

    def switch(self, chart: str) -> None:
        """Show another experiment's chart for the convolution on screen."""
        if chart not in SPEC_EXPERIMENTS:
            raise InvalidSpec("chart", chart, f"must be one of {', '.join(SPEC_EXPERIMENTS)}")
        if self.chart.value != chart:
            self.chart.value = chart  # comes back here through the observer
            return
        if chart == self.cfg.experiment:
            return
        cfg = experiments.PANELS[chart]
        self.controls_state.state = {**cfg.base, **{k: v for k, v in self.state.items() if k in cfg.controls}}
        self.view.show_figure(chart, None)  # one FigureWidget per chart, made once
        self.use(
            cfg, f"'{chart}' was not recorded for the convolution on screen: controls went back to its base. "
        )

    def set(self, **changes) -> None:
        chart = changes.pop("chart", None)
        if chart is not None:
            self.switch(chart)
        super().set(**changes)

    @property
    def controls(self) -> list:
        """The names `set` accepts: ``chart`` and the controls of the chart on screen."""
        return ["chart", *self.controls_state.shown]

    def options(self, name: str) -> list:
        """The values control ``name`` offers now; for ``chart``, the experiments the lab draws."""
        return list(SPEC_EXPERIMENTS) if name == "chart" else super().options(name)

    def value(self, name: str):
        """Control ``name``'s value on screen (``chart``: the experiment drawn)."""
        return self.chart.value if name == "chart" else super().value(name)


_NAMED = {
    cls.experiment: cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, Panel) and cls.experiment
}
#: experiment -> its panel class (a named one above, else one made for it: a new experiment's panel
#: needs only its ``PANELS`` entry)
PANELS = {
    name: _NAMED.get(name) or type(f"{name.title().replace('_', '')}Panel", (Panel,), {"experiment": name})
    for name in experiments.PANELS
}


def panel(experiment: str, **initial) -> Panel:
    """The panel for an experiment by name, e.g. ``widgets.panel("plans", dtype="fp32")``."""
    if experiment not in PANELS:
        raise InvalidSpec("experiment", experiment, f"must be one of {', '.join(PANELS)}")
    return PANELS[experiment](**initial)
