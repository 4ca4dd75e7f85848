"""Exercise self-checks, as the notebooks call them (``check.fastest_algorithm(answer)``). Each
compares your answer with the numbers in an experiment's DataFrame (live or recorded: the same
results the notebook shows, through `labkit.session.lessons.data`) and prints ``correct`` with a one-line
why, or a hint that does not give the answer away (a closer one on the next try).

``None`` means "not answered yet" and prints the question; an answer of the wrong type raises
`labkit.InvalidSpec` saying what is expected; ``reveal=True`` shows the answer. Every check returns
a `CheckResult` (true when right).

Your answers are kept across kernels and restarts (`labkit.experiments.exercise`): ``progress()``
shows them, ``reset()`` starts over. ``after_answer(name, chart, ...)`` keeps a prediction's
answer hidden until you answer (`labkit.present.hidden`). For a teacher, ``solutions("03")``
lists a lesson's questions and ``solutions("03", 2)`` shows one answer.

Each check lives with its experiment, in its lesson's topic module of `labkit.experiments` (lesson
00's in `labkit.experiments.start_here`); this module gathers them.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import pandas as pd

from ..draw.prose import Text
from ..errors import InvalidSpec
from ..experiments import exercise as _records
from ..experiments import exercises, hands_on_checks
from ..experiments.exercise import Exercise, as_check, shown_answer
from ..experiments.start_here import MODE
from . import compare_check
from .hidden import Hidden

#: lesson -> its checks, in the order the lesson asks them (for the notebooks and the tests)
EXERCISES = {"00": (MODE,), **exercises(), "08": compare_check.EXERCISES}
for _lesson, _items in list(EXERCISES.items()):
    EXERCISES[_lesson] = tuple(as_check(x) if isinstance(x, Exercise) else x for x in _items)
    globals().update({fn.__name__: fn for fn in EXERCISES[_lesson]})

#: the checks a lesson's hands-on cells call (``check.own_strategy(MyStrategy)``): they run on the
#: GPU and are not exercises (no answer to reveal)
HANDS_ON_CHECKS = {fn.__name__: fn for fn in hands_on_checks()}
globals().update(HANDS_ON_CHECKS)


def _lesson(lesson) -> str:
    if lesson not in EXERCISES:
        raise InvalidSpec("lesson", lesson, f"must be one of {', '.join(sorted(EXERCISES))}")
    return lesson


def exercise_list(lesson: Optional[str] = None) -> list:
    """Every exercise (`labkit.experiments.exercise.Exercise`) of a lesson, in the order it asks them.

    Args:
        lesson: the lesson's number, e.g. ``"03"``; None for every lesson.

    Returns:
        The exercises.
    """
    return [
        fn.exercise
        for key, fns in EXERCISES.items()
        if lesson is None or key == lesson
        for fn in fns
        if hasattr(fn, "exercise")
    ]


def solutions(lesson: Optional[str] = None, which: Union[int, str, None] = None) -> Text:
    """For a teacher: a lesson's questions, each with the call that shows its answer; or one
    exercise's answer for the recording or GPU in use, and why. Nothing is recorded as revealed.

    Args:
        lesson: a lesson's number (``"03"``); None lists every lesson's questions.
        which: an exercise of ``lesson``: its number (1 is the first the lesson asks) or its
            check's name; None lists the questions.

    Returns:
        Markdown text.
    """
    if lesson is None:
        if which is not None:
            raise InvalidSpec("lesson", lesson, "must name the lesson of the exercise to show")
        return Text("\n\n".join(_questions(key) for key in sorted(EXERCISES)))
    exs = exercise_list(_lesson(lesson))
    if which is None:
        return Text(_questions(lesson))
    names = [ex.name for ex in exs]
    if isinstance(which, str) and which in names:
        n = names.index(which) + 1
    elif isinstance(which, int) and not isinstance(which, bool) and 1 <= which <= len(exs):
        n = which
    else:
        raise InvalidSpec("which", which, f"must be 1 to {len(exs)} or one of {', '.join(names)}")
    ex = exs[n - 1]
    truth = ex.truth()
    choices = "".join(f"\n* `{k!r}`: {v}" for k, v in ex.choices.items())
    following = f'\n\nNext: `check.solutions("{lesson}", {n + 1})`.' if n < len(exs) else ""
    return Text(
        f"**Lesson {lesson}, exercise {n} of {len(exs)}** (`check.{ex.name}`, {ex.kind}): {ex.question}"
        f"{choices}\n\n**Answer:** `{shown_answer(truth)}`. {ex.why(truth)}{following}"
    )


def _questions(lesson: str) -> str:
    exs = exercise_list(lesson)
    head = f"**Lesson {lesson}: {len(exs)} exercise{'s' if len(exs) != 1 else ''}.** "
    head += f'Each answer is shown alone: `check.solutions("{lesson}", n)`.'
    return "\n".join(
        [head, ""]
        + [
            f'{n}. *{ex.kind}* `check.{ex.name}`: {ex.question} → `check.solutions("{lesson}", {n})`'
            for n, ex in enumerate(exs, 1)
        ]
    )


def progress(lesson: Optional[str] = None):
    """What you have done with the exercises, kept across kernels and restarts (for the numbers in
    use: this recording, or this GPU live).

    Args:
        lesson: a lesson's number (``"03"``): one row per exercise; None: one row per lesson.

    Returns:
        A pandas DataFrame. Per exercise: its kind, tries (answers given), done (answered right),
        revealed (answer shown). Per lesson: how many exercises, answered, done and revealed.
    """
    if lesson is not None:
        rows = [
            dict(exercise=ex.name, kind=ex.kind, **_records.state(ex))
            for ex in exercise_list(_lesson(lesson))
        ]
        return pd.DataFrame(rows, columns=["exercise", "kind", "tries", "done", "revealed"]).set_index(
            "exercise"
        )
    rows = []
    for key in sorted(EXERCISES):
        states = [_records.state(ex) for ex in exercise_list(key)]
        rows.append(
            dict(
                lesson=key,
                exercises=len(states),
                answered=sum(s["tries"] > 0 for s in states),
                done=sum(s["done"] for s in states),
                revealed=sum(s["revealed"] for s in states),
            )
        )
    return pd.DataFrame(rows).set_index("lesson")


def reset(lesson: Optional[str] = None) -> None:
    """Start over: forget your answers to a lesson's exercises (or every lesson's), in every kernel;
    their hidden answers hide again.

    Args:
        lesson: a lesson's number (``"03"``), or None for every lesson.
    """
    exs = exercise_list(None if lesson is None else _lesson(lesson))
    _records.reset(None if lesson is None else [ex.name for ex in exs])
    where = "every lesson" if lesson is None else f"lesson {lesson}"
    print(f"progress: forgot your answers to {where} ({len(exs)} exercises).")


def after_answer(exercises: Union[str, Sequence[str]], *items) -> Hidden:
    """Show what answers a prediction (a chart, a table, a summary) only once its exercise has an
    answer (any answer) or was revealed; until then, a line saying what to do and a button.

    Args:
        exercises: the exercise's check name (``"fusion_speedup"``), or several (shown once each
            has an answer).
        *items: what to show, in order.

    Returns:
        The `labkit.present.hidden.Hidden` output (it updates in place when you answer).
    """
    known = {ex.name: ex for ex in exercise_list()}
    names = (exercises,) if isinstance(exercises, str) else tuple(exercises)
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise InvalidSpec("exercises", bad or exercises, "must name exercises' checks, e.g. 'fusion_speedup'")
    if not items:
        raise InvalidSpec("items", items, "must be what to show once answered (a chart, a table, a text)")
    return Hidden([known[n] for n in names], items)
