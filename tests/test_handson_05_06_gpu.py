"""The hands-on cells of lessons 05 and 06, live: each reference solution (what
``LABKIT_HANDSON=reference`` runs in the notebook) passes its check on this GPU, and the checks
name what is wrong with an answer that is not right: times far from labkit's autotune, plans left
untimed, a timing of one call, a race that never overlaps (hidden, not reproduced), a per-stream run
that corrupts. The same cells on the simulated GPU: tests/test_handson.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit.experiments import plans_autotune, streams  # noqa: E402
from labkit.present import check  # noqa: E402
from labkit.session import handson, lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    yield from gpu_helpers.live_session(monkeypatch, handson_mode="reference")


def run_reference(name: str, **given) -> dict:
    """Run hands-on ``name`` as the live notebook test does (its reference in the cell's place)."""
    namespace = {"lessons": lessons, "check": check, **given}
    assert handson.run(name, "raise AssertionError('the learner cell ran, not the reference')", namespace)
    return namespace


def run_source(name: str, source: str, **given) -> dict:
    """Run ``source`` as hands-on cell ``name`` (the learner's own)."""
    namespace = {"lessons": lessons, "check": check, **given}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LABKIT_HANDSON", raising=False)
        handson.run(name, source, namespace)
    return namespace


@pytest.fixture(scope="module")
def my_times():
    with pytest.MonkeyPatch.context() as mp:  # the module's later tests (and other modules) get the env back
        for key, value in dict(LABKIT_MODE="live", LABKIT_PREFETCH="0", LABKIT_HANDSON="reference").items():
            mp.setenv(key, value)
        yield run_reference("time_every_plan", my_times={})["my_times"]


def test_time_every_plan_reference_passes_its_check(my_times, capsys):
    res = check.plan_times(my_times)
    assert res.correct, res.message
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "labkit's autotune" in out and "measured on this" in out


def test_plan_times_names_what_is_wrong(my_times, capsys):
    assert not check.plan_times({i: 3.0 * t for i, t in my_times.items()})
    assert "Too far apart" in capsys.readouterr().out
    first = next(iter(my_times))
    assert not check.plan_times({i: t for i, t in my_times.items() if i != first})
    assert "not timed yet" in capsys.readouterr().out
    assert not check.plan_times({**my_times, first: ...})
    assert "no time" in capsys.readouterr().out


def test_a_timing_of_one_call_is_named(capsys):
    one = plans_autotune.TIME_EVERY_PLAN.replace("CALLS = 20", "CALLS = 1")
    assert one != plans_autotune.TIME_EVERY_PLAN
    ns = run_source("time_every_plan", one, my_times={})
    res = check.plan_times(ns["my_times"])
    assert not res.correct and "one call timed" in res.message and "Hint: " in res.message


def test_scratchpad_race_reference_reproduces_the_race(capsys):
    ns = run_reference("scratchpad_race", my_race={})
    res = check.race_reproduced(ns["my_race"])
    assert res.correct, res.message
    bad, runs = ns["my_race"]["shared"]
    assert 0 < bad <= runs and ns["my_race"]["per_stream"][0] == 0


def test_a_race_that_never_overlaps_is_named_not_reproduced(capsys):
    """The same code with each stream waited for right after its launch: the streams never overlap,
    nothing is corrupted, and the check says the race is not reproduced (and leads to launching both
    before waiting)."""
    launch = "            graph.launch(stream)\n"
    assert launch in streams.SCRATCHPAD_RACE
    serial = streams.SCRATCHPAD_RACE.replace(launch, launch + "            stream.synchronize()\n")
    ns = run_source("scratchpad_race", serial, my_race={})
    assert ns["my_race"]["shared"][0] == 0, ns["my_race"]
    res = check.race_reproduced(ns["my_race"])
    assert not res.correct and "race not reproduced" in res.message
    res = check.race_reproduced(ns["my_race"])
    assert "before you wait" in " ".join(res.message.split())  # the second hint


def test_a_per_stream_run_that_corrupts_is_named(capsys):
    """Both 'per-stream' graphs given one workspace (the bug the hands-on is about): the check says
    that one workspace per stream must never corrupt."""
    shared_by_mistake = streams.SCRATCHPAD_RACE.replace(
        "ws = workspaces[0 if shared else i]", "ws = workspaces[0]"
    )
    ns = run_source("scratchpad_race", shared_by_mistake, my_race={})
    res = check.race_reproduced(ns["my_race"])
    assert not res.correct and "should never happen" in res.message, ns["my_race"]


def test_the_reference_sources_are_what_the_topics_register():
    handson.register_topics()
    assert handson.HANDS_ON["time_every_plan"].source == plans_autotune.TIME_EVERY_PLAN
    assert handson.HANDS_ON["scratchpad_race"].source == streams.SCRATCHPAD_RACE
