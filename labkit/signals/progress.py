"""Charts that fill in, and where a measurement is: an experiment reports its table so far after
each part it measures, and whoever listens in the same thread (a live panel) can draw it before
the rest is measured; a measurement announces the part it is about to do ("timing plan 6
(eng1) of ..."), and whoever listens (the report CLI's progress bar, the worker process of
`labkit.gpu.host.isolated`, which passes it to its caller) can say where it is, or where it was when
it was stopped.

An experiment calls ``report(make_frame, done, total, unit)`` after each part (a dtype, a plan,
a cap, a stage): ``make_frame()`` returns the DataFrame of the parts measured so far, in the
same columns the finished table has; it is called only when someone listens. A panel wraps its
request in ``with listening(callback):``; ``announce(phase)`` goes to ``with announcing(callback):``.
Listeners are per thread, so the prefetch worker's measurements never reach a panel. A listener
that raises is ignored: drawing early or saying where we are is an extra, never a reason for a
measurement to fail.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable

Listener = Callable[[Callable[[], object], int, int, str], None]


class _Listeners:
    """A per-thread stack of listeners: the innermost hears each call; one that raises is ignored."""

    def __init__(self):
        self._local = threading.local()

    @contextlib.contextmanager
    def listening(self, listener: Callable):
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(listener)
        try:
            yield
        finally:
            stack.pop()

    def active(self) -> bool:
        return bool(getattr(self._local, "stack", None))

    def tell(self, *args) -> None:
        stack = getattr(self._local, "stack", None)
        if not stack:
            return
        try:
            stack[-1](*args)
        except Exception:  # noqa: BLE001  (see the module docstring)
            pass


_tables = _Listeners()
_phases = _Listeners()


def listening(listener: Listener):
    """Send this thread's `report` calls to ``listener`` inside the block.

    Args:
        listener: called as ``listener(make_frame, done, total, unit)``; in nested blocks, only the
            innermost one hears.

    Returns:
        A context manager.
    """
    return _tables.listening(listener)


def active() -> bool:
    """Whether anyone in this thread listens (an experiment may skip building partial tables).

    Returns:
        True when a listener is active.
    """
    return _tables.active()


def report(make_frame: Callable[[], object], done: int, total: int, unit: str) -> None:
    """Tell this thread's listener that ``done`` of ``total`` parts are measured.

    Args:
        make_frame: returns the table so far, in the finished table's columns; called only when
            someone listens.
        done: parts measured so far.
        total: parts in all.
        unit: what a part is, e.g. "plans timed".
    """
    _tables.tell(make_frame, done, total, unit)


def announcing(listener: Callable[[str], None]):
    """Send this thread's `announce` calls to ``listener`` inside the block.

    Args:
        listener: called as ``listener(phase)``; in nested blocks, only the innermost one hears.

    Returns:
        A context manager.
    """
    return _phases.listening(listener)


def announce(phase: str) -> None:
    """Say what a measurement is about to do, e.g. "timing plan 6 (eng1)" or "building every plan".

    A step stopped from outside (`labkit.gpu.host.isolated`) can then say where it was. Without a listener
    this does nothing.

    Args:
        phase: the part about to start.
    """
    _phases.tell(phase)
