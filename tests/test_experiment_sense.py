"""What a GPU engineer would check in the numbers, on the recorded H100 data (and live on a GPU
in test_experiments_gpu.py): orderings and bounds, never hard-coded timings."""

import json
import re

import pytest
import sense

from labkit import experiments
from labkit.experiments import BASE
from labkit.store import recordings

pytestmark = pytest.mark.usefixtures("recorded_mode")


def test_precision_error_ordering():
    sense.precision(experiments.precision(BASE))


def test_fusion_saves_memory_and_traffic():
    sense.fusion(experiments.fusion(BASE))


def test_caps_are_respected():
    sense.caps(experiments.caps(BASE.replace(layout="NCHW")))


def test_plans_table():
    sense.plans(experiments.plans(BASE))


def test_race_counts():
    sense.race(experiments.race())


def test_strategies_books():
    sense.strategies(experiments.strategies())


def test_roofline_below_the_roof():
    sense.roofline(experiments.roofline())


@pytest.mark.parametrize("workload", ["one_conv", "pressure"])
def test_a_strategies_result_where_no_strategy_ran_gets_a_chart_and_a_sentence(workload):
    """A GPU too full for the workload (another notebook holding its memory): every row is an error
    row with no measurement column, and the chart and the summary say so instead of failing."""
    from labkit.experiments import workspace_strategies as ws

    df = experiments.strategies(workload=workload, repeats=ws.strategies_repeats(workload))
    failed = df[["workload", "strategy", "calls"]].assign(
        status="OutOfMemory", reason="out of GPU memory: 64.0 MiB for memory pressure", fallbacks=0
    )
    failed.attrs.update(df.attrs)
    summary = ws.pressure_summary if workload == "pressure" else ws.strategies_summary
    text = str(summary(failed))
    assert "no strategy ran" in text and "OutOfMemory" in text and "out of GPU memory" in text, text
    ws.strategies_chart(failed)


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_nchw_plans_conversions_count_every_launch_and_no_kernels(monkeypatch, recording):
    """A kernel launched twice a call counts twice; lesson 03's text lists no kernels, since lesson
    10 asks to predict how many the plan launches (check.nchw_kernels)."""
    from labkit.draw.plots import fmt_us, ok_rows
    from labkit.experiments import precision_layout
    from labkit.experiments.core import result
    from labkit.present import check

    monkeypatch.setenv("LABKIT_RECORDING", recording)

    nchw = BASE.replace(layout="NCHW")
    pick = ok_rows(result("layout", spec=BASE)).set_index("layout").loc["NCHW", "plan_name"]
    rows = ok_rows(result("kernels", spec=nchw))
    conv = rows[(rows.plan_name == pick) & (rows.role == "layout conversion")]
    total = float((conv.kernel_us * conv.launches_per_call).sum())
    text = str(precision_layout.summaries.nchw_kernels())
    assert f"take {fmt_us(total)} a call together" in text, text
    ex = check.nchw_kernels.exercise
    assert not any(re.search(p, text) for p in ex.leak_patterns(ex.truth())), text
    assert not re.search(r"memset|launches|Kernel\b|`sm\d+_", text), f"lesson 03 lists the kernels: {text}"


@pytest.mark.parametrize("launch", ["graph", "python"])
def test_the_traced_race_is_read_beside_lesson_06s_untraced_one(launch):
    from labkit.experiments.core import result
    from labkit.experiments.under_the_hood import summaries

    traced = experiments.race_timeline(launch=launch, streams=2)
    race = result("race", launch=launch, streams=2, min_runs=1024)
    shared = race[race["shared"].astype(bool)].iloc[0]
    text = str(summaries.race_timeline_summary(traced))
    bad, runs = int(shared.mismatches_bitwise), int(shared.runs)
    assert f"untraced {launch}-launched rounds: {bad} of {runs} corrupted" in text, text
    corrupted = int(traced["corrupted"].iloc[0])
    shares = (corrupted / int(traced["runs"].iloc[0]), bad / runs)
    disagree = (bad > 0) != (corrupted > 0) or max(shares) > 2 * min(shares)
    assert ("another timing" in text) == disagree, text


def test_the_build_logs_error_lines_are_explained_by_what_they_ask():
    from labkit.experiments.under_the_hood import summaries

    df = experiments.build_log()
    fe = df[df.source == "frontend"]
    asked = int((fe.text.str.contains("SHARED_MEMORY_USED") & fe.text.str.contains("NOT_SUPPORTED")).sum())
    text = str(summaries.build_log_summary(df))
    assert (f"{asked} of the frontend's ERROR lines" in text or f"All {asked} of" in text) == (asked > 0), (
        text
    )


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_build_log_summary_adds_up_the_heuristic_queries_to_the_configurations_it_names(recording):
    """The build-log table shows one heuristic query's count (its kind's first line); the summary says
    what each query proposed and that they add up to the engine configurations it names."""
    from labkit.experiments.under_the_hood import summaries

    rec = recordings.named(recording)
    df = experiments.core.from_recording("build_log", rec, spec=BASE, epilogue="none")
    text = " ".join(str(summaries.build_log_summary(df)).split())
    counts = [
        int(n)
        for n in re.findall(r"Heuristic query for mode \d+ has (\d+) configurations", "\n".join(df.text))
    ]
    named = int(re.search(r"the frontend log names (\d+) engine configurations", text)[1])
    assert len(counts) >= 2 and sum(counts) == named, (counts, named)
    assert (
        f"queries proposed {counts[0]} in mode 3 (heuristics A) and {counts[1]} in mode 2 (fallback)" in text
    )
    assert f": {named} configurations in all." in text, text


def test_the_fusion_summary_names_the_workspace_between_the_heuristics_fused_plan_and_the_fastest():
    """Both fused plans hold the same tensors, so what their allocations differ by is workspace: in
    fp32 the heuristic's bias_relu plan allocates about 198 MiB more than the fastest, and the
    summary says so with the table's numbers; where they allocate the same, it says nothing."""
    from labkit.draw.plots import fmt_bytes

    for dtype in ("fp32", "fp16"):
        df = experiments.fusion(spec=BASE.replace(dtype=dtype))
        text = str(experiments.summary(df))
        sub = df[df.epilogue == "bias_relu"].set_index("path")
        gap = sub.loc["fused", "allocated_bytes"] - sub.loc["fused, autotuned", "allocated_bytes"]
        names = sub.loc["fused", "plan_name"] != sub.loc["fused, autotuned", "plan_name"]
        if names and abs(gap) > (1 << 20):
            assert f"the {fmt_bytes(abs(gap))} between what they allocate" in text, text
            assert ("the faster plan needs less" if gap > 0 else "the faster plan needs more") in text
        else:
            assert "between what they allocate" not in text.split("**bias_relu_add**")[0], text
    fp32 = str(experiments.summary(experiments.fusion(spec=BASE.replace(dtype="fp32"))))
    assert "between what they allocate" in fp32  # both shipped recordings: the heuristic's plan asks for more


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_a_malloc_median_of_calls_that_allocate_nothing_is_said_so(monkeypatch, recording):
    """ResNet-50's pass: most calls need no workspace, so malloc_per_call's median host time can fall
    below fixed_arena's (on the H200 recording); the summary says why, from the counts and the 95th
    percentiles it quotes."""
    from labkit.draw.plots import fmt_us, ok_rows
    from labkit.experiments import workspace_strategies as ws

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    df = experiments.strategies(
        workload="resnet50_fp16_nhwc", repeats=ws.strategies_repeats("resnet50_fp16_nhwc")
    )
    rows = ok_rows(df).set_index("strategy")
    m = rows.loc["malloc_per_call"]
    a = rows[rows.index.str.startswith("fixed_arena")].iloc[0]
    free = int(m.calls) - int(m.alloc_calls)
    text = " ".join(str(ws.strategies_summary(df)).split())
    said = f"{free} of malloc_per_call's {int(m.calls)} calls need no workspace and allocate nothing"
    assert (said in text) == (2 * free > m.calls and m.p95_us > a.p95_us), text
    if said in text:
        assert f"its 95th percentile, {fmt_us(m.p95_us)} against {fmt_us(a.p95_us)}" in text, text


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_fusion_summary_counts_the_plans_it_timed_twice(monkeypatch, recording):
    """Where two epilogues each have one plan timed twice (the heuristic's and the fastest), the
    summary and the chart's note count them and give the larger difference, not "one plan"."""
    from labkit.experiments.epilogue_fusion.charts import _fusion_note, differs_text, repeat_gaps

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    seen = set()
    for request in (
        next(r for r in recordings.shipped() if r.name == recording).table("fusion")["request"].unique()
    ):
        df = experiments.fusion(**json.loads(request))
        gaps, text, note = repeat_gaps(df), " ".join(str(experiments.summary(df)).split()), _fusion_note(df)
        seen.add(len(gaps))
        if len(gaps) == 1:
            assert (
                "(One plan timed twice in this table, as the heuristic's and as the fastest, differs by "
                f"{differs_text(gaps[0])}" in text
            )
            assert "one plan timed twice here" in note
        elif gaps:
            assert f"({len(gaps)} plans timed twice in this table" in text and "One plan timed" not in text
            assert (
                f"differ by {differs_text(max(gaps))} at most" in text
                and f"{len(gaps)} plans timed twice" in note
            )
        else:
            assert "timed twice in this table" not in text and "no plan was timed twice" in note
    assert 2 in seen, seen  # every shipped recording has a table with two
