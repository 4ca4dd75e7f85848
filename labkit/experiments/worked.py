"""Exercises whose answer is a number worked out from a simple model and a lesson's own
measurements: bytes over bandwidth, calls until a cost is repaid, a share of idle time.

The model is a plain function of named inputs; the inputs come from the results the lesson draws
(`core.result`), and datasheet figures from `labkit.ceilings`. The truth is the model fed the
inputs; the tests also feed it the inputs rounded to three significant figures, as a learner reads
them off a chart, and that answer must pass too.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from .. import ceilings, env
from ..errors import Unsupported
from ..store import recordings
from .core import result
from .exercise import Exercise, number, number_leaks, within

#: a model's inputs, as a learner reads them, are rounded to this many significant figures
READ_FIGURES = 3
#: factors a unit slip multiplies an answer by (us and s, percent and fraction, bytes and MB)
UNIT_FACTORS = (1e3, 1e-3, 1e6, 1e-6, 100.0, 0.01)


def read_as_printed(value):
    """A value as a learner reads it off a chart: rounded to `READ_FIGURES` significant figures.

    Args:
        value: a number, or a list or tuple of numbers.

    Returns:
        The rounded float (a list for a sequence); zero, a bool, a non-finite number or anything
        that is not a number as given.
    """
    if isinstance(value, (list, tuple)):
        return [read_as_printed(v) for v in value]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value == 0
    ):
        return value
    return float(f"{value:.{READ_FIGURES}g}")


def worked_leaks(truth, *, percent: bool = False) -> Sequence[str]:
    """What gives a worked number away: `number_leaks`; from 100 on its whole number too; a
    ``percent`` also as a whole percentage (``64%``).

    Args:
        truth: the worked number.
        percent: it is a percentage.

    Returns:
        Regular expressions, one per way of writing it.
    """
    pats = list(number_leaks(float(truth)))
    if not math.isfinite(truth):
        return tuple(pats)
    whole = str(int(round(abs(truth))))
    if abs(truth) >= 100 and not float(truth).is_integer():
        grouped = r",?".join(whole)
        pats.append(rf"(?<![\d.,]){grouped}(?![\d]|\.\d)")
    if percent:
        pats.append(rf"(?<![\d.,]){whole}(\.\d+)? ?%")
    return tuple(pats)


def slips(
    cases: Callable[[], Sequence[Tuple[float, str]]], *, rel: float, unit: str, high: str, low: str
) -> Callable[[float, float], Optional[str]]:
    """A ``wrong`` for a worked number: what a wrong answer most likely got wrong.

    Args:
        cases: () -> (value, what went wrong) pairs: the answers common slips give.
        rel: how close (a fraction) an answer must be to a slip's value to be taken for it.
        unit: the answer's unit, named when the answer is off by a unit's factor.
        high: what to say of an answer above the truth that is no known slip.
        low: the same, below it.

    Returns:
        ``wrong(answer, truth)`` -> a pointer at what is off, never the answer: the slip nearest the
        answer among those within ``rel`` of it (two slips can be close to each other).
    """

    def wrong(answer: float, truth: float) -> Optional[str]:
        near = [
            (abs(answer - value) / abs(value), said)
            for value, said in cases()
            if value and abs(answer - value) <= rel * abs(value)
        ]
        if near:
            return min(near, key=lambda n: n[0])[1]
        if truth and any(abs(answer - truth * f) <= rel * abs(truth * f) for f in UNIT_FACTORS):
            return f"the model is right but the unit is not: the answer is in {unit}."
        return high if answer > truth else low

    return wrong


def worked(
    *,
    inputs: Callable[[], Dict[str, Any]],
    model: Callable[..., float],
    rel: float,
    unit: str,
    judge: Optional[Callable[[float, float], bool]] = None,
    **fields,
) -> Exercise:
    """An ``explain`` exercise whose answer is ``model(**inputs())``, judged within ``rel``.

    Args:
        inputs: () -> the model's inputs by name, from the results in use (and datasheets).
        model: the arithmetic, a function of the inputs by name.
        rel: the tolerance, a fraction of the truth: wide enough for the inputs rounded as printed.
        unit: the answer's unit ("microseconds"), for the parser's message.
        judge: replaces the tolerance (e.g. to accept a whole count too).
        **fields: the other `Exercise` fields (name, lesson, question, why, hints, wrong, ...).

    Returns:
        The `Exercise`, with ``right_answers`` the model fed its inputs rounded as printed.
    """
    fields.setdefault("leaks", lambda truth: worked_leaks(truth, percent=unit == "percent"))
    return Exercise(
        kind="explain",
        truth=lambda: float(model(**inputs())),
        parse=number(unit),
        judge=judge or within(rel),
        right_answers=lambda truth: [float(model(**{k: read_as_printed(v) for k, v in inputs().items()}))],
        **fields,
    )


# ---- datasheet figures -------------------------------------------------------------------------
def rate(bytes_per_s: float) -> str:
    """A bandwidth as the arithmetic uses it: ``3.35e12 B/s``.

    Args:
        bytes_per_s: the bandwidth, bytes per second.

    Returns:
        Three significant figures in e-notation, with its unit.
    """
    return f"{bytes_per_s:.3g}".replace("e+", "e") + " B/s"


def gpu_of(df) -> str:
    """The GPU that measured a result (its provenance).

    Args:
        df: a result, its provenance in ``attrs``.

    Returns:
        Its ``attrs['gpu']``; empty when it has none.
    """
    return str((getattr(df, "attrs", {}) or {}).get("gpu") or "")


def bandwidth(gpu: str) -> float:
    """``gpu``'s datasheet memory bandwidth in bytes per second.

    Args:
        gpu: a CUDA device name, e.g. ``NVIDIA H100 80GB HBM3``.

    Returns:
        Bytes per second; `Unsupported` when `labkit.ceilings` does not know the GPU.
    """
    c = ceilings.for_gpu(gpu)
    if c is None:
        raise Unsupported(
            "this exercise", f"no datasheet bandwidth is known for {gpu or 'this GPU'} (labkit.ceilings)"
        )
    return c.bandwidth_bytes_per_s


def bandwidth_given(name: str, **request) -> Callable[[], str]:
    """A ``given`` that names the datasheet bandwidth of the GPU that measured ``name(**request)``,
    or of the GPU in use when that result is not at hand (live: nothing is measured to ask).

    Args:
        name: the experiment whose result's GPU is named.
        request: its arguments.

    Returns:
        ``given()`` -> the sentence, bandwidth in TB/s and as `rate` writes it; `labkit.Unsupported`
        when `labkit.ceilings` does not know the GPU.
    """

    def given() -> str:
        df = result(name, at_hand_only=True, **request)
        gpu = gpu_of(df) if df is not None else _gpu_in_use()
        c = ceilings.for_gpu(gpu)
        bw = bandwidth(gpu)
        return (
            f"The datasheet memory bandwidth of the {c.gpu}: {bw / 1e12:.2f} TB/s = {rate(bw)} "
            "(labkit.ceilings)."
        )

    return given


def _gpu_in_use() -> str:
    if env.mode().live:
        return env.environment().gpu_name or ""
    return str(recordings.current().metadata.get("gpu") or "")
