"""The unfused epilogue: a cuDNN convolution, then CuPy's elementwise kernels for the epilogue.

The convolution runs the heuristic's plan; bias, residual add and ReLU each write a real tensor:
what a framework without fusion runs. Lesson 04 times it against the fused cuDNN graph, lesson 10
traces both.
"""

from __future__ import annotations

from ...errors import InvalidSpec
from ...spec import ConvSpec

#: the dtypes the unfused path runs in (CuPy has no bf16/fp8 elementwise kernels)
DTYPES = ("fp32", "fp16")


def check_spec(spec: ConvSpec) -> None:
    """Raise `InvalidSpec` unless a convolution is an fprop in one of `DTYPES`.

    Args:
        spec: the convolution.
    """
    if spec.direction != "fprop" or spec.dtype not in DTYPES:
        raise InvalidSpec(
            "spec", spec.label, "fusion compares fprop in fp16 or fp32 (CuPy has no bf16/fp8 kernels)"
        )


def bias_view(spec: ConvSpec, bias):
    """A per-channel bias shaped to broadcast over a convolution's output layout.

    Args:
        spec: the convolution.
        bias: its K values.

    Returns:
        A view of ``bias``.
    """
    return bias.reshape((1, spec.K, 1, 1) if spec.layout == "NCHW" else (1, 1, 1, spec.K))


def epilogue(y, bias, z, t1, t2, out) -> None:
    """Enqueue the unfused path's CuPy kernels on the current stream.

    ``y`` + ``bias`` go into ``t1``, then (+ ``z``) into ``t2`` when ``z`` is not None, then ReLU
    into ``out``.

    Args:
        y: the convolution's output.
        bias: the bias, shaped by `bias_view`.
        z: the residual; None for none.
        t1: an intermediate like ``y``.
        t2: another.
        out: the result.
    """
    import cupy  # heavy: CuPy, live only

    cupy.add(y, bias, out=t1)
    src = t1
    if z is not None:
        cupy.add(t1, z, out=t2)
        src = t2
    cupy.maximum(src, 0, out=out)


class UnfusedPath:
    """The unfused sequence over some operands, launched on a stream.

    `run` writes the operands' output. The path holds its workspace and intermediates (``conv_y``,
    ``t1``, ``t2``) while it lives.

    Args:
        spec: an fprop convolution in one of `DTYPES`.
        ops: `operands.Operands` made with an epilogue: its ``b`` and, for a residual add, ``z``.
        stream: the CuPy stream.
    """

    def __init__(self, spec: ConvSpec, ops, stream):
        import cupy  # heavy: CuPy, live only

        from ..buffers import memory  # heavy: CuPy, live only
        from . import graph_cache  # heavy: CuPy, live only

        plain = graph_cache.get_graph(spec, all_plans=False)
        self.plan = plain.default_plan
        y = self.output = ops.arrays[ops.output_role]
        self.conv_y = memory.empty(y.shape, y.dtype, "conv output")
        self.t1, self.t2 = cupy.empty_like(y), cupy.empty_like(y)
        self._bias = bias_view(spec, ops.arrays["b"])
        self._z = ops.arrays.get("z")
        self._conv = plain.bind_with_workspace(
            {**ops.arrays, ops.output_role: self.conv_y}, self.plan.index, stream
        )

    def run(self) -> None:
        """Conv, then bias (+ residual add), then ReLU into the output (enqueued, not synchronised)."""
        self._conv.run()
        epilogue(self.conv_y, self._bias, self._z, self.t1, self.t2, self.output)

    @property
    def elementwise_kernels(self) -> int:
        """Elementwise kernels per call: bias, (add,) ReLU."""
        return 3 if self._z is not None else 2

    @property
    def intermediate_bytes(self) -> int:
        """Bytes of the tensors the path writes besides the output: the conv output and the
        biased (and summed) tensors."""
        return self.conv_y.nbytes + self.t1.nbytes + (self.t2.nbytes if self._z is not None else 0)
