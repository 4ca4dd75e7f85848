"""Units on charts: a value written in its axis's unit, and the one style of a log axis's ticks.

A label on a bar or a point is written in the unit of the axis it is measured on, so it reads off
the axis as it is: ``10,160 us`` on a microsecond axis (never ``10.16 ms``), ``0.84 MiB`` on a MiB
axis (never ``856.1 KiB``). Times reach a chart in microseconds and sizes in bytes; sizes on axes
are in MiB (`SIZE_AXIS`) whatever their range, so no control switches a chart's unit. A value too
small to read off the axis (under `READABLE` of its unit, but not zero) sits at the axis's zero:
its label is written in the largest smaller unit it fills, ``131 B``, never ``0.00012 MiB``.
A sum or a difference that a sentence writes beside its terms is made of the terms as written
(`as_written`), so that it adds up as read.

Log axes are ticked in plain decimals (``0.3``, ``20``, ``1,000``, ``10,000``), never powers of
ten; only values under 0.001 or from 10 million on are written ``1e-6``, as the error labels are.
`log_ticks` and `log_axis` give a log axis its ticks and range (`log_axis_with_room` leaves room
for a label beyond the highest value), `log_if_wide` says when an axis
is log, and `nice_step` picks a linear axis's round step.
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
#: the smallest value, in the axis's unit, a label writes in that unit (below it, in a smaller one)
READABLE = 0.01
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


def readable_unit(value, unit: str) -> str:
    """The unit a label of ``value`` on an axis in ``unit`` is written in: ``unit`` itself, unless the
    value is not zero and under `READABLE` of it; then the largest smaller unit of the same kind in
    which it reads 1 or more (the smallest one at least).

    Args:
        value: microseconds for a time unit, bytes for a size unit.
        unit: the axis's unit, a key of `UNITS`.

    Returns:
        A key of `UNITS`.
    """
    v = scaled(value, unit)
    if v is None or v == 0 or abs(v) >= READABLE:
        return unit
    kind, size = UNITS[unit]
    smaller = sorted((f, u) for u, (k, f) in UNITS.items() if k == kind and f < size)
    fits = [u for f, u in smaller if abs(float(value)) >= f]
    return fits[-1] if fits else (smaller[0][1] if smaller else unit)


def in_unit(value, unit: str) -> str:
    """``value`` written in ``unit``, the unit of the axis it is drawn on: ``in_unit(10160, "us")``
    is ``10,160 us``, ``in_unit(876646, "MiB")`` is ``0.84 MiB``, zero ``0 MiB``; a value too small to
    read there in a smaller unit (`readable_unit`): ``in_unit(131, "MiB")`` is ``131 B``; '-' when
    missing.

    Args:
        value: microseconds for a time unit, bytes for a size unit.
        unit: the axis's unit, a key of `UNITS`.

    Returns:
        The number (`number`) and the unit.
    """
    unit = readable_unit(value, unit)
    v = scaled(value, unit)
    return "-" if v is None else f"{number(v, whole=unit == 'B')} {unit}"


def as_written(value, fmt) -> float:
    """``value`` as ``fmt`` writes it, read back: a sum or a difference that a sentence writes beside
    its terms is made of the terms as written, so that it adds up as read (90.2 us less 25.3 us is
    64.9 us, though the unrounded times are 64.98 us apart).

    Args:
        value: microseconds or bytes (seconds for a formatter that takes seconds), not missing.
        fmt: what writes it as ``<number> <unit>``, the unit a key of `UNITS`: `us_text`,
            `size_text`, ``labkit.draw.plots.fmt_us``, ``labkit.draw.plots.fmt_bytes``.

    Returns:
        The number written, in microseconds for a time unit, bytes for a size unit.
    """
    number, unit = fmt(value).rsplit(" ", 1)
    return float(number.replace(",", "")) * UNITS[unit][1]


def us_text(us) -> str:
    """A time in prose as a microsecond axis shows it: ``10,161 us``, never ``10.16 ms``.

    Args:
        us: microseconds; None or NaN for a missing value.

    Returns:
        `in_unit` in us.
    """
    return in_unit(us, "us")


def size_text(n) -> str:
    """A size in prose as a chart's size axis shows it: ``2,378 MiB``, never ``2.32 GiB``; ``131 B``
    where it is too small to read in MiB.

    Args:
        n: bytes; None or NaN for a missing value.

    Returns:
        `in_unit` in `SIZE_AXIS`.
    """
    return in_unit(n, SIZE_AXIS)


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


def _nan(x) -> bool:
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def nice_step(raw: float) -> float:
    """The 1-2-5 step at or above ``raw`` (linear axis ticks at round values: 2x, 4x, 6x, not 1.9x, 3.9x).

    Args:
        raw: the step the range would need (e.g. its top over the ticks wanted), in the axis's unit.

    Returns:
        1, 2 or 5 times a power of ten; 1.0 for a raw step that is zero, negative or NaN.
    """
    if not raw or raw <= 0 or _nan(raw):
        return 1.0
    e = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * 10.0**e >= raw - 1e-12:
            return m * 10.0**e
    return 10.0 ** (e + 1)


def log_ticks(values, fmt=None, max_ticks: int = 10) -> dict:
    """Ticks for a log axis over ``values``, labelled in full.

    Steps are 1-2-5 (powers of ten alone over more than three decades). When the lowest tick is far
    above the lowest value, a tick at or just under it is added.

    Args:
        values: the values drawn; missing and non-positive ones are skipped.
        fmt: formats a tick value; default `tick_text` (plain decimals, the workbook's one style).
        max_ticks: at most that many ticks (coarser steps, then every other decade): a narrow subplot
            asks for fewer, so its labels do not run together.

    Returns:
        The axis's ``tickmode``, ``tickvals`` and ``ticktext``; empty when no value is positive.
    """
    v = [float(x) for x in values if x is not None and not _nan(x) and float(x) > 0]
    if not v:
        return {}
    lo, hi = min(v), max(v)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    first = (1,) if e1 - e0 > 3 else (1, 2, 5) if e1 - e0 > 1 else (1, 2, 3, 5, 7)
    ladder = [s for s in ((1, 2, 3, 5, 7), (1, 2, 5), (1, 3), (1,)) if len(s) <= len(first)]
    # a labelled tick at or just under the lowest value when the lowest tick is far above it:
    # without it a wide range can start its labels far above the lowest points (e.g. 100 us on
    # an axis whose best plans sit near 25 us); one close above it needs no neighbour (0.5 beside 1)
    below = [m * 10.0**e for e in range(e0 - 1, e1 + 1) for m in (1, 2, 5) if lo / 2.51 <= m * 10.0**e <= lo]

    def with_floor(ticks):
        return sorted(set(ticks) | {max(below)}) if below and (not ticks or min(ticks) > 2.5 * lo) else ticks

    for steps in ladder:
        ticks = with_floor(
            [m * 10.0**e for e in range(e0, e1 + 1) for m in steps if lo / 2.2 <= m * 10.0**e <= hi * 2.2]
        )
        if len(ticks) <= max_ticks:
            break
    else:  # every other (or third) decade from the lowest: evenly spaced, one near the lowest value
        decades = [10.0**e for e in range(e0, e1 + 1) if lo / 2.2 <= 10.0**e <= hi * 2.2]
        ticks = decades[::2] if len(decades[::2]) <= max_ticks else decades[::3]
    return dict(tickmode="array", tickvals=ticks, ticktext=[(fmt or tick_text)(t) for t in ticks])


def log_axis(values, fmt=None, max_ticks: int = 10) -> dict:
    """`log_ticks` plus a range that shows the lowest tick and some room above the highest value.

    The lowest points so always have a labelled tick under them.

    Args:
        values: the values drawn.
        fmt: formats a tick value (`log_ticks`).
        max_ticks: at most that many ticks.

    Returns:
        The axis's tick properties and ``range`` (in log10 units); empty when no value is positive.
    """
    t = log_ticks(values, fmt, max_ticks)
    v = [float(x) for x in values if x is not None and not _nan(x) and float(x) > 0]
    if not t or not v:
        return t
    lo, hi = math.log10(min(min(t["tickvals"]), min(v))), math.log10(max(v))
    pad = max(0.07, 0.05 * (hi - lo))  # room for a marker's half at either end
    return dict(t, range=[lo - pad, hi + max(pad, 0.1)])


def log_axis_with_room(values, *, room: float, max_ticks: int = 10) -> dict:
    """A log axis (`log_axis`) with room beyond the highest value for its mark's label.

    Args:
        values: the values drawn.
        room: the room added above the highest value, as a share of the axis's span in decades (at
            least a quarter of a decade).
        max_ticks: at most that many ticks.

    Returns:
        The axis's ``type`` ("log"), tick properties and ``range``; only the type when no value is
        positive.
    """
    axis = log_axis(values, max_ticks=max_ticks)
    if "range" not in axis:
        return dict(type="log")
    lo, hi = axis["range"]
    return dict(axis, type="log", range=[lo, hi + max(0.25, room * (hi - lo))])


def log_if_wide(values, ratio: float = 30.0) -> str:
    """The axis type for some values: log when the largest is more than ``ratio`` times the smallest.

    Args:
        values: the values drawn (None, NaN and values not above 0 are left out).
        ratio: the spread from which the axis is log.

    Returns:
        "log" or "linear" (linear where no value is positive).
    """
    v = [float(x) for x in values if x is not None and not _nan(x) and float(x) > 0]
    return "log" if v and max(v) / min(v) > ratio else "linear"
