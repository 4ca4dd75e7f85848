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

A step is a function given as ``"module:function"``, called in the worker with the arguments
given (picklable), under the caller's ``LABKIT_*`` environment variables of the moment (its cache
folder, for one); its return value comes back. Times in seconds.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
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


def _serve(conn) -> None:
    """The worker's loop: run each (target, args) sent, send phases while it runs, then its result."""
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
                announcing(lambda phase: conn.send(("phase", phase))),
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

    ``phase`` is what the step in flight last announced; ``starts`` how many processes this worker
    has started. Either kind dies with its parent.

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
        proc = ctx.Process(target=_serve, args=(child,), name="labkit-worker", daemon=self.daemon)
        with _main_hidden(), variables(self.env):  # the worker copies them as it starts
            proc.start()
        child.close()
        self._proc, self._conn, self.starts = proc, parent, self.starts + 1
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
            on_phase: hears each phase the step announces.
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
                            raise WorkerDied(what, self.phase, code)
                        if kind == "phase":
                            self.phase = payload
                            if on_phase is not None:
                                on_phase(payload)
                            continue
                        if kind == "done":
                            return payload
                        raise _rebuild(payload)
                    if not proc.is_alive():
                        code = proc.exitcode
                        self.stop()
                        raise WorkerDied(what, self.phase, code)
                    spent = time.monotonic() - t0
                    if budget_s is not None and spent > budget_s:
                        self.stop()
                        raise TimedOut(what, self.phase, spent, budget_s)
                    checkpoint()
            except BaseException as exc:
                if not isinstance(
                    exc, LabkitError
                ):  # Ctrl-C, a superseded request: stop the step where it is
                    self.stop()
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
