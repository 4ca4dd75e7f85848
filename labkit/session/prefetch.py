"""Measure ahead while the learner reads: a background worker that runs, live, the experiments
the neighbouring values of a panel's controls would ask for, so that the next move of a control
is usually a lookup instead of a cuDNN graph build plus timing (0.2-7 s on an H100).

Rules that keep the numbers honest (a prefetched number must be one the foreground would have
measured):

* **One GPU job at a time.** The worker and every foreground measurement (`labkit.session.lessons.data`:
  a cell, a widget change) hold the same lock, `PREFETCHER.gpu`; a prefetched measurement never
  overlaps another labkit measurement.
* **Only when idle.** The worker starts a job only after the kernel has been idle for
  ``idle_s`` seconds: no foreground measurement and no cell running (IPython's
  ``pre_run_cell``/``post_run_cell`` events).
* **The foreground wins.** A foreground request stops the running job at its next
  `checkpoint` (labkit calls it before each graph build, CUDA-graph capture, autotuned plan,
  strategy and race round, never inside a capture); the job's partial work is dropped. A request
  for the very result the worker is computing waits for it instead.
* **Disturbed jobs are discarded.** A job during which a cell started or another foreground
  request arrived is not kept (host-timed columns could carry the main thread's activity).
* Failures are not kept: the foreground measures again and shows the error itself.

``LABKIT_PREFETCH=0`` turns it off (every first visit measures in the foreground). The worker is
a daemon thread started on first use; at exit it is stopped at its next checkpoint.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Deque, Iterable, Optional, Tuple

from .. import env
from ..signals import cancel

# prefetch.checkpoint and the others: the names callers know
from ..signals.cancel import Superseded, cancellable, checkpoint  # noqa: F401

#: seconds of kernel idleness before the worker starts a job
IDLE_S = 0.3
#: jobs kept queued at most (the newest wants first)
MAX_QUEUE = 64


@dataclass
class Stats:
    """What the prefetch worker did since it started.

    Attributes:
        done: jobs kept.
        discarded: jobs disturbed, so not kept.
        superseded: jobs stopped for the foreground.
        failed: jobs that raised.
        seconds: GPU-lock time spent on prefetching.
        last_error: the last failure, in words.
    """

    done: int = 0
    discarded: int = 0
    superseded: int = 0
    failed: int = 0
    seconds: float = 0.0
    last_error: str = ""


def enabled() -> bool:
    """Whether prefetching is on.

    Returns:
        False when ``LABKIT_PREFETCH`` is ``0``/``off``/``no``/``false``.
    """
    return env.switched_on("LABKIT_PREFETCH")


class KernelActivity:
    """What the kernel is doing, as the worker (and the warm-up's cupyx step) see it.

    That is the cells running (IPython's events, `watch_cells`), the foreground requests, and since
    when the kernel has been idle.

    Args:
        idle_s: seconds without a cell or a foreground measurement before the kernel counts as idle.
    """

    def __init__(self, idle_s: float = IDLE_S):
        self.idle_s = idle_s
        self._cv = threading.Condition()  # guards the fields below (and a subclass's)
        self._last_active = time.monotonic()
        self._cells = 0  # cells running now (IPython events)
        self._foreground: list = []  # keys of foreground requests waiting or running
        self._disturbances = 0  # bumped by each cell start / foreground request
        self._closing = False
        self._hooked = False

    def watch_cells(self) -> None:
        """Follow IPython's cells, once (``pre_run_cell``/``post_run_cell``: `cell_started`, `cell_finished`).

        It is called from inside a cell (the banner's, or a panel's first `want`), which counts as
        running. Nothing happens outside IPython: a script that wants its steps treated as cells calls
        `cell_started` and `cell_finished` itself.
        """
        if self._hooked:
            return
        self._hooked = True
        try:
            from IPython import get_ipython  # heavy: IPython, in a kernel

            ip = get_ipython()
        except Exception:  # noqa: BLE001  (no IPython: nothing to hook)
            ip = None
        if ip is None or not hasattr(ip, "events"):
            return
        ip.events.register("pre_run_cell", self.cell_started)
        ip.events.register("post_run_cell", self.cell_finished)
        # called from a cell (the banner's, or a panel's first want): that cell started before the
        # hook and its post_run_cell will count it as finished
        with self._cv:
            self._cells += 1

    def cell_started(self, *_args) -> None:
        """IPython's ``pre_run_cell`` event: a cell starts, so the kernel is busy."""
        with self._cv:
            self._cells += 1
            self._disturbances += 1
            self._cv.notify_all()

    def cell_finished(self, *_args) -> None:
        """IPython's ``post_run_cell`` event: a cell ended; the kernel is idle from now if none runs."""
        with self._cv:
            self._cells = max(0, self._cells - 1)
            self._last_active = time.monotonic()
            self._cv.notify_all()

    def wait_for_idle_kernel(self, timeout: Optional[float] = None) -> bool:
        """Block until the kernel is idle as the worker counts it.

        Idle means no cell and no foreground measurement for ``idle_s`` seconds; outside IPython no cell
        runs unless a script said `cell_started`.

        Args:
            timeout: the most seconds to wait; None for no limit.

        Returns:
            True when the kernel is idle.
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._closing:
                wait = self._idle_for()
                if wait == 0:
                    return True
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(wait if left is None else min(wait, left))
            return True

    def _idle_for(self) -> float:
        """Seconds left before the kernel counts as idle (0: idle now)."""
        if self._foreground or self._cells:
            return self.idle_s
        return max(0.0, self.idle_s - (time.monotonic() - self._last_active))


class Prefetcher(KernelActivity):
    """The worker (see the module docstring).

    ``want(jobs, store, is_done)`` puts jobs in front; ``foreground(key)`` is the context the
    foreground measures in.

    Args:
        idle_s: seconds of kernel idleness before the worker starts a job.
    """

    def __init__(self, idle_s: float = IDLE_S):
        super().__init__(idle_s)
        self.gpu = threading.RLock()  # held by whoever touches the GPU for labkit
        self._queue: Deque[Tuple[str, Callable[[], object]]] = deque()
        self._store: Optional[Callable[[str, object], None]] = None
        self._is_done: Callable[[str], bool] = lambda key: False
        self._running: Optional[str] = None  # key of the job the worker runs now
        self._thread: Optional[threading.Thread] = None
        self.stats = Stats()
        #: seconds the last foreground request waited for the worker to give the GPU back
        self.last_wait_s = 0.0

    # ---- the foreground side -------------------------------------------------------------------
    @contextlib.contextmanager
    def foreground(self, key: str = ""):
        """Hold the GPU for a foreground measurement.

        A running job for another key stops at its next checkpoint; a running job for ``key`` itself is
        waited for.

        Args:
            key: the request's key.

        Returns:
            A context manager.
        """
        with self._cv:
            self._foreground.append(key)
            if self._running != key:
                self._disturbances += 1
            self._cv.notify_all()
        t0 = time.perf_counter()
        try:
            with self.gpu:
                self.last_wait_s = time.perf_counter() - t0
                yield
        finally:
            with self._cv:
                self._foreground.remove(key)
                self._last_active = time.monotonic()
                self._cv.notify_all()

    def want(
        self,
        jobs: Iterable[Tuple[str, Callable[[], object]]],
        store: Callable[[str, object], None],
        is_done: Callable[[str], bool],
    ) -> int:
        """Put jobs at the front of the queue.

        What was queued before stays behind them (a learner often goes back: "reset to base"), up to
        `MAX_QUEUE` jobs.

        Args:
            jobs: (key, fn) pairs, in the order to run them.
            store: ``store(key, result)`` keeps a result; called with the GPU lock held.
            is_done: ``is_done(key)`` says a key needs no job any more.

        Returns:
            The number of ``jobs`` queued; 0 when prefetching is off.
        """
        if not enabled():
            return 0
        jobs = [(k, fn) for k, fn in jobs if not is_done(k)]
        with self._cv:
            new = {k for k, _ in jobs}
            older = [j for j in self._queue if j[0] not in new]
            self._queue = deque((jobs + older)[:MAX_QUEUE])
            self._store, self._is_done = store, is_done
            self._last_active = time.monotonic()
            self._cv.notify_all()
        self._start()
        return len(jobs)

    def clear(self) -> None:
        """Drop the queued jobs (the running one finishes or stops at a checkpoint)."""
        with self._cv:
            self._queue.clear()

    def pending(self) -> int:
        """Jobs queued or running.

        Returns:
            Their count.
        """
        with self._cv:
            return len(self._queue) + (self._running is not None)

    def wait_idle(self, timeout: float) -> bool:
        """Block until the queue is empty and no job runs.

        Args:
            timeout: the most seconds to wait.

        Returns:
            True when it is.
        """
        end = time.monotonic() + timeout
        with self._cv:
            while self._queue or self._running is not None:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.1))
        return True

    # ---- the worker side -----------------------------------------------------------------------
    def should_stop(self) -> bool:
        """Whether the running job must give the GPU back (checked by `checkpoint`).

        Returns:
            True when the prefetcher closes, a cell runs, or a foreground request wants another job's result.
        """
        return self._closing or self._cells > 0 or any(k != self._running for k in self._foreground)

    def _start(self) -> None:
        self.watch_cells()
        if self._thread is None or not self._thread.is_alive():
            if self._thread is None:  # its first start: stopped at exit, not registered by an import
                atexit.register(self.close)
            self._thread = threading.Thread(target=self._loop, name="labkit-prefetch", daemon=True)
            self._thread.start()

    def _next(self):
        """The next job once idle (None when closing)."""
        with self._cv:
            while True:
                if self._closing:
                    return None
                while self._queue and self._is_done(self._queue[0][0]):
                    self._queue.popleft()
                wait = self._idle_for()
                if self._queue and wait == 0:
                    return self._queue.popleft()
                self._cv.wait(wait if self._queue else None)

    def _loop(self) -> None:
        cancel.set_worker(self)
        while True:
            job = self._next()
            if job is None:
                return
            key, fn = job
            with self.gpu:
                with self._cv:
                    if self.should_stop() or self._is_done(key):
                        if not self._closing and not self._is_done(key):
                            self._queue.appendleft(job)
                        continue
                    self._running, before = key, self._disturbances
                t0 = time.perf_counter()
                result, error, superseded = None, None, False
                try:
                    result = fn()
                except Superseded:
                    superseded = True
                except BaseException as exc:  # noqa: BLE001  (never kill the worker)
                    error = f"{type(exc).__name__}: {exc}"
                with self._cv:
                    self.stats.seconds += time.perf_counter() - t0
                    if superseded:
                        self.stats.superseded += 1
                        if not self._closing:
                            self._queue.appendleft(job)  # still a likely next move
                    elif error is not None:
                        self.stats.failed += 1
                        self.stats.last_error = error[:300]
                    elif self._disturbances != before:
                        self.stats.discarded += 1
                    else:
                        self.stats.done += 1
                        if self._store is not None:
                            self._store(key, result)
                    self._running = None
                    self._cv.notify_all()

    def close(self, timeout: float = 60.0) -> None:
        """Stop the worker at its next checkpoint and wait for it (at exit).

        Args:
            timeout: the most seconds to wait.
        """
        with self._cv:
            self._closing = True
            self._queue.clear()
            self._cv.notify_all()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)


#: the process-wide worker
PREFETCHER = Prefetcher()
