"""Charts that fill in: an experiment reports its table so far after each part it measures, and
whoever listens in the same thread (a live panel) can draw it before the rest is measured.

An experiment calls ``report(make_frame, done, total, unit)`` after each part (a dtype, a plan,
a cap, a stage): ``make_frame()`` returns the DataFrame of the parts measured so far, in the
same columns the finished table has; it is called only when someone listens. A panel wraps its
request in ``with listening(callback):``. Listeners are per thread, so the prefetch worker's
measurements never reach a panel. A listener that raises is ignored: drawing early is an extra,
never a reason for a measurement to fail.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable

_local = threading.local()

Listener = Callable[[Callable[[], object], int, int, str], None]


@contextlib.contextmanager
def listening(listener: Listener):
    """Send this thread's `report` calls to ``listener(make_frame, done, total, unit)`` inside
    the block (nested blocks: the innermost listener)."""
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(listener)
    try:
        yield
    finally:
        stack.pop()


def active() -> bool:
    """Whether anyone in this thread listens (an experiment may skip building partial tables)."""
    return bool(getattr(_local, "stack", None))


def report(make_frame: Callable[[], object], done: int, total: int, unit: str) -> None:
    """Tell this thread's listener that ``done`` of ``total`` ``unit`` are measured;
    ``make_frame()`` gives the table so far."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return
    try:
        stack[-1](make_frame, done, total, unit)
    except Exception:  # noqa: BLE001  (see the module docstring)
        pass
