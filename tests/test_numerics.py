"""labkit.gpu.buffers.numerics: storage formats, exact decode, nearest-even encode (NumPy only, CPU).

Each format is checked against a reference built a different way from the implementation:
NumPy's own float16 cast, a by-hand bit-level round of binary32 for bf16, and brute-force
nearest search over an independently built E4M3 table for fp8.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import InvalidSpec
from labkit.gpu.buffers import numerics
from labkit.gpu.buffers.numerics import (
    decode,
    encode,
    quantize,
    random_inputs,
    storage_dtype,
    unrounded_values,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in cast:RuntimeWarning")  # numpy's own casts

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")
finite_f64 = st.floats(allow_nan=False, allow_infinity=False, width=64)


def test_storage_dtype():
    assert storage_dtype("fp32") == "float32"
    assert storage_dtype("tf32") == "float32"
    assert storage_dtype("fp16") == "float16"
    assert storage_dtype("bf16") == "uint16"
    assert storage_dtype("fp8_e4m3") == "uint8"
    with pytest.raises(InvalidSpec):
        storage_dtype("fp64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_encode_dtype_shape_and_decode_float64(dtype):
    v = np.linspace(-2, 2, 24).reshape(2, 3, 4)
    s = encode(v, dtype)
    assert s.dtype == np.dtype(storage_dtype(dtype)) and s.shape == v.shape
    d = decode(s, dtype)
    assert d.dtype == np.float64 and d.shape == v.shape
    assert np.max(np.abs(d - v)) <= 2**-3 * 2  # coarsest format (fp8) has 3 mantissa bits


def test_decode_rejects_wrong_storage():
    with pytest.raises(InvalidSpec):
        decode(np.zeros(3, np.float32), "bf16")


# ---- fp32 / tf32 ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp32", "tf32"])
def test_fp32_matches_numpy_cast(dtype):
    rng = np.random.default_rng(0)
    v = np.concatenate(
        [rng.normal(size=2000) * 10.0 ** rng.integers(-45, 39, 2000), [1e39, -1e39, 0.0, -0.0]]
    )
    got = encode(v, dtype)
    assert np.array_equal(got.view(np.uint32), v.astype(np.float32).view(np.uint32))


# ---- fp16 -------------------------------------------------------------------------------------
def _f16_bits(a):
    return np.asarray(a, np.float16).view(np.uint16)


def test_fp16_matches_numpy_rounding():
    rng = np.random.default_rng(1)
    v = rng.normal(size=20000) * 2.0 ** rng.integers(-30, 18, 20000)  # subnormals .. overflow
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, -65520.0, 2**-24, 2**-25, 2**-26, 3 * 2**-26]
    )
    v = np.concatenate([v, specials])
    assert np.array_equal(encode(v, "fp16").view(np.uint16), v.astype(np.float16).view(np.uint16))


def test_fp16_ties_to_even_and_no_double_rounding():
    # every midpoint between adjacent positive finite fp16 values (exact in float64)
    codes = np.arange(0, 0x7BFF, dtype=np.uint16)
    lo = codes.view(np.float16).astype(np.float64)
    hi = (codes + 1).view(np.float16).astype(np.float64)
    mid = (lo + hi) / 2
    want = np.where(codes % 2 == 0, codes, codes + 1)  # the even neighbour
    assert np.array_equal(encode(mid, "fp16").view(np.uint16), want)
    assert np.array_equal(encode(-mid, "fp16").view(np.uint16), want | 0x8000)
    # just above a midpoint -> up, even when float32 would first land on the tie
    assert np.array_equal(encode(mid + mid * 2.0**-40, "fp16").view(np.uint16), codes + 1)
    assert np.array_equal(encode(mid - mid * 2.0**-40, "fp16").view(np.uint16), codes)


def test_fp16_nan():
    assert np.isnan(decode(encode([np.nan], "fp16"), "fp16")).all()


# ---- bf16 -------------------------------------------------------------------------------------
def _bf16_by_hand(f32):
    """Round binary32 values to bfloat16 bits, nearest-even, with integer arithmetic."""
    bits = np.asarray(f32, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    return ((bits + 0x7FFF + lsb) >> 16).astype(np.uint16)


def test_bf16_against_bit_level_reference():
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    f32 = bits.view(np.float32)
    f32 = f32[~np.isnan(f32)]
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            1.0,
            -1.0,
            np.finfo(np.float32).max,
            -np.finfo(np.float32).max,
            float.fromhex("0x1.fep127"),
            float.fromhex("0x1.ffp127"),
            2**-133,
            2**-134,
            2**-149,
        ],
        np.float32,
    )
    f32 = np.concatenate([f32, specials])
    got = encode(f32, "bf16")
    assert got.dtype == np.uint16
    assert np.array_equal(got, _bf16_by_hand(f32))


def test_bf16_all_codes_decode_and_round_trip():
    codes = np.arange(2**16, dtype=np.uint32)
    want = (codes << 16).view(np.float32).astype(np.float64)
    got = decode(codes.astype(np.uint16), "bf16")
    nan = np.isnan(want)
    assert nan.sum() == 2 * 127 and np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))  # -0.0 kept
    assert np.array_equal(encode(got[~nan], "bf16"), codes[~nan].astype(np.uint16))


def test_bf16_specials():
    v = [np.nan, np.inf, -np.inf, 0.0, -0.0, float.fromhex("0x1.fep127"), 1e39, -1e39, 1e-50, -1e-50]
    s = encode(v, "bf16")
    assert np.isnan(decode(s[:1], "bf16")).all()
    assert list(s[1:]) == [0x7F80, 0xFF80, 0x0000, 0x8000, 0x7F7F, 0x7F80, 0xFF80, 0x0000, 0x8000]


def test_bf16_float64_input_is_rounded_once():
    # 1 + 2**-8 is the midpoint of 1 and 1 + 2**-7; a hair above it must go up. Through float32
    # the hair is lost and the tie goes to even (1.0): the double-rounding error we must avoid.
    assert int(encode([1 + 2**-8 + 2**-30], "bf16")[0]) == 0x3F81
    assert int(encode([1 + 2**-8], "bf16")[0]) == 0x3F80  # exact tie -> even
    assert int(encode([1 + 3 * 2**-8], "bf16")[0]) == 0x3F82  # exact tie -> even (up)


# ---- fp8 e4m3 ---------------------------------------------------------------------------------
def _e4m3_by_hand(code):
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    mag = math.ldexp(m, -9) if e == 0 else math.ldexp(8 + m, e - 10)
    return -mag if s else mag


def test_fp8_all_codes_decode():
    got = decode(np.arange(256, dtype=np.uint8), "fp8_e4m3")
    for c in range(256):
        want = _e4m3_by_hand(c)
        if math.isnan(want):
            assert math.isnan(got[c]), hex(c)
        else:
            assert got[c] == want and math.copysign(1, got[c]) == math.copysign(1, want), hex(c)
    assert got[0x7E] == 448.0 and got[0xFE] == -448.0
    assert got[0x08] == 2.0**-6  # smallest normal
    assert got[0x07] == 7 * 2.0**-9  # largest subnormal
    assert got[0x01] == 2.0**-9  # smallest subnormal
    assert got[0x38] == 1.0
    assert got[0x00] == 0.0 and not np.signbit(got[0x00])
    assert got[0x80] == 0.0 and np.signbit(got[0x80])
    assert np.isnan(got[0x7F]) and np.isnan(got[0xFF])
    assert np.isnan(got).sum() == 2  # no infinities, only two NaNs
    assert not np.isinf(got).any()


def test_fp8_round_trip_every_code():
    codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], np.uint8)
    assert np.array_equal(encode(decode(codes, "fp8_e4m3"), "fp8_e4m3"), codes)


def test_fp8_ties_to_even():
    pos = np.arange(0, 0x7E, dtype=np.uint8)  # 0x00..0x7D and their upper neighbours
    lo, hi = decode(pos, "fp8_e4m3"), decode(pos + 1, "fp8_e4m3")
    mid = (lo + hi) / 2
    even = np.where(pos % 2 == 0, pos, pos + 1).astype(np.uint8)
    assert np.array_equal(encode(mid, "fp8_e4m3"), even)
    assert np.array_equal(encode(-mid, "fp8_e4m3"), even | 0x80)
    assert int(encode([2.0**-10], "fp8_e4m3")[0]) == 0x00  # half the smallest subnormal -> 0
    assert int(encode([3 * 2.0**-10], "fp8_e4m3")[0]) == 0x02  # 1.5 * 2**-9 -> 2 * 2**-9 (even)
    assert int(encode([5 * 2.0**-10], "fp8_e4m3")[0]) == 0x02  # 2.5 * 2**-9 -> 2 * 2**-9 (even)
    assert int(encode([2.0**-10 + 2.0**-40], "fp8_e4m3")[0]) == 0x01


def test_fp8_nearest_brute_force():
    table = np.array([_e4m3_by_hand(c) for c in range(0x7F)])  # 0 .. 448, ascending
    rng = np.random.default_rng(3)
    v = np.concatenate(
        [rng.uniform(-460, 460, 5000), rng.uniform(-2, 2, 5000), rng.uniform(-0.03, 0.03, 5000)]
    )
    dist = np.abs(np.abs(v)[:, None] - table[None, :])
    best = dist.min(axis=1, keepdims=True)
    cand = dist == best  # 1 or 2 nearest codes; of two, the even one
    idx = np.where(
        cand.sum(axis=1) == 2, np.argmax(cand & (np.arange(0x7F) % 2 == 0), axis=1), np.argmax(cand, axis=1)
    )
    want = (idx | np.where(v < 0, 0x80, 0)).astype(np.uint8)
    assert np.array_equal(encode(v, "fp8_e4m3"), want)


def test_fp8_saturation_and_nan():
    big = [448.0, 449.0, 464.0, 465.0, 480.0, 1e6, 1e300, np.inf]
    assert list(encode(big, "fp8_e4m3")) == [0x7E] * len(big)
    assert list(encode([-x for x in big], "fp8_e4m3")) == [0xFE] * len(big)
    s = encode([np.nan, -np.nan], "fp8_e4m3")
    assert np.isnan(decode(s, "fp8_e4m3")).all()
    assert set(int(c) & 0x7F for c in s) == {0x7F}
    assert int(encode([-0.0], "fp8_e4m3")[0]) == 0x80
    assert int(encode([-1e-9], "fp8_e4m3")[0]) == 0x80  # underflow keeps the sign


# ---- quantize / random_inputs -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_is_encode_then_decode(dtype):
    v = np.random.default_rng(4).normal(size=(3, 5)) * 3
    s, exact = quantize(v, dtype)
    assert np.array_equal(s.view(np.uint8), encode(v, dtype).view(np.uint8))
    assert np.array_equal(exact, decode(s, dtype))
    s2, exact2 = quantize(exact, dtype)  # idempotent
    assert np.array_equal(exact2, exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_inputs(dtype):
    s, exact = random_inputs((2, 3, 4, 5), dtype, np, seed=7)
    assert s.shape == exact.shape == (2, 3, 4, 5)
    assert s.dtype == np.dtype(storage_dtype(dtype)) and exact.dtype == np.float64
    assert np.array_equal(exact, decode(s, dtype))
    assert np.all(np.abs(exact) <= 1.0) and np.any(exact != 0)
    assert np.std(exact) > 0.3  # spread over [-1, 1], not a handful of tiny values
    s2, exact2 = random_inputs((2, 3, 4, 5), dtype, np, seed=7)
    assert np.array_equal(exact2, exact)
    _, exact3 = random_inputs((2, 3, 4, 5), dtype, np, seed=8)
    assert not np.array_equal(exact3, exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_inputs_never_all_zero(dtype):
    for seed in range(200):
        _, exact = random_inputs((1,), dtype, np, seed=seed)
        assert exact[0] != 0


def test_random_inputs_chunking_does_not_change_values():
    s1, e1 = random_inputs((3, 4, 5), "bf16", np, seed=11)
    s2, e2 = random_inputs((3, 4, 5), "bf16", np, seed=11, chunk_elements=7)
    assert np.array_equal(s1, s2) and np.array_equal(e1, e2)


def _splitmix64(state: int) -> int:
    """SplitMix64's output for one state, written out with Python's integers (the reference)."""
    m = (1 << 64) - 1
    z = state & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


@pytest.mark.parametrize("seed", [0, 1, 35, 2**40 + 3])
def test_unrounded_values_are_splitmix64_by_index(seed):
    gamma = 0x9E3779B97F4A7C15
    key = _splitmix64(seed + gamma)
    want = [(_splitmix64(key + (i + 1) * gamma) >> 11) * 2.0**-53 * 2.0 - 1.0 for i in range(50)]
    got = unrounded_values((5, 10), seed)
    assert got.shape == (5, 10) and got.dtype == np.float64
    assert got.reshape(-1).tolist() == want


def test_unrounded_values_are_uniform_and_seeds_independent():
    a, b = unrounded_values(200_000, 0), unrounded_values(200_000, 1)
    assert a.min() >= -1.0 and a.max() < 1.0
    assert abs(a.mean()) < 0.01 and abs(a.std() - 1 / np.sqrt(3)) < 0.005
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.01 and abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.01


def test_fp8_random_inputs_mostly_normal():
    _, exact = random_inputs((10000,), "fp8_e4m3", np, seed=0)
    assert np.mean(np.abs(exact) >= 2.0**-6) > 0.95


# ---- properties -------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(finite_f64, min_size=1, max_size=20), st.sampled_from(["fp16", "bf16", "fp8_e4m3"]))
def test_rounding_is_monotone_odd_and_nearest(vals, dtype):
    v = np.sort(np.array(vals))
    q = quantize(v, dtype)[1]
    assert np.all(q[1:] >= q[:-1])  # monotone (inf included)
    assert np.array_equal(quantize(-v, dtype)[1], -q)  # odd (symmetric)
    # nearest: no representable neighbour of q is closer to v than q
    p, emin, vmax = numerics._FORMAT[dtype]
    fin = np.isfinite(q) & (np.abs(v) <= vmax)
    _, e = np.frexp(v[fin])
    ulp = np.ldexp(1.0, np.maximum(e - 1, emin) - (p - 1))
    assert np.all(np.abs(q[fin] - v[fin]) <= ulp / 2)


@settings(max_examples=100, deadline=None)
@given(finite_f64)
def test_fp16_matches_numpy_property(x):
    assert int(encode([x], "fp16").view(np.uint16)[0]) == int(np.float16(x).view(np.uint16))


@settings(max_examples=100, deadline=None)
@given(st.floats(width=32, allow_nan=False))
def test_bf16_matches_bit_reference_property(x):
    assert int(encode(np.float32([x]), "bf16")[0]) == int(_bf16_by_hand([x])[0])
