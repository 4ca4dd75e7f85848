"""`LessonCalls`: the calls of single lessons' hands-on cells, as methods of every
`labkit.practice.Practice` (``gpu.conversion(conv)``: lesson 03's layout conversion)."""

from __future__ import annotations

from ..errors import InvalidSpec
from .layout import Conversion


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
