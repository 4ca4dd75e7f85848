"""Short labels for cuDNN plans on charts; the full name goes in the hover.

A plan's name is its engine and its knobs (``eng62_k2=5_k13=1_k18=0_k25=1_k27=8_k28=1``): 41
characters that differ from the next plan's in one digit, unreadable as a row label. A chart
labels a plan ``eng62 #2`` (engine 62's second plan in the chart's order) and shows the full name
when the pointer is on it.
"""

from __future__ import annotations

import re
from typing import Iterable, List

#: a plan's full name: the engine, then its knobs
PLAN_NAME = re.compile(r"^(eng\d+)(?:_k\d+=-?\d+)*$")
#: the longest plan label a chart draws (characters)
PLAN_LABEL_CHARS = 12


def plan_labels(names: Iterable[str]) -> List[str]:
    """Short labels for plan names drawn together, one per name in the order given.

    A plan is labelled by its engine alone when the names hold one plan of that engine, else by
    its engine and its rank among that engine's plans in the order given (``eng62 #2``: put the
    fastest first and ``#1`` is the engine's fastest). A name that is not an engine's is cut to
    `PLAN_LABEL_CHARS` characters.

    Args:
        names: plan names, in the chart's order (repeats get the same label).

    Returns:
        The labels, each at most `PLAN_LABEL_CHARS` characters, distinct for distinct names.
    """
    names = [str(n) for n in names]
    distinct = list(dict.fromkeys(names))
    engine = {n: (m.group(1) if (m := PLAN_NAME.match(n)) else None) for n in distinct}
    plans_of: dict = {}
    for n in distinct:
        plans_of.setdefault(engine[n] or n, []).append(n)
    label = {}
    for n in distinct:
        if engine[n] is None:
            label[n] = n if len(n) <= PLAN_LABEL_CHARS else n[: PLAN_LABEL_CHARS - 1] + "…"
        else:
            mine = plans_of[engine[n]]
            label[n] = engine[n] if len(mine) == 1 else f"{engine[n]} #{mine.index(n) + 1}"
    clashes: dict = {}
    for n in distinct:  # two long names cut to the same label: numbered
        clashes.setdefault(label[n], []).append(n)
    for lab, same in clashes.items():
        for k, n in enumerate(same if len(same) > 1 else [], 1):
            label[n] = f"{lab[: PLAN_LABEL_CHARS - 4]}… #{k}"
    return [label[n] for n in names]
