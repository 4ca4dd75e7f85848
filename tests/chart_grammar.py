"""The chart grammar (STYLE.md, "Charts") as checks on plotly figure objects: what every chart a
lesson or a panel can draw must obey. Each check returns a list of violations (strings); an empty
list means the figure obeys.

* a bar's length is a quantity: no bar trace on a log value axis, and bar axes start at zero;
* one scale per chart: no axis overlaying another (no second y-axis);
* legends list only what is drawn: a trace shown in the legend has a value to show;
* every bar's value can be read: zero is drawn and labelled, distinct from not measured.

`axis_types` gives what a control move must keep the same: the type (linear, log, category) of
every axis.
"""

from __future__ import annotations

import math

#: plotly trace types whose length (or area) encodes a value from zero
BAR_TYPES = ("bar",)


def _layout(fig) -> dict:
    return fig.layout.to_plotly_json()


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
    for t in fig.to_plotly_json()["data"]:
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
    for t in fig.to_plotly_json()["data"]:
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
    for t in fig.to_plotly_json()["data"]:
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


def violations(fig) -> list:
    """Every rule above, for one figure."""
    return (
        bars_on_log_axes(fig)
        + bars_not_from_zero(fig)
        + secondary_axes(fig)
        + legend_entries_without_data(fig)
    )
