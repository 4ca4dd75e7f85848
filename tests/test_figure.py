"""labkit's FigureWidget (labkit.draw.figure_widget): plotly's 5 MB front end goes to the page
with one figure per kernel, every other figure carries a 2 KB loader. The page side (the loaders
share one import and draw) is tested in a real browser: tests/test_browser.py."""

import json

import plotly
import plotly.graph_objects as go
import pytest
from plotly.basewidget import BaseFigureWidget

from labkit.draw import figure_widget as figure
from labkit.present import widgets


@pytest.fixture
def fresh(monkeypatch):
    """No figure carries the bundle yet, as in a new kernel."""
    monkeypatch.setattr(figure, "_carrier", None)
    monkeypatch.delenv("LABKIT_PLOTLY_ONCE", raising=False)


def embedded_source(esm: str):
    """The bundle inside a loader (None when the loader has none), as the page would read it."""
    start = esm.index("const EMBEDDED = ") + len("const EMBEDDED = ")
    return json.loads(esm[start : esm.index(";\nfunction registry")])


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


def test_send_front_end_only_in_a_kernel(fresh):
    assert not figure.in_kernel() and figure.send_front_end() is False and figure.carrier() is None


def test_the_warm_up_sends_the_front_end_before_the_first_panel_in_a_real_kernel():
    """A lesson in a real Jupyter kernel (nbclient): the banner's warm-up, once the kernel is
    idle (the learner reads), makes an empty figure carry plotly's bundle; the first panel then
    carries only the loader."""
    import time

    import nbclient
    import nbformat

    cells = [
        "import labkit\nfrom labkit import lessons, widgets\nlessons.banner()",
        "from labkit.session import warmup\nprint(warmup.seconds.get('plotly front end, idle'))",
        "from labkit.draw import figure_widget as f\n"
        "p = widgets.SweepPanel()\n"
        "print(f.carrier() is f._kept, f._kept is not None, len(p.fig._esm) < 10_000)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120)
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        end = time.monotonic() + 90
        step = "None"
        while step == "None" and time.monotonic() < end:
            time.sleep(1.0)  # reading: no cell runs, the kernel is idle
            nb.cells[1].outputs = []
            client.execute_cell(nb.cells[1], 1)
            step = nb.cells[1].outputs[-1]["text"].strip()
        assert step != "None", "the warm-up's front-end step did not run in 90 s of an idle kernel"
        client.execute_cell(nb.cells[2], 2)
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs if o.get("name") == "stdout")
    assert printed.split() == ["True", "True", "True"], nb.cells[2].outputs  # stdout may come in pieces
