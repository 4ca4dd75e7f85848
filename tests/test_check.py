"""labkit.present.check: right answers (computed here from the recorded tables) pass, wrong ones get a
hint that does not give the answer away, None asks the question, bad types raise InvalidSpec."""

from __future__ import annotations

import pytest

from labkit import experiments
from labkit.errors import InvalidSpec
from labkit.present import check

BASE = experiments.BASE


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def _algos():
    df = experiments.algorithms(BASE.replace(layout="NCHW"))
    ok = df[df.find_status == "ok"]
    return df, ok.loc[ok.time_us.idxmin()]


def _median(df, prefix):
    return float(df[df.strategy.str.startswith(prefix)].median_us.iloc[0])


def truths():
    """check name -> (right answer, wrong answer, a string the wrong answer's hint must not contain)."""
    algos, fast = _algos()
    slow = algos[(algos.find_status == "ok") & (algos.algorithm != fast.algorithm)].algorithm.iloc[0]
    ws = experiments.workspace_sizes()
    fp = ws[ws.direction == "fprop"].set_index(["dtype", "layout"]).heuristic_workspace_bytes
    one = experiments.strategies("one_conv", 20)
    rnd = experiments.strategies("random_shapes", 20)
    best_rnd = rnd.loc[rnd.median_us.idxmin()].strategy.split(" (")[0]
    worst_rnd = rnd.loc[rnd.median_us.idxmax()].strategy.split(" (")[0]
    return {
        "mode": ("recorded", "live", None),
        "fastest_algorithm": (fast.algorithm, slow, fast.algorithm),
        "workspace_bytes_for_plan": (
            int(fast.query_workspace_bytes),
            1,
            f"{int(fast.query_workspace_bytes):,}",
        ),
        "no_workspace_layout": (
            "NHWC" if fp[("fp16", "NHWC")] < fp[("fp16", "NCHW")] else "NCHW",
            "NCHW" if fp[("fp16", "NHWC")] < fp[("fp16", "NCHW")] else "NHWC",
            None,
        ),
        "fastest_strategy": (best_rnd, worst_rnd, best_rnd),
        "malloc_slowdown": (_median(one, "malloc_per_call") / _median(one, "fixed_arena"), 100.0, None),
        "dims_only_shortfall": (
            int(fp[("fp32", "NHWC")] - fp[("fp16", "NHWC")]),
            7,
            f"{int(fp[('fp32', 'NHWC')] - fp[('fp16', 'NHWC')]):,}",
        ),
    }


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
    "fastest_algorithm": [1, "NOT_AN_ALGO"],
    "workspace_bytes_for_plan": ["lots", True],
    "no_workspace_layout": [["NHWC"], "NCWH"],
    "fastest_strategy": [3, "magic"],
    "malloc_slowdown": ["4x"],
    "dims_only_shortfall": [[1]],
}


@pytest.mark.parametrize("fn", ALL, ids=lambda f: f.__name__)
def test_bad_types_raise_invalid_spec(fn):
    for bad in BAD[fn.__name__]:
        with pytest.raises(InvalidSpec):
            fn(bad)


def test_tolerances_and_unit_hints(capsys):
    right = truths()["workspace_bytes_for_plan"][0]
    assert check.workspace_bytes_for_plan(right * 1.005)  # within 1%
    assert not check.workspace_bytes_for_plan(right / 2**20)
    assert "MiB" in capsys.readouterr().out
    ratio = truths()["malloc_slowdown"][0]
    assert check.malloc_slowdown(ratio * 1.08) and not check.malloc_slowdown(ratio * 1.3)
    assert not check.malloc_slowdown(1 / ratio)
    assert "inverse" in capsys.readouterr().out.split("not yet: ")[-1]


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
