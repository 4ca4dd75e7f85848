"""Each part of a panel works alone (`labkit.present.panel`): the state without any widget, the
measurement job without a panel, the GPU picker without a dropdown, the view without a state
machine. Real recordings (data/recordings), real ipywidgets; no GPU needed."""

from __future__ import annotations

import os
import threading
import time

import pytest

from labkit import experiments
from labkit.errors import InvalidSpec
from labkit.present.panel.controls import Controls
from labkit.present.panel.gpu_picker import GPUPicker
from labkit.present.panel.job import MeasurementJob
from labkit.present.panel.view import PanelView
from labkit.signals import progress
from labkit.signals.cancel import Superseded, checkpoint
from labkit.store import recordings


def recorded(name):
    return Controls(experiments.PANELS[name], live=False, recording=recordings.for_experiment(name))


def test_controls_offer_exactly_the_recorded_values_one_factor_at_a_time():
    c = recorded("precision")
    assert "K" not in c.shown and "W" not in c.shown  # K moves with C, W with H, as recorded
    for name in c.shown:
        for v in c.options(name):
            assert c.recorded(c.moved(c.state, name, v)), (name, v)
    moved = c.moved(c.state, "C", 128)
    assert moved["K"] == 128  # recorded mode: K follows C
    live = Controls(experiments.PANELS["precision"], live=True, recording=None)
    assert live.moved(live.state, "C", 128)["K"] == live.state["K"]  # live: C alone
    assert live.moved(live.state, "R", 5)["S"] == 5  # square filters in both modes


def test_controls_say_why_a_name_is_not_a_control():
    c = recorded("precision")
    with pytest.raises(InvalidSpec, match="moves with C"):
        c.check_names(["K"])
    sweep = recorded("sweep")
    with pytest.raises(InvalidSpec, match="part of dtype_layout"):
        sweep.check_names(["dtype"])
    with pytest.raises(InvalidSpec, match="must be 2 words"):
        sweep.moved(sweep.state, "dtype_layout", "fp16")


def test_live_neighbours_are_one_move_away_and_bounded():
    c = Controls(experiments.PANELS["plans"], live=True, recording=None)
    ns = c.neighbours()
    assert 0 < len(ns) <= 24
    for n in ns:
        changed = {k for k in n if n[k] != c.state[k]} - {"S"}
        assert len(changed) == 1, changed


def test_a_job_runs_the_newest_request_and_stops_the_older_one_at_its_checkpoint():
    said = []
    job = MeasurementJob(
        "t", draw_partial=lambda make: None, say=lambda kind, text: said.append((kind, text))
    )
    started, done = threading.Event(), []

    def slow(gen):
        started.set()
        try:
            for _ in range(200):
                checkpoint()
                time.sleep(0.01)
            done.append(("slow", gen))
        except Superseded:
            done.append(("stopped", gen))

    job.start(slow)
    assert started.wait(5)
    job.start(lambda gen: done.append(("fast", gen)))
    assert job.wait(10)
    assert done == [("stopped", 1), ("fast", 2)]
    assert ("running", "stopping the previous measurement ...") in said


def test_a_job_draws_partial_tables_at_most_every_interval_and_counts_waits():
    drawn, said = [], []
    job = MeasurementJob("t", draw_partial=lambda make: drawn.append(make()), say=lambda k, t: said.append(t))
    job.begin(job.next_generation())
    with job.measuring():
        for k in range(1, 5):
            progress.report(lambda k=k: k, k, 5, "parts")  # as a live experiment reports its table so far
        progress.announce("waiting for the GPU (1 ahead)")
        progress.announce("got the GPU")
    job.done()
    assert drawn == [1]  # the first at once, the rest within PARTIAL_EVERY_S, the last never
    assert job.partial_draws == 1 and job.first_paint_ms is not None and job.updates == 1
    assert job.waits == 1 and said[-1] == "measuring on the GPU ..."


def test_the_gpu_picker_offers_every_recording_of_the_experiment():
    g = GPUPicker(can_measure=False)
    values = [v for _, v in g.options("precision")]
    assert {"h100-sxm", "h200"} <= set(values) and not g.live
    assert g.recording("precision").name == g.value("precision")
    assert g.pick("precision", "h200") and g.recording("precision").name == "h200"
    assert not g.pick("precision", "h200")  # the same again changes nothing
    with pytest.raises(InvalidSpec, match="available"):
        g.pick("precision", "a100")


def test_the_view_reports_moves_and_draws_without_a_panel():
    moves = []
    v = PanelView(
        live=False,
        csv_name="x.csv",
        fig_width=900,
        gpu_options=[("H200", "h200")],
        gpu_value="h200",
        on_control=lambda n, val: moves.append((n, val)),
        on_button=moves.append,
        on_gpu=moves.append,
    )
    c = recorded("layout")
    v.sync(c)  # no callback fires while the view syncs itself
    assert moves == [] and "Recorded" in v.header.value
    other = next(o for o in c.options("dtype") if o != c.value("dtype"))
    v.click("dtype", other)
    assert moves == [("dtype", other)]
    v.reset_button.click()
    assert moves[-1] == "reset"
    df = experiments.core.from_recording("layout", recordings.for_experiment("layout"), spec=experiments.BASE)
    v.show("layout", df)
    assert v.fig is not None and len(v.fig.data) == experiments.TRACES["layout"] and v.results() is not None


def test_a_live_first_request_hands_the_panel_back_at_its_first_paint(monkeypatch):
    """Live, a panel whose first request must be measured is returned once the first part is
    drawn (the cell shows it) and fills in from the background; ``wait()`` gives the whole."""
    from labkit.present import widgets
    from labkit.present.panel import panel as panel_module
    from labkit.session import lessons

    full = widgets.PlansPanel(live=False).df  # a recorded table (live, a panel's df comes later)
    release, calls = threading.Event(), []

    def measuring(name, **kwargs):
        calls.append(name)
        progress.report(lambda: full.iloc[:1].copy(), 1, len(full), "plans timed")
        assert release.wait(30), "the test never released the measurement"
        return full

    monkeypatch.setattr(lessons, "data", measuring)
    monkeypatch.setattr(panel_module, "measured_already", lambda controls: False)
    monkeypatch.setattr(panel_module, "prefetch_neighbours", lambda controls: 0)
    t0 = time.perf_counter()
    p = widgets.PlansPanel(live=True)
    assert time.perf_counter() - t0 < 20
    assert calls == ["plans"] and p.partial_draws == 1 and p.first_paint_ms is not None, p.error
    assert p.view.df is None and p.job.thread.is_alive()  # the whole table is not there yet
    assert "1 of %d plans timed" % len(full) in p.status.value and p.fig is not None
    threading.Timer(0.3, release.set).start()
    assert len(p.df) == len(full)  # ``df`` waits for the whole table
    assert not p.job.thread.is_alive() and p.error is None and p.updates == 1


def test_a_job_stopped_at_exit_ends_at_its_next_checkpoint():
    job = MeasurementJob("plans", lambda make: None, lambda kind, text: None)
    ran = []

    def work(gen):
        try:
            while True:
                checkpoint()
                ran.append(gen)
                time.sleep(0.01)
        except Superseded:
            ran.append("stopped")

    job.start(work)
    time.sleep(0.1)
    assert ran and job.thread.is_alive()
    job.stop(timeout=5)
    assert not job.thread.is_alive() and ran[-1] == "stopped"


def test_the_banner_warms_up_the_first_chart_in_the_background():
    from labkit import env
    from labkit.session import lessons, warmup

    lessons.banner()
    assert warmup.wait(60)
    assert isinstance(warmup.seconds.get("tables"), float) and isinstance(
        warmup.seconds.get("figures"), float
    ), warmup.seconds
    assert ("gpu" in warmup.seconds) == env.mode().live  # recorded mode: nothing of CUDA
    assert not warmup.start(False)  # once per process


def test_a_slow_partial_draw_spaces_out_the_next_ones():
    """Drawing never takes more than about a third of a measurement's time: after a draw that
    took d seconds the next partial table waits DRAW_GAP_FACTOR x d."""
    drawn = []
    job = MeasurementJob(
        "plans", lambda make: (drawn.append(make()), time.sleep(0.1)), lambda kind, text: None
    )
    job.PARTIAL_EVERY_S = 0.0
    job.begin(job.next_generation())
    job.on_partial(lambda: 1, 1, 10, "parts")
    job.on_partial(lambda: 2, 2, 10, "parts")  # at once: within 2 x 0.1 s of the last draw
    time.sleep(0.25)
    job.on_partial(lambda: 3, 3, 10, "parts")
    assert drawn == [1, 3] and job.partial_draws == 2


def fresh_kernel(code: str, **env) -> list:
    """Run ``code`` in a fresh process (recorded mode, ``env`` set); the words it printed."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, LABKIT_MODE="recorded", **env),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def after_warm_up(code: str, **env) -> list:
    """Run ``code`` in a fresh kernel (a subprocess, recorded mode, ``env`` set) once a lesson's
    first cell has run and its warm-up finished (``sys``, ``gc``, ``time`` and ``warmup`` imported);
    the words it printed."""
    return fresh_kernel(
        "import gc, sys, time\n"
        "from labkit.session import lessons, warmup\n"
        "lessons.banner()\n"
        "assert warmup.wait(120), warmup.seconds\n" + code,
        **env,
    )


def test_the_gpu_question_is_asked_alone_and_the_chart_imports_start_after_it():
    """A fresh kernel (a subprocess), a lesson's first cell: the public modules it names are not
    imported by it (`labkit.session.first_use.OnFirstUse`), and nothing of the warm-up runs while the
    banner asks whether a GPU is there (which imports CuPy and initialises CUDA: most of a first cell
    on a GPU host); then the chart's imports, the lesson modules, every chart's subplot grid (step
    "grids") and the collector's freeze run in that order; recorded mode starts nothing of the GPU."""
    code = (
        "import sys\n"
        "import labkit\n"
        "from labkit import env\n"
        "from labkit import check, lessons, widgets\n"
        "from labkit.session import warmup\n"
        "real = env.mode\n"
        "asked = []\n"
        "def mode():\n"
        "    asked.append(len(warmup._threads))\n"
        "    return real()\n"
        "env.mode = mode\n"
        "light = 'labkit.present.widgets' not in sys.modules and 'plotly' not in sys.modules\n"
        "lessons.banner()\n"
        "assert warmup.wait(120), warmup.seconds\n"
        "warmed = 'labkit.present.widgets' in sys.modules  # the warm-up imported what the cell named\n"
        "from labkit.draw import plots\n"
        "t = warmup.timeline\n"
        "order = sorted(t, key=lambda k: t[k])\n"
        "i = order.index\n"
        "print(light, warmed, asked[0], i('imports done') > i('lesson modules') > i('figures'),\n"
        "      t['grids'][0] >= t['imports done'][1], t['gc frozen'][0] >= t['grids'][1], 'gpu' in t,\n"
        "      plots.lay_out_grids(), len(plots._GRIDS) >= len(plots._DECLARED) > 5,\n"
        "      widgets is sys.modules['labkit.present.widgets'] or widgets.PANELS is labkit.widgets.PANELS)\n"
    )
    got = fresh_kernel(code)
    assert got == ["True", "True", "0", "True", "True", "True", "False", "0", "True", "True"], got


def test_a_public_module_imported_on_first_use_reads_and_writes_the_module_itself():
    """`labkit.session.first_use.OnFirstUse`: ``lessons.banner`` comes from its light module without
    importing the lessons; any other attribute imports the module, and setting one sets it there."""
    code = (
        "import sys\n"
        "import labkit\n"
        "from labkit import lessons\n"
        "print(type(lessons).__name__, callable(lessons.banner), 'labkit.session.lessons' in sys.modules)\n"
        "lessons.marker = 7\n"
        "real = sys.modules['labkit.session.lessons']\n"
        "print(real.marker, 'data' in dir(lessons), labkit.lessons is real)\n"
        "del lessons.marker\n"
        "print(hasattr(real, 'marker'))\n"
    )
    got = fresh_kernel(code)
    assert got == ["OnFirstUse", "True", "False", "7", "True", "True", "False"], got


def test_cupyx_waits_for_an_idle_kernel_and_the_grids_do_not():
    """A fresh IPython shell (a subprocess, its real cell events), the warm-up started as live: cupyx
    (which no chart needs) does not start while a cell runs after the banner's, as a panel's cell in
    "Run all", only once the kernel has been idle for the prefetch worker's 0.3 s after it; the
    subplot grids (which the next panel needs) are laid out at once after the imports. On a machine
    without a GPU the GPU's steps fail (their errors recorded) and are timed all the same."""
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_cell('from labkit.session import warmup; warmup.start(live=True)')\n"
        "ip.run_cell('''import time\n"
        "while 'imports done' not in warmup.timeline:\n"
        "    time.sleep(0.02)\n"
        "time.sleep(0.5)\n"
        "held = 'imports done, idle' not in warmup.timeline\n"
        "ended = time.perf_counter() - warmup._t0\n"
        "''')\n"
        "ns = ip.user_ns\n"
        "assert ns['warmup'].wait(120), ns['warmup'].seconds\n"
        "t = ns['warmup'].timeline\n"
        "print(ns['held'], t['imports done, idle'][1] >= ns['ended'] + 0.25,\n"
        "      t['cupyx'][0] >= t['imports done, idle'][1], t['grids'][0] < ns['ended'])\n"
    )
    got = fresh_kernel(code)
    assert got[-4:] == ["True", "True", "True", "True"], got


@pytest.mark.parametrize("switch, skipped", [("", True), ("0", False)])
def test_the_warm_up_leaves_out_jsonschemas_iri_grammar_and_gives_it_back(switch, skipped):
    """A fresh kernel (a subprocess): while the warm-up imports plotly's renderers, rfc3987_syntax
    (39 Earley parsers built at import) is marked absent, so jsonschema has no "iri" checker; once
    the warm-up is done it imports as usual. LABKIT_SKIP_IRI_GRAMMAR=0 leaves jsonschema alone."""
    import importlib.util

    if importlib.util.find_spec("rfc3987_syntax") is None:
        pytest.skip("rfc3987-syntax is not installed (it comes with JupyterLab's jupyter-events)")
    got = after_warm_up(
        "import jsonschema\n"
        "had = 'rfc3987_syntax' in sys.modules\n"
        "import rfc3987_syntax\n"
        "print(warmup.iri_grammar_skipped, had, 'iri' in jsonschema.FormatChecker.checkers,\n"
        "      warmup.seconds)\n",
        LABKIT_SKIP_IRI_GRAMMAR=switch,
    )
    assert got[:3] == [str(skipped), str(not skipped), str(not skipped)], got


@pytest.mark.parametrize("name", ["network_report", "race_timeline", "fusion", "algorithms"])
def test_a_panel_figure_made_without_validating_twice_holds_and_sends_the_same(name):
    """view.figure_widget makes the FigureWidget from the chart's JSON unvalidated (the chart was
    validated as it was built), then validates again: its state, what the page is sent, stays that of
    a FigureWidget made the usual way, at first and after each update in place."""
    import json
    import re

    import plotly.graph_objects as go
    from plotly.utils import PlotlyJSONEncoder

    from labkit.present.panel.view import figure_widget, update_in_place

    rec = recordings.for_experiment(name)
    frames = [rec.lookup(name, r) for r in rec.requests(name)[:3]]
    chart = experiments.CHARTS[name]

    def state(w):  # trace uids are random: left out
        return re.sub(
            r'"uid": "[^"]*"',
            "",
            json.dumps([w._data, w._layout, w.to_dict()], cls=PlotlyJSONEncoder, sort_keys=True),
        )

    usual = go.FigureWidget(chart(frames[0]))
    usual.layout.width = 900
    fast = figure_widget(chart(frames[0]), 900)
    assert fast._validate and fast.layout._validate and all(t._validate for t in fast.data)
    assert state(fast) == state(usual)
    for df in frames[1:] + frames[:1]:
        fig = chart(df)
        update_in_place(usual, fig)
        update_in_place(fast, fig)
        assert state(fast) == state(usual)


@pytest.mark.parametrize("name", ["network_report", "fusion", "plans"])
def test_a_panel_figure_keeps_what_it_shows_for_a_view_drawn_again(name):
    """A page reloaded (or a notebook opened again) draws a FigureWidget from its widget state, which
    plotly stores only when the figure is first displayed: after every update in place, and after a
    request with no data, that state is what the figure shows (not the first request, nor bare axes)."""
    import json

    from plotly.utils import PlotlyJSONEncoder

    from labkit.draw import plots
    from labkit.present.panel.view import figure_widget, update_in_place

    rec = recordings.for_experiment(name)
    frames = [rec.lookup(name, r) for r in rec.requests(name)[:3]]
    chart = experiments.CHARTS[name]

    def dump(data, layout):
        return json.dumps([data, layout], cls=PlotlyJSONEncoder, sort_keys=True)

    fig = figure_widget(chart(frames[0]), 900)
    fig._repr_mimebundle_()  # displayed: plotly stores the state as it is now
    first = dump(fig._widget_data, fig._widget_layout)
    for df in frames[1:]:
        update_in_place(fig, chart(df))
        assert dump(fig._widget_data, fig._widget_layout) == dump(fig._data, fig._layout_obj._props)
    assert dump(fig._widget_data, fig._widget_layout) != first
    plots.no_data(fig, "nothing was recorded for this request")
    assert dump(fig._widget_data, fig._widget_layout) == dump(fig._data, fig._layout_obj._props)
    assert "No data for this request" in json.dumps(fig._widget_layout)


@pytest.mark.parametrize("switch, frozen", [("", True), ("0", False)])
def test_the_warm_up_freezes_the_collector_after_the_imports(switch, frozen):
    """A fresh kernel (a subprocess): once the warm-up is done, the imported libraries' objects are
    in the collector's permanent generation, so a full collection no longer walks them (it takes a
    fraction of the time it took before); LABKIT_GC_FREEZE=0 leaves the collector alone."""
    listed, step, ms, whole = got = after_warm_up(
        "t = time.perf_counter(); gc.collect(); ms = (time.perf_counter() - t) * 1000\n"
        "gc.unfreeze(); t = time.perf_counter(); gc.collect(); whole = (time.perf_counter() - t) * 1000\n"
        "print('gc frozen' in warmup.seconds, warmup.seconds.get('gc frozen'), ms, whole)\n",
        LABKIT_GC_FREEZE=switch,
    )
    assert listed == str(frozen), got
    if frozen:
        assert not step.startswith(("'", '"')) and float(step) >= 0, got  # a time, not an error
        assert float(ms) < 0.5 * float(whole), got
