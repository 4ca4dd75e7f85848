"""Text the lessons show: Markdown strings, small tables and where a result's numbers come from.

Summaries (in each topic module of `labkit.experiments`) and the lesson helpers (`labkit.session.lessons`)
write with these."""

from __future__ import annotations

import html

from ..env import gpu_label


class Text(str):
    """A string shown as Markdown in a notebook (and as itself anywhere else)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def table(df, columns, names=None) -> Text:
    """A few columns of a DataFrame as a Markdown table, sizes and times formatted.

    Args:
        df: the rows to show.
        columns: the columns to show, in order; ``*_bytes`` and ``*_us`` columns are formatted as
            sizes and times.
        names: the header of each column; default ``columns``.

    Returns:
        The table as `Text` (shown as Markdown in a notebook).
    """
    # plotly: not on a first cell's path (`labkit.session.first_use.OnFirstUse`)
    from .plots import fmt_bytes, fmt_us  # heavy: plotly, where a chart is drawn

    names = names or columns
    rows = ["| " + " | ".join(names) + " |", "|" + " --- |" * len(columns)]
    for _, r in df.iterrows():
        cells = []
        for c in columns:
            v = r.get(c)
            if c.endswith("_bytes"):
                cells.append(fmt_bytes(v))
            elif c.endswith("_us"):
                cells.append(fmt_us(v))
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(html.escape(str(v)))
        rows.append("| " + " | ".join(cells) + " |")
    return Text("\n".join(rows))


def where(df) -> str:
    """Where a result's numbers come from, for prose: e.g. "recorded on H100 SXM".

    Args:
        df: a result, with ``mode`` and ``gpu`` in its ``attrs``.

    Returns:
        "<mode> on <gpu>", the GPU as `labkit.env.gpu_label` names it.
    """
    a = df.attrs
    return f"{a.get('mode')} on {gpu_label(a.get('gpu'))}"


def listed(items) -> str:
    """Items as a sentence lists them: ``a``, ``a and b``, ``a, b and c``.

    Args:
        items: the items, in order (each written with `str`); at least one.

    Returns:
        The items, commas between them and "and" before the last.
    """
    items = [str(i) for i in items]
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} and {items[-1]}"


def ratio_amount(ratio: float) -> str:
    """How much one time exceeds another, for a sentence: ``8%`` under 1.2x, else ``9.1x``.

    Args:
        ratio: the longer time over the shorter (1 or more).

    Returns:
        The excess as a whole percentage under 1.2, else the ratio to 0.1; the caller says which
        way (``slower``, ``faster``).
    """
    return f"{ratio - 1:.0%}" if ratio < 1.2 else f"{ratio:.1f}x"


def counted(count, one: str, many: str = "") -> str:
    """A count and its noun, agreeing: ``1 call``, ``3 calls``, ``0 strategies``.

    Args:
        count: how many (a whole number; a float such as ``3.0`` is read as one).
        one: the noun for one (``"call"``, ``"distinct layer"``).
        many: the noun for any other count; default ``one`` with an ``s``.

    Returns:
        The count in digits, a space, and the noun that agrees with it.
    """
    n = int(count)
    return f"{n} {one if n == 1 else many or f'{one}s'}"
