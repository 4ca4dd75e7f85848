"""A GPU simulated from a recording: `SimDevice`, the device seam (`labkit.gpu.device`) with every
time taken from a real GPU's measurements, and a sanitizer on its workspaces.

The rules it models, each with the measurement it rests on (`labkit.simgpu.recorded` reads them;
its ``SOURCES`` names every file and column; ``sim_costs`` is data/bench/sim_costs_<gpu>.csv, the
seam's calls timed on that GPU by ``bench sim-fidelity --calibrate``, read before the recording):

1. **One host, one clock.** Every host call costs its measured time (microseconds) and nothing
   else does: a strategy's own Python costs nothing here (the recording: under 3 us a call for
   fixed_arena, strategies.csv strategy_us_per_call on both GPUs).
2. **A stream is a queue.** An operation starts once it is launched, once the operation before it
   on its stream has ended, and once every event its stream waits for has completed. Times are
   worked out as far as the host needs them and no further (`labkit.simgpu.timeline`): a call
   launched later may still slow one running now (rule 3).
3. **Streams share the GPU.** While kernels run on k streams at once, each runs at s_k / k of its
   solo speed, s_k being the throughput of k streams of its call against one, as measured
   (sim_costs call_gpu: gpu_us per call of k streams each replaying its own CUDA graph of the call,
   s_k = gpu_us(1 stream) / gpu_us(k streams)). Lesson 06's race kernels, small, run beside each
   other at their solo speed (race_timeline.csv, launch=graph: median dur_us of the main
   convolution 4.96 against 4.99 us with Python launches on the H100): s_2 = 2 for them where the
   calibration has no figure. A call with no figure for k streams stops the clock (rule 12).
4. **A Python launch** of a call costs the host its measured launch time: sim_costs python_launch
   (host_us: back-to-back `Runner.run` calls of the convolution on one stream, a warm workspace,
   the median), else sim_costs runner_launch (one call after a synchronisation), else the
   recording (one_conv's: strategies.csv median_us less strategy_us_per_call; a network's layers:
   network_report.csv host_us_per_call; the race's: race_timeline.csv; else kernels.csv host_us).
   Its kernels are launched evenly through it (strategy_timeline.csv: a call's cudaLaunchKernel
   rows spread across it). Each kernel lasts its recorded kernel_us, scaled so that a call's
   kernels add up to its measured GPU time per call where the calibration has it (sim_costs
   call_gpu, 1 stream: back-to-back graph replays, the gaps between kernels included), else to its
   plan's time per replayed call (plans.csv gpu_us: a traced call can run more, e.g. eng1's 412 us
   setup kernel, than each call of a replay does); a network's layer is one span of that time
   (network_report.csv gpu_us where not calibrated: its kernels are not recorded). The first launch
   bound to a workspace address costs the measured bind time too
   (sim_costs bind; the recordings time calls already bound, so without it a bind costs nothing).
5. **A CUDA graph launch** costs the host what sim_costs graph_launch measured for a graph of that
   many calls (linear between the sizes measured; a call of a plan it did not measure costs the
   median per-call part of those it measured), else ``graph_node`` per kernel
   (race_timeline.csv: cudaGraphLaunch dur_us over the graph's kernels); its kernels start once it
   returns (there: the first kernel starts after cudaGraphLaunch ends). Capturing costs what
   launching from Python does (the same host code runs; its kernels are recorded, not run).
6. **cudaMalloc** costs its measured time for its size (in 512-byte units: sim_costs cudaMalloc,
   else strategy_timeline.csv). It waits for every stream first where sim_costs
   cudaMalloc_behind_busy_stream took the hold ahead of it (gpu_us) or longer; else (no such
   measurement: every recorded cudaMalloc found the device idle) it does not wait.
7. **cudaFree waits for every stream**, then costs its measured time (sim_costs cudaFree, else
   strategy_timeline.csv, malloc_per_call: a cudaFree ends a median 78 us on the H100 after the
   last kernel, however early it began).
8. **cudaStreamSynchronize** waits for its stream, then costs its own measured time; an event
   completes once the work queued before it has run; its calls (record, query, wait, stream wait)
   and cudaDeviceSynchronize cost what sim_costs measured (the lesson recordings hold none).
9. **CuPy's pool** rounds requests to 512 B, reuses a block freed on the request's stream (best
   fit, split, merged back), cudaMallocs the rounded size on a miss; a request and its free cost
   ``caching_pool`` (strategies.csv cupy_pool: peak_bytes 25,764,352 for a 25,763,987 B workspace).
10. **The async pool** reserves whole 32 MiB chunks (strategies.csv async_pool: peak_bytes
    33,554,432 for a 25,763,987 B workspace, 100,663,296 = 32 + 64 MiB on growing_batch). A
    cudaFreeAsync runs in its stream's order; its block is reused by that stream at once, by
    another stream once the free has run; what a chunk never handed out is free to every stream.
    A block whose free has not run yet is not taken from another stream: CUDA's pool inserts such a
    dependency only when it cannot grow (cudaMemPoolReuseAllowInternalDependencies), so it grows.
11. **Memory**: the recording's gpu_memory_bytes, all free at the start (the CUDA context's share is
    not recorded); inputs and outputs take none. Past it, `labkit.OutOfMemory`.
12. **Never a made-up number.** A number nothing measured stops the clock where it was needed: a
    host call's stops the host's clock (every host time after it reads NaN), a kernel's speed the
    GPU's (every GPU time after it, and the host's once it waits for the GPU past that point). The
    run goes on (its counts and bytes stay exact), the calls after it are marked
    ``timing_known=False``, and ``missing`` says what a GPU run would have to record. Once the host
    has waited for every stream, `rebase` starts the clock again: what comes after no longer
    depends on what came before.
13. **Inside a capture** (`capture`) the calls on the capturing stream are recorded, not run, as
    CUDA does; what CUDA refuses there raises as on the GPU: a cudaFree (`labkit.NotCapturable`),
    a host wait (event, stream or device), an event recorded on the capturing stream or one from
    outside it waited for there (CUDA invalidates the capture). The async pool's requests become
    the graph's own memory (graph memory nodes: the pool's reserve does not grow, as bench
    sim-fidelity measured for async_pool with graph launches).

The sanitizer (compute-sanitizer's racecheck and memcheck, on workspaces:
`labkit.simgpu.sanitizer`) writes `Finding` s: ``race`` (two calls on different streams, not
ordered by an event or a host wait, in flight at once on shared workspace bytes: both outputs are
marked corrupt), ``handover`` (two such calls that timing alone kept apart: a hidden race),
``freed_in_use``, ``use_after_free``, ``too_small`` (a workspace smaller than the plan asks) and
``leak`` (bytes still held, from `leaks`).
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

from ..errors import LabkitError, NotCapturable, NotRecorded
from ..gpu.buffers.sizes import check_request
from ..gpu.device import POOL_KINDS, Device, Event, Pool
from ..gpu.device.base import CUDAFREE_IN_CAPTURE
from ..store import recordings
from .conv import SimBound, SimGraph, SimGraphExec, SimOperands
from .memory import DeviceMemory
from .pools import AsyncPool, CachingPool
from .recorded import Recorded, load
from .sanitizer import Clocks, Finding, Sanitizer, SimCall, join
from .timeline import MARK, WAIT, Op, Timeline


class SimStream:
    """A simulated stream: a handle (``ptr``); its queue is the device's `Timeline`'s.

    Args:
        device: the `SimDevice` it belongs to.
        ptr: its handle (0 for the default stream).
    """

    def __init__(self, device: "SimDevice", ptr: int):
        self.device, self.ptr = device, ptr

    def synchronize(self) -> None:
        """The host waits for this stream's work, then pays cudaStreamSynchronize (rule 8)."""
        sync_streams(self.device, [self], "cudaStreamSynchronize")

    def __enter__(self):  # ``with stream:`` makes a CuPy stream current; every simulated call names its own
        return self

    def __exit__(self, *exc):
        return False


class SimEvent(Event):
    """An event recorded on a stream: ``at``, the time the stream reaches it (None until it has).

    Queued on the stream when made (the caller pays cudaEventRecord: `SimDevice.record_event`).

    Args:
        device: the `SimDevice`.
        stream: the stream it is recorded on.
    """

    def __init__(self, device: "SimDevice", stream: SimStream):
        self.device, self.stream = device, stream
        self.at = None
        self.clock = device.queue(stream, Op(MARK, device.host_now, done=self._reached))

    def _reached(self, t: float) -> None:
        self.at = t

    @property
    def known(self) -> bool:
        """Whether its time rests on measured numbers only (rule 12)."""
        return self.at is not None and self.at < self.device.gpu_known_until

    def done(self) -> bool:
        """cudaEventQuery: whether that work has run by now.

        Returns:
            True once the stream has reached the event at the host's current time.
        """
        self.device.counts["event_query"] += 1
        self.device.timeline.advance(self.device.host_now)
        self.device.charge("cudaEventQuery")
        return self.at is not None

    def wait(self) -> None:
        """cudaEventSynchronize: the host waits for this event only."""
        self.device.counts["event_wait"] += 1
        refuse_in_capture(self.device, "cudaEventSynchronize")
        self.device.host_waits(lambda: self.at is not None, self.clock)
        self.device.charge("cudaEventSynchronize")


class Allocations:
    """cudaMalloc, cudaFree and the pools of a `SimDevice` (rules 6, 7, 9, 10 and 11): what is held,
    and the waits and costs of taking memory and giving it back, on the device's clock.

    Args:
        device: the `SimDevice` (its clock, streams and `DeviceMemory`).

    Attributes:
        buffers: cudaMalloc's buffers still held, address -> (bytes, what).
        pools: every pool made, in order.
    """

    def __init__(self, device: "SimDevice"):
        self.device = device
        self.buffers: Dict[int, Tuple[int, str]] = {}
        self.pools: List[Pool] = []

    def malloc_chunk(self, nbytes: int, what: str) -> int:
        """cudaMalloc's wait, memory and cost, for a buffer or a caching pool's chunk (rule 6).

        Args:
            nbytes: the size, bytes.
            what: what it is for, named in `labkit.OutOfMemory`.

        Returns:
            The chunk's simulated address.
        """
        dev = self.device
        if dev.recorded.malloc_waits(nbytes) and not dev.capturing():
            wait_for_streams(dev, list(dev._streams.values()))
        ptr = dev.memory.reserve(nbytes, what)
        dev.charge("cudaMalloc", nbytes)
        return ptr

    def free_chunk(self, ptr: int) -> None:
        """cudaFree's wait and cost, for a buffer or a caching pool's chunk (rule 7).

        Args:
            ptr: the address `malloc_chunk` returned.
        """
        dev = self.device
        if dev.capturing():
            raise NotCapturable("cudaFree", CUDAFREE_IN_CAPTURE)
        wait_for_streams(dev, list(dev._streams.values()))
        dev.charge("cudaFree", dev.memory.reservations[ptr])
        dev.memory.unreserve(ptr, dev.host_now)

    def allocate(self, nbytes: int, what: str = "workspace") -> int:
        """cudaMalloc (rule 6).

        Args:
            nbytes: the size, bytes (0: no call, address 0).
            what: what it is for, named in `labkit.OutOfMemory`.

        Returns:
            The buffer's simulated address.
        """
        nbytes = check_request(nbytes, what)
        self.device.counts["allocate"] += 1
        if not nbytes:
            return 0
        ptr = self.malloc_chunk(nbytes, what)
        self.buffers[ptr] = (nbytes, what)
        return ptr

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then frees (rule 7).

        Args:
            ptr: an address `allocate` returned (0: nothing to free).
        """
        if not ptr:
            self.device.counts["free"] += 1
            return
        if ptr not in self.buffers:
            raise LabkitError(
                f"cudaFree(0x{ptr:x}): no cudaMalloc returned that address (or it was freed already)"
            )
        self.free_chunk(ptr)
        self.device.counts["free"] += 1
        del self.buffers[ptr]

    def pool(self, kind: str) -> Pool:
        """A new pool: "caching" (rule 9) or "async" (rule 10).

        Args:
            kind: "caching" or "async".

        Returns:
            The pool (`labkit.simgpu.pools.CachingPool` or `AsyncPool`), kept for `SimDevice.leaks`.
        """
        if kind not in POOL_KINDS:
            raise LabkitError(f"no {kind!r} pool: one of {', '.join(POOL_KINDS)}")
        p = CachingPool(self.device) if kind == "caching" else AsyncPool(self.device)
        self.pools.append(p)
        return p


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
        self.tainted_at = math.inf  # host times from here on rest on a number nothing measured
        self.gpu_tainted_at = math.inf  # GPU times from here on do
        self.missing: Dict[str, str] = {}  # what the recording lacks -> what a GPU run would record
        self.lacked: List[str] = []  # each number lacking since the last rebase, in order
        self.calls: List[SimCall] = []
        self.sanitizer = Sanitizer()
        self.clocks = Clocks()
        self.timeline = Timeline(lambda what, record, at: self.lack(what, record, at, gpu=True), self._ended)
        self._streams: Dict[int, SimStream] = {0: SimStream(self, 0)}
        self.memory = DeviceMemory(self.recorded.memory_bytes)
        self.allocations = Allocations(self)
        self._captured: List[SimBound] = []  # the calls of the capture under way
        self._graphs: Dict[tuple, SimGraph] = {}  # (spec, epilogue) -> its recorded plans, read once

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
        """Advance the host clock by ``call``'s measured time; an unmeasured one stops the clock.

        Args:
            call: the host call (a `labkit.simgpu.recorded.SOURCES` key or a CUDA call's name).
            nbytes: its size where its cost depends on it (allocations), bytes; 0 otherwise.
        """
        try:
            self.host_now += self.recorded.host_us(call, nbytes)
        except NotRecorded as exc:
            self.lack(exc.what, exc.record, self.host_now)

    def lack(self, what: str, record: str, at: float, gpu: bool = False) -> None:
        """A number nothing measured was needed at time ``at``: the clock stops there (rule 12), the
        host's, or (``gpu``) the GPU's: the host's then stops once it waits for what the GPU did
        after ``at``.

        Args:
            what: the number that was lacking (it goes to `missing`).
            record: what a GPU run would have to record to give it.
            at: the simulated time it was needed, microseconds.
            gpu: True when it is the GPU's time that stops, False the host's.
        """
        self.missing.setdefault(what, record)
        if what not in self.lacked:
            self.lacked.append(what)
        if gpu:
            self.gpu_tainted_at = min(self.gpu_tainted_at, at)
        else:
            self.tainted_at = min(self.tainted_at, at)

    @property
    def gpu_known_until(self) -> float:
        """GPU times before this rest on measured numbers only (after it, a kernel launched or a
        speed taken from a number nothing measured may have moved them)."""
        return min(self.tainted_at, self.gpu_tainted_at)

    def clock_us(self) -> float:
        """The simulated host clock (microseconds); NaN once a number nothing measured was needed."""
        return self.host_now if self.host_now < self.tainted_at else math.nan

    def elapsed_us(self, start: Event, end: Event) -> float:
        """GPU time between two completed events (microseconds); NaN when either's time is not all
        measured."""
        if start.at is None or end.at is None:
            raise LabkitError(
                "cudaEventElapsedTime of an event not yet complete (cudaErrorNotReady): "
                "wait for the later event first (its .wait(), cudaEventSynchronize)"
            )
        return end.at - start.at if start.known and end.known else math.nan

    def rebase(self) -> None:
        """Start a stopped clock again (rule 12). Every stream must be idle: the host waited for them.

        Times taken before and after a rebase must not be compared; `missing` keeps what was lacking.
        """
        if not self.timeline.idle():
            raise LabkitError("rebase needs every stream idle: synchronise them first")
        self.tainted_at = self.gpu_tainted_at = math.inf
        self.lacked = []

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

    def queue(self, stream: SimStream, op: Op) -> dict:
        """Queue ``op`` on ``stream`` once the GPU has run up to now.

        Args:
            stream: the stream.
            op: the operation (`labkit.simgpu.timeline.Op`).

        Returns:
            The stream's vector clock with ``op`` counted (`labkit.simgpu.sanitizer.Clocks.tick`).
        """
        self.timeline.advance(self.host_now)
        self.timeline.push(stream.ptr, op)
        return self.clocks.tick(stream.ptr)

    def record_event(self, stream: SimStream) -> SimEvent:
        """cudaEventRecord on ``stream``."""
        self.counts["record_event"] += 1
        if self.capturing(stream):
            refuse_in_capture(self, "cudaEventRecord on the capturing stream (an event node)")
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
        self.queue(stream, Op(WAIT, self.host_now, event=event))
        self.clocks.wait(stream.ptr, event.clock)
        self.charge("cudaStreamWaitEvent")

    def synchronize(self) -> None:
        """cudaDeviceSynchronize: the host waits for every stream."""
        self.counts["synchronize"] += 1
        sync_streams(self, list(self._streams.values()), "cudaDeviceSynchronize")

    def host_waits(self, done, clock: dict) -> None:
        """The host waits until ``done()``; what it waited for (``clock``) orders all it launches next.
        A wait that ends at a GPU time not all measured stops the host's clock (rule 12).

        Args:
            done: a callable that is true once the wait is over.
            clock: the vector clock of what it waits for (`labkit.simgpu.sanitizer.Clocks`).
        """
        self.timeline.advance(self.host_now)
        until = self.timeline.run_until(done)
        if until >= self.gpu_known_until:
            self.tainted_at = min(self.tainted_at, self.host_now)
        self.host_now = max(self.host_now, until)
        self.clocks.host_waited(clock)

    # -- memory (rules 6, 7, 9-11: `Allocations`, `DeviceMemory`) --
    def allocate(self, nbytes: int, *, stream=None, what: str = "workspace") -> int:
        """cudaMalloc (rule 6): `Allocations.allocate`."""
        return self.allocations.allocate(nbytes, what)

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then frees (rule 7): `Allocations.free`."""
        self.allocations.free(ptr)

    def pool(self, kind: str) -> Pool:
        """A new pool: "caching" (rule 9) or "async" (rule 10): `Allocations.pool`."""
        return self.allocations.pool(kind)

    def free_bytes(self) -> int:
        """The recorded GPU's memory less what is taken now."""
        return self.memory.free_bytes()

    def leaks(self) -> List[Finding]:
        """Bytes still held now (buffers not freed, pools not released), as ``leak`` findings.

        Returns:
            One ``leak`` `Finding` per buffer and per pool holding bytes (not added to `findings`).
        """
        return self.sanitizer.leaks(self.allocations.buffers, self.allocations.pools)

    # -- convolutions (rules 4 and 5) --
    def graph(self, spec, epilogue: str = "none") -> SimGraph:
        """The convolution's recorded plans (`labkit.NotRecorded` for one the recording lacks).

        Read once per convolution, as the live device keeps each built graph: a `SimGraph` holds
        only what the recording says, so every call of the same convolution shares it (costs no
        simulated time either way).
        """
        key = (spec, epilogue)
        found = self._graphs.get(key)
        if found is None:
            found = self._graphs[key] = SimGraph(self, spec, epilogue)
        return found

    def operands(self, spec, epilogue: str = "none", *, seed: int = 0) -> SimOperands:
        """Operands that hold no numbers."""
        return SimOperands(spec, epilogue, seed)

    def check(self, call: SimCall) -> None:
        """The sanitizer's memcheck and racecheck of a call just queued.

        Args:
            call: the call (`labkit.simgpu.sanitizer.SimCall`).
        """
        m = self.memory
        self.sanitizer.memcheck(call, self.allocations.buffers, self.allocations.pools, m.freed, m.graph)
        self.sanitizer.racecheck(call, self.clocks.host)

    def _ended(self, call: SimCall) -> None:
        call.timing_known = call.end < self.gpu_known_until
        self.sanitizer.ended(call)

    def _capture_native(self, fn, stream: SimStream) -> SimGraphExec:
        """The calls ``fn`` launches on ``stream``, recorded (rule 13)."""
        self._captured = []
        self.memory.new_capture()
        try:
            fn()
        finally:
            calls, self._captured = self._captured, []
        return SimGraphExec(self, calls)

    @property
    def findings(self) -> List[Finding]:
        """What the sanitizer found so far (`Finding` s, in order; a hazard once both calls ran)."""
        return self.sanitizer.findings

    def corrupted(self) -> int:
        """How many launched calls' outputs are corrupt.

        Returns:
            The count, over every call launched on this device.
        """
        return sum(c.corrupt for c in self.calls)


def sync_streams(device: SimDevice, streams: List[SimStream], call: str) -> None:
    """The host waits for ``streams``, then pays ``call`` (rule 8).

    Args:
        device: the simulated GPU.
        streams: the streams waited for.
        call: the CUDA call whose measured time the host pays (e.g. "cudaStreamSynchronize").
    """
    refuse_in_capture(device, call)
    wait_for_streams(device, streams)
    device.charge(call)


def wait_for_streams(device: SimDevice, streams: List[SimStream]) -> None:
    """The host waits until ``streams`` are idle (no cost of its own).

    Args:
        device: the simulated GPU.
        streams: the streams waited for.
    """
    clock: dict = {}
    for s in streams:
        clock = join(clock, device.clocks.stream.get(s.ptr, {}))
    device.host_waits(lambda: all(device.timeline.idle(s.ptr) for s in streams), clock)


def refuse_in_capture(device: SimDevice, call: str) -> None:
    """Rule 13: ``call`` cannot be made while a stream captures (`labkit.LabkitError` if one does).

    Args:
        device: the simulated GPU.
        call: the CUDA call's name, for the error.
    """
    if device.capturing():
        raise LabkitError(f"{call} during a CUDA graph capture: CUDA refuses it (rule 13)")
