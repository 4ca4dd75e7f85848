"""The classic (legacy) cuDNN 9 convolution-forward algorithm table, through a minimal ctypes binding.

It exists for one table: "algorithm -> workspace -> time", as articles about cuDNN workspaces
show it. For every forward algorithm of the classic API (``cudnnConvolutionFwdAlgo_t``, 8 of them)
it asks ``cudnnGetConvolutionForwardWorkspaceSize`` how much scratch memory the algorithm needs,
and (``find=True``) lets ``cudnnFindConvolutionForwardAlgorithmEx`` run and time every algorithm
on real device arrays with a workspace of a chosen size. Everything else in labkit uses the
cuDNN frontend graph API (`labkit.gpu.cudnn`); nothing here executes convolutions for results.
Units: workspace sizes in bytes, times in microseconds (cuDNN's milliseconds * 1000).

Public API
----------
``algorithm_table(spec, *, x=None, w=None, y=None, workspace_limit_bytes=1 << 30, find=True)``
    -> ``pandas.DataFrame``, one row per algorithm in enum order (0..7). Columns:

    ========================= ==============================================================
    ``algo_id``               the ``cudnnConvolutionFwdAlgo_t`` value (0..7)
    ``algorithm``             its name without the prefix, e.g. ``"IMPLICIT_PRECOMP_GEMM"``
    ``query_status``          ``"ok"`` or the status name that
                              ``cudnnGetConvolutionForwardWorkspaceSize`` returned for it,
                              e.g. ``"CUDNN_STATUS_NOT_SUPPORTED"``
    ``query_workspace_bytes`` bytes it asks for (``Int64``; ``<NA>`` unless ok)
    ========================= ==============================================================

    and, with ``find=True``, from one ``cudnnFindConvolutionForwardAlgorithmEx`` call:

    ========================= ==============================================================
    ``find_status``           ``"ok"``, the status name cuDNN put in that algorithm's
                              ``cudnnConvolutionFwdAlgoPerf_t``, or ``"not returned"``
    ``find_rank``             position in cuDNN's result list (0 = fastest), ``Int64``
    ``time_us``               cuDNN's measured time (its ms * 1000), ``Float64``; NA unless ok
    ``find_workspace_bytes``  workspace the timed run used, ``Int64``; NA unless ok
    ``math``                  ``"default"``, ``"tensor op"``, ``"tensor op (allow
                              conversion)"`` or ``"fma"``: the math the timed run used
    ``deterministic``         ``boolean``; NA unless ok
    ========================= ==============================================================

    If cuDNN lists one algorithm more than once (once per math type), the row shows its ok entry
    of the math type the convolution asked for (``df.attrs["math_type_requested"]``), else its
    first ok entry (cuDNN sorts its list fastest first), else its first entry. On the H200 (cuDNN
    9.19, tf32 8x256x28x28 3x3) Find listed IMPLICIT_PRECOMP_GEMM as "tensor op" and as
    "default", and which came first changed from one Find to the next: the default entry took
    0.41 ms in one and 0.13 ms, as fast as the tensor-op entry, in the next. ``df.attrs`` holds the
    provenance: cuDNN version and library path, GPU name, the spec's label, the limit asked
    for and the workspace actually handed to Find, and the math type requested.

``cudnn_version() -> int``  ``cudnnGetVersion()`` of the library this module uses (e.g. 91900);
``library_path() -> str``   the file that library was loaded from (both from `cudnn_library`).

Choices (documented here because a caller cannot see them from the table)
------------------------------------------------------------------------
* **Directions**: fprop only. ``dgrad``/``wgrad`` specs are valid ConvSpecs that this table does
  not cover, so they raise :class:`labkit.errors.Unsupported` (not ``InvalidSpec``).
* **dtypes** (data type / compute type / ``cudnnMathType_t`` set on the convolution):

  ===== ================ ======= ============================================================
  fp32  FLOAT            FLOAT   ``CUDNN_FMA_MATH``: FMA kernels only, so TF32 is off
  tf32  FLOAT            FLOAT   ``CUDNN_TENSOR_OP_MATH``: TF32 tensor cores allowed. Measured
                                 on the H100 (cuDNN 9.19, fp32 32x256x28x28 3x3, NCHW):
                                 IMPLICIT_PRECOMP_GEMM takes 1017 us with FMA_MATH, 257 us
                                 with DEFAULT_MATH (TF32 too, but Find reports it as
                                 "default") and 199 us with TENSOR_OP_MATH, reported as
                                 "tensor op"; so TENSOR_OP_MATH makes the table say what ran.
  fp16  HALF             FLOAT   ``CUDNN_TENSOR_OP_MATH`` (fp16 in/out, fp32 accumulate)
  bf16  BFLOAT16         FLOAT   ``CUDNN_TENSOR_OP_MATH``
  fp8   -                -       :class:`Unsupported`: the classic API has no fp8 convolution
  ===== ================ ======= ============================================================

  The ``math`` column says what each algorithm actually used; cuDNN may run an algorithm
  without tensor cores even when they are allowed.
* **Layout**: ``spec.layout`` sets the tensor format of x, y *and* the filter (NHWC: filter is
  K,R,S,C/g in memory). Arrays are in storage order: NCHW -> x (N,C,H,W), w (K,C/g,R,S),
  y (N,K,P,Q); NHWC -> x (N,H,W,C), w (K,R,S,C/g), y (N,P,Q,K). fp32/tf32 arrays are float32,
  fp16 float16, bf16 2-byte words (uint16/int16 bits, or an ml_dtypes bfloat16 array), all
  C-contiguous, on the current CuPy device. Missing arrays are allocated and filled with seeded
  random values of magnitude 0.25..1 and random sign (never zero). ``y`` is overwritten.
* **Workspace for Find**: ``min(workspace_limit_bytes, largest size the query reported for an
  ok algorithm)`` bytes, allocated with ``cupy.cuda.Memory`` (a plain cudaMalloc outside CuPy's
  pool, so it is returned to the device, not cached, when the call ends). Algorithms needing more
  come back from Find with a non-ok status; they are reported, not raised (cuDNN 9.19 on the H100
  reports them as ``CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE``).
  Find also tries other math types than the one requested (one algorithm may appear twice), so
  ``find_workspace_bytes`` can differ from ``query_workspace_bytes``, in either direction; a
  variant needing more than the buffer is not run. ``time_us`` is Find's own single-run timing:
  indicative, not a steady-state benchmark.
  ``0 <= workspace_limit_bytes < 1 TiB``, else :class:`InvalidSpec`.
  ``requestedAlgoCount`` is ``max(8, cudnnGetConvolutionForwardAlgorithmMaxCount())``.
* **Handle**: one cuDNN handle per call, created after the arrays exist (so the CUDA context is
  CuPy's) on the current CuPy device, bound with ``cudnnSetStream`` to CuPy's current stream,
  and destroyed with every descriptor in ``finally`` blocks, so nothing leaks even on error. A
  per-call handle costs a few ms; this is a teaching table, not a hot path.
* **Errors**: every cuDNN call that returns a status other than ``CUDNN_STATUS_SUCCESS`` raises,
  by the status's category (``status // 1000 * 1000``, cuDNN 9 numbering): 3000
  ``NOT_SUPPORTED*`` -> :class:`Unsupported`; 4003/4004 ``INTERNAL_ERROR_*_ALLOCATION_FAILED``
  -> :class:`OutOfMemory`; 2000 ``BAD_PARAM*`` -> :class:`InvalidSpec` (field ``"spec"``);
  anything else -> :class:`LabkitError`. Messages carry ``cudnnGetErrorString`` and
  ``cudnnGetLastErrorString``. Two statuses are table content, not errors: the per-algorithm
  workspace query and the per-algorithm results of Find; and a Find that fails as a whole with a
  ``NOT_SUPPORTED*`` status fills ``find_status`` of every row with that status name.
* **Validation first**: spec type, direction, dtype, ``workspace_limit_bytes``, ``find`` and the
  shape/dtype/contiguity of any arrays passed are checked before the library is loaded, so cuDNN
  never sees a request it could crash on.

The library itself (finding and loading ``libcudnn.so.9``, the version check, the enum values,
the ``cudnnConvolutionFwdAlgoPerf_t`` struct, the function signatures, statuses and errors) is
:mod:`labkit.gpu.classic.cudnn_library`; this module holds the table: the dtype plan, validation, the
descriptors, the workspace query and Find, and the assembled DataFrame.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from typing import Dict, Iterable, Optional, Sequence, Tuple

import pandas as pd

from ...errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from ...spec import ConvSpec
from ..buffers.numerics import random_inputs
from .cudnn_library import (  # noqa: F401  (cudnn_version, library_path: part of this module's API)
    _TABLE,
    CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
    CUDNN_CROSS_CORRELATION,
    CUDNN_DATA_BFLOAT16,
    CUDNN_DATA_FLOAT,
    CUDNN_DATA_HALF,
    CUDNN_DETERMINISTIC,
    CUDNN_FMA_MATH,
    CUDNN_STATUS_SUCCESS,
    CUDNN_TENSOR_OP_MATH,
    FWD_ALGOS,
    MATH_NAMES,
    STATUS_CATEGORY_NOT_SUPPORTED,
    TENSOR_FORMATS,
    ConvolutionFwdAlgoPerf,
    _check,
    _free_bytes,
    _load_library,
    cudnn_version,
    library_path,
    status_name,
)

__all__ = [
    "algorithm_table",
    "cudnn_version",
    "library_path",
    "FWD_ALGOS",
    "ConvolutionFwdAlgoPerf",
    "DEFAULT_WORKSPACE_LIMIT",
    "MAX_WORKSPACE_LIMIT",
]

# ---- the table's choices ----------------------------------------------------------------------
#: per labkit dtype: (tensor data type, convolution compute type, math type requested)
DTYPE_PLAN: Dict[str, Tuple[int, int, int]] = {
    "fp32": (CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH),
    "tf32": (CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH),  # TF32 (see module docstring)
    "fp16": (CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH),
    "bf16": (CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH),
}
#: storage element of each dtype: (itemsize, accepted __cuda_array_interface__ typestr kinds)
_STORAGE = {
    "fp32": (4, ("f4",)),
    "tf32": (4, ("f4",)),
    "fp16": (2, ("f2",)),
    "bf16": (2, ("u2", "i2", "V2")),  # raw bf16 bits, or ml_dtypes.bfloat16 ('<V2')
}

DEFAULT_WORKSPACE_LIMIT = 1 << 30
#: workspace limits at or above this are refused as typos (1 TiB)
MAX_WORKSPACE_LIMIT = 1 << 40
_SEED = 20261122


# ---- validation (no library, no GPU) -------------------------------------------------------------
def storage_shapes(spec: ConvSpec) -> Dict[str, Tuple[int, int, int, int]]:
    """Memory-order shapes of x, w and y for a spec's layout.

    Args:
        spec: the convolution.

    Returns:
        Role -> shape; for NHWC channels last, the filter as (K, R, S, C/g).
    """
    N, C, H, W = spec.x_shape
    K, Cg, R, S = spec.w_shape
    _, _, P, Q = spec.y_shape
    if spec.layout == "NHWC":
        return {"x": (N, H, W, C), "w": (K, R, S, Cg), "y": (N, P, Q, K)}
    return {"x": (N, C, H, W), "w": (K, Cg, R, S), "y": (N, K, P, Q)}


def _validate(spec, workspace_limit_bytes, find) -> None:
    if not isinstance(spec, ConvSpec):
        raise InvalidSpec("spec", type(spec).__name__, "must be a labkit.ConvSpec")
    if spec.direction != "fprop":
        raise Unsupported(
            _TABLE,
            f"only fprop (cudnnFindConvolutionForwardAlgorithmEx); {spec.direction!r} "
            "is not covered by this table",
        )
    if spec.dtype not in DTYPE_PLAN:
        raise Unsupported(
            _TABLE,
            f"dtype {spec.dtype!r}: the classic cuDNN convolution API has no fp8 convolution; "
            f"use one of {', '.join(DTYPE_PLAN)} (or the frontend graph API for fp8)",
        )
    if spec.layout not in TENSOR_FORMATS:  # ConvSpec guarantees this; kept so cuDNN never sees junk
        raise InvalidSpec("layout", spec.layout, f"must be one of {', '.join(TENSOR_FORMATS)}")
    if isinstance(workspace_limit_bytes, bool) or not isinstance(workspace_limit_bytes, numbers.Integral):
        raise InvalidSpec(
            "workspace_limit_bytes", workspace_limit_bytes, "must be a whole number of bytes (int)"
        )
    if not 0 <= int(workspace_limit_bytes) < MAX_WORKSPACE_LIMIT:
        raise InvalidSpec(
            "workspace_limit_bytes",
            workspace_limit_bytes,
            f"must be >= 0 and < 1 TiB ({MAX_WORKSPACE_LIMIT:,} B)",
        )
    if not isinstance(find, bool):
        raise InvalidSpec("find", find, "must be True or False")


def _c_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= int(dim)
    return tuple(reversed(strides))


def _check_array(name: str, a, shape: Tuple[int, ...], dtype: str, writable: bool) -> int:
    """Check a caller's device array against the spec; return its data pointer."""
    cai = getattr(a, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise InvalidSpec(name, type(a).__name__, "must be a CUDA device array (a CuPy ndarray)")
    itemsize, kinds = _STORAGE[dtype]
    got_shape = tuple(int(s) for s in cai.get("shape", ()))
    if got_shape != tuple(shape):
        raise InvalidSpec(
            name, got_shape, f"must have shape {tuple(shape)} (storage order for this spec's layout)"
        )
    typestr = str(cai.get("typestr", ""))
    if len(typestr) < 3 or typestr[0] not in "<|=" or typestr[1:] not in kinds:
        raise InvalidSpec(
            name, typestr, f"must hold {dtype} elements (typestr one of {', '.join('<' + k for k in kinds)})"
        )
    strides = cai.get("strides")
    if strides is not None and tuple(int(s) for s in strides) != _c_strides(shape, itemsize):
        raise InvalidSpec(name, tuple(strides), "must be C-contiguous")
    data = cai.get("data")
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise InvalidSpec(name, data, "has no (pointer, read_only) data entry")
    ptr, read_only = int(data[0] or 0), bool(data[1])
    if ptr == 0:
        raise InvalidSpec(name, ptr, "has a null device pointer")
    if ptr % itemsize:
        raise InvalidSpec(name, hex(ptr), f"must be aligned to its element size ({itemsize} B)")
    if writable and read_only:
        raise InvalidSpec(name, "read-only", "must be writable (cuDNN writes the output)")
    return ptr


# ---- table assembly (pure; tested on CPU) ----------------------------------------------------------
def _perf_tuple(p) -> Tuple[int, int, float, int, int, int]:
    """(algo, status, time_ms, memory, determinism, mathType) from a perf struct or a tuple."""
    if isinstance(p, ConvolutionFwdAlgoPerf):
        return (int(p.algo), int(p.status), float(p.time), int(p.memory), int(p.determinism), int(p.mathType))
    algo, status, time_ms, memory, determinism, math_type = p
    return (int(algo), int(status), float(time_ms), int(memory), int(determinism), int(math_type))


def _assemble(
    query: Dict[int, Tuple[int, int]],
    found: Optional[Iterable],
    find_failed: Optional[str] = None,
    *,
    math_type: Optional[int] = None,
):
    """Build the table.

    ``query``: algo id -> (status, bytes) from the workspace query. ``found``: the perf entries Find
    returned (structs or tuples), in cuDNN's order, or None when find was off. ``find_failed``: a
    status name that Find as a whole returned (every row then shows it). ``math_type``: the
    ``cudnnMathType_t`` set on the convolution; an algorithm's ok entry of that math is its row.
    """
    entries = [_perf_tuple(p) for p in found] if found is not None else None
    rows = []
    for algo, name in enumerate(FWD_ALGOS):
        q_status, q_bytes = query.get(algo, (None, 0))
        row = {
            "algo_id": algo,
            "algorithm": name,
            "query_status": "not queried" if q_status is None else status_name(q_status),
            "query_workspace_bytes": int(q_bytes) if q_status == CUDNN_STATUS_SUCCESS else pd.NA,
        }
        if entries is not None or find_failed is not None:
            row.update(
                find_status="not returned",
                find_rank=pd.NA,
                time_us=pd.NA,
                find_workspace_bytes=pd.NA,
                math=pd.NA,
                deterministic=pd.NA,
            )
            if find_failed is not None:
                row["find_status"] = find_failed
            else:
                mine = [(rank, e) for rank, e in enumerate(entries) if e[0] == algo]
                ok = [(rank, e) for rank, e in mine if e[1] == CUDNN_STATUS_SUCCESS]
                asked = [(rank, e) for rank, e in ok if e[5] == math_type]
                pick = (asked or ok or mine or [None])[0]
                if pick is not None:
                    rank, (_, status, time_ms, memory, determinism, entry_math) = pick
                    row["find_status"] = status_name(status)
                    row["find_rank"] = rank
                    if status == CUDNN_STATUS_SUCCESS:
                        row["time_us"] = time_ms * 1000.0 if math.isfinite(time_ms) else pd.NA
                        row["find_workspace_bytes"] = memory
                        row["math"] = MATH_NAMES.get(entry_math, f"math {entry_math}")
                        row["deterministic"] = determinism == CUDNN_DETERMINISTIC
        rows.append(row)
    df = pd.DataFrame(rows)
    # nullable dtypes throughout, so every missing value is pd.NA (pandas 2 and 3 alike)
    dtypes = {
        "algo_id": "int64",
        "algorithm": "string",
        "query_status": "string",
        "query_workspace_bytes": "Int64",
    }
    if "find_status" in df:
        dtypes.update(
            find_status="string",
            find_rank="Int64",
            time_us="Float64",
            find_workspace_bytes="Int64",
            math="string",
            deterministic="boolean",
        )
    return df.astype(dtypes)


# ---- the GPU path -------------------------------------------------------------------------------
def _import_cupy():
    try:
        import cupy  # heavy: CuPy, live only
    except Exception as e:  # ImportError, or a CUDA-less CuPy failing on import
        raise Unsupported(_TABLE, f"needs CuPy with a CUDA GPU ({type(e).__name__}: {e})") from None
    return cupy


def _is_oom(cp, e: BaseException) -> bool:
    if isinstance(e, getattr(cp.cuda.memory, "OutOfMemoryError", ())):
        return True
    return (
        isinstance(e, cp.cuda.runtime.CUDARuntimeError)
        and "memoryallocation" in str(e).replace(" ", "").lower()
    )


def _random_array(cp, shape, dtype: str, seed: int, what: str):
    """Seeded values uniform in [-1, 1] rounded to ``dtype``, in its storage dtype
    (`labkit.gpu.buffers.numerics.random_inputs`: the kernels every other panel uses, so CuPy compiles none
    here)."""
    n = 1
    for s in shape:
        n *= int(s)
    itemsize = _STORAGE[dtype][0]
    try:
        return random_inputs(shape, dtype, cp, seed=seed, keep_exact=False)[0]
    except Exception as e:
        if _is_oom(cp, e):
            raise OutOfMemory(what, n * itemsize, _free_bytes()) from None
        raise


def _alloc_workspace(cp, nbytes: int):
    """``nbytes`` of device memory outside CuPy's pool (freed to the device when dropped)."""
    try:
        mem_cls = getattr(cp.cuda.memory, "Memory", None)
        if mem_cls is not None:
            return mem_cls(nbytes)
        return cp.empty((nbytes,), dtype=cp.uint8)
    except Exception as e:
        if _is_oom(cp, e):
            raise OutOfMemory("legacy Find workspace", nbytes, _free_bytes()) from None
        raise


def _ptr_of(buf) -> int:
    return int(buf.ptr) if hasattr(buf, "ptr") else int(buf.data.ptr)


def algorithm_table(
    spec: ConvSpec,
    *,
    x=None,
    w=None,
    y=None,
    workspace_limit_bytes: int = DEFAULT_WORKSPACE_LIMIT,
    find: bool = True,
):
    """The classic cuDNN forward-algorithm table for a convolution (see the module docstring).

    Args:
        spec: an fprop convolution, not fp8.
        x: the image to run on, in storage order; default a seeded random one.
        w: the filter; default a seeded random one.
        y: the output, written by Find; default a new one.
        workspace_limit_bytes: the workspace handed to Find, in bytes.
        find: run and time every algorithm (``cudnnFindConvolutionForwardAlgorithmEx``); False only
            asks each one's workspace size.

    Returns:
        A DataFrame, one row per algorithm in enum order, with its provenance in ``attrs``.

    Raises:
        InvalidSpec: before touching cuDNN: not a ConvSpec, a bad ``workspace_limit_bytes`` or
            ``find``, arrays of the wrong shape, dtype or contiguity.
        Unsupported: dgrad, wgrad or fp8; or no cuDNN 9, CuPy or GPU; or cuDNN refuses the problem.
        OutOfMemory: the arrays or the workspace do not fit.
    """
    _validate(spec, workspace_limit_bytes, find)
    limit = int(workspace_limit_bytes)
    shapes = storage_shapes(spec)
    given = {"x": x, "w": w, "y": y}
    ptrs: Dict[str, int] = {}
    for name, arr in given.items():
        if arr is not None:
            ptrs[name] = _check_array(name, arr, shapes[name], spec.dtype, writable=(name == "y"))

    lib = _load_library()
    cp = _import_cupy()
    try:
        device_id = int(cp.cuda.runtime.getDevice())
        cp.cuda.Device(device_id).use()
    except Exception as e:
        raise Unsupported(_TABLE, f"no usable CUDA device ({type(e).__name__}: {e})") from None
    for name, arr in given.items():
        dev = getattr(arr, "device", None)
        if arr is not None and dev is not None and int(getattr(dev, "id", device_id)) != device_id:
            raise InvalidSpec(name, f"device {dev.id}", f"must be on the current CuPy device {device_id}")

    data_type, compute_type, math_type = DTYPE_PLAN[spec.dtype]
    fmt = TENSOR_FORMATS[spec.layout]
    label = spec.label
    arrays = dict(given)  # keeps every array alive until cuDNN is done with it
    for seed_offset, name in enumerate(("x", "w", "y")):
        if arrays[name] is None:
            arrays[name] = _random_array(
                cp, shapes[name], spec.dtype, _SEED + seed_offset, f"legacy table {name} tensor"
            )
            ptrs[name] = _ptr_of(arrays[name])
    stream = cp.cuda.get_current_stream()
    if given["x"] is None or given["w"] is None or given["y"] is None:
        stream.synchronize()  # the fills ran on this stream; cuDNN runs on it too, but be plain

    handle, xd, yd = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    wd, cd = ctypes.c_void_p(), ctypes.c_void_p()
    workspace = None
    chk = lambda status, call, nbytes=0: _check(lib, status, call, label, nbytes)  # noqa: E731
    try:
        chk(lib.cudnnCreate(ctypes.byref(handle)), "cudnnCreate")
        chk(lib.cudnnSetStream(handle, ctypes.c_void_p(int(stream.ptr) or None)), "cudnnSetStream")
        try:
            chk(lib.cudnnCreateTensorDescriptor(ctypes.byref(xd)), "cudnnCreateTensorDescriptor")
            chk(lib.cudnnCreateTensorDescriptor(ctypes.byref(yd)), "cudnnCreateTensorDescriptor")
            chk(lib.cudnnCreateFilterDescriptor(ctypes.byref(wd)), "cudnnCreateFilterDescriptor")
            chk(lib.cudnnCreateConvolutionDescriptor(ctypes.byref(cd)), "cudnnCreateConvolutionDescriptor")

            N, C, H, W = spec.x_shape
            K, Cg, R, S = spec.w_shape
            chk(
                lib.cudnnSetTensor4dDescriptor(xd, fmt, data_type, N, C, H, W),
                "cudnnSetTensor4dDescriptor(x)",
            )
            chk(lib.cudnnSetFilter4dDescriptor(wd, data_type, fmt, K, Cg, R, S), "cudnnSetFilter4dDescriptor")
            (ph, pw), (sh, sw), (dh, dw) = spec.padding, spec.stride, spec.dilation
            chk(
                lib.cudnnSetConvolution2dDescriptor(
                    cd, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION, compute_type
                ),
                "cudnnSetConvolution2dDescriptor",
            )
            chk(lib.cudnnSetConvolutionGroupCount(cd, spec.groups), "cudnnSetConvolutionGroupCount")
            chk(lib.cudnnSetConvolutionMathType(cd, math_type), "cudnnSetConvolutionMathType")

            dims = [ctypes.c_int(0) for _ in range(4)]
            chk(
                lib.cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, *[ctypes.byref(d) for d in dims]),
                "cudnnGetConvolution2dForwardOutputDim",
            )
            out_dims = tuple(int(d.value) for d in dims)
            if out_dims != tuple(spec.y_shape):
                raise LabkitError(
                    f"{_TABLE} for {label}: cuDNN computes output dims {out_dims} (N,K,P,Q) "
                    f"but the spec says {tuple(spec.y_shape)}"
                )
            Np, Kp, P, Q = spec.y_shape
            chk(
                lib.cudnnSetTensor4dDescriptor(yd, fmt, data_type, Np, Kp, P, Q),
                "cudnnSetTensor4dDescriptor(y)",
            )

            query: Dict[int, Tuple[int, int]] = {}
            for algo in range(CUDNN_CONVOLUTION_FWD_ALGO_COUNT):
                size = ctypes.c_size_t(0)
                status = int(
                    lib.cudnnGetConvolutionForwardWorkspaceSize(
                        handle, xd, wd, cd, yd, algo, ctypes.byref(size)
                    )
                )
                query[algo] = (status, int(size.value) if status == CUDNN_STATUS_SUCCESS else 0)

            ws_bytes = 0
            requested = CUDNN_CONVOLUTION_FWD_ALGO_COUNT
            found = None
            find_failed = None
            if find:
                largest = max((b for s, b in query.values() if s == CUDNN_STATUS_SUCCESS), default=0)
                ws_bytes = min(limit, largest)
                max_count = ctypes.c_int(0)
                chk(
                    lib.cudnnGetConvolutionForwardAlgorithmMaxCount(handle, ctypes.byref(max_count)),
                    "cudnnGetConvolutionForwardAlgorithmMaxCount",
                )
                requested = max(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, min(int(max_count.value), 256))
                if ws_bytes > 0:
                    workspace = _alloc_workspace(cp, ws_bytes)
                ws_ptr = (
                    ctypes.c_void_p(_ptr_of(workspace)) if workspace is not None else ctypes.c_void_p(None)
                )
                perf = (ConvolutionFwdAlgoPerf * requested)()
                returned = ctypes.c_int(0)
                status = int(
                    lib.cudnnFindConvolutionForwardAlgorithmEx(
                        handle,
                        xd,
                        ctypes.c_void_p(ptrs["x"]),
                        wd,
                        ctypes.c_void_p(ptrs["w"]),
                        cd,
                        yd,
                        ctypes.c_void_p(ptrs["y"]),
                        requested,
                        ctypes.byref(returned),
                        perf,
                        ws_ptr,
                        ctypes.c_size_t(ws_bytes),
                    )
                )
                stream.synchronize()
                if status // 1000 * 1000 == STATUS_CATEGORY_NOT_SUPPORTED:
                    find_failed = status_name(status, lib)
                else:
                    chk(status, "cudnnFindConvolutionForwardAlgorithmEx", ws_bytes)
                    n = int(returned.value)
                    if not 0 <= n <= requested:
                        raise LabkitError(
                            f"{_TABLE} for {label}: cuDNN returned {n} results for {requested} slots"
                        )
                    found = [
                        perf[i] for i in range(n) if 0 <= int(perf[i].algo) < CUDNN_CONVOLUTION_FWD_ALGO_COUNT
                    ]
                    found = [_perf_tuple(p) for p in found]
        finally:
            # destroy in reverse order; statuses are ignored here so that a cleanup problem never
            # hides the error that brought us here (these calls only free host memory)
            for destroy, d in (
                (lib.cudnnDestroyConvolutionDescriptor, cd),
                (lib.cudnnDestroyFilterDescriptor, wd),
                (lib.cudnnDestroyTensorDescriptor, yd),
                (lib.cudnnDestroyTensorDescriptor, xd),
            ):
                if d.value:
                    destroy(d)
                    d.value = None
    finally:
        if handle.value:
            lib.cudnnDestroy(handle)
            handle.value = None
        workspace = None  # cudaFree (outside the pool) now, not at some later GC
        arrays.clear()

    df = _assemble(query, found, find_failed, math_type=math_type) if find else _assemble(query, None)
    df.attrs.update(
        cudnn_version=int(lib.cudnnGetVersion()),
        cudnn_library=library_path(),
        gpu=_gpu_name(cp, device_id),
        spec=label,
        workspace_limit_bytes=limit,
        find_workspace_bytes_given=int(ws_bytes) if find else None,
        requested_algo_count=int(requested) if find else None,
        math_type_requested=MATH_NAMES[math_type],
        api=(
            "cudnnGetConvolutionForwardWorkspaceSize + cudnnFindConvolutionForwardAlgorithmEx"
            if find
            else "cudnnGetConvolutionForwardWorkspaceSize"
        ),
    )
    return df


def _gpu_name(cp, device_id: int) -> str:
    try:
        name = cp.cuda.runtime.getDeviceProperties(device_id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "unknown"
