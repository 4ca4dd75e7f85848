"""A trace of what the GPU and the CUDA API did during a short stretch of code: CUPTI activity
records through NVIDIA's ``cupti-python`` (the ``trace`` extra), as a tidy DataFrame.

    with trace.Tracer("plan 3, 3 calls") as t:
        bound.run(); bound.run(); bound.run(); stream.synchronize()
    df = t.frame()

One row per record: ``kind`` (kernel, memset, memcpy, api, sync), ``name`` (a kernel's demangled
name without its argument list; an API call's name without its ``_v3020`` suffix), ``role`` (what a
learner calls it: `ROLES`), ``start_us``/``end_us``/``dur_us`` (microseconds, relative to the
trace's first record), ``row`` ("host" for API calls, "stream 1", "stream 2", ... in order of first
appearance for device work), ``stream_id``, ``correlation_id`` (a kernel's and its launch call's
are equal), ``grid``, ``block``, ``graph_id`` (nonzero inside a CUDA-graph replay), ``bytes``.

Tracing changes what it watches (CUPTI adds host time to every API call, and sets up each kernel
at its first launch after a tracer is switched on), so a traced run is a separate, labelled run
(``df.attrs["traced"]``): labkit never times under a tracer, and a trace whose gaps matter runs a
warm-up pass first and keeps only what follows (`Tracer.keep_from_now`). API calls kept
are those that matter here (`API_KEPT`: allocation, free, launches, synchronisation, memset and
copy); ``all_api=True`` keeps every one.

Faults, each a `TraceUnavailable` with what to do: no ``cupti`` package, a CUPTI older than the
driver, a driver or administrator that does not permit tracing, another trace in this process
(labkit's or torch.profiler's). More than ``max_records`` records: the rest are counted, not kept
(``df.attrs["dropped"]``), never an unbounded buffer.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import re
import sys
import threading
from typing import Dict, List, Optional

import pandas as pd

from ...errors import LabkitError
from ..host.lock import hold

#: a kernel's role, from its name: what the learner reads in the charts, in this order of checks
ROLES = (
    "zeroing (memset)",
    "copy",
    "layout conversion",
    "FFT transform",
    "Winograd transform",
    "split-K reduction",
    "setup",
    "epilogue",
    "main convolution",
    "other",
)
_ROLE_WORDS = (
    (
        "layout conversion",
        (
            "nchwtonhwc",
            "nhwctonchw",
            "addpadding",
            "transpose",
            "tensortransform",
            "reorder",
            "convert_",
            "nchwtonchwc",
            "nchwctonchw",
        ),
    ),
    ("FFT transform", ("fft",)),
    ("Winograd transform", ("winograd_transform", "winogradtransform", "wgrad_transform")),
    ("split-K reduction", ("splitk", "split_k", "reduce", "reduction")),
    (
        "setup",
        ("flip_filter", "precompute", "init_device_work", "computeoffsets", "compute_offsets", "zero_init"),
    ),
    ("epilogue", ("cupy_add", "cupy_maximum", "cupy_multiply", "bias", "relu", "pointwise", "activation")),
    (
        "main convolution",
        ("gemm", "xmma", "conv", "cutlass", "nvjet", "winograd", "implicit", "cudnn_generated", "direct"),
    ),
)
#: API calls kept in a trace unless ``all_api``: the ones a workspace lesson is about
API_KEPT = re.compile(
    r"^(cuda|cu)(Malloc|Free|MemAlloc|MemFree|MallocAsync|FreeAsync|MemAllocAsync|MemFreeAsync|"
    r"MallocFromPoolAsync|LaunchKernel|LaunchKernelEx|LaunchKernelExC|GraphLaunch|StreamSynchronize|"
    r"EventSynchronize|DeviceSynchronize|CtxSynchronize|Memset|MemsetD|Memcpy|MemcpyAsync)"
)
#: at most this many records are kept per trace (the rest are counted in ``attrs["dropped"]``)
MAX_RECORDS = 200_000
#: bytes per CUPTI activity buffer
BUFFER_BYTES = 8 << 20


class TraceUnavailable(LabkitError):
    """Tracing cannot run here; the lesson goes on with the recorded trace for that chart.

    Args:
        reason: why, and what to do (``reason``).
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"no trace: {reason}")


# ---- names --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _cxa_demangle():
    path = ctypes.util.find_library("stdc++")
    for candidate in ([path] if path else []) + ["libstdc++.so.6"]:
        try:
            fn = ctypes.CDLL(candidate).__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_int),
        ]
        return fn
    return None


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """A C++ symbol (``_ZN5cudnn...``) as source reads it.

    Args:
        name: a kernel's name.

    Returns:
        The demangled name; any other name unchanged.
    """
    if not name or not name.startswith("_Z"):
        return name or ""
    fn = _cxa_demangle()
    if fn is None:
        return name
    status = ctypes.c_int()
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


def kernel_name(raw: str, limit: int = 96) -> str:
    """A kernel's name for a chart: demangled, without return type, argument list and template arguments.

    ``void cudnn::x::nchwToNhwcKernel<__half, ...>(...)`` -> ``cudnn::x::nchwToNhwcKernel``.

    Args:
        raw: the name as CUPTI reports it.
        limit: the most characters kept.

    Returns:
        The short name.
    """
    s = demangle(raw)
    depth, out = 0, []
    for ch in s:  # drop template arguments and argument lists, nested
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    s = s.split(" ")[-1] if " " in s else s  # "void ns::f" -> "ns::f"
    return s[:limit] if s else (raw or "")[:limit]


def role_of(kind: str, name: str) -> str:
    """The role (`ROLES`) of a device record: memsets zero, memcpys copy, kernels by name.

    Args:
        kind: the record's kind ("kernel", "memset", "memcpy").
        name: its raw name.

    Returns:
        One of `ROLES`.
    """
    if kind == "memset":
        return "zeroing (memset)"
    if kind == "memcpy":
        return "copy"
    low = demangle(name).lower()
    for role, words in _ROLE_WORDS:
        if any(w in low for w in words):
            return role
    return "other"


def api_name(raw: str) -> str:
    """A CUDA API call's name without its version suffix.

    Args:
        raw: CUPTI's name, e.g. ``cudaMalloc_v3020``.

    Returns:
        E.g. ``cudaMalloc``.
    """
    return re.sub(r"_v\d+$", "", raw or "")


# ---- the tracer -------------------------------------------------------------------------------
_ACTIVE = threading.Lock()  # one trace per process: CUPTI's activity buffers are process-wide
_STATE: Dict[str, object] = dict(sink=None)


def _cupti():
    try:
        from cupti import cupti  # heavy: CUPTI, an optional extra
    except ImportError as exc:
        raise TraceUnavailable(
            "the cupti-python package is not installed (pip install -e '.[trace-cuda13]' or "
            f"'.[trace-cuda12]', matching your driver): {exc}"
        ) from None
    except Exception as exc:  # noqa: BLE001  (a CUPTI library that does not load: version or driver)
        raise TraceUnavailable(
            f"CUPTI did not load ({type(exc).__name__}: {exc}); cupti-python must match the "
            "driver's CUDA major version"
        ) from None
    return cupti


def available() -> Optional[str]:
    """Whether this process can trace.

    Returns:
        None when it can; else why not, as a sentence.
    """
    try:
        _cupti()
    except TraceUnavailable as exc:
        return exc.reason
    if _ACTIVE.locked():
        return "another labkit trace is running in this process"
    return _other_profiler()


def _other_profiler() -> Optional[str]:
    """Why not, when torch.profiler (which holds CUPTI's activity buffers) is recording here."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.autograd.profiler._is_profiler_enabled:
            return "torch.profiler is recording in this process (it holds CUPTI); end its block and retry"
    except AttributeError:
        pass
    return None


def _kind_names(cupti) -> dict:
    K = cupti.ActivityKind
    return {
        K.CONCURRENT_KERNEL: "kernel",
        K.MEMSET: "memset",
        K.MEMCPY: "memcpy",
        K.RUNTIME: "api",
        K.DRIVER: "api",
        K.SYNCHRONIZATION: "sync",
    }


def _as_row(cupti, kinds: dict, a) -> Optional[dict]:
    """A CUPTI record as a plain dict (records live only as long as their buffer)."""
    kind = kinds.get(a.kind)
    if kind is None:
        return None
    row = dict(
        kind=kind,
        start_ns=int(a.start),
        end_ns=int(a.end),
        correlation_id=int(getattr(a, "correlation_id", 0)),
    )
    if kind == "api":
        dom = (
            cupti.CallbackDomain.RUNTIME_API
            if a.kind == cupti.ActivityKind.RUNTIME
            else cupti.CallbackDomain.DRIVER_API
        )
        try:
            row["name"] = api_name(cupti.get_callback_name(dom, a.cbid))
        except Exception:  # noqa: BLE001
            row["name"] = f"cbid {a.cbid}"
        row["thread_id"] = int(getattr(a, "thread_id", 0))
        return row
    row["stream_id"] = int(getattr(a, "stream_id", -1))
    if kind == "kernel":
        row.update(
            raw_name=str(a.name or ""),
            grid=f"{a.grid_x}x{a.grid_y}x{a.grid_z}",
            block=f"{a.block_x}x{a.block_y}x{a.block_z}",
            graph_id=int(getattr(a, "graph_id", 0)),
        )
    elif kind in ("memset", "memcpy"):
        row.update(raw_name=kind, bytes=int(getattr(a, "bytes", 0)), graph_id=int(getattr(a, "graph_id", 0)))
    else:  # sync
        row["raw_name"] = "synchronization"
    return row


class Tracer:
    """A context manager that records what the GPU and the CUDA API do inside it (see the module doc).

    Call `frame` after the block.

    Args:
        label: names the traced run.
        all_api: keep every API call, not only `API_KEPT`.
        max_records: the most records kept; the rest are counted (``attrs["dropped"]``).
        api: record CUDA API calls (the host lane); False keeps device records only, adding the
            least host time (CUPTI's cost is mostly per API call).
    """

    def __init__(
        self, label: str = "", *, all_api: bool = False, max_records: int = MAX_RECORDS, api: bool = True
    ):
        self.label, self.all_api, self.max_records = label, bool(all_api), int(max_records)
        #: record CUDA API calls (the host lane); False: device records only, the least host time
        #: added (CUPTI's cost is mostly per API call)
        self.api = bool(api)
        self.rows: List[dict] = []
        self.dropped = 0
        self._enabled: list = []
        self._held = False
        self._since_ns = 0  # records that started before this CUPTI timestamp are dropped (`keep_from_now`)
        self.marks: List[int] = []  # CUPTI timestamps (ns) of `mark` calls

    def _sink(self, cupti, kinds):
        def completed(activities):
            for a in activities:
                if self._since_ns and int(a.start) < self._since_ns:
                    continue
                if len(self.rows) >= self.max_records:
                    self.dropped += 1
                    continue
                try:
                    row = _as_row(cupti, kinds, a)
                except Exception:  # noqa: BLE001  (a record we cannot read is counted, never fatal)
                    self.dropped += 1
                    continue
                if row is None:
                    continue
                if row["kind"] == "api" and not self.all_api and not API_KEPT.match(row["name"]):
                    continue
                self.rows.append(row)

        return completed

    def __enter__(self):
        cupti = _cupti()
        other = _other_profiler()
        if other:
            raise TraceUnavailable(other)
        if not _ACTIVE.acquire(blocking=False):
            raise TraceUnavailable(
                "another labkit trace is running in this process; one at a time",
            )
        self._held = True
        try:
            kinds = _kind_names(cupti)
            if not self.api:
                kinds = {k: v for k, v in kinds.items() if v not in ("api", "sync")}
            _STATE["sink"] = self._sink(cupti, kinds)

            def requested():
                return BUFFER_BYTES, 0

            def completed(activities):
                sink = _STATE["sink"]
                if sink is not None:
                    sink(activities)

            # every time: CUPTI keeps one pair per process, and torch.profiler registers its own
            cupti.activity_register_callbacks(requested, completed)
            for k in kinds:
                cupti.activity_enable(k)
                self._enabled.append(k)
        except TraceUnavailable:
            self._release(cupti)
            raise
        # cuptiError: not permitted, another subscriber, ...
        except Exception as exc:  # noqa: BLE001
            self._release(cupti)
            raise TraceUnavailable(_why(exc)) from None
        return self

    def _release(self, cupti) -> None:
        try:
            if self._enabled:
                cupti.activity_flush_all(1)
        except Exception:  # noqa: BLE001
            pass
        for k in self._enabled:
            try:
                cupti.activity_disable(k)
            except Exception:  # noqa: BLE001
                pass
        self._enabled = []
        _STATE["sink"] = None
        if self._held:
            self._held = False
            _ACTIVE.release()

    def __exit__(self, *exc):
        self._release(_cupti())
        return False

    def keep_from_now(self) -> None:
        """Forget what was recorded so far; keep only what starts after this call. For a warm-up
        pass inside the trace: every time a tracer is switched on, CUPTI sets up each kernel at its
        first launch, and that pass's gaps are CUPTI's (H200, 8 convolutions under a fixed arena:
        1.5-2.1 ms of host time traced against 0.29-0.34 ms untraced; the second traced pass
        0.35-0.39 ms, its idle share 0.116-0.121 against 0.109-0.128 untraced). Nothing is flushed
        here: a forced flush sets CUPTI up again (the pass after it is as slow as the first);
        the records of the warm-up are dropped as they arrive. Call it with the GPU idle (after a
        synchronize)."""
        if not self._enabled:
            return
        self.rows.clear()
        self.dropped = 0
        self.marks.clear()
        self._since_ns = int(_cupti().get_timestamp())

    def mark(self) -> None:
        """Note this moment (between passes, with the GPU idle): the frame's ``attrs["marks_us"]``
        holds the marks on its time axis, and `between_marks` splits it there."""
        if self._enabled:
            self.marks.append(int(_cupti().get_timestamp()))

    def frame(self):
        """The records as a tidy DataFrame (see the module docstring).

        Returns:
            The DataFrame, sorted by start (`to_frame`).
        """
        return to_frame(self.rows, self.label, self.dropped, self.marks)


def warm() -> None:
    """Attach CUPTI now with a throw-away trace of one small kernel: the first trace after
    attaching pays CUPTI's set-up inside the traced region (gaps of milliseconds)."""
    import cupy  # heavy: CuPy, live only

    with hold(), Tracer("warm-up"):  # GPU work of labkit's: in this process's turn (`labkit.gpu.host.lock`)
        x = cupy.zeros(8)
        x += 1
        cupy.cuda.get_current_stream().synchronize()


def detach() -> None:
    """Detach CUPTI from this process (``cuptiFinalize``): its device buffers (about 8 MiB) are
    freed and later measurements run as if no tracer had been here. The next trace attaches again."""
    cupti = _cupti()
    with _ACTIVE:
        try:
            cupti.finalize()
        except Exception:  # noqa: BLE001  (already detached, or not supported: nothing held)
            pass


@contextlib.contextmanager
def session():
    """Several traces in a row (an experiment): CUPTI attached and warmed first, detached after."""
    warm()
    try:
        yield
    finally:
        detach()


def _why(exc: Exception) -> str:
    text = str(exc)
    low = text.lower()
    if "insufficient_privileges" in low or "not permitted" in low or "privilege" in low:
        return (
            f"the driver does not permit profiling for this user ({text}); an administrator can allow it "
            "(NVreg_RestrictProfilingToAdminUsers=0)"
        )
    if "multiple_subscribers" in low or "subscriber" in low or "already" in low:
        return (
            f"another profiler (torch.profiler, Nsight) holds CUPTI in this process ({text}); "
            "stop it and retry"
        )
    if "version" in low or "compatib" in low:
        return (
            f"this CUPTI does not match the driver ({text}); "
            "install the cupti-python of your driver's CUDA major"
        )
    return f"CUPTI refused ({type(exc).__name__}: {text})"


def to_frame(rows: List[dict], label: str = "", dropped: int = 0, marks_ns: Optional[List[int]] = None):
    """Raw trace rows as the tidy frame of the module doc.

    Args:
        rows: `Tracer.rows`.
        label: the traced run's name (``attrs["trace_label"]``).
        dropped: records counted but not kept (``attrs["dropped"]``).
        marks_ns: `Tracer.marks`, in CUPTI nanoseconds; they become ``attrs["marks_us"]`` on the
            frame's time axis.

    Returns:
        The DataFrame, sorted by start.
    """
    cols = [
        "kind",
        "row",
        "name",
        "role",
        "start_us",
        "end_us",
        "dur_us",
        "stream_id",
        "correlation_id",
        "grid",
        "block",
        "graph_id",
        "bytes",
    ]
    marks_us: List[float] = []
    if not rows:
        df = pd.DataFrame(columns=cols)
    else:
        df = pd.DataFrame(rows)
        t0 = int(df.start_ns.min())
        marks_us = [(int(m) - t0) / 1e3 for m in (marks_ns or [])]
        df["start_us"] = (df.start_ns - t0) / 1e3
        df["end_us"] = (df.end_ns - t0) / 1e3
        df["dur_us"] = (df.end_ns - df.start_ns) / 1e3
        raw = df["raw_name"] if "raw_name" in df else pd.Series([""] * len(df))
        device = df.kind.isin(["kernel", "memset", "memcpy"])
        df["name"] = [
            kernel_name(r) if dev and k == "kernel" else (n if k == "api" else r)
            for dev, k, r, n in zip(device, df.kind, raw.fillna(""), df.get("name", raw).fillna(""))
        ]
        df["role"] = [
            role_of(k, r) if dev else ("host" if k == "api" else "sync")
            for dev, k, r in zip(device, df.kind, raw.fillna(""))
        ]
        order = {}
        for sid in df.sort_values("start_ns").loc[device, "stream_id"]:
            order.setdefault(sid, f"stream {len(order) + 1}")
        df["row"] = [
            "host" if k == "api" else order.get(s, "sync") for k, s in zip(df.kind, df.get("stream_id"))
        ]
        for c in cols:
            if c not in df:
                df[c] = None
        df = df.sort_values("start_ns", kind="stable")[cols].reset_index(drop=True)
    df.attrs.update(traced=True, trace_label=label, dropped=int(dropped), marks_us=marks_us)
    return df


# ---- reading a trace ------------------------------------------------------------------------------
def device_rows(df):
    """The kernels, memsets and memcpys of a trace frame.

    Args:
        df: a trace frame.

    Returns:
        Those rows.
    """
    return df[df.kind.isin(["kernel", "memset", "memcpy"])]


def between_marks(df) -> list:
    """A trace frame cut at its marks (`Tracer.mark`), e.g. one piece per pass.

    Args:
        df: a trace frame with ``attrs["marks_us"]``.

    Returns:
        One frame per stretch between two marks, of the records that started in it.
    """
    m = list(df.attrs.get("marks_us") or [])
    return [df[(df.start_us >= a) & (df.start_us < b)] for a, b in zip(m, m[1:])]


def merged_spans(spans, join: float = 0.0) -> List[list]:
    """Spans in time order, those that overlap, touch or lie less than ``join`` apart merged into one.

    Args:
        spans: ``(start, end)`` pairs, in any order and any unit.
        join: the largest gap that still merges two spans, in the spans' unit.

    Returns:
        ``[start, end]`` lists.
    """
    out: List[list] = []
    for s, e in sorted(spans):
        if out and (s <= out[-1][1] or s - out[-1][1] < join):
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def busy_us(df) -> float:
    """Microseconds in which at least one device record ran (overlaps counted once).

    Args:
        df: a trace frame.

    Returns:
        The busy time, in microseconds.
    """
    dev = device_rows(df)
    return float(sum(e - s for s, e in merged_spans(zip(dev.start_us, dev.end_us))))


def idle_share(df, start_us: Optional[float] = None, end_us: Optional[float] = None) -> float:
    """The share of a stretch in which no device record ran: where the GPU waited for the host.

    Args:
        df: a trace frame.
        start_us: the stretch's start, in microseconds; default the first device record's start.
        end_us: its end; default the last device record's end.

    Returns:
        A fraction from 0 to 1; NaN without device records.
    """
    dev = device_rows(df)
    if dev.empty:
        return float("nan")
    s = float(dev.start_us.min()) if start_us is None else float(start_us)
    e = float(dev.end_us.max()) if end_us is None else float(end_us)
    return 1.0 - busy_us(dev[(dev.start_us >= s) & (dev.end_us <= e)]) / (e - s) if e > s else float("nan")


def overlap_spans(df, row_a: str, row_b: str) -> List[tuple]:
    """The stretches in which device work of two rows ran at the same time.

    That is where one shared workspace is written by two convolutions at once.

    Args:
        df: a trace frame.
        row_a: a row, e.g. "stream 1".
        row_b: another row, e.g. "stream 2".

    Returns:
        ``(start_us, end_us)`` pairs, in time order.
    """
    dev = device_rows(df)
    a = sorted(zip(dev[dev.row == row_a].start_us, dev[dev.row == row_a].end_us))
    b = sorted(zip(dev[dev.row == row_b].start_us, dev[dev.row == row_b].end_us))
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            lo, hi = max(s, b[k][0]), min(e, b[k][1])
            if hi > lo:
                out.append((float(lo), float(hi)))
            k += 1
    return sorted(out)


def overlap_us(df, row_a: str, row_b: str) -> float:
    """Microseconds in which device work of two rows ran at the same time (the sum of `overlap_spans`).

    Args:
        df: a trace frame.
        row_a: a row, e.g. "stream 1".
        row_b: another row.

    Returns:
        The overlap, in microseconds.
    """
    return float(sum(e - s for s, e in overlap_spans(df, row_a, row_b)))
