"""`LessonCalls`: the calls of single lessons' hands-on cells, as methods of every
`labkit.practice.Practice` (``gpu.conversion(conv)``: lesson 03's layout conversion;
``gpu.unfused(spec)``: lesson 04's unfused conv + bias + ReLU; ``gpu.ceiling``: lesson 08's datasheet
peaks)."""

from __future__ import annotations

from .. import ceilings
from ..errors import InvalidSpec
from .layout import Conversion
from .unfused import UnfusedPath


class LessonCalls:
    """What a `labkit.practice.Practice` offers besides the device seam's calls."""

    def conversion(self, conv):
        """The copies that let a user whose tensors are NCHW run ``conv`` in NHWC: ``.run(stream=s)``
        transposes the NCHW input into ``conv``'s and its output back (`labkit.practice.layout`).

        Args:
            conv: an NHWC convolution made on this GPU (``gpu.conv``).

        Returns:
            A `labkit.practice.layout.Conversion`.
        """
        if getattr(conv, "practice", None) is not self:
            raise InvalidSpec("conv", conv, "must be a convolution made on this GPU (gpu.conv(...))")
        return Conversion(conv)

    def unfused(self, spec, *, seed: int = 0):
        """The unfused conv + bias + ReLU (lesson 04): the convolution's heuristic plan, then CuPy's
        bias add and ReLU, each writing a real tensor; ``.run(workspace, stream=s)`` queues one call
        of the three (`labkit.practice.unfused`).

        Args:
            spec: an fprop convolution in fp16 or fp32.
            seed: the inputs' seed.

        Returns:
            A `labkit.practice.unfused.UnfusedPath` (``.plan.workspace_bytes``: its workspace).
        """
        return UnfusedPath(self, spec, seed=seed)

    @property
    def ceiling(self):
        """This GPU's datasheet peaks (`labkit.ceilings.Ceiling`: ``peak_tflops(dtype)``,
        ``bandwidth_bytes_per_s``); None for a GPU the table does not know."""
        device = self.device
        return ceilings.for_gpu(device.recorded.gpu if self.simulated else device.name)
