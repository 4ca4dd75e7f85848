"""``labkit.report``: the network report's entry point, which starts the report's worker process
(live) before the report's own modules load, then hands over to `labkit.present.netreport.report`.

Loading the report (pandas, plotly and every lesson's experiments) takes about 1-2 s; starting the
worker and warming it (a Python process, CUDA, cuDNN) takes 2-4 s more. Started here, they overlap
(`labkit.session.texts.warm_report_worker`). A model named ``"module:callable"`` is built and its
layers read in a thread meanwhile (`_model_soon`), so that its convolutions' plan builds are queued
as early as a preset's.
"""

from __future__ import annotations

import concurrent.futures
import threading
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
    model = None
    if recording is None and networks.is_model_path(net) and input_shape is not None:
        model = _model_soon(net, batch, dtype, layout, input_shape)
    elif recording is None:
        warm_report_worker(_preset_specs(net, batch, dtype, layout, image))
    from . import netreport  # heavy: pandas, plotly and every lesson's experiments

    built = None if model is None else model.result()
    return netreport.report(
        net if built is None else built,
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


def _model_soon(path: str, batch, dtype, layout, input_shape) -> concurrent.futures.Future:
    """The model ``path`` names, built in a daemon thread that then reads its layers and starts the
    report's worker with their distinct convolutions (`warm_report_worker`), while this thread loads
    the report.

    Args:
        path: ``"module:callable"``.
        batch: the report's ``batch`` (None, or the example input's first dimension).
        dtype: the report's dtype.
        layout: the report's layout.
        input_shape: the model's example input (N, C, H, W).

    Returns:
        A future of the ``nn.Module``; of None when building it or reading its layers failed (the
        report, given the path again, says why).
    """
    future: concurrent.futures.Future = concurrent.futures.Future()

    def load() -> None:
        try:
            model = networks.model_from_path(path)
            network = networks.layers_of(model, batch, dtype=dtype, layout=layout, input_shape=input_shape)
        except BaseException:  # noqa: BLE001  (the report builds it again and names the error)
            future.set_result(None)
            return
        warm_report_worker(tuple(g.spec for g in networks.unique(list(network.layers))))
        future.set_result(model)

    threading.Thread(target=load, daemon=True, name="labkit-report-model").start()
    return future
