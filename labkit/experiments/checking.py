"""What exercise checks are written with: the result type, the printed verdict, and answer parsing
(an answer of the wrong type is an `InvalidSpec` saying what is expected)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from ..errors import InvalidSpec
from .core import result


@dataclass(frozen=True)
class CheckResult:
    """``correct``; ``message``: what was printed. True in a boolean context when correct."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return f"CheckResult(correct={self.correct})"

    def _ipython_display_(self) -> None:
        """The message was printed already; show nothing more in a notebook."""


def say(correct: bool, text: str) -> CheckResult:
    msg = ("correct: " if correct else "not yet: ") + text
    print(msg)
    return CheckResult(correct, msg)


def pending(question: str, hint: str) -> CheckResult:
    msg = f"no answer yet. {question} Hint: {hint}"
    print(msg)
    return CheckResult(False, msg)


# ---- answer types -----------------------------------------------------------------------------
def as_word(answer, what: str, example: str) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidSpec("answer", answer, f"must be a str naming {what}, e.g. {example!r}")
    return answer.strip()


def as_number(answer, what: str, example) -> float:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real) or math.isnan(float(answer)):
        raise InvalidSpec("answer", answer, f"must be a number ({what}), e.g. {example!r}")
    return float(answer)


def as_flag(answer, what: str) -> bool:
    if not isinstance(answer, bool):
        raise InvalidSpec("answer", answer, f"must be True or False ({what})")
    return answer


def is_close(answer: float, truth: float, rel: float) -> bool:
    return abs(answer - truth) <= rel * abs(truth)


def frame_for(df, name: str, **kwargs):
    """``df``, or the result of ``name(**kwargs)`` (`core.result`: the session's, when a lesson runs)."""
    return df if df is not None else result(name, **kwargs)
