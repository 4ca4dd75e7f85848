"""`ConvSpec`: one 2-D convolution problem, validated, with its derived sizes and its cache key.

Shapes are always given in the logical NCHW order (N, C, H, W for the image, K, C/groups, R, S
for the filter); ``layout`` says how the tensors are laid out in memory. Units: bytes for sizes,
floating-point operations for FLOPs.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from dataclasses import dataclass
from typing import Tuple

from .errors import InvalidSpec

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")
LAYOUTS = ("NCHW", "NHWC")
DIRECTIONS = ("fprop", "dgrad", "wgrad")

#: bytes per element of the tensors a dtype reads (its inputs)
INPUT_ITEMSIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8_e4m3": 1}
#: the dtype of the tensor a convolution writes: fp8 convolutions write fp16 (as cuDNN's do)
OUTPUT_DTYPE = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8_e4m3": "fp16"}
#: upper bound on the elements of any one tensor (cuDNN descriptors use 32-bit element counts)
MAX_ELEMENTS = 2**31 - 1
#: sanity bound on one dimension, so that typos such as N=10**9 are caught before any maths
MAX_DIM = 1 << 20

_INT_FIELDS = ("N", "C", "H", "W", "K", "R", "S", "groups")
_PAIR_FIELDS = ("stride", "padding", "dilation")


def _whole(field: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidSpec(field, value, "must be a whole number (int)")
    value = int(value)
    if value < minimum:
        raise InvalidSpec(field, value, f"must be >= {minimum}")
    if value > MAX_DIM:
        raise InvalidSpec(field, value, f"must be <= {MAX_DIM:,}")
    return value


def _pair(field: str, value, minimum: int) -> Tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise InvalidSpec(field, value, "must be one int or a pair (height, width)")
        return (_whole(field, value[0], minimum), _whole(field, value[1], minimum))
    v = _whole(field, value, minimum)
    return (v, v)


def _choice(field: str, value, allowed: tuple, normalise) -> str:
    if not isinstance(value, str) or normalise(value) not in allowed:
        raise InvalidSpec(field, value, f"must be one of {', '.join(allowed)}")
    return normalise(value)


def dtype_name(value) -> str:
    """A dtype as labkit spells it (``"FP16"`` -> ``"fp16"``).

    Args:
        value: a name in `DTYPES`, any case.

    Returns:
        The name in `DTYPES`; `InvalidSpec` for anything else.
    """
    return _choice("dtype", value, DTYPES, str.lower)


def layout_name(value) -> str:
    """A layout as labkit spells it (``"nhwc"`` -> ``"NHWC"``).

    Args:
        value: a name in `LAYOUTS`, any case.

    Returns:
        The name in `LAYOUTS`; `InvalidSpec` for anything else.
    """
    return _choice("layout", value, LAYOUTS, str.upper)


@dataclass(frozen=True)
class ConvSpec:
    """A convolution problem. Construction validates every field and raises `InvalidSpec`.

    Any padding >= 0 is valid as long as the output has at least one pixel (PyTorch's rule: a 1x1
    filter with padding 3 is fine; windows wholly in padding read zeros).

    Attributes:
        N: batch size.
        C: input channels.
        H: input height, in pixels.
        W: input width, in pixels.
        K: output channels (filters).
        R: filter height, in pixels.
        S: filter width, in pixels.
        stride: (h, w) in pixels; an int is stored as a pair.
        padding: (h, w) in pixels on each side; an int is stored as a pair.
        dilation: (h, w); an int is stored as a pair.
        groups: channel groups; divides C and K.
        dtype: fp32 (true fp32 math, TF32 off), tf32 (fp32 data, TF32 tensor-core math), fp16,
            bf16 or fp8_e4m3 (fp8 inputs, fp16 output).
        layout: NCHW or NHWC, the tensors' order in memory.
        direction: fprop (Y = X * W), dgrad (dX from dY and W) or wgrad (dW from X and dY).
    """

    N: int = 1
    C: int = 64
    H: int = 56
    W: int = 56
    K: int = 64
    R: int = 3
    S: int = 3
    stride: Tuple[int, int] = (1, 1)
    padding: Tuple[int, int] = (1, 1)
    dilation: Tuple[int, int] = (1, 1)
    groups: int = 1
    dtype: str = "fp16"
    layout: str = "NHWC"
    direction: str = "fprop"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        for f in _INT_FIELDS:
            put(f, _whole(f, getattr(self, f), 1))
        put("stride", _pair("stride", self.stride, 1))
        put("padding", _pair("padding", self.padding, 0))
        put("dilation", _pair("dilation", self.dilation, 1))
        put("dtype", dtype_name(self.dtype))
        put("layout", layout_name(self.layout))
        put("direction", _choice("direction", self.direction, DIRECTIONS, str.lower))
        if self.C % self.groups:
            raise InvalidSpec("groups", self.groups, f"must divide C={self.C}")
        if self.K % self.groups:
            raise InvalidSpec("groups", self.groups, f"must divide K={self.K}")
        if self.P < 1 or self.Q < 1:
            raise InvalidSpec(
                "R" if self.P < 1 else "S",
                self.R if self.P < 1 else self.S,
                f"the filter (dilated) is larger than the padded image: output would be {self.P}x{self.Q}",
            )
        for name, shape in (("image", self.x_shape), ("filter", self.w_shape), ("output", self.y_shape)):
            n = _prod(shape)
            if n > MAX_ELEMENTS:
                raise InvalidSpec(
                    "shape", shape, f"the {name} tensor has {n:,} elements; the limit is {MAX_ELEMENTS:,}"
                )
        put("_key", tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)))

    # ---- derived sizes ---------------------------------------------------------------------
    @property
    def P(self) -> int:
        """Output height."""
        return (self.H + 2 * self.padding[0] - self.dilation[0] * (self.R - 1) - 1) // self.stride[0] + 1

    @property
    def Q(self) -> int:
        """Output width."""
        return (self.W + 2 * self.padding[1] - self.dilation[1] * (self.S - 1) - 1) // self.stride[1] + 1

    @property
    def x_shape(self) -> Tuple[int, int, int, int]:
        """Image (X or dX) shape, logical NCHW."""
        return (self.N, self.C, self.H, self.W)

    @property
    def w_shape(self) -> Tuple[int, int, int, int]:
        """Filter (W or dW) shape, logical K, C/groups, R, S."""
        return (self.K, self.C // self.groups, self.R, self.S)

    @property
    def y_shape(self) -> Tuple[int, int, int, int]:
        """Output (Y or dY) shape, logical NCHW."""
        return (self.N, self.K, self.P, self.Q)

    @property
    def output_dtype(self) -> str:
        """dtype of the tensor this direction writes (fp8 convolutions write fp16)."""
        return OUTPUT_DTYPE[self.dtype]

    @property
    def flops(self) -> int:
        """Floating-point operations (a multiply-add counts 2); the same for all three directions."""
        return 2 * self.N * self.K * self.P * self.Q * (self.C // self.groups) * self.R * self.S

    @property
    def tensor_bytes(self) -> dict:
        """Bytes of X, W and Y, each at the itemsize it has in this direction."""
        out_size = INPUT_ITEMSIZE[self.output_dtype] if self.output_dtype != "fp32" else 4
        in_size = INPUT_ITEMSIZE[self.dtype]
        written = {"fprop": "y", "dgrad": "x", "wgrad": "w"}[self.direction]
        shapes = {"x": self.x_shape, "w": self.w_shape, "y": self.y_shape}
        return {k: _prod(s) * (out_size if k == written else in_size) for k, s in shapes.items()}

    @property
    def x_touched(self) -> Tuple[int, int]:
        """Input rows and columns that some filter window covers (padding excluded).

        A window that skips pixels (a 1x1 filter with stride 2 reads one pixel in four) or a border no
        window reaches leaves the rest of the image unread.
        """
        return (
            _covered(self.H, self.P, self.R, self.stride[0], self.padding[0], self.dilation[0]),
            _covered(self.W, self.Q, self.S, self.stride[1], self.padding[1], self.dilation[1]),
        )

    @property
    def touched_bytes(self) -> dict:
        """Bytes of X, W and Y a convolution has to move through device memory at least once.

        That is the whole of W and Y, and of X the pixels some window covers (`x_touched`) over every
        batch item and channel. dgrad writes the whole of dX (pixels no window covers get zeros).
        """
        tb = dict(self.tensor_bytes)
        if self.direction != "dgrad":
            rows, cols = self.x_touched
            tb["x"] = self.N * self.C * rows * cols * INPUT_ITEMSIZE[self.dtype]
        return tb

    @property
    def min_bytes(self) -> int:
        """Fewest bytes moved through device memory (a model).

        The input pixels some window covers are read once (`touched_bytes`), the filter read once and the
        output written once.
        """
        return sum(self.touched_bytes.values())

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of `min_bytes`."""
        return self.flops / self.min_bytes

    # ---- identity --------------------------------------------------------------------------
    @property
    def key(self) -> tuple:
        """Hashable key holding every field: dims, params, dtype, layout and direction.

        It is computed once: strategies look it up on every call.
        """
        return self._key

    def replace(self, **changes) -> "ConvSpec":
        """A copy with some fields changed, validated again.

        Args:
            **changes: field name -> new value.

        Returns:
            The new `ConvSpec`.
        """
        _known_fields(changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The spec as a plain dict, for CSV and JSON recordings.

        Returns:
            Field name -> value, pairs as lists.
        """
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ConvSpec":
        """The spec a dict of fields describes (`to_dict`'s form; pairs as lists or tuples).

        Args:
            d: field name -> value; unknown names are refused.

        Returns:
            The validated `ConvSpec`.
        """
        if not isinstance(d, dict):
            raise InvalidSpec("spec", d, "must be a dict of ConvSpec fields")
        _known_fields(d)
        return cls(**d)

    @classmethod
    def from_label(cls, text: str) -> "ConvSpec":
        """The spec a `label` names, e.g. ``fp8_e4m3 NCHW fprop 1x4x3x3 -> 16 1x1 s2,1 p0``.

        Args:
            text: a label as `label` writes it.

        Returns:
            The validated `ConvSpec`; `InvalidSpec` for text that is not a label.
        """
        m = _LABEL.match(str(text).strip())
        if m is None:
            raise InvalidSpec("label", text, "must read like 'fp16 NHWC fprop 32x64x56x56 -> 64 3x3 s1 p1'")
        dtype, layout, direction, n, c, h, w, k, r, s, stride, padding, dilation, groups = m.groups()

        def pair(v):
            a, _, b = v.partition(",")
            return (int(a), int(b or a))

        return cls(
            **dict(zip("NCHWKRS", map(int, (n, c, h, w, k, r, s)))),
            stride=pair(stride),
            padding=pair(padding),
            dilation=pair(dilation or "1"),
            groups=int(groups or 1),
            dtype=dtype,
            layout=layout,
            direction=direction,
        )

    @property
    def label(self) -> str:
        """Short human label, e.g. ``fp16 NHWC fprop 32x64x56x56 -> 64 3x3 s1 p1``."""
        dilation = f" d{_pair_str(self.dilation)}" if self.dilation != (1, 1) else ""
        groups = f" g{self.groups}" if self.groups != 1 else ""
        return (
            f"{self.dtype} {self.layout} {self.direction} {self.N}x{self.C}x{self.H}x{self.W} -> {self.K} "
            f"{self.R}x{self.S} s{_pair_str(self.stride)} p{_pair_str(self.padding)}{dilation}{groups}"
        )


_PAIR = r"(\d+(?:,\d+)?)"
#: what `ConvSpec.label` writes, read back by `ConvSpec.from_label`
_LABEL = re.compile(
    rf"^(\S+) (\S+) (\S+) (\d+)x(\d+)x(\d+)x(\d+) -> (\d+) (\d+)x(\d+) s{_PAIR} p{_PAIR}"
    rf"(?: d{_PAIR})?(?: g(\d+))?$"
)


def _known_fields(d: dict) -> None:
    names = [f.name for f in dataclasses.fields(ConvSpec)]
    unknown = set(d) - set(names)
    if unknown:
        rule = f"unknown field; known: {names}" if len(unknown) == 1 else f"unknown fields; known: {names}"
        raise InvalidSpec("spec", sorted(unknown), rule)


def _pair_str(p) -> str:
    return str(p[0]) if p[0] == p[1] else f"{p[0]},{p[1]}"


def _covered(size: int, out: int, taps: int, stride: int, pad: int, dilation: int) -> int:
    """How many of ``size`` input positions (0..size-1) the windows of one dimension cover:
    position ``o*stride + t*dilation - pad`` for output ``o < out`` and tap ``t < taps``. Each tap
    covers an arithmetic progression of step ``stride``; progressions with the same start modulo
    ``stride`` merge into intervals of their index, so this is O(taps log taps), not O(out*taps)."""
    runs: dict = {}
    for t in range(taps):
        first = t * dilation - pad  # position of output 0's tap t
        lo = 0 if first >= 0 else -(first // stride)  # first output whose tap lands at >= 0
        hi = min(out - 1, (size - 1 - first) // stride) if size - 1 >= first else -1
        if lo > hi:
            continue
        res, base = first % stride, first // stride  # position = (base + o) * stride + res
        runs.setdefault(res, []).append((base + lo, base + hi))
    total = 0
    for spans in runs.values():
        spans.sort()
        cur_lo, cur_hi = spans[0]
        for a, b in spans[1:]:
            if a > cur_hi + 1:
                total += cur_hi - cur_lo + 1
                cur_lo, cur_hi = a, b
            else:
                cur_hi = max(cur_hi, b)
        total += cur_hi - cur_lo + 1
    return total


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
