"""The chart grammar (STYLE.md) on every figure a lesson or a panel can draw, from both shipped
recordings: every recorded request of every experiment (what a panel's controls can reach in
recorded mode) through its chart builder, and lesson 08's two-GPU figures.

* no bar trace on a log axis, and bars from zero;
* no second y-axis overlaying another;
* a legend lists only traces that draw something (a zero bar is labelled);
* one scale per chart: every axis keeps its type (linear, log, category) and its unit across all
  the requests of an experiment, so no control move switches it;
* a label on a bar or a point is in its axis's unit; log axes ticked in plain decimals; no plan's
  full name drawn (`chart_grammar`).
"""

from __future__ import annotations

import chart_grammar as grammar
import pytest

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
    out = []
    for req in recording.requests(name):
        try:
            df = experiments.with_model(name, recording.lookup(name, req))
        except LabkitError:
            continue
        out.append((req, experiments.CHARTS[name](df)))
    return out


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
    """The known list shrinks as charts are fixed: an entry that no longer occurs must go."""
    seen = set()
    for rec in recordings.shipped():
        for name in experiments.CHARTS:
            if name not in rec.experiments():
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
