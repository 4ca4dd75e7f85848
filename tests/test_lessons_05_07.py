"""Lessons 05-07 beyond the shared tests, on every shipped recording: what their exercises' questions
take for granted holds; the hands-on cells' reference solutions are registered, parse and use only
the names the notebook gives them; the caps chart marks noise as noise; every plan is a point of
its own; the race panel offers only recorded pairs; the lab's ``chart`` control answers like any
other."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit import experiments
from labkit.draw.units import as_written, in_unit
from labkit.experiments import plans_autotune, streams
from labkit.experiments.plans_autotune.handson import _compare
from labkit.gpu.timing import stops
from labkit.present import check, widgets
from labkit.session import handson, lessons
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = [r.name for r in recordings.shipped()]


@pytest.fixture(autouse=True)
def recorded(recorded_mode):
    """Recorded mode from the default recording (a test that picks another puts it back)."""


def _use(monkeypatch, recording):
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    lessons.forget()


# ---- what the questions take for granted ------------------------------------------------------------
@pytest.mark.parametrize("recording", RECORDINGS)
def test_the_exercise_questions_premises_hold(monkeypatch, recording):
    _use(monkeypatch, recording)
    base = experiments.BASE
    # 05: "pays for itself in fp32 NCHW, but far later or never in fp16 NHWC"
    f32 = lessons.data("build_cost", spec=base.replace(dtype="fp32", layout="NCHW"))
    f16 = lessons.data("build_cost", spec=base)
    assert float(f16.calls_to_pay_off_autotune.iloc[0]) > 10 * float(f32.calls_to_pay_off_autotune.iloc[0])
    # 06: "many outputs under CUDA graphs, and few or none with Python launches"
    g = lessons.data("race", launch="graph", streams=2, min_runs=1024).set_index("scratchpad")
    p = lessons.data("race", launch="python", streams=2, min_runs=1024).set_index("scratchpad")
    assert g.loc["shared", "mismatches_bitwise"] > 0.25 * g.loc["shared", "runs"]
    assert p.loc["shared", "mismatches_bitwise"] <= 0.01 * p.loc["shared", "runs"]
    # 07: "even the 0 B cap costs nothing measurable" (fp32 NCHW)
    cp = lessons.data("caps", spec=base.replace(dtype="fp32", layout="NCHW"))
    noise = plans_autotune.caps_noise(cp)
    zero = cp[cp.cap_bytes == 0].iloc[0]
    assert noise is not None and noise.holds(float(zero.slowdown_vs_unlimited))


@pytest.mark.parametrize("recording", RECORDINGS)
def test_a_wrong_widest_spread_hears_its_own_spread(monkeypatch, recording, fresh_progress, capsys):
    """Lesson 07, Exercise 3: a wrong direction is told how far its own plans spread (slowest over
    fastest, from the plans it would chart), never the right direction."""
    from labkit.experiments import lab

    _use(monkeypatch, recording)
    truth = lab.lab_widest_spread.truth()
    for wrong in (d for d in lab.DIRECTIONS if d != truth):
        ok = lessons.data("plans", spec=experiments.BASE.replace(direction=wrong))
        ok = ok[ok.status == "ok"]
        spread = float(ok.gpu_us.max() / ok.gpu_us.min())
        result = check.lab_widest_spread(wrong)
        said = capsys.readouterr().out
        assert not result.correct
        assert f"in {wrong}, the slowest plan takes {spread:,.0f}x the fastest's time" in said, said
        assert truth not in said, said


@pytest.mark.parametrize("recording", RECORDINGS)
def test_a_wrong_python_race_prediction_hears_its_count_before_the_hint_and_not_why(
    monkeypatch, recording, fresh_progress
):
    """Lesson 06, Exercise 1: a wrong answer is told how many outputs the Python launches' shared
    scratchpad corrupted, then the hint; neither the reason (Exercise 2) nor the graphs' count."""
    _use(monkeypatch, recording)
    p = lessons.data("race", launch="python", streams=2, min_runs=1024).set_index("scratchpad")
    g = lessons.data("race", launch="graph", streams=2, min_runs=1024).set_index("scratchpad")
    bad, runs = int(p.loc["shared", "mismatches_bitwise"]), int(p.loc["shared", "runs"])
    said = " ".join(check.race_python_prediction(not bad).message.split())
    told, hint = said.split(" Hint: ")
    assert told.startswith("not yet: With Python launches on 2 streams sharing one scratchpad, "), said
    assert (f"{bad} of the {runs} outputs came out corrupted" if bad else f"none of the {runs}") in told, said
    assert str(int(g.loc["shared", "mismatches_bitwise"])) not in said, said
    assert not any(word in said for word in ("host", "rarely", "graph")), said


@pytest.mark.parametrize("recording", RECORDINGS)
def test_no_predict_or_explore_answer_is_printed_by_the_summaries_above_it(monkeypatch, recording):
    """The summaries these lessons print before their checks do not carry the answers."""
    import re

    _use(monkeypatch, recording)
    nchw = lessons.base(layout="NCHW")
    pl, cp = lessons.data("plans", spec=nchw), lessons.data("caps", spec=nchw)
    above = {
        "cap_1mib_prediction": [lessons.plans_summary(pl), lessons.timing_noise_summary(pl, cp)],
        "race_four_streams": [lessons.race_summary(lessons.race_all([("graph", 2), ("python", 2)]))],
    }
    for name, texts in above.items():
        ex = getattr(check, name).exercise
        for pattern in ex.leak_patterns(ex.truth()):
            for text in texts:
                assert not re.search(pattern, str(text)), (name, pattern, str(text)[:200])


# ---- charts --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("recording", RECORDINGS)
def test_every_plan_is_a_point_of_its_own_and_zero_workspace_is_labelled(recording):
    rec = recordings.named(recording)
    for req in rec.requests("plans"):
        df = experiments.with_model("plans", rec.lookup("plans", req))
        ok = df[df.status == "ok"]
        fig = experiments.CHARTS["plans"](df)
        xs = list(fig.data[0].x)
        assert sorted(xs) == list(range(1, len(ok) + 1)), req  # one position per plan timed
        bars = fig.data[4]
        zero = [t for y, t in zip(bars.y, bars.text) if y == 0]
        assert all(t == "0 MiB" for t in zero), (req, zero)
        assert f"{len(ok)} plans timed" in fig.layout.title.text


def test_a_plan_without_a_recorded_spread_gets_no_spread_in_its_hover():
    """A plan whose p10 or p90 is missing (NaN) is drawn with an empty spread in its hover; the others
    keep theirs, with their count of timed replays."""
    rec = recordings.named(RECORDINGS[0])
    df = experiments.with_model("plans", rec.lookup("plans", rec.requests("plans")[0])).copy()
    ok = df.index[df.status == "ok"]
    df.loc[ok[1], "gpu_us_p10"] = math.nan
    fig = experiments.CHARTS["plans"](df)
    hovers = {int(c[0]): c[2] for c in fig.data[0].customdata}
    plan = int(df.loc[ok[1], "plan_index"])
    assert hovers[plan] == "", hovers[plan]
    assert all(" timed replay" in h for p, h in hovers.items() if p != plan), hovers


@pytest.mark.parametrize("recording", RECORDINGS)
def test_the_caps_chart_marks_ratios_within_noise_and_none_below_one_as_a_gain(recording):
    rec = recordings.named(recording)
    for req in rec.requests("caps"):
        df = experiments.core.from_recording(
            "caps", rec, spec=experiments.core.ConvSpec.from_dict(req["spec"])
        )
        fig = experiments.CHARTS["caps"](df)
        noise = plans_autotune.caps_noise(df)
        assert noise is not None and noise.timings >= 2, req
        for ratio, text in zip(fig.data[1].y, fig.data[1].text):
            if ratio is not None and ratio < 1:  # a cap is never "faster": below 1 is within the noise
                assert "within noise" in text, (req, ratio, text)
        assert "overlaying" not in json.dumps(fig.layout.to_plotly_json())


def test_the_race_chart_draws_a_zero_where_nothing_was_corrupted():
    df = streams.race_all([("graph", 2), ("python", 2)])
    fig = experiments.CHARTS["race"](df)
    per_stream_zeros = fig.data[3]
    assert list(per_stream_zeros.y) == [0, 0]  # hovered; drawn as lines across the bars' slots:
    assert list(fig.data[2].x) == ["python launch, 2 streams"]  # the shared scratchpad's zero
    lines = sorted(
        (s.x0, s.x1, s.line.color) for s in fig.layout.shapes if s.type == "line" and s.y0 == 0 == s.y1
    )
    bad, good = fig.data[0].marker.color, fig.data[1].marker.color
    # category 0 (graph launch): the per-stream slot, right of centre; category 1 (python): both slots
    assert lines == [(0.0, 0.4, good), (0.6, 1.0, bad), (1.0, 1.4, good)]
    assert all(s.line.width >= 2 for s in fig.layout.shapes if s.type == "line")


# ---- panels --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("recording", RECORDINGS)
def test_the_race_panel_offers_only_recorded_pairs(recording):
    p = widgets.RacePanel(gpu=recording)
    rec = recordings.named(recording)
    recorded = {(r["launch"], r["streams"]) for r in rec.requests("race")}
    offered = {(v.split()[0], int(v.split()[1])) for v in p.options("launch_streams")}
    assert offered == recorded
    for v in p.options("launch_streams"):
        p.set(launch_streams=v)
        assert p.error is None and p.df is not None, (v, p.error)


def test_the_lab_chart_control_answers_like_any_other():
    lab = widgets.LabPanel()
    assert lab.options("chart") == list(widgets.SPEC_EXPERIMENTS) and lab.value("chart") == "plans"
    assert "chart" in lab.controls
    lab.set(chart="caps")
    assert lab.value("chart") == "caps" and lab.df.attrs["experiment"] == "caps"


# ---- hands-on ------------------------------------------------------------------------------------------
#: what the notebook cells before a hands-on cell give its reference solution
GIVEN = {"time_every_plan": {"my_times", "lessons"}, "scratchpad_race": {"my_race", "lessons"}}


def _free_names(source: str) -> set:
    """Names a module-level source reads without binding them anywhere (a small pyflakes)."""
    import builtins

    tree = ast.parse(source)
    bound, used = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return used - bound


def test_the_hands_on_references_are_registered_and_use_only_what_the_notebook_gives():
    handson.register_topics()
    for name, lesson in (("time_every_plan", "05"), ("scratchpad_race", "06")):
        h = handson.HANDS_ON[name]
        assert h.lesson == lesson and h.fresh
        assert _free_names(h.source) <= GIVEN[name], (name, _free_names(h.source))
        nb = next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb"))
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        assert f"%%handson {name}" in code
        for given in GIVEN[name] - {"lessons"}:
            assert f"{given} = {{}}" in code, (name, given)


def test_the_hands_on_checks_need_their_cell_to_have_run_first(capsys):
    """Recorded, the hands-on cells run on the simulated GPU: a check with nothing run on it (counts
    typed in by hand) says what to run, in lines that fit the page."""
    from labkit import practice

    practice.new()
    assert not check.plan_times({0: 1.0})
    assert not check.race_reproduced({"shared": (1, 2), "per_stream": (0, 2)})
    out = capsys.readouterr().out
    assert out.count("no answer yet:") == 2 and all(len(line) <= 100 for line in out.splitlines())


def test_the_heuristic_pick_is_called_within_noise_only_inside_the_noise():
    """Every recorded plans table: a pick that is not the fastest is called within noise of it exactly
    when its gap is no more than how far one plan moved between two autotunes (or its replays spread,
    whichever is larger); else it is called slower by the gap."""
    seen = set()
    for rec in recordings.shipped():
        for req in rec.requests("plans"):
            spec = experiments.core.ConvSpec.from_dict(req["spec"])
            df = experiments.core.from_recording("plans", rec, spec=spec)
            ok = df[df.status == "ok"]
            h, b = ok[ok.heuristic_pick].iloc[0], ok[ok.best].iloc[0]
            text = " ".join(str(lessons.plans_summary(df)).split())
            if h.plan_index == b.plan_index:
                assert "The heuristic got it right here" in text, text
                continue
            rows = ok[ok.plan_index.isin([h.plan_index, b.plan_index])]
            noise, _, _ = plans_autotune.noise.pick_noise(df, rows)
            gap = h.gpu_us / b.gpu_us - 1
            within = round(gap, 3) <= round(noise, 3)
            seen.add(within)
            assert ("are within noise of each other" in text) == within, text
            assert (f"{gap:.1%} slower than the fastest" in text) != within, text
    assert seen == {True, False}  # both sentences are read on the shipped recordings


def test_a_pick_read_without_a_second_autotune_says_none_is_at_hand(monkeypatch):
    """Live, lesson 05's plans summary comes before the caps experiment has run: the pick's gap is read
    against the two plans' replays alone, and the summary says no second autotune is at hand (not
    "recorded", a word for recorded mode)."""
    monkeypatch.setattr(plans_autotune.noise, "beside", lambda *a, **k: None)
    df = lessons.data("plans", spec=experiments.BASE.replace(dtype="fp32", layout="NCHW"))
    ok = df[df.status == "ok"]
    h, b = ok[ok.heuristic_pick].iloc[0], ok[ok.best].iloc[0]
    noise, said, again = plans_autotune.noise.pick_noise(
        df, ok[ok.plan_index.isin([h.plan_index, b.plan_index])]
    )
    assert said and not again and h.gpu_us / b.gpu_us - 1 > noise, (noise, said)
    text = " ".join(str(lessons.plans_summary(df)).split())
    assert f"more than {said}, though no second autotune of this convolution is at hand" in text, text


def test_the_build_cost_summary_explains_the_first_build_from_the_stages():
    for recording in RECORDINGS:
        df = lessons.data("build_cost", recording=recording)
        s = df.set_index("stage").seconds
        text = str(lessons.build_cost_summary(df))
        first, rebuild, every = s.iloc[0], s.iloc[1], s.iloc[3]
        setup = first >= plans_autotune.summaries.SETUP_MARGIN * rebuild
        assert ("pays a one-time set-up" in text) == setup, text
        assert ("no one-time set-up shows" in text) != setup, text
        if setup and rebuild * 1.05 < every < first < math.inf:
            assert "less than the first build" in text, text


def _recorded_build_costs():
    """Every shipped recording's build-cost tables, as lesson 05 and the lab read them."""
    for rec in recordings.shipped():
        for req in rec.requests("build_cost"):
            spec = experiments.core.ConvSpec.from_dict(req["spec"])
            yield experiments.core.from_recording("build_cost", rec, spec=spec)


def _note_text(fig) -> str:
    """A chart's notes as one line of words (its line breaks as spaces)."""
    return " ".join(" ".join(str(a.text).replace("<br>", " ") for a in fig.layout.annotations).split())


def test_a_first_build_about_as_long_as_the_rebuild_is_not_called_a_set_up():
    """Every recorded build-cost table: the first build is said to pay a set-up only at
    `SETUP_MARGIN` x the rebuild or more (one wall-clock timing each); both sentences are read."""
    said = set()
    for df in _recorded_build_costs():
        s = df.set_index("stage").seconds
        text = " ".join(str(lessons.build_cost_summary(df)).split())
        setup = s.iloc[0] >= plans_autotune.summaries.SETUP_MARGIN * s.iloc[1]
        assert ("pays a one-time set-up" in text) == setup, text
        said.add(setup)
    assert said == {True, False}


def test_the_build_cost_chart_writes_one_calls_gpu_time_as_exercise_3_needs():
    """Lesson 05's Exercise 3 divides the rebuild by one call's GPU time: every recorded build-cost
    chart writes the heuristic plan's time per call in its note, whether or not autotuning pays."""
    for df in _recorded_build_costs():
        fig = plans_autotune.build_cost_chart(df)
        notes = _note_text(fig)
        per_call = f"{float(df.heuristic_gpu_us.iloc[0]):.1f} us"
        assert f"heuristic pick ({per_call}" in notes or f"heuristic {per_call}" in notes, notes


def test_the_build_cost_chart_says_why_building_every_plan_took_less_than_the_first_build():
    """The lab shows the build-cost chart without lesson 05's summary: where building every plan took
    less than the first build of one, the chart's note says the first build paid a one-time set-up
    (how much: the first build less the identical rebuild), and says nothing of it elsewhere."""
    said = set()
    for df in _recorded_build_costs():
        s = df.set_index("stage").seconds
        fig = plans_autotune.build_cost_chart(df)
        notes = _note_text(fig)
        setup = s.iloc[0] >= plans_autotune.summaries.SETUP_MARGIN * s.iloc[1] and s.iloc[3] < s.iloc[0]
        written = [as_written(t * 1e6, lambda us: in_unit(us, "ms")) for t in s.iloc[:2]]  # as labelled
        pays = f"the first build pays {in_unit(written[0] - written[1], 'ms')} of one-time set-up"
        assert (pays in notes) == setup, notes
        assert ("one-time set-up" in notes) == setup, notes
        said.add(setup)
    assert said == {True, False}


def test_a_first_build_below_the_set_up_margin_is_given_as_its_ratio():
    """A first build short of `SETUP_MARGIN` x the rebuild, yet well past it (possible live), is given
    as its ratio to the rebuild, not called about as long."""
    first = plans_autotune.summaries.first_build_sentences(0.0118, 0.010, 0.0101)
    assert "The first build took 1.18x as long as the identical rebuild right after it: no one-time" in first
    assert "about as long as the identical rebuild" not in first


@pytest.mark.parametrize("margin, said", [(0.03, "3%"), (0.025, "2.5%"), (0.1, "10%")])
@pytest.mark.parametrize("behind", [0.9, 1.1])
def test_the_hands_on_check_judges_the_fastest_plan_by_autotunes_margin(monkeypatch, margin, said, behind):
    """Lesson 05's hands-on check accepts a learner's fastest plan within `stops.FINAL_MARGIN` of
    labkit's fastest (the plans autotune times again before it picks), and names that margin when it
    is not, whatever the margin is (the lesson's own sentence: the test above)."""
    monkeypatch.setattr(stops, "FINAL_MARGIN", margin)
    assert stops.final_margin_text() == said
    theirs = {0: 100.0, 1: 100.0 * (1 + behind * margin)}
    _, problems = _compare({0: 101.0, 1: 100.0}, theirs, SimpleNamespace(simulated=True))  # mine: plan 1
    if behind < 1:
        assert problems == [], problems
    else:
        assert [p.kind for p in problems] == ["not_fastest"], problems
        assert f"Your fastest is not theirs, nor within {said} of it." in problems[0].message


def _constants(path: Path, names) -> dict:
    """Module-level constants ``names`` of a labkit source file, read from its source (importing
    labkit.gpu.timing needs CuPy)."""
    tree = ast.parse(path.read_text())
    return {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id in names
    }


def _default(path: Path, function: str, argument: str):
    """The default value of ``function``'s keyword-only ``argument`` in a labkit source file."""
    fn = next(n for n in ast.walk(ast.parse(path.read_text())) if getattr(n, "name", None) == function)
    return ast.literal_eval(dict(zip([a.arg for a in fn.args.kwonlyargs], fn.args.kw_defaults))[argument])


def test_lesson_05_says_how_autotune_picks_as_the_code_does():
    """The lesson's account of a timing, the first pass and the final rounds names the graph's length,
    the timed replays, the margin and the rounds autotune uses (the margin from `stops`, which imports
    without CuPy; the rest read from labkit/gpu/timing's source). `measure.graph_replay` checks each
    median from its ``min_repeats``-th timed replay on against the one before, so a median that stops
    moving takes ``min_repeats`` + 1 timed replays."""
    timing = ROOT / "labkit" / "gpu" / "timing"
    const = _constants(
        timing / "autotune.py", ("FINAL_ROUNDS", "FIRST_PASS_REPLAY_TARGET_US", "FIRST_PASS_MIN_REPEATS")
    )
    least = _constants(timing / "measure.py", ("MIN_REPEATS",))["MIN_REPEATS"]
    most = _default(timing / "measure.py", "graph_replay", "repeats")
    calls = _default(timing / "autotune.py", "time_plan", "calls")
    source = (timing / "measure.py").read_text()
    assert "if len(samples) >= min_repeats:" in source and "last = med" in source
    nb = json.loads((ROOT / "notebooks" / "05_plans_autotune_and_caching.ipynb").read_text())
    text = " ".join(
        " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").split()
    )
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 10: "ten", 15: "fifteen"}
    nth = {3: "third", 4: "fourth", 5: "fifth", 6: "sixth"}
    said = (
        f"within {stops.final_margin_text()} of the fastest again, in full, in turns, "
        f"for {words[const['FINAL_ROUNDS']]} rounds"
    )
    assert said in text
    full = (
        f"of up to {words[calls]} back-to-back calls",
        f"from the {nth[least]} timed replay on",
        f"a plan gets {words[least + 1]} timed replays at least and {words[most]} at most",
    )
    assert all(f in text for f in full), [f for f in full if f not in text]
    first = (
        f"about {const['FIRST_PASS_REPLAY_TARGET_US']:.0f} microseconds of calls and its medians are checked "
        f"from the {nth[const['FIRST_PASS_MIN_REPEATS']]} timed replay on: "
        f"{words[const['FIRST_PASS_MIN_REPEATS'] + 1]} timed replays can be enough"
    )
    assert first in text
