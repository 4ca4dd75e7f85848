"""Storage formats of the labkit dtypes: what buffer holds each one, and exact encode/decode.

Every function here works on NumPy arrays (CPU) and on CuPy arrays (GPU) alike; the array
module ``xp`` is taken from the input unless given. CuPy is imported lazily, only to find the
array module of an input, so this module imports on machines without CuPy.

Storage (the dtype of the buffer cuDNN reads or writes):

=========  ===========  ==========================================================
labkit     storage      meaning
=========  ===========  ==========================================================
fp32       float32      IEEE binary32
tf32       float32      binary32 in memory; the tensor cores round it inside the math
fp16       float16      IEEE binary16
bf16       uint16       raw bfloat16 bits (the top half of a binary32; CuPy has no bfloat16)
fp8_e4m3   uint8        raw OCP FP8 E4M3 "fn" bits: bias 7, subnormals, no infinities,
                        max finite 448, NaN = 0x7F / 0xFF
=========  ===========  ==========================================================

Rounding is to nearest, ties to even, done once, directly from float64 (no double rounding
through float32). Overflow: fp16 and bf16 go to +-inf (IEEE); fp8_e4m3 saturates every value
beyond +-448 to +-448, infinities included (as CUDA's ``__NV_SATFINITE`` conversion does). NaN
stays NaN in every format.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidSpec
from ..spec import DTYPES

#: numpy dtype name of the buffer holding each labkit dtype
STORAGE_DTYPE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "uint16", "fp8_e4m3": "uint8"}

#: (significand bits incl. the implicit one, smallest normal exponent, largest finite value)
_FORMAT = {
    "fp32": (24, -126, float(np.finfo(np.float32).max)),
    "tf32": (24, -126, float(np.finfo(np.float32).max)),  # stored as fp32
    "fp16": (11, -14, 65504.0),
    "bf16": (8, -126, float.fromhex("0x1.fep127")),
    "fp8_e4m3": (4, -6, 448.0),
}
FP8_E4M3_MAX = 448.0
_FP8_NAN_CODE = 0x7F


def _check_dtype(dtype: str) -> str:
    if not isinstance(dtype, str) or dtype.lower() not in DTYPES:
        raise InvalidSpec("dtype", dtype, f"must be one of {', '.join(DTYPES)}")
    return dtype.lower()


def array_module(*arrays):
    """The array module (``cupy`` or ``numpy``) of the given arrays; numpy when CuPy is absent."""
    try:
        import cupy  # noqa: WPS433 (lazy: CuPy is absent on CPU machines)
    except ImportError:
        return np
    return cupy.get_array_module(*arrays)


def storage_dtype(dtype: str) -> str:
    """numpy dtype name of the buffer that holds labkit ``dtype`` (see the module table)."""
    return STORAGE_DTYPE[_check_dtype(dtype)]


def _fp8_table() -> np.ndarray:
    """float64 values of the 256 E4M3fn codes (index = code); NaN at 0x7F and 0xFF."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = (codes & 0x7).astype(np.float64)
    mag = np.where(exp == 0, man * 2.0**-9, (1.0 + man / 8.0) * np.ldexp(1.0, exp - 7))
    table = sign * mag
    table[[0x7F, 0xFF]] = np.nan
    return table


#: float64 value of each FP8 E4M3fn code (index = code, 0..255)
FP8_E4M3_TABLE = _fp8_table()
_FP8_POSITIVE = FP8_E4M3_TABLE[:0x7F]  # codes 0x00..0x7E: ascending, 0 .. 448


def round_to_format(values, dtype: str, xp=None):
    """Round float64 ``values`` to the nearest value of ``dtype`` (ties to even), as float64.

    Overflow follows the format (inf for fp32/tf32/fp16/bf16; +-448 for fp8_e4m3); NaN stays NaN;
    the sign of zero is kept. Works elementwise on any shape.
    """
    dtype = _check_dtype(dtype)
    xp = xp or array_module(values)
    v = xp.asarray(values, dtype=xp.float64)
    p, emin, vmax = _FORMAT[dtype]
    with np.errstate(all="ignore"):  # inf/NaN pass through frexp/ldexp harmlessly
        _, e = xp.frexp(v)  # |v| = m * 2**e, m in [0.5, 1): leading bit has exponent e-1
        e = xp.where(xp.isfinite(v), e, 0)
        quantum = xp.maximum(e - 1, emin) - (p - 1)  # exponent of the last kept bit
        r = xp.ldexp(xp.rint(xp.ldexp(v, -quantum)), quantum)  # rint: ties to even; exact
        if dtype == "fp8_e4m3":
            r = xp.where(xp.abs(v) > vmax, xp.copysign(vmax, v), r)
            r = xp.where(xp.isnan(v), xp.nan, r)
        else:
            r = xp.where(xp.abs(r) > vmax, xp.copysign(xp.inf, v), r)
    return r


def encode(values, dtype: str, xp=None):
    """Encode real ``values`` (any float array or scalar) into the storage of ``dtype``.

    Returns an array of ``storage_dtype(dtype)`` with the shape of ``values``, on ``xp`` (default:
    the module of ``values``). Rounding: nearest, ties to even, straight from float64.
    """
    dtype = _check_dtype(dtype)
    xp = xp or array_module(values)
    r = round_to_format(values, dtype, xp)
    if dtype in ("fp32", "tf32"):
        return r.astype(xp.float32)
    if dtype == "fp16":
        return r.astype(xp.float16)  # exact: r is already an fp16 value (or inf/NaN)
    if dtype == "bf16":
        bits = r.astype(xp.float32).view(xp.uint32)  # exact: every bf16 value is a float32
        return (bits >> 16).astype(xp.uint16)
    # fp8_e4m3: r is +-(one of the 127 non-negative finite values) or NaN: look its code up
    table = xp.asarray(_FP8_POSITIVE)
    mag = xp.abs(r)
    nan = xp.isnan(r)
    idx = xp.searchsorted(table, xp.where(nan, 0.0, mag)).astype(xp.uint8)
    code = idx | (xp.signbit(r).astype(xp.uint8) << 7)
    return xp.where(nan, xp.uint8(_FP8_NAN_CODE), code).astype(xp.uint8)


def decode(storage, dtype: str):
    """Exact float64 values of a ``dtype`` storage array (same shape, same array module)."""
    dtype = _check_dtype(dtype)
    xp = array_module(storage)
    s = xp.asarray(storage)
    want = np.dtype(STORAGE_DTYPE[dtype])
    if s.dtype != want:
        raise InvalidSpec("storage", f"{s.dtype} array", f"a {dtype} buffer must be {want}")
    if dtype == "bf16":
        with np.errstate(invalid="ignore"):  # NumPy warns when it widens signalling NaNs
            return (s.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    if dtype == "fp8_e4m3":
        return xp.asarray(FP8_E4M3_TABLE)[s]
    return s.astype(xp.float64)


def quantize(values, dtype: str, xp=None):
    """``(storage, exact)``: ``encode(values)`` and the exact float64 values cuDNN will read from it."""
    storage = encode(values, dtype, xp)
    return storage, decode(storage, dtype)


def unrounded_values(shape, seed: int = 0) -> np.ndarray:
    """The float64 values `random_inputs` draws for ``seed`` before rounding them (NumPy, CPU)."""
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)


def random_inputs(shape, dtype: str, xp=None, seed: int = 0, *, chunk_elements: int = 1 << 24):
    """Seeded random tensor for ``dtype``: ``(storage, exact_float64)``, both of ``shape`` on ``xp``.

    Values are uniform in [-1, 1] before rounding (for fp8_e4m3 that keeps all but ~1.6 % of them
    normal: the smallest normal is 2**-6). They are drawn on the CPU with NumPy's PCG64 and rounded
    on ``xp`` (default numpy) ``chunk_elements`` at a time (bounding the temporaries); the rounding
    is exact arithmetic, so a seed gives the same values on every machine and array module. Never
    all zeros: if rounding leaves only zeros, the first element is set to 1.
    """
    dtype = _check_dtype(dtype)
    xp = xp or np
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    vals = unrounded_values(shape, seed).reshape(-1)
    storage = xp.empty(vals.size, dtype=STORAGE_DTYPE[dtype])
    exact = xp.empty(vals.size, dtype=xp.float64)
    step = max(1, int(chunk_elements))
    for i in range(0, vals.size, step):
        storage[i:i + step], exact[i:i + step] = quantize(xp.asarray(vals[i:i + step]), dtype, xp)
    if vals.size and not bool(xp.any(exact)):
        storage[:1], exact[:1] = quantize(xp.ones(1), dtype, xp)
    return storage.reshape(shape), exact.reshape(shape)
