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

`Runner` (`labkit.gpu.runner`) runs convolutions under a strategy: it never hands cuDNN fewer
bytes than the plan asked for, and under memory pressure (OutOfMemory, ArenaTooSmall) falls back
to the next plan with a smaller workspace, as PyTorch and TensorFlow do. Sizes in bytes, times in
microseconds.
"""

from __future__ import annotations

import collections
import time
from dataclasses import asdict, dataclass
from typing import Dict, Tuple

import cupy

from ..errors import ArenaTooSmall, InvalidSpec, LabkitError, OutOfMemory
from ..store.keys import KEYS, Request, dims_only_key, full_key  # noqa: F401  (re-exported)
from . import memory


@dataclass
class StrategyStats:
    """Counters every strategy keeps; bytes, and host microseconds.

    Attributes:
        calls: `Strategy.get` calls.
        alloc_calls: cudaMalloc calls that returned memory (or pool allocations); a failed one is
            not counted, its time is in ``alloc_us_total``.
        free_calls: cudaFree calls.
        bytes_allocated: bytes allocated, summed over allocations.
        held_bytes: bytes held now.
        peak_held_bytes: the most bytes held at once.
        alloc_us_total: host time inside allocate and free calls.
        hits: calls answered from memory already held.
        misses: calls that allocated.
        evictions: buffers freed to make room.
        get_put_us_total: host time inside the strategy's get and put (its whole per-call cost).
    """

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
        """The counters as a plain dict."""
        return asdict(self)


class Strategy:
    """Base class: subclasses implement ``_get``/``_put``/``_close``; this keeps the books."""

    name = "strategy"

    def __init__(self):
        self.stats = StrategyStats()
        self.closed = False

    # -- the interface --
    def get(self, req: Request) -> Tuple[int, int]:
        """The workspace for one call.

        Args:
            req: what the call needs.

        Returns:
            (device pointer, bytes usable there).
        """
        if self.closed:
            raise LabkitError(f"{self.name} is closed")
        self.stats.calls += 1
        t0 = time.perf_counter()
        try:
            return self._get(req)
        finally:
            self.stats.get_put_us_total += (time.perf_counter() - t0) * 1e6

    def put(self, req: Request, ptr: int) -> None:
        """Hear that the call using ``ptr`` has been launched on ``req.stream_ptr``.

        Args:
            req: the call's request.
            ptr: the pointer `get` handed out.
        """
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
        """The strategy's name, with its options where it has some."""
        return self.name


def _bytes_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(name, value, "must be a whole number of bytes")
    return memory.check_request(value, name)


class FixedArena(Strategy):
    """One buffer made at construction; every call uses its start.

    Args:
        size_bytes: the arena's size, in bytes.
    """

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
        """The strategy's name with the arena's size in MiB."""
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
    """One persistent workspace per key, least recently used evicted to stay within a byte budget.

    A request larger than the whole budget raises `ArenaTooSmall` (the budget is the arena). With
    ``key="dims_only"`` a hit can return a buffer smaller than the plan needs: the `Runner` catches
    that (it never hands cuDNN less than asked) and says the key is the bug.

    Args:
        budget_bytes: the most bytes held, in bytes.
        key: "full" (`full_key`) or "dims_only" (`dims_only_key`).
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
        """The strategy's name with its budget in MiB and its key."""
        return f"{self.name} ({self.budget_bytes / 2**20:.0f} MiB, key={self.key_name})"


class Scratchpad(Strategy):
    """oneDNN-style user scratchpad: a grow-only buffer per stream, or one for every stream.

    Args:
        shared: one buffer for every stream: concurrent streams then race on it.
    """

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
    """A strategy by name.

    Args:
        name: one of `STRATEGIES`.
        **options: its options, e.g. ``size_bytes`` or ``budget_bytes``.

    Returns:
        The `Strategy`.
    """
    if name not in STRATEGIES:
        raise InvalidSpec("strategy", name, f"must be one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**options)
