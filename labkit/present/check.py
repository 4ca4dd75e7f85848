"""Exercise self-checks, as the notebooks call them (``check.fastest_algorithm(answer)``). Each
compares your answer with the numbers in an experiment's DataFrame (live or recorded: the same
results the notebook shows, through `labkit.session.lessons.data`) and prints ``correct`` with a one-line
why, or a hint that does not give the answer away.

``None`` means "not answered yet" and prints the question's hint; an answer of the wrong type
raises `labkit.InvalidSpec` saying what is expected. Every check returns a `CheckResult`
(true when correct). Pass ``df=`` to check against a DataFrame of your own (same experiment).

Each check lives with its experiment, in its lesson's topic module of `labkit.experiments`; this
module gathers them (and holds lesson 00's, which needs no experiment).
"""

from __future__ import annotations

from typing import Optional

from ..errors import InvalidSpec
from ..experiments import exercises, hands_on_checks
from ..experiments.checking import CheckResult, as_word, pending, say
from ..experiments.exercise import Exercise, as_check
from ..session import lessons  # noqa: F401  (lessons plugs its session results into the checks)
from . import compare_check


def mode(answer: Optional[str] = None) -> CheckResult:
    """Lesson 00: which mode is labkit in, 'live' or 'recorded'?"""
    from .. import env

    if answer is None:
        return pending("Which mode is labkit in, 'live' or 'recorded'?", "the banner at the top says it.")
    a = as_word(answer, "a mode", "recorded").lower()
    m = env.mode()
    if a == m.name:
        return say(True, f"labkit is {m.name} ({m.reason}).")
    return say(False, "read the banner again, or run labkit.env.mode().")


#: lesson -> its checks (for the notebooks' exercise lists and the tests)
EXERCISES = {"00": (mode,), **exercises(), "08": compare_check.EXERCISES}
for _lesson, _items in list(EXERCISES.items()):
    EXERCISES[_lesson] = tuple(as_check(x) if isinstance(x, Exercise) else x for x in _items)
    globals().update({fn.__name__: fn for fn in EXERCISES[_lesson]})

#: the checks a lesson's hands-on cells call (``check.own_strategy(MyStrategy)``): they run on the
#: GPU and are not exercises (no answer to reveal)
HANDS_ON_CHECKS = {fn.__name__: fn for fn in hands_on_checks()}
globals().update(HANDS_ON_CHECKS)


def exercise_list(lesson: Optional[str] = None) -> list:
    """Every exercise (`labkit.experiments.exercise.Exercise`) of a lesson, or of every lesson."""
    return [
        fn.exercise
        for key, fns in EXERCISES.items()
        if lesson is None or key == lesson
        for fn in fns
        if hasattr(fn, "exercise")
    ]


def solutions(lesson: Optional[str] = None):
    """For a teacher: every exercise's answer for the recording or GPU in use, and why.

    Args:
        lesson: a lesson's number (``"03"``), or None for every lesson.

    Returns:
        Markdown text: per exercise, its question, answer and explanation.
    """
    from ..draw.prose import Text

    rows = []
    for ex in exercise_list(lesson):
        truth = ex.truth()
        rows.append(
            f"* **{ex.lesson} `check.{ex.name}`** ({ex.kind}): {ex.question}  \n"
            f"  answer: `{truth!r}`. {ex.why(truth)}"
        )
    if lesson is not None and lesson not in EXERCISES:
        raise InvalidSpec("lesson", lesson, f"must be one of {', '.join(EXERCISES)}")
    return Text("\n".join(rows))


def progress():
    """Which exercises this kernel has answered: per exercise, tries, done, revealed.

    Returns:
        A pandas DataFrame, one row per exercise of every lesson.
    """
    import pandas as pd

    from ..experiments import exercise as ex_mod

    return pd.DataFrame(
        [
            dict(lesson=ex.lesson, exercise=ex.name, kind=ex.kind, **ex_mod.done(ex.name))
            for ex in exercise_list()
        ],
        columns=["lesson", "exercise", "kind", "tries", "done", "revealed"],
    )
