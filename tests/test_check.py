"""labkit.present.check: lesson 00's check (right passes; wrong gets a hint, then a second, closer
one; None asks; bad types raise InvalidSpec), and every hint names only what its lesson shows.
The exercises of lessons 01-10: tests/test_exercises.py."""

from __future__ import annotations

import pytest

from labkit.present import check


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


@pytest.fixture(autouse=True)
def no_answers_yet(fresh_progress):
    yield


def test_every_lesson_after_00_has_at_least_two_checks():
    assert all(2 <= len(fns) for lesson, fns in check.EXERCISES.items() if lesson != "00")
    assert all(hasattr(fn, "exercise") for fns in check.EXERCISES.values() for fn in fns)


def test_lesson_00_mode_right_answer_passes(capsys):
    res = check.mode("recorded")
    out = capsys.readouterr().out
    assert res.correct and bool(res), res.message
    assert out.startswith("correct: ") and all(len(line) <= 100 for line in out.splitlines())


def test_lesson_00_mode_gives_a_second_closer_hint_on_the_next_try(capsys):
    """Lesson 00 says a wrong answer gets a hint, and a second, closer one on the next try."""
    first = check.mode("live").message
    second = check.mode("live").message
    capsys.readouterr()
    assert first.startswith("not yet: ") and second.startswith("not yet: ")
    assert "Hint: " in first and "Hint: " in second
    assert first.split("Hint: ", 1)[1] != second.split("Hint: ", 1)[1], (first, second)
    for msg in (first, second):
        assert "recorded" not in msg, f"the hint gives the answer away: {msg}"
    assert "labkit.env.mode()" in second
    third = check.mode("live").message
    assert "check.mode(reveal=True)" in third
    assert "recorded" in check.mode(reveal=True).message


def test_lesson_00_mode_none_asks_the_question(capsys):
    res = check.mode(None)
    assert not res.correct and capsys.readouterr().out.startswith("no answer yet: ")


def test_an_answer_of_the_wrong_form_gets_one_line_and_costs_no_try(capsys):
    """An answer a check cannot read (a number for a mode, a name the chart does not show) is said
    so in one "not yet" line with the form it must take, not raised as a traceback, and is not
    counted as a try."""
    before = check.progress("00").loc["mode", "tries"]
    for bad in (3, "maybe", True):
        res = check.mode(bad)
        said = capsys.readouterr().out
        assert not res.correct and said.startswith(f"not yet: {bad!r} is not an answer here: it must be")
        assert "Traceback" not in said
    assert check.progress("00").loc["mode", "tries"] == before
    res = check.fallback_strategy("keyed_cache")  # the strategy's name without its options
    assert not res.correct and "must name one strategy as the chart shows it" in res.message


def test_every_exercise_hint_names_only_what_its_lesson_shows(monkeypatch, capsys):
    """A hint that sends the learner to a column (``intermediate_bytes``) must point at one the
    lesson shows or names: every snake_case name in a hint appears in its notebook's cells."""
    import json
    import re
    from pathlib import Path

    from labkit.present import check

    monkeypatch.setenv("LABKIT_MODE", "recorded")
    missing = []
    for nb in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells)
        for call in re.findall(r"(?<![\w.])check\.(\w+)\(answer", text):
            hint = " ".join(getattr(check, call).exercise.hint(n) for n in (0, 1))
            for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", hint):
                if name not in text:
                    missing.append(
                        f"{nb.name}: check.{call} hint names {name!r}, which the lesson never shows"
                    )
    capsys.readouterr()
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("bad", (-6, 2.5))
def test_a_count_that_cannot_be_one_is_said_to_be_no_answer(bad, capsys):
    """A negative or fractional count of kernels is not "too few": it is said to be no answer, with
    the form a count takes, and costs no try."""
    before = check.progress("10").loc["nchw_kernels", "tries"]
    res = check.nchw_kernels(bad)
    said = capsys.readouterr().out
    assert not res.correct and said.startswith(f"not yet: {bad!r} is not an answer here: it must be")
    assert "a whole number, 0 or more (a count of kernels)" in said and "too few" not in said
    assert check.progress("10").loc["nchw_kernels", "tries"] == before
