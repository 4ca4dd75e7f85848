"""Units on charts: a value written in its axis's unit, and the one style of a log axis's ticks.

A label on a bar or a point is written in the unit of the axis it is measured on, so it reads off
the axis as it is: ``10,160 us`` on a microsecond axis (never ``10.16 ms``), ``0.84 MiB`` on a MiB
axis (never ``856.1 KiB``). Times reach a chart in microseconds and sizes in bytes; sizes on axes
are in MiB (`SIZE_AXIS`) whatever their range, so no control switches a chart's unit.

Log axes are ticked in plain decimals (``0.3``, ``20``, ``1,000``, ``10,000``), never powers of
ten; only values under 0.001 or from 10 million on are written ``1e-6``, as the error labels are.
"""

from __future__ import annotations

import math

#: unit -> (what it measures, how many microseconds or bytes one of it is)
UNITS = {
    "us": ("time", 1.0),
    "ms": ("time", 1e3),
    "s": ("time", 1e6),
    "B": ("size", 1.0),
    "KiB": ("size", 2.0**10),
    "MiB": ("size", 2.0**20),
    "GiB": ("size", 2.0**30),
}
#: the unit of every axis of sizes (bytes held, workspace asked, traffic modelled)
SIZE_AXIS = "MiB"
#: a linear axis's ticks in the labels' style: 10,000, never plotly's 10k
PLAIN_TICKS = dict(exponentformat="none", separatethousands=True)
#: a log tick is written in decimals from this value up to `TICK_DECIMAL_MAX` (exclusive)
TICK_DECIMAL_MIN, TICK_DECIMAL_MAX = 1e-3, 1e7


def _missing(value) -> bool:
    try:
        return value is None or math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def scaled(value, unit: str):
    """``value`` (microseconds for a time unit, bytes for a size unit) in ``unit``; None when missing.

    Args:
        value: the value in microseconds or bytes.
        unit: a key of `UNITS`.

    Returns:
        A float, or None.
    """
    return None if _missing(value) else float(value) / UNITS[unit][1]


def number(x: float, *, whole: bool = False) -> str:
    """A number for a label: ``10,160``, ``24.6``, ``0.84``, ``0.00026``; ``whole``: no decimals.

    Args:
        x: the number.
        whole: write it without decimals (counts of bytes).

    Returns:
        Thousands separated from 1,000 on, one decimal from 1 on, two significant digits below 1.
    """
    a = abs(x)
    if whole or a >= 1000:
        return f"{x:,.0f}"
    if a >= 1 or a == 0:
        return "0" if a == 0 else f"{x:.1f}"
    return f"{x:.{1 - math.floor(math.log10(a))}f}"


def in_unit(value, unit: str) -> str:
    """``value`` written in ``unit``, the unit of the axis it is drawn on: ``in_unit(10160, "us")``
    is ``10,160 us``, ``in_unit(876646, "MiB")`` is ``0.84 MiB``, zero ``0 MiB``; '-' when missing.

    Args:
        value: microseconds for a time unit, bytes for a size unit.
        unit: a key of `UNITS`.

    Returns:
        The number (`number`) and the unit.
    """
    v = scaled(value, unit)
    return "-" if v is None else f"{number(v, whole=unit == 'B')} {unit}"


def tick_text(t: float) -> str:
    """A log axis's tick label: ``0.3``, ``20``, ``1,000``; ``1e-6`` outside `TICK_DECIMAL_MIN` to
    `TICK_DECIMAL_MAX`.

    Args:
        t: the tick's value (positive).

    Returns:
        The label.
    """
    if TICK_DECIMAL_MIN <= t < TICK_DECIMAL_MAX:
        return f"{t:,.0f}" if t >= 1 else f"{t:.{-math.floor(math.log10(t) + 1e-9)}f}".rstrip("0")
    mant, exp = f"{t:.0e}".split("e")
    return f"{mant}e{int(exp)}"
