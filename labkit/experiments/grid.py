"""The lessons' recorded grid: every (experiment, arguments) call the lessons and their panels
use, recorded by ``python -m labkit record`` and measured ahead by ``python -m labkit fill``.

The grid: each lesson's base call plus one-factor-at-a-time sweeps around it, and small full
grids where a lesson compares categories (dtype x layout).
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

from .. import experiments
from ..errors import InvalidSpec
from . import SWEEP_VALUES, SWEEPS  # noqa: F401  (names callers know)
from .workspace_strategies import strategies_repeats  # noqa: F401

Call = Tuple[str, dict]


def grid(quick: bool = False) -> List[Call]:
    """Every (experiment, kwargs) call the lessons need, from each topic's ``recorded_calls``.

    The base calls come first, ``build_cost`` of the base before anything else (it is timed while the
    recording process has built nothing); then the variants.

    Args:
        quick: the base calls only.

    Returns:
        The calls, in recording order.
    """
    base = experiments.recorded_calls(quick=True)
    out = sorted(base, key=lambda call: call[0] != "build_cost")  # stable: build_cost first
    if not quick:
        out += [c for c in experiments.recorded_calls() if c not in base]
    return out


def calls(quick: bool = False, only: Optional[Iterable[str]] = None) -> List[Call]:
    """The grid's calls, of some experiments only.

    Args:
        quick: the base calls only.
        only: experiment names; None for all.

    Returns:
        The calls, in `grid`'s order; `InvalidSpec` for a name that is not an experiment.
    """
    out = grid(quick)
    if only:
        unknown = [o for o in only if o not in experiments.registry()]
        if unknown:
            raise InvalidSpec(
                "only", unknown, f"must name experiments: {', '.join(sorted(experiments.registry()))}"
            )
        out = [c for c in out if c[0] in only]
    return out
