"""The simulated GPU's sanitizer, after compute-sanitizer's racecheck and memcheck, on workspaces:
what each launched call was (`SimCall`) and what was found (`Finding`). The kinds are listed in
`labkit.simgpu.device`'s docstring. Bytes, microseconds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple


@dataclass
class SimCall:
    """One call launched on the simulated GPU (a graph's calls: one per launch), in microseconds.

    Attributes:
        id: its number, in launch order.
        stream: the stream's handle.
        label: the convolution and plan.
        ptr: its workspace; ``nbytes`` the plan's need.
        handed_at: host time it was launched (its workspace handed over just before).
        start: its first kernel's start; ``end`` its last kernel's end.
        timing_known: whether its times come from recorded numbers only.
        corrupt: its output is wrong (a race or a bad workspace).
        launch: "python" or "graph".
    """

    id: int
    stream: int
    label: str
    ptr: int
    nbytes: int
    handed_at: float
    start: float
    end: float
    timing_known: bool
    corrupt: bool = False
    launch: str = "python"


@dataclass
class Finding:
    """What the sanitizer found (see the module docstring for each ``kind``); times in microseconds."""

    kind: str
    message: str
    calls: Tuple[int, ...] = ()
    nbytes: int = 0
    at_us: float = math.nan
    timing_known: bool = True


class Sanitizer:
    """Checks every launched call's workspace as it is queued; keeps the calls still in flight."""

    def __init__(self):
        self.findings: List[Finding] = []
        self._active: List[SimCall] = []

    def find(
        self, kind: str, message: str, calls=(), nbytes: int = 0, at: float = math.nan, known=True
    ) -> None:
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
        """memcheck: the call's workspace lies in memory handed to it, and is large enough."""
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

    def racecheck(self, c: SimCall, stream) -> None:
        """racecheck: against the calls still in flight on other streams."""
        self._active = [d for d in self._active if d.end > c.handed_at]
        for d in self._active:
            shared = min(c.ptr + c.nbytes, d.ptr + d.nbytes) - max(c.ptr, d.ptr)
            if d.stream == c.stream or shared <= 0:
                continue
            known = c.timing_known and d.timing_known
            if c.start < d.end and d.start < c.end:
                c.corrupt = d.corrupt = True
                self.find(
                    "race",
                    f"calls {d.id} and {c.id} on streams 0x{d.stream:x} and 0x{c.stream:x} were in "
                    f"flight together on {shared:,} shared workspace bytes",
                    [d.id, c.id],
                    shared,
                    max(c.start, d.start),
                    known,
                )
            elif stream.floor < d.end:
                self.find(
                    "handover",
                    f"call {c.id} on stream 0x{c.stream:x} got {shared:,} B that call {d.id} on "
                    f"stream 0x{d.stream:x} could still be using, with nothing ordering them (timing hid "
                    "the race)",
                    [d.id, c.id],
                    shared,
                    c.handed_at,
                    known,
                )
        self._active.append(c)

    def check_release(self, ptr: int, nbytes: int, stream, at: float) -> None:
        """A block freed on ``stream`` at ``at`` while a call on another stream may still use it."""
        for d in self._active:
            if d.stream != stream.ptr and d.end > at and d.ptr < ptr + nbytes and ptr < d.ptr + d.nbytes:
                if stream.floor < d.end:
                    self.find(
                        "freed_in_use",
                        f"0x{ptr:x} freed on stream 0x{stream.ptr:x} while call {d.id} on "
                        f"stream 0x{d.stream:x} may still use it",
                        [d.id],
                        nbytes,
                        at,
                    )

    def leaks(self, allocs, pools) -> List[Finding]:
        """Bytes still held: cudaMalloc's buffers not freed, pools not released, as ``leak`` findings."""
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
