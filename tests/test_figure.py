"""labkit's FigureWidget (labkit.present.panel.figure): plotly's 5 MB front end goes to the page
with one figure per kernel, every other figure carries a 2 KB loader. The page side (the loaders
share one import and draw) is tested in a real browser: tests/test_browser.py."""
import json

import plotly
import plotly.graph_objects as go
import pytest
from plotly.basewidget import BaseFigureWidget

from labkit.present import widgets
from labkit.present.panel import figure


@pytest.fixture
def fresh(monkeypatch):
    """No figure carries the bundle yet, as in a new kernel."""
    monkeypatch.setattr(figure, "_carrier", None)
    monkeypatch.delenv("LABKIT_PLOTLY_ONCE", raising=False)


def embedded_source(esm: str):
    """The bundle inside a loader (None when the loader has none), as the page would read it."""
    start = esm.index("const EMBEDDED = ") + len("const EMBEDDED = ")
    return json.loads(esm[start:esm.index(";\nfunction registry")])


def test_first_figure_carries_plotlys_front_end_and_later_ones_only_the_loader(fresh):
    first = figure.new_figure_widget(go.Bar(y=[1, 2]))
    later = [figure.new_figure_widget(go.Scatter(y=[3, 1])) for _ in range(3)]
    bundle = str(BaseFigureWidget._esm)
    assert len(bundle) > 1_000_000  # plotly.js and its widget
    assert embedded_source(first._esm) == bundle
    for w in later:
        assert isinstance(w, go.FigureWidget) and embedded_source(w._esm) is None
        assert len(w._esm) < 10_000
        state = w.get_state()
        assert sum(len(json.dumps(v, default=str)) for v in state.values()) < 50_000  # what its comm sends
    assert figure.carrier() is first
    # every loader shares one import in the page, under a name of this plotly and bundle
    key = figure.registry_key()
    assert plotly.__version__ in key and str(len(bundle)) in key
    assert all(json.dumps(key) in w._esm for w in [first, *later])


def test_a_closed_carrier_passes_the_bundle_to_the_next_figure(fresh):
    first = figure.new_figure_widget()
    second = figure.new_figure_widget()
    first.close()
    assert figure.carrier() is None
    third = figure.new_figure_widget()
    assert embedded_source(third._esm) is not None and figure.carrier() is third
    assert embedded_source(second._esm) is None


def test_switched_off_gives_plotlys_own_class(fresh, monkeypatch):
    monkeypatch.setenv("LABKIT_PLOTLY_ONCE", "0")
    w = figure.new_figure_widget(go.Bar(y=[1]))
    assert isinstance(w, go.FigureWidget) and w._esm == str(BaseFigureWidget._esm)  # no loader
    assert figure.carrier() is None


def test_panels_use_it_and_update_in_place(fresh):
    a, b = widgets.AlgorithmsPanel(), widgets.SweepPanel()
    assert figure.carrier() is a.fig and embedded_source(b.fig._esm) is None
    fig = b.fig
    b.set(field=[v for v in b.options("field") if v != b.value("field")][0])
    assert b.fig is fig and b.df is not None


def test_loader_names_what_failed_when_the_bundle_never_comes():
    esm = figure.loader(embedded=False)
    assert "did not reach this page" in esm and str(figure.GIVE_UP_MS) in esm
    assert "@" not in esm.replace("@license", "")  # every placeholder filled in
