"""Storage formats of the labkit dtypes: what buffer holds each one, and exact encode/decode.

Every function here works on NumPy arrays (CPU) and on CuPy arrays (GPU) alike; the array
module ``xp`` is taken from the input unless given. CuPy is never imported here (an input is a
CuPy array only once CuPy is imported), so this module imports on machines without CuPy.

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
through float32). On CuPy arrays, `quantize` (and so `random_inputs`) and `decode` run as one
fused kernel per storage type (`_cupy_kernels`) instead of a chain of a dozen ufuncs: CuPy
compiles every distinct kernel with NVRTC at its first use on a machine (0.1-0.2 s each on the
H200's host: docs/findings.md), and chains of ufuncs would be most of a first visit's compiles;
the GPU tests check both paths give the same bits. Overflow: fp16 and bf16 go to +-inf (IEEE);
fp8_e4m3 saturates every value beyond +-448 to +-448, infinities included (as CUDA's
``__NV_SATFINITE`` conversion does). NaN stays NaN in every format.
"""

from __future__ import annotations

import sys

import numpy as np

from ...errors import InvalidSpec
from ...spec import DTYPES

#: numpy dtype name of the buffer holding each labkit dtype
STORAGE_DTYPE = {
    "fp32": "float32",
    "tf32": "float32",
    "fp16": "float16",
    "bf16": "uint16",
    "fp8_e4m3": "uint8",
}

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
    """The array module of the given arrays: ``cupy`` when one of them is a CuPy array, else numpy.

    Not ``cupy.get_array_module``: it imports cupyx (cupyx.scipy.sparse, and with it SciPy: 0.8 s of
    a first panel on the GPU host) to recognise sparse matrices.

    Args:
        *arrays: arrays or scalars.

    Returns:
        The module.
    """
    cupy = sys.modules.get("cupy")  # not imported yet: none of them can be a CuPy array
    if cupy is not None and any(isinstance(a, cupy.ndarray) for a in arrays):
        return cupy
    return np


def storage_dtype(dtype: str) -> str:
    """The numpy dtype name of the buffer that holds a labkit dtype (see the module table).

    Args:
        dtype: a labkit dtype name.

    Returns:
        e.g. "uint16" for bf16.
    """
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
    """Round float64 values to the nearest value of a dtype (ties to even), as float64.

    Overflow follows the format (inf for fp32/tf32/fp16/bf16; +-448 for fp8_e4m3); NaN stays NaN;
    the sign of zero is kept. Works elementwise on any shape.

    Args:
        values: an array or scalar.
        dtype: a labkit dtype name.
        xp: numpy or cupy; default the module of ``values``.

    Returns:
        A float64 array of the rounded values.
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
    """Encode real values into the storage of a dtype. Rounding: nearest, ties to even, from float64.

    Args:
        values: any float array or scalar.
        dtype: a labkit dtype name.
        xp: numpy or cupy; default the module of ``values``.

    Returns:
        An array of ``storage_dtype(dtype)`` with the shape of ``values``.
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
    """Exact float64 values of a dtype's storage array.

    Args:
        storage: an array of ``storage_dtype(dtype)``.
        dtype: a labkit dtype name.

    Returns:
        A float64 array of the same shape, in the same array module.
    """
    dtype = _check_dtype(dtype)
    xp = array_module(storage)
    s = xp.asarray(storage)
    want = np.dtype(STORAGE_DTYPE[dtype])
    if s.dtype != want:
        raise InvalidSpec("storage", f"{s.dtype} array", f"a {dtype} buffer must be {want}")
    if dtype == "bf16":
        if xp is not np:
            return _cupy_kernels()["decode_bf16"](s)
        with np.errstate(invalid="ignore"):  # NumPy warns when it widens signalling NaNs
            return (s.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    if dtype == "fp8_e4m3":
        return xp.asarray(FP8_E4M3_TABLE)[s]
    if xp is not np and dtype in ("fp32", "tf32"):  # subnormals kept (a plain astype may flush them)
        return _cupy_kernels()["decode_float32"](s)
    return s.astype(xp.float64)


def quantize(values, dtype: str, xp=None):
    """A dtype's storage of some values, and the exact float64 values cuDNN will read from it.

    Args:
        values: an array or scalar.
        dtype: a labkit dtype name.
        xp: numpy or cupy; default the module of ``values`` (CuPy runs one fused kernel).

    Returns:
        ``(storage, exact)``: ``encode(values)`` and its float64 values.
    """
    dtype = _check_dtype(dtype)
    xp = xp or array_module(values)
    if xp is not np:  # CuPy: one fused kernel
        v = xp.asarray(values, dtype=xp.float64)
        storage = xp.empty(v.shape, dtype=STORAGE_DTYPE[dtype])
        exact = xp.empty(v.shape, dtype=xp.float64)
        p, emin, vmax = _FORMAT[dtype]
        _cupy_kernels()[STORAGE_DTYPE[dtype]](v, p, emin, vmax, int(dtype == "fp8_e4m3"), storage, exact)
        return storage, exact
    storage = encode(values, dtype, xp)
    return storage, decode(storage, dtype)


#: C of `round_to_format` for one float64 ``x`` (kernel arguments ``p``, ``emin``, ``vmax``,
#: ``fp8``: the dtype's `_FORMAT` and whether it saturates) into ``double r``
_ROUND_C = """
double r;
{
    int e = 0;
    if (isfinite(x)) frexp(x, &e);
    int q = max(e - 1, emin) - (p - 1);
    r = ldexp(rint(ldexp(x, -q)), q);
    if (fp8) {
        if (fabs(x) > vmax) r = copysign(vmax, x);
        if (isnan(x)) r = x;
    } else if (fabs(r) > vmax) {
        r = copysign(1.0 / 0.0, x);
    }
}
exact = r;
"""
#: C helpers of the kernels: a float32 value's bits from its float64 value, and the value of any
#: IEEE-style format's bits (``labkit_bits_value``; float32's, ``labkit_f32_value``), by arithmetic on
#: exact values (not the float/double conversions, which NVRTC's kernels may compile flushing
#: float32 subnormals to zero: seen on the H200 with CuPy 14)
BITS_C = """
__device__ unsigned int labkit_f32_bits(double r) {  // r: a float32 value, an infinity or NaN
    unsigned int sign = signbit(r) ? 0x80000000u : 0u;
    double m = fabs(r);
    if (isnan(r)) return sign | 0x7FC00000u;
    if (isinf(r)) return sign | 0x7F800000u;
    if (m < ldexp(1.0, -126)) return sign | (unsigned int)ldexp(m, 149);  // subnormal: m = mantissa * 2**-149
    int e = 0;
    double f = frexp(m, &e);  // m = f * 2**e, f in [0.5, 1)
    return sign | ((unsigned int)(e + 126) << 23) | (unsigned int)ldexp(f * 2.0 - 1.0, 23);
}
__device__ double labkit_bits_value(unsigned int b, int man_bits, int exp_bits) {  // IEEE-style bits
    unsigned int emax = (1u << exp_bits) - 1u, ef = (b >> man_bits) & emax, man = b & ((1u << man_bits) - 1u);
    int shift = (int)(emax >> 1) + man_bits;  // the bias and the significand's bits
    double v = ef == 0 ? ldexp((double)man, 1 - shift)
             : ef == emax ? (man ? nan("") : 1.0 / 0.0)
             : ldexp((double)(man | (1u << man_bits)), (int)ef - shift);
    return ((b >> (man_bits + exp_bits)) & 1u) ? -v : v;
}
__device__ double labkit_f32_value(unsigned int b) { return labkit_bits_value(b, 23, 8); }
"""
#: C that stores ``r`` (already a value of the format) in each storage type
_STORE_C = {
    "float32": "storage = __uint_as_float(labkit_f32_bits(r));",
    # a normal float32: converted exactly
    "float16": "storage = (float16)__uint_as_float(labkit_f32_bits(r));",
    "uint16": "storage = (unsigned short)(labkit_f32_bits(r) >> 16);",  # bf16: the top half of the float
    "uint8": """
unsigned int code = 0x7F;  // NaN
if (!isnan(r)) {
    double m = fabs(r);
    int e2 = 0;
    double f = frexp(m, &e2);  // m = f * 2**e2, f in [0.5, 1)
    code = m < 0.015625 ? (unsigned int)(m * 512.0)  // subnormal (and zero): m = mantissa * 2**-9
                        : ((unsigned int)(e2 + 6) << 3) | (unsigned int)((f * 2.0 - 1.0) * 8.0);
    if (signbit(r)) code |= 0x80;
}
storage = (unsigned char)code;""",
}


def _cupy_kernels() -> dict:
    """CuPy ElementwiseKernels (made once): storage dtype name -> quantize kernel
    ``(x, p, emin, vmax, fp8) -> (storage, exact)``; ``"uniform"`` (`_UNIFORM_C`), ``"decode_bf16"`` and
    ``"decode_float32"``."""
    global _KERNELS
    if _KERNELS is None:
        import cupy  # heavy: CuPy, live only

        made = {
            name: cupy.ElementwiseKernel(
                "float64 x, int32 p, int32 emin, float64 vmax, int32 fp8",
                f"{name} storage, float64 exact",
                _ROUND_C + store,
                f"labkit_quantize_{name}",
                preamble=BITS_C,
            )
            for name, store in _STORE_C.items()
        }
        made["uniform"] = cupy.ElementwiseKernel(
            "uint64 key, uint64 offset", "float64 v", _UNIFORM_C, "labkit_uniform"
        )
        made["decode_bf16"] = cupy.ElementwiseKernel(
            "uint16 s",
            "float64 v",
            "v = labkit_f32_value(((unsigned int)s) << 16);",
            "labkit_decode_bf16",
            preamble=BITS_C,
        )
        made["decode_float32"] = cupy.ElementwiseKernel(
            "float32 s",
            "float64 v",
            "v = labkit_f32_value(__float_as_uint(s));",
            "labkit_decode_float32",
            preamble=BITS_C,
        )
        _KERNELS = made
    return _KERNELS


_KERNELS = None


#: SplitMix64's constants: the golden-ratio increment of its state and its two output multipliers
_GAMMA, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1
#: C of the kernel that draws `unrounded_values` on the GPU: the same steps as `_uniform_numpy`
_UNIFORM_C = f"""
unsigned long long z = key + (offset + (unsigned long long)i + 1ULL) * {_GAMMA:#x}ULL;
z = (z ^ (z >> 30)) * {_MIX1:#x}ULL;
z = (z ^ (z >> 27)) * {_MIX2:#x}ULL;
z ^= z >> 31;
v = (double)(z >> 11) * {2.0**-53!r} * 2.0 - 1.0;
"""


def _mix64(z: int) -> int:
    """SplitMix64's output function of one 64-bit state (Python ints)."""
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _key(seed: int) -> int:
    """The stream's starting state for a seed: SplitMix64's first output from it."""
    return _mix64((int(seed) + _GAMMA) & _MASK64)


def _uniform_numpy(n: int, key: int, offset: int) -> np.ndarray:
    """Elements ``offset .. offset + n - 1`` of a stream, as `_UNIFORM_C` computes them."""
    z = (np.arange(offset + 1, offset + n + 1, dtype=np.uint64) * np.uint64(_GAMMA)) + np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 2.0 - 1.0


def _uniform(n: int, seed: int, offset: int, xp):
    """``n`` stream values from element ``offset`` on, drawn on ``xp`` (a CuPy kernel on the GPU)."""
    key = _key(seed)
    if xp is np:
        return _uniform_numpy(n, key, offset)
    out = xp.empty(n, dtype=xp.float64)
    _cupy_kernels()["uniform"](np.uint64(key), np.uint64(offset), out)
    return out


def unrounded_values(shape, seed: int = 0, xp=None):
    """The float64 values `random_inputs` draws for a seed before rounding them.

    Element ``i`` (row-major) is SplitMix64's output for state ``key + (i + 1) * gamma`` (``key``
    derived from the seed), its top 53 bits scaled to [-1, 1). Each element depends only on the seed
    and its index, so NumPy and CuPy give the same bits and the GPU draws them in one kernel.

    Args:
        shape: the tensor's shape (or one length).
        seed: the seed (a whole number).
        xp: numpy (default) or cupy: where the values are drawn.

    Returns:
        An array of ``xp``, uniform in [-1, 1).
    """
    xp = xp or np
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    return _uniform(int(np.prod(shape, dtype=np.int64)), seed, 0, xp).reshape(shape)


def random_inputs(
    shape, dtype: str, xp=None, *, seed: int = 0, chunk_elements: int = 1 << 24, keep_exact: bool = True
):
    """A seeded random tensor for a dtype, with its exact float64 values.

    Values are uniform in [-1, 1] before rounding (for fp8_e4m3 that keeps all but ~1.6 % of them
    normal: the smallest normal is 2**-6). They are drawn on ``xp`` (`unrounded_values`: a
    counter-based stream) and rounded there; both steps are exact arithmetic, so a seed gives the same
    values on every machine and array module. Never all zeros: if rounding leaves only zeros, the
    first element is set to 1.

    Args:
        shape: the tensor's shape.
        dtype: a labkit dtype name.
        xp: numpy or cupy; default numpy.
        seed: the seed.
        chunk_elements: elements rounded at a time (bounds the temporaries).
        keep_exact: False leaves ``exact`` None: no float64 copy is kept (inputs only timed, never
            checked).

    Returns:
        ``(storage, exact)``, both of ``shape`` on ``xp``.
    """
    dtype = _check_dtype(dtype)
    xp = xp or np
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    size = int(np.prod(shape, dtype=np.int64))
    storage = xp.empty(size, dtype=STORAGE_DTYPE[dtype])
    exact = xp.empty(size, dtype=xp.float64) if keep_exact else None
    step = max(1, int(chunk_elements))
    nonzero = False
    for i in range(0, size, step):
        vals = _uniform(min(step, size - i), seed, i, xp)
        storage[i : i + step], part = quantize(vals, dtype, xp)
        if keep_exact:
            exact[i : i + step] = part
        nonzero = (
            nonzero or float(xp.max(xp.abs(part))) > 0
        )  # not any(): CuPy compiles it with CUB, 3 s on a first use
    if size and not nonzero:
        one_storage, one = quantize(xp.ones(1), dtype, xp)
        storage[:1] = one_storage
        if keep_exact:
            exact[:1] = one
    return storage.reshape(shape), (exact.reshape(shape) if keep_exact else None)
