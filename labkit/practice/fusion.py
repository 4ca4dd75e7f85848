"""Lesson 04's fused graph, as a hands-on cell names it: ``gpu.conv(spec, epilogue="bias_relu")``
builds conv + bias + ReLU as one cuDNN graph (live: labkit's `define_graph`, every plan checked
against float64; simulated: `labkit.simgpu.lesson_calls.FusedGraph`), and its calls are written
down under a label of their own (`Fused`), so a check tells them from the plain convolution's and
the unfused path's (`labkit.practice.unfused`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidSpec

#: the epilogues a hands-on convolution takes: none, or conv + bias + ReLU fused
EPILOGUES = {"none": "", "bias_relu": "bias + ReLU"}


def check_epilogue(epilogue) -> str:
    """An epilogue, checked (one of `EPILOGUES`).

    Args:
        epilogue: the epilogue's name.

    Returns:
        It.
    """
    if epilogue not in EPILOGUES:
        raise InvalidSpec("epilogue", epilogue, f"must be one of {', '.join(map(repr, EPILOGUES))}")
    return epilogue


@dataclass(frozen=True)
class Fused:
    """What a fused graph's calls are written down as (``label``).

    Attributes:
        spec: the convolution.
        epilogue: what is fused with it in the same cuDNN graph (a key of `EPILOGUES`).
    """

    spec: object
    epilogue: str

    @property
    def label(self) -> str:
        """``<the convolution's label> + bias + ReLU, one cuDNN graph``."""
        return f"{self.spec.label} + {EPILOGUES[self.epilogue]}, one cuDNN graph"
