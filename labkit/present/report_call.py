"""``labkit.report``: the network report's entry point, which starts the report's worker process
(live) before the report's own modules load, then hands over to `labkit.present.netreport.report`.

Loading the report (pandas, plotly and every lesson's experiments) takes about 1-2 s; starting the
worker and warming it (a Python process, CUDA, cuDNN) takes 2-4 s more. Started here, they overlap
(`labkit.session.texts.warm_report_worker`).
"""

from __future__ import annotations

from typing import Optional

from .. import networks
from ..errors import LabkitError
from ..session.texts import warm_report_worker


def report(
    net,
    *,
    batch: Optional[int] = None,
    dtype: Optional[str] = "fp16",
    layout: Optional[str] = "NHWC",
    training: bool = False,
    image=None,
    input_shape=None,
    force: bool = False,
    recording: Optional[str] = None,
    train=None,
):
    """The workspace report of a network: every convolution layer under every strategy.

    The same call as `labkit.present.netreport.report` (see there), with the worker started first.

    Args:
        net: a preset name, a list of ConvSpec, a torch ``nn.Module`` with ``input_shape``, or
            ``"module:callable"``.
        batch: images per batch.
        dtype: any case.
        layout: any case.
        training: forward plus backward.
        image: a preset's image size in pixels.
        input_shape: a model's example input (N, C, H, W).
        force: measure again.
        recording: answer from that shipped recording.
        train: not an option here.

    Returns:
        A `labkit.present.netreport.Report`.
    """
    if recording is None:
        warm_report_worker(_preset_specs(net, batch, dtype, layout, image))
    from . import netreport  # heavy: pandas, plotly and every lesson's experiments

    return netreport.report(
        net,
        batch=batch,
        dtype=dtype,
        layout=layout,
        training=training,
        image=image,
        input_shape=input_shape,
        force=force,
        recording=recording,
        train=train,
    )


def _preset_specs(net, batch, dtype, layout, image) -> tuple:
    """A preset's distinct convolutions (forward), for the worker to queue their builds; () for
    anything else, or for arguments the report itself will turn down."""
    if not isinstance(net, str) or ":" in net:
        return ()
    try:
        network = networks.layers_of(
            net, 32 if batch is None else batch, dtype=dtype, layout=layout, image=image or 224
        )
    except LabkitError:
        return ()
    return tuple(g.spec for g in networks.unique(list(network.layers)))
