"""When autotune stops timing a plan, as numbers the text a learner reads can quote: no CuPy here,
so the report's sentences import them on any machine (`autotune` times by them)."""

from __future__ import annotations

#: a plan is not captured when one eager call is over this many times the fastest eager call so far
EAGER_STOP_RATIO = 6.0


def eager_stop_text() -> str:
    """`EAGER_STOP_RATIO` as a sentence says it.

    Returns:
        ``"6x"`` for 6.0 (``"6.5x"`` for 6.5).
    """
    return f"{EAGER_STOP_RATIO:g}x"
