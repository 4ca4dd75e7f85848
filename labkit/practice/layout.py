"""`Conversion`: the copies that let a user whose tensors are NCHW run a convolution in NHWC (lesson
03's hands-on), as a hands-on cell calls them: ``copies = gpu.conversion(conv)``, then
``copies.run(stream=s)`` queues one conversion, the user's NCHW input transposed into the NHWC
convolution's input and its output transposed back to NCHW.

Live they are CuPy transpose-copies on the stream, as lesson 03's layout experiment times them
(`labkit.experiments.precision_layout.runs.layout`); simulated, the recorded time of those copies
(`labkit.simgpu.lesson_calls`). Each run is written down as a call (`labkit.practice.device.Launch`,
its convolution named ``NCHW <-> NHWC copies of <label>``), so a check sees what two events timed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidSpec
from ..simgpu.lesson_calls import launch_conversion
from .conv import Pending


@dataclass(frozen=True)
class CopyPlan:
    """What a conversion's call is, in the place of a plan: index -1, no workspace.

    Attributes:
        index: -1 (no plan of the convolution's).
        name: what the call does.
        workspace_bytes: 0 (the copies need none).
    """

    index: int = -1
    name: str = "NCHW <-> NHWC copies"
    workspace_bytes: int = 0


@dataclass(frozen=True)
class Copied:
    """What a conversion's calls are written down as (``label``).

    Attributes:
        spec: the NHWC convolution whose tensors are converted.
    """

    spec: object

    @property
    def label(self) -> str:
        """``NCHW <-> NHWC copies of <the NHWC convolution's label>``."""
        return f"{CopyPlan.name} of {self.spec.label}"


class Conversion:
    """The conversion of a user's NCHW tensors for an NHWC convolution (``gpu.conversion(conv)``).

    Args:
        conv: an NHWC `labkit.practice.conv.Conv` (its inputs and output are converted).

    Attributes:
        spec: what its calls are written down as (`Copied`: ``spec.label``).
        nbytes: bytes it copies each run (the input one way, the output the other).
    """

    PLAN = CopyPlan()

    def __init__(self, conv):
        if getattr(conv, "spec", None) is None or conv.spec.layout != "NHWC":
            raise InvalidSpec("conv", conv, "must be an NHWC convolution from gpu.conv(...)")
        self.conv, self.practice = conv, conv.practice
        self.spec = Copied(conv.spec)
        self.nbytes = conv.spec.tensor_bytes["x"] + conv.spec.tensor_bytes["y"]
        self._nchw = None if self.practice.simulated else self._make_nchw()

    def __repr__(self) -> str:
        return f"<Conversion: {self.spec.label}>"

    def _make_nchw(self) -> dict:
        """Live: the user's NCHW tensors (x with the convolution's values, y to be written), the
        copies run once (their kernels loaded outside any capture)."""
        import cupy  # heavy: CuPy, live only

        from ..gpu.cudnn.frontend import logical_view  # heavy: CuPy, live only

        arrays = self.conv.operands.arrays
        self._nchw = {r: cupy.ascontiguousarray(logical_view(arrays[r], "NHWC")) for r in ("x", "y")}
        self._copy(cupy.cuda.get_current_stream())
        cupy.cuda.get_current_stream().synchronize()
        return self._nchw

    def _copy(self, raw_stream) -> None:
        """Live: the two transpose-copies, queued on ``raw_stream``."""
        arrays = self.conv.operands.arrays
        with raw_stream:
            arrays["x"][...] = self._nchw["x"].transpose(0, 2, 3, 1)  # the user's NCHW x -> NHWC
            self._nchw["y"][...] = arrays["y"].transpose(0, 3, 1, 2)  # the result back to NCHW

    @property
    def graph(self):
        """What a captured graph asks of its calls' convolution (``graph.plan(index)``)."""
        return self

    def plan(self, index: int = -1) -> CopyPlan:
        """The conversion's place-of-a-plan, whatever the index.

        Args:
            index: the index asked (a captured call's: -1).

        Returns:
            The `CopyPlan`.
        """
        return self.PLAN

    def ran(self, output: int = 0, sim_call=None) -> None:
        """Nothing to look at afterwards: the copies write no output a check compares.

        Args:
            output: the output slot (unused).
            sim_call: the simulator's record of the call (unused).
        """

    def run(self, *, stream) -> None:
        """Queue one conversion on ``stream`` (the input into NHWC, the output back to NCHW).

        Args:
            stream: a stream of the same GPU (``gpu.stream()``).
        """
        practice, raw = self.practice, getattr(stream, "raw", stream)
        if practice.capturing is not None:
            self._launch(raw)
            practice.capturing.append(Pending(self, self.PLAN.index, 0, 0))
            return
        first = len(practice.device.calls) if practice.simulated else 0
        t0 = practice.device.clock_us()
        self._launch(raw)
        host = practice.device.clock_us() - t0
        sim = practice.device.calls[first] if practice.simulated else None
        practice.log(self.spec, self.PLAN, stream, 0, sim=sim, host_us=host)

    def _launch(self, raw) -> None:
        if self.practice.simulated:
            launch_conversion(self.practice.device, self.conv.spec, raw)
        else:
            self._copy(raw)
