"""What a workspace request is, and the keys a workspace cache can file it under.

No CuPy here, so lessons can use these in recorded mode. `labkit.gpu.workspaces.workspace` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import ConvSpec


@dataclass(frozen=True)
class Request:
    """What a call needs from a workspace strategy.

    Attributes:
        spec: the convolution.
        plan_index: the plan's index in its graph.
        plan_name: the plan's name, e.g. "eng0".
        nbytes: workspace the plan needs, in bytes.
        stream_ptr: the CUDA stream the call runs on.
        epilogue: the fused epilogue ("none", "bias_relu", ...).
    """

    spec: ConvSpec
    plan_index: int
    plan_name: str
    nbytes: int
    stream_ptr: int
    epilogue: str = "none"


def full_key(req: Request) -> tuple:
    """Everything a workspace depends on: every spec field, the epilogue and the plan.

    Args:
        req: the workspace request.

    Returns:
        The spec's full key (dtype, layout and direction included), epilogue, plan index and name.
    """
    return (req.spec.key, req.epilogue, req.plan_index, req.plan_name)


def dims_only_key(req: Request) -> tuple:
    """The well-known sketch's key: shapes and conv params only.

    dtype, layout, direction and plan are missing, so two convolutions that need different
    workspaces share one buffer.

    Args:
        req: the workspace request.

    Returns:
        N, C, H, W, K, R, S, stride, padding, dilation and groups.
    """
    s = req.spec
    return (s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.padding, s.dilation, s.groups)


KEYS = {"full": full_key, "dims_only": dims_only_key}
