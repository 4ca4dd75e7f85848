"""Finding, loading and binding cuDNN 9's ``libcudnn.so`` through ctypes (the classic API's library).

This module is about the shared library, not about convolutions: where ``libcudnn.so.9`` is
found and how it is loaded (once, lazily), the version check, the function signatures declared
on it, the enum values and the one struct of the classic convolution-forward calls (as cuDNN 9's
headers define them), and how a status a call returns becomes a name and a labkit error.
:mod:`labkit.gpu.classic.legacy` builds its algorithm table on it (and re-exports ``cudnn_version`` and
``library_path``).

Units: sizes in bytes (``ConvolutionFwdAlgoPerf.memory``, ``requested_bytes``, free device
memory); ``ConvolutionFwdAlgoPerf.time`` is in milliseconds, as cuDNN writes it (the table turns
it into microseconds).

Public API
----------
``cudnn_version() -> int``  ``cudnnGetVersion()`` of the library this module uses (e.g. 91900).
``library_path() -> str``   the file that library was loaded from.
``status_name(status, lib=None) -> str``  ``"ok"``, or the ``CUDNN_STATUS_*`` name of a status.

Statuses and errors
-------------------
``_check`` raises for every status other than ``CUDNN_STATUS_SUCCESS``, by the status's category
(``status // 1000 * 1000``, cuDNN 9 numbering): 3000 ``NOT_SUPPORTED*`` -> :class:`Unsupported`;
4003/4004 ``INTERNAL_ERROR_*_ALLOCATION_FAILED`` -> :class:`OutOfMemory`; 2000 ``BAD_PARAM*`` ->
:class:`InvalidSpec` (field ``"spec"``); anything else -> :class:`LabkitError`. Messages carry
``cudnnGetErrorString`` and ``cudnnGetLastErrorString``.

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
(argument order and types) in ``_SIGNATURES`` match the 9.19 headers. The functions are
``CUDNN_DEPRECATED`` in cuDNN 9 (still exported by libcudnn.so.9 in 9.19; they forward to
libcudnn_cnn.so.9 / libcudnn_ops.so.9).
Note the argument order of ``cudnnSetFilter4dDescriptor(desc, dataType, format, k, c, h, w)``
versus ``cudnnSetTensor4dDescriptor(desc, format, dataType, n, c, h, w)``.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import site
import sys
import threading
import warnings
from typing import Dict, List, Optional, Tuple

from ...errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported

__all__ = [
    "cudnn_version",
    "library_path",
    "status_name",
    "FWD_ALGOS",
    "ConvolutionFwdAlgoPerf",
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
    "IMPLICIT_GEMM",  # 0
    "IMPLICIT_PRECOMP_GEMM",  # 1
    "GEMM",  # 2
    "DIRECT",  # 3
    "FFT",  # 4
    "FFT_TILING",  # 5
    "WINOGRAD",  # 6
    "WINOGRAD_NONFUSED",  # 7
)
FWD_ALGO_IDS = {name: i for i, name in enumerate(FWD_ALGOS)}
CUDNN_CONVOLUTION_FWD_ALGO_COUNT = len(FWD_ALGOS)

#: what a failure is reported as: the library, and the table its calls serve (labkit.gpu.classic.legacy)
_WHAT = "legacy cuDNN API"
_TABLE = "legacy algorithm table"


class ConvolutionFwdAlgoPerf(ctypes.Structure):
    """``cudnnConvolutionFwdAlgoPerf_t`` (cudnn_cnn.h). C enums are ``int`` on the x86-64 ABI."""

    _fields_ = [
        ("algo", ctypes.c_int),  # cudnnConvolutionFwdAlgo_t
        ("status", ctypes.c_int),  # cudnnStatus_t
        ("time", ctypes.c_float),  # milliseconds
        ("memory", ctypes.c_size_t),  # workspace bytes
        ("determinism", ctypes.c_int),  # cudnnDeterminism_t
        ("mathType", ctypes.c_int),  # cudnnMathType_t
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
        [
            _V,
            _V,
            _V,
            _V,
            _V,
            _V,
            _V,
            _V,
            _I,
            _c_int_p,
            ctypes.POINTER(ConvolutionFwdAlgoPerf),
            _V,
            ctypes.c_size_t,
        ],
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
        import cudnn  # noqa: F401  # heavy: dlopens the cuDNN backend (no GPU needed)
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
        hits.sort(key=lambda p: 0 if f"{os.sep}cudnn{os.sep}" in p else 1)
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
        attempts = "; ".join(tried)
        raise Unsupported(
            _WHAT,
            "could not load cuDNN 9's libcudnn.so.9 (install nvidia-cudnn-cu12/-cu13, or put it on "
            f"LD_LIBRARY_PATH). Tried: {attempts}",
        )


def _resolve_path(path: str) -> str:
    if os.sep in path:
        return os.path.realpath(path)
    mapped = _mapped_cudnn_paths()  # a soname: report the file the linker chose
    return os.path.realpath(mapped[0]) if mapped else path


def _warn_if_several() -> None:
    real = sorted({os.path.realpath(p) for p in _mapped_cudnn_paths()})
    if len(real) > 1:
        mapped = ", ".join(real)
        warnings.warn(
            f"several cuDNN libraries are mapped into this process: {mapped}; labkit.legacy uses "
            f"{_lib_path}. Mixed copies can make cuDNN report and run another version.",
            RuntimeWarning,
            stacklevel=3,
        )


def cudnn_version() -> int:
    """``cudnnGetVersion()`` of the cuDNN this module uses.

    Returns:
        The version as one number, e.g. 91900 for 9.19.0.
    """
    return int(_load_library().cudnnGetVersion())


def library_path() -> str:
    """The file the cuDNN library used here was loaded from (loads it if needed).

    Returns:
        The path, as text.
    """
    _load_library()
    return str(_lib_path)


# ---- statuses and errors ----------------------------------------------------------------------
def status_name(status: int, lib: Optional[ctypes.CDLL] = None) -> str:
    """A cuDNN status in words.

    Args:
        status: a ``cudnnStatus_t`` value.
        lib: the loaded library, asked for names the table lacks.

    Returns:
        ``"ok"`` for success, else the ``CUDNN_STATUS_*`` name.
    """
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


def _error_for(
    status: int, call: str, text: str, label: str, requested_bytes: int = 0, free_bytes: Optional[int] = None
) -> LabkitError:
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
        import cupy  # heavy: CuPy, live only

        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:
        return None
