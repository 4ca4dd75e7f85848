"""A GPU simulated from a recording: `SimDevice`, the device seam (`labkit.gpu.device`) with every
time taken from a real GPU's recorded measurements, and a sanitizer on its workspaces.

The rules it models, each with the recorded measurement it rests on (`labkit.simgpu.recorded`
reads them; its ``SOURCES`` names every file and column):

1. **One host, one clock.** Every host call costs its recorded time (microseconds) and nothing
   else does: a strategy's own Python costs nothing here (the recording: under 1 us a call for
   fixed_arena, strategies.csv strategy_us_per_call on the H100).
2. **A stream is a queue.** An operation starts once it is launched, once the operation before it
   on its stream has ended, and once every event its stream waits for has completed.
3. **Streams run side by side at their solo speed.** race_timeline.csv, launch=graph: kernels
   running while the other stream's run take as long as with Python launches (median dur_us of
   the main convolution 4.93 against 4.96 us on the H100).
4. **A Python launch** of a call costs the host its plan's recorded launch time (one_conv's:
   strategies.csv median_us less strategy_us_per_call; a network's layers: network_report.csv
   host_us_per_call; the race's: race_timeline.csv; else kernels.csv host_us), its kernels
   launched evenly through it (strategy_timeline.csv: a call's cudaLaunchKernel rows spread across
   it); each kernel lasts its recorded kernel_us (a network's layer: one span of its plan's
   gpu_us, network_report.csv: its kernels are not recorded).
5. **A CUDA graph launch** costs the host ``graph_node`` per kernel (race_timeline.csv:
   cudaGraphLaunch dur_us over the graph's kernels) and its kernels start once it returns (there:
   the first kernel starts after cudaGraphLaunch ends). Capturing costs what launching from Python
   does (the same host code runs; its kernels are recorded, not run).
6. **cudaMalloc** costs its recorded time for its size (in 512-byte units); it does not wait for
   the device (the recording cannot tell: every recorded cudaMalloc found the device idle).
7. **cudaFree waits for every stream**, then costs its recorded time (strategy_timeline.csv,
   malloc_per_call: a cudaFree ends a median 75 us on the H100 after the last kernel, however
   early it began).
8. **cudaStreamSynchronize** waits for its stream, then costs its own recorded time
   (strategy_timeline.csv); an event completes once the work queued before it has run; its
   calls (record, query, wait, stream wait) and cudaDeviceSynchronize cost what the calibration
   measured (bench sim-fidelity --calibrate): the lesson recordings hold none of them.
9. **CuPy's pool** rounds requests to 512 B, reuses a block freed on the request's stream (best
   fit, split, merged back), cudaMallocs the rounded size on a miss; a request and its free cost
   ``caching_pool`` (strategies.csv cupy_pool: peak_bytes 25,764,352 for a 25,763,987 B workspace).
10. **The async pool** reserves whole 32 MiB chunks (strategies.csv async_pool: peak_bytes
    33,554,432 for a 25,763,987 B workspace, 100,663,296 = 32 + 64 MiB on growing_batch); a
    cudaFreeAsync runs in its stream's order; its block is reused by that stream at once, by
    another once the free has run.
11. **Memory**: the recording's gpu_memory_bytes, all free at the start (the CUDA context's share is
    not recorded); inputs and outputs take none. Past it, `labkit.OutOfMemory`.
12. **Never a made-up number.** A number the recording lacks stops the clock: the run goes on (its
    counts and bytes stay exact) but every time after it reads NaN, the findings after it are
    marked ``timing_known=False``, and ``missing`` says what a GPU run would have to record. Once
    the host has waited for every stream, `rebase` starts the clock again: what comes after no
    longer depends on what came before.
13. **Inside a capture** (`capture`) the calls on the capturing stream are recorded, not run, as
    CUDA does; what CUDA refuses there raises as on the GPU: a cudaFree (`labkit.NotCapturable`),
    a host wait (event, stream or device), an event recorded on the capturing stream or one from
    outside it waited for there (CUDA invalidates the capture). The async pool's requests become
    the graph's own memory (graph memory nodes: the pool's reserve does not grow, as bench
    sim-fidelity measured for async_pool with graph launches).

The sanitizer (compute-sanitizer's racecheck and memcheck, on workspaces) writes `Finding` s:
``race`` (two calls on different streams in flight at once on shared workspace bytes: both
outputs are marked corrupt), ``handover`` (bytes handed to a call while a call on another stream
could still use them, with nothing ordering the two: a race that timing hid), ``freed_in_use``,
``use_after_free``, ``too_small`` (a workspace smaller than the plan asks) and ``leak`` (bytes
still held, from `leaks`).
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

from ..errors import LabkitError, NotCapturable, NotRecorded, OutOfMemory
from ..gpu.device import POOL_KINDS, Device, Event, Pool
from ..gpu.device.base import CUDAFREE_IN_CAPTURE, check_request
from ..store import recordings
from .conv import SimBound, SimGraph, SimGraphExec, SimOperands
from .pools import AsyncPool, CachingPool
from .recorded import Recorded, load
from .sanitizer import Finding, Sanitizer, SimCall  # noqa: F401  (SimCall: the calls' records)

#: simulated addresses start here, 512-byte aligned (a CUDA allocation is at least 256-aligned)
BASE_ADDRESS = 0x7F0000000000


class SimStream:
    """A simulated stream: a handle (``ptr``) and the time its queued work ends (``tail``)."""

    def __init__(self, device: "SimDevice", ptr: int):
        self.device, self.ptr = device, ptr
        self.tail = 0.0  # when its last queued operation ends
        self.floor = 0.0  # its next operation starts no earlier (the events it waits for)

    def synchronize(self) -> None:
        """The host waits for this stream's work, then pays cudaStreamSynchronize (rule 8)."""
        self.device.sync_streams([self], "cudaStreamSynchronize")


class SimEvent(Event):
    """An event: the time the work queued before it on its stream ends."""

    def __init__(self, device: "SimDevice", stream: SimStream):
        self.device, self.stream = device, stream
        self.at = max(device.host_now, stream.tail, stream.floor)
        self.known = device.host_now < device.tainted_at

    def done(self) -> bool:
        """cudaEventQuery: whether that work has run by now."""
        self.device.counts["event_query"] += 1
        self.device.charge("cudaEventQuery")
        return self.at <= self.device.host_now

    def wait(self) -> None:
        """cudaEventSynchronize: the host waits for this event only."""
        self.device.counts["event_wait"] += 1
        self.device.refuse_in_capture("cudaEventSynchronize")
        self.device.host_now = max(self.device.host_now, self.at)
        self.device.charge("cudaEventSynchronize")


class SimDevice(Device):
    """A GPU simulated from a recording (see the module docstring for what it models).

    Args:
        recording: a shipped recording's name (e.g. "h100-sxm"), a `Recording`, or a `Recorded`;
            default the recording in use (`labkit.store.recordings.current`).
    """

    def __init__(self, recording=None):
        super().__init__()
        if recording is None:
            recording = recordings.current()
        self.recorded = recording if isinstance(recording, Recorded) else load(recording)
        self.host_now = 0.0
        self.tainted_at = math.inf
        self.missing: Dict[str, str] = {}  # what the recording lacks -> what a GPU run would record
        self.lacked: List[str] = []  # each time a lacking number was needed, in order
        self.calls: List[SimCall] = []
        self.sanitizer = Sanitizer()
        self._streams: Dict[int, SimStream] = {0: SimStream(self, 0)}
        self._allocs: Dict[int, Tuple[int, str]] = {}  # cudaMalloc's buffers -> (bytes, what)
        self._reservations: Dict[int, int] = {}  # all device memory taken: buffers and pool chunks
        self._freed: List[Tuple[int, int, float]] = []  # (ptr, bytes, host time) of frees
        self._pools: List[Pool] = []
        self._graph_memory: Dict[int, int] = {}  # graph memory nodes' addresses -> bytes
        self._next_ptr, self._reserved = BASE_ADDRESS, 0
        self._captured: List[SimBound] = []  # the calls of the capture under way
        self._graph_freed: List[int] = []  # graph memory the capture under way freed

    @property
    def name(self) -> str:
        """The recorded GPU's name."""
        return self.recorded.gpu

    @property
    def provenance(self) -> dict:
        """``mode`` "simulated", ``gpu``, ``label`` "simulated from the <GPU> recording", ``source``."""
        r = self.recorded.recording
        return {
            "mode": "simulated",
            "gpu": self.name,
            "label": self.recorded.label,
            "source": str(r.path),
            "date": r.metadata.get("date"),
        }

    # -- the clock (rules 1 and 12) --
    def charge(self, call: str, nbytes: int = 0) -> None:
        """Advance the host clock by ``call``'s recorded time; an unrecorded one stops the clock."""
        try:
            self.host_now += self.recorded.host_us(call, nbytes)
        except NotRecorded as exc:
            self.missing.setdefault(exc.what, exc.record)
            self.lacked.append(exc.what)
            self.tainted_at = min(self.tainted_at, self.host_now)

    def clock_us(self) -> float:
        """The simulated host clock (microseconds); NaN once a number the recording lacks was needed."""
        return self.host_now if self.host_now < self.tainted_at else math.nan

    def elapsed_us(self, start: Event, end: Event) -> float:
        """GPU time between two events (microseconds); NaN when either's time is not all recorded."""
        return end.at - start.at if start.known and end.known else math.nan

    def rebase(self) -> None:
        """Start a stopped clock again (rule 12). Every stream must be idle: the host waited for them.

        Times taken before and after a rebase must not be compared; `missing` keeps what was lacking.
        """
        if any(s.tail > self.host_now for s in self._streams.values()):
            raise LabkitError("rebase needs every stream idle: synchronise them first")
        self.tainted_at = math.inf

    # -- streams and events (rules 2 and 8) --
    def stream(self) -> SimStream:
        """A new stream."""
        s = SimStream(self, 0x5000 + len(self._streams))
        self._streams[s.ptr] = s
        return s

    def stream_of(self, ptr: int) -> SimStream:
        """The stream with handle ``ptr``."""
        if ptr not in self._streams:
            raise LabkitError(f"no stream 0x{ptr:x} on the simulated {self.name}")
        return self._streams[ptr]

    def stream_tail(self, stream: SimStream) -> float:
        """When the work queued on ``stream`` so far ends."""
        return max(self.host_now, stream.tail, stream.floor)

    def record_event(self, stream: SimStream) -> SimEvent:
        """cudaEventRecord on ``stream``."""
        self.counts["record_event"] += 1
        if self.capturing(stream):
            self.refuse_in_capture("cudaEventRecord on the capturing stream (an event node)")
        ev = SimEvent(self, stream)
        self.charge("cudaEventRecord")
        return ev

    def wait_event(self, stream: SimStream, event: SimEvent) -> None:
        """cudaStreamWaitEvent: ``stream``'s later work starts after ``event``."""
        self.counts["wait_event"] += 1
        if self.capturing(stream):
            raise LabkitError(
                "cudaStreamWaitEvent on a capturing stream for an event recorded outside the capture: "
                "CUDA invalidates the capture (order the launch instead: Device.order_at_launch)"
            )
        stream.floor = max(stream.floor, event.at)
        self.charge("cudaStreamWaitEvent")

    def synchronize(self) -> None:
        """cudaDeviceSynchronize: the host waits for every stream."""
        self.counts["synchronize"] += 1
        self.sync_streams(list(self._streams.values()), "cudaDeviceSynchronize")

    def sync_streams(self, streams: List[SimStream], call: str) -> None:
        """The host waits for ``streams``, then pays ``call``."""
        self.refuse_in_capture(call)
        self.host_now = max([self.host_now, *(self.stream_tail(s) for s in streams)])
        self.charge(call)

    def refuse_in_capture(self, call: str) -> None:
        """Rule 13: ``call`` cannot be made while a stream captures."""
        if self.capturing():
            raise LabkitError(f"{call} during a CUDA graph capture: CUDA refuses it (rule 13)")

    # -- memory (rules 6, 7, 11) --
    def reserve(self, nbytes: int, what: str) -> int:
        """Take ``nbytes`` of device memory at a new address (`labkit.OutOfMemory` past the total)."""
        if self._reserved + nbytes > self.recorded.memory_bytes:
            raise OutOfMemory(what, nbytes, self.free_bytes())
        ptr, self._next_ptr = self._next_ptr, self._next_ptr + -(-nbytes // 512) * 512
        self._reserved += nbytes
        self._reservations[ptr] = nbytes
        return ptr

    def unreserve(self, ptr: int) -> None:
        """Give back what `reserve` took at ``ptr``."""
        nbytes = self._reservations.pop(ptr)
        self._reserved -= nbytes
        self._freed.append((ptr, nbytes, self.host_now))

    def malloc_chunk(self, nbytes: int, what: str) -> int:
        """cudaMalloc's memory and cost, for a buffer or a caching pool's chunk (rule 6)."""
        ptr = self.reserve(nbytes, what)
        self.charge("cudaMalloc", nbytes)
        return ptr

    def free_chunk(self, ptr: int) -> None:
        """cudaFree's wait and cost, for a buffer or a caching pool's chunk (rule 7)."""
        if self.capturing():
            raise NotCapturable("cudaFree", CUDAFREE_IN_CAPTURE)
        self.host_now = max([self.host_now, *(self.stream_tail(s) for s in self._streams.values())])
        self.charge("cudaFree", self._reservations[ptr])
        self.unreserve(ptr)

    def allocate(self, nbytes: int, *, stream=None, what: str = "workspace") -> int:
        """cudaMalloc (rule 6)."""
        nbytes = check_request(nbytes, what)
        self.counts["allocate"] += 1
        if not nbytes:
            return 0
        ptr = self.malloc_chunk(nbytes, what)
        self._allocs[ptr] = (nbytes, what)
        return ptr

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then frees (rule 7)."""
        self.counts["free"] += 1
        if not ptr:
            return
        if ptr not in self._allocs:
            raise LabkitError(
                f"cudaFree(0x{ptr:x}): no cudaMalloc returned that address (or it was freed already)"
            )
        self.free_chunk(ptr)
        del self._allocs[ptr]

    def pool(self, kind: str) -> Pool:
        """A new pool: "caching" (rule 9) or "async" (rule 10)."""
        if kind not in POOL_KINDS:
            raise LabkitError(f"no {kind!r} pool: one of {', '.join(POOL_KINDS)}")
        p = CachingPool(self) if kind == "caching" else AsyncPool(self)
        self._pools.append(p)
        return p

    def free_bytes(self) -> int:
        """The recorded GPU's memory less what is taken now."""
        return self.recorded.memory_bytes - self._reserved

    def leaks(self) -> List[Finding]:
        """Bytes still held now (buffers not freed, pools not released), as ``leak`` findings."""
        return self.sanitizer.leaks(self._allocs, self._pools)

    # -- convolutions (rules 4 and 5) --
    def graph(self, spec, epilogue: str = "none") -> SimGraph:
        """The convolution's recorded plans (`labkit.NotRecorded` for one the recording lacks)."""
        return SimGraph(self, spec, epilogue)

    def operands(self, spec, epilogue: str = "none", *, seed: int = 0) -> SimOperands:
        """Operands that hold no numbers."""
        return SimOperands(spec, epilogue, seed)

    def _capture_native(self, fn, stream: SimStream) -> SimGraphExec:
        """The calls ``fn`` launches on ``stream``, recorded (rule 13)."""
        self._captured, self._graph_freed = [], []
        try:
            fn()
        finally:
            calls, self._captured, self._graph_freed = self._captured, [], []
        return SimGraphExec(self, calls)

    def graph_memory(self, nbytes: int) -> int:
        """A graph memory node's address: ``nbytes`` the graph owns (rule 13), outside every pool;
        an address the same capture freed before is used again (stream order)."""
        for ptr in self._graph_freed:
            if self._graph_memory[ptr] >= nbytes:
                self._graph_freed.remove(ptr)
                return ptr
        ptr = self.reserve(nbytes, "graph memory node")
        del self._reservations[ptr]  # the graph's, kept while it lives: not the strategy's to free
        self._graph_memory[ptr] = nbytes
        return ptr

    def graph_free(self, ptr: int) -> None:
        """A graph memory node's free, in the capture: later requests of the capture may use it."""
        self._graph_freed.append(ptr)

    def check(self, call: SimCall, stream: SimStream) -> None:
        """The sanitizer's memcheck and racecheck of a call just queued."""
        self.sanitizer.memcheck(call, self._allocs, self._pools, self._freed, self._graph_memory)
        self.sanitizer.racecheck(call, stream)

    @property
    def findings(self) -> List[Finding]:
        """What the sanitizer found so far (`Finding` s, in order)."""
        return self.sanitizer.findings

    def check_release(self, ptr: int, nbytes: int, stream: SimStream, at: float) -> None:
        """A block freed on ``stream`` at ``at``: the sanitizer checks no other stream still uses it."""
        self.sanitizer.check_release(ptr, nbytes, stream, at)

    def corrupted(self) -> int:
        """How many launched calls' outputs are corrupt."""
        return sum(c.corrupt for c in self.calls)
