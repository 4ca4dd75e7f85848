"""Stopping a measurement part-way: `checkpoint`, called by labkit between the steps of a
measurement (before a graph build, a CUDA-graph capture, each autotuned plan, each strategy,
each race round; never inside a capture), raises `Superseded` when the measurement is no
longer wanted:

* in the prefetch worker's thread (`labkit.prefetch`), when the foreground needs the GPU;
* inside a `cancellable` block (a live panel measuring a click in the background), when the
  learner has moved a control again.

Anywhere else it does nothing. The bottom layer: the GPU core imports this, never the worker.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable

_worker = threading.local()  # .prefetcher: set in the prefetch worker's thread only


class Superseded(BaseException):
    """Raised inside a prefetch job at a `checkpoint` when the foreground needs the GPU. A
    BaseException, so that experiments' ``except Exception`` (which turn errors into table rows)
    do not swallow it."""


def set_worker(prefetcher) -> None:
    """Mark this thread as the prefetch worker's: `checkpoint` asks ``prefetcher.should_stop()``."""
    _worker.prefetcher = prefetcher


_cancel = threading.local()  # .should_stop: set by `cancellable` in a foreground thread


@contextlib.contextmanager
def cancellable(should_stop: Callable[[], bool]):
    """Inside the block, this thread's `checkpoint` raises `Superseded` once ``should_stop()``
    is true (a live panel measuring in the background: the learner moved a control again)."""
    prev = getattr(_cancel, "should_stop", None)
    _cancel.should_stop = should_stop
    try:
        yield
    finally:
        _cancel.should_stop = prev


def checkpoint() -> None:
    """Called by labkit between steps of a measurement: inside a prefetch job whose GPU the
    foreground wants, or inside a `cancellable` block whose request is no longer wanted, raise
    `Superseded`; anywhere else, nothing."""
    p = getattr(_worker, "prefetcher", None)
    if p is not None and p.should_stop():
        raise Superseded()
    stop = getattr(_cancel, "should_stop", None)
    if stop is not None and stop():
        raise Superseded()
