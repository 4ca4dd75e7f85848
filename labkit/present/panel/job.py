"""A panel's measurement job: a request answered in the caller's thread, or (a click in live mode)
in a background thread that a newer request stops at its next checkpoint; the progress it
reports on the way (partial tables drawn at most every `PARTIAL_EVERY_S`, a wait for another
process's turn on the GPU) and how long it took. No widget here: what to draw and say are the
callbacks given."""

from __future__ import annotations

import atexit
import contextlib
import html
import threading
import time
import weakref
from typing import Callable, Optional

from ...signals.cancel import cancellable
from ...signals.progress import announcing, listening


class MeasurementJob:
    """One panel's measurements: in the caller's thread, or in a background thread a newer request stops.

    Args:
        name: the panel's name, for its thread.
        draw_partial: ``draw_partial(make_frame)`` draws a table so far.
        say: ``say(kind, html)`` sets the status line ("ok", "running" or "error").
    """

    #: live: seconds between two partial draws of a chart that fills in (the last part always draws) ...
    PARTIAL_EVERY_S = 0.25
    #: ... and at least this many times what the last partial draw took (a chart of 30 subplots
    #: takes 0.3 s to draw on the GPU host: drawing never takes more than a third of the time)
    DRAW_GAP_FACTOR = 2.0

    def __init__(self, name: str, draw_partial: Callable, say: Callable):
        self.name, self.draw_partial, self.say = name, draw_partial, say
        self.generation = 0  # bumped by every new request; an older measurement stops at its next checkpoint
        self.thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.stopped = 0  # measurements stopped because a newer request came
        self.waits = 0  # times a measurement waited for another process's turn on the GPU
        self.updates = 0
        self.last_update_ms: Optional[float] = None
        self.first_paint_ms: Optional[float] = None
        self.partial_draws = 0
        self.t0 = self.last_partial = self.last_draw_s = 0.0
        self.drawing = -1  # the generation whose progress is shown
        #: set once the background request's first part is on screen (or it ended): `wait_shown`
        self._shown = threading.Event()
        self._shown.set()

    # ---- threads --------------------------------------------------------------------------------
    def next_generation(self) -> int:
        """A new request: every older one is stale from now on.

        Returns:
            The new generation.
        """
        with self._lock:
            self.generation += 1
            return self.generation

    def current(self, generation: int) -> bool:
        """Whether a generation is the newest request's.

        Args:
            generation: a request's generation.

        Returns:
            True when it is.
        """
        return generation == self.generation

    def start(self, work: Callable[[int], None]) -> None:
        """Run work in a background thread once the previous one has stopped.

        The previous one stops at its next checkpoint: this request made it stale.

        Args:
            work: ``work(generation)`` answers the request.
        """
        with self._lock:
            self.generation += 1
            gen, prev = self.generation, self.thread
            t = threading.Thread(
                target=self._background, args=(gen, prev, work), daemon=True, name=f"labkit-panel-{self.name}"
            )
            self.thread = t
            self._shown.clear()
        _running_add(self)
        if prev is not None and prev.is_alive():
            self.say("running", "stopping the previous measurement ...")
        t.start()

    def _background(self, gen: int, prev: Optional[threading.Thread], work: Callable[[int], None]) -> None:
        try:
            if prev is not None:
                prev.join()
            if gen != self.generation:
                return  # a newer click came while we waited
            with cancellable(lambda: gen != self.generation):
                work(gen)
        finally:
            if self.thread is threading.current_thread():
                self._shown.set()

    def wait_shown(self, timeout: Optional[float] = None) -> bool:
        """Block until the background request has something on screen.

        That is its first partial table, or its whole answer or error.

        Args:
            timeout: seconds at most; None for no limit.

        Returns:
            True when it has.
        """
        return self._shown.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the background request at its next checkpoint and wait for it.

        A cuDNN call in flight is not interrupted.

        Args:
            timeout: seconds to wait at most.
        """
        self.next_generation()
        self.wait(timeout)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until the background measurement is drawn (at once from that measurement's own thread).

        Args:
            timeout: seconds at most; None for no limit.

        Returns:
            True when none is running any more.
        """
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        return t is None or not t.is_alive()

    # ---- one measurement ----------------------------------------------------------------------------
    def begin(self, generation: int) -> None:
        """A request starts being answered (its times count from now).

        Args:
            generation: its generation, whose progress is shown from now.
        """
        self.t0, self.last_partial, self.partial_draws, self.first_paint_ms = (
            time.perf_counter(),
            0.0,
            0,
            None,
        )
        self.last_draw_s = 0.0
        self.drawing = generation

    @contextlib.contextmanager
    def measuring(self):
        """Around getting the table: its progress is reported to the panel."""
        with listening(self.on_partial), announcing(self.on_phase):
            yield

    def done(self) -> None:
        """A request was answered (drawn, or its error shown)."""
        self.last_update_ms = self.elapsed_ms()
        self.updates += 1
        self._shown.set()

    def elapsed_ms(self) -> float:
        """Time since the request being answered started.

        Returns:
            Milliseconds.
        """
        return (time.perf_counter() - self.t0) * 1000

    def painted(self) -> None:
        """Something of this request is on screen (the first time: its first paint)."""
        if self.first_paint_ms is None:
            self.first_paint_ms = self.elapsed_ms()
        self._shown.set()

    def on_partial(self, make_frame, done: int, total: int, unit: str) -> None:
        """A measurement in progress reports its table so far (`labkit.signals.progress`).

        It is drawn at most every `PARTIAL_EVERY_S`, and the status line says how far it is.

        Args:
            make_frame: makes the table so far.
            done: parts measured.
            total: parts in all.
            unit: what a part is, e.g. "plans timed".
        """
        now = time.perf_counter()
        gap = max(self.PARTIAL_EVERY_S, self.DRAW_GAP_FACTOR * self.last_draw_s)
        if now - self.last_partial < gap or done >= total or self.drawing != self.generation:
            return  # the finished table is drawn by the panel; a stale request draws nothing
        self.draw_partial(make_frame)
        self.last_partial = time.perf_counter()
        self.last_draw_s = self.last_partial - now
        self.partial_draws += 1
        self.painted()
        self.say(
            "running",
            f"{done} of {total} {html.escape(unit)}, {now - self.t0:.1f} s; "
            "the chart fills in as the rest is measured ...",
        )

    def on_phase(self, phase: str) -> None:
        """A measurement says where it is (`labkit.signals.progress.announce`).

        The panel shows a wait for the GPU (another notebook's turn, `labkit.gpu.host.lock`) and its end;
        other phases are the progress bar's.

        Args:
            phase: the words, e.g. "waiting for the GPU ...".
        """
        if self.drawing != self.generation:
            return
        if phase.startswith("waiting for the GPU"):
            self.waits += 1
            self.say(
                "running",
                f"{html.escape(phase)}: another notebook is measuring on it; this one starts when its turn "
                "comes (the chart shows what was there)",
            )
        elif phase == "got the GPU":
            self.say("running", "measuring on the GPU ...")


#: jobs that started a background request: stopped when the process exits (`_stop_all`)
_RUNNING: "weakref.WeakSet[MeasurementJob]" = weakref.WeakSet()
#: whether `_stop_all` runs at exit: registered by the first job that starts, not by an import
_stops_at_exit = False


def _running_add(job: "MeasurementJob") -> None:
    """Keep ``job`` among those `_stop_all` stops at exit (registered with the first)."""
    global _stops_at_exit
    if not _stops_at_exit:
        _stops_at_exit = True
        atexit.register(_stop_all)
    _RUNNING.add(job)


def _stop_all() -> None:
    """At exit (a kernel shut down or restarted), every background measurement stops at its next
    checkpoint, so none is cut off inside a CUDA call by the interpreter's end."""
    for job in list(_RUNNING):
        job.stop(timeout=10.0)
