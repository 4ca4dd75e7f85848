"""Convolutions on a simulated GPU, as the `labkit.gpu.workspaces.runner.Runner` sees them: a graph's recorded
plans, a plan bound to a workspace (its ``run`` replays the recorded call: rules 4 and 5 of
`labkit.simgpu.device`), a captured CUDA graph, and operands that hold no numbers. Sizes in bytes,
times in microseconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from ..errors import InvalidSpec, NotRecorded
from ..spec import ConvSpec
from .recorded import CallTiming
from .sanitizer import SimCall
from .timeline import KERNEL, Op


@dataclass(frozen=True)
class SimPlan:
    """A recorded plan.

    Attributes:
        index: its index among the engine's plans.
        name: its engine config's name.
        workspace_bytes: the workspace it needs, bytes.
        shown: how a learner reads it where ``index`` is not its index among its graph's plans (the
            recording keeps no index: ``index`` only routes the simulated call); "" where it is.
    """

    index: int
    name: str
    workspace_bytes: int
    shown: str = ""

    def __repr__(self) -> str:
        index = f"index={self.index}" if not self.shown else "index not recorded"
        return f"SimPlan({index}, name={self.name!r}, workspace_bytes={self.workspace_bytes})"

    @property
    def label(self) -> str:
        """How a message names the plan: its index, or `shown` where the index is not recorded."""
        return self.shown or str(self.index)


class SimGraph:
    """A convolution's recorded plans, in the shape of `labkit.gpu.cudnn.conv_graph.ConvGraph`.

    Every recorded plan computed the right result when it was recorded (the recordings keep only
    those), so all of them are ``runnable``; the default is the recorded heuristic's pick.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution.
        epilogue: its epilogue ("none" only: the recordings hold plain convolutions' kernels).
    """

    def __init__(self, device, spec: ConvSpec, epilogue: str = "none"):
        if epilogue != "none":
            raise NotRecorded(
                f"kernels of {spec.label} with epilogue {epilogue!r}",
                "record `fusion_kernels` (lesson 10) for it on that GPU",
            )
        rows, default = device.recorded.plans(spec)
        self.device, self.spec, self.epilogue = device, spec, epilogue
        self.plans: Dict[int, SimPlan] = {r.index: SimPlan(r.index, r.name, r.workspace_bytes) for r in rows}
        self.runnable: List[SimPlan] = [self.plans[r.index] for r in rows]
        self.default_plan = self.plans[default]
        self.key = (spec.key, epilogue)
        self.fell_through = ""

    def plan(self, index: int) -> SimPlan:
        """One recorded plan.

        Args:
            index: the plan's index.

        Returns:
            The `SimPlan`; `labkit.InvalidSpec` for an index the recording does not hold.
        """
        if index not in self.plans:
            raise InvalidSpec("plan_index", index, f"must be one of the recorded plans {sorted(self.plans)}")
        return self.plans[index]

    def bind(self, arrays, workspace_ptr: int, plan_index: int, stream) -> "SimBound":
        """Plan ``plan_index`` with its workspace at ``workspace_ptr``, to launch on ``stream``; the
        host pays the measured bind time (rule 4 of `labkit.simgpu.device`).

        Args:
            arrays: the operands (unused: a simulated call computes nothing).
            workspace_ptr: the workspace's address (0 or None for none).
            plan_index: the plan's index.
            stream: the `labkit.simgpu.device.SimStream` it will run on.

        Returns:
            The `SimBound` to ``run``; `labkit.InvalidSpec` for a plan the recording lacks,
            `labkit.NotRecorded` where its timing is not recorded.
        """
        plan = self.plan(plan_index)
        timing = self.device.recorded.call(self.spec, plan.index)
        self.device.host_now += timing.bind_us
        return SimBound(self.device, self.spec, plan, int(workspace_ptr or 0), stream, timing)


class SimBound:
    """One plan bound to a workspace and a stream: ``run()`` launches its recorded call.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution.
        plan: the recorded plan.
        ptr: the workspace's address (0 for none).
        stream: the `labkit.simgpu.device.SimStream` it runs on.
        timing: what one call runs (`labkit.simgpu.recorded.CallTiming`).
    """

    def __init__(self, device, spec: ConvSpec, plan: SimPlan, ptr: int, stream, timing: CallTiming):
        self.device, self.spec, self.plan, self.ptr, self.stream, self.timing = (
            device,
            spec,
            plan,
            ptr,
            stream,
            timing,
        )

    def run(self) -> None:
        """Launch the call on its stream (queued; the host pays the recorded launch time)."""
        launch(self.device, self)


class SimOperands:
    """A convolution's operands on a simulated GPU: nothing to compute with (``arrays`` is empty);
    whether an output is right is the sanitizer's answer (`labkit.simgpu.SimDevice.calls`).

    Args:
        spec: the convolution.
        epilogue: its epilogue.
        seed: the seed a real device's operands would be drawn with (kept, unused).
    """

    def __init__(self, spec: ConvSpec, epilogue: str = "none", seed: int = 0):
        self.spec, self.epilogue, self.seed = spec, epilogue, seed
        self.arrays: dict = {}

    def poison_output(self) -> None:
        """Nothing to poison: a simulated output holds no numbers."""


class SimGraphExec:
    """A captured CUDA graph: the calls queued while capturing, relaunched by ``launch``.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        calls: the bound calls captured, in order.
    """

    def __init__(self, device, calls: List["SimBound"]):
        self.device, self.calls = device, calls

    def launch(self, stream) -> None:
        """cudaGraphLaunch on ``stream`` (rule 5).

        Args:
            stream: the `labkit.simgpu.device.SimStream` to launch on.
        """
        launch_graph(self.device, self, stream)


def launch(device, bound: "SimBound") -> None:
    """A Python launch of one call (rule 4), or its capture (rule 5).

    Args:
        device: the `labkit.simgpu.SimDevice`.
        bound: the bound call.
    """
    device.counts["launch"] += 1
    t0, host = device.host_now, bound.timing.host_us
    if device.capturing(bound.stream):
        device._captured.append(bound)
        device.host_now += host
        return
    n = len(bound.timing.kernels)
    queue_call(device, bound, bound.stream, [t0 + host * (i + 1) / n for i in range(n)], "python")
    device.host_now = t0 + host


def launch_graph(device, graph: "SimGraphExec", stream) -> None:
    """cudaGraphLaunch (rule 5): the host pays the launch, then every captured call is queued.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        graph: the captured graph.
        stream: the `labkit.simgpu.device.SimStream` to launch on.
    """
    device.counts["graph_launch"] += 1
    calls = [(b.spec, b.plan.index, len(b.timing.kernels)) for b in graph.calls]
    try:
        device.host_now += device.recorded.graph_launch_us(calls)
    except NotRecorded as exc:
        device.lack(exc.what, exc.record, device.host_now)
    for b in graph.calls:
        queue_call(device, b, stream, [device.host_now] * len(b.timing.kernels), "graph")


def queue_call(device, bound: "SimBound", stream, launched: List[float], how: str) -> SimCall:
    """Queue one call's kernels on ``stream``, launched at host times ``launched`` (rules 2-5), and
    have the sanitizer check it.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        bound: the bound call.
        stream: the `labkit.simgpu.device.SimStream` to queue on.
        launched: each kernel's launch time on the host, microseconds.
        how: "python" or "graph".

    Returns:
        The queued call (also appended to the device's ``calls``).
    """
    device.timeline.advance(device.host_now)
    kernels = bound.timing.kernels
    call = SimCall(
        len(device.calls),
        stream.ptr,
        f"{bound.spec.label} plan {bound.plan.label}",
        bound.ptr,
        bound.plan.workspace_bytes,
        device.host_now,
        launch=how,
    )
    for i, (at, k) in enumerate(zip(launched, kernels)):
        op = Op(KERNEL, at, work=k.us, call=call, speedup=bound.timing.speedup)
        op.first, op.last = i == 0, i == len(kernels) - 1
        clock = device.queue(stream, op)
        if i == 0:
            call.after = dict(clock)
    call.seq = device.clocks.seq[stream.ptr]
    device.calls.append(call)
    if call.nbytes:
        device.check(call)
    return call
