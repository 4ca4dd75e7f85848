"""What exercise checks are written with: the result type, the printed verdict, and answer parsing
(an answer of the wrong type is an `InvalidSpec` saying what is expected)."""

from __future__ import annotations

import math
import numbers
import textwrap
from dataclasses import dataclass

from ..errors import InvalidSpec
from .core import result


@dataclass(frozen=True)
class CheckResult:
    """A check's verdict; True in a boolean context when correct.

    Attributes:
        correct: whether the answer was right.
        message: what was printed.
    """

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return f"CheckResult(correct={self.correct})"

    def _ipython_display_(self) -> None:
        """The message was printed already; show nothing more in a notebook."""


#: printed lines wrap at this many characters, at word boundaries: a notebook's output at
#: 1366x768 with the file browser open shows about 115 monospace characters
LINE_CHARS = 100


def wrapped(text: str, width: int = LINE_CHARS) -> str:
    """A text with every line wrapped at word boundaries (a long word stays whole).

    Args:
        text: the text; its own line breaks are kept.
        width: characters per line.

    Returns:
        The wrapped text; continued lines are indented by two spaces.
    """
    return "\n".join(
        textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False, subsequent_indent="  ")
        if len(line) > width
        else line
        for line in text.split("\n")
    )


def emit(correct: bool, text: str, lead: str = "") -> CheckResult:
    """Print a check's verdict (``correct: ...``, ``not yet: ...`` or ``<lead>: ...``), wrapped.

    Args:
        correct: whether the answer was right.
        text: what to say after the verdict.
        lead: the verdict's word when it is neither (e.g. ``"no answer yet"``).

    Returns:
        The `CheckResult` with the printed message.
    """
    msg = wrapped(f"{lead or ('correct' if correct else 'not yet')}: {text}")
    print(msg)
    return CheckResult(correct, msg)


def say(correct: bool, text: str) -> CheckResult:
    """Print a check's verdict, ``correct: ...`` or ``not yet: ...`` (`emit`).

    Args:
        correct: whether the answer was right.
        text: what to say after the verdict.

    Returns:
        The `CheckResult`.
    """
    return emit(correct, text)


# ---- answer types -----------------------------------------------------------------------------
def as_number(answer, what: str, example) -> float:
    """An answer that must be a real number.

    Args:
        answer: the learner's answer.
        what: what the number is, named in the error.
        example: a well-formed answer, shown in the error.

    Returns:
        The answer as a float; `InvalidSpec` for a bool, NaN or anything not a number.
    """
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real) or math.isnan(float(answer)):
        raise InvalidSpec("answer", answer, f"must be a number ({what}), e.g. {example!r}")
    return float(answer)


def as_flag(answer, what: str) -> bool:
    """An answer that must be True or False.

    Args:
        answer: the learner's answer.
        what: what the flag says, named in the error.

    Returns:
        The answer; `InvalidSpec` for anything not a bool.
    """
    if not isinstance(answer, bool):
        raise InvalidSpec("answer", answer, f"must be True or False ({what})")
    return answer


def is_close(answer: float, truth: float, rel: float) -> bool:
    """Whether an answer is within a fraction of the truth.

    Args:
        answer: the learner's number.
        truth: the right number.
        rel: the tolerance, as a fraction of ``truth``.

    Returns:
        True when ``|answer - truth| <= rel * |truth|``.
    """
    return abs(answer - truth) <= rel * abs(truth)


def frame_for(df, name: str, **kwargs):
    """A result a check reads: ``df``, or experiment ``name(**kwargs)``.

    Args:
        df: a result already at hand; None to get one.
        name: the experiment.
        **kwargs: its arguments.

    Returns:
        The DataFrame (`core.result`: the session's, when a lesson runs).
    """
    return df if df is not None else result(name, **kwargs)
