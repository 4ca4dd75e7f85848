"""NVTX ranges around labkit's work (``nvtx`` package, optional): run a notebook under Nsight
Systems (``nsys profile --trace=cuda,nvtx jupyter lab``, or ``nsys launch``) and its timeline shows
labkit's names (experiment, plan being timed, strategy pass, build) over the kernels they launch.

Ranges are put around whole steps only (an experiment, one plan's timing, one strategy's pass,
one plan build), never around a timed call: a range costs about a microsecond of host time.
Without the ``nvtx`` package every range is a no-op.
"""

from __future__ import annotations

import contextlib
import functools

#: the NVTX domain labkit's ranges are in (Nsight Systems groups them under this name)
DOMAIN = "labkit"
#: range colours by what they mark
COLORS = {"experiment": "blue", "plan": "green", "strategy": "orange", "build": "purple", "trace": "red"}


@functools.lru_cache(maxsize=1)
def _nvtx():
    try:
        import nvtx  # heavy: NVTX, an optional extra
    except Exception:  # noqa: BLE001  (not installed, or its library did not load)
        return None
    return nvtx


def enabled() -> bool:
    """Whether ranges are emitted (the ``nvtx`` package is importable).

    Returns:
        True when they are.
    """
    return _nvtx() is not None


def annotate(message: str, category: str = "experiment"):
    """An NVTX range named ``message`` in labkit's domain; nothing without the nvtx package.

    Args:
        message: the range's name.
        category: its category, which picks its colour (`COLORS`).

    Returns:
        A context manager.
    """
    nv = _nvtx()
    if nv is None:
        return contextlib.nullcontext()
    return nv.annotate(message, color=COLORS.get(category, "gray"), domain=DOMAIN, category=category)
