"""labkit.present.compare on CPU with the shipped recordings: frames from both GPUs, ratios equal to the
raw CSV values divided, one legend group per GPU in every figure, clear errors for bad names."""

import json
import re

import chart_grammar
import pandas as pd
import pytest
import recording_copies

from labkit import InvalidSpec, RecordedDataError, experiments
from labkit.experiments import workspace_basics
from labkit.present import compare, compare_check
from labkit.spec import ConvSpec
from labkit.store import recordings

pytestmark = pytest.mark.usefixtures("recorded_mode")
BOTH = ["h100-sxm", "h200"]


def recorded_on(recording: str, name: str) -> str:
    """The date the recording's metadata gives for one experiment (read from the file itself)."""
    meta = json.loads((recordings.data_dir() / recording / "metadata.json").read_text())
    return meta["experiments"][name]["date"]


def raw(recording: str, name: str, request: dict):
    """Rows of the CSV itself for one request (no labkit lookup in between)."""
    df = pd.read_csv(recordings.data_dir() / recording / f"{name}.csv")
    return df[df["request"] == json.dumps(request, sort_keys=True, separators=(",", ":"))]


@pytest.mark.parametrize("name", sorted(compare.COMPARABLE))
def test_frames_hold_both_gpus_with_provenance(name):
    kwargs = {"caps": dict(spec=experiments.BASE.replace(layout="NCHW"))}.get(name, {})
    df = compare.frames(name, **kwargs)
    assert list(df.columns[:2]) == ["recording", "gpu"]
    assert list(dict.fromkeys(df["recording"])) == BOTH and df.attrs["recordings"] == BOTH
    assert set(df["gpu"]) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert df.attrs["skipped"] == {}
    prov = df.attrs["provenance"]
    assert [prov[rec]["date"] for rec in BOTH] == [recorded_on(rec, name) for rec in BOTH]
    assert prov["h200"]["complete"] is True and prov["h100-sxm"]["complete"] is True
    assert prov["h200"]["cudnn_backend"] == "9.19.0"
    request = experiments.request_of(name, **kwargs)
    for rec in BOTH:
        assert (df["recording"] == rec).sum() == len(raw(rec, name, request))


@pytest.mark.parametrize(
    "name,label,value",
    [
        ("precision", "dtype", "gpu_us"),
        ("roofline", "shape", "gpu_us"),
        ("layout", "layout", "conv_gpu_us"),
        ("strategies", "strategy", "gpu_us"),
    ],
)
def test_ratios_are_the_csv_values_divided(name, label, value):
    table = compare.ratios(compare.frames(name))
    request = experiments.request_of(name)
    a = raw("h100-sxm", name, request).set_index(label)[value]
    b = raw("h200", name, request).set_index(label)[value]
    assert list(table[label]) == list(a.index)
    for _, r in table.iterrows():
        assert r[f"{value} h100-sxm"] == a[r[label]] and r[f"{value} h200"] == b[r[label]]
        assert r["ratio h200/h100-sxm"] == pytest.approx(b[r[label]] / a[r[label]], rel=1e-12)
    assert table.attrs["baseline"] == "h100-sxm" and table.attrs["others"] == ["h200"]


def test_ratios_with_the_other_baseline_and_column():
    table = compare.ratios(compare.frames("layout"), value="end_to_end_us", baseline="h200")
    assert list(table.columns) == [
        "layout",
        "label",
        "end_to_end_us h200",
        "end_to_end_us h100-sxm",
        "ratio h100-sxm/h200",
    ]
    r = table.set_index("layout").loc["NHWC"]
    assert r["ratio h100-sxm/h200"] == pytest.approx(r["end_to_end_us h100-sxm"] / r["end_to_end_us h200"])


def test_rows_that_did_not_run_have_no_ratio():
    table = compare.ratios(compare.frames("algorithms")).set_index("algorithm")
    assert table.loc["WINOGRAD", "ratio h200/h100-sxm"] != table.loc["WINOGRAD", "ratio h200/h100-sxm"]  # NaN
    assert table.loc["FFT", "ratio h200/h100-sxm"] > 0


def test_a_recording_without_the_call_is_skipped_and_named(tmp_path, monkeypatch):
    n8 = experiments.BASE.replace(N=8)
    recording_copies.without(
        tmp_path, monkeypatch, "h200", "precision", experiments.request_of("precision", spec=n8)
    )
    df = compare.frames("precision", spec=n8)
    assert set(df["recording"]) == {"h100-sxm"}
    assert "h200" in df.attrs["skipped"] and "nearest recorded: spec.N=" in df.attrs["skipped"]["h200"]
    assert "nothing to compare" in compare.summary(compare.ratios(df))
    fig = compare.figure(df)
    assert {t.legendgroup for t in fig.data} == {"h100-sxm"}
    assert any("h200: not in this comparison" in a.text for a in fig.layout.annotations)
    with pytest.raises(RecordedDataError, match="no recording has this call"):
        compare.frames("precision", spec=experiments.BASE.replace(N=3))


@pytest.mark.parametrize(
    "name", ["precision", "layout", "strategies", "plans", "fusion", "sweep", "algorithms"]
)
def test_figure_has_one_trace_group_per_gpu_and_both_provenances(name):
    df = compare.frames(name)
    fig = compare.figure(df)
    gpus = [t for t in fig.data if t.showlegend is not False]
    assert [t.legendgroup for t in gpus] == BOTH
    assert {t.legendgroup for t in fig.data} == set(BOTH)
    dates = [recorded_on(rec, name) for rec in BOTH]
    assert [t.name for t in gpus] == [f"H100 SXM ({dates[0]})", f"H200 SXM ({dates[1]})"]
    title = fig.layout.title.text
    assert (
        "H100 SXM vs H200 SXM" in title
        and "cuDNN 9.19.0" in title
        and " / ".join(dict.fromkeys(dates)) in title
    )


def test_roofline_figure_draws_both_roofs_from_ceilings():
    fig = compare.figure(compare.frames("roofline"))
    assert [t.legendgroup for t in fig.data] == ["h100-sxm", "h100-sxm", "h200", "h200"]
    roofs = [t for t in fig.data if t.mode == "lines"]
    assert [t.name.split(":")[0] for t in roofs] == ["roof H100 SXM", "roof H200 SXM"]
    assert "3350 GB/s" in roofs[0].name and "4800 GB/s" in roofs[1].name
    assert max(roofs[0].y) == max(roofs[1].y) == 989  # the same compute roof


def test_summary_quotes_the_table():
    table = compare.ratios(compare.frames("roofline"))
    text = compare.summary(table)
    r = table.set_index("shape").loc["1x1 @56"]
    assert "Largest gain: 1x1 @56" in text and f"({r['ratio h200/h100-sxm']:.2f}x)" in text


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: compare.frames("race"), "not compared across GPUs"),
        (lambda: compare.frames("build_cost"), "host wall time"),
        (lambda: compare.frames("workspace_sizes"), "workspace sizes only"),
        (lambda: compare.frames("nonsense"), "must be one of precision"),
        (
            lambda: compare.frames("precision", recordings=["h100-sxm", "a100-nowhere"]),
            r"'a100-nowhere'.*available: h100-sxm",
        ),
        (lambda: compare.frames("precision", recordings="h200"), "non-empty list"),
        (lambda: compare.frames("precision", recordings=["h200", "h200"]), "named once"),
        (lambda: compare.frames("precision", bogus=1), "bogus"),
        (lambda: compare.ratios(compare.frames("precision"), value="dtype"), "must be a numeric column"),
        (lambda: compare.ratios(compare.frames("precision"), baseline="a100"), "baseline='a100'"),
    ],
)
def test_bad_names_are_clear_labkit_errors(call, match):
    with pytest.raises(InvalidSpec, match=match):
        call()


def test_lesson_08_exercises_answer_from_the_recordings(capsys):
    from labkit.present import check

    assert [e.name for e in check.exercise_list("08")] == [e.name for e in compare_check.EXERCISES]
    assert {e.kind for e in compare_check.EXERCISES} >= {"predict", "explore", "explain"}
    assert compare_check.biggest_gain.truth() == "1x1 @56"
    assert check.biggest_gain("1x1 @56") and not check.biggest_gain("3x3 @14")
    assert "a shape of the roofline" in check.biggest_gain("3x3 @99").message  # one line, no raise
    plans = compare.frames("plans")
    truth = {r: plans[(plans.recording == r) & plans.best].plan_name.iloc[0] for r in BOTH}
    changed = truth["h100-sxm"] != truth["h200"]
    assert check.best_plan_changes(changed) and not check.best_plan_changes(not changed)
    assert "is not an answer here" in check.best_plan_changes("yes").message
    tf32 = compare.ratios(compare.frames("roofline", dtype="tf32")).set_index("shape")["ratio h200/h100-sxm"]
    fp16 = compare.ratios(compare.frames("roofline")).set_index("shape")["ratio h200/h100-sxm"]
    only = [s for s in tf32.index if tf32[s] < 0.95 and not fp16[s] < 0.95]
    assert compare_check.tf32_gaining_shapes.truth() in only and only
    assert check.tf32_gaining_shapes(only[0]) and not check.tf32_gaining_shapes("1x1 @56")  # fp16 gains too
    assert compare_check.wide_dtypes_gain.truth() == "memory"
    capsys.readouterr()


def test_the_bandwidth_split_adds_up_as_written():
    """Lesson 08, Exercise 2: the answer's arithmetic closes on the numbers it prints (a difference
    of rounded times divided by the bracket gives the part it states, to its last digit)."""
    text = compare_check._split_why(compare_check.bandwidth_part.truth())
    a, b, d = (float(v) for v in re.search(r"([\d.]+) - ([\d.]+) = ([\d.]+) us", text).groups())
    assert a - b == pytest.approx(d, abs=0.006), text
    d2, bracket, part = (float(v) for v in re.search(r"= ([\d.]+) / ([\d.]+) = ([\d.]+) us", text).groups())
    assert d2 == d and d / bracket == pytest.approx(part, abs=0.051), text
    whole, fixed = (float(v) for v in re.search(r"'s ([\d.]+) us, and F = ([\d.]+) us", text).groups())
    assert whole == a and whole - part == pytest.approx(fixed, abs=0.051), text


def test_lesson_08_hints_name_only_what_it_shows():
    """Every snake_case name in a lesson 08 exercise's question or hints appears in the lesson's
    cells (a hint that sends the learner to a column must point at one the lesson shows)."""
    import re
    from pathlib import Path

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "08_same_conv_other_gpu.ipynb", 4)
    text = "\n".join(c.source for c in nb.cells)
    exercises = "\n".join(c.source for c in nb.cells if not c.source.startswith("%%handson"))
    calls = re.findall(r"check\.(\w+)\(\w+\)", exercises)  # a hands-on cell's check is no exercise
    assert calls == [e.name for e in compare_check.EXERCISES]
    for ex in compare_check.EXERCISES:
        for words in (ex.question, *ex.hints):
            for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", words):
                assert name in text, f"check.{ex.name} names {name!r}, which lesson 08 never shows"


@pytest.mark.usefixtures("fresh_progress")
def test_a_wrong_plan_prediction_says_what_the_plans_show_without_the_answer(capsys):
    from labkit.present import check

    plans = compare.frames("plans")
    best = {r: plans[(plans.recording == r) & plans.best].iloc[0] for r in BOTH}
    changed = best["h100-sxm"].plan_name != best["h200"].plan_name
    mine = plans[(plans.recording == "h200") & (plans.plan_name == best["h100-sxm"].plan_name)].iloc[0]
    faster = int((plans[plans.recording == "h200"].gpu_us < mine.gpu_us).sum())
    said = " ".join(check.best_plan_changes(not changed).message.split())
    assert said.startswith("not yet: On the H200 SXM, the H100 SXM's fastest plan"), said
    assert best["h100-sxm"].plan_name in said and f"{mine.gpu_us:.1f} us" in said, said
    assert (f"{faster} of the H200 SXM's plans ran faster" if faster else "none of") in said, said
    if changed:
        assert best["h200"].plan_name not in said, said  # the other GPU's winner is the answer's why


def test_plans_figure_shows_the_fastest_plans_with_their_spread():
    fig = compare.figure(compare.frames("plans"))
    gpus = [t for t in fig.data if t.showlegend is not False]
    assert [t.legendgroup for t in gpus] == BOTH
    assert all(t.error_x.array is not None for t in gpus)
    assert len(gpus[0].x) == compare.PLANS_SHOWN
    ratio = [t for t in fig.data if t.showlegend is False][0]
    assert ratio.error_x.array is not None and all(0.5 < r < 1.5 for r in ratio.x)


def test_roofline_labels_every_shape_once_and_coinciding_ones_together():
    df = compare.frames("roofline")
    fig = compare.figure(df)
    labels = [a.text.split("<br>")[0] for a in fig.layout.annotations if a.name != "note"]  # names first
    named = [s for text in labels for s in text.split(" · ")]
    assert sorted(named) == sorted(set(df["shape"]))
    assert any(" · " in text for text in labels)  # 3x3 @14 and 3x3 @7 coincide
    h100, h200 = (t for t in fig.data if t.mode == "markers")
    assert list(h100.x) == list(h200.x) == list(df[df.recording == "h100-sxm"]["intensity_flops_per_byte"])
    assert h200.marker.size < h100.marker.size - 2 * h100.marker.line.width  # inside the ring, seen


@pytest.mark.parametrize("name", ["fusion", "roofline", "precision", "layout", "plans", "sweep"])
def test_summary_calls_a_row_a_loss_only_when_it_got_slower(name):
    """A gain or a loss is a ratio past 1, and, where the table holds the timing spread, its whole range
    past 1 too: a row whose range holds 1 is said to be no measured change."""
    table = compare.ratios(compare.frames(name))
    text = str(compare.summary(table))
    col = compare.ratio_column(table, None)
    ok = table[table[col].notna()]
    rng = compare.ratio_range(ok, col)
    low, high = rng if rng else (ok[col], ok[col])
    assert ("largest loss" in text) == bool(((ok[col] > 1) & (low > 1)).any()), text
    assert ("argest gain" in text) == bool(((ok[col] < 1) & (high < 1)).any()), text


def test_summary_names_no_loss_inside_the_spread():
    """fp16 on the H200 reads 1.007x, its range under both spreads holding 1: no loss, said so."""
    table = compare.ratios(compare.frames("precision"))
    text = str(compare.summary(table))
    row = table.set_index("dtype").loc["fp16"]
    assert row["ratio low h200/h100-sxm"] <= 1 <= row["ratio high h200/h100-sxm"]
    assert "largest loss" not in text
    assert "no row is slower on H200 SXM beyond its spread: the highest ratio, fp16," in text


def test_summary_names_the_largest_gain_beyond_the_spread_when_the_lowest_ratio_holds_1():
    """The lowest ratio's range holding 1 does not make every row no faster: the lowest ratio among
    the rows whose whole range lies below 1 is named the largest gain beyond its spread."""
    table = compare.ratios(compare.frames("precision"))
    col = compare.ratio_column(table, None)
    best = table[col].idxmin()
    table.loc[best, col.replace("ratio ", "ratio high ", 1)] = 1.01  # its range now holds 1
    low, high = compare.ratio_range(table, col)
    beyond = table[(high < 1) & table[col].notna()]
    assert len(beyond), "the precision table has other rows faster beyond their spread"
    past = beyond.loc[beyond[col].idxmin(), "label"]
    text = " ".join(str(compare.summary(table)).split())
    assert f"Largest gain beyond its spread: {past}, " in text, text
    assert f", while the lowest ratio, {table.loc[best, 'label']}, " in text, text
    assert "no row is faster" not in text, text


def test_sweep_rows_are_named_with_their_dimension():
    table = compare.ratios(compare.frames("sweep"))
    assert list(table["label"]) == [f"N={int(v)}" for v in table["value"]]
    assert "Largest gain: N=" in str(compare.summary(table))


@pytest.mark.parametrize("name,field", [("precision", "dtype"), ("layout", "layout")])
def test_a_field_the_rows_vary_is_not_named_at_its_base_value(name, field):
    """The precision chart draws every dtype: its detail line says so instead of naming fp16."""
    df = compare.frames(name)
    title = re.sub(r"<[^>]+>", "\n", compare.figure(df).layout.title.text)
    detail = next(line for line in title.split("\n") if f"in each {field};" in line)
    assert f"{getattr(experiments.BASE, field)} " not in detail.split(";")[0], detail


@pytest.mark.parametrize("field", workspace_basics.SWEEP_FIELDS)
def test_a_sweep_names_the_dimension_it_moves_not_its_base_value(field):
    """A sweep of N draws N=1..64: its detail line writes N as a letter and says it varies, never N=32."""
    df = compare.frames("sweep", field=field, values=workspace_basics.SWEEP_VALUES[field])
    title = re.sub(r"<[^>]+>", "\n", compare.figure(df).layout.title.text)
    detail = next(line for line in title.split("\n") if "heuristic plan" in line).split(";")[0]
    assert f"({field.replace('=', ' = ')} varies)" in detail, detail
    dims = re.search(r"(\w+)x(\w+)x(\w+)x(\w+) → (\w+) (\w+)x(\w+) ", detail)
    shown = dict(zip("NCHWKRS", dims.groups()))
    for letter, text in shown.items():
        moved = letter in field.split("=")
        assert text == (letter if moved else str(getattr(experiments.BASE, letter))), (letter, detail)


#: a row as a comparison's summary quotes it: the first GPU's time, the other's, and their ratio
QUOTED_ROW = re.compile(r"(\d[\d,]*(?:\.\d+)? us) -> (\d[\d,]*(?:\.\d+)? us) \((\d+\.\d+x)")


def _sweep_calls() -> list:
    """compare.frames' arguments for every sweep both recordings hold (lesson 08's is the first)."""
    calls = []
    for req in recordings.named(BOTH[0]).requests("sweep"):
        base = {k: tuple(v) if isinstance(v, list) else v for k, v in req["base"].items()}
        calls.append(dict(field=req["field"], values=tuple(req["values"]), base=ConvSpec(**base)))
    return calls


def _visible_texts(fig) -> list:
    """What a figure writes on itself, not in its hover: tick labels, the labels of bars and points
    (`chart_grammar.shown_texts`), and its annotations."""
    return chart_grammar.shown_texts(fig) + [str(a.text) for a in fig.layout.annotations]


@pytest.mark.parametrize("order", [BOTH, BOTH[::-1]], ids=["h100-first", "h200-first"])
@pytest.mark.parametrize("picked", [None, "h200"], ids=["default", "LABKIT_RECORDING=h200"])
@pytest.mark.parametrize(
    "name, kwargs",
    [("fusion", {}), ("precision", {}), ("roofline", {})] + [("sweep", kw) for kw in _sweep_calls()],
)
def test_every_number_a_summary_quotes_of_a_row_is_written_on_its_chart(
    name, kwargs, picked, order, monkeypatch
):
    """STYLE.md: every number the text refers to can be read on the chart. The times and the ratio
    the summary quotes for its largest gain and loss are labels on the chart (the point's or the bar's
    text), not only in the hover, whichever recording is picked and whichever GPU comes first."""
    if picked:
        monkeypatch.setenv("LABKIT_RECORDING", picked)
    df = compare.frames(name, recordings=order, **kwargs)
    text = str(compare.summary(compare.ratios(df, baseline=order[0])))
    quoted = QUOTED_ROW.findall(text)
    assert quoted, text
    shown = _visible_texts(compare.figure(df))

    def written(*numbers) -> bool:  # all in one label, each whole ("4.5 us" is not in "24.5 us")
        return any(all(re.search(rf"(?<![\d.,]){re.escape(n)}", t) for n in numbers) for t in shown)

    for first, other, ratio in quoted:
        assert written(first), (first, text, shown)
        assert written(other, ratio), (other, ratio, text, shown)
