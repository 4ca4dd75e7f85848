"""What the simulated GPU runs, and when: every stream a queue of operations, run as late as the host
needs to know (rules 2 and 3 of `labkit.simgpu.device`).

A stream's queue holds kernels (each with its solo duration, in microseconds, and the host time it
was launched), marks (an event recorded there, or an async pool's free: complete once the stream
reaches them) and waits (for another stream's event). The GPU runs a stream's operations in order;
the kernels at the head of several streams run at once and share the GPU (`Timeline.rate`). Times
are only worked out up to where the host asks (`advance`, `run_until`): a call launched later on
another stream slows the kernels running then, so no end is known before the host has to wait for
it, exactly as on a GPU.
"""

from __future__ import annotations

import collections
import math
from typing import Callable, Deque, Dict, List, Optional

from ..errors import LabkitError

#: two times closer than this are the same (microseconds)
EPS = 1e-9
KERNEL, MARK, WAIT = "kernel", "mark", "wait"


class Op:
    """One operation in a stream's queue.

    Args:
        kind: `KERNEL`, `MARK` or `WAIT`.
        ready: the host time it was queued, microseconds.
        kw: the optional attributes below (``work``, ``call``, ``speedup``, ``done``, ``event``).

    Attributes:
        kind: `KERNEL`, `MARK` or `WAIT`.
        ready: the host time it was queued (a kernel: launched); it starts no earlier.
        work: a kernel's solo microseconds still to run.
        call: a kernel's `labkit.simgpu.sanitizer.SimCall`; ``first``/``last``: its first or last kernel.
        speedup: a kernel's call's measured throughput of k streams at once against one, {k: s_k}
            (`labkit.simgpu.recorded.CallTiming.speedup`); None when not measured.
        done: a mark's callback, given the time the stream reached it.
        event: a wait's `labkit.simgpu.device.SimEvent`.
    """

    __slots__ = ("kind", "ready", "work", "call", "first", "last", "speedup", "done", "event")

    def __init__(self, kind: str, ready: float, **kw):
        self.kind, self.ready = kind, ready
        self.work, self.call, self.first, self.last = kw.get("work", 0.0), kw.get("call"), False, False
        self.speedup, self.done, self.event = kw.get("speedup"), kw.get("done"), kw.get("event")


class Timeline:
    """The GPU's side of a `labkit.simgpu.SimDevice`: the streams' queues, run on demand.

    Args:
        lack: ``lack(what, record, at)``, the device's way to stop its clock at GPU time ``at`` for a
            number nothing measured (rule 12).
        ended: called with each call (`SimCall`) once its last kernel has run.
    """

    def __init__(self, lack: Callable[[str, str, float], None], ended: Callable[[object], None]):
        self.now = 0.0
        self.queues: Dict[int, Deque[Op]] = collections.defaultdict(collections.deque)
        self._lack, self._ended = lack, ended

    def push(self, stream: int, op: Op) -> None:
        """Queue ``op`` on a stream.

        Args:
            stream: the stream's handle.
            op: the operation.
        """
        self.queues[stream].append(op)

    def idle(self, stream: Optional[int] = None) -> bool:
        """Whether a stream has nothing left to run.

        Args:
            stream: the stream's handle; None for every stream.

        Returns:
            True when its queue (every queue) is empty.
        """
        if stream is not None:
            return not self.queues.get(stream)
        return not any(self.queues.values())

    def advance(self, until: float) -> None:
        """Run everything that happens up to a time.

        Args:
            until: the host's clock, microseconds.
        """
        while self._step(until):
            pass
        self.now = max(self.now, until)
        self._settle()

    def run_until(self, done: Callable[[], bool]) -> float:
        """Run until ``done()`` holds. A wait on an event never recorded would never end:
        `labkit.LabkitError`.

        Args:
            done: a callable, true once the wait is over.

        Returns:
            The GPU time it first holds, microseconds.
        """
        while True:
            self._settle()
            if done():
                return self.now
            if not self._step(math.inf):
                raise LabkitError("the simulated GPU would wait forever (an event that is never recorded)")

    def rate(self, op: Op, running: int) -> float:
        """How fast a kernel runs beside ``running - 1`` others, in solo microseconds per microsecond:
        the GPU's throughput for ``running`` streams of its call, shared among them (rule 3).

        Args:
            op: the kernel.
            running: how many kernels run at once, this one included.

        Returns:
            Solo microseconds of work done per microsecond (1 alone); a speed nothing measured stops
            the GPU's clock (rule 12).
        """
        if running == 1:
            return 1.0
        s = (op.speedup or {}).get(running)
        if s is None:
            self._lack(
                f"GPU time of {op.call.label} on {running} streams at once",
                "run `python -m labkit bench sim-fidelity --calibrate` on that GPU (it times each "
                "sequence convolution on 1-4 streams at once)",
                self.now,
            )
            s = 1.0  # (the clock is stopped: no number after this is shown)
        return s / running

    # -- the steps --
    def _settle(self) -> None:
        """Complete what takes no time and can go now: marks reached, waits whose event is done."""
        moved = True
        while moved:
            moved = False
            for q in self.queues.values():
                while q and q[0].kind != KERNEL and q[0].ready <= self.now + EPS:
                    op = q[0]
                    if op.kind == WAIT and (op.event.at is None or op.event.at > self.now + EPS):
                        break
                    q.popleft()
                    moved = True
                    if op.kind == MARK:
                        op.done(self.now)

    def _step(self, limit: float) -> bool:
        """Run to the next moment a kernel ends or an operation becomes ready, at most to ``limit``;
        False when nothing happens before ``limit``."""
        self._settle()
        if limit <= self.now + EPS:
            return False
        heads = [q[0] for q in self.queues.values() if q]
        running: List[Op] = [op for op in heads if op.kind == KERNEL and op.ready <= self.now + EPS]
        later = [op.ready for op in heads if op.ready > self.now + EPS]
        if not running:
            nxt = min(later, default=math.inf)
            if nxt > limit:
                return False
            self.now = nxt
            return True
        rates = [self.rate(op, len(running)) for op in running]
        for op in running:
            if op.first and op.call.start is None:
                op.call.start = self.now
        t = min([self.now + op.work / r for op, r in zip(running, rates)] + later + [limit])
        for op, r in zip(running, rates):
            op.work -= r * (t - self.now)
        self.now = t
        for op in running:
            if op.work <= EPS * max(1.0, t):
                self.queues[op.call.stream].popleft()
                if op.last:
                    op.call.end = t
                    self._ended(op.call)
        return True
