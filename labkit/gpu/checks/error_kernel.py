"""The error of a plan's output against the float64 reference in one pass over both, on the GPU.

A plan's check (`labkit.gpu.cudnn.reference_runs`) compares the output it wrote with the float64
reference. `ErrorSlots.launch` reads the output's storage as it is (fp32, tf32, fp16, bf16 or fp8
bits, decoded exactly in the kernel: no float64 copy of the output) and the reference in the same
storage order (`storage_order`, made once for every plan), and leaves two terms in a slot of a
device array: ``max |out - ref|`` and the sum of squares of ``(out - ref) / max |ref|``. The
reference's largest magnitude is known before any plan runs (`reference.reference_norms`), so the
scaled sum needs no second pass, and the sum of squares can neither overflow nor underflow for an
output within a factor of 1e150 of its reference (one further off is wrong whatever its sum says).
Each block sums its part in a fixed order and the last block to finish sums the blocks' parts in
block order: the same inputs give the same bits, run after run. All the slots of one check come back
in one copy (`ErrorSlots.copy_to_host`); `reference.errors_from_terms` turns a slot into the
relative and largest absolute errors. `terms` and `norms` serve `reference.error_terms` and
`reference.reference_norms` on CuPy arrays: every error on the GPU is computed here.

One launch a plan instead of a decode and four reductions: a convolution's check runs each of its
plans (tens of them) one after another, and the host's launches were a third of its time.
"""

from __future__ import annotations

import math

import cupy
import numpy

from ...errors import InvalidSpec
from ..buffers import memory, numerics

#: threads per block (the kernel's shared arrays are this long)
THREADS = 256
#: the most blocks one launch uses; their parts are summed by the last block
MAX_BLOCKS = 1024
#: how the kernel reads each labkit dtype's storage ("float64": values already decoded; "zeros": no
#: output, all zeros: the terms are the reference's own, for `norms`)
KIND = {"float64": 0, "fp32": 1, "tf32": 1, "fp16": 2, "bf16": 3, "fp8_e4m3": 4, "zeros": 5}

#: the larger of two doubles, NaN when either is (CUDA's fmax drops a NaN)
_NANMAX_C = "__device__ double labkit_nanmax(double a, double b) { return (a != a || a > b) ? a : b; }"

_CODE = "\n".join(
    (
        numerics.BITS_C,
        _NANMAX_C,
        r"""
__device__ double labkit_stored(const void* out, int kind, const double* table, long long i) {
    switch (kind) {
    case 1: return labkit_f32_value(((const unsigned int*)out)[i]);
    case 2: return labkit_bits_value(((const unsigned short*)out)[i], 10, 5);
    case 3: return labkit_f32_value(((unsigned int)((const unsigned short*)out)[i]) << 16);
    case 4: return table[((const unsigned char*)out)[i]];
    case 5: return 0.0;
    default: return ((const double*)out)[i];
    }
}
__device__ void labkit_block_sum(double* top, double* sq) {
    for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            top[threadIdx.x] = labkit_nanmax(top[threadIdx.x], top[threadIdx.x + w]);
            sq[threadIdx.x] += sq[threadIdx.x + w];
        }
        __syncthreads();
    }
}
extern "C" __global__ void labkit_check_terms(
    const void* out, const int kind, const double* table, const double* ref, const long long n,
    const double inv_scale, double* parts, unsigned int* arrived, double* terms)
{
    __shared__ double top[256], sq[256];
    __shared__ bool last;
    double m = 0.0, s = 0.0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        double d = fabs(labkit_stored(out, kind, table, i) - ref[i]);
        double q = d * inv_scale;
        m = labkit_nanmax(m, d);
        s += q * q;
    }
    top[threadIdx.x] = m;
    sq[threadIdx.x] = s;
    __syncthreads();
    labkit_block_sum(top, sq);
    if (threadIdx.x == 0) {
        parts[2 * blockIdx.x] = top[0];
        parts[2 * blockIdx.x + 1] = sq[0];
        __threadfence();
        last = atomicAdd(arrived, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    m = 0.0;
    s = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        m = labkit_nanmax(m, ((volatile double*)parts)[2 * b]);
        s += ((volatile double*)parts)[2 * b + 1];
    }
    top[threadIdx.x] = m;
    sq[threadIdx.x] = s;
    __syncthreads();
    labkit_block_sum(top, sq);
    if (threadIdx.x == 0) {
        terms[0] = top[0];
        terms[1] = sq[0];
        *arrived = 0u;  // ready for the next launch on the stream
    }
}
""",
    )
)

_KERNEL = None
_FP8_TABLE = None


def _kernel():
    """The compiled kernel and the device's fp8 table, made at first use."""
    global _KERNEL, _FP8_TABLE
    if _KERNEL is None:
        _FP8_TABLE = cupy.asarray(numerics.FP8_E4M3_TABLE, dtype=cupy.float64)
        _KERNEL = cupy.RawKernel(_CODE, "labkit_check_terms")
    return _KERNEL, _FP8_TABLE


def storage_order(ref, layout: str):
    """A logical NCHW reference laid out as the output's storage is (contiguous).

    Args:
        ref: the float64 reference, logical (n, c, h, w), as `labkit.gpu.cudnn.reference_runs.expected`
            gives it.
        layout: the output's layout, NCHW or NHWC.

    Returns:
        A contiguous float64 CuPy array in ``layout``'s order (a copy only where the order differs).
    """
    ref = cupy.asarray(ref, dtype=cupy.float64)
    return cupy.ascontiguousarray(ref if layout == "NCHW" else ref.transpose(0, 2, 3, 1))


class ErrorSlots:
    """Device slots for the error terms of many outputs, each filled by one launch on the current
    stream, read back together.

    Args:
        rows: how many outputs (plans).
        per_row: how many references each is compared with (each takes two terms).
    """

    def __init__(self, rows: int, per_row: int = 1):
        self.terms = cupy.zeros((max(1, rows), 2 * per_row), dtype=cupy.float64)
        self._parts = cupy.empty(2 * MAX_BLOCKS, dtype=cupy.float64)
        self._arrived = cupy.zeros(1, dtype=cupy.uint32)

    def launch(self, row: int, column: int, storage, dtype: str, ref, ref_scale: float) -> None:
        """Compare one output's storage with a reference into slot (``row``, ``column``), without waiting.

        Args:
            row: the output's row.
            column: which of its references (0, or 1 for a second).
            storage: the output as stored: a contiguous CuPy array of ``dtype``'s storage (not read
                for ``"zeros"``).
            dtype: its labkit dtype, or a `KIND` of its own (``"float64"``, ``"zeros"``).
            ref: the reference in ``storage``'s order (`storage_order`), contiguous float64.
            ref_scale: ``max |ref|`` (`reference.reference_norms`' first value).
        """
        if dtype not in KIND:
            raise InvalidSpec("dtype", dtype, f"must be one of {', '.join(KIND)}")
        want = "float64" if dtype in ("float64", "zeros") else numerics.storage_dtype(dtype)
        if dtype == "zeros":
            storage = ref  # not read
        if storage.dtype != numpy.dtype(want) or not storage.flags.c_contiguous:
            raise InvalidSpec("storage", f"{storage.dtype} array", f"must be a contiguous {want} array")
        if ref.dtype != numpy.float64 or not ref.flags.c_contiguous or ref.size != storage.size:
            raise InvalidSpec("ref", tuple(ref.shape), f"must be contiguous float64 of {storage.size} values")
        n = int(storage.size)
        if n == 0:
            return  # the slot's zeros: no difference
        kernel, table = _kernel()
        # over `reference.usable_scale` (not imported: that module calls this one for CuPy arrays)
        inv = 1.0 / ref_scale if math.isfinite(ref_scale) and ref_scale > 0 else 1.0
        blocks = min(MAX_BLOCKS, -(-n // THREADS))
        slot = self.terms[row, 2 * column :]
        kernel(
            (blocks,),
            (THREADS,),
            (
                storage,
                numpy.int32(KIND[dtype]),
                table,
                ref,
                numpy.int64(n),
                numpy.float64(inv),
                self._parts,
                self._arrived,
                slot,
            ),
        )

    def copy_to_host(self, host: numpy.ndarray) -> None:
        """Copy every slot into ``host`` on the current stream, without waiting (read it after a sync).

        Args:
            host: page-locked float64 memory of ``terms``' size (`labkit.gpu.buffers.memory.pinned`).
        """
        memory.copy_to_host_async(host, self.terms.data.ptr)


def terms(out, ref, ref_scale: float):
    """`reference.error_terms` of two CuPy arrays of one shape: one launch, not waited for.

    Args:
        out: the output's values (copied to contiguous float64 when they are not).
        ref: the reference (likewise).
        ref_scale: ``max |ref|``.

    Returns:
        A 2-element float64 CuPy array.
    """
    slots = ErrorSlots(1)
    out, ref = (cupy.ascontiguousarray(a, dtype=cupy.float64) for a in (out, ref))
    slots.launch(0, 0, out, "float64", ref, ref_scale)
    return slots.terms[0]


def norms(ref) -> tuple:
    """`reference.reference_norms` of a CuPy array: two launches, each read back.

    Args:
        ref: the reference, any float dtype.

    Returns:
        ``(max |ref|, ||ref||_2)``, with `reference.reference_norms`' answers for NaN, inf and zeros.
    """
    ref = cupy.ascontiguousarray(ref, dtype=cupy.float64)
    if ref.size == 0:
        return 0.0, 0.0
    slots = ErrorSlots(1)
    slots.launch(0, 0, None, "zeros", ref, math.nan)  # the largest magnitude first
    scale = float(slots.terms[0, 0])
    if not math.isfinite(scale):
        return math.inf, math.inf
    if scale == 0.0:
        return 0.0, 0.0
    slots.launch(0, 0, None, "zeros", ref, scale)  # then the sum of squares over it: no overflow
    return scale, scale * math.sqrt(float(slots.terms[0, 1]))
