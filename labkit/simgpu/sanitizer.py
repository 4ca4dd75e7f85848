"""The simulated GPU's sanitizer, after compute-sanitizer's racecheck and memcheck, on workspaces:
what each launched call was (`SimCall`), what orders calls on different streams (`Clocks`), and
what was found (`Finding`). The kinds are listed in `labkit.simgpu.device`'s docstring. Bytes,
microseconds.

Two calls on different streams are **ordered** when one happens before the other: an event
recorded after the first that the second's stream waited for, or a host wait for the first before
the second was launched (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
cudaFree), directly or through other streams. Vector clocks keep it (`Clocks`): per stream, how
many operations of every stream its next one comes after. Two calls that touch the same workspace
bytes and are not ordered are a hazard: a **race** once they ran at the same time (both outputs
corrupt), a **handover** when timing alone kept them apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

Clock = Dict[int, int]


def join(a: Clock, b: Clock) -> Clock:
    """The later of two vector clocks, stream by stream.

    Args:
        a: one clock (stream handle -> operations of that stream it comes after).
        b: the other.

    Returns:
        A new clock holding, per stream, the larger of the two counts.
    """
    out = dict(a)
    for k, v in b.items():
        if v > out.get(k, 0):
            out[k] = v
    return out


@dataclass(eq=False)
class SimCall:
    """One call launched on the simulated GPU (a graph's calls: one per launch), in microseconds.

    Attributes:
        id: its number, in launch order.
        stream: the stream's handle.
        label: the convolution and plan.
        ptr: its workspace; ``nbytes`` the plan's need.
        handed_at: host time it was launched (its workspace handed over just before).
        start: its first kernel's start; ``end`` its last kernel's end (None until it has run).
        timing_known: whether its times rest on measured numbers only (known once it has run).
        corrupt: its output is wrong (a race or a bad workspace).
        launch: "python" or "graph".
        after: what it is ordered after (its stream's vector clock when it was queued).
        seq: its last kernel's place in its stream's queue.
        nbytes: the plan's workspace need, bytes.
        end: its last kernel's end, microseconds (None until it has run).
        pending: calls on other streams that share its bytes, not ordered with it, whose hazard is
            named once both have run (`Sanitizer.ended`).
    """

    id: int
    stream: int
    label: str
    ptr: int
    nbytes: int
    handed_at: float
    start: Optional[float] = None
    end: Optional[float] = None
    timing_known: bool = True
    corrupt: bool = False
    launch: str = "python"
    after: Clock = field(default_factory=dict, repr=False)
    seq: int = 0
    pending: List["SimCall"] = field(default_factory=list, repr=False)

    def ordered_after(self, other: "SimCall") -> bool:
        """Whether this call comes after ``other`` (`Clocks`).

        Args:
            other: a call launched before this one.

        Returns:
            True when both are on one stream, or this call's clock covers ``other``'s last kernel.
        """
        return other.stream == self.stream or self.after.get(other.stream, 0) >= other.seq


@dataclass
class Finding:
    """What the sanitizer found (see the module docstring for each ``kind``); times in microseconds.

    Attributes:
        kind: "race", "handover", "freed_in_use", "use_after_free", "invalid_address", "too_small"
            or "leak".
        message: one sentence saying what happened, for the learner.
        calls: the ids (`SimCall.id`) of the calls involved, in launch order.
        nbytes: the bytes involved (shared, short, freed or leaked).
        at_us: the simulated time it happened, microseconds (NaN where it has none).
        timing_known: whether that time rests on measured numbers only (rule 12).
    """

    kind: str
    message: str
    calls: Tuple[int, ...] = ()
    nbytes: int = 0
    at_us: float = math.nan
    timing_known: bool = True


class Clocks:
    """What orders the streams: per stream its operations so far (``seq``) and its vector clock,
    and the host's (what it waited for)."""

    def __init__(self):
        self.seq: Dict[int, int] = {}
        self.stream: Dict[int, Clock] = {}
        self.host: Clock = {}

    def tick(self, stream: int) -> Clock:
        """An operation queued on ``stream`` now: its place, and the clock it comes after (the
        stream's own, and whatever the host waited for before queueing it).

        Args:
            stream: the stream's handle.

        Returns:
            The stream's clock with this operation counted (the dict `Clocks` keeps: not a copy).
        """
        self.seq[stream] = self.seq.get(stream, 0) + 1
        clock = self.stream[stream] = join(self.stream.get(stream, {}), self.host)
        clock[stream] = self.seq[stream]
        return clock

    def at_mark(self, stream: int) -> Clock:
        """The clock of an event recorded on ``stream`` now (after `tick`).

        Args:
            stream: the stream's handle.

        Returns:
            A copy of the stream's clock (empty for a stream with nothing queued).
        """
        return dict(self.stream.get(stream, {}))

    def wait(self, stream: int, clock: Clock) -> None:
        """``stream``'s later operations come after ``clock`` (cudaStreamWaitEvent).

        Args:
            stream: the waiting stream's handle.
            clock: the waited-for event's clock (`at_mark`).
        """
        self.stream[stream] = join(self.stream.get(stream, {}), clock)

    def host_waited(self, clock: Clock) -> None:
        """The host waited for ``clock`` (a synchronisation): all it launches later comes after it.

        Args:
            clock: what the host waited for (the streams' clocks joined).
        """
        self.host = join(self.host, clock)


class Sanitizer:
    """Checks every launched call's workspace as it is queued, and names a hazard once both calls
    have run (race or handover)."""

    def __init__(self):
        self.findings: List[Finding] = []
        self._active: List[SimCall] = []  # calls the host has not waited for: may meet later ones

    def find(
        self, kind: str, message: str, calls=(), nbytes: int = 0, at: float = math.nan, known=True
    ) -> None:
        """Write a `Finding` down.

        Args:
            kind: its kind (see `Finding`).
            message: the sentence that says what happened.
            calls: the ids of the calls involved.
            nbytes: the bytes involved.
            at: the simulated time, microseconds (NaN where it has none).
            known: whether that time rests on measured numbers only.
        """
        self.findings.append(Finding(kind, message, tuple(calls), nbytes, at, known))

    def _holder(self, ptr: int, allocs, pools, freed, graphs=None) -> Tuple[Optional[Tuple[int, int]], str]:
        """(start, bytes) of what holds ``ptr`` and its state: "buffer", "graph" (a graph memory
        node's), "block" (a pool's, in use), "pooled" (in a pool's chunk, handed back to the pool),
        "freed" or "nothing"."""
        for p, (n, _) in allocs.items():
            if p <= ptr < p + n:
                return (p, n), "buffer"
        for p, n in (graphs or {}).items():
            if p <= ptr < p + n:
                return (p, n), "graph"
        for pool in pools:
            b = pool.in_use(ptr)
            if b is not None:
                return (b.ptr, b.nbytes), "block"
            if any(c <= ptr < c + n for c, n in pool.chunks.items()):
                return None, "pooled"
        return None, "freed" if any(p <= ptr < p + n for p, n, _ in freed) else "nothing"

    def memcheck(self, c: SimCall, allocs, pools, freed, graphs=None) -> None:
        """memcheck: the call's workspace lies in memory handed to it, and is large enough.

        A failing call gets a ``use_after_free``, ``invalid_address`` or ``too_small`` finding and is
        marked corrupt (a block handed back to its pool is not: the pool's memory is still right
        unless someone else writes it).

        Args:
            c: the call just queued.
            allocs: cudaMalloc's buffers, address -> (bytes, what).
            pools: the device's pools (`labkit.simgpu.pools`).
            freed: (address, bytes, host time) of every give-back, in order.
            graphs: graph memory nodes, address -> bytes (None: none).
        """
        held, state = self._holder(c.ptr, allocs, pools, freed, graphs)
        if held is None:
            what = {
                "pooled": "was handed back to its pool before the call ran: the pool may hand it out again",
                "freed": "was freed before the call ran",
                "nothing": "is no allocation",
            }[state]
            kind = "invalid_address" if state == "nothing" else "use_after_free"
            self.find(
                kind, f"call {c.id} ({c.label}) got workspace 0x{c.ptr:x}, which {what}", [c.id], c.nbytes
            )
            c.corrupt = state != "pooled"  # still the pool's memory: right unless someone else writes it
        elif held[0] + held[1] < c.ptr + c.nbytes:
            short = c.ptr + c.nbytes - held[0] - held[1]
            self.find(
                "too_small",
                f"call {c.id} ({c.label}) needs {c.nbytes:,} B of workspace; its buffer "
                f"ends {short:,} B short",
                [c.id],
                short,
            )
            c.corrupt = True

    def racecheck(self, c: SimCall, host: Clock) -> None:
        """racecheck: ``c`` against every call on another stream that shares its bytes and that it
        does not come after; each pair is named once both have run (`ended`).

        Args:
            c: the call just queued.
            host: what the host has waited for (calls it covers can meet no later call).
        """
        self._active = [d for d in self._active if host.get(d.stream, 0) < d.seq]
        for d in self._active:
            if d.stream == c.stream or c.ordered_after(d):
                continue
            if min(c.ptr + c.nbytes, d.ptr + d.nbytes) > max(c.ptr, d.ptr):
                c.pending.append(d)
                d.pending.append(c)
        self._active.append(c)

    def ended(self, c: SimCall) -> None:
        """``c`` has run: name each hazard whose other call has run too.

        A pair in flight at once is a ``race`` (both marked corrupt); one that timing alone kept
        apart is a ``handover``.

        Args:
            c: the call whose last kernel just ended (its ``start`` and ``end`` set).
        """
        for d in [d for d in c.pending if d.end is not None]:
            c.pending.remove(d)
            d.pending.remove(c)
            first, then = (d, c) if d.id < c.id else (c, d)
            shared = min(c.ptr + c.nbytes, d.ptr + d.nbytes) - max(c.ptr, d.ptr)
            known = c.timing_known and d.timing_known
            if c.start < d.end and d.start < c.end:
                c.corrupt = d.corrupt = True
                self.find(
                    "race",
                    f"calls {first.id} and {then.id} on streams 0x{first.stream:x} and 0x{then.stream:x} "
                    f"were in flight together on {shared:,} shared workspace bytes",
                    [first.id, then.id],
                    shared,
                    max(c.start, d.start),
                    known,
                )
            else:
                self.find(
                    "handover",
                    f"call {then.id} on stream 0x{then.stream:x} got {shared:,} B that call {first.id} on "
                    f"stream 0x{first.stream:x} could still be using, with nothing ordering them (timing hid "
                    "the race)",
                    [first.id, then.id],
                    shared,
                    then.handed_at,
                    known,
                )

    def check_release(self, ptr: int, nbytes: int, stream: int, after: Clock, at: float) -> None:
        """A block freed on ``stream`` (its free ordered after ``after``) while a call on another
        stream, not ordered before the free, may still use it: a ``freed_in_use`` finding per such call.

        Args:
            ptr: the block's address.
            nbytes: its size, bytes.
            stream: the handle of the stream it was freed on.
            after: that stream's clock at the free (what the free comes after).
            at: the host time of the free, microseconds.
        """
        for d in self._active:
            if d.stream != stream and after.get(d.stream, 0) < d.seq:
                if d.ptr < ptr + nbytes and ptr < d.ptr + d.nbytes:
                    self.find(
                        "freed_in_use",
                        f"0x{ptr:x} freed on stream 0x{stream:x} while call {d.id} on "
                        f"stream 0x{d.stream:x} may still use it",
                        [d.id],
                        nbytes,
                        at,
                    )

    def leaks(self, allocs, pools) -> List[Finding]:
        """Bytes still held: cudaMalloc's buffers not freed, pools not released, as ``leak`` findings.

        Args:
            allocs: cudaMalloc's buffers still held, address -> (bytes, what).
            pools: the device's pools.

        Returns:
            One ``leak`` `Finding` per buffer and per pool that holds bytes (not added to `findings`).
        """
        out = [
            Finding("leak", f"{n:,} B of {what} at 0x{p:x} never freed", nbytes=n)
            for p, (n, what) in allocs.items()
        ]
        for pool in pools:
            if pool.held_bytes():
                out.append(
                    Finding(
                        "leak",
                        f"{pool.held_bytes():,} B held by a {pool.kind} pool",
                        nbytes=pool.held_bytes(),
                    )
                )
        return out
