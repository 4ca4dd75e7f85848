"""The network workspace report in recorded mode (`labkit.report`, `python -m labkit report`,
`widgets.ReportPanel`, lesson 09's checks), from the reports recorded on the H100."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
from labkit import env, errors, networks
from labkit.errors import InvalidSpec
from labkit.experiments import your_network
from labkit.present import check, widgets
from labkit.session import lessons
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(env.mode().live, reason="recorded-mode tests (this machine is live)")


@pytest.fixture(scope="module")
def rep():
    return labkit.report("resnet50", batch=32, dtype="fp16", layout="NHWC")


@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_each_recorded_preset_has_one_row_per_layer_of_the_real_network(net):
    want = [lay.name for lay in networks.layers_of(net, batch=32)]
    holding = [
        r.name
        for r in recordings.shipped()
        if r.has(
            "network_report",
            your_network.recorded_calls()[0][1] | {"net": net, "training": False, "image": 224},
        )
    ]
    assert (
        "h200" in holding
    )  # every preset is recorded on the H200 (the H100 holds resnet50 and resnext50_32x4d)
    for name in holding:
        r = labkit.report(net, recording=name)
        assert list(r.layers.layer) == want and r.complete, name
        assert (
            r.provenance["gpu"] == recordings.named(name).metadata["gpu"]
            and r.provenance["mode"] == "recorded"
        )
        assert r.layers.checked.astype(bool).all() and (r.layers.status == "ok").all(), name
        assert r.cut["plans"] == 0 and r.cut["layers"] == 0, (name, r.cut)
    default = labkit.report(net)  # no recording named: the default's when it has it, else the one that has it
    assert default.provenance["gpu"] == recordings.named(holding[0]).metadata["gpu"]


def test_the_presets_have_the_torchvision_layer_counts():
    counts = {n: len(networks.layers_of(n)) for n in networks.PRESETS}
    assert counts == {
        "resnet50": 53,
        "resnext50_32x4d": 53,
        "mobilenet_v2": 52,
        "convnext_tiny": 22,
        "vgg16": 13,
        "deeplabv3_aspp": 6,
    }


def test_per_layer_plans_are_consistent(rep):
    layers = rep.layers
    assert (layers.fastest_gpu_us <= layers.heuristic_gpu_us).all()
    assert (layers.smallest_workspace_bytes <= layers.fastest_workspace_bytes).all()
    assert (layers.max_rel_error <= layers.tolerance).all()
    assert layers.spec_id.nunique() == len(networks.unique(networks.layers_of("resnet50", batch=32)))
    counts = layers.groupby("spec_id")["count"].first()
    assert counts.sum() == len(layers)  # identical layers measured once and counted


def test_a_strategys_timeline_peak_is_its_reported_peak(rep):
    assert set(rep.strategies.strategy) == set(
        your_network.strategy_labels(rep.layers.fastest_workspace_bytes.max()).values()
    )
    for row in rep.strategies.itertuples():
        tl = rep.timeline[rep.timeline.strategy == row.strategy]
        assert (
            len(tl) == len(rep.layers)
            and tl.held_bytes.max() == row.peak_workspace_bytes == row.stats_peak_bytes
        )
    mpc = rep.strategies.set_index("strategy").loc["malloc_per_call"]
    assert (
        mpc.held_after_bytes == 0
        and mpc.alloc_calls_per_pass == (rep.layers.fastest_workspace_bytes > 0).sum()
    )


def test_the_budget_curve_never_gets_slower_with_more_room(rep):
    b = rep.budget
    assert b.iloc[-1].cap_label == "no cap" and b.iloc[-1].slowdown == 1.0
    assert (b.pass_gpu_us.diff().dropna() <= 1e-9).all()
    assert b.iloc[-1].pass_gpu_us == pytest.approx(rep.layers.fastest_gpu_us.sum())


def test_the_figure_and_the_written_report(rep, tmp_path):
    fig = rep.figure()
    assert len(fig.data) == widgets.experiments.TRACES["network_report"] == 11
    assert "recorded on H100 SXM" in fig.layout.title.text
    out = rep.write(tmp_path / "r")
    assert {p.name for p in out.iterdir()} >= {
        "layers.csv",
        "strategies.csv",
        "timeline.csv",
        "budget.csv",
        "plans.csv",
        "report.json",
        "report.html",
    }
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js inside: it opens without a network


def test_the_call_panels_share_their_x_axis(rep):
    """The GPU time per call and the bytes held during each call are stacked on one x axis: zoom or
    pan one and the other follows; the caps panel (categories) keeps its own."""
    lay = rep.figure().layout
    assert lay.xaxis2.matches == "x" and lay.xaxis3.matches is None
    assert lay.xaxis3.type == "category"


def test_the_cli_writes_the_report(tmp_path):
    env_ = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "report", "resnext50_32x4d", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        env=env_,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "53 convolution calls" in done.stdout and (tmp_path / "x" / "report.html").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "labkit", "report", "resnet51", "--out", str(tmp_path / "y")],
        capture_output=True,
        text=True,
        env=env_,
        timeout=300,
    )
    assert (
        bad.returncode == 2
        and "known: resnet50, resnext50_32x4d" in bad.stderr
        and not (tmp_path / "y").exists()
    )


def test_bad_input_is_a_clear_error():
    with pytest.raises(errors.InvalidSpec, match="known: resnet50"):
        labkit.report("resnet51")
    with pytest.raises(errors.InvalidSpec, match="training"):
        labkit.report("resnet50", training="yes")
    with pytest.raises(errors.InvalidSpec, match="empty list"):
        labkit.report([])
    with pytest.raises(errors.RecordedDataError):  # a batch that was not recorded: named, not made up
        labkit.report("resnet50", batch=7)
    with pytest.raises(errors.RecordedDataError):
        labkit.report([labkit.ConvSpec(N=2, C=8, H=8, W=8, K=8)])


def test_the_lesson_exercises_answer_from_the_reports(rep, capsys):
    b = rep.budget.set_index("cap_bytes")
    slow = float(b.loc[4 << 20, "slowdown"])
    assert check.small_cap_cost.exercise.truth() == (
        "under 2%" if slow < 1.02 else "2-20%" if slow < 1.2 else "over 20%"
    )
    vgg = labkit.report("vgg16")
    need = vgg.layers.set_index("layer").fastest_workspace_bytes
    peak = vgg.strategies.set_index("strategy").peak_workspace_bytes
    tied = [name for name, v in need.items() if v == need.max()]
    for name in tied:  # any of the layers that tie is right
        assert check.vgg16_workspace((name, peak.idxmax()))
    assert not check.vgg16_workspace((need.idxmin(), peak.idxmax()))
    assert "pair" in check.vgg16_workspace("features.24").message  # not an answer's form: one line
    assert "layer of vgg16" in check.vgg16_workspace(("conv1", "async_pool")).message
    # a strategy as the learner may copy it from the table, the chart or lesson 02
    for spelling in ("async_pool (32 MiB)", "ASYNC_POOL", "async_pool"):
        assert check.vgg16_workspace((tied[0], spelling))
    assert "strategy second" in check.vgg16_workspace((tied[0], "keyed_cache")).message  # two: which?
    pool = rep.strategies.set_index("strategy").loc["async_pool"]
    assert pool.peak_workspace_bytes > rep.layers.fastest_workspace_bytes.max()
    assert check.async_pool_holds("chunks") and not check.async_pool_holds("leak")
    capsys.readouterr()


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_exercise_1s_answer_follows_from_what_the_lesson_shows_once_answered(recording, recorded_mode):
    """Exercise 1's class follows from the numbers the lesson shows, as shown (to 0.1 us): the
    over-cap table's two times per call (under the check, once it has an answer) and the summary's
    pass of the fastest plans (above it)."""
    recordings.use(recording)
    rep = labkit.report("resnet50", batch=32, dtype="fp16", layout="NHWC")
    cap = your_network.exercises.SMALL_CAP
    shown = rep.over_cap(cap)
    rows = shown.data
    assert (
        len(rows)
        and (rows.fastest_workspace_bytes > cap).all()
        and (rows.within_cap_workspace_bytes <= cap).all()
    )
    html = shown.to_html()
    fastest = [float(f"{v:.1f}") for v in rows.fastest_gpu_us]
    within = [float(f"{v:.1f}") for v in rows.within_cap_gpu_us]
    assert all(f"{v:.1f}" in html for v in fastest + within)
    whole = float(re.search(r"fastest plan adds up to \*\*([\d,.]+) us\*\*", rep.summary()).group(1))
    slow = 1 + (sum(within) - sum(fastest)) / whole
    predicted = next(k for k, top in your_network.exercises.SLOWDOWNS.items() if slow < top)
    assert predicted == check.small_cap_cost.exercise.truth(), (recording, slow)


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_exercise_2_names_the_pass_of_a_cap_above_0_b(recording, recorded_mode, fresh_progress, capsys):
    """Exercise 2 (the 0 B cap's pass): an answer that is the budget curve's pass under a 1 MiB or
    4 MiB cap is told so, and so is the uncapped pass; neither is taken for right."""
    recordings.use(recording)
    rep = labkit.report("resnet50", batch=32, dtype="fp16", layout="NHWC")
    b = rep.budget.set_index("cap_bytes").pass_gpu_us
    for cap in (1 << 20, 4 << 20):
        said = check.zero_cap_pass(float(b[cap]))
        assert not said and "pass under a 1.0 MiB or a 4.0 MiB cap" in " ".join(said.message.split())
    said = check.zero_cap_pass(float(b[-1]))
    assert not said and "the pass with no cap" in said.message
    assert check.zero_cap_pass(float(b[0]))
    capsys.readouterr()


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_the_over_cap_calls_add_up_to_the_budget_curve(recording, net):
    """Every cap of the budget curve: the pass of the fastest plans plus what each over-cap call's
    fastest plan within the cap adds is the curve's pass time."""
    rep = labkit.report(net, recording=recording)
    whole = float(rep.layers.fastest_gpu_us.sum())
    for row in rep.budget[rep.budget.cap_bytes >= 0].itertuples():
        over = rep.over_cap(int(row.cap_bytes)).data
        assert len(over) >= row.calls_changing_plan
        added = float((over.within_cap_gpu_us.astype(float) - over.fastest_gpu_us).sum())
        assert whole + added == pytest.approx(row.pass_gpu_us, rel=1e-9), (recording, net, row.cap_label)
    with pytest.raises(errors.InvalidSpec, match="bytes"):
        rep.over_cap(-1)
    with pytest.raises(errors.InvalidSpec, match="bytes"):
        rep.over_cap("4 MiB")


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_the_memory_timelines_axis_fits_its_lines(recording, net):
    """The held panel's y axis runs from zero to just above its highest line (a flat zero: to 1 MiB),
    and its legend sits beside the plots, so no room above the lines is kept for it."""
    fig = labkit.report(net, recording=recording).figure()
    lines = [t for t in fig.data if t.yaxis == "y2" and len(t.y)]
    top = max(max(t.y) for t in lines)
    low, high = fig.layout.yaxis2.range
    assert low == 0 and min(min(t.y) for t in lines) >= 0
    if top > 0:
        assert top < high <= top * (1 + your_network.charts.HELD_ROOM) + 1e-9, (recording, net, top, high)
    else:
        assert high == 1.0
    legend = fig.layout.legend2
    assert legend.x >= 1 and legend.xanchor == "left"  # right of the plots: over no line
    # a line standing for every strategy (deeplabv3_aspp) made a ninth legend line, cut off in Chromium
    entries = [t.name for t in fig.data if t.legend == "legend2" and t.showlegend]
    assert all(e.count("<br>") < 8 for e in entries), entries


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_a_shared_lines_legend_breaks_between_labels_never_inside_a_phrase(recording, net):
    """The memory timeline's legend entry for a line that stands for several strategies breaks only
    between their labels: each label, and "(one line: about the same)", reads on one line."""
    rep = labkit.report(net, recording=recording)
    label = "|".join(re.escape(s) for s in sorted(set(rep.strategies.strategy), key=len, reverse=True))
    whole_labels = re.compile(rf"(?:{label})(?:, (?:{label}))*,?")
    shared = [t for t in rep.figure().data if t.legend == "legend2" and t.showlegend and "<br>" in t.name]
    assert shared, (recording, net)
    for t in shared:
        lines = t.name.split("<br>")
        assert lines[-1] == "(one line: about the same)", (recording, net, lines)
        assert all(whole_labels.fullmatch(line) for line in lines[:-1]), (recording, net, lines)


def _budget_runs(y: list) -> list:
    """(first, last) index of each run of equal pass times along the budget curve."""
    runs, start = [], 0
    for i in range(1, len(y) + 1):
        if i == len(y) or y[i] != y[start]:
            runs.append((start, i - 1))
            start = i
    return runs


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_the_budget_curve_labels_its_numbers_on_the_chart(recording, net):
    """The budget curve's numbers read on the chart, not only in the hover: each run of equal pass
    times is labelled at its first cap (0 B, the smallest cap, always) with the curve's own time, as
    the axis writes it, and how much longer it is than with no cap; a run of several caps names its
    last, and the fastest's label the smallest cap that reaches it (the knee), so the caps the lesson
    asks about (0 B, 4 MiB, 64 MiB, no cap) all read off a label."""
    rep = labkit.report(net, recording=recording)
    curve = rep.figure().data[10]
    budget = rep.budget[rep.budget.calls_without_plan == 0]
    caps, y, text = list(curve.x), [float(v) * 1000 for v in curve.y], list(curve.text)
    assert caps == list(budget.cap_label) and caps[0] == "0 B" and caps[-1] == "no cap"
    assert y == pytest.approx(list(budget.pass_gpu_us), rel=1e-12)  # us; the axis is in ms
    assert rep.figure().layout.yaxis3.title.text == "pass time (ms)"
    assert curve.yaxis == "y3" and "text" in curve.mode
    runs = _budget_runs(y)
    assert [i for i, t in enumerate(text) if t] == [first for first, _ in runs], (recording, net, text)
    knee = runs[-1][0]
    assert y[knee] == min(y) and all(v > y[-1] for v in y[:knee])
    for first, last in runs:
        label = text[first]
        time = re.match(r"([\d,.]+) ms", label).group(1)
        assert float(time.replace(",", "")) == pytest.approx(y[first] / 1000, abs=0.0005), (
            recording,
            net,
            label,
        )
        if (first, last) == runs[-1]:
            assert "the fastest" in label and "%" not in label, label
            assert (f"from {caps[first]} on" in label) == (last > first), label
            continue
        pct = float(re.search(r"\+([\d.]+)%", label).group(1))
        added = (y[first] / y[-1] - 1) * 100
        assert pct == pytest.approx(added, rel=0.06, abs=0.006), (recording, net, label)
        assert (f"{caps[first]} to {caps[last]}" in label) == (last > first), label
    named = " ".join(text)
    for cap in ("0 B", "4.0 MiB", "64.0 MiB", "no cap"):
        i = caps.index(cap)
        first, last = next(r for r in runs if r[0] <= i <= r[1])
        assert i == first or caps[last] in named or f"from {caps[first]} on" in named, (recording, net, cap)


def test_the_budget_labels_say_where_the_time_changes_and_nowhere_else():
    labels = your_network.charts.budget_labels
    caps = ["0 B", "1.0 MiB", "4.0 MiB", "16.0 MiB", "no cap"]
    said = labels(caps, [1200.0, 1100.0, 1100.0, 1000.0, 1000.0])
    assert said == [
        "1.200 ms, +20.0%",
        "1.100 ms, +10.0%<br>1.0 MiB to 4.0 MiB",
        "",
        "1.000 ms: the fastest,<br>from 16.0 MiB on",
        "",
    ]
    # every cap the same: the fastest from the smallest cap on; only no cap reaches it: said so
    assert labels(caps[:2], [500.0, 500.0]) == ["0.500 ms: the fastest,<br>from 0 B on", ""]
    assert labels(caps[:2], [600.0, 500.0]) == ["0.600 ms, +20.0%", "0.500 ms: the fastest"]
    # two times that read alike on the axis: the difference too, in a unit it reads in
    assert labels(caps[:2], [1476.2, 1475.9])[0] == "1.476 ms, +0.30 us (+0.020%)"
    # a cut report sums no pass: nothing to label
    assert labels(caps[:2], [None, None]) == ["", ""] and labels([], []) == []


def test_report_tables_read_whole_numbers_as_integers(rep):
    layers, strategies = rep.layers, rep.strategies
    assert str(layers["count"].dtype) == "Int64" and str(layers["N"].dtype) == "Int64"
    assert str(strategies["alloc_calls_per_pass"].dtype) == "Int64"
    assert layers["fastest_gpu_us"].dtype.kind == "f"  # times stay floats
    html = rep.show("layers", head=3).to_html()
    assert "MiB" in html and "checked" in html
    assert re.search(r'col2" >\d+</td>', html)  # count, an integer


def test_the_layers_shown_give_both_plans_times_and_workspaces(rep):
    """Lesson 09's Exercise 1 sends the learner to the first rows of ``rep.show("layers")`` for each
    call's fastest plan and smallest-workspace plan, "with their times and workspaces": all four show."""
    shown = rep.show("layers", head=12)
    for plan in ("fastest", "smallest"):
        for column in (f"{plan}_gpu_us", f"{plan}_workspace_bytes"):
            assert column in shown.data.columns, column
    assert f"{rep.layers.smallest_gpu_us.iloc[0]:.1f}" in shown.to_html()


def test_a_shape_cell_breaks_only_between_its_tensors_and_its_filter(rep):
    """With nine columns the spec column is narrow: its cells may wrap once, between
    ``32x3x224x224 -> 64`` and ``7x7 s2 p3``, never inside either (it broke after "-" of "->")."""
    html = rep.show("layers", head=12).to_html()
    cells = re.findall(r'class="data row\d+ col1" >([^<]*)</td>', html)
    assert len(cells) == 12, cells
    for cell, spec in zip(cells, rep.layers.spec):
        assert cell.count(" ") == 1 and "-\u2060>" in cell, repr(cell)
        assert cell.replace("\u00a0", " ").replace("\u2060", "") == spec.split(" ", 3)[-1]


def test_coinciding_strategies_share_one_named_line(rep):
    from labkit.experiments.your_network.charts import coinciding

    groups = coinciding(rep.timeline)
    assert sum(len(g) for g in groups) == len(your_network.REPORT_STRATEGIES)
    fig = rep.figure()
    drawn = [t for t in fig.data[2:10] if len(t.x)]
    assert len(drawn) == len(groups)
    assert all(t.showlegend for t in drawn) and not any(t.showlegend for t in fig.data[2:10] if not len(t.x))
    biggest = max(groups, key=len)
    assert all(name in drawn[groups.index(biggest)].name for name in biggest)


def test_the_report_panel_offers_the_recorded_networks():
    p = widgets.ReportPanel()
    assert p.wait(60)
    assert set(p.options("net")) == set(
        your_network.RECORDED_PRESETS
    )  # every shipped recording holds them all
    assert "H100" in p.fig.layout.title.text  # the default recording answers
    assert len(p.fig.data) == 11 and len(p.fig.data[0].y) == 53
    p.set(net="resnext50_32x4d")
    assert p.wait(60) and "resnext" in p.fig.layout.title.text.lower()
    lessons.forget()


def test_the_cli_input_shape_is_read_or_named():
    from labkit.present.netreport import parse_shape

    assert parse_shape("16,3,224,224") == (16, 3, 224, 224) == parse_shape("16x3x224x224")
    with pytest.raises(errors.InvalidSpec, match="input_shape='16,three,224'"):
        parse_shape("16,three,224")


@pytest.mark.parametrize("measured", [0, 1])
def test_the_chart_and_summary_draw_the_tables_a_live_report_reports_as_it_goes(rep, measured):
    """A live report's first partial table lists the layers before any is measured (a panel draws it
    as its first paint); then one layer at a time is filled in. Both must draw."""
    from labkit.draw.plots import ok_rows
    from labkit.experiments.your_network.request import network_of, pass_steps
    from labkit.experiments.your_network.runs import report_table

    net = network_of("resnet50", 32, "fp16", "NHWC", 224)
    steps = pass_steps(net.layers, False)
    groups = networks.unique([networks.Layer(n, s) for n, s in steps])
    done = {}
    if measured:  # the first distinct convolution, as the recording measured it
        first = ok_rows(rep.layers).iloc[0].to_dict()
        keep = [c for c in first if c.startswith(("fastest_", "heuristic_")) or c in ("status", "reason")]
        done = {0: {c: first[c] for c in keep}}
    df = report_table(steps, groups, done, [])
    df.attrs.update(rep.frame.attrs, experiment="network_report", partial=True)
    fig = your_network.network_report_chart(df)
    assert len(fig.data) == 11
    your_network.network_report_summary(df)


@pytest.mark.parametrize("net", your_network.RECORDED_PRESETS)
def test_the_charts_note_names_the_largest_request_of_the_layers(net):
    """The note under the chart says what async_pool holds and the largest workspace a call asks for,
    both read from the report's own tables."""
    from labkit.draw.plots import fmt_bytes

    r = labkit.report(net, batch=32, dtype="fp16", layout="NHWC")
    largest = r.layers.fastest_workspace_bytes.max()
    held = r.timeline[r.timeline.strategy == "async_pool"].held_bytes.max()
    fig = r.figure()
    text = " ".join(str(a.text) for a in fig.layout.annotations) + " " + str(fig.layout.title.text)
    assert largest > 0 or net == "deeplabv3_aspp"  # its fastest fp16 NHWC plans take no workspace
    assert f"async_pool holds {fmt_bytes(held)}; the largest request is {fmt_bytes(largest)}." in text


def test_a_cut_reports_budget_table_shows_its_pass_times_as_blank(rep):
    # a live report cut short has a call with no timed plan: every cap's pass time is NaN, and
    # the long frame's budget rows hold no value of pass_gpu_us or slowdown
    frame = rep.frame.copy()
    budget = frame["table"] == "budget"
    frame.loc[budget, ["pass_gpu_us", "slowdown"]] = float("nan")
    cut = dataclasses.replace(rep, frame=frame)
    assert cut.budget["pass_gpu_us"].isna().all() and cut.budget["slowdown"].isna().all()
    assert list(cut.budget.columns) == list(rep.budget.columns)  # its own columns, no other table's
    shown = cut.show("budget").data
    assert {"pass_gpu_us", "slowdown"} <= set(shown.columns)
    assert shown["pass_gpu_us"].isna().all() and len(shown) == budget.sum()
    assert "<td" in cut.show("budget").to_html()  # the learner sees the table, its pass times blank
    with pytest.raises(InvalidSpec, match="no_such_column"):
        cut.show("budget", columns=["no_such_column"])


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_each_tables_columns_are_the_ones_its_rows_may_hold(recording):
    """`COLUMNS` names every column a recorded table has and every column its rows are written with,
    so a cut report's table keeps its own columns and leaves out the other tables'."""
    from labkit.experiments.your_network.request import COLUMNS
    from labkit.experiments.your_network.tables import budget_rows

    for net in your_network.RECORDED_PRESETS:
        r = labkit.report(net, batch=32, dtype="fp16", layout="NHWC", recording=recording)
        for name in your_network.TABLES:
            assert set(getattr(r, name).columns) <= set(COLUMNS[name]), (net, name)
    rows = budget_rows(r.plans, [(0, "fprop")])
    assert all(set(row) - {"table"} <= set(COLUMNS["budget"]) for row in rows)


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_summary_says_how_much_of_a_pass_the_gpu_sat_idle_as_its_numbers_show(recording, recorded_mode):
    """The summary says the GPU mostly waits for launches only where every strategy's pass took over
    twice the kernels' time; elsewhere it gives the idle share of the fastest and slowest pass (VGG16's
    fastest pass is within 4% of its kernels). It names a layer for the largest workspace only where one
    is asked for, says two identical passes differ by 0% nowhere, and counts in words that agree."""
    recordings.use(recording)
    for net in your_network.RECORDED_PRESETS:
        rep = labkit.report(net, batch=32, dtype="fp16", layout="NHWC")
        text = str(rep.summary())
        passes = rep.strategies.pass_gpu_us
        kernels = rep.layers.fastest_gpu_us.sum()
        mostly = "the GPU mostly waits for launches" in text
        assert mostly == (kernels < passes.min() / 2), (recording, net, text)
        if not mostly:
            least, most = 1 - kernels / passes.min(), 1 - kernels / passes.max()
            assert f"sat idle between launches for {max(least, 0):.0%} to {most:.0%} of a pass" in text, text
        largest = rep.layers.fastest_workspace_bytes.max()
        assert ("The largest workspace a fastest plan asks for is" in text) == (largest > 0), (net, text)
        assert "differ by 0%" not in text and "(s)" not in text, (recording, net, text)
    cap = check.small_cap_cost.exercise
    assert "1 call changes plan." in cap.why(cap.truth()), cap.why(cap.truth())  # conv1 alone, on both


@pytest.mark.parametrize("ratio, said", [(6.0, "6x"), (7.5, "7.5x")])
def test_the_reports_slower_plans_quote_the_ratio_autotune_stops_at(monkeypatch, ratio, said):
    """The summary and the command line say the ratio `stops.EAGER_STOP_RATIO` holds, whatever it is."""
    from labkit.experiments.your_network.summary import slower_plans_sentence
    from labkit.gpu.timing import stops
    from labkit.present.netreport import cut_line

    monkeypatch.setattr(stops, "EAGER_STOP_RATIO", ratio)
    counts = dict(plans=0, layers=0, strategies=0, slower_plans=2)
    for text in (slower_plans_sentence(1), slower_plans_sentence(2), cut_line(counts)):
        assert f"over {said} slower than the best" in text, text


@pytest.mark.parametrize("n", [1, 2])
def test_the_reports_counts_agree_with_their_nouns(n):
    """Each count the report's summary, the command line and exercise 2 say agrees in whole words:
    "1 call failed", "2 calls failed"; no "call(s)" or "strateg(y/ies)"."""
    from labkit.draw.prose import counted
    from labkit.experiments.your_network import summary
    from labkit.experiments.your_network.exercises import zero_cap_split
    from labkit.present.netreport import cut_line

    call, calls = ("1 call", "1 plan") if n == 1 else ("2 calls", "2 plans")
    assert counted(n, "call") == call and counted(n, "plan") == calls
    assert counted(n, "strategy", "strategies") == ("1 strategy" if n == 1 else "2 strategies")
    assert summary.reference_check_sentence(n) == f"**{call} failed the reference check.**"
    wrong = summary.wrong_plans_sentence(n)
    assert (
        wrong.startswith(f"**{calls}** computed wrong results")
        and ("it was" if n == 1 else "they were") in wrong
    )
    line = cut_line(dict(plans=n, layers=n, strategies=n, slower_plans=n))
    layer = "distinct layer" if n == 1 else "distinct layers"
    strategy = "strategy" if n == 1 else "strategies"
    assert line.startswith(f"cut by a time budget: {calls}, {n} {layer}, {n} {strategy}; {calls} left as"), (
        line
    )
    split = zero_cap_split(n, n, keep_us=1.5)
    want = (
        "1 call keeps its fastest plan (1.5 us); the 1 whose fastest plan needs a workspace runs its "
        if n == 1
        else "2 calls keep their fastest plan (1.5 us); the 2 whose fastest plan needs a workspace run their "
    )
    assert split == want + "smallest-workspace plan", split
    for text in (wrong, line, split):
        assert "(s)" not in text and "(y/ies)" not in text, text


@pytest.mark.parametrize("distinct", [1, 5])
def test_a_partial_report_sums_its_fastest_plans_over_the_layers_measured_so_far(rep, distinct):
    """While a live report measures, some layers are ``pending``: its summary sums the fastest plans
    over the layers measured so far, and says so, not "per pass"."""
    from labkit.draw.plots import fmt_us

    df = rep.frame.copy()
    layers = df["table"] == "layers"
    pending = layers & (df["spec_id"] >= distinct)
    measured = [c for c in df.columns if c.startswith(("fastest_", "heuristic_", "smallest_"))]
    measured += ["max_rel_error", "checked", "plans_timed", "plans_cut", "step_seconds"]
    df.loc[pending, measured] = float("nan")
    df.loc[pending, ["status", "reason"]] = ["pending", "not measured yet"]
    df = df[layers | ((df["table"] == "plans") & (df["spec_id"] < distinct))]
    df.attrs.update(rep.frame.attrs, partial=True)
    ok = df[(df["table"] == "layers") & (df["status"] == "ok")]
    text = str(your_network.network_report_summary(df))
    layers_said = "1 layer" if len(ok) == 1 else f"{len(ok)} layers"
    assert (len(ok) == 1) == (distinct == 1) and len(ok) < int(layers.sum())  # conv1 alone is spec 0
    assert (
        f"adds up to **{fmt_us(ok['fastest_gpu_us'].sum())}** over the {layers_said} measured so far against "
        f"{fmt_us(ok['heuristic_gpu_us'].sum())} for the heuristic's picks" in text
    ), text
    assert "per pass" not in text and "The largest workspace a fastest plan asks for so far is" in text, text
    n_distinct = int(df.loc[df["table"] == "layers", "spec_id"].nunique())
    assert f"({n_distinct} distinct, {distinct} measured so far)" in text and "each measured once" not in text
    assert "each measured once" in str(rep.summary())
    assert "adds up to" in str(rep.summary()) and "per pass against" in str(rep.summary())
