"""The chart grammar (STYLE.md, "Charts") as checks on plotly figure objects: what every chart a
lesson or a panel can draw must obey. Each check returns a list of violations (strings); an empty
list means the figure obeys.

* a bar's length is a quantity: no bar trace on a log value axis, and bar axes start at zero;
* one scale per chart: no axis overlaying another (no second y-axis);
* legends list only what is drawn: a trace shown in the legend has a value to show;
* every bar's value can be read: zero is drawn and labelled, distinct from not measured;
* a label on a bar or a point is written in its axis's unit (no "10.16 ms" on a us axis), unless
  it is too small to read there: then in a smaller unit, "131 B", never "0.00012 MiB";
* log axes are ticked in plain decimals (no "10<sup>2</sup>"), every tick labelled by labkit;
* a point's label is not drawn across its own whisker (an error bar running through the text);
* no label or tick spells out a cuDNN plan's full name (``eng62_k2=5_k13=1...``): charts show
  `labkit.draw.names.plan_labels` and give the full name on hover.

`axis_types` and `axis_units` give what a control move must keep the same: the type (linear, log,
category) and the unit of every axis.
"""

from __future__ import annotations

import math
import re

#: plotly trace types whose length (or area) encodes a value from zero
BAR_TYPES = ("bar",)


def _json(fig) -> dict:
    """The figure as plotly's JSON (``data`` and ``layout``); a dict given is taken as that JSON
    already (`violations` converts a figure once for all its checks)."""
    return fig if isinstance(fig, dict) else fig.to_plotly_json()


def _layout(fig) -> dict:
    return fig["layout"] if isinstance(fig, dict) else fig.layout.to_plotly_json()


def _axis_name(ref: str, letter: str) -> str:
    """'y2' -> 'yaxis2'; None/'' -> 'yaxis'."""
    ref = ref or letter
    return f"{letter}axis{ref[1:]}"


def _values(trace, key):
    v = trace.get(key)
    if v is None:
        return []
    if isinstance(v, dict) and "bdata" in v:  # plotly's typed-array spec
        import base64

        import numpy as np

        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        return list(arr.reshape(v["shape"]) if "shape" in v else arr)
    try:
        return list(v)
    except TypeError:
        return [v]


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def value_axis(trace: dict) -> tuple:
    """(letter, axis name) of the axis a bar's length is measured on."""
    horizontal = trace.get("orientation") == "h"
    letter = "x" if horizontal else "y"
    return letter, _axis_name(trace.get(f"{letter}axis"), letter)


def bars_on_log_axes(fig) -> list:
    lay = _layout(fig)
    out = []
    for t in _json(fig)["data"]:
        if t.get("type") not in BAR_TYPES:
            continue
        _, axis = value_axis(t)
        if (lay.get(axis) or {}).get("type") == "log":
            out.append(f"bar trace {t.get('name')!r} on log axis {axis}")
    return out


def bars_not_from_zero(fig) -> list:
    """A bar axis with an explicit range that does not include zero."""
    lay = _layout(fig)
    out = []
    for t in _json(fig)["data"]:
        if t.get("type") not in BAR_TYPES or t.get("base") is not None:
            continue
        _, axis = value_axis(t)
        rng = (lay.get(axis) or {}).get("range")
        if rng and all(_finite(r) for r in rng) and not (min(rng) <= 0 <= max(rng)):
            out.append(f"bar trace {t.get('name')!r}: axis {axis} range {rng} leaves out zero")
    return out


def secondary_axes(fig) -> list:
    lay = _layout(fig)
    return [
        f"{k} overlays {v['overlaying']}"
        for k, v in lay.items()
        if isinstance(v, dict) and v.get("overlaying")
    ]


def legend_entries_without_data(fig) -> list:
    """Traces listed in the legend with no value drawn (all missing, or bars all zero with no label)."""
    lay = _layout(fig)
    if lay.get("showlegend") is False:
        return []
    out = []
    for t in _json(fig)["data"]:
        if t.get("showlegend") is False or not t.get("name") or t.get("visible") is False:
            continue
        if t.get("type") in ("bar", "scatter", "box"):
            key = "x" if t.get("orientation") == "h" else "y"
            vals = [v for v in _values(t, key) if _finite(v)]
            if not vals:
                out.append(f"legend entry {t.get('name')!r} has nothing drawn")
            elif t.get("type") == "bar" and all(float(v) == 0 for v in vals) and not _values(t, "text"):
                out.append(f"legend entry {t.get('name')!r}: every bar is zero and none is labelled")
    return out


def axis_types(fig) -> dict:
    """axis name -> its type ('-' when plotly decides): what a control move must not change."""
    lay = _layout(fig)
    return {k: (v or {}).get("type", "-") for k, v in lay.items() if k.startswith(("xaxis", "yaxis"))}


#: unit -> what it measures (the units a label or an axis title may name)
UNIT_KINDS = {
    "us": "time",
    "ms": "time",
    "s": "time",
    "B": "size",
    "KiB": "size",
    "MiB": "size",
    "GiB": "size",
}
#: a number with a unit in a label: "10.16 ms", "856.1 KiB", "0 B"
QUANTITY = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)? ?(us|ms|s|B|KiB|MiB|GiB)\b")
#: an axis title's unit: the first word in its parentheses, "GPU time (us, log)" -> us
TITLE_UNIT = re.compile(r"\((us|ms|s|B|KiB|MiB|GiB)[,)]")


def axis_unit(lay: dict, axis: str):
    """The unit an axis's title names (None: it names none); "microseconds from ..." is us."""
    title = ((lay.get(axis) or {}).get("title") or {}).get("text") or ""
    m = TITLE_UNIT.search(title)
    if m is None and re.match(r"microseconds\b", title):
        return "us"
    return m.group(1) if m else None


def axis_units(fig) -> dict:
    """axis name -> the unit its title names, for the axes whose title names one."""
    lay = _layout(fig)
    units = {k: axis_unit(lay, k) for k in lay if k.startswith(("xaxis", "yaxis"))}
    return {k: u for k, u in units.items() if u}


def _texts(trace) -> list:
    if trace.get("type") == "scatter" and "text" not in str(trace.get("mode", "")):
        return []  # text for the hover only
    return [str(t) for t in _values(trace, "text") if t is not None]


#: how many of the smallest unit of its kind one of a unit is (B, us)
UNIT_SIZES = {"us": 1.0, "ms": 1e3, "s": 1e6, "B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}
#: a label's number under this (not zero) is too small to read in its unit
READABLE = 0.01


def _amount(match) -> float:
    return float(match.group(0)[: match.start(1) - match.start(0)].replace(",", "").strip())


def _too_small_for(match, unit: str) -> bool:
    """The quantity ``match`` is, in ``unit``, not zero and under `READABLE`."""
    v = abs(_amount(match)) * UNIT_SIZES[match.group(1)] / UNIT_SIZES[unit]
    return 0 < v < READABLE


def labels_in_other_units(fig) -> list:
    """A bar's or a point's label with a quantity of its axis's kind (a time on a time axis, a size
    on a size axis) in another unit than the axis title names, unless it is too small to read in
    the axis's unit and written in a smaller one."""
    lay = _layout(fig)
    out = []
    for t in _json(fig)["data"]:
        texts = _texts(t)
        for letter in ("x", "y"):
            unit = axis_unit(lay, _axis_name(t.get(f"{letter}axis"), letter))
            bad = [
                m.group(0)
                for text in texts
                for m in QUANTITY.finditer(text)
                if unit
                and UNIT_KINDS[m.group(1)] == UNIT_KINDS[unit]
                and m.group(1) != unit
                and not (UNIT_SIZES[m.group(1)] < UNIT_SIZES[unit] and _too_small_for(m, unit))
            ]
            if bad:
                out.append(
                    f"label in another unit than its axis ({unit}): trace {t.get('name')!r}: {bad[0]!r}"
                )
    return out


def labels_too_small_to_read(fig) -> list:
    """A label whose number, not zero, is under `READABLE` of its unit where a smaller unit of the
    same kind would read it ("0.00012 MiB" for 131 B)."""
    out = []
    for t in _json(fig)["data"]:
        for text in _texts(t):
            for m in QUANTITY.finditer(text):
                unit = m.group(1)
                smaller = [
                    u
                    for u, k in UNIT_KINDS.items()
                    if k == UNIT_KINDS[unit] and UNIT_SIZES[u] < UNIT_SIZES[unit]
                ]
                if smaller and _too_small_for(m, unit):
                    out.append(
                        f"label too small to read in its unit: trace {t.get('name')!r}: {m.group(0)!r}"
                    )
                    break
    return out[:1]


#: a log axis's tick label in the workbook's style: "0.3", "20", "1,000", or "1e-6"
PLAIN_TICK = re.compile(r"^(\d{1,3}(,\d{3})*|0\.\d+|\de-?\d+)$")


def log_ticks_not_plain(fig) -> list:
    """A log axis whose ticks plotly labels itself, or labelled otherwise than in plain decimals."""
    lay = _layout(fig)
    out = []
    for name, axis in lay.items():
        if not name.startswith(("xaxis", "yaxis")) or (axis or {}).get("type") != "log":
            continue
        text = axis.get("ticktext")
        if axis.get("tickvals") is not None and text is None:
            out.append(f"log axis {name}: ticks labelled by plotly")
        bad = [str(t) for t in text or [] if not PLAIN_TICK.match(str(t))]
        if bad:
            out.append(f"log axis {name}: tick {bad[0]!r} not a plain decimal")
    return out


#: a cuDNN plan's full name: an engine and its knobs
PLAN_NAME = re.compile(r"eng\d+_k\d+=")


def shown_texts(fig) -> list:
    """Every text a figure draws on its axes and points: tick labels (labkit's, or a category
    axis's values) and the labels of bars and points."""
    lay = _layout(fig)
    shown = []
    for name, axis in lay.items():
        if name.startswith(("xaxis", "yaxis")):
            shown += [str(t) for t in (axis or {}).get("ticktext") or []]
    for t in _json(fig)["data"]:
        shown += _texts(t)
        for letter in ("x", "y"):
            axis = lay.get(_axis_name(t.get(f"{letter}axis"), letter)) or {}
            if axis.get("ticktext") is None and axis.get("showticklabels") is not False:
                shown += [str(v) for v in _values(t, letter) if isinstance(v, str)]
    return shown


def full_plan_names(fig) -> list:
    """A tick or a label that spells out a plan's full name (it belongs in the hover)."""
    return [f"full plan name on the chart: {s[:50]!r}" for s in shown_texts(fig) if PLAN_NAME.search(s)][:1]


def _whisker(trace: dict, key: str, n: int) -> tuple:
    """(lengths beyond, lengths before) each point of ``trace``'s error bar ``key`` reaches; zeros
    where it draws none."""
    e = trace.get(key) or {}
    if not e or e.get("visible") is False:
        return [0.0] * n, [0.0] * n
    if e.get("type", "data") == "data":
        plus = [float(v) if _finite(v) else 0.0 for v in _values(e, "array")] or [0.0] * n
        given = _values(e, "arrayminus")
        minus = [float(v) if _finite(v) else 0.0 for v in given] if e.get("symmetric") is False else plus
    else:  # a constant or a percentage: every point has one
        plus = minus = [1.0] * n
    return (plus + [0.0] * n)[:n], (minus + [0.0] * n)[:n]


def labels_on_whiskers(fig) -> list:
    """A point's label drawn across its own error bar: beside the point ("middle right") where the
    whisker runs right, above it where it runs up. The whisker strikes the label through."""
    out = []
    for t in _json(fig)["data"]:
        texts = _values(t, "text") if "text" in str(t.get("mode", "")) else []
        if not any(str(x or "").strip() for x in texts):
            continue
        n = len(texts)
        where = t.get("textposition") or "middle center"
        where = list(where) if isinstance(where, (list, tuple)) else [where] * n
        right, left = _whisker(t, "error_x", n)
        up, down = _whisker(t, "error_y", n)
        for i, text in enumerate(texts):
            vertical, horizontal = (where[i] or "middle center").split()
            struck = (
                vertical == "middle"
                and {"right": right[i], "left": left[i], "center": right[i] + left[i]}[horizontal]
            ) or (
                horizontal == "center"
                and {"top": up[i], "bottom": down[i], "middle": up[i] + down[i]}[vertical]
            )
            if struck and str(text or "").strip():
                out.append(
                    f"label on its whisker: trace {t.get('name')!r}: {str(text).strip()!r} ({where[i]})"
                )
                break
    return out


def violations(fig) -> list:
    """Every rule above, for one figure."""
    fig = _json(fig)
    return (
        bars_on_log_axes(fig)
        + bars_not_from_zero(fig)
        + secondary_axes(fig)
        + legend_entries_without_data(fig)
        + labels_in_other_units(fig)
        + labels_too_small_to_read(fig)
        + log_ticks_not_plain(fig)
        + full_plan_names(fig)
        + labels_on_whiskers(fig)
    )
