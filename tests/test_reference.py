"""labkit.gpu.checks.reference: the float64 convolution reference (NumPy only, CPU, fast).

Checked three ways: against naive nested loops written straight from the definition, by the
adjoint identities <fprop(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)> over random valid
ConvSpecs (hypothesis), and chunked == unchunked.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from labkit.errors import InvalidSpec
from labkit.gpu.checks.reference import (
    DEFAULT_TEMP_BYTES,
    TOLERANCE,
    conv_dgrad,
    conv_fprop,
    conv_wgrad,
    error_terms,
    errors,
    errors_from_terms,
    max_abs_error,
    reduction_length,
    reference,
    reference_norms,
    relative_error,
    tolerance_for,
)
from labkit.spec import ConvSpec

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")


# ---- naive loops, straight from the definition ------------------------------------------------
def _geo(spec):
    return dict(stride=spec.stride, padding=spec.padding, dilation=spec.dilation, groups=spec.groups)


def _taps(spec):
    """Yield every (n, k, p, q, c, c', r, s, h, w) term of the convolution sum that lies in the image."""
    (sh, sw), (ph, pw), (dh, dw) = spec.stride, spec.padding, spec.dilation
    Cg, Kg = spec.C // spec.groups, spec.K // spec.groups
    for n in range(spec.N):
        for k in range(spec.K):
            grp = k // Kg
            for p in range(spec.P):
                for q in range(spec.Q):
                    for cc in range(Cg):
                        for r in range(spec.R):
                            for s in range(spec.S):
                                h, w = p * sh + r * dh - ph, q * sw + s * dw - pw
                                if 0 <= h < spec.H and 0 <= w < spec.W:
                                    yield n, k, p, q, grp * Cg + cc, cc, r, s, h, w


def naive_fprop(spec, x, w):
    y = np.zeros(spec.y_shape)
    for n, k, p, q, c, cc, r, s, h, ww in _taps(spec):
        y[n, k, p, q] += x[n, c, h, ww] * w[k, cc, r, s]
    return y


def naive_dgrad(spec, dy, w):
    dx = np.zeros(spec.x_shape)
    for n, k, p, q, c, cc, r, s, h, ww in _taps(spec):
        dx[n, c, h, ww] += dy[n, k, p, q] * w[k, cc, r, s]
    return dx


def naive_wgrad(spec, x, dy):
    dw = np.zeros(spec.w_shape)
    for n, k, p, q, c, cc, r, s, h, ww in _taps(spec):
        dw[k, cc, r, s] += dy[n, k, p, q] * x[n, c, h, ww]
    return dw


SMALL_SPECS = [
    ConvSpec(N=2, C=3, H=5, W=6, K=4, R=3, S=3, stride=1, padding=1),
    ConvSpec(N=1, C=2, H=7, W=5, K=3, R=3, S=2, stride=(2, 1), padding=(1, 0)),  # non-square, asymmetric
    ConvSpec(N=2, C=4, H=9, W=8, K=6, R=3, S=3, stride=2, padding=(2, 1), dilation=(2, 1), groups=2),
    ConvSpec(N=1, C=6, H=6, W=7, K=6, R=3, S=3, stride=(1, 2), padding=1, groups=6),  # depthwise
    ConvSpec(N=2, C=4, H=6, W=6, K=8, R=3, S=3, stride=1, padding=(0, 2), groups=4),  # depthwise x2
    ConvSpec(N=1, C=3, H=8, W=8, K=2, R=2, S=2, stride=3, padding=0),  # stride > filter: unread pixels
    ConvSpec(N=1, C=2, H=5, W=9, K=2, R=1, S=1, stride=(2, 3), padding=0),  # 1x1 strided
    ConvSpec(N=1, C=2, H=10, W=7, K=3, R=3, S=2, stride=(3, 2), padding=(4, 1), dilation=(2, 3)),
    ConvSpec(N=1, C=1, H=1, W=1, K=1, R=1, S=1, padding=0),
    ConvSpec(N=1, C=2, H=5, W=6, K=3, R=1, S=1, stride=2, padding=3),  # padding past the filter's reach
    ConvSpec(N=1, C=2, H=4, W=4, K=2, R=3, S=2, padding=(4, 2), dilation=(1, 2)),
]


def _rand(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


@pytest.mark.parametrize("spec", SMALL_SPECS, ids=lambda s: s.label)
def test_fprop_matches_naive(spec):
    x, w = _rand(spec.x_shape, 1), _rand(spec.w_shape, 2)
    y = conv_fprop(x, w, **_geo(spec))
    assert y.shape == spec.y_shape and y.dtype == np.float64
    np.testing.assert_allclose(y, naive_fprop(spec, x, w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SMALL_SPECS, ids=lambda s: s.label)
def test_dgrad_matches_naive(spec):
    dy, w = _rand(spec.y_shape, 3), _rand(spec.w_shape, 4)
    dx = conv_dgrad(dy, w, (spec.H, spec.W), **_geo(spec))
    assert dx.shape == spec.x_shape
    np.testing.assert_allclose(dx, naive_dgrad(spec, dy, w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SMALL_SPECS, ids=lambda s: s.label)
def test_wgrad_matches_naive(spec):
    x, dy = _rand(spec.x_shape, 5), _rand(spec.y_shape, 6)
    dw = conv_wgrad(x, dy, (spec.R, spec.S), **_geo(spec))
    assert dw.shape == spec.w_shape
    np.testing.assert_allclose(dw, naive_wgrad(spec, x, dy), rtol=1e-12, atol=1e-12)


def test_hand_computed_example():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    w = np.array([[[[1.0, 0.0], [0.0, -1.0]]]])  # x[h, w] - x[h+1, w+1]
    y = conv_fprop(x, w, stride=2, padding=0)
    np.testing.assert_array_equal(y, np.full((1, 1, 2, 2), -5.0))
    # padding 1, 3x3 all-ones: each output sums the in-image part of a 3x3 window
    y = conv_fprop(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), padding=1)
    np.testing.assert_array_equal(y[0, 0], [[4, 6, 4], [6, 9, 6], [4, 6, 4]])
    # 1x1 identity filter: y == x
    xi = _rand((2, 3, 4, 5), 0)
    np.testing.assert_array_equal(conv_fprop(xi, np.eye(3).reshape(3, 3, 1, 1)), xi)


def test_stride_leaves_unread_pixels_without_gradient():
    spec = ConvSpec(N=1, C=1, H=7, W=7, K=1, R=2, S=2, stride=3, padding=0)  # reads rows/cols 0,1,3,4
    dx = conv_dgrad(np.ones(spec.y_shape), np.ones(spec.w_shape), (7, 7), stride=3)
    unread = [2, 5, 6]
    assert not dx[0, 0, unread, :].any() and not dx[0, 0, :, unread].any()
    assert (dx[0, 0][np.ix_([0, 1, 3, 4], [0, 1, 3, 4])] == 1).all()


def test_inputs_of_lower_precision_are_upcast():
    spec = SMALL_SPECS[2]
    x, w = _rand(spec.x_shape, 1).astype(np.float16), _rand(spec.w_shape, 2).astype(np.float32)
    y = conv_fprop(x, w, **_geo(spec))
    assert y.dtype == np.float64
    np.testing.assert_allclose(
        y, naive_fprop(spec, x.astype(np.float64), w.astype(np.float64)), rtol=1e-12, atol=1e-12
    )


def test_bad_shapes_raise():
    with pytest.raises(InvalidSpec):
        conv_fprop(np.zeros((1, 4, 5, 5)), np.zeros((2, 3, 3, 3)))  # C/groups mismatch
    with pytest.raises(InvalidSpec):
        conv_fprop(np.zeros((1, 4, 5, 5)), np.zeros((3, 2, 3, 3)), groups=2)  # K not divisible
    with pytest.raises(InvalidSpec):
        conv_fprop(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 3)))  # filter larger than image
    with pytest.raises(InvalidSpec):
        conv_dgrad(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 3)), (5, 5))  # P, Q do not match H, W
    with pytest.raises(InvalidSpec):
        conv_wgrad(np.zeros((1, 1, 5, 5)), np.zeros((2, 1, 3, 3)), (3, 3))  # batch mismatch
    with pytest.raises(InvalidSpec):
        conv_fprop(np.zeros((1, 1, 5, 5)), np.zeros((1, 1, 3, 3)), stride=0)


# ---- adjoint identities over random valid specs -----------------------------------------------
@st.composite
def small_specs(draw):
    g = draw(st.integers(1, 3))
    R, S = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = (draw(st.integers(0, dil[0] * (R - 1))), draw(st.integers(0, dil[1] * (S - 1))))
    try:
        spec = ConvSpec(
            N=draw(st.integers(1, 3)),
            C=g * draw(st.integers(1, 3)),
            K=g * draw(st.integers(1, 3)),
            H=draw(st.integers(1, 12)),
            W=draw(st.integers(1, 12)),
            R=R,
            S=S,
            stride=(draw(st.integers(1, 4)), draw(st.integers(1, 4))),
            padding=pad,
            dilation=dil,
            groups=g,
            direction=draw(st.sampled_from(["fprop", "dgrad", "wgrad"])),
            dtype=draw(st.sampled_from(DTYPES)),
        )
    except InvalidSpec:
        assume(False)
    assume(spec.flops <= 2e5)
    return spec


def _adjoint_terms(spec, seed, **kw):
    rng = np.random.default_rng(seed)
    x, w, dy = rng.normal(size=spec.x_shape), rng.normal(size=spec.w_shape), rng.normal(size=spec.y_shape)
    geo = _geo(spec)
    a = np.vdot(conv_fprop(x, w, **geo, **kw), dy)
    b = np.vdot(x, conv_dgrad(dy, w, (spec.H, spec.W), **geo, **kw))
    c = np.vdot(w, conv_wgrad(x, dy, (spec.R, spec.S), **geo, **kw))
    # scale of the sums: sum over terms of |x w dy| (what rounding errors are relative to)
    scale = np.vdot(conv_fprop(np.abs(x), np.abs(w), **geo), np.abs(dy))
    return a, b, c, scale


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(small_specs(), st.integers(0, 2**32 - 1), st.sampled_from([DEFAULT_TEMP_BYTES, 3000, 1]))
def test_adjoint_identities(spec, seed, budget):
    a, b, c, scale = _adjoint_terms(spec, seed, max_temp_bytes=budget)
    assert abs(a - b) <= 1e-10 * scale
    assert abs(a - c) <= 1e-10 * scale


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(small_specs(), st.integers(0, 2**32 - 1))
def test_reference_dispatch_and_shapes(spec, seed):
    rng = np.random.default_rng(seed)
    x, w, dy = rng.normal(size=spec.x_shape), rng.normal(size=spec.w_shape), rng.normal(size=spec.y_shape)
    out = reference(spec, {"x": x, "w": w, "dy": dy})
    want = {
        "fprop": (naive_fprop, (x, w), spec.y_shape),
        "dgrad": (naive_dgrad, (dy, w), spec.x_shape),
        "wgrad": (naive_wgrad, (x, dy), spec.w_shape),
    }[spec.direction]
    assert out.shape == want[2] and out.dtype == np.float64
    if spec.flops <= 2e4:  # the naive loops are slow; check the values on the smaller ones
        np.testing.assert_allclose(out, want[0](spec, *want[1]), rtol=1e-12, atol=1e-12)


def test_reference_rejects_missing_or_misshapen_inputs():
    spec = ConvSpec(N=1, C=2, H=4, W=4, K=2, R=3, S=3, direction="dgrad")
    with pytest.raises(InvalidSpec):
        reference(spec, {"x": np.zeros(spec.x_shape), "w": np.zeros(spec.w_shape)})
    with pytest.raises(InvalidSpec):
        reference(spec, {"dy": np.zeros((1, 2, 3, 3)), "w": np.zeros(spec.w_shape)})


# ---- chunking ---------------------------------------------------------------------------------
CHUNK_SPECS = [
    ConvSpec(N=5, C=4, H=9, W=7, K=6, R=3, S=3, stride=1, padding=1, groups=2),
    ConvSpec(N=3, C=3, H=11, W=8, K=2, R=3, S=2, stride=(2, 3), padding=(2, 1), dilation=(2, 1)),
    ConvSpec(N=4, C=2, H=8, W=8, K=2, R=2, S=2, stride=3, padding=0),
]


@pytest.mark.parametrize("budget", [1, 2000, 20000])  # 1 B: one image and one output row per step
@pytest.mark.parametrize("spec", CHUNK_SPECS, ids=lambda s: s.label)
def test_chunked_equals_unchunked(spec, budget):
    rng = np.random.default_rng(9)
    x, w, dy = rng.normal(size=spec.x_shape), rng.normal(size=spec.w_shape), rng.normal(size=spec.y_shape)
    geo = _geo(spec)
    for f, args in (
        (conv_fprop, (x, w)),
        (conv_dgrad, (dy, w, (spec.H, spec.W))),
        (conv_wgrad, (x, dy, (spec.R, spec.S))),
    ):
        full = f(*args, **geo)
        small = f(*args, **geo, max_temp_bytes=budget)
        np.testing.assert_allclose(small, full, rtol=1e-13, atol=1e-13, err_msg=f.__name__)
    a, b, c, scale = _adjoint_terms(spec, 3, max_temp_bytes=budget)
    assert abs(a - b) <= 1e-10 * scale and abs(a - c) <= 1e-10 * scale


def test_chunk_plan_bounds_memory():
    from labkit.gpu.checks.reference import _plan

    # N=32, C=64, 56x56, 3x3: ~17.8 MB of temporaries per image -> 30 images per step under 512 MiB
    P = Q = 56
    nb, rows = _plan(32, P, 8 * 64 * 58 * 58, 8 * Q * (64 * 9 + 2 * 64), DEFAULT_TEMP_BYTES)
    assert rows == P and 16 <= nb < 32
    assert nb * (8 * 64 * 58 * 58 + P * 8 * Q * (64 * 9 + 2 * 64)) <= DEFAULT_TEMP_BYTES
    # one image too big: split over rows
    nb, rows = _plan(2, 100, 1000, 100, 5000)
    assert nb == 1 and rows == 40


# ---- error measures and tolerances ------------------------------------------------------------
def test_relative_error_basics():
    ref = np.array([3.0, 4.0])
    assert relative_error(ref, ref) == 0.0
    assert relative_error(np.array([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert relative_error(np.zeros(2), ref) == pytest.approx(1.0)
    assert relative_error(np.array([3.0, np.nan]), ref) == math.inf
    assert relative_error(np.array([np.inf, 4.0]), ref) == math.inf
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error(np.array([0.0, 1e-30]), np.zeros(2)) == math.inf
    assert relative_error(np.float16([3, 4]), ref) == 0.0  # any float dtype
    assert isinstance(relative_error(ref, ref), float)
    big = np.array([1e300, -1e300])  # no overflow in the sums of squares
    assert relative_error(big * (1 + 1e-3), big) == pytest.approx(1e-3)
    with pytest.raises(InvalidSpec):
        relative_error(np.zeros(3), np.zeros(2))


def test_errors_with_the_references_norms_given_once_are_the_same_numbers():
    rng = np.random.default_rng(5)
    ref = rng.normal(size=(4, 6))
    norms = reference_norms(ref)
    assert norms == (float(np.abs(ref).max()), pytest.approx(float(np.linalg.norm(ref))))
    for out in (ref, ref + rng.normal(size=ref.shape) * 1e-3, np.zeros_like(ref), ref * np.nan):
        assert errors(out, ref, ref_norms=norms) == (relative_error(out, ref), max_abs_error(out, ref))
    assert reference_norms(np.array([1.0, np.inf])) == (math.inf, math.inf)
    assert reference_norms(np.zeros(3)) == (0.0, 0.0) == reference_norms(np.zeros(0))
    assert errors(np.array([1.0, 2.0]), np.array([1.0, np.nan])) == (math.inf, math.inf)


def test_equal_outputs_and_nan_differences_warn_of_nothing():
    """The error terms always compute the scaled sum of squares, NaN when the difference is all zeros
    or NaN; NumPy must not warn of it (the sum is not read then)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert errors(np.ones(3), np.ones(3)) == (0.0, 0.0)
        assert errors(np.array([1.0, np.nan]), np.ones(2)) == (math.inf, math.inf)


def test_max_abs_error_basics():
    ref = np.array([[1.0, -2.0], [3.0, 0.0]])
    assert max_abs_error(ref, ref) == 0.0
    assert max_abs_error(ref + np.array([[0, 0.5], [-0.25, 0]]), ref) == 0.5
    assert max_abs_error(np.array([[1.0, np.nan], [3, 0]]), ref) == math.inf
    assert isinstance(max_abs_error(ref, ref), float)


def test_tolerances():
    assert set(TOLERANCE) == set(DTYPES)
    assert TOLERANCE["fp32"] < TOLERANCE["tf32"] <= TOLERANCE["bf16"]
    assert TOLERANCE["fp16"] < TOLERANCE["bf16"]
    spec = ConvSpec(N=1, C=64, H=56, W=56, K=64, R=3, S=3, dtype="fp32")
    assert reduction_length(spec) == 576 and tolerance_for(spec) == TOLERANCE["fp32"]
    assert reduction_length(spec.replace(direction="dgrad", K=32)) == 288
    big_wgrad = ConvSpec(N=32, C=64, H=56, W=56, K=64, R=3, S=3, dtype="fp32", direction="wgrad")
    assert reduction_length(big_wgrad) == 32 * 56 * 56
    assert TOLERANCE["fp32"] < tolerance_for(big_wgrad) < 1e-4  # long sums earn a little slack
    for d in DTYPES:
        assert tolerance_for(spec.replace(dtype=d)) >= TOLERANCE[d]
        assert tolerance_for(big_wgrad.replace(dtype=d)) < 0.05


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8_e4m3"])
def test_tolerance_admits_output_rounding_and_rejects_bugs(dtype):
    """A correct result rounded to the output dtype passes; a padding bug fails by far."""
    from labkit.gpu.buffers.numerics import quantize, random_inputs

    spec = ConvSpec(N=2, C=16, H=10, W=10, K=8, R=3, S=3, padding=1, dtype=dtype)
    _, x = random_inputs(spec.x_shape, dtype, np, seed=1)
    _, w = random_inputs(spec.w_shape, dtype, np, seed=2)
    ref = reference(spec, {"x": x, "w": w})
    out = quantize(ref, spec.output_dtype)[1]
    assert relative_error(out, ref) < tolerance_for(spec) / 3
    wrong = conv_fprop(x, w, padding=0)
    wrong = np.pad(wrong, ((0, 0), (0, 0), (1, 1), (1, 1)))
    assert relative_error(wrong, ref) > 10 * tolerance_for(spec)


def test_error_terms_scale_the_squares_by_the_references_largest_magnitude():
    """`error_terms` sums squares of the differences over max |ref| (known before any output is
    compared: one pass over each output, `labkit.gpu.checks.error_kernel` on the GPU); the errors
    are those of the definition, and an output far off its reference is inf, not NaN."""
    rng = np.random.default_rng(11)
    ref = rng.normal(size=(3, 4, 5))
    scale = float(np.abs(ref).max())
    for out in (ref + rng.normal(size=ref.shape) * 1e-3, ref.copy(), np.zeros_like(ref), ref * 1e6):
        want = (float(np.abs(out - ref).max()), float(np.sum(((out - ref) / scale) ** 2)))
        assert tuple(error_terms(out, ref)) == pytest.approx(want, rel=1e-15)
        assert tuple(error_terms(out, ref, ref_scale=scale)) == pytest.approx(want, rel=1e-15)
        rel, worst = errors_from_terms(want, reference_norms(ref))
        assert worst == max_abs_error(out, ref)
        assert rel == pytest.approx(np.linalg.norm(out - ref) / np.linalg.norm(ref), rel=1e-12)
    tiny = ref * 1e-300
    assert relative_error(tiny * 1e300, tiny) == math.inf  # 1e300x off: its sum of squares overflows
    assert errors_from_terms((math.nan, 1.0), reference_norms(ref))[0] == math.inf
    assert errors_from_terms((0.5, 1.0), (0.0, 0.0)) == (math.inf, 0.5)
    assert tuple(error_terms(np.zeros(0), np.zeros(0))) == (0.0, 0.0)
