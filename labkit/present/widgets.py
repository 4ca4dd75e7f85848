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
    """The panel of one experiment, by name: ``widgets.Panel("plans", dtype="fp32")``. Its configuration
    is the ``PANELS`` entry of its topic module (`labkit.experiments.PANELS`); each experiment's panel
    is also a class named after it (`PANELS`: ``widgets.PlansPanel(dtype="fp32")``).

    Args:
        experiment: a key of `labkit.experiments.PANELS`; a panel class of `PANELS` names its own.
        **options: `labkit.present.panel.panel.Panel`'s options and the controls' first values.
    """

    experiment: str = ""

    def __init__(self, experiment: Optional[str] = None, **options):
        name = experiment or self.experiment
        if name not in experiments.PANELS:
            raise InvalidSpec("experiment", name, f"must be one of {', '.join(experiments.PANELS)}")
        super().__init__(experiments.PANELS[name], **options)


class LabPanel(Panel):
    """Lesson 07: one convolution, every spec control, any of the spec experiments as the chart.

    The ``chart`` control picks the experiment; CSV export goes to ``results.csv``. Switching the
    chart keeps the convolution on screen when it can; in recorded mode, when the new chart was not
    recorded for it, the controls go back to that chart's base, and the status line says so.

    Args:
        chart: the experiment drawn first, one of `SPEC_EXPERIMENTS`.
        live: measure live; default the mode labkit runs in.
        fig_width: the figure's width, in pixels.
        **initial: control name -> its first value.
    """

    #: every chart the lab draws: each control of any of them has its widget, shown with its chart
    other_charts = SPEC_EXPERIMENTS

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
        """Show another experiment's chart for the convolution on screen.

        Args:
            chart: the experiment, one of `SPEC_EXPERIMENTS`.
        """
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
        """The values a control offers now.

        Args:
            name: the control; ``chart`` offers the experiments the lab draws.

        Returns:
            The values.
        """
        return list(SPEC_EXPERIMENTS) if name == "chart" else super().options(name)

    def value(self, name: str):
        """A control's value on screen.

        Args:
            name: the control; ``chart`` is the experiment drawn.

        Returns:
            The value.
        """
        return self.chart.value if name == "chart" else super().value(name)


#: a panel class not named after its experiment: the network report's, as `labkit.report` is named
CLASS_NAMES = {"network_report": "ReportPanel"}


def _panel_class(name: str) -> type:
    """The `Panel` of experiment ``name``, as a class of its own (``"build_cost"`` -> ``BuildCostPanel``)."""
    cls_name = CLASS_NAMES.get(name) or name.title().replace("_", "") + "Panel"
    doc = f"{experiments.PANELS[name].title}: the `Panel` of experiment ``{name}``."
    return type(cls_name, (Panel,), {"experiment": name, "__module__": __name__, "__doc__": doc})


#: experiment -> its panel class, one made for each entry of `labkit.experiments.PANELS` and named
#: here after it (``widgets.PlansPanel``, ``widgets.ReportPanel``, ...)
PANELS = {name: _panel_class(name) for name in experiments.PANELS}
globals().update({cls.__name__: cls for cls in PANELS.values()})
