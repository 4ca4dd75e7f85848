"""`Practice`: the device seam (`labkit.gpu.device`) as a hands-on cell calls it, with a log a check reads.

Each call goes to one seam call of the device underneath (this GPU's `CudaDevice` or a simulated
`labkit.simgpu.SimDevice`) and is written down: what was allocated and freed, every call launched
(`Launch`), every time taken between two events (`Timing`), and what was refused or misused
(`labkit.practice.findings.Problem`). Live, a call whose workspace is smaller than its plan asks
is refused (cuDNN would write past the buffer); simulated, it runs and the simulator's sanitizer
names it, as compute-sanitizer would. Sizes in bytes, times in microseconds.

On a simulated GPU a number the recording lacks stops the clock (`labkit.simgpu.device`, rule 12):
the times after it read NaN, also when read once the clock has started again. The clock starts again
once the host has waited for every stream (`SimDevice.rebase`); a time between two events on either
side of such a restart reads NaN too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .. import env
from ..errors import InvalidSpec, LabkitError
from ..gpu import device as devices
from ..gpu.device import Device
from ..simgpu import SimDevice
from .conv import Conv, Pending
from .findings import Problem, collect, mark
from .lesson_calls import LessonCalls
from .memory import Memory
from .runner import PracticeRunner


@dataclass
class Launch:
    """One call launched (`Practice.log`).

    Attributes:
        id: its place in the log, from 0.
        conv: its convolution's label.
        plan_index: its plan's index.
        workspace_bytes: the workspace its plan asks for, bytes.
        stream: its stream's handle.
        workspace: its workspace's address; None when a strategy chose it.
        output: the output slot it writes.
        graph: launched as part of a CUDA graph.
        sim: the simulator's record of it (`labkit.simgpu.SimCall`); None live.
        host_us: the host's time to launch it, microseconds (NaN where not timed).
    """

    id: int
    conv: str
    plan_index: int
    workspace_bytes: int
    stream: int
    workspace: Optional[int]
    output: int
    graph: bool = False
    sim: object = None
    host_us: float = math.nan


@dataclass
class Timing:
    """A time taken between two events: the launches between them (how many, their plans, what they
    ran: each one's convolution label, and how many a CUDA graph replayed) and the microseconds measured.

    Attributes:
        calls: how many calls were launched between the two events.
        plans: their plans' indices, in launch order.
        us: the GPU time between the events, microseconds (NaN where not all measured).
        convs: their convolutions' labels, in launch order.
        replayed: how many of the calls a CUDA graph's launch ran (`Graph.launch`); the others were
            launched one by one.
    """

    calls: int
    plans: Tuple[int, ...]
    us: float
    convs: Tuple[str, ...] = ()
    replayed: int = 0


class Stream:
    """A stream of a `Practice` (``.synchronize()``; ``.raw`` is the seam's stream, ``.ptr`` its handle).

    Args:
        practice: the `Practice` it belongs to.
        raw: the seam's stream.
    """

    def __init__(self, practice: "Practice", raw):
        self.practice, self.raw = practice, raw

    @property
    def ptr(self) -> int:
        """The stream's handle."""
        return int(self.raw.ptr)

    def synchronize(self) -> None:
        """The host waits for this stream's work (cudaStreamSynchronize)."""
        self.raw.synchronize()
        self.practice.waited()


class Event:
    """An event recorded on a stream: ``.wait()`` (the host waits for it), ``.done()``.

    Args:
        practice: the `Practice` it belongs to.
        raw: the seam's event.
        stream: the handle of the stream it was recorded on.
    """

    def __init__(self, practice: "Practice", raw, stream: int):
        self.practice, self.raw, self.stream = practice, raw, stream
        self.index, self.epoch = len(practice.launches), practice.epoch

    def wait(self) -> None:
        """cudaEventSynchronize: the host waits until the work before the event has run."""
        self.raw.wait()
        self.practice.waited()

    def done(self) -> bool:
        """cudaEventQuery.

        Returns:
            Whether the work before the event has run.
        """
        return self.raw.done()


class Graph:
    """A captured CUDA graph: ``.launch(stream)`` runs its calls again.

    Args:
        practice: the `Practice` it belongs to.
        raw: the seam's captured graph.
        calls: the calls captured (`Pending`), in order.
    """

    def __init__(self, practice: "Practice", raw, calls: List[Pending]):
        self.practice, self.raw, self.calls = practice, raw, calls

    def launch(self, stream) -> None:
        """cudaGraphLaunch on ``stream``.

        Args:
            stream: a stream of the same `Practice`.
        """
        practice = self.practice
        first = len(practice.device.calls) if practice.simulated else 0
        self.raw.launch(_raw(stream))
        ran = practice.device.calls[first:] if practice.simulated else [None] * len(self.calls)
        for p, sim_call in zip(self.calls, ran):
            if sim_call is not None and p.flagged:
                practice.flagged_calls.add(sim_call.id)
            plan = p.conv.graph.plan(p.plan_index)
            logged = getattr(p.conv, "logged", p.conv.spec)  # what the call's own run() writes down
            practice.log(logged, plan, stream, p.workspace, p.output, graph=True, sim=sim_call)
            p.conv.ran(p.output, sim_call)


def simulated_label(gpu: str) -> str:
    """Where a GPU simulated from a recording takes its numbers from.

    Args:
        gpu: the GPU's name, e.g. ``"H200 SXM"``.

    Returns:
        E.g. ``"simulated from the H200 SXM recording"``.
    """
    return f"simulated from the {gpu} recording"


def _elapsed(practice: "Practice", start: Event, end: Event) -> float:
    """GPU microseconds between two events of one epoch; NaN across a restart of the simulated clock
    and where either event came after the clock had stopped in its epoch (the times after a number
    the recording lacks read NaN, also once the host has waited and the clock started again)."""
    if start.epoch != end.epoch:
        return math.nan
    until = practice.known_until.get(start.epoch, math.inf)
    if practice.simulated and max(start.raw.at or 0.0, end.raw.at or 0.0) >= until:
        return math.nan
    return practice.device.elapsed_us(start.raw, end.raw)


def _timing(between: List[Launch], us: float) -> Timing:
    """The `Timing` of the launches ``between`` two events, ``us`` apart."""
    plans, convs = (tuple(sorted({getattr(c, k) for c in between})) for k in ("plan_index", "conv"))
    return Timing(len(between), plans, float(us), convs, sum(c.graph for c in between))


def _raw(stream):
    return getattr(stream, "raw", stream)


class Practice(LessonCalls):
    """A GPU for hands-on cells (see `labkit.practice` for its calls; `LessonCalls` for those of
    single lessons).

    Args:
        device: the seam's device: a `labkit.gpu.device.cuda.CudaDevice` or a `SimDevice`.

    Attributes:
        device: that device (strategies and the Runner run on it).
        label: where its numbers come from, e.g. "simulated from the H100 SXM recording".
        launches: every call launched (`Launch`), in order.
        timings: every time taken with `elapsed_us` (`Timing`).
        problems: what was refused or misused (`Problem`).
        memory: what `allocate` gave and `free` took back (`labkit.practice.memory.Memory`).
    """

    def __init__(self, device: Device):
        if not isinstance(device, Device):
            raise InvalidSpec("device", device, "must be a labkit.gpu.device.Device")
        self.device = device
        self.simulated = isinstance(device, SimDevice)
        name = device.recorded.gpu if self.simulated else device.name
        self.gpu = env.gpu_label(name)
        self.label = simulated_label(self.gpu) if self.simulated else f"measured on this {self.gpu}"
        self.launches: List[Launch] = []
        self.timings: List[Timing] = []
        self.problems: List[Problem] = []
        self.memory = Memory(device)
        self.epoch = 0  # a simulated clock's restarts: times across one are not compared
        self.known_until: Dict[int, float] = {}  # a past epoch -> where its clock had stopped (us)
        self.capturing: Optional[List[Pending]] = None
        self.convs: list = []
        self.runners: list = []
        #: simulated calls whose workspace `workspace_ok` named already (the sanitizer's finding not repeated)
        self.flagged_calls: set = set()
        self.begin_cell()

    def begin_cell(self) -> None:
        """A hands-on cell starts (`labkit.session.handson.run`): a check judges what comes after
        (``cell_mark``), and `memory` counts the cell's own allocations from zero."""
        self.cell_mark = mark(self)
        self.memory.begin_cell()

    @classmethod
    def for_mode(cls, recording=None) -> "Practice":
        """This GPU live (unless ``recording`` is given), else a new GPU simulated from a recording.

        Args:
            recording: a shipped recording's name; default the one in use.

        Returns:
            The `Practice`.
        """
        if recording is None and env.mode().live:
            return cls(devices.current())
        return cls(SimDevice(recording))

    def __repr__(self) -> str:
        return f"<Practice GPU: {self.label}>"

    # -- streams, events, graphs --
    def stream(self) -> Stream:
        """A new stream.

        Returns:
            A `Stream`.
        """
        raw = self.device.stream()
        self.device.prepare_stream(raw)
        return Stream(self, raw)

    def event(self, stream) -> Event:
        """cudaEventRecord: an event that completes once the work queued on ``stream`` so far has run.

        Args:
            stream: a `Stream` (or a `Runner`'s ``stream``).

        Returns:
            An `Event`.
        """
        return Event(self, self.device.record_event(_raw(stream)), int(_raw(stream).ptr))

    def elapsed_us(self, start: Event, end: Event) -> float:
        """GPU time between two events (cudaEventElapsedTime), written down with the calls between them.

        Args:
            start: the earlier `Event`.
            end: the later one (waited for).

        Returns:
            Microseconds; NaN on a simulated GPU where the recording lacks a number it needs.
        """
        if not isinstance(start, Event) or not isinstance(end, Event):
            raise InvalidSpec("events", (start, end), "must be two events from gpu.event(stream)")
        us = _elapsed(self, start, end)
        self.timings.append(_timing(self.launches[start.index : end.index], us))
        return float(us)

    def synchronize(self) -> None:
        """The host waits for every stream (cudaDeviceSynchronize)."""
        self.device.synchronize()
        self.waited()

    def waited(self) -> None:
        """The host has waited for some work: a simulated clock that stopped starts again once every
        stream is idle (`SimDevice.rebase`)."""
        if self.simulated and math.isnan(self.device.clock_us()):
            until = self.device.gpu_known_until  # this epoch's events after it keep no time
            try:
                self.device.rebase()
            except LabkitError:  # a stream still has work queued: the clock stays stopped
                return
            self.known_until[self.epoch] = until
            self.epoch += 1

    def capture(self, fn: Callable[[], object], stream) -> Graph:
        """A CUDA graph of the calls ``fn`` queues on ``stream`` (they are recorded, not run).

        Args:
            fn: queues the calls when called once (e.g. a loop of ``conv.run``).
            stream: the `Stream` captured.

        Returns:
            A `Graph`.
        """
        if self.capturing is not None:
            raise LabkitError("a capture is already under way")
        self.capturing = []
        try:
            raw = self.device.capture(fn, _raw(stream))
        finally:
            calls, self.capturing = self.capturing, None
        return Graph(self, raw, calls)

    def log(
        self,
        spec,
        plan,
        stream,
        workspace,
        output: int = 0,
        *,
        graph: bool = False,
        sim=None,
        host_us=math.nan,
    ) -> None:
        """Write down one launched call (`Launch`).

        Args:
            spec: its convolution.
            plan: its plan (``.index``, ``.workspace_bytes``).
            stream: its stream.
            workspace: its workspace's address; None when a strategy chose it.
            output: the output slot it writes.
            graph: launched as part of a CUDA graph.
            sim: the simulator's record of the call.
            host_us: the host's time to launch it (microseconds).
        """
        where = (int(_raw(stream).ptr), workspace, output, graph, sim, float(host_us))
        self.launches.append(
            Launch(len(self.launches), spec.label, int(plan.index), int(plan.workspace_bytes), *where)
        )

    def runner(self, strategy, **options):
        """A `labkit.gpu.workspaces.runner.Runner` on its own stream whose calls this GPU writes down.

        Args:
            strategy: a workspace `Strategy` made on this GPU (in a hands-on cell: any you make).
            **options: the Runner's options (``fallback``, ``seed``).

        Returns:
            The runner (``.run(spec)``, ``.stream``, ``.close()``).
        """
        return PracticeRunner(self, strategy, **options)

    # -- memory --
    def allocate(self, nbytes: int) -> int:
        """cudaMalloc: device memory of your own, until `free`.

        Args:
            nbytes: bytes.

        Returns:
            The device address (an int; 0 for 0 bytes).
        """
        return self.memory.allocate(nbytes)

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then gives the memory back.

        Args:
            ptr: an address from `allocate` (nothing is done for 0).
        """
        if ptr:
            self.memory.free(ptr)
            self.waited()  # cudaFree waited for every stream

    def workspace_ok(self, ptr: int, need: int, what: str) -> bool:
        """Whether a call that needs ``need`` bytes may run with its workspace at ``ptr``: live, one
        given less (or freed memory) is refused and its `Problem` written; simulated, it runs and
        the simulator's sanitizer names it too (`labkit.practice.memory.Memory.check`).

        Args:
            ptr: the workspace's address.
            need: the bytes the plan asks for.
            what: the call, for the message.

        Returns:
            True when the call may run.
        """
        problem = self.memory.check(ptr, need, what)
        if problem is None:
            return True
        self.problems.append(problem)
        return self.simulated  # live: refused, cuDNN would write past the buffer

    # -- convolutions --
    def conv(self, spec, *, seed: int = 0, outputs: int = 1, workspace_cap=None, epilogue: str = "none"):
        """A convolution on this GPU: its plans (each checked against float64 live; the recorded
        plans simulated) and inputs made once.

        Args:
            spec: a `labkit.ConvSpec`.
            seed: the inputs' seed.
            outputs: output slots (``conv.run(..., output=j)``): a call writes its own.
            workspace_cap: only the plans needing at most this many bytes; None for every plan.
            epilogue: "bias_relu" for conv + bias + ReLU as one cuDNN graph (lesson 04); "none".

        Returns:
            A `labkit.practice.conv.Conv`.
        """
        made = Conv(self, spec, seed=seed, outputs=outputs, workspace_cap=workspace_cap, epilogue=epilogue)
        self.convs.append(made)
        return made

    def fresh(self) -> "Practice":
        """A new `Practice` of the same kind: this GPU again live, a new GPU simulated from the same
        recording (nothing allocated, its clock at zero).

        Returns:
            The `Practice`.
        """
        return Practice(SimDevice(self.device.recorded) if self.simulated else self.device)

    @property
    def findings(self) -> List[Problem]:
        """What is wrong with what ran so far (`labkit.practice.findings.collect`)."""
        return collect(self)
