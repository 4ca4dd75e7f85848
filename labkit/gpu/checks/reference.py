"""Independent float64 reference for 2-D convolution: fprop, dgrad and wgrad.

Direct convolution by im2col (strided slices of the zero-padded image) and a batched matmul per
group, all in float64. No cuDNN, no torch: only the array module of the inputs (NumPy on the CPU,
CuPy on the GPU; CuPy is imported lazily). Cross-correlation, as cuDNN's
CUDNN_CROSS_CORRELATION and PyTorch's conv2d::

    y[n, k, p, q] = sum_{c', r, s} x[n, g*Cg + c', p*sh + r*dh - ph, q*sw + s*dw - pw] * w[k, c', r, s]

with g = k // (K/groups), Cg = C/groups and x taken as 0 outside the image. ``stride``,
``padding`` and ``dilation`` are ints or (h, w) pairs; padding (ph, pw) is added on both sides
(top and bottom, left and right). Shapes are logical NCHW: x (N, C, H, W), w (K, C/groups, R, S),
y (N, K, P, Q) with P = (H + 2ph - dh(R-1) - 1) // sh + 1 and Q likewise.

Memory: the im2col buffer is R*S times the image; the work is split over batch images (and, if
one image alone is too big, over output rows) so that the temporaries of one step stay under
``max_temp_bytes`` (default 512 MiB). Outputs are float64 arrays on the inputs' array module.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from ...errors import InvalidSpec
from ..buffers.numerics import array_module

#: default bound on the temporaries (im2col buffer, padded image, partial products) of one step, bytes
DEFAULT_TEMP_BYTES = 512 * 2**20
_F64 = 8  # bytes per float64

#: Largest relative_error (||out - ref||_2 / ||ref||_2) accepted for each input dtype, when the
#: reference is computed on the exact values cuDNN read (see `labkit.numerics.quantize`), so only
#: the convolution's own arithmetic is being judged. u = unit roundoff (half an ulp at 1).
#:   fp32  2e-5: true fp32 math (TF32 off). Direct/GEMM algorithms with fp32 accumulation land near
#:         1e-7..1e-6; FFT and Winograd transforms lose more (~1e-6..1e-5), so 2e-5 keeps them in.
#:   tf32  5e-3: inputs are cut to a 10-bit mantissa inside the math (u = 2**-11 = 4.9e-4, or a
#:         biased 2**-10 if truncated); two inputs per product give ~5e-4..1e-3 overall: 5x margin.
#:   fp16  5e-3: fp32 accumulation, then one fp16 rounding of the output (u = 4.9e-4, RMS ~3e-4);
#:         fp16 Winograd/FFT transforms add up to ~1e-3: 5x+ margin.
#:   bf16  2e-2: as fp16 with a 7-bit mantissa output (u = 2**-8 = 3.9e-3, RMS ~2.3e-3).
#:   fp8_e4m3 1e-2: inputs are exactly known fp8 values and the output is fp16 (RMS ~3e-4), but
#:         FP8 tensor-core accumulation on Hopper keeps only ~14 significant bits, so long
#:         reductions drift by ~1e-3: 1e-2 leaves room without hiding real bugs (those give O(1)).
#: Any wrong index, padding or group mapping gives errors of order 0.1..1, far above all of these.
TOLERANCE = {"fp32": 2e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2, "fp8_e4m3": 1e-2}

#: Per-term roundoff of the accumulator, for the growth term of `tolerance_for`: fp32 accumulation
#: (2**-23, twice its unit roundoff) for every dtype but fp8, whose Hopper tensor-core accumulation
#: keeps ~14 bits (2**-13).
_ACCUMULATOR_EPS = {
    "fp32": 2.0**-23,
    "tf32": 2.0**-23,
    "fp16": 2.0**-23,
    "bf16": 2.0**-23,
    "fp8_e4m3": 2.0**-13,
}


# ---- helpers ----------------------------------------------------------------------------------
def _pair(name: str, v) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise InvalidSpec(name, v, "must be one int or an (h, w) pair")
        a, b = int(v[0]), int(v[1])
    else:
        a = b = int(v)
    if a < (0 if name == "padding" else 1) or b < (0 if name == "padding" else 1):
        raise InvalidSpec(name, v, "must be >= 0" if name == "padding" else "must be >= 1")
    return a, b


def _params(stride, padding, dilation, groups):
    g = int(groups)
    if g < 1:
        raise InvalidSpec("groups", groups, "must be >= 1")
    return _pair("stride", stride), _pair("padding", padding), _pair("dilation", dilation), g


def _as_f64(xp, a, name: str, ndim: int = 4):
    a = xp.asarray(a, dtype=xp.float64)
    if a.ndim != ndim:
        raise InvalidSpec(name, tuple(a.shape), f"must be a {ndim}-D array")
    return a


def _out_hw(hw, rs, stride, padding, dilation) -> tuple:
    """Output (P, Q) of an (H, W) image under an (R, S) filter; InvalidSpec if empty."""
    out = tuple((hw[i] + 2 * padding[i] - dilation[i] * (rs[i] - 1) - 1) // stride[i] + 1 for i in (0, 1))
    if out[0] < 1 or out[1] < 1:
        raise InvalidSpec(
            "shape",
            (tuple(hw), tuple(rs)),
            f"the dilated filter is larger than the padded image (output {out})",
        )
    return out


def _check_groups(C: int, K: int, Cg: int, g: int):
    if K % g:
        raise InvalidSpec("groups", g, f"must divide K={K}")
    if Cg * g != C:
        raise InvalidSpec(
            "groups", g, f"filter has C/groups={Cg} channels but the image has C={C} (needs C = groups*{Cg})"
        )


def _plan(N: int, P: int, image_bytes: int, row_bytes: int, budget: int):
    """(images per step, output rows per step) so that one step's temporaries fit ``budget`` bytes.

    ``image_bytes``: temporaries per image whatever the rows; ``row_bytes``: per image and output
    row. Whole images when one fits, else one image and as many rows as fit (at least one).
    """
    per_image = image_bytes + P * row_bytes
    if per_image <= budget:
        return max(1, min(N, budget // per_image)), P
    return 1, max(1, min(P, (budget - image_bytes) // row_bytes if budget > image_bytes else 1))


def _pad(xp, x, padding):
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _taps(xpad, R, S, p0, pc, Q, stride, dilation):
    """Yield (r, s, view): the (n, C, pc, Q) slice of the padded image that tap (r, s) reads for
    output rows p0 .. p0+pc-1 (a strided view, no copy)."""
    (sh, sw), (dh, dw) = stride, dilation
    for r in range(R):
        h0 = p0 * sh + r * dh
        for s in range(S):
            w0 = s * dw
            yield r, s, xpad[:, :, h0 : h0 + sh * (pc - 1) + 1 : sh, w0 : w0 + sw * (Q - 1) + 1 : sw]


def _im2col(xp, xpad, R, S, p0, pc, Q, stride, dilation):
    """im2col buffer (n, C, R*S, pc, Q) for output rows p0 .. p0+pc-1 (one contiguous copy)."""
    return xp.stack([v for _, _, v in _taps(xpad, R, S, p0, pc, Q, stride, dilation)], axis=2)


# ---- the three directions ---------------------------------------------------------------------
def conv_fprop(x, w, stride=1, padding=0, dilation=1, groups=1, *, max_temp_bytes: int = DEFAULT_TEMP_BYTES):
    """Forward convolution (cross-correlation) in float64.

    Args:
        x: the image, (N, C, H, W), any float dtype.
        w: the filter, (K, C/groups, R, S).
        stride: an int or an (h, w) pair, in pixels.
        padding: an int or an (h, w) pair, in pixels on each side.
        dilation: an int or an (h, w) pair.
        groups: channel groups.
        max_temp_bytes: the most temporary memory at a time, in bytes (the work is split to fit).

    Returns:
        y: (N, K, P, Q), float64, on x's array module.
    """
    xp = array_module(x, w)
    x, w = _as_f64(xp, x, "x"), _as_f64(xp, w, "w")
    stride, padding, dilation, g = _params(stride, padding, dilation, groups)
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    _check_groups(C, K, Cg, g)
    P, Q = _out_hw((H, W), (R, S), stride, padding, dilation)
    Hp, Wp = H + 2 * padding[0], W + 2 * padding[1]
    wm = w.reshape(g, K // g, Cg * R * S)  # (g, Kg, Cg*R*S), (c', r, s) order as in the im2col buffer
    y = xp.empty((N, K, P, Q), dtype=xp.float64)
    nb, rows = _plan(N, P, _F64 * C * Hp * Wp, _F64 * Q * (C * R * S + 2 * K), max_temp_bytes)
    for n0 in range(0, N, nb):
        n1 = min(N, n0 + nb)
        xpad = _pad(xp, x[n0:n1], padding)
        for p0 in range(0, P, rows):
            pc = min(P, p0 + rows) - p0
            cols = _im2col(xp, xpad, R, S, p0, pc, Q, stride, dilation).reshape(
                n1 - n0, g, Cg * R * S, pc * Q
            )
            y[n0:n1, :, p0 : p0 + pc] = xp.matmul(wm, cols).reshape(n1 - n0, K, pc, Q)
    return y


def conv_dgrad(
    dy, w, x_hw, stride=1, padding=0, dilation=1, groups=1, *, max_temp_bytes: int = DEFAULT_TEMP_BYTES
):
    """Data gradient in float64: the exact adjoint of `conv_fprop` with respect to x.

    Computed by col2im: each tap's contribution is scatter-added into a zero-padded dx, then the
    padding is cut off. Image rows and columns that no window reads (possible with stride > 1) get 0.

    Args:
        dy: the output's gradient, (N, K, P, Q).
        w: the filter, (K, C/groups, R, S).
        x_hw: the image's (H, W), in pixels.
        stride: an int or an (h, w) pair, in pixels.
        padding: an int or an (h, w) pair, in pixels on each side.
        dilation: an int or an (h, w) pair.
        groups: channel groups.
        max_temp_bytes: the most temporary memory at a time, in bytes.

    Returns:
        dx: (N, C, H, W), float64.
    """
    xp = array_module(dy, w)
    dy, w = _as_f64(xp, dy, "dy"), _as_f64(xp, w, "w")
    stride, padding, dilation, g = _params(stride, padding, dilation, groups)
    H, W = (int(v) for v in x_hw)
    N, K, P, Q = dy.shape
    K2, Cg, R, S = w.shape
    C = Cg * g
    if K2 != K:
        raise InvalidSpec("w", tuple(w.shape), f"has K={K2} filters but dy has K={K} channels")
    _check_groups(C, K, Cg, g)
    if (P, Q) != _out_hw((H, W), (R, S), stride, padding, dilation):
        raise InvalidSpec(
            "dy",
            tuple(dy.shape),
            f"P, Q must be {_out_hw((H, W), (R, S), stride, padding, dilation)} for x_hw={(H, W)}",
        )
    (ph, pw), Hp, Wp = padding, H + 2 * padding[0], W + 2 * padding[1]
    wt = w.reshape(g, K // g, Cg * R * S).transpose(0, 2, 1)  # (g, Cg*R*S, Kg)
    dx = xp.empty((N, C, H, W), dtype=xp.float64)
    nb, rows = _plan(N, P, _F64 * C * Hp * Wp, _F64 * Q * (2 * C * R * S + K), max_temp_bytes)
    for n0 in range(0, N, nb):
        n1 = min(N, n0 + nb)
        n = n1 - n0
        dxpad = xp.zeros((n, C, Hp, Wp), dtype=xp.float64)
        for p0 in range(0, P, rows):
            pc = min(P, p0 + rows) - p0
            d = dy[n0:n1, :, p0 : p0 + pc].reshape(n, g, K // g, pc * Q)
            cols = xp.matmul(wt, d).reshape(n, C, R, S, pc, Q)
            for r, s, view in _taps(dxpad, R, S, p0, pc, Q, stride, dilation):
                view += cols[:, :, r, s]  # a strided view: distinct pixels, so += is a true scatter-add
        dx[n0:n1] = dxpad[:, :, ph : ph + H, pw : pw + W]
    return dx


def conv_wgrad(
    x, dy, rs, stride=1, padding=0, dilation=1, groups=1, *, max_temp_bytes: int = DEFAULT_TEMP_BYTES
):
    """Filter gradient in float64: the adjoint of `conv_fprop` with respect to w.

    Args:
        x: the image, (N, C, H, W).
        dy: the output's gradient, (N, K, P, Q).
        rs: the filter's (R, S), in pixels.
        stride: an int or an (h, w) pair, in pixels.
        padding: an int or an (h, w) pair, in pixels on each side.
        dilation: an int or an (h, w) pair.
        groups: channel groups.
        max_temp_bytes: the most temporary memory at a time, in bytes.

    Returns:
        dw: (K, C/groups, R, S), float64.
    """
    xp = array_module(x, dy)
    x, dy = _as_f64(xp, x, "x"), _as_f64(xp, dy, "dy")
    stride, padding, dilation, g = _params(stride, padding, dilation, groups)
    R, S = (int(v) for v in rs)
    N, C, H, W = x.shape
    N2, K, P, Q = dy.shape
    if N2 != N:
        raise InvalidSpec("dy", tuple(dy.shape), f"batch {N2} differs from x's batch {N}")
    if C % g:
        raise InvalidSpec("groups", g, f"must divide C={C}")
    Cg = C // g
    _check_groups(C, K, Cg, g)
    if (P, Q) != _out_hw((H, W), (R, S), stride, padding, dilation):
        raise InvalidSpec(
            "dy",
            tuple(dy.shape),
            f"P, Q must be {_out_hw((H, W), (R, S), stride, padding, dilation)} "
            f"for x {(H, W)}, filter {(R, S)}",
        )
    Hp, Wp = H + 2 * padding[0], W + 2 * padding[1]
    dwt = xp.zeros(
        (g, Cg * R * S, K // g), dtype=xp.float64
    )  # transposed: keeps the big operand un-transposed
    nb, rows = _plan(
        N, P, _F64 * (C * Hp * Wp + K * Cg * R * S), _F64 * Q * (C * R * S + 2 * K), max_temp_bytes
    )
    for n0 in range(0, N, nb):
        n1 = min(N, n0 + nb)
        n = n1 - n0
        xpad = _pad(xp, x[n0:n1], padding)
        for p0 in range(0, P, rows):
            pc = min(P, p0 + rows) - p0
            cols = _im2col(xp, xpad, R, S, p0, pc, Q, stride, dilation).reshape(n, g, Cg * R * S, pc * Q)
            d = dy[n0:n1, :, p0 : p0 + pc].reshape(n, g, K // g, pc * Q)
            dwt += xp.matmul(cols, d.transpose(0, 1, 3, 2)).sum(axis=0)  # (g, Cg*R*S, Kg)
    return dwt.transpose(0, 2, 1).reshape(K, Cg, R, S)


# ---- dispatch on a spec -----------------------------------------------------------------------
_INPUTS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("x", "dy")}


def reference(spec, inputs: dict, *, max_temp_bytes: int = DEFAULT_TEMP_BYTES):
    """The float64 result of a convolution, logical NCHW.

    ``spec.dtype`` and ``spec.layout`` do not enter: the maths is float64 NCHW.

    Args:
        spec: the `labkit.spec.ConvSpec`.
        inputs: float64 arrays of the exact values cuDNN read: 'x', 'w' for fprop; 'dy', 'w' for
            dgrad; 'x', 'dy' for wgrad.
        max_temp_bytes: the most temporary memory at a time, in bytes.

    Returns:
        y (spec.y_shape) for fprop, dx (spec.x_shape) for dgrad, dw (spec.w_shape) for wgrad.
    """
    shapes = {"x": spec.x_shape, "w": spec.w_shape, "dy": spec.y_shape}
    need = _INPUTS[spec.direction]
    missing = [k for k in need if k not in inputs]
    if missing:
        raise InvalidSpec("inputs", sorted(inputs), f"{spec.direction} needs {list(need)}; missing {missing}")
    for k in need:
        if tuple(inputs[k].shape) != tuple(shapes[k]):
            raise InvalidSpec(
                "inputs", f"{k}{tuple(inputs[k].shape)}", f"must have shape {shapes[k]} for {spec.label}"
            )
    geo = dict(
        stride=spec.stride,
        padding=spec.padding,
        dilation=spec.dilation,
        groups=spec.groups,
        max_temp_bytes=max_temp_bytes,
    )
    if spec.direction == "fprop":
        return conv_fprop(inputs["x"], inputs["w"], **geo)
    if spec.direction == "dgrad":
        return conv_dgrad(inputs["dy"], inputs["w"], (spec.H, spec.W), **geo)
    return conv_wgrad(inputs["x"], inputs["dy"], (spec.R, spec.S), **geo)


# ---- error measures ---------------------------------------------------------------------------
def _pair_f64(out, ref):
    xp = array_module(out, ref)
    out, ref = xp.asarray(out, dtype=xp.float64), xp.asarray(ref, dtype=xp.float64)
    if out.shape != ref.shape:
        raise InvalidSpec("out", tuple(out.shape), f"must have the reference's shape {tuple(ref.shape)}")
    return xp, out, ref


def reference_norms(ref) -> Tuple[float, float]:
    """The reference's part of `errors`: its largest magnitude and its 2-norm, in float64.

    A graph's plans are all compared with one reference, so `labkit.gpu.cudnn.reference_runs` computes
    these once for all of them. On CuPy arrays, two passes of `labkit.gpu.checks.error_kernel`.

    Args:
        ref: the reference, any float dtype.

    Returns:
        ``(max |ref|, ||ref||_2)``; ``(inf, inf)`` when ``ref`` holds NaN or inf; ``(0.0, 0.0)`` when
        it is all zeros or empty.
    """
    xp = array_module(ref)
    if xp is not np:
        from . import error_kernel  # heavy: CuPy, live only

        return error_kernel.norms(ref)
    ref = np.asarray(ref, dtype=np.float64)
    if ref.size == 0:
        return 0.0, 0.0
    scale = float(np.max(np.abs(ref)))  # NaN or inf when any element is (max propagates NaN)
    if not math.isfinite(scale):
        return math.inf, math.inf
    if scale == 0.0:
        return 0.0, 0.0
    # scaled by the largest magnitude first, so the sum of squares cannot overflow or underflow
    return scale, scale * float(np.sqrt(np.sum((ref / scale) ** 2)))


def usable_scale(scale: float) -> float:
    """The divisor of `error_terms`' sum of squares: the reference's largest magnitude, or 1 when
    that is zero or not finite (`errors_from_terms` does not read the sum then).

    Args:
        scale: ``max |ref|``.

    Returns:
        The divisor.
    """
    return scale if math.isfinite(scale) and scale > 0 else 1.0


def error_terms(out, ref, *, ref_scale: Optional[float] = None):
    """The device part of `errors`, with no read back to the host: a 2-element float64 array of
    ``max |out - ref|`` and the sum of squares of ``(out - ref) / max |ref|`` (`usable_scale`).

    The reference's largest magnitude is known before any output is compared with it (one reference,
    many plans), so each output is read once: on CuPy arrays, one launch of
    `labkit.gpu.checks.error_kernel`. The sum of squares can neither overflow nor underflow for an
    output within a factor of 1e150 of its reference; one further off is inf, as its error is.
    `errors_from_terms` turns the terms into the errors.

    Args:
        out: decoded values, any float dtype.
        ref: the reference, of the same shape.
        ref_scale: ``max |ref|`` (`reference_norms`' first value); computed here when not given.

    Returns:
        The array, on ``out``'s device (NumPy for NumPy inputs); a NaN or inf largest difference when
        any element of either array is NaN or inf.
    """
    xp, out, ref = _pair_f64(out, ref)
    scale = reference_norms(ref)[0] if ref_scale is None else ref_scale
    if xp is not np:
        from . import error_kernel  # heavy: CuPy, live only

        return error_kernel.terms(out, ref, scale)
    if out.size == 0:
        return np.zeros(2)
    diff = out - ref
    with np.errstate(over="ignore", invalid="ignore"):
        return np.stack([np.max(np.abs(diff)), np.sum((diff / usable_scale(scale)) ** 2)])


def errors_from_terms(terms, ref_norms: Tuple[float, float]) -> Tuple[float, float]:
    """The host part of `errors`: the relative and largest absolute errors from `error_terms`.

    Args:
        terms: `error_terms`' two values, on the host.
        ref_norms: `reference_norms` of the reference.

    Returns:
        ``(relative error, max absolute error)``, as `relative_error` and `max_abs_error` define them.
    """
    dmax, scaled_squares = (float(v) for v in terms)
    scale, den = ref_norms
    max_abs = math.inf if math.isnan(dmax) else dmax
    if not (math.isfinite(scale) and math.isfinite(dmax)):  # NaN or inf in the output or the reference
        return math.inf, max_abs
    if scale == 0.0:
        return (0.0 if dmax == 0.0 else math.inf), max_abs
    if dmax == 0.0:
        return 0.0, max_abs
    return scale * math.sqrt(scaled_squares) / den, max_abs


def errors(out, ref, *, ref_norms: Optional[Tuple[float, float]] = None) -> Tuple[float, float]:
    """`relative_error` and `max_abs_error` together: `reference_norms` (unless given), `error_terms`,
    one host read, then `errors_from_terms`.

    Args:
        out: decoded values, any float dtype.
        ref: the reference, of the same shape.
        ref_norms: `reference_norms` of ``ref``, when the caller has them (one reference, many plans).

    Returns:
        ``(relative error, max absolute error)``, as the two functions define them.
    """
    xp = array_module(out, ref)
    norms = reference_norms(ref) if ref_norms is None else ref_norms
    terms = _to_host(xp, error_terms(out, ref, ref_scale=norms[0]))
    return errors_from_terms(terms, norms)


def _to_host(xp, arr):
    return arr if xp is np else arr.get()


def relative_error(out, ref) -> float:
    """||out - ref||_2 / ||ref||_2 over all elements, in float64.

    Args:
        out: decoded values (e.g. `labkit.gpu.buffers.numerics.decode` of a bf16 buffer), any float dtype.
        ref: the reference, of the same shape.

    Returns:
        A float >= 0; inf when ``out`` or ``ref`` holds NaN or inf, or when a difference is over about
        1e150 times ``max |ref|`` (`error_terms`). For an all-zero ``ref``: 0.0 when ``out`` is zero
        too, else inf.
    """
    return errors(out, ref)[0]


def max_abs_error(out, ref) -> float:
    """max |out - ref| over all elements.

    Args:
        out: decoded values, any float dtype.
        ref: the reference, of the same shape.

    Returns:
        A float; inf if ``out`` or ``ref`` holds NaN; 0.0 if empty.
    """
    return errors(out, ref)[1]


def reduction_length(spec) -> int:
    """Terms summed into one output element.

    Args:
        spec: the convolution.

    Returns:
        (C/g)RS for fprop, (K/g)RS for dgrad (an upper bound: with stride > 1 fewer taps reach a
        pixel), N*P*Q for wgrad.
    """
    if spec.direction == "fprop":
        return (spec.C // spec.groups) * spec.R * spec.S
    if spec.direction == "dgrad":
        return (spec.K // spec.groups) * spec.R * spec.S
    return spec.N * spec.P * spec.Q


def tolerance_for(spec) -> float:
    """The largest `relative_error` accepted for a convolution.

    That is ``TOLERANCE[spec.dtype]``, raised for long reductions to ``eps_acc * sqrt(n)`` (n =
    `reduction_length`): the accumulator's rounding errors add up like a random walk, ~ u*sqrt(n/6)
    relative for a sequential sum, and eps_acc is ~5x that (2**-23 for fp32 accumulation, 2**-13 for
    Hopper's fp8 accumulation). E.g. fp32 wgrad with N*P*Q = 100,352 gets 3.8e-5 instead of 2e-5.

    Args:
        spec: the convolution.

    Returns:
        The tolerance.
    """
    return max(TOLERANCE[spec.dtype], _ACCUMULATOR_EPS[spec.dtype] * math.sqrt(reduction_length(spec)))
