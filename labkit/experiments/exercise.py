"""A lesson's exercises as data: the question, how its answer is computed from the numbers in use
(recorded, or measured on this GPU), how an answer is judged, two hints that lead without giving
the answer away, and what is shown once it is right (or revealed).

Three kinds, as the lessons use them:

* ``predict``: the learner commits an answer *before* the chart that answers it; the check then
  shows the measurement and why;
* ``explore``: the answer is found only by moving a control or calling labkit with other
  arguments; it is printed nowhere in the notebook;
* ``explain``: a choice among reasons, each wrong choice with its own explanation; or a number
  worked out from a simple model and the lesson's own measurements (`worked`: bytes over bandwidth,
  calls until a cost is repaid, a share of idle time), judged within a tolerance.

(``read`` marks the few exercises whose answer is a number read off a chart above.)

A check is called with ``None`` (the question again, and how to answer), with an answer (right:
the measurement and why; wrong: what is off, then the first hint, then on later tries the
second), or with ``reveal=True`` (the answer and why). Nothing here measures: answers come
through `labkit.experiments.core.result`, the same results the lesson's charts draw.

**Progress that lasts.** Every answer, right answer and reveal is `record`-ed in the progress file
(`labkit.store.progress`: in labkit's cache folder, safe with two kernels at once), so
``check.progress()`` and the answers hidden until predicted (`labkit.present.hidden`) see it in
any kernel, after a restart, until ``check.reset()``. A record holds for one meaning only, so it
is keyed by:

* the numbers it was judged against (`source_key`): one recording, by name and a digest of its
  ``metadata.json`` (which holds every table's sha256: a recording recorded again may have other
  answers), or one machine's live measurements, by its identity (GPU, driver, CUDA, cuDNN, CuPy);
* the exercise's version (`Exercise.fingerprint`: lesson, name, kind, question, choices): a
  question that changes is another exercise, and a record of the old one is ignored;
* the file's format (`labkit.store.progress.FORMAT`, part of the file's name).

labkit's own version is not a key: a release that leaves an exercise and its numbers as they were
leaves what its record says true.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from .. import env
from ..errors import InvalidSpec, LabkitError
from ..store import machine, progress, recordings
from ..store.localcache import now
from .checking import CheckResult, as_flag, as_number, emit

KINDS = ("predict", "explore", "explain", "read")


@dataclass(frozen=True)
class Exercise:
    """One checked question of a lesson.

    Attributes:
        name: the check's name, as the notebook calls it (``check.<name>(answer)``).
        lesson: the lesson's number, e.g. ``"03"``.
        kind: one of `KINDS`.
        question: the question, one or two sentences.
        truth: computes the right answer from the numbers in use (no argument).
        parse: turns an answer into the form ``judge`` compares (raises `InvalidSpec` with what
            is expected).
        judge: ``judge(parsed_answer, truth)``: whether the answer is right.
        why: ``why(truth)``: the measurement and the reason, shown when right or revealed.
        hints: the first and the second hint; neither may contain the answer. A hint that quotes
            a measured number is a function () -> str that reads it from the numbers in use.
        wrong: ``wrong(parsed_answer, truth)``: what is off about this answer (None: nothing
            particular); never the answer itself.
        choices: for ``explain``: choice -> the reason it names; the right choice is ``truth()``.
        example: a well-formed answer, shown in the question (never the right one).
        leaks: ``leaks(truth)``: regular expressions that would give the answer away if an output
            above the check matched them (the tests look for them); default `default_leaks`.
        wrong_answers: ``wrong_answers(truth)``: wrong answers the tests try (default: the other
            choices, the other flag, or a number far off).
        given: ``given()``: what the question's model needs that no output above shows (a datasheet
            figure), printed under the question; None: nothing.
        right_answers: ``right_answers(truth)``: answers besides the truth that must pass, e.g. the
            model fed its inputs rounded as the lesson prints them (the tests try them).
    """

    name: str
    lesson: str
    kind: str
    question: str
    truth: Callable[[], Any]
    parse: Callable[[Any], Any]
    judge: Callable[[Any, Any], bool]
    why: Callable[[Any], str]
    hints: Tuple[Union[str, Callable[[], str]], Union[str, Callable[[], str]]]
    wrong: Callable[[Any, Any], Optional[str]] = lambda answer, truth: None
    choices: Dict[str, str] = field(default_factory=dict)
    example: Any = None
    leaks: Optional[Callable[[Any], Sequence[str]]] = None
    wrong_answers: Optional[Callable[[Any], Sequence[Any]]] = None
    given: Optional[Callable[[], str]] = None
    right_answers: Optional[Callable[[Any], Sequence[Any]]] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InvalidSpec("kind", self.kind, f"must be one of {', '.join(KINDS)}")

    def leak_patterns(self, truth) -> Sequence[str]:
        """What would give the answer away in an output above the check.

        Args:
            truth: the right answer.

        Returns:
            Regular expressions (``leaks``, else `default_leaks`).
        """
        return tuple(self.leaks(truth)) if self.leaks is not None else default_leaks(truth)

    def wrong_examples(self, truth) -> list:
        """Wrong answers to try (for the tests).

        Args:
            truth: the right answer.

        Returns:
            ``wrong_answers``; else up to two other choices, the other flag, two numbers far off, or none.
        """
        if self.wrong_answers is not None:
            return list(self.wrong_answers(truth))
        if self.choices:
            return [c for c in self.choices if c != truth][:2]
        if isinstance(truth, bool):
            return [not truth]
        if isinstance(truth, (int, float)):
            return [truth * 3 + 7, -abs(truth) - 1]
        return []

    def ask(self) -> str:
        """The question, with the choices of an ``explain`` exercise and an example answer.

        Returns:
            The text.
        """
        lines = [self.question, *(f"  {k!r}: {v}" for k, v in (self.choices or {}).items())]
        if self.given is not None:
            try:
                lines.append(self.given())
            except LabkitError as exc:
                lines.append(f"({exc})")
        if self.example is not None:
            lines.append(f"(answer like {self.example!r})")
        return "\n".join(lines)

    def check(self, answer=None, *, reveal: bool = False) -> CheckResult:
        """Judge ``answer`` (None: ask again; ``reveal``: show the answer and why).

        Args:
            answer: the learner's answer.
            reveal: show the right answer and why, whatever ``answer`` is.

        Returns:
            A `CheckResult` (true when right); its message is printed.
        """
        if answer is None and not reveal:  # the question needs no answer computed (live: nothing measured)
            return emit(False, self.ask(), lead="no answer yet")
        truth = self.truth()
        if reveal:
            record(self, revealed=True)
            return emit(False, f"the answer: {shown_answer(truth)}. {self.why(truth)}", lead="revealed")
        try:
            parsed = self.parse(answer)
        except InvalidSpec as exc:  # not an answer of this question's form: said in a line, no try counted
            like = f" (answer like {self.example!r})" if self.example is not None else ""
            return emit(False, f"{answer!r} is not an answer here: it {exc.rule}{like}.")
        right = bool(self.judge(parsed, truth))
        tries = record(self, tries=1, done=right)["tries"]
        if right:
            return emit(True, self.why(truth))
        said = self.wrong(parsed, truth)
        hint = self.hint(0 if tries == 1 else 1)
        more = f" (check.{self.name}(reveal=True) shows the answer)" if tries >= 3 else ""
        return emit(False, f"{said + ' ' if said else ''}Hint: {hint}{more}")

    def hint(self, n: int) -> str:
        """Hint ``n`` (0: the first, 1: the second), its numbers read from the results in use.

        Args:
            n: which hint.

        Returns:
            The hint's text.
        """
        hint = self.hints[n]
        return hint() if callable(hint) else hint

    def fingerprint(self) -> str:
        """A name for this version of the exercise: its lesson, name, kind, question and choices.

        A record of another version is not this exercise's (`state`).

        Returns:
            12 hex digits.
        """
        text = json.dumps([self.lesson, self.name, self.kind, self.question, sorted(self.choices)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


# ---- what the learner has done ----------------------------------------------------------------
#: a record before any answer
EMPTY = {"tries": 0, "done": False, "revealed": False}
_LOCK = threading.RLock()
#: source -> name -> record, used once the progress file cannot be (this kernel only)
_MEMORY: Dict[str, Dict[str, dict]] = {}
_on_disk = True
#: weak references to what `listen` was given
_LISTENERS: list = []


def source_key() -> str:
    """Which numbers the answers are judged against.

    Returns:
        ``recorded:<recording>:<digest of its metadata.json>`` (a recording recorded again is another
        source), or ``live:<machine identity>`` (`labkit.store.machine`: GPU, driver, CUDA, cuDNN,
        CuPy).
    """
    if env.mode().live:
        ident = machine.this_identity()
        return f"live:{machine.identity_hash(ident) if ident else 'unknown'}"

    rec = recordings.current()
    digest = hashlib.sha256(json.dumps(rec.metadata, sort_keys=True, default=str).encode()).hexdigest()
    return f"recorded:{rec.name}:{digest[:12]}"


def _records() -> Dict[str, Dict[str, dict]]:
    """Every record: the progress file's, or this kernel's once the file cannot be used."""
    global _on_disk
    if _on_disk:
        try:
            return progress.read()
        except LabkitError:  # LABKIT_CACHE names a file: one error line, then this kernel only
            _on_disk = False
    return _MEMORY


def _clean(rec, exercise: "Exercise") -> dict:
    """A stored record as `EMPTY`'s keys; `EMPTY` for one of another version of the exercise."""
    if not isinstance(rec, dict) or rec.get("exercise") != exercise.fingerprint():
        return dict(EMPTY)
    tries = rec.get("tries")
    return {
        "tries": tries if isinstance(tries, int) and tries >= 0 else 0,
        "done": rec.get("done") is True,
        "revealed": rec.get("revealed") is True,
    }


def state(exercise: "Exercise") -> dict:
    """What the learner did with ``exercise`` against the numbers in use: tries, done, revealed.

    Args:
        exercise: the exercise.

    Returns:
        A dict with `EMPTY`'s keys.
    """
    with _LOCK:
        return _clean(_records().get(source_key(), {}).get(exercise.name), exercise)


def answered(exercise: "Exercise") -> bool:
    """Whether the learner gave an exercise any answer or asked to see it.

    Args:
        exercise: the exercise.

    Returns:
        True once tried, done or revealed.
    """
    s = state(exercise)
    return s["tries"] > 0 or s["done"] or s["revealed"]


def _change(edit: Callable[[Dict[str, Dict[str, dict]]], None]) -> None:
    """Apply ``edit`` to the records on disk (under the file's lock), or in this kernel once the
    disk cannot be written."""
    global _on_disk
    with _LOCK:
        if _on_disk:
            try:
                progress.update(edit)
                return
            except (OSError, LabkitError):  # one warning said so: go on in this kernel
                _on_disk = False
                try:
                    _MEMORY.update(progress.read())
                except (OSError, LabkitError):
                    pass
        edit(_MEMORY)


def record(exercise: "Exercise", *, tries: int = 0, done: bool = False, revealed: bool = False) -> dict:
    """Count an answer (``tries``), a right one (``done``) or a reveal, and tell the listeners.

    Args:
        exercise: the exercise.
        tries: answers to add.
        done: the answer was right.
        revealed: the answer was shown.

    Returns:
        The record after the change (`EMPTY`'s keys).
    """
    source, after = source_key(), {}

    def edit(records):
        old = _clean(records.get(source, {}).get(exercise.name), exercise)
        after.update(
            tries=old["tries"] + tries, done=old["done"] or done, revealed=old["revealed"] or revealed
        )
        records.setdefault(source, {})[exercise.name] = dict(
            after, exercise=exercise.fingerprint(), lesson=exercise.lesson, updated=now()
        )

    _change(edit)
    _tell({exercise.name})
    return dict(after)


def reset(names=None) -> None:
    """Forget the answers to exercises ``names`` (every exercise: None), for every source of numbers.

    Args:
        names: exercise names, or None for all.
    """
    gone = None if names is None else set(names)

    def edit(records):
        for source in list(records):
            for name in list(records[source]):
                if gone is None or name in gone:
                    del records[source][name]
            if not records[source]:
                del records[source]

    _change(edit)
    _tell(gone)


def listen(callback: Callable[[Optional[set]], None]) -> None:
    """Call ``callback(names)`` after this kernel changes a record (``names``: the exercises
    changed, None for all). Held weakly: a listener that is gone is dropped.

    Args:
        callback: a function or a bound method.
    """
    ref = weakref.WeakMethod(callback) if hasattr(callback, "__self__") else weakref.ref(callback)
    with _LOCK:
        _LISTENERS.append(ref)


def _tell(names: Optional[set]) -> None:
    with _LOCK:
        _LISTENERS[:] = [r for r in _LISTENERS if r() is not None]
        callbacks = [r() for r in _LISTENERS]
    for cb in callbacks:
        if cb is not None:
            cb(names)


# ---- answer forms --------------------------------------------------------------------------
def one_of(options: Sequence[str], what: str) -> Callable[[Any], str]:
    """A parser for a name among ``options`` (any case).

    Args:
        options: the names allowed.
        what: what the name is, in the error.

    Returns:
        ``parse(answer)``: the option as spelled in ``options``; `InvalidSpec` for another answer.
    """

    def parse(answer) -> str:
        if not isinstance(answer, str) or answer.strip().lower() not in [o.lower() for o in options]:
            raise InvalidSpec("answer", answer, f"must be {what}: one of {', '.join(map(repr, options))}")
        return next(o for o in options if o.lower() == answer.strip().lower())

    return parse


def number(what: str) -> Callable[[Any], float]:
    """A parser for a real number.

    Args:
        what: what the number is, in the error.

    Returns:
        ``parse(answer)``: a float; `InvalidSpec` for anything else.
    """
    return lambda answer: as_number(answer, what, 1.5)


def count(what: str) -> Callable[[Any], float]:
    """A parser for a count: a whole number, 0 or more.

    Args:
        what: what is counted, in the error.

    Returns:
        ``parse(answer)``: a float; `InvalidSpec` for a negative or fractional number, or anything
        not a number.
    """

    def parse(answer) -> float:
        value = as_number(answer, what, 3)
        if value < 0 or not math.isfinite(value) or value != int(value):
            raise InvalidSpec("answer", answer, f"must be a whole number, 0 or more ({what}), e.g. 3")
        return value

    return parse


def flag(what: str) -> Callable[[Any], bool]:
    """A parser for True or False.

    Args:
        what: what the flag says, in the error.

    Returns:
        ``parse(answer)``: the bool; `InvalidSpec` for anything else.
    """
    return lambda answer: as_flag(answer, what)


def within(rel: float) -> Callable[[float, float], bool]:
    """A judge: the answer within a fraction of the truth.

    Args:
        rel: the tolerance, as a fraction of the truth.

    Returns:
        ``judge(answer, truth)``: True when the answer is close enough.
    """
    return lambda answer, truth: abs(answer - truth) <= rel * abs(truth)


def equal(answer, truth) -> bool:
    """A judge: the answer is the truth.

    Args:
        answer: the parsed answer.
        truth: the right answer.

    Returns:
        True when they are equal.
    """
    return answer == truth


def same_value(values: Callable[[], Dict[Any, float]]) -> Callable[[Any, Any], bool]:
    """A judge for "which option has the most (or the fewest)": an option tied with the truth is right.

    Args:
        values: option -> its value (a count, a ratio), read each time an answer is judged.

    Returns:
        ``judge(answer, truth)``: True when the answer's value equals the truth's.
    """

    def judge(answer, truth) -> bool:
        counts = values()
        return counts[answer] == counts[truth]

    return judge


def number_leaks(value: float) -> Sequence[str]:
    """Regular expressions for ``value`` as a learner would read it printed: a whole number by its
    digits (thousands separators or not), a fraction with one decimal from 10 on (``24.6``) and
    two significant figures below (``4.6`` also matches ``4.62x``); never inside a longer number.

    Args:
        value: the number.

    Returns:
        A tuple of regular expressions.
    """
    if not math.isfinite(value):
        return ()
    if float(value).is_integer():
        if abs(value) < 10:  # a small count is printed everywhere ("3x3"): the exercise says what leaks it
            return ()
        digits = str(int(abs(value)))
        grouped = r",?".join(digits)
        return (rf"(?<![\d.,]){grouped}(?![\d]|\.\d)",)
    text = f"{abs(value):.1f}" if abs(value) >= 10 else f"{abs(value):#.2g}".rstrip(".")
    body = text.replace(".", r"\.")
    return (rf"(?<![\d.,]){body}\d*(?![\d.]*\d)",)


def shown_answer(truth) -> str:
    """An answer as the learner reads it: a number to four significant figures (a whole one without
    its ``.0``), anything else as Python writes it, so it can be typed back as an answer.

    Args:
        truth: the exercise's answer.

    Returns:
        The text.
    """
    if not isinstance(truth, float):
        return repr(truth)
    if truth.is_integer():
        return repr(int(truth))
    return repr(float(f"{truth:.4g}")) if abs(truth) < 1e4 else repr(round(truth))


def as_check(exercise: Exercise) -> Callable:
    """The function a notebook calls for ``exercise``: ``check.<name>(answer, reveal=False)``.

    Args:
        exercise: the exercise.

    Returns:
        A function with the exercise's name, its question as docstring and ``.exercise`` set.
    """

    def check(answer=None, *, reveal: bool = False) -> CheckResult:
        return exercise.check(answer, reveal=reveal)

    check.__name__ = check.__qualname__ = exercise.name
    check.__doc__ = f"Lesson {exercise.lesson} ({exercise.kind}): {exercise.question}"
    check.exercise = exercise
    return check


#: answers so common in every lesson's output that finding them above a check says nothing
COMMON_WORDS = frozenset(
    ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "NCHW", "NHWC", "fprop", "dgrad", "wgrad", "graph", "python"]
)


def default_leaks(truth) -> Sequence[str]:
    """What gives an answer away by default.

    Args:
        truth: the right answer.

    Returns:
        Regular expressions: a number with its first two significant figures; a name that is not one
        of `COMMON_WORDS`, as a whole word, its underscores also written as hyphens or spaces
        (``malloc-per-call``); nothing for True/False.
    """
    if isinstance(truth, bool) or truth is None:
        return ()
    if isinstance(truth, (int, float)):
        return number_leaks(float(truth))
    if isinstance(truth, str) and truth not in COMMON_WORDS:
        name = r"[_\- ]".join(re.escape(part) for part in truth.split("_"))
        return (rf"(?<![\w.]){name}(?![\w])",)
    return ()


def explain(*, choices, **fields) -> Exercise:
    """An ``explain`` exercise: the answer is one of ``choices``, judged equal to ``truth()``.

    Args:
        choices: choice -> the reason it names (listed with the question), or the choices alone.
        **fields: the other `Exercise` fields (name, lesson, question, truth, why, hints, wrong, ...).

    Returns:
        The `Exercise`.
    """
    named = dict(choices) if isinstance(choices, dict) else {}
    return Exercise(
        kind="explain",
        parse=one_of(tuple(choices), "one of the reasons"),
        judge=equal,
        choices=named,
        **fields,
    )
