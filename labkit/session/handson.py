"""Hands-on cells: code the learner writes against the real API (CuPy, the cuDNN frontend, a
workspace strategy of their own), run on the GPU.

A lesson marks such a cell with the cell magic ``%%handson <name>`` (registered by the lesson's
banner). Live, the cell runs in the notebook's namespace like any other. Recorded, it is skipped
and says so, with what it needs. With ``LABKIT_HANDSON=reference`` (the live notebook tests), the
hands-on's reference solution runs in the cell's place, so every later cell finds what a learner
who solved it would have made.

Reference solutions are registered with `reference`; a lesson's topic module holds its own as
data (``HANDS_ON = {name: (source, needs)}`` beside its experiments), registered by `register_topics`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Dict

from ..errors import InvalidSpec


@dataclass(frozen=True)
class HandsOn:
    """A hands-on cell's name, lesson, what it needs and its reference solution (source)."""

    name: str
    lesson: str
    needs: str
    source: str


#: name -> its hands-on (see `reference`)
HANDS_ON: Dict[str, HandsOn] = {}


def reference(name: str, lesson: str, source: str, needs: str = "a CUDA GPU (live mode)") -> HandsOn:
    """Register the reference solution of hands-on cell ``name``.

    Args:
        name: what the cell's magic line names (``%%handson name``).
        lesson: the lesson's number.
        source: Python source that does what the cell asks.
        needs: what the cell needs, in a few words.

    Returns:
        The registered `HandsOn`.
    """
    h = HANDS_ON[name] = HandsOn(name, lesson, needs, source)
    return h


def register_topics() -> int:
    """Register the reference solution of every topic's hands-on cells (`labkit.experiments.hands_on`).
    Returns how many."""
    from .. import experiments

    found = experiments.hands_on()
    for name, (lesson, source, needs) in found.items():
        reference(name, lesson, source, needs)
    return len(found)


def run(name: str, cell: str, namespace: dict) -> bool:
    """Run a hands-on cell: live, ``cell`` (or the reference with ``LABKIT_HANDSON=reference``)
    in ``namespace``; recorded, nothing. Returns whether it ran."""
    from .. import env

    if name not in HANDS_ON:
        register_topics()
    if name not in HANDS_ON:
        raise InvalidSpec(
            "hands-on", name, f"must be one of {', '.join(sorted(HANDS_ON)) or '(none registered)'}"
        )
    h = HANDS_ON[name]
    m = env.mode()
    if not m.live:
        from ..experiments.checking import wrapped

        print(
            wrapped(
                f"skipped: this hands-on cell runs on {h.needs}; labkit is in recorded mode ({m.reason})."
            )
        )
        return False
    source = h.source if os.environ.get("LABKIT_HANDSON", "").strip().lower() == "reference" else cell
    exec(compile(source, f"<hands-on {name}>", "exec"), namespace)  # noqa: S102 - the learner's own cell
    return True


def register_magic() -> bool:
    """Make ``%%handson`` available in this IPython kernel (no-op outside IPython). Returns
    whether it is registered."""
    if "IPython" not in sys.modules:  # not in IPython: no kernel or shell has imported it
        return False
    from IPython import get_ipython

    ip = get_ipython()
    if ip is None:
        return False

    def handson(line: str, cell: str) -> None:
        run(line.strip(), cell, ip.user_ns)

    ip.register_magic_function(handson, magic_kind="cell", magic_name="handson")
    return True
