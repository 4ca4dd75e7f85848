"""Workspace strategies: the ways a framework can hand cuDNN its scratch memory.

Every strategy answers one question, ``get(request) -> (pointer, bytes)``: "give me at least
``request.nbytes`` of device memory for this call on this stream", and hears ``put`` when the
call has been launched. All allocations are real (cudaMalloc/cudaFree through CuPy's runtime
bindings, CuPy's pools); every strategy keeps `StrategyStats` and frees everything on ``close()``.

=====================  =====================================================================
``FixedArena``          one big buffer made up front; a plan that needs more raises
                        `ArenaTooSmall` (the `Runner` may then fall back to a plan that fits)
``MallocPerCall``       cudaMalloc before and cudaFree after every call (cudaFree waits for
                        the device: the cost is real and visible)
``KeyedCache``          one buffer per key (spec + plan), LRU-evicted under a byte budget;
                        ``key="dims_only"`` reproduces the well-known sketch whose key lacks
                        dtype/layout/direction/plan and so hands out wrong-sized buffers
``Scratchpad``          oneDNN's user scratchpad: one grow-only buffer per stream, or (the
                        hazard) one buffer shared by every stream with ``shared=True``
``CupyPool``            CuPy's caching `MemoryPool` (blocks come back to the pool on put)
``AsyncPool``           CuPy's `MemoryAsyncPool`: stream-ordered cudaMallocAsync/cudaFreeAsync
``Preallocated``        the no-management baseline: one exact-size buffer per key, unbounded
=====================  =====================================================================

`Runner` runs convolutions under a strategy: it never hands cuDNN fewer bytes than the plan asked
for, and under memory pressure (OutOfMemory, ArenaTooSmall) falls back to the next plan with a
smaller workspace, as PyTorch and TensorFlow do. Sizes in bytes, times in microseconds.
"""
from __future__ import annotations

import collections
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import cupy

from . import engine, memory
from ..errors import ArenaTooSmall, InvalidSpec, LabkitError, OutOfMemory
from ..store.keys import KEYS, Request, dims_only_key, full_key  # noqa: F401  (re-exported)
from ..spec import ConvSpec


@dataclass
class StrategyStats:
    """Counters every strategy keeps. ``alloc_us_total``: host time inside allocate/free calls;
    ``get_put_us_total``: host time inside the strategy's get and put (its whole per-call cost)."""

    calls: int = 0
    alloc_calls: int = 0
    free_calls: int = 0
    bytes_allocated: int = 0
    held_bytes: int = 0
    peak_held_bytes: int = 0
    alloc_us_total: float = 0.0
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    get_put_us_total: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


class Strategy:
    """Base class: subclasses implement ``_get``/``_put``/``_close``; this keeps the books."""

    name = "strategy"

    def __init__(self):
        self.stats = StrategyStats()
        self.closed = False

    # -- the interface --
    def get(self, req: Request) -> Tuple[int, int]:
        """(device pointer, bytes usable there) for this call."""
        if self.closed:
            raise LabkitError(f"{self.name} is closed")
        self.stats.calls += 1
        t0 = time.perf_counter()
        try:
            return self._get(req)
        finally:
            self.stats.get_put_us_total += (time.perf_counter() - t0) * 1e6

    def put(self, req: Request, ptr: int) -> None:
        """The call using ``ptr`` has been launched on ``req.stream_ptr``."""
        t0 = time.perf_counter()
        try:
            self._put(req, ptr)
        finally:
            self.stats.get_put_us_total += (time.perf_counter() - t0) * 1e6

    def close(self) -> None:
        """Free everything this strategy holds. Idempotent."""
        if not self.closed:
            self._close()
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- allocation helpers that keep the books (real cudaMalloc/cudaFree) --
    def _malloc(self, nbytes: int, what: str) -> int:
        t0 = time.perf_counter()
        try:
            ptr = memory.raw_malloc(nbytes, what)
        finally:
            self.stats.alloc_us_total += (time.perf_counter() - t0) * 1e6
        self.stats.alloc_calls += 1
        self.stats.bytes_allocated += nbytes
        self._held(+nbytes)
        return ptr

    def _free(self, ptr: int, nbytes: int) -> None:
        t0 = time.perf_counter()
        memory.raw_free(ptr)
        self.stats.alloc_us_total += (time.perf_counter() - t0) * 1e6
        self.stats.free_calls += 1
        self._held(-nbytes)

    def _held(self, delta: int) -> None:
        self.stats.held_bytes += delta
        self.stats.peak_held_bytes = max(self.stats.peak_held_bytes, self.stats.held_bytes)

    def _get(self, req: Request) -> Tuple[int, int]:
        raise NotImplementedError

    def _put(self, req: Request, ptr: int) -> None:
        pass

    def _close(self) -> None:
        pass

    def describe(self) -> str:
        return self.name


def _bytes_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(name, value, "must be a whole number of bytes")
    return memory.check_request(value, name)


class FixedArena(Strategy):
    """One buffer of ``size_bytes`` made at construction; every call uses its start."""

    name = "fixed_arena"

    def __init__(self, size_bytes: int = 1 << 30):
        super().__init__()
        self.size_bytes = _bytes_arg("size_bytes", size_bytes)
        self.ptr = self._malloc(self.size_bytes, "fixed arena") if self.size_bytes else 0

    def _get(self, req):
        if req.nbytes > self.size_bytes:
            raise ArenaTooSmall(req.plan_name, req.nbytes, self.size_bytes)
        self.stats.hits += 1
        return self.ptr, self.size_bytes

    def _close(self):
        if self.ptr:
            self._free(self.ptr, self.size_bytes)
            self.ptr = 0

    def describe(self):
        return f"{self.name} ({self.size_bytes / 2**20:.0f} MiB)"


class MallocPerCall(Strategy):
    """Query the size, cudaMalloc it, run, cudaFree it: every call."""

    name = "malloc_per_call"

    def _get(self, req):
        if req.nbytes == 0:
            return 0, 0
        return self._malloc(req.nbytes, "per-call workspace"), req.nbytes

    def _put(self, req, ptr):
        if ptr:
            self._free(ptr, req.nbytes)


class KeyedCache(Strategy):
    """One persistent workspace per key, least-recently-used eviction to stay within ``budget_bytes``.

    A request larger than the whole budget raises `ArenaTooSmall` (the budget is the arena). With
    ``key="dims_only"`` a hit can return a buffer smaller than the plan needs: the `Runner`
    catches that (it never hands cuDNN less than asked) and says the key is the bug.
    """

    name = "keyed_cache"

    def __init__(self, budget_bytes: int = 256 << 20, key: str = "full"):
        super().__init__()
        self.budget_bytes = _bytes_arg("budget_bytes", budget_bytes)
        if key not in KEYS:
            raise InvalidSpec("key", key, f"must be one of {', '.join(KEYS)}")
        self.key_name, self._key = key, KEYS[key]
        self._entries: "collections.OrderedDict[tuple, Tuple[int, int]]" = collections.OrderedDict()

    def _get(self, req):
        k = self._key(req)
        hit = self._entries.get(k)
        if hit is not None:
            self._entries.move_to_end(k)
            self.stats.hits += 1
            return hit
        self.stats.misses += 1
        if req.nbytes > self.budget_bytes:
            raise ArenaTooSmall(req.plan_name, req.nbytes, self.budget_bytes)
        while self._entries and self.stats.held_bytes + req.nbytes > self.budget_bytes:
            _, (ptr, n) = self._entries.popitem(last=False)
            cupy.cuda.runtime.deviceSynchronize()  # an evicted buffer may still be in use on a stream
            self._free(ptr, n)
            self.stats.evictions += 1
        ptr = self._malloc(req.nbytes, "cached workspace") if req.nbytes else 0
        self._entries[k] = (ptr, req.nbytes)
        return ptr, req.nbytes

    def __len__(self):
        return len(self._entries)

    def _close(self):
        cupy.cuda.runtime.deviceSynchronize()
        while self._entries:
            _, (ptr, n) = self._entries.popitem()
            self._free(ptr, n)

    def describe(self):
        return f"{self.name} ({self.budget_bytes / 2**20:.0f} MiB, key={self.key_name})"


class Scratchpad(Strategy):
    """oneDNN-style user scratchpad: a grow-only buffer per stream (``shared=False``), or one
    buffer for every stream (``shared=True``: concurrent streams then race on it)."""

    def __init__(self, shared: bool = False):
        super().__init__()
        self.shared = bool(shared)
        self.name = "scratchpad_shared" if self.shared else "scratchpad_per_stream"
        self._buffers: Dict[int, Tuple[int, int]] = {}

    def _get(self, req):
        slot = 0 if self.shared else req.stream_ptr
        ptr, size = self._buffers.get(slot, (0, 0))
        if req.nbytes <= size:
            self.stats.hits += 1
            return ptr, size
        self.stats.misses += 1
        if ptr:
            cupy.cuda.runtime.deviceSynchronize()  # the old buffer may be in use on its stream
            self._free(ptr, size)
            self._buffers.pop(slot)
        ptr = self._malloc(req.nbytes, "scratchpad")
        self._buffers[slot] = (ptr, req.nbytes)
        return ptr, req.nbytes

    def _close(self):
        cupy.cuda.runtime.deviceSynchronize()
        for ptr, size in self._buffers.values():
            self._free(ptr, size)
        self._buffers.clear()


_external: Dict[int, object] = {}


def _external_stream(ptr: int):
    """A CuPy stream object for a raw stream pointer (made once per pointer)."""
    s = _external.get(ptr)
    if s is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            s = _external[ptr] = cupy.cuda.ExternalStream(ptr)
    return s


def _stream_of(req: Request):
    return _external_stream(req.stream_ptr) if req.stream_ptr else cupy.cuda.Stream.null


class _PoolStrategy(Strategy):
    """Shared logic of the CuPy pools: malloc from the pool, drop the block on put."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool
        self._live: Dict[int, object] = {}

    def _get(self, req):
        if req.nbytes == 0:
            return 0, 0
        t0 = time.perf_counter()
        try:
            mem = self._pool_malloc(req)
        except cupy.cuda.memory.OutOfMemoryError:
            raise OutOfMemory(f"{self.name} workspace", req.nbytes, memory.free_bytes()) from None
        finally:
            self.stats.alloc_us_total += (time.perf_counter() - t0) * 1e6
        self.stats.alloc_calls += 1
        self.stats.bytes_allocated += req.nbytes
        self._live[int(mem.ptr)] = mem
        self._sync_held()
        return int(mem.ptr), req.nbytes

    def _put(self, req, ptr):
        if ptr:
            t0 = time.perf_counter()
            self._release(req, self._live.pop(ptr))
            self.stats.alloc_us_total += (time.perf_counter() - t0) * 1e6
            self.stats.free_calls += 1

    def _pool_malloc(self, req):
        with _stream_of(req):  # both pools allocate on the current stream
            return self.pool.malloc(req.nbytes)

    def _release(self, req, mem):
        del mem  # the block returns to the pool, reusable on the stream it was allocated on

    def _sync_held(self):
        self.stats.held_bytes = int(self.pool.total_bytes())
        self.stats.peak_held_bytes = max(self.stats.peak_held_bytes, self.stats.held_bytes)

    def _close(self):
        cupy.cuda.runtime.deviceSynchronize()
        self._live.clear()
        self.pool.free_all_blocks()
        self.stats.held_bytes = int(self.pool.total_bytes())


class CupyPool(_PoolStrategy):
    """CuPy's caching allocator (`cupy.cuda.MemoryPool`, a private instance): cudaMalloc on a miss,
    then blocks are reused; nothing goes back to the driver until ``close()``."""

    name = "cupy_pool"

    def __init__(self):
        super().__init__(cupy.cuda.MemoryPool())


class AsyncPool(_PoolStrategy):
    """Stream-ordered allocation (`cupy.cuda.MemoryAsyncPool`: cudaMallocAsync/cudaFreeAsync on the
    call's stream); the driver's pool keeps freed memory for reuse."""

    name = "async_pool"

    def __init__(self):
        super().__init__(cupy.cuda.MemoryAsyncPool())

    def _release(self, req, mem):
        with _stream_of(req):
            del mem  # cudaFreeAsync, ordered after the call on this stream


class Preallocated(Strategy):
    """No management at all: one exact-size buffer per key, kept forever. The baseline against
    which the other strategies' overhead is measured."""

    name = "preallocated"

    def __init__(self):
        super().__init__()
        self._entries: Dict[tuple, Tuple[int, int]] = {}

    def _get(self, req):
        k = full_key(req)
        hit = self._entries.get(k)
        if hit is None:
            hit = (self._malloc(req.nbytes, "preallocated workspace") if req.nbytes else 0, req.nbytes)
            self._entries[k] = hit
        return hit

    def _close(self):
        cupy.cuda.runtime.deviceSynchronize()
        for ptr, n in self._entries.values():
            self._free(ptr, n)
        self._entries.clear()


STRATEGIES = {
    "fixed_arena": FixedArena,
    "malloc_per_call": MallocPerCall,
    "keyed_cache": KeyedCache,
    "scratchpad": Scratchpad,
    "cupy_pool": CupyPool,
    "async_pool": AsyncPool,
    "preallocated": Preallocated,
}


def make(name: str, **options) -> Strategy:
    """A strategy by name (see `STRATEGIES`), with its options (e.g. ``size_bytes``, ``budget_bytes``)."""
    if name not in STRATEGIES:
        raise InvalidSpec("strategy", name, f"must be one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**options)


class WorkspaceTooSmall(LabkitError):
    """A strategy handed out fewer bytes than the plan needs (e.g. a cache key without dtype/layout)."""

    def __init__(self, strategy: str, req: Request, got: int):
        self.got, self.needed = got, req.nbytes
        super().__init__(
            f"{strategy} handed out {got:,} B for plan {req.plan_name!r} of {req.spec.label}, which needs "
            f"{req.nbytes:,} B; labkit refused to run it (cuDNN would write past the buffer)"
        )


@dataclass
class CallRecord:
    """What one `Runner.run` did: the plan used, and the plan it fell back from (if any)."""

    spec: ConvSpec
    plan_index: int
    workspace_bytes: int
    fell_back_from: Optional[int] = None
    reasons: List[str] = field(default_factory=list)


class Runner:
    """Runs convolutions with workspaces from ``strategy`` on ``stream``.

    ``fallback=True``: when the chosen plan's workspace cannot be had (`OutOfMemory`,
    `ArenaTooSmall`), try the remaining plans in heuristic order among those needing less, and
    record it. Plan choices made under such pressure are never stored as the spec's choice
    (`choices` holds only unconstrained picks). Inputs are made once per spec and reused;
    ``operands``: a dict of them the caller keeps (spec key, epilogue) -> `engine.Operands`, filled
    here and left alone by `close` (several runners in turn over the same specs make them once).
    """

    def __init__(self, strategy: Strategy, stream=None, fallback: bool = True, seed: int = 0,
                 operands: Optional[Dict[tuple, engine.Operands]] = None):
        if not isinstance(strategy, Strategy):
            raise InvalidSpec("strategy", strategy, "must be a labkit.workspace.Strategy")
        self.strategy, self.fallback, self.seed = strategy, bool(fallback), seed
        self._owns_stream = stream is None
        self.stream = cupy.cuda.Stream(non_blocking=True) if stream is None else stream
        engine.handle_for(self.stream)  # now, not under memory pressure later
        self.choices: Dict[tuple, int] = {}
        self._owns_operands = operands is None
        self._operands: Dict[tuple, engine.Operands] = {} if operands is None else operands
        self._bound: Dict[tuple, engine.BoundConv] = {}
        self.fallbacks = 0

    def operands(self, spec: ConvSpec, epilogue: str = "none") -> engine.Operands:
        k = (spec.key, epilogue)
        ops = self._operands.get(k)
        if ops is None:
            ops = self._operands[k] = engine.Operands(spec, epilogue, self.seed)
        return ops

    def choose(self, cg: engine.ConvGraph, plan_index: Optional[int] = None) -> int:
        """The plan to try first: given, else the stored unconstrained choice, else the heuristic's."""
        if plan_index is not None:
            return cg.plan(plan_index).index
        return self.choices.setdefault(cg.key, cg.default_plan.index)

    def run(self, spec: ConvSpec, plan_index: Optional[int] = None, epilogue: str = "none") -> CallRecord:
        """Run one convolution (enqueued on the stream; not synchronised)."""
        cg = engine.get_graph(spec, epilogue)
        first = self.choose(cg, plan_index)
        candidates = [cg.plans[first]]
        if self.fallback:
            candidates += [p for p in cg.runnable if p.index != first]
        reasons, limit, last_error = [], None, None
        for plan in candidates:
            if limit is not None and plan.workspace_bytes >= limit:
                continue
            req = Request(spec, plan.index, plan.name, plan.workspace_bytes, int(self.stream.ptr), epilogue)
            try:
                ptr, got = self.strategy.get(req)
            except (OutOfMemory, ArenaTooSmall) as exc:
                if not self.fallback:
                    raise
                reasons.append(str(exc))
                last_error = exc
                limit = plan.workspace_bytes if limit is None else min(limit, plan.workspace_bytes)
                continue
            if got < req.nbytes:
                self.strategy.put(req, ptr)
                raise WorkspaceTooSmall(self.strategy.name, req, got)
            try:
                self._bind(cg, spec, epilogue, plan.index, ptr).run()
            finally:
                self.strategy.put(req, ptr)
            if plan.index != first:
                self.fallbacks += 1
                return CallRecord(spec, plan.index, plan.workspace_bytes, first, reasons)
            return CallRecord(spec, plan.index, plan.workspace_bytes)
        raise last_error  # no plan's workspace could be had: the smallest plan's failure

    def _bind(self, cg, spec, epilogue, plan_index, ptr) -> engine.BoundConv:
        k = (cg.key, plan_index, ptr)
        b = self._bound.get(k)
        if b is None:
            if len(self._bound) > 4096:
                self._bound.clear()
            b = self._bound[k] = cg.bind(self.operands(spec, epilogue).arrays, ptr, plan_index, self.stream)
        return b

    def close(self) -> None:
        """Close the strategy, free the inputs/outputs this runner made (not the caller's
        ``operands``), and (when the runner
        made its own stream) destroy that stream's cuDNN handle."""
        self.stream.synchronize()
        self._bound.clear()
        if self._owns_operands:
            self._operands.clear()
        self.strategy.close()
        if self._owns_stream:
            engine.release_handle(self.stream)
        cupy.get_default_memory_pool().free_all_blocks()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
