"""Work the lesson recordings hold besides a convolution's plans, for hands-on cells on a simulated
GPU: lesson 03's layout conversion (layout.csv) and lesson 04's fused graph and unfused path
(fusion.csv, fusion_kernels.csv). Each becomes a `labkit.simgpu.conv.SimBound` that the device
launches and queues exactly as a convolution's call (rules 2-5 of `labkit.simgpu.device`); the rules
are not changed here.

What the recordings hold, and so what is simulated:

* **a layout conversion** (`conversion`): the layout experiment's CuPy transpose-copies of a user's
  NCHW input into an NHWC convolution's and of its output back, timed together by CUDA-graph replay
  (layout.csv ``convert_gpu_us``, the NHWC row): two kernels, one a copy each way. Their split is
  not recorded; no time the learner can read depends on it (one stream runs both, back to back).
  The host time of launching them from Python is not recorded either: such a launch stops the host's
  clock (rule 12) until the host waits for every stream; a CUDA graph of them costs what rule 5 says.
* **the fused graph and the unfused path** (`FusedGraph`, `unfused_bound`): conv + bias + ReLU as one
  cuDNN graph (its heuristic's plan: the fusion experiment's ``fused`` row), and the same work
  unfused (the plain convolution's heuristic plan, then CuPy's bias add and ReLU: its ``unfused``
  row). A call of either runs lesson 10's traced kernels of that path (fusion_kernels.csv), scaled
  to add up to the path's time per call by CUDA-graph replay (fusion.csv ``gpu_us``, as rule 4
  scales a convolution's kernels); a shape without a trace runs that time as one span. The fused
  plan's workspace is fusion.csv's ``allocated_bytes`` less the tensors (x, w, the bias, y); the
  unfused path's is its convolution plan's. Neither path's Python launch was timed: like the
  conversion's, it stops the host's clock until the host waits; a CUDA graph of them costs what
  rule 5 says (the median per-call part: the calibration measured plain convolutions only).

Microseconds, bytes.
"""

from __future__ import annotations

import json

from ..errors import NotRecorded
from ..spec import ConvSpec
from .conv import SimBound, SimPlan, launch
from .recorded import CallTiming, Kernel

#: the fusion hands-on's epilogue: conv + bias + ReLU (the fusion experiment's ``bias_relu``)
EPILOGUE = "bias_relu"
#: the index the fused graph's plan and the unfused path's calls take on the simulated GPU (neither
#: is one of the plain convolution's plans: rule 5 then costs their graph launch at the median); a
#: learner reads their `SimPlan.shown` instead
FUSED_INDEX, UNFUSED_INDEX = -2, -3

#: what a conversion's call is called on the simulated GPU (its "plan": it needs no workspace)
CONVERSION = SimPlan(-1, "NCHW <-> NHWC copies", 0)
#: what a GPU run would have to record for a Python launch of the conversion
CONVERSION_HOST = (
    "time the host takes to launch the CuPy transpose-copies (lesson 03's layout experiment times them "
    "by CUDA-graph replay only)"
)


def _layout_row(recorded, spec: ConvSpec):
    """The layout experiment's NHWC row for ``spec`` (any layout), or None."""
    table = recorded._table("layout")
    if table is None:
        return None
    want = spec.replace(layout="NHWC")
    for r in table[(table.layout == "NHWC") & (table.status == "ok")].itertuples():
        if ConvSpec.from_dict(json.loads(r.request)["spec"]).replace(layout="NHWC") == want:
            return r
    return None


def conversion_timing(recorded, spec: ConvSpec) -> CallTiming:
    """The recorded conversion of ``spec``'s tensors from NCHW and back: two copies, one time.

    Args:
        recorded: the `labkit.simgpu.recorded.Recorded`.
        spec: the convolution (its NHWC form is converted).

    Returns:
        Its `CallTiming` (host_us 0: not recorded, see `launch_conversion`); `labkit.NotRecorded`
        when the layout experiment did not run for it.
    """
    row = _layout_row(recorded, spec)
    if row is None:
        raise NotRecorded(
            f"the NCHW <-> NHWC conversion of {spec.replace(layout='NHWC').label} in the {recorded.gpu} "
            "recording",
            "record lesson 03's layout experiment for it on that GPU "
            "(`python -m labkit record --only layout`)",
        )
    half = float(row.convert_gpu_us) / 2
    kernels = (
        Kernel("copy x: NCHW to NHWC", "layout copy (with the one below: layout.csv convert_gpu_us)", half),
        Kernel("copy y: NHWC to NCHW", "layout copy (with the one above: layout.csv convert_gpu_us)", half),
    )
    return CallTiming(kernels, 0.0, "layout.csv convert_gpu_us (the NHWC row)")


def launch_conversion(device, spec: ConvSpec, stream) -> None:
    """Queue the conversion of ``spec``'s tensors on ``stream`` (or record it, in a capture): the
    host's clock stops, since no Python launch of it was timed (rule 12).

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution converted.
        stream: a stream of ``device``.
    """
    timing = conversion_timing(device.recorded, spec)
    device.lack(
        f"host time of launching the NCHW <-> NHWC copies of {spec.replace(layout='NHWC').label} on the "
        f"{device.recorded.gpu}",
        CONVERSION_HOST,
        device.host_now,
    )
    launch(device, SimBound(device, spec, CONVERSION, 0, stream, timing))


# ---- lesson 04: the fused graph and the unfused path ------------------------------------------------
def _fusion_row(recorded, spec: ConvSpec, path: str):
    """The fusion experiment's row of ``path`` ("fused" or "unfused") for ``spec`` and `EPILOGUE`."""
    table = recorded._table("fusion")
    if table is not None:
        ok = table[(table.epilogue == EPILOGUE) & (table.path == path) & (table.status == "ok")]
        for r in ok.itertuples():
            if ConvSpec.from_dict(json.loads(r.request)["spec"]) == spec:
                return r
    raise NotRecorded(
        f"the {path} conv + bias + ReLU of {spec.label} in the {recorded.gpu} recording",
        "record lesson 04's fusion experiment for it on that GPU (`python -m labkit record --only fusion`)",
    )


def fusion_timing(recorded, spec: ConvSpec, path: str) -> CallTiming:
    """What one call of the fused graph or of the unfused path runs, from the recordings.

    Args:
        recorded: the `labkit.simgpu.recorded.Recorded`.
        spec: the convolution (fprop, fp16 or fp32).
        path: "fused" or "unfused".

    Returns:
        Its `CallTiming` (host_us 0: a Python launch of it was not timed, see `UnrecordedLaunch`);
        `labkit.NotRecorded` when the fusion experiment did not run for it.
    """
    row = _fusion_row(recorded, spec, path)
    total, traced = float(row.gpu_us), recorded._table("fusion_kernels")
    rows = []
    if traced is not None:
        mine = traced[
            (traced.spec_label == spec.label) & (traced.path == path) & (traced.epilogue == EPILOGUE)
        ]
        rows = [
            (str(r.kernel), str(r.role), float(r.kernel_us))
            for r in mine.itertuples()
            for _ in range(int(r.launches_per_call))
        ]
    where = f"fusion.csv gpu_us (the {path} row, {EPILOGUE})"
    if not rows:
        return CallTiming((Kernel(f"{path} conv + bias + ReLU", f"one span: {where}", total),), 0.0, where)
    scale = total / sum(us for _, _, us in rows)
    kernels = tuple(Kernel(name, role, us * scale) for name, role, us in rows)
    return CallTiming(kernels, 0.0, f"fusion_kernels.csv (kernels), scaled to {where}")


def fused_workspace_bytes(recorded, spec: ConvSpec) -> int:
    """The fused graph's heuristic plan's workspace: fusion.csv allocated_bytes less the tensors.

    Args:
        recorded: the `labkit.simgpu.recorded.Recorded`.
        spec: the convolution.

    Returns:
        Bytes.
    """
    row = _fusion_row(recorded, spec, "fused")
    bias = spec.K * (4 if spec.output_dtype == "fp32" else 2)
    return int(row.allocated_bytes) - sum(spec.tensor_bytes[r] for r in ("x", "w", "y")) - bias


class UnrecordedLaunch(SimBound):
    """A bound call whose Python launch was never timed: launching it stops the host's clock (rule
    12) until the host waits for every stream; in a CUDA graph it costs what rule 5 says.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution.
        plan: its place-of-a-plan.
        ptr: the workspace's address.
        stream: the stream it runs on.
        timing: what one call runs.
        what: what the launch is, for the clock's missing number.
    """

    def __init__(self, device, spec, plan, ptr, stream, timing, what: str):
        super().__init__(device, spec, plan, ptr, stream, timing)
        self.what = what

    def run(self) -> None:
        """Launch the call on its stream; the host's clock stops there."""
        self.device.lack(
            f"host time of launching {self.what} from Python on the {self.device.recorded.gpu}",
            f"time the Python launch of {self.what} (lesson 04's fusion experiment times it by CUDA-graph "
            "replay only)",
            self.device.host_now,
        )
        launch(self.device, self)


class FusedGraph:
    """Conv + bias + ReLU as one cuDNN graph on a simulated GPU, in the shape of
    `labkit.simgpu.conv.SimGraph`: one plan, the fusion experiment's heuristic pick.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution.
        epilogue: `EPILOGUE` (the one the hands-on fuses).
    """

    def __init__(self, device, spec: ConvSpec, epilogue: str = EPILOGUE):
        if epilogue != EPILOGUE:
            raise NotRecorded(
                f"the fused {spec.label} with epilogue {epilogue!r} as a simulated call",
                f"the simulated GPU runs the fused graph with epilogue {EPILOGUE!r} only",
            )
        row = _fusion_row(device.recorded, spec, "fused")
        self.device, self.spec, self.epilogue = device, spec, epilogue
        self.timing = fusion_timing(device.recorded, spec, "fused")
        shown = f"{row.plan_name} (the recording keeps its name, not its index)"
        plan = SimPlan(FUSED_INDEX, str(row.plan_name), fused_workspace_bytes(device.recorded, spec), shown)
        self.plans, self.runnable, self.default_plan = {plan.index: plan}, [plan], plan
        self.key, self.fell_through = (spec.key, epilogue), ""

    def plan(self, index: int) -> SimPlan:
        """The one recorded plan.

        Args:
            index: any index (the recording timed no other plan).

        Returns:
            The `SimPlan`.
        """
        return self.default_plan

    def bind(self, arrays, workspace_ptr: int, plan_index: int, stream) -> UnrecordedLaunch:
        """The fused plan with its workspace at ``workspace_ptr``, to launch on ``stream``.

        Args:
            arrays: the operands (unused: a simulated call computes nothing).
            workspace_ptr: the workspace's address (0 or None for none).
            plan_index: the plan's index (the one recorded plan).
            stream: the `labkit.simgpu.device.SimStream` it will run on.

        Returns:
            The `UnrecordedLaunch` to ``run``.
        """
        what = f"the fused conv + bias + ReLU of {self.spec.label}"
        return UnrecordedLaunch(
            self.device, self.spec, self.default_plan, int(workspace_ptr or 0), stream, self.timing, what
        )


def unfused_bound(device, spec: ConvSpec, plan, workspace_ptr: int, stream) -> UnrecordedLaunch:
    """One call of the unfused path (its convolution's plan ``plan`` with its workspace at
    ``workspace_ptr``, then the bias add and the ReLU), to launch on ``stream``.

    Args:
        device: the `labkit.simgpu.SimDevice`.
        spec: the convolution.
        plan: the plain convolution's heuristic plan (its workspace is the path's).
        workspace_ptr: the workspace's address.
        stream: the stream.

    Returns:
        The `UnrecordedLaunch` to ``run``.
    """
    timing = fusion_timing(device.recorded, spec, "unfused")
    name = f"{plan.name}, then CuPy's add and maximum"
    placed = SimPlan(
        UNFUSED_INDEX, name, int(plan.workspace_bytes), f"{plan.index}, then CuPy's add and maximum"
    )
    what = f"the unfused conv, bias add and ReLU of {spec.label}"
    return UnrecordedLaunch(device, spec, placed, int(workspace_ptr or 0), stream, timing, what)
