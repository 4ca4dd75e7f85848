"""The two pools a simulated GPU offers (`labkit.gpu.device.Pool`): CuPy's caching ``MemoryPool``
and the driver's stream-ordered pool behind ``cudaMallocAsync``. Rules 10 and 11 of
`labkit.simgpu.device` say what each models and which recorded numbers they rest on. Bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from ..errors import LabkitError
from ..gpu.device import Pool
from .recorded import ASYNC_CHUNK
from .timeline import MARK, Op

#: CuPy rounds every request to this many bytes (strategies.csv: cupy_pool's peak_bytes 25,764,352
#: for a 25,763,987 B workspace)
ROUND = 512


def _rounded(nbytes: int) -> int:
    return -(-nbytes // ROUND) * ROUND


class Freed:
    """When an async pool's free ran on its stream.

    Args:
        at: the GPU time it ran, microseconds; None until it has.
    """

    __slots__ = ("at",)

    def __init__(self, at: Optional[float] = None):
        self.at = at


@dataclass(eq=False)
class Block:
    """A piece of a pool's chunk: ``[ptr, ptr + nbytes)``; free or in use; the stream it was last
    allocated or freed on; for the async pool, when its free ran (`Freed`: every stream may take it
    from then).

    Attributes:
        ptr: its address.
        nbytes: its size, bytes.
        chunk: the address of the chunk it was carved from.
        stream: the handle of the stream it was last allocated or freed on.
        used: whether it is handed out.
        freed: when its free ran (the async pool's; never handed out: at 0).
    """

    ptr: int
    nbytes: int
    chunk: int
    stream: int
    used: bool = True
    freed: Freed = field(default_factory=lambda: Freed(0.0))

    @property
    def ready(self) -> bool:
        """Free for every stream: its free has run (or it was never handed out)."""
        return self.freed.at is not None


class _SimPool(Pool):
    """Blocks carved from chunks the pool reserved; best fit, split, merged back when freed."""

    def __init__(self, device, kind: str):
        self.device, self.kind = device, kind
        self.chunks: Dict[int, int] = {}  # chunk address -> bytes
        self.blocks: Dict[int, Block] = {}

    def held_bytes(self) -> int:
        """Bytes reserved from the device, in use or cached."""
        return sum(self.chunks.values())

    def in_use(self, ptr: int) -> Optional[Block]:
        """The block in use that contains ``ptr``, or None."""
        for b in self.blocks.values():
            if b.used and b.ptr <= ptr < b.ptr + b.nbytes:
                return b
        return None

    def _fit(self, size: int, usable) -> Optional[Block]:
        free = [b for b in self.blocks.values() if not b.used and b.nbytes >= size and usable(b)]
        return min(free, key=lambda b: (b.nbytes, b.ptr), default=None)

    def _take(self, b: Block, size: int, stream: int) -> int:
        if b.nbytes > size:  # the rest stays free, in the same chunk, as it was
            rest = Block(b.ptr + size, b.nbytes - size, b.chunk, b.stream, False, b.freed)
            self.blocks[rest.ptr] = rest
        b.nbytes, b.used, b.stream = size, True, stream
        return b.ptr

    def _merge(self, b: Block, alike) -> None:
        """Merge ``b`` with the free neighbours of its chunk that ``alike(b, other)`` allows."""
        for other in sorted(self.blocks.values(), key=lambda x: x.ptr):
            if other is b or other.used or other.chunk != b.chunk or not alike(b, other):
                continue
            if other.ptr == b.ptr + b.nbytes or other.ptr + other.nbytes == b.ptr:
                lo, hi = (b, other) if b.ptr < other.ptr else (other, b)
                lo.nbytes += hi.nbytes
                del self.blocks[hi.ptr]
                b = lo

    def _block(self, ptr: int) -> Block:
        b = self.blocks.get(ptr)
        if b is None or not b.used:
            raise LabkitError(
                f"{self.kind} pool: 0x{ptr:x} is not a block in use (a free it never allocated)"
            )
        return b

    def release(self) -> None:
        """Give every chunk with nothing in use back to the device."""
        for chunk, size in list(self.chunks.items()):
            if not any(b.used for b in self.blocks.values() if b.chunk == chunk):
                self._release_chunk(chunk, size)

    def _release_chunk(self, chunk: int, size: int) -> None:
        for p in [p for p, b in self.blocks.items() if b.chunk == chunk]:
            del self.blocks[p]
        del self.chunks[chunk]


class CachingPool(_SimPool):
    """CuPy's ``MemoryPool``: a miss cudaMallocs the rounded size; a freed block waits on the free
    list of the stream it was allocated on, for later requests on that stream; `release` cudaFrees
    the chunks with nothing in use (``free_all_blocks``).

    Args:
        device: the `labkit.simgpu.SimDevice` whose memory it takes.
    """

    def __init__(self, device):
        super().__init__(device, "caching")

    def allocate(self, nbytes: int, *, stream) -> int:
        """A block for work on ``stream`` (rule 9)."""
        self.device.counts["caching_pool_allocate"] += 1
        self.device.charge("caching_pool")
        size = _rounded(nbytes)
        b = self._fit(size, lambda b: b.stream == stream.ptr)
        if b is None:
            chunk = self.device.allocations.malloc_chunk(size, "caching pool")
            self.chunks[chunk] = size
            b = self.blocks[chunk] = Block(chunk, size, chunk, stream.ptr, False)
        return self._take(b, size, stream.ptr)

    def free(self, ptr: int, *, stream) -> None:
        """Back to the free list of the stream it was allocated on (its cost is in the request's)."""
        self.device.counts["caching_pool_free"] += 1
        b = self._block(ptr)
        b.used = False
        self._merge(b, lambda a, o: True)

    def _release_chunk(self, chunk: int, size: int) -> None:
        self.device.allocations.free_chunk(chunk)
        super()._release_chunk(chunk, size)


class AsyncPool(_SimPool):
    """The driver's stream-ordered pool (rule 10): ``cudaFreeAsync`` runs in its stream's order; its
    block is reused at once by that stream, by another once the free has run; the pool grows by
    whole `ASYNC_CHUNK` s rather than make a stream wait for another's free, and keeps its chunks
    until `release` (``free_all_blocks``: the frees waited for, then a trim). Inside a capture a
    request is a graph memory node (rule 13).

    Args:
        device: the `labkit.simgpu.SimDevice` whose memory it takes.
    """

    def __init__(self, device):
        super().__init__(device, "async")

    def allocate(self, nbytes: int, *, stream) -> int:
        """A block, in ``stream``'s order (rule 10)."""
        self.device.counts["async_pool_allocate"] += 1
        size = _rounded(nbytes)
        if self.device.capturing(stream):  # a graph memory node: the graph's memory, not the pool's
            return self.device.memory.graph_alloc(size)
        self.device.timeline.advance(self.device.host_now)  # the frees that have run by now
        for b in [b for b in self.blocks.values() if not b.used and b.ready]:
            if self.blocks.get(b.ptr) is b:  # (not merged into a neighbour already)
                self._merge(b, lambda a, o: o.ready)
        b = self._fit(size, lambda b: b.ready or b.stream == stream.ptr)
        if b is None:
            grow = -(-size // ASYNC_CHUNK) * ASYNC_CHUNK
            self.device.charge("async_pool_grow", grow)
            chunk = self.device.memory.reserve(grow, "async pool")
            self.chunks[chunk] = grow
            b = self.blocks[chunk] = Block(chunk, grow, chunk, stream.ptr, False)
        else:
            self.device.charge("async_pool")
        return self._take(b, size, stream.ptr)

    def free(self, ptr: int, *, stream) -> None:
        """``cudaFreeAsync`` on ``stream``: the block is free for every stream once the stream's work
        so far has run."""
        self.device.counts["async_pool_free"] += 1
        if self.device.capturing(stream) and ptr in self.device.memory.graph:
            self.device.memory.graph_free(ptr)  # a graph's free node: the memory stays the graph's
            return
        b = self._block(ptr)
        freed = Freed()
        b.used, b.stream, b.freed = False, stream.ptr, freed
        dev = self.device
        dev.queue(stream, Op(MARK, dev.host_now, done=lambda t: setattr(freed, "at", t)))
        clock = dev.clocks.stream.get(stream.ptr, {})  # what the free comes after
        dev.sanitizer.check_release(b.ptr, b.nbytes, stream.ptr, clock, dev.host_now)

    def release(self) -> None:
        """Wait for the frees queued so far, then give back the chunks with nothing in use (cost: the
        calibration's, else the clock stops here)."""
        self.device.counts["async_pool_release"] += 1
        try:
            self.device.host_waits(lambda: all(b.ready for b in self.blocks.values() if not b.used), {})
            self.device.charge("async_pool_release")
        finally:
            super().release()

    def _release_chunk(self, chunk: int, size: int) -> None:
        super()._release_chunk(chunk, size)
        self.device.memory.unreserve(chunk, self.device.host_now)
