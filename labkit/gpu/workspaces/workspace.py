"""Workspace strategies: the ways a framework can hand cuDNN its scratch memory.

Every strategy answers one question, ``get(request) -> (pointer, bytes)``: "give me at least
``request.nbytes`` of device memory for this call on this stream", and hears ``put`` when the
call has been launched. A strategy reaches its GPU only through the device seam
(`labkit.gpu.device`: cudaMalloc/cudaFree, CuPy's pools, streams and events), so the same class
runs on this machine's GPU or on a simulated one (`labkit.simgpu`); every strategy keeps
`StrategyStats`, counted the same way for all of them, and frees everything on ``close()``.

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

**Stream-ordered reuse.** A workspace is its call's until the call's kernels have run on the
call's stream, not until ``put`` (which comes as soon as they are queued). So a buffer goes to a
call on another stream, or back to the device, only after an event recorded on the stream that
used it last: `Strategy._hand_over` makes the next stream wait for that event on the device (the
host goes on), `Strategy._free_after` lets the host wait for that event alone, never for the
whole device. Streams that share a buffer so take turns on it: their calls never overlap, and
never race. The pools order their own reuse (a block is reused on the stream that freed it).
``Scratchpad(shared=True)`` alone hands one buffer to every stream unordered: the race lesson 06
shows.

**CUDA graphs.** Inside a capture (`labkit.gpu.device.Device.capture`) no event recorded outside
it may be waited for, so `_hand_over` notes the buffer instead (`Device.order_at_launch`) and each
launch of the graph first waits, outside the capture, for the buffer's last use on another stream
(`Strategy.order_launch`). What CUDA forbids in a capture (a cudaFree: malloc_per_call's, an
eviction's, a scratchpad's growth) raises `labkit.NotCapturable`.

**One way of counting.** ``calls`` counts gets; a get is a *miss* when it made the device
allocate (cudaMalloc, or a pool reserving more device memory) or failed, else a *hit* (answered
from memory already held, a 0-byte request included).

`Runner` (`labkit.gpu.workspaces.runner`) runs convolutions under a strategy: it never hands cuDNN fewer
bytes than the plan asked for, and under memory pressure (OutOfMemory, ArenaTooSmall) falls back
to the next plan with a smaller workspace, as PyTorch and TensorFlow do. Sizes in bytes, times in
microseconds (of the device's clock: simulated time on a simulated GPU).
"""

from __future__ import annotations

import collections
from dataclasses import asdict, dataclass
from typing import Dict, Tuple

from ...errors import ArenaTooSmall, InvalidSpec, LabkitError, NotCapturable
from ...store.keys import KEYS, Request, dims_only_key, full_key  # noqa: F401  (re-exported)
from .. import device as devices
from ..buffers.sizes import check_request
from ..device import Device
from ..device.base import CUDAFREE_IN_CAPTURE
from .labels import label


@dataclass
class StrategyStats:
    """Counters every strategy keeps, the same way for all of them; bytes, and microseconds of the
    device's clock.

    Attributes:
        calls: `Strategy.get` calls.
        alloc_calls: allocations that returned memory: cudaMalloc calls, or pool requests for the
            pool strategies (most served from the pool's cache); a failed one is not counted, its
            time is in ``alloc_us_total``.
        free_calls: cudaFree calls, or blocks handed back to a pool.
        bytes_allocated: bytes allocated, summed over allocations.
        held_bytes: device memory held now (a pool's: everything it reserved).
        peak_held_bytes: the most bytes held at once.
        alloc_us_total: host time inside allocate and free calls.
        hits: gets answered from memory already held (0-byte requests included).
        misses: gets that made the device allocate, or failed.
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
        """The counters as a plain dict.

        Returns:
            Field name -> value.
        """
        return asdict(self)


class Strategy:
    """Base class: subclasses implement ``_get``/``_put``/``_close``; this keeps the books.

    Subclasses allocate with `_malloc` and free with `_free` (or `_free_after`), and order a
    buffer's reuse on another stream with `_hand_over` (which remembers each buffer's last stream):
    the helpers count, time and order.

    Args:
        device: the `labkit.gpu.device.Device` it allocates on; default the current one
            (`labkit.gpu.device.current`: this machine's GPU unless a simulated one is in use).
    """

    name = "strategy"

    def __init__(self, *, device: Device = None):
        self.device = device if device is not None else devices.current()
        if not isinstance(self.device, Device):
            raise InvalidSpec("device", device, "must be a labkit.gpu.device.Device")
        self.stats = StrategyStats()
        self.closed = False
        self._allocated = False  # an allocation in the get under way: it is a miss
        self._last_use: Dict[int, int] = {}  # buffer -> the stream its last call was queued on

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
        self._allocated = False
        t0 = self.device.clock_us()
        try:
            got = self._get(req)
        except Exception:
            self.stats.misses += 1
            raise
        finally:
            self.stats.get_put_us_total += self.device.clock_us() - t0
        if self._allocated:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return got

    def put(self, req: Request, ptr: int) -> None:
        """Hear that the call using ``ptr`` has been launched on ``req.stream_ptr``.

        Args:
            req: the call's request.
            ptr: the pointer `get` handed out.
        """
        t0 = self.device.clock_us()
        try:
            self._put(req, ptr)
        finally:
            self.stats.get_put_us_total += self.device.clock_us() - t0

    def close(self) -> None:
        """Free everything this strategy holds. Idempotent."""
        if not self.closed:
            self._close()
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- allocation helpers that keep the books --
    def _malloc(self, nbytes: int, what: str = "workspace") -> int:
        """cudaMalloc through the device, counted: the get under way is a miss.

        Args:
            nbytes: bytes.
            what: what it is for, named in an out-of-memory error.

        Returns:
            The device address (0 for 0 bytes).
        """
        t0 = self.device.clock_us()
        try:
            ptr = self.device.allocate(nbytes, what=what)
        finally:
            self.stats.alloc_us_total += self.device.clock_us() - t0
        self.stats.alloc_calls += 1
        self.stats.bytes_allocated += nbytes
        self._allocated = True
        self._held(+nbytes)
        return ptr

    def _free(self, ptr: int, nbytes: int, what: str = "") -> None:
        """cudaFree through the device, counted (cudaFree itself waits for the whole device).

        Args:
            ptr: an address from `_malloc` (nothing is freed for 0).
            nbytes: its size.
            what: what frees it, named when a capture refuses it (default the strategy's cudaFree).
        """
        self._refuse_in_capture(what or f"{self.name}'s cudaFree")
        t0 = self.device.clock_us()
        if ptr:
            self.device.free(ptr)
        self.stats.alloc_us_total += self.device.clock_us() - t0
        self.stats.free_calls += 1
        self._last_use.pop(ptr, None)
        self._held(-nbytes)

    def _free_after(self, ptr: int, nbytes: int, streams=(), what: str = "") -> None:
        """Free a buffer once the work queued so far on the streams that used it has run: an event
        recorded on each, the host waiting for those events alone, then `_free`.

        Args:
            ptr: an address from `_malloc`.
            nbytes: its size.
            streams: the handles of the streams that used it; default its last stream
                (`_hand_over`).
            what: what frees it, named when a capture refuses it.
        """
        self._refuse_in_capture(what or f"{self.name}'s cudaFree")
        if ptr:
            last = self._last_use.get(ptr)
            for s in streams or ([] if last is None else [last]):
                self.device.record_event(self.device.stream_of(s)).wait()
        self._free(ptr, nbytes, what)

    def _hand_over(self, ptr: int, stream_ptr: int) -> None:
        """Order a buffer's use by the call under way on ``stream_ptr`` after its last use on another
        stream: an event recorded there that this stream waits for on the device (the host goes on);
        nothing on the same stream, whose work runs in order. Inside a capture of ``stream_ptr``
        nothing waits: the graph's every launch does it (`order_launch`).

        Args:
            ptr: the buffer (nothing to order for 0).
            stream_ptr: the stream of the call it goes to now.
        """
        if not ptr:
            return
        if self.device.capturing() and self.device.capturing(stream := self.device.stream_of(stream_ptr)):
            self.device.order_at_launch(stream, self, ptr)
        else:
            self.order_launch([ptr], stream_ptr)

    def order_launch(self, ptrs, stream_ptr: int) -> None:
        """Make ``stream_ptr`` wait for each buffer's last use on another stream (one event per such
        stream), then note it as their last stream. `_hand_over` calls it for one call; a graph
        (`labkit.gpu.device.Graph`) for the buffers its calls use, before each launch.

        Args:
            ptrs: the buffers' device addresses.
            stream_ptr: the stream about to use them.
        """
        others = {self._last_use.get(p) for p in ptrs} - {None, stream_ptr}
        if others:
            to = self.device.stream_of(stream_ptr)
            for s in sorted(others):
                self.device.wait_event(to, self.device.record_event(self.device.stream_of(s)))
        for p in ptrs:
            self._last_use[p] = stream_ptr

    def _refuse_in_capture(self, what: str) -> None:
        """`labkit.NotCapturable` for ``what`` (a cudaFree or a host wait) while a capture is under way."""
        if self.device.capturing():
            raise NotCapturable(what, CUDAFREE_IN_CAPTURE)

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
        """The strategy's name, with its options where it has some.

        Returns:
            E.g. ``keyed_cache (256 MiB, key=full)``.
        """
        return self.name


def _bytes_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(name, value, "must be a whole number of bytes")
    return check_request(value, name)


class FixedArena(Strategy):
    """One buffer made at construction; every call uses its start. A call on another stream than
    the last one's is ordered after it (`Strategy._hand_over`).

    Args:
        size_bytes: the arena's size, in bytes.
        device: the device (default the current one).
    """

    name = "fixed_arena"

    def __init__(self, size_bytes: int = 1 << 30, *, device: Device = None):
        super().__init__(device=device)
        self.size_bytes = _bytes_arg("size_bytes", size_bytes)
        self.ptr = self._malloc(self.size_bytes, "fixed arena") if self.size_bytes else 0

    def _get(self, req):
        if req.nbytes > self.size_bytes:
            raise ArenaTooSmall(req.plan_name, req.nbytes, self.size_bytes)
        self._hand_over(self.ptr, req.stream_ptr)
        return self.ptr, self.size_bytes

    def _close(self):
        if self.ptr:
            self._free(self.ptr, self.size_bytes)
            self.ptr = 0

    def describe(self):
        """The strategy's label (`labels.label`): its name with the arena's size."""
        return label(self.name, size_bytes=self.size_bytes)


class MallocPerCall(Strategy):
    """Query the size, cudaMalloc it, run, cudaFree it: every call. cudaFree waits for the whole
    device before it frees, so the buffer is never freed under a kernel still using it."""

    name = "malloc_per_call"

    def _get(self, req):
        if req.nbytes == 0:
            return 0, 0
        self._refuse_in_capture("malloc_per_call (a cudaFree after every call)")
        return self._malloc(req.nbytes, "per-call workspace"), req.nbytes

    def _put(self, req, ptr):
        if ptr:
            self._free(ptr, req.nbytes)


class KeyedCache(Strategy):
    """One persistent workspace per key, least recently used evicted to stay within a byte budget.

    A request larger than the whole budget raises `ArenaTooSmall` (the budget is the arena). With
    ``key="dims_only"`` a hit can return a buffer smaller than the plan needs: the `Runner` catches
    that (it never hands cuDNN less than asked) and says the key is the bug. A hit from another
    stream is ordered after the buffer's last use (`Strategy._hand_over`); an evicted buffer is
    freed once its last stream's event has completed (`Strategy._free_after`). An eviction inside
    a CUDA graph capture raises `labkit.NotCapturable` (a budget the graph's keys fit in never
    evicts).

    Args:
        budget_bytes: the most bytes held, in bytes.
        key: "full" (`full_key`) or "dims_only" (`dims_only_key`).
        device: the device (default the current one).
    """

    name = "keyed_cache"

    def __init__(self, budget_bytes: int = 256 << 20, key: str = "full", *, device: Device = None):
        super().__init__(device=device)
        self.budget_bytes = _bytes_arg("budget_bytes", budget_bytes)
        if key not in KEYS:
            raise InvalidSpec("key", key, f"must be one of {', '.join(KEYS)}")
        self.key_name, self._key = key, KEYS[key]
        #: key -> (pointer, bytes)
        self._entries: "collections.OrderedDict[tuple, Tuple[int, int]]" = collections.OrderedDict()

    def _get(self, req):
        k = self._key(req)
        hit = self._entries.get(k)
        if hit is not None:
            self._entries.move_to_end(k)
        else:
            if req.nbytes > self.budget_bytes:
                raise ArenaTooSmall(req.plan_name, req.nbytes, self.budget_bytes)
            while self._entries and self.stats.held_bytes + req.nbytes > self.budget_bytes:
                _, (ptr, n) = self._entries.popitem(last=False)
                self._free_after(ptr, n, what="keyed_cache's eviction (a cudaFree)")
                self.stats.evictions += 1
            ptr = self._malloc(req.nbytes, "cached workspace") if req.nbytes else 0
            hit = self._entries[k] = (ptr, req.nbytes)
        self._hand_over(hit[0], req.stream_ptr)
        return hit

    def __len__(self):
        return len(self._entries)

    def _close(self):
        while self._entries:  # cudaFree waits for the device: nothing is freed under a kernel
            _, (ptr, n) = self._entries.popitem()
            self._free(ptr, n)

    def describe(self):
        """The strategy's label (`labels.label`): its name with its budget and its key."""
        return label(self.name, budget_bytes=self.budget_bytes, key=self.key_name)


class Scratchpad(Strategy):
    """oneDNN-style user scratchpad: a grow-only buffer per stream, or one for every stream.

    Growing frees the old buffer once an event on each stream that used it has completed
    (`Strategy._free_after`; inside a CUDA graph capture it raises `labkit.NotCapturable`). A
    stream's own buffer is ordered like any other (`Strategy._hand_over`: a graph captured on one
    stream and launched on another waits for it). With ``shared=True`` one buffer goes to every
    stream with nothing ordering them: calls on concurrent streams race on it (the hazard lesson
    06 shows).

    Args:
        shared: one buffer for every stream: concurrent streams then race on it.
        device: the device (default the current one).
    """

    def __init__(self, shared: bool = False, *, device: Device = None):
        super().__init__(device=device)
        self.shared = bool(shared)
        self.name = label("scratchpad", shared=self.shared)
        #: slot (0 shared, else the stream) -> (pointer, bytes, the streams that used it)
        self._buffers: Dict[int, Tuple[int, int, Dict[int, None]]] = {}

    def _get(self, req):
        slot = 0 if self.shared else req.stream_ptr
        ptr, size, users = self._buffers.get(slot, (0, 0, {}))
        if req.nbytes > size:
            if ptr:  # the old buffer goes once every stream that used it is past it
                self._free_after(ptr, size, list(users), what=f"{self.name}'s growth (a cudaFree)")
                del self._buffers[slot]  # a failed malloc below leaves no freed buffer behind
            ptr, size, users = self._malloc(req.nbytes, "scratchpad"), req.nbytes, {}
        users[req.stream_ptr] = None
        self._buffers[slot] = (ptr, size, users)
        if not self.shared:
            self._hand_over(ptr, req.stream_ptr)
        return ptr, size

    def _close(self):
        for ptr, size, _ in self._buffers.values():  # cudaFree waits for the device
            self._free(ptr, size)
        self._buffers.clear()


class _PoolStrategy(Strategy):
    """Shared logic of the pools: allocate from the device's pool on the call's stream, hand the
    block back on put (the pool reuses it in that stream's order).

    Args:
        kind: the pool, "caching" or "async" (`labkit.gpu.device.Pool`).
        device: the device (default the current one).
    """

    def __init__(self, kind: str, *, device: Device = None):
        super().__init__(device=device)
        self.pool = self.device.pool(kind)

    def _get(self, req):
        if req.nbytes == 0:
            return 0, 0
        stream = self.device.stream_of(req.stream_ptr)
        before = self.pool.held_bytes()
        t0 = self.device.clock_us()
        try:
            ptr = self.pool.allocate(req.nbytes, stream=stream)
        finally:
            self.stats.alloc_us_total += self.device.clock_us() - t0
        self.stats.alloc_calls += 1
        self.stats.bytes_allocated += req.nbytes
        after = self.pool.held_bytes()
        self._allocated = after > before  # the pool reserved more device memory: a miss
        self.stats.held_bytes = after
        self.stats.peak_held_bytes = max(self.stats.peak_held_bytes, after)
        return ptr, req.nbytes

    def _put(self, req, ptr):
        if ptr:
            t0 = self.device.clock_us()
            self.pool.free(ptr, stream=self.device.stream_of(req.stream_ptr))
            self.stats.alloc_us_total += self.device.clock_us() - t0
            self.stats.free_calls += 1

    def _close(self):
        self.device.synchronize()  # not a hot path: every block's last use, on whichever stream
        self.pool.release()
        self.stats.held_bytes = int(self.pool.held_bytes())


class CupyPool(_PoolStrategy):
    """CuPy's caching allocator (`cupy.cuda.MemoryPool`, a private instance): cudaMalloc on a miss,
    then blocks are reused on the stream that freed them; nothing goes back to the driver until
    ``close()``.

    Args:
        device: the device (default the current one).
    """

    name = "cupy_pool"

    def __init__(self, *, device: Device = None):
        super().__init__("caching", device=device)


class AsyncPool(_PoolStrategy):
    """Stream-ordered allocation (`cupy.cuda.MemoryAsyncPool`: cudaMallocAsync/cudaFreeAsync on the
    call's stream); the driver's pool keeps freed memory for reuse.

    Args:
        device: the device (default the current one).
    """

    name = "async_pool"

    def __init__(self, *, device: Device = None):
        super().__init__("async", device=device)


class Preallocated(Strategy):
    """No management at all: one exact-size buffer per key, kept forever. The baseline against
    which the other strategies' overhead is measured. A key's buffer used from another stream is
    ordered after its last use (`Strategy._hand_over`).

    Args:
        device: the device (default the current one).
    """

    name = "preallocated"

    def __init__(self, *, device: Device = None):
        super().__init__(device=device)
        #: key -> (pointer, bytes)
        self._entries: Dict[tuple, Tuple[int, int]] = {}

    def _get(self, req):
        k = full_key(req)
        hit = self._entries.get(k)
        if hit is None:
            ptr = self._malloc(req.nbytes, "preallocated workspace") if req.nbytes else 0
            hit = self._entries[k] = (ptr, req.nbytes)
        self._hand_over(hit[0], req.stream_ptr)
        return hit

    def _close(self):
        for ptr, n in self._entries.values():  # cudaFree waits for the device
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
