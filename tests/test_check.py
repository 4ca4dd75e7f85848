"""labkit.present.check: right answers (computed here from the recorded tables) pass, wrong ones get a
hint that does not give the answer away, None asks the question, bad types raise InvalidSpec."""

from __future__ import annotations

import pytest

from labkit.errors import InvalidSpec
from labkit.present import check


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def truths():
    """check name -> (right answer, wrong answer, a string the wrong answer's hint must not contain):
    the checks still written as functions (lesson 00's)."""
    return {"mode": ("recorded", "live", None)}


#: the checks written as functions (those written as `Exercise` data: tests/test_exercises.py)
ALL = [fn for fns in check.EXERCISES.values() for fn in fns if not hasattr(fn, "exercise")]


def test_every_exercise_has_a_truth():
    assert sorted(fn.__name__ for fn in ALL) == sorted(truths())
    assert all(2 <= len(fns) for lesson, fns in check.EXERCISES.items() if lesson != "00")


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_right_answer_passes(fn, capsys):
    right, _, _ = truths()[fn.__name__]
    res = fn(right)
    out = capsys.readouterr().out
    assert res.correct and bool(res), res.message
    assert out.startswith("correct: ") and all(len(line) <= 100 for line in out.splitlines())


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_wrong_answer_gets_a_hint_not_the_answer(fn, capsys):
    _, wrong, secret = truths()[fn.__name__]
    res = fn(wrong)
    out = capsys.readouterr().out
    assert not res.correct and out.startswith("not yet: ")
    if secret:
        assert secret not in out, f"the hint gives the answer away: {out}"


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_none_asks_the_question(fn, capsys):
    res = fn(None)
    assert not res.correct and capsys.readouterr().out.startswith("no answer yet: ")


BAD = {  # check -> answers of the wrong type
    "mode": [3],
}


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_bad_types_raise_invalid_spec(fn):
    for bad in BAD[fn.__name__]:
        with pytest.raises(InvalidSpec):
            fn(bad)


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
            fn = getattr(check, call)
            ex = getattr(fn, "exercise", None)
            hint = " ".join(ex.hints) if ex is not None else fn(None).message.split("Hint:", 1)[1]
            for name in re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", hint):
                if name not in text:
                    missing.append(
                        f"{nb.name}: check.{call} hint names {name!r}, which the lesson never shows"
                    )
    capsys.readouterr()
    assert not missing, "\n".join(missing)
