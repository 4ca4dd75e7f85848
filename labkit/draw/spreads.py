"""Timings read against their spread: two rows of GPU times whose 10th-90th percentile ranges share a
time are not ranked by their medians. Microseconds."""

from __future__ import annotations

from .plots import num


def spreads_overlap(a, b) -> bool:
    """Whether two rows' 10th-90th percentile ranges of GPU time share a time (then their medians
    are not ranked).

    Args:
        a: a row (``gpu_us_p10``, ``gpu_us_p90``: microseconds).
        b: another row.

    Returns:
        True when the ranges share a time; False when either row lacks its range.
    """
    ends = [num(getattr(r, c, None)) for r in (a, b) for c in ("gpu_us_p10", "gpu_us_p90")]
    if None in ends:
        return False
    a10, a90, b10, b90 = ends
    return a10 <= b90 and b10 <= a90
