"""labkit.present.widgets in recorded mode, driven with no browser: every panel builds; its option lists
are exactly the recorded values (one factor at a time around the request on screen); ``set``
updates the same FigureWidget in place with the newly recorded rows; an unrecorded request shows
the RecordedDataError text and empties the chart; CSV export carries provenance."""

from __future__ import annotations

import json
import re

import pandas as pd
import plotly.graph_objects as go
import pytest

from labkit import experiments
from labkit.errors import InvalidSpec
from labkit.experiments import panel_config
from labkit.present import widgets
from labkit.store import recordings


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def one_factor_values(name, request, fields):
    """Independently of the panel: values of ``fields[0]`` over the recorded requests that differ
    from ``request`` in ``fields`` only (and, for derived fields, in those too)."""
    want = widgets.flatten(request)
    out = []
    for req in recordings.for_experiment(name).requests(name):
        flat = widgets.flatten(req)
        if all(flat.get(k) == v for k, v in want.items() if k not in fields):
            v = flat[fields[0]]
            if all(flat[f] == v for f in fields[1:2] if f in flat and not f.endswith(("values", "repeats"))):
                out.append(panel_config.unpack(v))
    return sorted(set(out), key=str)


MOVES = {  # panel control -> the request fields it moves together (recorded mode)
    "N": ("spec.N",),
    "C": ("spec.C", "spec.K"),
    "H": ("spec.H", "spec.W"),
    "dtype": ("spec.dtype",),
    "layout": ("spec.layout",),
    "direction": ("spec.direction",),
}


@pytest.mark.parametrize("name", sorted(widgets.PANELS))
def test_panel_builds_with_a_figurewidget_and_recorded_options(name):
    p = widgets.Panel(name)
    assert isinstance(p.fig, go.FigureWidget)
    assert len(p.fig.data) == experiments.TRACES[name]
    assert p.df is not None and p.error is None
    assert p.df.attrs["mode"] == "recorded"
    assert "Recorded" in p.header.value
    # "one factor at a time" and the greyed control are said only where there is another control
    assert ("one factor at a time" in p.header.value) == (len(p.controls) > 1)
    assert ("greyed" in p.header.value) == (len(p.controls) > 1)
    req = p.df.attrs["request"]
    for c in p.controls:
        opts = p.options(c)
        assert p.value(c) in opts, (name, c)
        fields = MOVES.get(c) if "spec" in req else None
        if fields is None:
            prefix = {"sweep": "base."}.get(name, "")
            fields = tuple(
                prefix + f if f in ("dtype", "layout") else f
                for f in ({"field": ("field", "values"), "workload": ("workload", "repeats")}.get(c, (c,)))
            )
        if widgets.CONTROLS[c].parts:
            continue  # compound (dtype_layout, launch_streams): checked in test_compound_control and beside
        assert sorted(opts, key=str) == one_factor_values(name, req, fields), (name, c)
        w = p.widgets[c]
        assert [v for _, v in w.options] == opts
        assert w.disabled == (len(opts) <= 1)


def test_precision_options_at_base_are_the_recorded_sweeps():
    p = widgets.PrecisionPanel()
    rec = recordings.current()
    base = widgets.flatten(p.df.attrs["request"])
    assert p.options("N") == rec.values("precision", "spec.N", where=base)
    assert p.options("layout") == rec.values("precision", "spec.layout", where=base)
    assert set(p.controls) == {"N", "C", "H", "layout"}
    assert "R = S=3" in p.header.value  # fixed in the recording, and said so


def test_set_updates_the_same_figure_in_place_with_the_recorded_rows():
    p = widgets.PrecisionPanel()
    fig = p.fig
    before = list(fig.data[0].x)
    p.set(N=8)
    assert p.fig is fig
    want = experiments.precision(experiments.BASE.replace(N=8))
    ok = want[want.status == "ok"]
    assert list(fig.data[0].x) == list(ok.gpu_us) != before
    assert list(fig.data[2].x) == list(ok.rel_error_vs_fp64_inputs)
    assert p.df.attrs["request"]["spec"]["N"] == 8
    assert "32" not in [str(v) for v in p.options("C") if v != 64]  # one factor at a time: C stays at 64
    assert p.options("C") == [64] and p.widgets["C"].disabled
    p.reset()
    assert list(fig.data[0].x) == before and p.state["N"] == 32


def test_an_unrecorded_value_names_what_is_recorded_with_the_other_controls_as_they_are():
    """Lesson 00 asks for batch 7 at a 28x28 image: the nearest recorded request changes N only (to
    the one batch recorded at that size), and the message says it keeps the other controls."""
    p = widgets.LayoutPanel()
    p.set(H=28)
    p.set(N=7)
    assert "nearest recorded values, changing the fewest controls: N = " in p.error, p.error
    assert p.error.endswith(", ".join(str(v) for v in p.options("N"))), (p.error, p.options("N"))


def test_linked_controls_move_together():
    p = widgets.FusionPanel()
    p.set(C=128)
    assert p.df.attrs["request"]["spec"]["C"] == 128 and p.df.attrs["request"]["spec"]["K"] == 128
    with pytest.raises(InvalidSpec, match="moves with C"):
        p.set(K=128)


def test_unrecorded_request_shows_the_error_not_a_chart():
    p = widgets.LayoutPanel()
    p.set(N=7)
    assert p.df is None
    assert "RecordedDataError" in p.error and "not recorded" in p.error
    assert "nearest recorded" in p.message.value and "N = 1, 8, 32, 64" in p.message.value
    # what a learner reads: no file path of the recording, and text, not a quoted Python string
    assert ".csv" not in p.error and "/" not in p.error
    assert p.error._repr_markdown_().startswith("RecordedDataError")
    assert all(t.visible is False and t.x is None for t in p.fig.data)
    assert "not recorded" in p.fig.layout.annotations[0].text
    assert "(not recorded)" in [lab for lab, _ in p.widgets["N"].options][-1]
    p.set(N=8)  # back to a recorded value: data again
    assert p.error is None and all(t.visible for t in p.fig.data)
    assert list(p.fig.data[0].y) == list(experiments.layout(experiments.BASE.replace(N=8)).conv_gpu_us)


def test_unknown_control_and_bad_panel_name():
    p = widgets.CapsPanel()
    with pytest.raises(InvalidSpec, match="controls are"):
        p.set(stride=2)
    with pytest.raises(InvalidSpec):
        widgets.Panel("nope")


def test_compound_control():
    p = widgets.SweepPanel()
    assert p.controls == ["field", "dtype_layout"]
    assert p.options("dtype_layout") == ["fp16 NHWC", "fp32 NCHW"]
    p.set(dtype_layout="fp32 NCHW")
    assert (
        p.df.attrs["request"]["base"]["dtype"] == "fp32" and p.df.attrs["request"]["base"]["layout"] == "NCHW"
    )
    assert p.options("field") == ["N", "C=K"]
    p.set(field="C=K")
    assert list(p.fig.layout.xaxis2.ticktext) == [str(v) for v in widgets.SWEEP_VALUES["C=K"]]
    assert list(p.fig.data[0].x) == list(range(len(widgets.SWEEP_VALUES["C=K"])))
    with pytest.raises(InvalidSpec, match="part of dtype_layout"):
        p.set(dtype="fp16")


def test_strategies_and_race_panels():
    s = widgets.StrategiesPanel()
    s.set(workload="resnet50_fp16_nhwc")
    assert s.df.attrs["request"] == {"workload": "resnet50_fp16_nhwc", "repeats": 3}
    assert list(s.fig.data[0].x) == list(experiments.strategies("resnet50_fp16_nhwc", 3).median_us)
    r = widgets.RacePanel()  # recorded: one control offering exactly the recorded pairs
    assert r.controls == ["launch_streams"] and sorted(r.options("launch_streams")) == [
        "graph 2",
        "graph 4",
        "python 2",
    ]
    r.set(launch_streams="python 2")
    assert r.df.attrs["request"] == {"launch": "python", "streams": 2, "min_runs": 1024}
    assert list(r.fig.data[0].y) == [0] and list(r.fig.data[2].y) == [0]  # zero drawn as a mark


def test_every_chart_of_the_lab_shows_a_widget_for_each_of_its_controls():
    """The lab panel opens on one chart, and each chart it switches to shows a widget for every
    control it has, and only those (build_cost's dtype_layout is no control of the plans chart the
    lab opens on); set() moves each of them."""
    lab = widgets.LabPanel()
    for chart in widgets.SPEC_EXPERIMENTS:
        lab.set(chart=chart)
        shown = [name for name, w in lab.view.widgets.items() if w.layout.display != "none"]
        assert shown == lab.controls[1:], chart
    lab.set(chart="build_cost")
    other = [v for v in lab.options("dtype_layout") if v != lab.value("dtype_layout")][0]
    lab.set(dtype_layout=other)
    assert lab.value("dtype_layout") == other and lab.error is None


def test_a_panel_opened_at_a_request_not_recorded_says_so_and_resets_to_recorded_data():
    """Opened from code at a request the recording lacks, a panel says why it has no data, its
    dropdown is wide enough for the "(not recorded)" label, and reset to base goes back to the
    configuration's own base, which was recorded (the request did not become the base)."""
    lab = widgets.LabPanel(chart="caps", dtype="bf16")
    assert lab.df is None and "not recorded" in str(lab.error)
    dtype = lab.view.widgets["dtype"]
    label = [t for t, v in dtype.options if v == "bf16"][0]
    assert label == "bf16 (not recorded)"
    assert int(dtype.layout.min_width.rstrip("px")) >= 8 * len(label)
    lab.reset()
    assert lab.error is None and lab.df is not None and lab.state["dtype"] != "bf16"


def test_lab_panel_switches_chart_and_exports_csv(tmp_path):
    lab = widgets.LabPanel()
    assert lab.cfg.experiment == "plans"
    plans_fig = lab.fig
    lab.set(chart="caps")
    assert lab.fig is not plans_fig and lab.fig in lab.box.children and plans_fig not in lab.box.children
    assert lab.df.attrs["experiment"] == "caps"
    lab.set(dtype="fp32")
    assert set(lab.df.dtype) == {"fp32"}
    lab.set(chart="plans")  # the plans chart comes back as a new widget (a re-shown one stops following
    # its updates in the page), and the old ones are closed
    assert (
        lab.fig is not plans_fig
        and lab.fig in lab.box.children
        and lab.df.attrs["request"]["spec"]["dtype"] == "fp32"
    )
    assert plans_fig.comm is None
    lab.set(chart="precision")
    lab.set(N=8)
    lab.set(chart="plans")  # plans were not recorded for N=8: back to its base, and said so
    assert lab.state["N"] == 32 and "went back to its base" in lab.status.value and lab.error is None
    path = lab.to_csv(tmp_path / "results.csv")
    back = pd.read_csv(path)
    assert len(back) == len(lab.df)
    assert list(back.columns[:7]) == [
        "mode",
        "gpu",
        "cudnn_backend",
        "cudnn_frontend",
        "date",
        "experiment",
        "request",
    ]
    assert set(back["mode"]) == {"recorded"} and json.loads(back["request"][0]) == lab.df.attrs["request"]
    assert lab.csv_name == "results.csv"


def test_csv_button_writes_into_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = widgets.RooflinePanel()
    p.view.csv_button.click()
    assert (tmp_path / "results_roofline.csv").is_file()
    assert "wrote" in p.status.value
    assert len(pd.read_csv(tmp_path / "results_roofline.csv")) == len(p.df)


def test_live_style_controls_show_labkit_errors_in_the_panel():
    """live=True gives the free controls (numbers typed in); here the answers still come from the
    recording (LABKIT_MODE=recorded), which is enough to exercise the error paths."""
    p = widgets.PlansPanel(live=True)
    assert isinstance(p.widgets["N"], widgets.W.BoundedIntText)
    assert {"K", "W", "stride", "padding", "groups"} <= set(p.controls)
    p.set(groups=3)  # C=K=64: 3 groups cannot split the channels
    assert "InvalidSpec" in p.error and "groups" in p.message.value
    assert all(t.visible is False for t in p.fig.data)
    p.set(groups=1)
    assert p.error is None and p.df is not None
    p.set(N=7)  # recorded data has no N=7: the RecordedDataError is shown, nothing raised
    assert "RecordedDataError" in p.error
    assert "measuring" not in p.status.value


def test_update_latency_is_recorded():
    p = widgets.PlansPanel()
    p.set(dtype="bf16")
    assert p.updates >= 2 and p.last_update_ms is not None and p.last_update_ms > 0
    # the status line says how long it took, the number and its unit kept together where it wraps
    assert re.search(r"looked up in \d+\u00a0ms", p.view.status.value), p.view.status.value
    assert list(p.fig.data[0].y) == sorted(experiments.plans(experiments.BASE.replace(dtype="bf16")).gpu_us)


def test_set_rejects_a_value_the_control_cannot_take():
    p = widgets.PlansPanel(live=True)
    with pytest.raises(InvalidSpec, match="N="):
        p.set(N="many")
    assert p.error is None and p.df is not None


def test_chart_width_is_set_and_kept_across_updates():
    p = widgets.FusionPanel()
    assert p.fig.layout.width == widgets.FIG_WIDTH
    p.set(N=8)
    p.set(N=7)  # no data
    p.set(N=1)
    assert p.fig.layout.width == widgets.FIG_WIDTH
    assert widgets.FusionPanel(fig_width=None).fig.layout.width is None


def test_live_neighbours_are_one_control_move_away():
    """What a live panel prefetches: states one control move from the one on screen."""
    p = widgets.PlansPanel(live=True)
    base = dict(p.state)
    ns = p.neighbours()
    assert 0 < len(ns) <= widgets.MAX_PREFETCH
    for s in ns:
        moved = {k for k in base if s[k] != base[k]} - {"S"}  # S follows R (square filters)
        assert len(moved) == 1, moved
    assert {s["dtype"] for s in ns} - {base["dtype"]} == {"fp32", "tf32", "bf16", "fp8_e4m3"}
    assert {s["N"] for s in ns} - {base["N"]} == {16, 64}  # the ladder's neighbours of 32
    assert {s["C"] for s in ns} - {base["C"]} == {32, 128}
    assert [s["dtype"] for s in ns[:4]] == ["fp32", "tf32", "bf16", "fp8_e4m3"]  # likeliest first
    assert p.prefetching == 0  # answers come from the recording here: nothing to measure ahead


def test_neighbours_at_the_ends_of_a_ladder():
    p = widgets.PlansPanel(live=True)
    p.controls_state.state = dict(p.state, N=1)
    assert {s["N"] for s in p.neighbours()} - {1} == {2}
    p.controls_state.state = dict(p.state, N=5000)
    assert {s["N"] for s in p.neighbours()} - {5000} == {256}


def test_live_choices_are_what_the_experiment_takes():
    """Live, a dtype the experiment rejects is not offered (nor measured ahead)."""
    f = widgets.FusionPanel(live=True)
    assert f.options("dtype") == list(experiments.FUSION_DTYPES)
    assert [v for _, v in f.widgets["dtype"].options] == list(experiments.FUSION_DTYPES)
    assert {s["dtype"] for s in f.neighbours()} <= set(experiments.FUSION_DTYPES)
    a = widgets.AlgorithmsPanel(live=True)
    assert "fp8_e4m3" not in a.options("dtype") and "bf16" in a.options("dtype")
    assert "fp8_e4m3" in widgets.PlansPanel(live=True).options("dtype")


def test_lessons_result_helpers_reject_an_unknown_experiment():
    from labkit.session import lessons

    for call in (
        lambda: lessons.data("nope"),
        lambda: lessons.is_cached("nope"),
        lambda: lessons.prefetch("nope", []),
    ):
        with pytest.raises(InvalidSpec, match="experiment='nope'|nope"):
            call()
    assert lessons.prefetch("plans", [dict(spec=experiments.BASE)]) == 0  # recorded: nothing to measure ahead
    assert lessons.is_cached("plans", spec=experiments.BASE) in (True, False)


#: what a panel's summary must say about its current controls (the words it is formatted from)
SUMMARY_NAMES = {
    "strategies": lambda s: [f"**{s['workload']}**"],
    "sweep": lambda s: [f"{s['field']}="],
    "roofline": lambda s: [f"{s['dtype']} {s['layout']}"],
    "fusion": lambda s: [f"{s['dtype']} {s['layout']}"],
    "race": lambda s: [f"{s['launch']} launch, {s['streams']} streams"],
    "algorithms": lambda s: [f"{s['dtype']} {s['layout']}"],
    "plans": lambda s: [f"{s['dtype']} {s['layout']} {s['direction']}"],
}


@pytest.mark.parametrize(
    "cls",
    [
        c
        for c in vars(widgets).values()
        if isinstance(c, type) and issubclass(c, widgets.Panel) and c not in (widgets.Panel, widgets.LabPanel)
    ],
    ids=lambda c: c.__name__,
)
def test_header_chart_and_summary_follow_every_control(cls):
    """After each `set` (every recorded value of every control, one at a time from the base): the
    rows on screen are the request the controls show, the summary names the controls' values, the
    chart title names them where it names any, and the header claims nothing about the current
    value (it describes the base only)."""
    from labkit.session import lessons

    p = cls()
    exp = p.cfg.experiment
    for name in p.controls:
        for value in [v for v in p.options(name) if v != p.value(name)]:
            p.reset()
            p.set(**{name: value})
            assert p.error is None, (exp, name, value, p.error)
            assert p.df.attrs["request"] == p.request(), (exp, name, value)
            text = lessons.summary(p.df)
            for want in SUMMARY_NAMES.get(exp, lambda s: [])(p.state):
                assert want in text, (exp, name, value, want, text[:300])
            title = p.fig.layout.title.text
            if exp == "sweep":
                assert f"Sweep of {p.state['field']}" in title, title
            if exp == "strategies":
                assert f"'{p.state['workload']}'" in title, title
            header = p.header.value
            for other in p.options(name):
                if other != value and exp == "sweep":
                    assert f"{other} sweep" not in header, header


def test_dropdowns_get_room_for_their_longest_option():
    """A workload dropdown holds "resnet50_fp16_nhwc": it spans two grid columns, in both modes
    (live panels set their options when built, recorded ones when synced)."""
    p = widgets.StrategiesPanel()
    w = p.widgets["workload"]
    assert w.layout.grid_column == "span 2" and int(w.layout.min_width.rstrip("px")) >= 8 * len(
        "resnet50_fp16_nhwc"
    )
    assert "dtype" not in p.widgets  # a widget for each of the panel's own controls only
    assert (
        widgets.Panel("layout").widgets["dtype"].layout.grid_column is None
    )  # short options stay in one column
    from labkit.present.panel.view import PanelView

    live = PanelView(
        True,
        "x.csv",
        fig_width=900,
        gpu_options=[("this GPU", "")],
        gpu_value="",
        on_control=None,
        on_button=None,
        on_gpu=None,
        controls=["workload", "N", "layout"],
    )
    assert live.widgets["workload"].layout.grid_column == "span 2"
    # controls of one kind share one layout object (each object is a comm the page opens); none is
    # changed in place
    assert live.widgets["N"].layout is live.widgets["layout"].layout is not live.widgets["workload"].layout
    assert len({id(w.layout) for w in p.widgets.values()}) <= 3


def test_a_panel_opened_away_from_its_base_resets_to_where_it_opened():
    """A lesson that opens a panel elsewhere (05: plans in NCHW; 09: the report on VGG16) makes that
    its base: the header names it and *reset to base* goes back to it."""
    import re

    from labkit.present.panel.view import header_html

    p = widgets.PlansPanel(layout="NCHW")
    assert "reset to base (fp16 NCHW fprop" in re.sub("<[^>]+>", "", header_html(p.controls_state))
    p.set(dtype="fp32")
    p.reset()
    assert (p.state["dtype"], p.state["layout"]) == ("fp16", "NCHW")
    r = widgets.ReportPanel(net="vgg16")
    assert "reset to base (vgg16, batch 32" in re.sub("<[^>]+>", "", header_html(r.controls_state))
    roof = widgets.RooflinePanel(dtype="tf32")  # lesson 08
    assert "reset to base (tf32 NHWC, batch 32)" in re.sub("<[^>]+>", "", header_html(roof.controls_state))
    assert widgets.PANELS["plans"]().cfg.base["layout"] == "NHWC"  # the shared configuration is untouched


def test_every_panel_names_the_state_it_opens_at():
    """Each panel's header names its base as its configuration describes it, so a panel a lesson
    opens elsewhere never names the configuration's own base."""
    for name, cfg in experiments.PANELS.items():
        assert cfg.describe is not None, (
            f"panel {name} has no describe: opened elsewhere, its header names its own base"
        )
        assert cfg.describe(cfg.base) == cfg.base_text, name


def test_a_panel_opened_where_another_gpu_has_no_recording_goes_back_to_its_own_base(tmp_path, monkeypatch):
    """Switched to a GPU whose recording lacks where the lesson opened the panel (here an H200
    recording without the N=8 precision run), the controls go back to the configuration's own base,
    which it has, not to the opening it lacks."""
    import recording_copies

    spec = experiments.BASE.replace(N=8).to_dict()
    request = {"dtypes": ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3"], "spec": spec}
    recording_copies.without(tmp_path, monkeypatch, "h200", "precision", request)
    p = widgets.PrecisionPanel(N=8)
    assert p.error is None and p.state["N"] == 8 and p.cfg.base["N"] == 8
    p.set(gpu="h200")
    assert p.error is None and p.df.attrs["gpu"] == "NVIDIA H200"
    assert p.state["N"] == 32
    p.set(gpu=None)
    assert p.error is None and p.df.attrs["gpu"] == "NVIDIA H100 80GB HBM3"
