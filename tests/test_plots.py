"""labkit.draw.plots on the shipped recording: every builder, every recorded request; trace counts,
axis titles with units, provenance in the title's subtitle line, values drawn equal the DataFrame's, and a
roofline without a known GPU draws no roof and says so."""

from __future__ import annotations

import re

import pytest
import recorded_charts

from labkit import env, experiments
from labkit.draw import names, plots, prose, units
from labkit.errors import LabkitError
from labkit.experiments import plans_autotune, workspace_basics
from labkit.session import lessons
from labkit.store import recordings


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def recording_of(name):
    """The shipped recording that answers ``name`` in recorded mode: the default one, else the first
    other that holds it (lesson 10's traces were recorded on the H200 only)."""
    rec = recordings.current()
    if name in rec.experiments():
        return rec
    return next(r for r in recordings.shipped() if name in r.experiments())


def recorded_frames(name):
    """(request, DataFrame) for every request of ``name`` in the recording that answers with rows."""
    rec = recording_of(name)
    out = []
    for req in rec.requests(name):
        try:
            out.append((req, rec.lookup(name, req)))
        except LabkitError:
            continue
    return out


def recorded_figures(name):
    """(request, DataFrame, figure) for every request of ``name`` in the recording that answers with
    rows, as `recorded_frames` reads them (`recorded_charts`: each drawn once for all the tests)."""
    return recorded_charts.every_request(recording_of(name), name, model=False)


def _titles(fig):
    """Every axis title of a figure, as text."""
    lay = fig.layout.to_plotly_json()
    return [v.get("title", {}).get("text", "") for k, v in lay.items() if k.startswith(("xaxis", "yaxis"))]


UNITS = {  # chart -> strings some axis title must contain
    "precision": ["(us", "error"],
    "layout": ["(us)"],
    "fusion": ["(us", "(MiB)"],
    "plans": ["(MiB)", "(us"],
    "caps": ["(us)", "slowdown (x)"],
    "algorithms": ["(us)", "(MiB)"],
    "build_cost": ["(ms"],
    "roofline": ["FLOP/byte", "TFLOP/s"],
    "sweep": ["(us)", "(MiB)"],
    "workspace_sizes": ["(MiB)"],
    "strategies": ["(us)", "(MiB)", "(count)"],
    "race": ["(count)"],
    "network_report": ["(us)", "(MiB)", "pass time (ms)"],
    "kernels": ["GPU time per call (us)", "host us"],
    "fusion_kernels": ["(us"],
    "strategy_timeline": ["microseconds"],
    "race_timeline": ["microseconds"],
    "build_log": [],
    "torch_knobs": ["(us)", "(ms)", "(MiB)"],
}


@pytest.mark.parametrize("name", sorted(experiments.CHARTS))
def test_every_recorded_request_draws_with_fixed_traces_units_and_provenance(name):
    frames = recorded_figures(name)
    assert frames, f"the recording has no rows for {name}"
    rec = recording_of(name)
    meta = rec.metadata
    for req, df, fig in frames:
        assert len(fig.data) == experiments.TRACES[name], (name, req)
        titles = " | ".join(_titles(fig))
        for unit in UNITS[name]:
            assert unit in titles, (name, unit, titles)
        sub = fig.layout.title.text.split("<br>", 1)[1]  # the lines under the bold title
        for want in (
            env.gpu_label(meta["gpu"]),
            meta["cudnn_backend"],
            rec.provenance(name)["date"],
            "recorded",
        ):
            assert want in sub, (name, want, sub)


def test_provenance_subtitle_live_and_missing():
    import pandas as pd

    df = pd.DataFrame({"a": [1]})
    df.attrs.update(
        mode="live",
        gpu="NVIDIA H100 80GB HBM3",
        cudnn_backend="9.19.0",
        cudnn_frontend="1.28.0",
        date="2026-01-02",
    )
    assert plots.provenance_subtitle(df) == "live on H100 SXM · cuDNN 9.19.0 (frontend 1.28.0) · 2026-01-02"
    assert "unknown GPU" in plots.provenance_subtitle(pd.DataFrame())


def test_values_drawn_are_the_dataframes():
    prec = experiments.precision()
    ok = prec[prec.status == "ok"]
    fig = experiments.CHARTS["precision"](prec)
    assert list(fig.data[0].x) == list(ok.gpu_us) and list(fig.data[0].y) == list(ok.dtype)
    assert list(fig.data[1].x) == list(ok.rel_error)
    assert list(fig.data[2].x) == list(ok.rel_error_vs_fp64_inputs)

    pl = experiments.plans(experiments.BASE.replace(layout="NCHW"))
    fig = experiments.CHARTS["plans"](pl)
    assert list(fig.data[0].y) == sorted(pl[pl.status == "ok"].gpu_us)  # one point per plan, fastest first
    assert len(set(fig.data[0].x)) == len(fig.data[0].x) == len(pl[pl.status == "ok"])
    assert list(fig.data[1].customdata[0][:1]) == [int(pl[pl.heuristic_pick].plan_index.iloc[0])]
    assert fig.data[2].y == (pl[pl.best].gpu_us.iloc[0],)
    assert fig.data[3].y == (pl[pl.worst].gpu_us.iloc[0],)

    st = experiments.strategies()
    fig = experiments.CHARTS["strategies"](st)
    assert list(fig.data[0].x) == list(st.median_us)
    assert list(fig.data[1].x) == list(st.strategy_us_per_call)
    assert list(fig.data[2].x) == list(st.gpu_us)
    assert list(fig.data[3].x) == list(st.alloc_calls)
    assert list(fig.data[4].x) == list(st.warmup_alloc_calls)
    assert [v * plots.MIB for v in fig.data[5].x] == pytest.approx(list(st.peak_bytes))
    assert list(fig.data[7].x) == list(st.fallbacks)

    lay = experiments.layout()
    fig = experiments.CHARTS["layout"](lay)
    assert list(fig.data[0].y) == list(lay.conv_gpu_us) and list(fig.data[1].y) == list(lay.convert_gpu_us)
    assert fig.layout.barmode == "stack"


def test_algorithms_marks_unsupported():
    df = experiments.algorithms()
    fig = experiments.CHARTS["algorithms"](df)
    unsupported = df[df.find_status != "ok"].algorithm.tolist()
    assert unsupported, "the fp16 NCHW table has unsupported algorithms"
    assert list(fig.data[2].y) == unsupported
    assert all("not supported" in t for t in fig.data[2].text)
    times = dict(zip(fig.data[0].y, fig.data[0].x))
    assert all(times[a] is None for a in unsupported)


def test_roofline_draws_the_gpus_roof():
    df = experiments.roofline()
    fig = experiments.CHARTS["roofline"](df)
    peak, bw = float(df.peak_tflops.iloc[0]), float(df.bandwidth_gb_s.iloc[0])
    assert max(fig.data[1].y) == pytest.approx(peak)
    x0, y0 = fig.data[1].x[0], fig.data[1].y[0]
    assert y0 == pytest.approx(x0 * bw / 1e3)  # the bandwidth roof: TFLOP/s = FLOP/B * GB/s / 1000
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_roofline_unknown_gpu_draws_no_roof_and_says_so():
    df = experiments.roofline().copy()
    df.attrs = dict(experiments.roofline().attrs, gpu="Some Future GPU", mode="live")
    df = df.drop(columns=["peak_tflops", "bandwidth_gb_s", "ceiling_gpu"])
    fig = experiments.CHARTS["roofline"](df)
    assert len(fig.data) == experiments.TRACES["roofline"]
    assert len(fig.data[1].x or ()) == 0
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "No roof drawn" in notes and "Some Future GPU" in notes
    # the same with the columns present but empty (a live run on a GPU labkit.ceilings does not know)
    df2 = experiments.roofline().copy()
    df2["peak_tflops"], df2["bandwidth_gb_s"] = None, None
    fig2 = experiments.CHARTS["roofline"](df2)
    assert len(fig2.data[1].x or ()) == 0


def test_race_over_several_calls():
    frames = [
        experiments.race(launch=la, streams=st) for la, st in (("graph", 2), ("python", 2), ("graph", 4))
    ]
    df = plots.concat(frames)
    fig = experiments.CHARTS["race"](df)
    assert len(fig.data[0].x) == 3
    shared = df[df.scratchpad == "shared"].mismatches_bitwise.tolist()
    assert list(fig.data[0].y) == shared
    assert df.attrs["gpu"] == frames[0].attrs["gpu"]


@pytest.mark.parametrize(
    "name, request_, plots_",
    [
        ("strategies", dict(workload="one_conv"), 4),
        ("torch_knobs", {}, 3),
        ("torch_knobs", dict(net="resnet50"), 3),
    ],
)
def test_charts_of_rows_shade_every_other_row_in_each_plot(name, request_, plots_):
    """Charts that set several marks or bars side by side in a row (lesson 02's strategies, lesson
    11's settings) shade every other row in each plot, so a row's marks are not read as the next
    row's."""
    df = lessons.data(name, **request_)
    fig = experiments.CHARTS[name](df)
    rows = len(set(fig.data[0].y))
    bands = [s for s in fig.layout.shapes if s.name == "row band"]
    assert len(bands) == plots_ * (rows // 2)
    for k in range(1, plots_ + 1):
        axis = "" if k == 1 else str(k)
        mine = sorted(b.y0 for b in bands if b.yref == f"y{axis}" and b.xref == f"x{axis} domain")
        assert mine == [i - 0.5 for i in range(1, rows, 2)], (name, k)


def test_not_ok_rows_are_left_out_and_named():
    df = experiments.precision().copy()
    df.loc[df.dtype == "fp8_e4m3", "status"] = "unsupported"
    fig = experiments.CHARTS["precision"](df)
    assert "fp8_e4m3" not in fig.data[0].y
    assert any("did not run" in a.text and "fp8_e4m3" in a.text for a in fig.layout.annotations)


def test_no_data_empties_every_trace_and_says_why():
    fig = experiments.CHARTS["fusion"](experiments.fusion())
    plots.no_data(fig, "RecordedDataError: not recorded")
    assert all(t.visible is False and t.x is None for t in fig.data)
    assert "not recorded" in fig.layout.annotations[0].text


def test_figure_dispatch_and_formatting():
    df = experiments.caps(experiments.BASE.replace(layout="NCHW"))
    assert len(experiments.chart(df).data) == experiments.TRACES["caps"]
    assert plots.fmt_bytes(131) == "131 B" and plots.fmt_bytes(25763987) == "24.6 MiB"
    assert plots.fmt_bytes(2**30) == "1.00 GiB" and plots.fmt_bytes(float("nan")) == "-"
    assert plots.fmt_us(24.6) == "24.6 us" and plots.fmt_us(1234) == "1.23 ms"
    assert plans_autotune.cap_label(-1) == "unlimited" and plans_autotune.cap_label(2**20) == "1.0 MiB"


@pytest.mark.parametrize(
    "value,unit,text",
    [
        (10160, "us", "10,160 us"),  # never "10.16 ms" on a microsecond axis
        (250.8, "us", "250.8 us"),
        (876646, "MiB", "0.84 MiB"),  # never "856.1 KiB" on a MiB axis
        (272, "MiB", "272 B"),  # too small to read off a MiB axis: never "0.00026 MiB"
        (4096, "MiB", "4.0 KiB"),
        (11_000, "MiB", "0.010 MiB"),
        (2**30, "MiB", "1,024 MiB"),
        (0, "MiB", "0 MiB"),
        (131, "B", "131 B"),
        (24_600, "ms", "24.6 ms"),
        (None, "us", "-"),
        (float("nan"), "MiB", "-"),
    ],
)
def test_a_value_is_written_in_its_axis_unit(value, unit, text):
    assert units.in_unit(value, unit) == text


def test_log_axes_have_one_tick_style_plain_decimals():
    """The strategies under pressure span 1 us to 100 ms: ticked 1, 100, 10,000, never 10<sup>2</sup>;
    errors under 0.001 are written as the error labels are (1e-6)."""
    for values in ([1, 90_000], [40, 150_000], [0.3, 20], [1e-7, 1e-2], [2e-5, 4e-3]):
        text = units.log_ticks(values)["ticktext"]
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*|0\.\d+|\de-?\d+", t) for t in text), (values, text)
    assert [units.tick_text(t) for t in (0.3, 0.05, 20, 10_000, 1e-6, 2e-7)] == [
        "0.3",
        "0.05",
        "20",
        "10,000",
        "1e-6",
        "2e-7",
    ]


def test_rows_of_plans_read_short_labels_at_11_px_the_full_name_on_hover():
    """Lesson 10's kernels chart and lesson 08's plans comparison label each row with
    `plan_labels` (at most PLAN_LABEL_CHARS characters) at 11 px or more; the hover names the plan
    in full."""
    from labkit.present import compare

    rec = recording_of("kernels")
    df = rec.lookup("kernels", rec.requests("kernels")[0])
    kernels = experiments.CHARTS["kernels"](df)
    both = compare.figure(compare.frames("plans"))
    for fig in (kernels, both):
        axis = fig.layout.yaxis
        labels = [re.split(r"<br>| \(", re.sub("</?b>", "", t))[0] for t in axis.ticktext]
        assert axis.tickfont.size >= 11
        assert labels and all(len(t) <= names.PLAN_LABEL_CHARS for t in labels), labels
    full = set(df["plan_name"])
    assert set(kernels.data[-1].y) <= full and "%{y}" in kernels.data[-1].hovertemplate  # the hover: %{y}
    assert all(row[0] in set(compare.frames("plans")["plan_name"]) for row in both.data[0].customdata)
    assert "%{customdata[0]}" in both.data[0].hovertemplate


def test_the_sweep_keeps_one_size_unit_whatever_the_field_and_ticks_it_as_its_labels():
    """Lesson 01's sweep: fp32 NCHW asks 0 B along N and up to 8.8 GiB along C=K; both read in MiB,
    ticked 10,000 (not 10k) beside the label 8,985 MiB."""
    fp32 = experiments.BASE.replace(dtype="fp32", layout="NCHW")
    units_seen = set()
    for field in ("N", "C=K"):
        df = lessons.data("sweep", field=field, values=workspace_basics.SWEEP_VALUES[field], base=fp32)
        fig = experiments.CHARTS["sweep"](df)
        axis = fig.layout.yaxis2
        units_seen.add(axis.title.text)
        assert axis.exponentformat == "none" and axis.separatethousands
        assert all(t.endswith(" MiB") for t in fig.data[1].text), fig.data[1].text
    assert units_seen == {"workspace (MiB)"}


def test_a_sweep_of_a_few_bytes_is_drawn_on_a_one_mib_axis():
    """fp16 NHWC along N asks 0 or 131 B: a 1 MiB axis (ticks 0, 0.5, 1), not ticks of 0.00005 MiB,
    with each size written at its point."""
    df = lessons.data("sweep", field="N", values=workspace_basics.SWEEP_VALUES["N"])
    sizes = [b / 2**20 for b in df["workspace_bytes"] if b == b]
    assert sizes and 0 < max(sizes) < workspace_basics.charts.TINY_MIB, sizes
    fig = experiments.CHARTS["sweep"](df)
    assert tuple(fig.layout.yaxis2.range) == pytest.approx((-0.08, 1.3))
    assert "131 B" in fig.data[1].text


def test_plan_labels_are_short_distinct_and_keep_the_engine():
    """Every set of plans a recording holds for one request: labels of at most PLAN_LABEL_CHARS
    characters, one per plan, each starting with the plan's engine."""
    seen = 0
    for rec in recordings.shipped():
        for name in ("plans", "kernels"):
            for req in rec.requests(name) if name in rec.experiments() else []:
                plans = list(dict.fromkeys(rec.lookup(name, req)["plan_name"]))
                labels = names.plan_labels(plans)
                assert len(set(labels)) == len(plans), (rec.name, name, req)
                assert max(map(len, labels)) <= names.PLAN_LABEL_CHARS
                assert all(lab.split(" ")[0] == p.split("_")[0] for p, lab in zip(plans, labels))
                seen += 1
    assert seen
    assert names.plan_labels(["eng62_k2=5_k27=8", "eng22_k2=1", "eng62_k2=5_k27=7", "eng62_k2=5_k27=8"]) == [
        "eng62 #1",
        "eng22",
        "eng62 #2",
        "eng62 #1",
    ]


def test_log_ticks_label_the_lowest_values_and_stay_few_when_asked():
    t = units.log_ticks([25, 14_000])  # the plans chart: best plans near 25 us, the slowest at 14 ms
    assert min(t["tickvals"]) <= 25 and t["ticktext"][0] == "20"
    close = units.log_ticks([0.55, 140], max_ticks=4)  # a tick at 1 is close enough: no 0.5 crowding it
    assert close["ticktext"][0] == "1"
    narrow = units.log_ticks([40, 90_000], max_ticks=4)  # a ~170 px subplot (strategies under pressure)
    tv = narrow["tickvals"]
    assert 2 <= len(tv) <= 4 and min(tv) <= 10 * 40
    assert len({round(b / a, 6) for a, b in zip(tv, tv[1:])}) == 1  # evenly spaced on the log axis
    wide = units.log_ticks([40, 90_000])
    assert len(wide["tickvals"]) <= 10


def test_wide_time_ranges_get_a_log_axis_and_round_ticks():
    """Fusion: GPU times are dots on a log axis whatever the dtype (fp32's 10 ms fused plan beside
    0.3 ms ones, fp16's 25-120 us), each labelled; the caps chart's right axis ticks at 1-2-5 steps
    (not 1.9x, 3.9x, 5.8x)."""
    for spec in (lessons.base(dtype="fp32"), lessons.base()):
        fus = experiments.CHARTS["fusion"](lessons.data("fusion", spec=spec))
        assert fus.layout.xaxis.type == "log"
        dots = [t for t in fus.data if t.xaxis in (None, "x")]
        assert dots and all(t.type == "scatter" and all(t.text) for t in dots)
    caps = experiments.CHARTS["caps"](lessons.data("caps", spec=lessons.base(layout="NCHW")))
    step = caps.layout.yaxis2.dtick
    assert step in (0.1, 0.2, 0.5, 1, 2, 5, 10) and caps.layout.yaxis2.tick0 == 0


@pytest.mark.parametrize("name", sorted(experiments.CHARTS))
def test_subtitle_lines_fit_the_chart(name):
    """No title line (detail or provenance) longer than a 900 px chart shows at 12 px: plotly
    does not wrap, it cuts ("GPU wall time = ... kerr")."""
    import re

    for req, df, fig in recorded_figures(name):
        text = fig.layout.title.text
        for line in re.sub(r"<b>.*?</b>", "", text).split("<br>"):
            plain = re.sub(r"<[^>]+>", "", line)
            assert len(plain) <= plots.DETAIL_CHARS + 4, (name, req, plain)
        for ann in fig.layout.annotations:
            if ann.name == "note":
                for line in ann.text.split("<br>"):
                    assert len(line) <= plots.NOTE_CHARS + 4, (name, req, line)


def _detail_lines(fig) -> list:
    """The lines of a chart's detail: its subtitle's lines but the last (the provenance)."""
    sub = re.search(r"<span[^>]*>(.*)</span>", fig.layout.title.text or "", re.S)
    return sub.group(1).split("<br>")[:-1] if sub else []


def _phrases_split(lines: list) -> list:
    """The phrases (`plots.PHRASE_END`) that a break between two of ``lines`` cuts, where the phrase
    would fit on one line."""
    detail, cut = "", []
    for line in lines[:-1]:
        detail += line + " "
        cut.append(len(detail) - 1)  # where this line's break falls in the joined detail
    detail += lines[-1] if lines else ""
    spans, start = [], 0
    for m in plots.PHRASE_END.finditer(detail):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(detail)))
    return [detail[a:b] for at in cut for a, b in spans if a < at < b and b - a <= plots.DETAIL_CHARS]


def test_a_detail_line_breaks_between_phrases():
    text = (
        "fp16 NCHW 1x64x28x28, 2 streams sharing one workspace, graph launch; overlap of stream 1 and 2: "
        "1,018 us"
    )
    lines = plots.wrap(text, 60, phrases=True).split("<br>")
    assert lines == [
        "fp16 NCHW 1x64x28x28, 2 streams sharing one workspace,",
        "graph launch; overlap of stream 1 and 2: 1,018 us",
    ]
    assert not _phrases_split(lines)
    assert _phrases_split(plots.wrap(text, 60).split("<br>")) == ["graph launch;"]
    # a phrase longer than a line is broken at spaces
    long = plots.wrap("a, " + " ".join(["word"] * 20), 30, phrases=True).split("<br>")
    assert long[:2] == ["a,", " ".join(["word"] * 6)]


@pytest.mark.parametrize("name", sorted(experiments.CHARTS))
def test_detail_lines_break_only_between_phrases(name):
    """A chart's detail line, wrapped to fit, breaks after a phrase's comma or semicolon, never inside
    a phrase that fits on a line ("overlap of stream 1 / and 2"), on every shipped recording."""
    for rec in recordings.shipped():
        if name not in rec.experiments():
            continue
        for req, _, fig in recorded_charts.every_request(rec, name):
            lines = _detail_lines(fig)
            assert not _phrases_split(lines), (rec.name, name, req, lines)
            if name == "race_timeline":
                assert any("overlap of stream 1 and 2: " in line for line in lines), (rec.name, req, lines)


@pytest.mark.parametrize("name, column", [("plans", "gpu_us"), ("roofline", "tflops")])
def test_log_axes_label_a_visible_tick_under_their_lowest_point(name, column):
    """07's plans chart once ticked from 100 us while the best plans sat near 25 us."""
    import math

    for req, df, fig in recorded_figures(name):
        ax = fig.layout.yaxis
        low = float(df[df.status == "ok"][column].min()) if "status" in df else float(df[column].min())
        shown = [t for t in ax.tickvals if 10 ** ax.range[0] <= t <= 10 ** ax.range[1]]
        assert shown and min(shown) <= 2.5 * low, (name, req, low, ax.tickvals, ax.range)
        assert math.log10(low) >= ax.range[0], (name, req)


def test_workspace_sizes_says_when_compiles_were_left_out():
    """A first visit's change waits for runtime compiles only so long
    (labkit.gpu.cudnn.builds.compile_budget_s); the chart says how many plans its whiskers leave out."""
    from labkit import experiments

    df = experiments.workspace_sizes().copy()

    def notes(fig):
        return " ".join((a.text or "").replace("<br>", " ") for a in fig.layout.annotations)

    assert "still compiling" not in notes(experiments.CHARTS["workspace_sizes"](df))
    df["plans_cut"] = 0
    df.loc[df.index[0], "plans_cut"] = 3
    assert "3 runtime-compiled plans still compiling" in notes(experiments.CHARTS["workspace_sizes"](df))


def test_new_figure_has_the_workbook_template_and_leaves_plotlys_default_alone():
    import plotly.io as pio

    before = pio.templates.default
    want = pio.templates[plots.TEMPLATE]
    for fig in (plots.new_figure(), plots.new_figure(rows=2, cols=2)):
        assert fig.layout.template == want
    assert pio.templates.default == before
    assert plots.new_figure(rows=1, cols=3).layout.xaxis3 is not None


@pytest.mark.parametrize(
    "subplots",
    [
        dict(
            rows=3,
            cols=1,
            vertical_spacing=0.11,
            row_heights=[0.34, 0.38, 0.28],
            subplot_titles=("a", "b", "c"),
        ),
        dict(rows=1, cols=4, shared_yaxes=True, horizontal_spacing=0.025),
        dict(specs=[[{"secondary_y": True}]]),
    ],
)
def test_a_kept_subplot_grid_gives_the_figure_make_subplots_gives(subplots):
    """new_figure lays a grid out once and copies it after: the same layout and template, traces
    placed in the same subplots, and one figure's changes never reach the next."""
    import json

    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots

    def made(fig):
        if "specs" in subplots:
            fig.add_trace(go.Scatter(x=[1], y=[2]), secondary_y=True)
        else:
            fig.add_trace(go.Bar(x=[1], y=[2]), row=1, col=1)
            fig.add_trace(go.Scatter(x=[1], y=[2]), row=subplots["rows"], col=subplots["cols"])
        return json.dumps(fig.to_plotly_json(), sort_keys=True, default=str)

    old, pio.templates._default = pio.templates._default, plots.TEMPLATE
    try:
        want = made(make_subplots(**subplots))
    finally:
        pio.templates._default = old
    first = plots.new_figure(**subplots)
    first.update_layout(title_text="only this one")
    first.layout.annotations = ()
    for fig in (plots.new_figure(**subplots), plots.new_figure(**subplots)):
        assert made(fig) == want


def test_every_declared_grid_laid_out_ahead_gives_the_figure_make_subplots_gives():
    """The warm-up lays out each chart's grid (`plots.grid`) without touching plotly's default
    template; a chart's figure of a grid laid out that way is make_subplots' under labkit's template."""
    import json

    import plotly.io as pio
    from plotly.subplots import make_subplots

    from labkit import experiments  # noqa: F401  (the charts' modules declare their grids)

    assert len(plots._DECLARED) >= 8
    kept = dict(plots._GRIDS)
    plots._GRIDS.clear()
    try:
        before = pio.templates.default
        assert plots.lay_out_grids() == len({plots._grid_key(g) for g in plots._DECLARED})
        assert pio.templates.default == before and plots.lay_out_grids() == 0
        for g in plots._DECLARED:
            old, pio.templates._default = pio.templates._default, plots.TEMPLATE
            try:
                want = make_subplots(**g)
            finally:
                pio.templates._default = old
            assert json.dumps(
                plots.new_figure(**g).to_plotly_json(), sort_keys=True, default=str
            ) == json.dumps(want.to_plotly_json(), sort_keys=True, default=str)
    finally:
        plots._GRIDS.update(kept)


def test_a_ratio_amount_is_a_percentage_under_1_2x_else_a_ratio():
    """`prose.ratio_amount`, which lessons 01 and 04 say a slower or faster time with."""
    shown = [prose.ratio_amount(r) for r in (1.0, 1.08, 1.19, 1.2, 9.14)]
    assert shown == ["0%", "8%", "19%", "1.2x", "9.1x"]


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_strategies_chart_writes_each_host_p95_its_summaries_quote(recording):
    """Lesson 02's summaries and exercises quote host times at the p95 (the noise bullet, the arena's
    spread): each host mark is labelled with its median and the p95 its whisker reaches, as the
    summaries write them, not only on hover."""
    from labkit.experiments.workspace_strategies.summaries import noise_sentence

    rec = recordings.named(recording)
    for req in rec.requests("strategies"):
        df = rec.lookup("strategies", req)
        fig = experiments.CHARTS["strategies"](df)
        host = list(fig.data[0].text)
        for row, label in zip(df.itertuples(), host):
            if row.status == "ok":
                assert f"{units.us_text(row.median_us)} (p95 {units.us_text(row.p95_us)})" in label, (
                    recording,
                    req,
                    label,
                )
        p95 = re.search(r"has its p95 at ([\d,.]+ us)", noise_sentence(df)).group(1)
        assert any(f"p95 {p95}" in label for label in host), (recording, req, p95, host)
