"""When autotune stops timing a plan, and which plans it times again before it picks, as numbers
the text a learner reads can quote: no CuPy here, so the lessons' and the report's sentences import
them on any machine (`autotune` times by them)."""

from __future__ import annotations

#: a plan is not captured when one eager call is over this many times the fastest eager call so far
EAGER_STOP_RATIO = 6.0
#: plans within this fraction of the best are timed again, in turns, before the pick
#: (`autotune.FINAL_ROUNDS` rounds, at most `autotune.FINAL_PLANS` plans)
FINAL_MARGIN = 0.03


def eager_stop_text() -> str:
    """`EAGER_STOP_RATIO` as a sentence says it.

    Returns:
        ``"6x"`` for 6.0 (``"6.5x"`` for 6.5).
    """
    return f"{EAGER_STOP_RATIO:g}x"


def final_margin_text() -> str:
    """`FINAL_MARGIN` as a sentence says it.

    Returns:
        ``"3%"`` for 0.03 (``"2.5%"`` for 0.025).
    """
    return f"{FINAL_MARGIN * 100:g}%"
