"""`Unfused`: lesson 04's unfused path as a hands-on cell runs it (``gpu.unfused(spec)``): the plain
convolution's heuristic plan, then the bias add and the ReLU as CuPy elementwise kernels, each
writing a real tensor (`labkit.gpu.cudnn.unfused`). ``path.run(workspace, stream=s)`` queues one call of
the three; its workspace is the convolution plan's (``path.plan.workspace_bytes``).

Live it runs those kernels; simulated, lesson 10's traced kernels of the path scaled to the fusion
experiment's time (`labkit.simgpu.lesson_calls.unfused_bound`). Each run is written down as a call
(`labkit.practice.device.Launch`, its convolution named ``<label>, unfused: ...``). Bytes."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidSpec
from ..gpu.cudnn.unfused import bias_view, check_spec, epilogue
from ..simgpu.lesson_calls import unfused_bound
from .conv import Pending

EPILOGUE = "bias_relu"


@dataclass(frozen=True)
class Unfused:
    """What the unfused path's calls are written down as (``label``).

    Attributes:
        spec: the convolution.
    """

    spec: object

    @property
    def label(self) -> str:
        """``<the convolution's label>, unfused: conv, then bias add and ReLU``."""
        return f"{self.spec.label}, unfused: conv, then bias add and ReLU"


class _Plans:
    """What a captured graph asks of its calls' convolution (``graph.plan(index)``): the path's plan."""

    def __init__(self, plan):
        self._plan = plan

    def plan(self, index: int = 0):
        return self._plan


class UnfusedPath:
    """The unfused conv + bias + ReLU on a `labkit.practice.Practice` (``gpu.unfused(spec)``).

    Args:
        practice: the `labkit.practice.Practice`.
        spec: an fprop convolution in fp16 or fp32.
        seed: the inputs' seed.

    Attributes:
        spec: what its calls are written down as (`Unfused`: ``spec.label``).
        plan: the convolution's heuristic plan (``.workspace_bytes``: the path's workspace).
        intermediate_bytes: the tensors it writes besides the output (the convolution's output and
            the biased one).
    """

    def __init__(self, practice, spec, *, seed: int = 0):
        check_spec(spec)
        self.practice, self.conv_spec, self.spec = practice, spec, Unfused(spec)
        self.conv_graph = practice.device.graph(spec)
        self.plan = self.conv_graph.default_plan
        self.graph = _Plans(self.plan)
        self.intermediate_bytes = 2 * spec.tensor_bytes["y"]
        self.operands = practice.device.operands(spec, EPILOGUE, seed=seed)
        self._live = None if practice.simulated else self._make_live()
        self._bound: dict = {}

    def __repr__(self) -> str:
        return f"<UnfusedPath {self.spec.label}: conv plan {self.plan.index}>"

    def _make_live(self) -> dict:
        """Live: the intermediates (the convolution's output, the biased tensor) and the bias view."""
        import cupy  # heavy: CuPy, live only

        y = self.operands.arrays[self.operands.output_role]
        return dict(
            conv_y=cupy.empty_like(y),
            t1=cupy.empty_like(y),
            bias=bias_view(self.conv_spec, self.operands.arrays["b"]),
        )

    def ran(self, output: int = 0, sim_call=None) -> None:
        """Nothing to look at afterwards: a check compares the fused graph's output, not this one's.

        Args:
            output: the output slot (unused).
            sim_call: the simulator's record of the call (unused).
        """

    def _bind(self, ptr: int, raw):
        key = (ptr, int(raw.ptr))
        if key not in self._bound:
            if self.practice.simulated:
                self._bound[key] = unfused_bound(self.practice.device, self.conv_spec, self.plan, ptr, raw)
            else:
                arrays = {**self.operands.arrays, self.operands.output_role: self._live["conv_y"]}
                self._bound[key] = self.conv_graph.bind(arrays, ptr, self.plan.index, raw)
        return self._bound[key]

    def _launch(self, ptr: int, raw) -> None:
        self._bind(ptr, raw).run()
        if not self.practice.simulated:
            live, out = self._live, self.operands.arrays[self.operands.output_role]
            with raw:
                epilogue(live["conv_y"], live["bias"], None, live["t1"], None, out)

    def run(self, workspace: int, *, stream) -> None:
        """Queue one call of the path on ``stream``: the convolution, the bias add, the ReLU.

        Args:
            workspace: the workspace's address (from ``gpu.allocate``); at least
                ``plan.workspace_bytes`` must lie there.
            stream: a stream of the same GPU (``gpu.stream()``).
        """
        practice, raw = self.practice, getattr(stream, "raw", stream)
        ptr = int(workspace or 0)
        if getattr(stream, "practice", practice) is not practice:
            raise InvalidSpec("stream", stream, "must be a stream of this GPU (gpu.stream())")
        before = len(practice.problems)
        runs = practice.workspace_ok(ptr, int(self.plan.workspace_bytes), f"a call of {self.spec.label}")
        flagged = len(practice.problems) > before
        if practice.capturing is not None:
            if runs:
                self._launch(ptr, raw)
            practice.capturing.append(Pending(self, self.plan.index, 0, ptr, flagged))
            return
        first = len(practice.device.calls) if practice.simulated else 0
        t0 = practice.device.clock_us()
        if runs:
            self._launch(ptr, raw)
        host = practice.device.clock_us() - t0
        sim = practice.device.calls[first] if practice.simulated and runs else None
        if sim is not None and flagged:
            practice.flagged_calls.add(sim.id)
        practice.log(self.spec, self.plan, stream, ptr, sim=sim, host_us=host)
