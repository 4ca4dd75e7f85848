"""Lesson 04's calls in the recorded grid: what its panel offers in recorded mode."""

from __future__ import annotations

from ..core import BASE, variants


def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    Args:
        quick: the base call only.

    Returns:
        (experiment, kwargs) pairs.
    """
    calls = [("fusion", dict(spec=BASE))]
    if quick:
        return calls
    calls += [("fusion", dict(spec=s)) for s in variants()[1:] if s.N <= 64 and s.H <= 56]
    calls.append(("fusion", dict(spec=BASE.replace(dtype="fp32"))))
    return calls
