"""A number the lessons write twice reads the same, or says why not, on every shipped recording.

A sum or a difference written beside its terms adds up as the terms are written
(`labkit.draw.units.as_written`): lesson 03's layers to break even, lesson 04's gap between the
paths and its elementwise kernels, lesson 05's one-time set-up and its cold start. Two measurements
of one quantity are each named: lesson 03's fp8 paragraph beside the precision chart, lesson 05's
simulated plan times beside the plans chart, and the caps summary's times beside the cap each was
timed under."""

from __future__ import annotations

import re

import pytest
from handson_helpers import flat

from labkit import experiments
from labkit.draw.plots import fmt_bytes, fmt_us
from labkit.draw.units import as_written, in_unit, size_text, us_text
from labkit.experiments import plans_autotune
from labkit.experiments.epilogue_fusion.exercises import (
    unfused_extra_time,
    unfused_tensors,
    unfused_traffic_time,
)
from labkit.experiments.plans_autotune.charts import cap_label
from labkit.experiments.precision_layout.exercises import nhwc_payoff_layers
from labkit.present import check
from labkit.session import handson, lessons
from labkit.store import recordings

SHIPPED = [r.name for r in recordings.shipped()]
#: a time as a sentence writes it, in us or ms, thousands separated
TIME = r"([\d,]+(?:\.\d+)?) (us|ms)"


@pytest.fixture(autouse=True)
def recorded(recorded_mode):
    """Recorded mode from the default recording (a test that picks another puts it back)."""


def _use(monkeypatch, recording):
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    recordings._current = recordings._picked = None
    lessons.forget()


def _us(number: str, unit: str = "us") -> float:
    """A written time read back in microseconds."""
    return float(number.replace(",", "")) * (1e3 if unit == "ms" else 1.0)


def test_as_written_reads_back_what_each_formatter_writes():
    assert as_written(64.98, fmt_us) == pytest.approx(65.0)
    assert as_written(90.2496, fmt_us) - as_written(25.2672, fmt_us) == pytest.approx(64.9)
    assert as_written(1234.5, fmt_us) == pytest.approx(1230.0)  # "1.23 ms"
    assert as_written(1234.5, us_text) == pytest.approx(1234.0)  # "1,234 us"
    assert as_written(12_845_056, fmt_bytes) == pytest.approx(12.2 * 2**20)
    assert as_written(131, size_text) == 131.0


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_nhwc_payoff_adds_up_as_written(monkeypatch, recording):
    """Lesson 03, Exercise 5: the saving per layer is the difference of the two times the answer
    writes, the layers their quotient, and the answer names the chart they come from."""
    _use(monkeypatch, recording)
    why = flat(nhwc_payoff_layers.why(nhwc_payoff_layers.truth()))
    found = re.search(
        rf"The layout chart at batch 32: {TIME} / \({TIME} - {TIME}\) = ([\d.]+) layers.*saves {TIME}\.", why
    )
    assert found, why
    g = found.groups()
    convert, nchw, nhwc, saved = _us(*g[0:2]), _us(*g[2:4]), _us(*g[4:6]), _us(*g[7:9])
    assert nchw - nhwc == pytest.approx(saved, abs=1e-6), why
    assert f"{convert / saved:.1f}" == g[6], why


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_unfused_gap_and_kernels_add_up_as_written(monkeypatch, recording):
    """Lesson 04, Exercises 3 and 4: the gap both answers state is the difference of the replay
    medians written beside it (and on the chart), and the elementwise kernels' total the sum of
    their written times."""
    _use(monkeypatch, recording)
    why = flat(unfused_extra_time.why(unfused_extra_time.truth()))
    found = re.search(rf"takes {TIME} more \(replay medians: {TIME} against {TIME}\)", why)
    assert found, why
    gap, unfused, fused = (_us(*found.groups()[i : i + 2]) for i in (0, 2, 4))
    assert unfused - fused == pytest.approx(gap, abs=1e-6), why
    adds = re.search(rf"the unfused path adds (.*?), {TIME} in all", why)
    assert adds, why
    kernels = [_us(n, u) for n, u in re.findall(rf"` {TIME}", adds.group(1))]
    assert len(kernels) >= 2 and sum(kernels) == pytest.approx(_us(*adds.groups()[1:]), abs=1e-6), why
    traffic = flat(unfused_traffic_time.why(unfused_traffic_time.truth()))
    assert f"The measured gap between the two paths is {fmt_us(gap)}," in traffic, traffic
    assert f"(the whole gap, {fmt_us(gap)}," in why, why


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_unfused_tensors_add_up_in_bytes(monkeypatch, recording):
    """Lesson 04, Exercise 2: the tensors' sizes multiply to their total as written, in bytes (in
    MiB, 3 x 12.25 MiB reads "3 x 12.2 MiB = 36.8 MiB"), the total the table below shows."""
    _use(monkeypatch, recording)
    why = flat(unfused_tensors.why(unfused_tensors.truth()))
    found = re.search(r"(\d+) tensors of ([\d,]+) B each = ([\d,]+) B \(", why)
    assert found, why
    count, each, total = (int(v.replace(",", "")) for v in found.groups())
    assert count * each == total, why
    fused = experiments.core.result("fusion", spec=lessons.base())
    row = fused[(fused.epilogue == "bias_relu_add") & (fused.path == "unfused")].iloc[0]
    assert total == int(row.intermediate_bytes), (total, row.intermediate_bytes)


def _build_costs():
    """Every shipped recording's build-cost tables."""
    for rec in recordings.shipped():
        for req in rec.requests("build_cost"):
            spec = experiments.core.ConvSpec.from_dict(req["spec"])
            yield experiments.core.from_recording("build_cost", rec, spec=spec)


def test_the_build_costs_sums_and_differences_add_up_as_written():
    """Lesson 05: the one-time set-up is the first build less the rebuild, and the cold start building
    every plan plus autotuning, each as the summary and the chart write those times."""
    said = 0
    for df in _build_costs():
        text = flat(str(plans_autotune.build_cost_summary(df)))
        times = re.search(
            rf"the first build took {TIME}, an identical rebuild {TIME}, a cache hit {TIME}; building every "
            rf"plan took {TIME} and autotuning them {TIME}\.",
            text,
        )
        assert times, text
        g = times.groups()
        first, rebuild, every, tune = (_us(*g[i : i + 2]) for i in (0, 2, 6, 8))
        setup = re.search(rf"does not: {TIME} of its", text)
        if setup:
            assert in_unit(first - rebuild, "ms") == " ".join(setup.groups()), text
            said += 1
        cold = re.search(rf"autotuning again \({TIME},", text)
        assert cold and in_unit(every + tune, "ms") == " ".join(cold.groups()), text
        fig = plans_autotune.build_cost_chart(df)
        labels = dict(zip(fig.data[0].y, fig.data[0].text))
        notes = flat(" ".join(str(a.text).replace("<br>", " ") for a in fig.layout.annotations))
        pays = re.search(rf"the first build pays {TIME} of one-time set-up", notes)
        if pays:
            first_l, rebuild_l = (_us(*labels[s].split()) for s in plans_autotune.runs.BUILD_STAGES[:2])
            assert in_unit(first_l - rebuild_l, "ms") == " ".join(pays.groups()), (labels, notes)
    assert said, "no recorded build cost states a one-time set-up"


@pytest.mark.parametrize("recording", SHIPPED)
def test_fp8_vs_fp16_gives_the_precision_charts_time_of_each_plan(monkeypatch, recording):
    """Lesson 03: the fp8 paragraph times the heuristic's plans in the plans experiment; where the
    precision chart above ran the same plan, the paragraph gives that chart's time too, fp16's as
    well as fp8's, so a time that reads differently in the two is said to be two measurements."""
    _use(monkeypatch, recording)
    text = flat(str(lessons.fp8_vs_fp16()))
    chart = experiments.core.result("precision", spec=lessons.base()).set_index("dtype")
    for dtype in ("fp16", "fp8_e4m3"):
        plans = experiments.core.result("plans", spec=lessons.base(dtype=dtype))
        pick = plans[plans.heuristic_pick].iloc[0]
        if chart.loc[dtype, "plan_name"] == pick.plan_name:
            assert f"{dtype} at {us_text(chart.loc[dtype, 'gpu_us'])}" in text, (dtype, text)
    assert "The precision chart timed the same plans in a run of its own" in text, text


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_simulated_plan_time_says_it_is_not_the_plans_chart(monkeypatch, recording, capsys):
    """Lesson 05's hands-on check: the simulated GPU's time of its fastest plan is its recorded kernels
    back to back, which the check says, with the plans chart's time of that plan beside it."""
    _use(monkeypatch, recording)
    handson.register_topics()
    ns = {"lessons": lessons, "check": check, "my_times": {}}
    handson.run("time_every_plan", plans_autotune.TIME_EVERY_PLAN, ns)
    said = flat(check.plan_times(ns["my_times"]).message)
    found = re.search(
        r"the simulated GPU's: plan (\d+) \([\d.]+ us, its recorded kernels back to back;", said
    )
    assert found, said
    plans = experiments.core.result("plans", spec=lessons.base(layout="NCHW")).set_index("plan_index")
    charted = fmt_us(plans.loc[int(found.group(1)), "gpu_us"])
    assert f"the plans chart's replays: {charted})" in said, said


@pytest.mark.parametrize("recording", SHIPPED)
def test_the_caps_summary_names_the_cap_of_each_time_it_sets_beside_the_plans_chart(monkeypatch, recording):
    """Lesson 05: the caps chart times its best plans once under each cap; a time the summary sets
    beside the plans chart's names the cap it was timed under, as the chart's hover does."""
    _use(monkeypatch, recording)
    df = lessons.data("caps", spec=lessons.base(layout="NCHW"))
    text = flat(str(lessons.caps_summary(df)))
    named = re.findall(r"`([^`]+)` [\d.,]+ us there, ([\d.,]+ us) here at cap ([\w. ]+?)[;)]", text)
    assert named, text
    ok = df[df.status == "ok"]
    for plan, here, cap in named:
        rows = ok[(ok.best_plan == plan) & (ok.gpu_us.map(us_text) == here)]
        assert cap in {cap_label(c) for c in rows.cap_bytes}, (plan, here, cap, text)
