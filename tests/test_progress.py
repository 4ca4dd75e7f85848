"""Charts that fill in (`labkit.signals.progress` and the panels' partial draws), on any machine.

The partial tables drawn here are prefixes of real recorded tables: what a live experiment
reports after each part it measures. tests/test_progress_gpu.py checks the live experiments'
own reports."""

import threading

import pytest

from labkit.present import widgets
from labkit.signals import progress

pytestmark = pytest.mark.usefixtures("recorded_mode")


def test_no_listener_no_work():
    called = []
    progress.report(lambda: called.append(1), 1, 2, "parts")
    assert not called and not progress.active()


def test_listener_gets_each_part_innermost_first_and_only_in_its_thread():
    outer, inner, other = [], [], []
    with progress.listening(lambda mk, d, t, u: outer.append((mk(), d, t, u))):
        progress.report(lambda: "a", 1, 3, "parts")
        with progress.listening(lambda mk, d, t, u: inner.append((mk(), d, t, u))):
            progress.report(lambda: "b", 2, 3, "parts")
            th = threading.Thread(target=lambda: progress.report(lambda: other.append("leak"), 1, 1, "x"))
            th.start()
            th.join()
        progress.report(lambda: "c", 3, 3, "parts")
    assert outer == [("a", 1, 3, "parts"), ("c", 3, 3, "parts")]
    assert inner == [("b", 2, 3, "parts")] and not other


def test_a_failing_listener_never_fails_the_measurement():
    def bad(*_a):
        raise RuntimeError("drawing failed")

    with progress.listening(bad):
        progress.report(lambda: None, 1, 2, "parts")  # no exception


PROGRESSIVE = [
    "precision",
    "layout",
    "fusion",
    "plans",
    "caps",
    "build_cost",
    "roofline",
    "sweep",
    "workspace_sizes",
    "strategies",
]


@pytest.mark.parametrize("name", PROGRESSIVE)
def test_a_panel_draws_every_partial_table_into_the_same_figure(name):
    """Each prefix of the recorded table, reported as a live experiment would, is drawn in
    place; the finished table then replaces it (same FigureWidget)."""
    p = widgets.Panel(name)
    full, fig = p.df, p.fig
    assert full is not None and len(full) >= 2
    p.job.t0 = p.job.last_partial = 0.0
    p.job.partial_draws, p.job.first_paint_ms = 0, None
    p.job.PARTIAL_EVERY_S = p.job.DRAW_GAP_FACTOR = 0.0
    n = len(full)
    for k in range(1, n):
        p.job.on_partial(lambda k=k: full.iloc[:k].copy(), k, n, "parts")
        assert "of %d parts" % n in p.status.value
    assert p.partial_draws == n - 1 and p.fig is fig and p.first_paint_ms is not None
    p.refresh()
    assert p.fig is fig and p.df is not None and p.error is None


def test_partial_draws_are_throttled_and_the_last_part_is_left_to_the_finished_chart():
    p = widgets.Panel("plans")
    full = p.df
    p.job.t0, p.job.partial_draws, p.job.first_paint_ms = 0.0, 0, None
    p.job.last_partial = 0.0
    for k in range(1, len(full) + 1):
        p.job.on_partial(lambda k=k: full.iloc[:k].copy(), k, len(full), "plans timed")
    assert p.partial_draws == 1  # the first at once; the rest within PARTIAL_EVERY_S; the last never


def test_a_click_measures_in_the_background_and_the_last_click_wins():
    """What a live panel does with clicks (here on a recorded panel told to): the observer
    returns at once, the figure follows, and of quick successive clicks the last one is drawn."""
    p = widgets.Panel("precision")
    p.background = True
    fig = p.fig
    options = [v for v in p.options("layout")]
    assert len(options) >= 2
    other = next(v for v in options if v != p.value("layout"))
    p.widgets["layout"].value = other  # what a click does
    assert p.wait(30) and p.value("layout") == other and p.df.attrs["request"]["spec"]["layout"] == other
    first = p.value("layout")
    back = next(v for v in options if v != first)
    for v in (back, first, back):  # three quick clicks
        p.widgets["layout"].value = v
    assert p.wait(30)
    assert p.df.attrs["request"]["spec"]["layout"] == back and p.fig is fig and p.error is None


def test_a_stale_background_measurement_stops_at_its_next_checkpoint():
    from labkit.session.prefetch import Superseded, cancellable, checkpoint

    wanted = {"gen": 1}
    with cancellable(lambda: wanted["gen"] != 1):
        checkpoint()  # still wanted: nothing happens
        wanted["gen"] = 2
        with pytest.raises(Superseded):
            checkpoint()
    checkpoint()  # outside the block: nothing
