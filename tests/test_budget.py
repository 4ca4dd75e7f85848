"""Time budgets (`labkit.signals.cancel.Budget`): checked between the parts of a measurement, they stop
it with `labkit.TimedOut` naming the step, the phase and the seconds; a budget within another
ends with it; phases announced reach the innermost listener; plan statuses that say "not timed
to the end" are recognised. Pure Python: the GPU paths that use them are in the gpu tests."""

import time

import pytest

from labkit import InvalidSpec, TimedOut
from labkit.signals.cancel import Budget, not_timed, was_cut
from labkit.signals.progress import announce, announcing


def test_a_budget_is_quiet_until_spent_then_names_step_phase_and_seconds():
    b = Budget(0.05, "plan 6 (eng1) of a depthwise conv")
    b.check("capture")
    assert not b.over and 0 < b.left <= 0.05
    time.sleep(0.08)
    assert b.over and b.left == 0
    with pytest.raises(TimedOut) as err:
        b.check("capture (3 of 10 calls captured)")
    e = err.value
    assert (e.what, e.phase, e.budget_s) == (
        "plan 6 (eng1) of a depthwise conv",
        "capture (3 of 10 calls captured)",
        0.05,
    )
    assert e.seconds >= 0.08
    assert str(e).startswith(
        "plan 6 (eng1) of a depthwise conv: timed out after 0.1 s in capture (3 of 10 calls captured)"
    )


def test_no_limit_never_times_out():
    b = Budget(None, "anything")
    b.check("x")
    assert b.left == float("inf") and not b.over


def test_a_budget_within_another_ends_with_it():
    outer = Budget(0.05, "step")
    inner = outer.within(10, "plan")
    assert inner.seconds <= 0.05
    assert outer.within(0.01, "plan").seconds == pytest.approx(0.01)
    time.sleep(0.06)
    assert outer.within(10, "late plan").over or outer.within(10, "late plan").seconds <= 1e-5
    assert Budget(None, "free").within(None, "x").seconds is None


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_bad_budget_is_refused(bad):
    with pytest.raises(InvalidSpec, match="budget seconds"):
        Budget(bad, "x")


def test_announced_phases_reach_the_innermost_listener_and_a_bad_listener_is_ignored():
    outer, inner = [], []
    announce("nobody hears this")
    with announcing(outer.append):
        announce("one")
        with announcing(inner.append):
            announce("two")
        announce("three")
    assert outer == ["one", "three"] and inner == ["two"]

    def broken(phase):
        raise RuntimeError("listener bug")

    with announcing(broken):
        announce("still fine")


def test_not_timed_statuses():
    slower = "slower: one eager call took 8.93 ms, 1540x the best plan so far (5.8 us): not timed further"
    timed_out = "timed out after 0.5 s in capture (2 of 10 calls captured) (budget 0.5 s)"
    cut = "cut: the autotune's budget (60.0 s) was spent before this plan"
    assert all(map(not_timed, (slower, timed_out, cut)))
    assert was_cut(timed_out) and was_cut(cut) and not was_cut(slower)
    assert not not_timed("ok") and not not_timed("out of memory: ...") and not not_timed(float("nan"))
