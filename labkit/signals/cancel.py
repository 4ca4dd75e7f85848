"""Stopping a measurement part-way: `checkpoint`, called by labkit between the steps of a
measurement (before a graph build, a CUDA-graph capture, each autotuned plan, each strategy,
each race round; never inside a capture), raises `Superseded` when the measurement is no
longer wanted:

* in the prefetch worker's thread (`labkit.session.prefetch`), when the foreground needs the GPU;
* inside a `cancellable` block (a live panel measuring a click in the background), when the
  learner has moved a control again.

Anywhere else it does nothing. And stopping on time: a `Budget` is a step's time limit, checked
between its parts, that ends it with `labkit.TimedOut` (`labkit.signals.progress.announce` says which part
a step is in, for whoever must stop it from outside). The bottom layer: the GPU core imports this,
never the worker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable

from ..errors import InvalidSpec, TimedOut

_worker = threading.local()  # .prefetcher: set in the prefetch worker's thread only


class Superseded(BaseException):
    """Raised inside a measurement at a `checkpoint` when it is no longer wanted.

    A BaseException, so that experiments' ``except Exception`` (which turn errors into table rows)
    do not swallow it.
    """


def set_worker(prefetcher) -> None:
    """Mark this thread as the prefetch worker's.

    Args:
        prefetcher: the worker; this thread's `checkpoint` asks its ``should_stop()``.
    """
    _worker.prefetcher = prefetcher


_cancel = threading.local()  # .should_stop: set by `cancellable` in a foreground thread


@contextlib.contextmanager
def cancellable(should_stop: Callable[[], bool]):
    """A block inside which this thread's `checkpoint` raises `Superseded` once ``should_stop()`` is true.

    A live panel measures a click in the background inside one: the learner may move a control
    again.

    Args:
        should_stop: called at every checkpoint; true when the request is no longer wanted.

    Returns:
        A context manager.
    """
    prev = getattr(_cancel, "should_stop", None)
    _cancel.should_stop = should_stop
    try:
        yield
    finally:
        _cancel.should_stop = prev


def checkpoint() -> None:
    """Stop here if the measurement is no longer wanted; called by labkit between its steps.

    Raises:
        Superseded: inside a prefetch job whose GPU the foreground wants, or inside a `cancellable`
            block whose request is no longer wanted. Anywhere else, nothing happens.
    """
    p = getattr(_worker, "prefetcher", None)
    if p is not None and p.should_stop():
        raise Superseded()
    stop = getattr(_cancel, "should_stop", None)
    if stop is not None and stop():
        raise Superseded()


class Budget:
    """A time budget for one measuring step, from when it is made.

    Code that measures calls ``check(phase)`` between its parts (between the calls of a capture,
    between replays, between plan builds) and is stopped with `labkit.TimedOut` once the budget is
    spent: a slow part is never waited on past its budget plus the one call in flight. A call that
    never returns cannot be stopped from inside its process: the network report runs its steps in a
    worker process for that (`labkit.gpu.host.isolated`).

    Args:
        seconds: wall time allowed, in seconds (> 0); None for no limit.
        what: the step, named in `labkit.TimedOut`.
    """

    def __init__(self, seconds, what: str):

        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0
        ):
            raise InvalidSpec(
                "budget seconds", seconds, "must be a number of seconds > 0, or None for no limit"
            )
        self.seconds, self.what = (None if seconds is None else float(seconds)), what
        self._clock = time.perf_counter
        self._t0 = self._clock()

    @property
    def spent(self) -> float:
        """Seconds since the budget was made."""
        return self._clock() - self._t0

    @property
    def left(self) -> float:
        """Seconds left (infinity without a limit; never below 0)."""
        return float("inf") if self.seconds is None else max(0.0, self.seconds - self.spent)

    @property
    def over(self) -> bool:
        """Whether the budget is spent (never, without a limit)."""
        return self.seconds is not None and self.spent > self.seconds

    def check(self, phase: str) -> None:
        """Raise `labkit.TimedOut` naming ``phase`` when the budget is spent.

        Args:
            phase: where the step is, e.g. "capture" or "replay".
        """
        if self.over:
            raise TimedOut(self.what, phase, self.spent, self.seconds)

    def within(self, seconds, what: str) -> "Budget":
        """A budget that also ends when this one does.

        Args:
            seconds: its own limit, in seconds; None for all that is left of this one.
            what: the step it is for.

        Returns:
            A new `Budget` of the smaller of ``seconds`` and what is left.
        """
        mine = self.left
        if seconds is not None:
            mine = min(mine, float(seconds))
        return Budget(None if mine == float("inf") else max(mine, 1e-6), what)


#: how the status of a plan that was not timed to the end begins: "slower" (one eager call
#: showed it far slower than the best: known to lose, not timed further), "cut" (left out when a
#: budget was spent) or "timed out" (stopped by its own budget)
NOT_TIMED = ("slower", "cut", "timed out")
#: the statuses among those that leave a plan unknown (a budget stopped it; "slower" ones are known)
CUT = ("cut", "timed out")


def not_timed(status) -> bool:
    """Whether a plan row's status says the plan was not timed to the end.

    Args:
        status: a plan table's ``status`` value.

    Returns:
        True when it starts with one of `NOT_TIMED`.
    """
    return str(status).startswith(NOT_TIMED)


def was_cut(status) -> bool:
    """Whether a plan row's status says a budget stopped it (the plan is unknown).

    Args:
        status: a plan table's ``status`` value.

    Returns:
        True when it starts with one of `CUT`.
    """
    return str(status).startswith(CUT)
