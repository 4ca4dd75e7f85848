"""Device memory: allocations that turn out-of-memory into `OutOfMemory`, guarded (poisoned)
buffers that catch out-of-bounds writes, and snapshots of what the device and CuPy's pool hold.

All sizes are bytes. Needs CuPy (live mode); imported lazily by the modules that use it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cupy
import numpy

from ...errors import LabkitError, OutOfMemory
from .sizes import check_request

#: guard band on each side of a guarded buffer
GUARD_BYTES = 4096
GUARD_PATTERN = 0xA5
#: bytes of random poison drawn on the host; a larger body repeats them
POISON_BLOCK_BYTES = 1 << 20


def free_bytes() -> int:
    """Memory free on the current device now (cudaMemGetInfo).

    Returns:
        Bytes.
    """
    return int(cupy.cuda.runtime.memGetInfo()[0])


def _is_oom(exc: Exception) -> bool:
    if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
        return True
    status = getattr(exc, "status", None)
    return status == 2  # cudaErrorMemoryAllocation


def alloc(nbytes: int, what: str) -> cupy.ndarray:
    """A uint8 CuPy array from the current pool.

    On out-of-memory, the pool's cached blocks are released and the allocation tried once more.

    Args:
        nbytes: its size, in bytes.
        what: what it is for, named in the error.

    Returns:
        The array; `OutOfMemory` when it does not fit (nothing is left allocated).
    """
    nbytes = check_request(nbytes, what)
    for _ in range(2):
        try:
            return cupy.empty(nbytes, dtype=cupy.uint8)
        except Exception as exc:
            if not _is_oom(exc):
                raise
        cupy.get_default_memory_pool().free_all_blocks()  # release cached blocks, then retry once
    raise OutOfMemory(what, nbytes, free_bytes())


def empty(shape, dtype, what: str) -> cupy.ndarray:
    """`cupy.empty` with the out-of-memory handling of `alloc`.

    Args:
        shape: the array's shape.
        dtype: its dtype.
        what: what it is for, named in the error.

    Returns:
        The uninitialised array.
    """
    nbytes = int(cupy.dtype(dtype).itemsize) * int(_prod(shape))
    return alloc(nbytes, what).view(dtype).reshape(shape)


def raw_malloc(nbytes: int, what: str) -> int:
    """cudaMalloc directly, outside CuPy's pool.

    Args:
        nbytes: the size, in bytes.
        what: what it is for, named in the error.

    Returns:
        The device pointer (0 for 0 bytes); `OutOfMemory` on failure.
    """
    nbytes = check_request(nbytes, what)
    if nbytes == 0:
        return 0
    try:
        return int(cupy.cuda.runtime.malloc(nbytes))
    except Exception as exc:
        if _is_oom(exc) or "memory" in str(exc).lower():
            raise OutOfMemory(what, nbytes, free_bytes()) from None
        raise


def raw_free(ptr: int) -> None:
    """cudaFree a pointer from `raw_malloc` (nothing for 0).

    Args:
        ptr: the device pointer.
    """
    if ptr:
        cupy.cuda.runtime.free(ptr)


@functools.lru_cache(maxsize=4)
def _poison_block(seed: int, device: int) -> cupy.ndarray:
    """The seeded random bytes a `GuardedBuffer` is poisoned with (every 7th 0xFF: NaN in
    fp16/bf16/fp32), `POISON_BLOCK_BYTES` of them, drawn by NumPy and copied to the device once per
    seed: checking every plan of a graph poisons a workspace per plan, and a copy from the host's
    pageable memory would wait for the stream each time. A smaller buffer takes the block's first
    bytes (the bytes NumPy draws for that size: its draws of one seed share their prefix). Callers
    only read it; ``device`` is the current device's number, on which it is made."""
    block = numpy.random.default_rng(seed).integers(0, 256, POISON_BLOCK_BYTES, dtype=numpy.uint8)
    block[::7] = 0xFF
    on_device = alloc(POISON_BLOCK_BYTES, "workspace poison")
    on_device.set(block)
    cupy.cuda.get_current_stream().synchronize()  # there before any stream copies from it
    return on_device


class GuardedBuffer:
    """Device memory with guard bands either side, filled with a known pattern.

    ``poison()`` fills the body with random bytes and NaN patterns, so a plan that reads workspace
    it never wrote gets garbage, not zeros. The bytes are a seeded block of up to
    `POISON_BLOCK_BYTES` drawn by NumPy and repeated by device copies, so no kernel is compiled for
    it (``cupy.random``'s randint and cast would be two more NVRTC compiles at a first use).
    ``check()`` raises `LabkitError` if anything wrote outside the body. ``ptr`` is the body's address.

    Args:
        nbytes: the body's size, in bytes.
        what: what it is for, named in errors.
        seed: the first poison's seed; each `poison` uses the next.
    """

    def __init__(self, nbytes: int, what: str = "guarded workspace", *, seed: int = 0):
        self.nbytes = check_request(nbytes, what)
        self._raw = alloc(self.nbytes + 2 * GUARD_BYTES, what)
        self._seed = seed
        self.poison()

    @property
    def ptr(self) -> int:
        """The body's device address."""
        return int(self._raw.data.ptr) + GUARD_BYTES

    @property
    def body(self) -> cupy.ndarray:
        """The body, as a uint8 CuPy array."""
        return self._raw[GUARD_BYTES : GUARD_BYTES + self.nbytes]

    def poison(self) -> None:
        """Re-arm the guards and fill the body with seeded random bytes (every 7th 0xFF: a NaN)."""
        self._raw[:GUARD_BYTES] = GUARD_PATTERN
        self._raw[GUARD_BYTES + self.nbytes :] = GUARD_PATTERN
        if self.nbytes:
            stream = cupy.cuda.get_current_stream().ptr
            d2d = cupy.cuda.runtime.memcpyDeviceToDevice
            done = min(self.nbytes, POISON_BLOCK_BYTES)
            block = _poison_block(self._seed, cupy.cuda.Device().id)
            cupy.cuda.runtime.memcpyAsync(self.ptr, int(block.data.ptr), done, d2d, stream)
            while done < self.nbytes:  # double the poisoned prefix: a few device-to-device copies
                n = min(done, self.nbytes - done)
                cupy.cuda.runtime.memcpyAsync(self.ptr + done, self.ptr, n, d2d, stream)
                done += n
            self._seed += 1

    def copy_guards(self, host: numpy.ndarray) -> None:
        """Copy both guard bands into ``host``, on the current stream, without waiting for it.

        Read ``host`` with `guard_damage` once the stream is synchronised: a caller that checks many
        plans reads every plan's bands after one wait (`labkit.gpu.cudnn.reference_runs.judge`).

        Args:
            host: ``2 * GUARD_BYTES`` uint8 bytes of page-locked host memory
                (`pinned`), kept alive until the stream has run the copies.
        """
        if host.dtype != numpy.uint8 or host.size != 2 * GUARD_BYTES:
            got = f"{host.size} of {host.dtype}"
            raise LabkitError(f"a guard copy takes {2 * GUARD_BYTES} uint8 bytes, not {got}")
        base = int(self._raw.data.ptr)
        copy_to_host_async(host[:GUARD_BYTES], base)
        copy_to_host_async(host[GUARD_BYTES:], base + GUARD_BYTES + self.nbytes)

    def check(self) -> None:
        """Raise `LabkitError` if anything wrote into the guard bands (waits for the current stream)."""
        # read on the host (8 KiB): a full reduction of a bool array on the GPU is one CuPy
        # compiles with CUB, 3.5 s at its first use on the H200 (docs/findings.md)
        host = pinned(2 * GUARD_BYTES)
        self.copy_guards(host)
        cupy.cuda.get_current_stream().synchronize()
        damage = guard_damage(host, self.nbytes)
        if damage:
            raise LabkitError(damage)

    def free(self) -> None:
        """Drop the buffer's memory (back to CuPy's pool)."""
        self._raw = None


def pinned(nbytes: int, dtype=numpy.uint8) -> numpy.ndarray:
    """A NumPy array in page-locked host memory from CuPy's pinned pool, which an asynchronous copy
    from the device can write (``cupyx.empty_pinned`` without importing cupyx).

    Args:
        nbytes: its size, in bytes.
        dtype: its dtype; ``nbytes`` must be a multiple of its item size.

    Returns:
        A 1-D array that keeps its memory alive.
    """
    dtype = numpy.dtype(dtype)
    return numpy.ndarray((nbytes // dtype.itemsize,), dtype, buffer=cupy.cuda.alloc_pinned_memory(nbytes))


def copy_to_host_async(host: numpy.ndarray, device_ptr: int) -> None:
    """Copy ``host.nbytes`` bytes from the device into ``host``, on the current stream, without
    waiting for it (cudaMemcpyAsync). Read ``host`` once the stream is synchronised.

    Args:
        host: a contiguous array in page-locked host memory (`pinned`), kept alive until the
            stream has run the copy.
        device_ptr: the device address to copy from.
    """
    if not host.flags.c_contiguous:
        raise LabkitError("a copy to the host takes a contiguous array")
    cupy.cuda.runtime.memcpyAsync(
        host.ctypes.data,
        int(device_ptr),
        host.nbytes,
        cupy.cuda.runtime.memcpyDeviceToHost,
        cupy.cuda.get_current_stream().ptr,
    )


def guard_damage(bands: numpy.ndarray, nbytes: int) -> str:
    """What was written into a `GuardedBuffer`'s guard bands, from their copy
    (`GuardedBuffer.copy_guards`).

    Args:
        bands: the two bands, ``2 * GUARD_BYTES`` uint8 bytes, on the host.
        nbytes: the buffer body's size, in bytes (named in the sentence).

    Returns:
        A sentence naming the bytes overwritten before and after the body; "" when none was.
    """
    lo = int(numpy.count_nonzero(bands[:GUARD_BYTES] != GUARD_PATTERN))
    hi = int(numpy.count_nonzero(bands[GUARD_BYTES:] != GUARD_PATTERN))
    if not (lo or hi):
        return ""
    return f"workspace guard bands overwritten: {lo} B before and {hi} B after a {nbytes:,} B workspace"


@dataclass(frozen=True)
class MemorySnapshot:
    """What the device and CuPy's default pool hold at one moment, in bytes.

    Attributes:
        device_free_bytes: free on the device (cudaMemGetInfo).
        device_total_bytes: the device's total.
        pool_used_bytes: in use from CuPy's default pool.
        pool_held_bytes: held by the pool (in use or cached).
    """

    device_free_bytes: int
    device_total_bytes: int
    pool_used_bytes: int
    pool_held_bytes: int

    @property
    def device_used_bytes(self) -> int:
        """Bytes in use on the device, by any process."""
        return self.device_total_bytes - self.device_free_bytes


def snapshot() -> MemorySnapshot:
    """What the device and CuPy's default pool hold now.

    Returns:
        A `MemorySnapshot`.
    """
    free, total = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool()
    return MemorySnapshot(int(free), int(total), int(pool.used_bytes()), int(pool.total_bytes()))


def _prod(shape) -> int:
    n = 1
    for s in shape if isinstance(shape, (tuple, list)) else (shape,):
        n *= int(s)
    return n
