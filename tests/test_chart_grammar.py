"""The chart grammar (STYLE.md) on every figure a lesson or a panel can draw, from both shipped
recordings: every recorded request of every experiment (what a panel's controls can reach in
recorded mode) through its chart builder, and lesson 08's two-GPU figures.

* no bar trace on a log axis, and bars from zero;
* no second y-axis overlaying another;
* a legend lists only traces that draw something (a zero bar is labelled);
* one scale per chart: every axis keeps its type (linear, log, category) and its unit across all
  the requests of an experiment, so no control move switches it;
* a label on a bar or a point is in its axis's unit; log axes ticked in plain decimals; no plan's
  full name drawn; no point's label drawn across its own whisker (`chart_grammar`).
"""

from __future__ import annotations

import re

import chart_grammar as grammar
import pytest
import recorded_charts

from labkit import experiments
from labkit.errors import LabkitError
from labkit.store import recordings


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


#: (experiment, violation's first words) known to break the grammar: each must still occur (a
#: fixed one leaves this set)
KNOWN: set = set()


def figures(recording, name):
    """(request, figure) for every request of ``name`` in ``recording`` that answers with rows."""
    return [(req, fig) for req, _, fig in tables_and_figures(recording, name)]


def tables_and_figures(recording, name):
    """(request, rows, figure) for every request of ``name`` in ``recording`` that answers with rows
    (`recorded_charts`: each drawn once for the tests of this file and the others that read it)."""
    return recorded_charts.every_request(recording, name)


CASES = [
    pytest.param(rec.name, name, id=f"{rec.name}-{name}")
    for rec in recordings.shipped()
    for name in sorted(experiments.CHARTS)
    if name in rec.experiments()
]


def _key(name: str, violation: str) -> tuple:
    return (name, violation.split(":")[0].split(" on ")[0])


@pytest.mark.parametrize("recording, name", CASES)
def test_every_recorded_figure_follows_the_grammar(recording, name):
    rec = recordings.named(recording)
    found, types, units = [], {}, {}
    for req, fig in figures(rec, name):
        found += [(v, req) for v in grammar.violations(fig)]
        for axis, kind in grammar.axis_types(fig).items():
            types.setdefault(axis, {}).setdefault(kind, req)
        for axis, unit in grammar.axis_units(fig).items():
            units.setdefault(axis, {}).setdefault(unit, req)
    new = [(v, req) for v, req in found if _key(name, v) not in KNOWN]
    assert not new, f"{recording} {name}: " + "\n".join(f"{v}  (request {req})" for v, req in new[:10])
    changing = {axis: sorted(kinds) for axis, kinds in types.items() if len(kinds) > 1}
    if (name, "axis type changes") not in KNOWN:
        assert not changing, f"{recording} {name}: a control move changes the axis type: {changing}"
    switching = {axis: sorted(u) for axis, u in units.items() if len(u) > 1}
    assert not switching, f"{recording} {name}: a control move changes the axis unit: {switching}"


def test_known_violations_still_occur():
    """The known list shrinks as charts are fixed: an entry that no longer occurs must go. The
    experiments it names are drawn again here; every figure is the parametrized test's."""
    named = {name for name, _ in KNOWN}
    seen = set()
    for rec in recordings.shipped():
        for name in experiments.CHARTS:
            if name not in rec.experiments() or name not in named:
                continue
            types = {}
            for _, fig in figures(rec, name):
                seen |= {_key(name, v) for v in grammar.violations(fig)}
                for axis, kind in grammar.axis_types(fig).items():
                    types.setdefault(axis, set()).add(kind)
            if any(len(k) > 1 for k in types.values()):
                seen.add((name, "axis type changes"))
    assert not KNOWN - seen, f"fixed, remove from KNOWN: {sorted(KNOWN - seen)}"


def test_lesson_08_figures_follow_the_grammar():
    from labkit.present import compare

    for name in ("roofline", "fusion", "sweep", "plans", "precision"):
        fig = compare.figure(compare.frames(name))
        found = [v for v in grammar.violations(fig) if _key(f"compare.{name}", v) not in KNOWN]
        assert not found, f"compare.figure({name!r}): {found}"


#: experiment -> units its summary may also write: quantities its chart does not draw
SUMMARY_ALSO = {"build_cost": {"us"}}  # what autotuning saves a call, as the plans chart draws it


@pytest.mark.parametrize("recording, name", [c for c in CASES if experiments.SUMMARIES.get(c.values[1])])
def test_a_summary_writes_a_quantity_in_its_charts_unit(recording, name):
    """The summary under a chart writes a time or a size in the unit the chart's axes use for it
    (2,378 MiB beside a MiB axis, never 2.32 GiB; 10,161 us beside a us axis, never 10.16 ms); a
    size too small to read in MiB in a smaller unit, as the chart's labels are."""
    rec = recordings.named(recording)
    found = []
    for req, df, fig in tables_and_figures(rec, name):
        units = {}
        for unit in grammar.axis_units(fig).values():
            units.setdefault(grammar.UNIT_KINDS[unit], set()).add(unit)
        text = str(experiments.SUMMARIES[name](df))
        for m in grammar.QUANTITY.finditer(text):
            unit = m.group(1)
            axes = units.get(grammar.UNIT_KINDS[unit], set())
            small = any(
                grammar.UNIT_SIZES[unit] < grammar.UNIT_SIZES[a] and grammar._too_small_for(m, a)
                for a in axes
            )
            exact = unit == "B"  # a count of bytes is exact, in any chart's unit
            if axes and unit not in axes | SUMMARY_ALSO.get(name, set()) and not small and not exact:
                at = text[max(0, m.start() - 60) : m.end()]
                found.append(f"{m.group(0)!r} beside axes in {sorted(axes)}: {at!r}")
    assert not found, f"{recording} {name}: " + "\n".join(sorted(set(found))[:8])


@pytest.mark.parametrize("recording, name", [c for c in CASES if experiments.SUMMARIES.get(c.values[1])])
def test_a_summary_never_names_a_lesson_it_is_read_in(recording, name):
    """A summary speaks about the project as it is: under a lesson's chart it says "here", never that
    lesson's number (lesson 10's timeline summary called itself lesson 10)."""
    from labkit.session.texts import DRAWS

    rec = recordings.named(recording)
    own = [lesson for lesson, names in DRAWS.items() if name in names]
    found = []
    for req in rec.requests(name):
        try:
            df = experiments.with_model(name, rec.lookup(name, req))
        except LabkitError:
            continue
        text = str(experiments.SUMMARIES[name](df))
        found += [m.group(0) for m in re.finditer(r"\blesson (\d\d)\b", text, re.I) if m.group(1) in own]
    assert not found, f"{recording} {name} (read in lessons {', '.join(own)}): names {sorted(set(found))}"


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_the_kernels_chart_writes_the_times_lesson_10s_exercise_works_from(monkeypatch, recording):
    """Every number the text refers to is readable on the chart: Exercise 1 (launch_headroom) works
    from the heuristic's plan's GPU time per call and its host time, both written on the bars."""
    from labkit.draw.units import us_text
    from labkit.experiments.under_the_hood import exercises

    monkeypatch.setenv("LABKIT_RECORDING", recording)
    monkeypatch.setattr(recordings, "_current", None)
    monkeypatch.setattr(recordings, "_picked", None)
    inputs = exercises._headroom_inputs()
    assert recordings.current().name == recording
    fig = experiments.CHARTS["kernels"](experiments.core.result("kernels", spec=experiments.BASE))
    written = [a.text for a in fig.layout.annotations] + [t for tr in fig.data for t in (tr.text or ())]
    for key in ("gpu_us", "host_us"):
        assert any(us_text(inputs[key]) in w for w in written), (key, inputs[key], written)


def test_a_label_across_its_own_whisker_is_a_violation():
    """The rule lesson 11's ResNet-50 chart broke: a time written beside its mark, right where its
    p90 whisker runs; above the mark, or on the side the whisker does not run, it reads."""
    import plotly.graph_objects as go

    def fig(position, plus, minus):
        whisker = dict(type="data", symmetric=False, array=[plus], arrayminus=[minus])
        return go.Figure(
            go.Scatter(
                x=[5999],
                y=["a"],
                mode="markers+text",
                text=["5,999 us"],
                textposition=position,
                error_x=whisker,
            )
        )

    assert grammar.labels_on_whiskers(fig("middle right", 3800, 26))
    assert grammar.labels_on_whiskers(fig("middle left", 0, 26))
    assert not grammar.labels_on_whiskers(fig("top right", 3800, 26))
    assert not grammar.labels_on_whiskers(fig("middle left", 3800, 0))
