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

Microseconds, bytes.
"""

from __future__ import annotations

import json

from ..errors import NotRecorded
from ..spec import ConvSpec
from .conv import SimBound, SimPlan, launch
from .recorded import CallTiming, Kernel

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
