"""A minimal ctypes binding to cuDNN 9's classic (legacy) convolution-forward API.

It exists for one table: "algorithm -> workspace -> time", as articles about cuDNN workspaces
show it. For every forward algorithm of the classic API (``cudnnConvolutionFwdAlgo_t``, 8 of them)
it asks ``cudnnGetConvolutionForwardWorkspaceSize`` how much scratch memory the algorithm needs,
and (``find=True``) lets ``cudnnFindConvolutionForwardAlgorithmEx`` run and time every algorithm
on real device arrays with a workspace of a chosen size. Everything else in labkit uses the
cuDNN frontend graph API (``engine.py``); nothing here executes convolutions for results.

Public API
----------
``algorithm_table(spec, x=None, w=None, y=None, workspace_limit_bytes=1 << 30, find=True)``
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

    If cuDNN lists one algorithm more than once (once per math type), the row shows its first
    ok entry (cuDNN sorts its list fastest first), else its first entry. ``df.attrs`` holds the
    provenance: cuDNN version and library path, GPU name, the spec's label, the limit asked
    for and the workspace actually handed to Find, and the math type requested.

``cudnn_version() -> int``  ``cudnnGetVersion()`` of the library this module uses (e.g. 91900).
``library_path() -> str``   the file that library was loaded from.

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

Loading the library (lazily, on first use; thread-safe; a failure is not cached)
------------------------------------------------------------------------------
The process must use *one* cuDNN. Measured on the H100 host: it has a system cuDNN 9.14 in
/usr/lib/x86_64-linux-gnu and the pip wheel's 9.19 in site-packages/nvidia/cudnn/lib; if
``ctypes.CDLL("libcudnn.so.9")`` runs before the frontend has loaded its copy, the dynamic linker
picks the system 9.14, and the frontend imported afterwards reports 91400 too (its shim binds to
the already loaded 9.14 sub-libraries). So the order is:

1. a ``libcudnn.so[.9[.x.y]]`` already mapped in this process (``/proc/self/maps``): opening the
   same file returns the already loaded copy;
2. ``import cudnn`` (the frontend dlopens its own backend: LD_LIBRARY_PATH, then the
   nvidia-cudnn wheel), then step 1 again;
3. ``nvidia/*/lib/libcudnn.so.9`` under every ``sys.path`` / site-packages entry (the wheels
   nvidia-cudnn-cu12 (nvidia/cudnn/lib), -cu13 (nvidia/cudnn/lib or nvidia/cu13/lib), cudnn_jit);
4. ``ctypes.CDLL("libcudnn.so.9")`` (dynamic linker search: LD_LIBRARY_PATH, ldconfig).

If none works, :class:`Unsupported` ("legacy cuDNN API") lists what was tried. A library whose
``cudnnGetVersion`` is not 9.x, or that lacks one of the symbols below, is refused the same way.
If more than one distinct libcudnn is mapped after loading, a ``RuntimeWarning`` says so.

Facts this binding relies on, checked against the cuDNN 9 headers (cudnn_graph.h, cudnn_ops.h,
cudnn_cnn.h of 9.6 and 9.14, and the 9.19 wheel's headers on the H100 host):
``cudnnConvolutionFwdAlgoPerf_t`` = {int algo; int status; float time (ms); size_t memory;
int determinism; int mathType; int reserved[3]}: a C program compiled with gcc against the 9.19
headers prints sizeof 48, offsets 0, 4, 8, 16, 24, 28, 32 and sizeof(cudnnStatus_t) 4, as the
ctypes Structure below has. The enum values are in the tables below; the function prototypes
(argument order and types) in ``_SIGNATURES`` match the 9.19 headers. The functions are ``CUDNN_DEPRECATED`` in cuDNN 9
(still exported by libcudnn.so.9 in 9.19; they forward to libcudnn_cnn.so.9 / libcudnn_ops.so.9).
Note the argument order of ``cudnnSetFilter4dDescriptor(desc, dataType, format, k, c, h, w)``
versus ``cudnnSetTensor4dDescriptor(desc, format, dataType, n, c, h, w)``.
"""
from __future__ import annotations

import ctypes
import glob
import math
import numbers
import os
import re
import site
import sys
import threading
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from ..spec import ConvSpec

__all__ = [
    "algorithm_table",
    "cudnn_version",
    "library_path",
    "FWD_ALGOS",
    "ConvolutionFwdAlgoPerf",
    "DEFAULT_WORKSPACE_LIMIT",
    "MAX_WORKSPACE_LIMIT",
]

# ---- enum values (cuDNN 9 headers) ----------------------------------------------------------
#: cudnnStatus_t (cudnn_graph.h, cuDNN 9 numbering: category * 1000 + specific error)
CUDNN_STATUS_SUCCESS = 0
STATUS_NAMES: Dict[int, str] = {
    0: "CUDNN_STATUS_SUCCESS",
    1001: "CUDNN_STATUS_NOT_INITIALIZED",
    1002: "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
    1003: "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH",
    1004: "CUDNN_STATUS_DEPRECATED",
    1005: "CUDNN_STATUS_LICENSE_ERROR",
    1006: "CUDNN_STATUS_RUNTIME_IN_PROGRESS",
    1007: "CUDNN_STATUS_RUNTIME_FP_OVERFLOW",
    1008: "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED",
    2000: "CUDNN_STATUS_BAD_PARAM",
    2001: "CUDNN_STATUS_INVALID_VALUE",  # deprecated alias, still a distinct value
    2002: "CUDNN_STATUS_BAD_PARAM_NULL_POINTER",
    2003: "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER",
    2004: "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED",
    2005: "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND",
    2006: "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT",
    2007: "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH",
    2008: "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH",
    2009: "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES",
    2010: "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE",
    2011: "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH",
    2012: "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE",
    3000: "CUDNN_STATUS_NOT_SUPPORTED",
    3001: "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN",
    3002: "CUDNN_STATUS_NOT_SUPPORTED_SHAPE",
    3003: "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE",
    3004: "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT",
    3005: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER",
    3006: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART",
    3007: "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH",
    3008: "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
    3009: "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE",
    3010: "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT",
    3011: "CUDNN_STATUS_NOT_SUPPORTED_PADDING",
    3012: "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM",
    3013: "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API",
    3014: "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE",  # in the 9.19 header, not in 9.6/9.14
    4000: "CUDNN_STATUS_INTERNAL_ERROR",
    4001: "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED",
    4002: "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE",
    4003: "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",  # = deprecated CUDNN_STATUS_ALLOC_FAILED
    4004: "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
    4005: "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM",
    4006: "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED",
    5000: "CUDNN_STATUS_EXECUTION_FAILED",
    5001: "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER",
    5002: "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS",
    5003: "CUDNN_STATUS_EXECUTION_FAILED_CUDART",
    5004: "CUDNN_STATUS_EXECUTION_FAILED_CURAND",
}
STATUS_CATEGORY_NOT_SUPPORTED = 3000
STATUS_CATEGORY_BAD_PARAM = 2000
STATUS_ALLOCATION_FAILED = (4003, 4004)

#: cudnnDataType_t (cudnn_graph.h)
CUDNN_DATA_FLOAT = 0
CUDNN_DATA_HALF = 2
CUDNN_DATA_BFLOAT16 = 9
#: cudnnTensorFormat_t (cudnn_graph.h)
CUDNN_TENSOR_NCHW = 0
CUDNN_TENSOR_NHWC = 1
TENSOR_FORMATS = {"NCHW": CUDNN_TENSOR_NCHW, "NHWC": CUDNN_TENSOR_NHWC}
#: cudnnConvolutionMode_t (cudnn_graph.h)
CUDNN_CONVOLUTION = 0
CUDNN_CROSS_CORRELATION = 1
#: cudnnMathType_t (cudnn_graph.h)
CUDNN_DEFAULT_MATH = 0
CUDNN_TENSOR_OP_MATH = 1
CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2
CUDNN_FMA_MATH = 3
MATH_NAMES = {
    CUDNN_DEFAULT_MATH: "default",
    CUDNN_TENSOR_OP_MATH: "tensor op",
    CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: "tensor op (allow conversion)",
    CUDNN_FMA_MATH: "fma",
}
#: cudnnDeterminism_t (cudnn_ops.h)
CUDNN_NON_DETERMINISTIC = 0
CUDNN_DETERMINISTIC = 1
#: cudnnConvolutionFwdAlgo_t (cudnn_ops.h), index = enum value; CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8
FWD_ALGOS: Tuple[str, ...] = (
    "IMPLICIT_GEMM",          # 0
    "IMPLICIT_PRECOMP_GEMM",  # 1
    "GEMM",                   # 2
    "DIRECT",                 # 3
    "FFT",                    # 4
    "FFT_TILING",             # 5
    "WINOGRAD",               # 6
    "WINOGRAD_NONFUSED",      # 7
)
FWD_ALGO_IDS = {name: i for i, name in enumerate(FWD_ALGOS)}
CUDNN_CONVOLUTION_FWD_ALGO_COUNT = len(FWD_ALGOS)

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
_WHAT = "legacy cuDNN API"
_TABLE = "legacy algorithm table"


class ConvolutionFwdAlgoPerf(ctypes.Structure):
    """``cudnnConvolutionFwdAlgoPerf_t`` (cudnn_cnn.h). C enums are ``int`` on the x86-64 ABI."""

    _fields_ = [
        ("algo", ctypes.c_int),         # cudnnConvolutionFwdAlgo_t
        ("status", ctypes.c_int),       # cudnnStatus_t
        ("time", ctypes.c_float),       # milliseconds
        ("memory", ctypes.c_size_t),    # workspace bytes
        ("determinism", ctypes.c_int),  # cudnnDeterminism_t
        ("mathType", ctypes.c_int),     # cudnnMathType_t
        ("reserved", ctypes.c_int * 3),
    ]


# ---- library loading ------------------------------------------------------------------------
_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
_c_void_p_p = ctypes.POINTER(ctypes.c_void_p)
_V = ctypes.c_void_p
_I = ctypes.c_int

#: name -> (restype, argtypes). Every function this module calls, declared before first use.
_SIGNATURES = {
    "cudnnGetVersion": (ctypes.c_size_t, []),
    "cudnnGetErrorString": (ctypes.c_char_p, [_I]),
    "cudnnCreate": (_I, [_c_void_p_p]),
    "cudnnDestroy": (_I, [_V]),
    "cudnnSetStream": (_I, [_V, _V]),
    "cudnnCreateTensorDescriptor": (_I, [_c_void_p_p]),
    "cudnnDestroyTensorDescriptor": (_I, [_V]),
    # (desc, format, dataType, n, c, h, w)
    "cudnnSetTensor4dDescriptor": (_I, [_V, _I, _I, _I, _I, _I, _I]),
    "cudnnCreateFilterDescriptor": (_I, [_c_void_p_p]),
    "cudnnDestroyFilterDescriptor": (_I, [_V]),
    # (desc, dataType, format, k, c, h, w)  -- dataType BEFORE format, unlike the tensor call
    "cudnnSetFilter4dDescriptor": (_I, [_V, _I, _I, _I, _I, _I, _I]),
    "cudnnCreateConvolutionDescriptor": (_I, [_c_void_p_p]),
    "cudnnDestroyConvolutionDescriptor": (_I, [_V]),
    # (desc, pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType)
    "cudnnSetConvolution2dDescriptor": (_I, [_V, _I, _I, _I, _I, _I, _I, _I, _I]),
    "cudnnSetConvolutionGroupCount": (_I, [_V, _I]),
    "cudnnSetConvolutionMathType": (_I, [_V, _I]),
    # (convDesc, xDesc, wDesc, *n, *c, *h, *w)
    "cudnnGetConvolution2dForwardOutputDim": (_I, [_V, _V, _V, _c_int_p, _c_int_p, _c_int_p, _c_int_p]),
    "cudnnGetConvolutionForwardAlgorithmMaxCount": (_I, [_V, _c_int_p]),
    # (handle, xDesc, wDesc, convDesc, yDesc, algo, *sizeInBytes)
    "cudnnGetConvolutionForwardWorkspaceSize": (_I, [_V, _V, _V, _V, _V, _I, _c_size_t_p]),
    # (handle, xDesc, x, wDesc, w, convDesc, yDesc, y, requested, *returned, perf[], ws, wsBytes)
    "cudnnFindConvolutionForwardAlgorithmEx": (
        _I,
        [_V, _V, _V, _V, _V, _V, _V, _V, _I, _c_int_p, ctypes.POINTER(ConvolutionFwdAlgoPerf), _V, ctypes.c_size_t],
    ),
}
#: optional (present since cuDNN 9.0; used for error messages only)
_OPTIONAL_SIGNATURES = {
    "cudnnGetLastErrorString": (None, [ctypes.c_char_p, ctypes.c_size_t]),
}

#: sonames tried last, through the dynamic linker's own search
_SONAMES: Tuple[str, ...] = ("libcudnn.so.9",)
_SHIM_RE = re.compile(r"^libcudnn\.so(\.9(\.\d+)*)?$")

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _mapped_cudnn_paths() -> List[str]:
    """Files named libcudnn.so[.9[.x.y]] mapped into this process, in first-seen order."""
    seen: List[str] = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                if path.endswith(" (deleted)") or not path.startswith("/"):
                    continue
                if _SHIM_RE.match(os.path.basename(path)) and path not in seen:
                    seen.append(path)
    except OSError:
        pass
    return seen


def _load_frontend() -> None:
    """Let the cuDNN frontend load the backend it would use (its own search order)."""
    try:
        import cudnn  # noqa: F401  (import dlopens the backend; no GPU needed)
    except Exception:  # not installed, or broken: the other steps still run
        pass


def _site_dirs() -> List[str]:
    dirs: List[str] = []
    for d in list(sys.path):
        if d and d not in dirs:
            dirs.append(d)
    try:
        extra = list(site.getsitepackages()) + [site.getusersitepackages()]
    except Exception:  # some embedded/virtualenv setups lack these
        extra = []
    for d in extra:
        if d and d not in dirs:
            dirs.append(d)
    return dirs


def _wheel_candidates() -> List[str]:
    """libcudnn.so.9 files of the nvidia-cudnn wheels under the Python path, cudnn/ first."""
    found: List[str] = []
    for d in _site_dirs():
        hits = sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudnn.so.9")))
        hits.sort(key=lambda p: 0 if os.sep + "cudnn" + os.sep in p else 1)
        for h in hits:
            if h not in found:
                found.append(h)
    return found


def _bind(lib: ctypes.CDLL, where: str) -> ctypes.CDLL:
    """Declare every signature; refuse libraries that are not cuDNN 9 or lack a symbol."""
    missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
    if missing:
        raise Unsupported(_WHAT, f"{where} lacks {', '.join(missing)} (not a cuDNN 9 libcudnn.so?)")
    for name, (restype, argtypes) in {**_SIGNATURES, **_OPTIONAL_SIGNATURES}.items():
        if not hasattr(lib, name):
            continue
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    version = int(lib.cudnnGetVersion())
    if version // 10000 != 9:
        raise Unsupported(_WHAT, f"{where} is cuDNN {version}; this binding is written for cuDNN 9 (9xxyy)")
    return lib


def _try_open(path: str, tried: List[str]) -> Optional[ctypes.CDLL]:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        tried.append(f"{path}: {e}")
        return None
    try:
        return _bind(lib, path)
    except Unsupported as e:
        tried.append(f"{path}: {e.reason}")
        return None


def _load_library() -> ctypes.CDLL:
    """The cuDNN 9 shim library, loaded once (see the module docstring for the search order)."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried: List[str] = []
        steps = (
            ("already loaded", lambda: _mapped_cudnn_paths()),
            ("loaded by the cuDNN frontend", lambda: (_load_frontend(), _mapped_cudnn_paths())[1]),
            ("nvidia wheel", lambda: _wheel_candidates()),
            ("soname", lambda: list(_SONAMES)),
        )
        for label, candidates in steps:
            paths = candidates()
            if not paths:
                tried.append(f"{label}: none found")
            for path in paths:
                lib = _try_open(path, tried)
                if lib is not None:
                    _lib, _lib_path = lib, _resolve_path(path)
                    _warn_if_several()
                    return lib
        raise Unsupported(
            _WHAT,
            "could not load cuDNN 9's libcudnn.so.9 (install nvidia-cudnn-cu12/-cu13, or put it on "
            "LD_LIBRARY_PATH). Tried: " + "; ".join(tried),
        )


def _resolve_path(path: str) -> str:
    if os.sep in path:
        return os.path.realpath(path)
    mapped = _mapped_cudnn_paths()  # a soname: report the file the linker chose
    return os.path.realpath(mapped[0]) if mapped else path


def _warn_if_several() -> None:
    real = sorted({os.path.realpath(p) for p in _mapped_cudnn_paths()})
    if len(real) > 1:
        warnings.warn(
            "several cuDNN libraries are mapped into this process: " + ", ".join(real)
            + f"; labkit.legacy uses {_lib_path}. Mixed copies can make cuDNN report and run another version.",
            RuntimeWarning,
            stacklevel=3,
        )


def cudnn_version() -> int:
    """``cudnnGetVersion()`` of the cuDNN this module uses, e.g. 91900 for 9.19.0."""
    return int(_load_library().cudnnGetVersion())


def library_path() -> str:
    """The file the cuDNN library used here was loaded from (loads it if needed)."""
    _load_library()
    return str(_lib_path)


# ---- statuses and errors ----------------------------------------------------------------------
def status_name(status: int, lib: Optional[ctypes.CDLL] = None) -> str:
    """``"ok"`` for success, else the ``CUDNN_STATUS_*`` name (from the table, else from cuDNN)."""
    status = int(status)
    if status == CUDNN_STATUS_SUCCESS:
        return "ok"
    if status in STATUS_NAMES:
        return STATUS_NAMES[status]
    if lib is not None:
        try:
            text = lib.cudnnGetErrorString(status)
            if text:
                return text.decode(errors="replace")
        except Exception:
            pass
    return f"CUDNN_STATUS_{status}"


def _last_error(lib) -> str:
    fn = getattr(lib, "cudnnGetLastErrorString", None)
    if fn is None or fn.argtypes is None:
        return ""
    buf = ctypes.create_string_buffer(1024)
    try:
        fn(buf, ctypes.sizeof(buf))
    except Exception:
        return ""
    return buf.value.decode(errors="replace").strip()


def _error_for(status: int, call: str, text: str, label: str, requested_bytes: int = 0,
               free_bytes: Optional[int] = None) -> LabkitError:
    """The labkit error for a failed cuDNN call (see the module docstring)."""
    status = int(status)
    category = status // 1000 * 1000
    reason = f"{call} returned {STATUS_NAMES.get(status, status)} ({status}): {text}"
    if category == STATUS_CATEGORY_NOT_SUPPORTED:
        return Unsupported(f"{_TABLE} for {label}", reason)
    if status in STATUS_ALLOCATION_FAILED:
        return OutOfMemory(f"{call} ({reason})", requested_bytes, free_bytes)
    if category == STATUS_CATEGORY_BAD_PARAM:
        return InvalidSpec("spec", label, f"cuDNN rejected it: {reason}")
    return LabkitError(f"{_TABLE} for {label}: {reason}")


def _check(lib, status: int, call: str, label: str, requested_bytes: int = 0) -> None:
    if int(status) == CUDNN_STATUS_SUCCESS:
        return
    text = ""
    try:
        raw = lib.cudnnGetErrorString(int(status))
        text = raw.decode(errors="replace") if raw else ""
    except Exception:
        pass
    detail = _last_error(lib)
    if detail:
        text = f"{text}; {detail}" if text else detail
    raise _error_for(status, call, text or "(no message)", label, requested_bytes, _free_bytes())


def _free_bytes() -> Optional[int]:
    try:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:
        return None


# ---- validation (no library, no GPU) -------------------------------------------------------------
def storage_shapes(spec: ConvSpec) -> Dict[str, Tuple[int, int, int, int]]:
    """Memory-order shapes of x, w, y for ``spec.layout`` (NHWC: channels last, filter K,R,S,C/g)."""
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
            f"only fprop (cudnnFindConvolutionForwardAlgorithmEx); {spec.direction!r} is not covered by this table",
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
        raise InvalidSpec("workspace_limit_bytes", workspace_limit_bytes, "must be a whole number of bytes (int)")
    if not 0 <= int(workspace_limit_bytes) < MAX_WORKSPACE_LIMIT:
        raise InvalidSpec(
            "workspace_limit_bytes", workspace_limit_bytes,
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
        raise InvalidSpec(name, got_shape, f"must have shape {tuple(shape)} (storage order for this spec's layout)")
    typestr = str(cai.get("typestr", ""))
    if len(typestr) < 3 or typestr[0] not in "<|=" or typestr[1:] not in kinds:
        raise InvalidSpec(name, typestr, f"must hold {dtype} elements (typestr one of {', '.join('<' + k for k in kinds)})")
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


def _assemble(query: Dict[int, Tuple[int, int]], found: Optional[Iterable], find_failed: Optional[str] = None):
    """Build the table.

    ``query``: algo id -> (status, bytes) from the workspace query. ``found``: the perf entries Find
    returned (structs or tuples), in cuDNN's order, or None when find was off. ``find_failed``: a
    status name that Find as a whole returned (every row then shows it).
    """
    import pandas as pd

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
            row.update(find_status="not returned", find_rank=pd.NA, time_us=pd.NA,
                       find_workspace_bytes=pd.NA, math=pd.NA, deterministic=pd.NA)
            if find_failed is not None:
                row["find_status"] = find_failed
            else:
                mine = [(rank, e) for rank, e in enumerate(entries) if e[0] == algo]
                ok = [(rank, e) for rank, e in mine if e[1] == CUDNN_STATUS_SUCCESS]
                pick = ok[0] if ok else (mine[0] if mine else None)
                if pick is not None:
                    rank, (_, status, time_ms, memory, determinism, math_type) = pick
                    row["find_status"] = status_name(status)
                    row["find_rank"] = rank
                    if status == CUDNN_STATUS_SUCCESS:
                        row["time_us"] = time_ms * 1000.0 if math.isfinite(time_ms) else pd.NA
                        row["find_workspace_bytes"] = memory
                        row["math"] = MATH_NAMES.get(math_type, f"math {math_type}")
                        row["deterministic"] = determinism == CUDNN_DETERMINISTIC
        rows.append(row)
    df = pd.DataFrame(rows)
    # nullable dtypes throughout, so every missing value is pd.NA (pandas 2 and 3 alike)
    dtypes = {"algo_id": "int64", "algorithm": "string", "query_status": "string", "query_workspace_bytes": "Int64"}
    if "find_status" in df:
        dtypes.update(find_status="string", find_rank="Int64", time_us="Float64",
                      find_workspace_bytes="Int64", math="string", deterministic="boolean")
    return df.astype(dtypes)


# ---- the GPU path -------------------------------------------------------------------------------
def _import_cupy():
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA-less CuPy failing on import
        raise Unsupported(_TABLE, f"needs CuPy with a CUDA GPU ({type(e).__name__}: {e})") from None
    return cupy


def _is_oom(cp, e: BaseException) -> bool:
    if isinstance(e, getattr(cp.cuda.memory, "OutOfMemoryError", ())):
        return True
    return isinstance(e, cp.cuda.runtime.CUDARuntimeError) and "memoryallocation" in str(e).replace(" ", "").lower()


def _random_array(cp, shape, dtype: str, seed: int, what: str):
    """Seeded values of magnitude 0.25..1 with random sign (never zero), in storage dtype."""
    n = 1
    for s in shape:
        n *= int(s)
    itemsize = _STORAGE[dtype][0]
    try:
        rs = cp.random.RandomState(seed)
        mag = rs.uniform(0.25, 1.0, size=shape, dtype=cp.float32)
        sign = rs.randint(0, 2, size=shape, dtype=cp.int32)
        v = cp.where(sign == 1, mag, -mag).astype(cp.float32)
        del mag, sign
        if dtype in ("fp32", "tf32"):
            out = cp.ascontiguousarray(v)
        elif dtype == "fp16":
            out = cp.ascontiguousarray(v.astype(cp.float16))
        else:  # bf16: the top half of each float32 (truncation keeps 0.25..1 away from zero)
            out = cp.ascontiguousarray((v.view(cp.uint32) >> 16).astype(cp.uint16))
        return out
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


def algorithm_table(spec: ConvSpec, x=None, w=None, y=None, workspace_limit_bytes: int = DEFAULT_WORKSPACE_LIMIT,
                    find: bool = True):
    """The classic cuDNN forward-algorithm table for ``spec`` (see the module docstring).

    Raises, before touching cuDNN: :class:`InvalidSpec` (not a ConvSpec, bad
    ``workspace_limit_bytes`` or ``find``, arrays of the wrong shape/dtype/contiguity),
    :class:`Unsupported` (dgrad/wgrad, fp8). Later: :class:`Unsupported` (no cuDNN 9 / CuPy /
    GPU, or cuDNN refuses the problem), :class:`OutOfMemory`, :class:`LabkitError`.
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
            arrays[name] = _random_array(cp, shapes[name], spec.dtype, _SEED + seed_offset, f"legacy table {name} tensor")
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
            chk(lib.cudnnSetTensor4dDescriptor(xd, fmt, data_type, N, C, H, W), "cudnnSetTensor4dDescriptor(x)")
            chk(lib.cudnnSetFilter4dDescriptor(wd, data_type, fmt, K, Cg, R, S), "cudnnSetFilter4dDescriptor")
            (ph, pw), (sh, sw), (dh, dw) = spec.padding, spec.stride, spec.dilation
            chk(lib.cudnnSetConvolution2dDescriptor(cd, ph, pw, sh, sw, dh, dw, CUDNN_CROSS_CORRELATION, compute_type),
                "cudnnSetConvolution2dDescriptor")
            chk(lib.cudnnSetConvolutionGroupCount(cd, spec.groups), "cudnnSetConvolutionGroupCount")
            chk(lib.cudnnSetConvolutionMathType(cd, math_type), "cudnnSetConvolutionMathType")

            dims = [ctypes.c_int(0) for _ in range(4)]
            chk(lib.cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, *[ctypes.byref(d) for d in dims]),
                "cudnnGetConvolution2dForwardOutputDim")
            out_dims = tuple(int(d.value) for d in dims)
            if out_dims != tuple(spec.y_shape):
                raise LabkitError(
                    f"{_TABLE} for {label}: cuDNN computes output dims {out_dims} (N,K,P,Q) "
                    f"but the spec says {tuple(spec.y_shape)}"
                )
            Np, Kp, P, Q = spec.y_shape
            chk(lib.cudnnSetTensor4dDescriptor(yd, fmt, data_type, Np, Kp, P, Q), "cudnnSetTensor4dDescriptor(y)")

            query: Dict[int, Tuple[int, int]] = {}
            for algo in range(CUDNN_CONVOLUTION_FWD_ALGO_COUNT):
                size = ctypes.c_size_t(0)
                status = int(lib.cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, algo, ctypes.byref(size)))
                query[algo] = (status, int(size.value) if status == CUDNN_STATUS_SUCCESS else 0)

            ws_bytes = 0
            requested = CUDNN_CONVOLUTION_FWD_ALGO_COUNT
            found = None
            find_failed = None
            if find:
                largest = max((b for s, b in query.values() if s == CUDNN_STATUS_SUCCESS), default=0)
                ws_bytes = min(limit, largest)
                max_count = ctypes.c_int(0)
                chk(lib.cudnnGetConvolutionForwardAlgorithmMaxCount(handle, ctypes.byref(max_count)),
                    "cudnnGetConvolutionForwardAlgorithmMaxCount")
                requested = max(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, min(int(max_count.value), 256))
                if ws_bytes > 0:
                    workspace = _alloc_workspace(cp, ws_bytes)
                ws_ptr = ctypes.c_void_p(_ptr_of(workspace)) if workspace is not None else ctypes.c_void_p(None)
                perf = (ConvolutionFwdAlgoPerf * requested)()
                returned = ctypes.c_int(0)
                status = int(lib.cudnnFindConvolutionForwardAlgorithmEx(
                    handle, xd, ctypes.c_void_p(ptrs["x"]), wd, ctypes.c_void_p(ptrs["w"]), cd,
                    yd, ctypes.c_void_p(ptrs["y"]), requested, ctypes.byref(returned), perf,
                    ws_ptr, ctypes.c_size_t(ws_bytes)))
                stream.synchronize()
                if status // 1000 * 1000 == STATUS_CATEGORY_NOT_SUPPORTED:
                    find_failed = status_name(status, lib)
                else:
                    chk(status, "cudnnFindConvolutionForwardAlgorithmEx", ws_bytes)
                    n = int(returned.value)
                    if not 0 <= n <= requested:
                        raise LabkitError(f"{_TABLE} for {label}: cuDNN returned {n} results for {requested} slots")
                    found = [perf[i] for i in range(n) if 0 <= int(perf[i].algo) < CUDNN_CONVOLUTION_FWD_ALGO_COUNT]
                    found = [_perf_tuple(p) for p in found]
        finally:
            # destroy in reverse order; statuses are ignored here so that a cleanup problem never
            # hides the error that brought us here (these calls only free host memory)
            for destroy, d in ((lib.cudnnDestroyConvolutionDescriptor, cd), (lib.cudnnDestroyFilterDescriptor, wd),
                               (lib.cudnnDestroyTensorDescriptor, yd), (lib.cudnnDestroyTensorDescriptor, xd)):
                if d.value:
                    destroy(d)
                    d.value = None
    finally:
        if handle.value:
            lib.cudnnDestroy(handle)
            handle.value = None
        workspace = None  # cudaFree (outside the pool) now, not at some later GC
        arrays.clear()

    df = _assemble(query, found, find_failed) if find else _assemble(query, None)
    df.attrs.update(
        cudnn_version=int(lib.cudnnGetVersion()),
        cudnn_library=str(_lib_path),
        gpu=_gpu_name(cp, device_id),
        spec=label,
        workspace_limit_bytes=limit,
        find_workspace_bytes_given=int(ws_bytes) if find else None,
        requested_algo_count=int(requested) if find else None,
        math_type_requested=MATH_NAMES[math_type],
        api="cudnnGetConvolutionForwardWorkspaceSize" + (" + cudnnFindConvolutionForwardAlgorithmEx" if find else ""),
    )
    return df


def _gpu_name(cp, device_id: int) -> str:
    try:
        name = cp.cuda.runtime.getDeviceProperties(device_id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "unknown"
