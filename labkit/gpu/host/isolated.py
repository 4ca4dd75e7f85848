"""Measuring steps in a worker process that can be stopped from outside.

A `labkit.signals.cancel.Budget` stops a step between its parts; nothing stops a cuDNN call that never
returns, or one that crashes, inside the process that made it. So the network report runs each
step (a distinct convolution's build, autotune and checks; one strategy's pass) in a worker
process: the caller waits for the step's answer with a deadline, and a step past its deadline is
killed together with the worker (`labkit.TimedOut`, naming the phase the step last announced
through `labkit.signals.progress.announce`). A worker that dies (a crash in a library) is a `WorkerDied`.
The next step starts a fresh worker; the caller's process, a notebook's kernel, goes on.

The worker is a fresh interpreter (``spawn``: its own CUDA context, never a fork of a CUDA
process), started on first use (about 1-5 s: Python, labkit, CuPy, cuDNN), or ahead in the
background (`Worker.start_soon`: lesson 09's banner starts the report's), and kept for later
steps. It exits when its parent goes (the pipe closes), ignores Ctrl-C (the parent stops it),
and is killed at the parent's exit. ``LABKIT_ISOLATE=0`` runs steps in the caller's process
instead (no hard stop; for debugging).

A step announces its phases often (one or two per plan), so an announce in the worker must cost
little. Each phase is written to a `PhaseBoard`, a few hundred bytes of memory the worker shares
with its parent: cut to `PHASE_BOARD_BYTES` at a character's edge, written into the slot not in
use and only then published, so the parent reads a whole phase at any time, even after the
worker was killed in the middle of a write. The pipe carries a phase at most once every
`PHASE_SEND_S` (always a step's first): it wakes the caller, whose ``on_phase`` listener hears
the newest phase at most once an interval, the board's when the pipe is quiet. A step that
dies or runs past its deadline is named by the board's phase: the very last one announced.

A step is a function given as ``"module:function"``, called in the worker with the arguments
given (picklable), under the caller's ``LABKIT_*`` environment variables of the moment (its cache
folder, for one); its return value comes back. Times in seconds.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import math
import multiprocessing
import multiprocessing.util  # noqa: F401  (its exit handler registered before a worker's stop: see worker)
import os
import signal
import sys
import threading
import time
from typing import Callable, Dict, Optional

from ... import env, errors
from ...env import variables
from ...errors import InvalidSpec, LabkitError, TimedOut
from ...signals.cancel import checkpoint
from ...signals.progress import announce, announcing
from .lock import hold, released

#: seconds a new worker may take to start (interpreter, imports, CUDA and cuDNN initialisation)
START_BUDGET_S = 120.0
#: how often the caller looks at the pipe, its deadline and its own cancellation (seconds)
POLL_S = 0.05
#: a step's phases go down the pipe at most once this often (seconds; the first of a step always):
#: a send costs the measuring process tens of microseconds, and a report announces thousands
PHASE_SEND_S = 0.1
#: the longest phase the board holds, in UTF-8 bytes (a longer one is cut at a character's edge)
PHASE_BOARD_BYTES = 512


class WorkerDied(LabkitError):
    """The worker process ended during a step (a crash in a library, or killed from outside).

    Args:
        what: the step.
        phase: what the step last announced.
        exitcode: the process's exit code.
    """

    def __init__(self, what: str, phase: str, exitcode):
        self.what, self.phase, self.exitcode = what, phase, exitcode
        super().__init__(f"{what}: the worker process died during {phase} (exit code {exitcode})")


class StepFailed(LabkitError):
    """A step raised an error in the worker that is not one of labkit's own: its type and text."""


def isolation_on() -> bool:
    """Whether steps run in a worker process (``LABKIT_ISOLATE``, on unless set to 0).

    Returns:
        True when they do.
    """
    return env.switched_on("LABKIT_ISOLATE")


def _resolve(target: str) -> Callable:
    if not isinstance(target, str) or ":" not in target:
        raise InvalidSpec("target", target, 'must be "module:function"')
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


#: how often a worker checks that its parent is still there (seconds)
PARENT_CHECK_S = 0.5


def _die_with_parent() -> None:
    """End this worker within `PARENT_CHECK_S` of its parent's death, even by SIGKILL in the middle
    of a step (the pipe alone is noticed only when the worker next reads it): a watchdog thread
    sees the worker handed to another parent."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="labkit-parent-watch").start()


class _Slots(ctypes.Structure):
    """The board's shared memory: two slots of text and their lengths; ``seq`` counts the writes,
    and the slot of write ``seq`` (``seq % 2``) holds the phase published last."""

    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("length", ctypes.c_uint32 * 2),
        ("text", (ctypes.c_char * PHASE_BOARD_BYTES) * 2),
    ]


def _cut(phase: str) -> bytes:
    """``phase`` in UTF-8, cut to `PHASE_BOARD_BYTES` without splitting a character."""
    data = phase.encode("utf-8", "replace")
    if len(data) > PHASE_BOARD_BYTES:  # "ignore" drops the character the cut split, nothing else
        data = data[:PHASE_BOARD_BYTES].decode("utf-8", "ignore").encode("utf-8")
    return data


class PhaseBoard:
    """The last phase a worker's step announced, in memory shared with its parent.

    Made by the parent, handed to the worker process as it starts. One process writes at a time
    (the worker during a step, the parent between steps); a write fills the slot not in use, then
    publishes it, so a reader sees the previous phase or the new one whole, even when the writer
    was killed in between. A reader checks that no write was published while it copied, and reads
    again if one was. (Python has no memory fences: on a CPU that reorders stores, a read while
    the worker runs might rarely see a mix, which the next read corrects; a read once the worker
    stopped sees all it wrote.)

    Args:
        ctx: the multiprocessing context the worker is started with.
    """

    def __init__(self, ctx):
        self._slots = ctx.RawValue(_Slots)  # zeroed: no phase yet
        self._view()

    def _view(self) -> None:
        self._bytes = memoryview(self._slots).cast("B")  # a slice copy is cheaper than a ctypes call

    def __getstate__(self) -> dict:
        return {"_slots": self._slots}  # shared as the worker starts; its view is made there

    def __setstate__(self, state: dict) -> None:
        self._slots = state["_slots"]
        self._view()

    def write(self, phase: str) -> None:
        """Publish ``phase`` (cut to `PHASE_BOARD_BYTES`).

        Args:
            phase: the phase; "" clears the board.
        """
        data = _cut(phase)
        seq = self._slots.seq + 1
        self._fill(seq % 2, data)
        self._slots.seq = seq  # published: the slot is whole before readers look at it

    def _fill(self, slot: int, data: bytes) -> None:
        start = _Slots.text.offset + slot * PHASE_BOARD_BYTES
        self._bytes[start : start + len(data)] = data
        self._slots.length[slot] = len(data)

    def read(self) -> str:
        """The phase published last.

        Returns:
            The phase; "" when none was announced since the board was cleared.
        """
        slots = self._slots
        for _ in range(100):  # a write published while we copied: copy again
            seq = slots.seq
            start = _Slots.text.offset + seq % 2 * PHASE_BOARD_BYTES
            data = bytes(self._bytes[start : start + min(slots.length[seq % 2], PHASE_BOARD_BYTES)])
            if slots.seq == seq:
                break
        return data.decode("utf-8", "replace")


def _teller(conn, board: PhaseBoard) -> Callable[[str], None]:
    """A step's phase listener in the worker: each phase to the board, and down the pipe the
    first and then at most one every `PHASE_SEND_S`."""
    sent_at = -math.inf

    def tell(phase: str) -> None:
        nonlocal sent_at
        board.write(phase)
        now = time.monotonic()
        if now - sent_at >= PHASE_SEND_S:
            sent_at = now
            conn.send(("phase", phase))

    return tell


def _serve(conn, board: PhaseBoard) -> None:
    """The worker's loop: run each (target, args) sent, tell its phases (board and pipe) while it
    runs, then send its result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops us
    _die_with_parent()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            target, args, env, hold_gpu = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        for key in [k for k in os.environ if k.startswith("LABKIT_") and k not in env]:
            del os.environ[key]
        os.environ.update(env)  # the caller's settings now (its cache folder, saved plans on or off, ...)
        try:
            # hold_gpu: the caller let its turn on the GPU go while it waits; the step takes one here,
            # unwatched: its `Hold` is not sent back, so its let-gos ask no contention check
            with (
                announcing(_teller(conn, board)),
                hold(watch=False) if hold_gpu else contextlib.nullcontext(),
            ):
                value = _resolve(target)(*args)
            conn.send(("done", value))
        except BaseException as exc:  # noqa: BLE001  (every failure goes back to the caller, named)
            conn.send(("error", _portable(exc)))


def _portable(exc: BaseException) -> tuple:
    """An exception as (class name, message, attributes) for the pipe: labkit's errors are rebuilt
    on the other side; anything else becomes a `StepFailed` naming it."""
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, (str, int, float, type(None)))}
    known = type(exc).__name__ if getattr(errors, type(exc).__name__, None) is type(exc) else ""
    return known, f"{type(exc).__name__}: {exc}", attrs


def _rebuild(portable: tuple) -> LabkitError:
    known, text, attrs = portable
    if known:
        cls = getattr(errors, known)
        exc = Exception.__new__(cls)  # not cls.__new__: OutOfMemory's MemoryError.__new__ refuses a subclass
        Exception.__init__(exc, text.split(": ", 1)[1])
        exc.__dict__.update(attrs)
        return exc
    return StepFailed(text)


_main_lock = threading.Lock()


@contextlib.contextmanager
def _main_hidden():
    """Start a worker without it importing the caller's ``__main__`` script (``spawn`` runs a
    script's top level again in the child, so a script without an ``if __name__ == "__main__"``
    guard would run itself in every worker). Steps are named "module:function", so a worker never
    needs the script. A notebook's ``__main__`` has no file: nothing to hide."""
    main = sys.modules.get("__main__")
    with _main_lock:
        saved = {
            k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__
        }
        try:
            if main is not None:
                main.__dict__.pop("__file__", None)
                main.__spec__ = None
            yield
        finally:
            if main is not None:
                main.__dict__.update(saved)
                if "__spec__" not in saved:
                    main.__dict__.pop("__spec__", None)


class Worker:
    """One worker process and the pipe to it (see the module doc).

    ``phase`` is what the step in flight last announced, as far as its caller has heard (at most
    `PHASE_SEND_S` behind; the very last one once the step was stopped); ``starts`` how many
    processes this worker has started. Either kind dies with its parent.

    Args:
        daemon: a daemonic worker may not start processes of its own; the report's worker is not
            one, so its builds can use build workers (`labkit.gpu.cudnn.builds`).
        env: environment variables the worker process starts with, besides this process's own
            (read once by libraries at load, e.g. cuDNN's logging: `labkit.gpu.cudnn.buildlog`).
    """

    def __init__(self, daemon: bool = True, env: Optional[Dict[str, str]] = None):
        #: a daemonic worker may not start processes of its own; the report's worker is not one, so
        #: its builds can use build workers (`labkit.gpu.cudnn.builds`); either way it dies with its parent
        self.daemon = daemon
        #: environment variables the worker process starts with (read once by libraries at load,
        #: e.g. cuDNN's logging: `labkit.gpu.cudnn.buildlog`), besides this process's own
        self.env = dict(env or {})
        self._proc = None
        self._conn = None
        self._board: Optional[PhaseBoard] = None
        self.phase = ""
        self.starts = 0
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        """Whether the worker process runs."""
        return self._proc is not None and self._proc.is_alive()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        board = PhaseBoard(ctx)
        proc = ctx.Process(target=_serve, args=(child, board), name="labkit-worker", daemon=self.daemon)
        with _main_hidden(), variables(self.env):  # the worker copies them as it starts
            proc.start()
        child.close()
        self._proc, self._conn, self._board, self.starts = proc, parent, board, self.starts + 1
        deadline = time.monotonic() + START_BUDGET_S
        while not parent.poll(POLL_S):
            if not proc.is_alive():
                code = proc.exitcode
                self.stop()
                raise WorkerDied("starting the worker", "start-up", code)
            if time.monotonic() > deadline:
                self.stop()
                raise TimedOut("starting the worker", "start-up", START_BUDGET_S, START_BUDGET_S)
        parent.recv()  # ("ready", pid)

    def start_soon(self, warm: Optional[str] = None, args: tuple = ()) -> threading.Thread:
        """Start the worker process in a background thread and run ``warm`` there, so that a first
        step finds it ready; returns at once. A step called meanwhile waits for it (one at a time).

        Args:
            warm: a step ("module:function") that loads what the steps use; None only starts
                the process.
            args: the warm step's arguments.

        Returns:
            The thread; a failure there is left for the next step to meet and report.
        """

        def run():
            try:
                if warm is None:
                    with self._lock:
                        if not self.alive:
                            self._start()
                else:
                    self.call(warm, args, START_BUDGET_S, "warming the worker")
            except Exception:  # noqa: BLE001  (an optimisation: the first step starts it again)
                pass

        t = threading.Thread(target=run, daemon=True, name="labkit-worker-start")
        t.start()
        return t

    def stop(self) -> None:
        """Kill the worker (its GPU memory goes with its CUDA context). A later call starts a new one."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(5)

    def call(
        self,
        target: str,
        args: tuple = (),
        budget_s: Optional[float] = None,
        what: str = "a step",
        on_phase: Optional[Callable[[str], None]] = None,
        hold_gpu: bool = False,
        meanwhile: Optional[Callable[[], None]] = None,
    ):
        """Run ``target(*args)`` in the worker and return its value.

        An error the step raised is raised here (labkit's own errors as themselves). A
        `labkit.signals.cancel.checkpoint` that stops the caller (a superseded panel request), or Ctrl-C,
        kills the worker and goes on up.

        Args:
            target: "module:function".
            args: its arguments (picklable).
            budget_s: past this many seconds the worker is killed and `labkit.TimedOut` raised, naming
                ``what`` and the phase the step last announced; None for no limit.
            what: the step, for errors.
            on_phase: hears the phase the step announced last: its first at once, then at most
                one every `PHASE_SEND_S`.
            hold_gpu: the step measures on the GPU: this process lets its turn on the GPU go while it
                waits, and the worker takes one for the step (`labkit.gpu.host.lock`).
            meanwhile: called in this thread once the step is sent, while the worker runs it (a
                chart of what the earlier steps measured is drawn then, not between steps).

        Returns:
            The step's value.
        """
        with self._lock, released() if hold_gpu else contextlib.nullcontext():
            if not self.alive:
                self.stop()
                self._start()
            self.phase = "start of the step"
            t0 = time.monotonic()
            proc, conn = self._proc, self._conn  # a stop() from another thread closes them under us: "died"
            board = self._board
            board.write("")  # the worker waits for the step: the board is ours to clear
            told, told_at = "", -math.inf  # the phase on_phase heard last, and when

            def stopped() -> str:  # the step is over: the board has its very last phase
                self.phase = board.read() or self.phase
                return self.phase

            try:
                conn.send(
                    (target, args, {k: v for k, v in os.environ.items() if k.startswith("LABKIT_")}, hold_gpu)
                )
                if meanwhile is not None:
                    meanwhile()
                while True:
                    try:
                        ready = conn.poll(POLL_S)
                    except (EOFError, OSError):
                        ready = True
                    if ready:
                        try:
                            kind, payload = conn.recv()
                        except (EOFError, OSError):  # the worker's end closed: it died (or was stopped)
                            proc.join(5)
                            kind, payload = "died", None
                        if kind == "died":
                            code = proc.exitcode
                            self.stop()
                            raise WorkerDied(what, stopped(), code)
                        if kind == "done":
                            return payload
                        if kind != "phase":
                            raise _rebuild(payload)
                        latest = payload
                    elif not proc.is_alive():
                        code = proc.exitcode
                        self.stop()
                        raise WorkerDied(what, stopped(), code)
                    else:  # the pipe is quiet: the step may have moved on since the phase it sent
                        latest = board.read()
                    self.phase = latest or self.phase
                    now = time.monotonic()
                    if on_phase is not None and latest not in ("", told) and now - told_at >= PHASE_SEND_S:
                        told, told_at = latest, now
                        on_phase(told)
                    spent = now - t0
                    if budget_s is not None and spent > budget_s:
                        self.stop()
                        raise TimedOut(what, stopped(), spent, budget_s)
                    checkpoint()
            except BaseException as exc:
                if not isinstance(
                    exc, LabkitError
                ):  # Ctrl-C, a superseded request: stop the step where it is
                    self.stop()
                    stopped()
                raise  # a deadline or a death stopped the worker above; a step's own error leaves it running


_worker: Optional[Worker] = None


def worker() -> Worker:
    """This process's worker (one; made on first use, stopped at exit).

    Returns:
        The `Worker`.
    """
    global _worker
    if _worker is None:
        _worker = Worker(daemon=False)  # its steps build graphs: it may start build workers
        # atexit runs the last registered first: this stop must come before multiprocessing's exit
        # handler, which joins every non-daemonic child and would wait forever for this one
        atexit.register(_worker.stop)
    return _worker


def run_step(
    target: str,
    args: tuple = (),
    budget_s: Optional[float] = None,
    what: str = "a step",
    on_phase: Optional[Callable[[str], None]] = None,
    hold_gpu: bool = False,
    meanwhile: Optional[Callable[[], None]] = None,
):
    """Run a step in this process's worker, or here with isolation off (`isolation_on`).

    Here, the step's own budgets still apply, and ``hold_gpu`` runs it under this process's turn on
    the GPU.

    Args:
        target: "module:function".
        args: its arguments.
        budget_s: the step's budget in the worker, in seconds (`Worker.call`).
        what: the step, for errors.
        on_phase: hears each phase the step announces.
        hold_gpu: the step measures on the GPU.
        meanwhile: called while the worker runs the step (`Worker.call`); here, before it.

    Returns:
        The step's value.
    """
    if isolation_on():
        return worker().call(target, args, budget_s, what, on_phase, hold_gpu, meanwhile)
    if meanwhile is not None:
        meanwhile()
    if (
        on_phase is None or on_phase is announce
    ):  # here, the step's announcements reach this thread's listener already
        return _resolve(target)(*args)
    with announcing(on_phase):
        return _resolve(target)(*args)
