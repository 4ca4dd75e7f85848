"""The seam on this machine's GPU: `CudaDevice`, each call one CUDA runtime call through CuPy.

Importing this module imports nothing of CuPy; the first call does (``# heavy`` marks each
import). cudaMalloc and cudaFree go through `labkit.gpu.buffers.memory` (an out-of-memory error becomes
`labkit.OutOfMemory`), streams and events are CuPy's, the pools are CuPy's ``MemoryPool`` (a
private instance) and ``MemoryAsyncPool`` (the device's stream-ordered pool), and convolutions are
labkit's cuDNN graphs (`labkit.gpu.cudnn`). Sizes in bytes, times in microseconds.
"""

from __future__ import annotations

import time
import warnings
from typing import Dict

from ...errors import InvalidSpec, NotCapturable, OutOfMemory
from .base import CUDAFREE_IN_CAPTURE, POOL_KINDS, Device, Event, Pool


class CudaEvent(Event):
    """A CuPy event recorded on a stream.

    Args:
        stream: the CuPy stream it is recorded on now.
    """

    def __init__(self, stream):
        import cupy  # heavy: CuPy, imported on first use

        self.event = cupy.cuda.Event()
        self.event.record(stream)

    def done(self) -> bool:
        """cudaEventQuery. Returns: whether the work before the event has run."""
        return bool(self.event.done)

    def wait(self) -> None:
        """cudaEventSynchronize: the host waits for this event only."""
        self.event.synchronize()


class CudaPool(Pool):
    """CuPy's ``MemoryPool`` ("caching") or ``MemoryAsyncPool`` ("async") behind the `Pool` calls.

    Each block lives in ``_live`` until `free`; dropping it there hands it back: a caching block
    to the free list of the stream it was allocated on, an async block by ``cudaFreeAsync`` on
    that stream (CuPy frees it on the stream it was allocated on).

    Args:
        kind: "caching" or "async".
        device: the `CudaDevice` (its counts).
    """

    def __init__(self, kind: str, device: "CudaDevice"):
        import cupy  # heavy: CuPy, imported on first use

        self.kind, self._device = kind, device
        self._pool = cupy.cuda.MemoryPool() if kind == "caching" else cupy.cuda.MemoryAsyncPool()
        self._live: Dict[int, object] = {}

    def allocate(self, nbytes: int, *, stream) -> int:
        """``pool.malloc`` on ``stream``.

        Args:
            nbytes: bytes wanted.
            stream: a CuPy stream.

        Returns:
            The address; `labkit.OutOfMemory` when the device has no room.
        """
        import cupy  # heavy: CuPy, imported on first use

        from ..buffers import memory  # heavy: imports CuPy

        self._device.counts[f"{self.kind}_pool_allocate"] += 1
        try:
            with stream:  # both pools allocate on the current stream
                mem = self._pool.malloc(nbytes)
        except cupy.cuda.memory.OutOfMemoryError:
            raise OutOfMemory(f"{self.kind} pool workspace", nbytes, memory.free_bytes()) from None
        self._live[int(mem.ptr)] = mem
        return int(mem.ptr)

    def free(self, ptr: int, *, stream) -> None:
        """Drop the block: it returns to the pool, in the order of the stream it was allocated on.

        Args:
            ptr: an address from `allocate`.
            stream: the stream that used it last.
        """
        self._device.counts[f"{self.kind}_pool_free"] += 1
        with stream:
            del self._live[ptr]

    def held_bytes(self) -> int:
        """The pool's device memory, in use or cached (``total_bytes``)."""
        return int(self._pool.total_bytes())

    def release(self) -> None:
        """``free_all_blocks``: cached memory back to the driver (the async pool waits for the
        current stream first)."""
        self._device.counts[f"{self.kind}_pool_release"] += 1
        self._pool.free_all_blocks()


class CudaDevice(Device):
    """This machine's CUDA GPU (the current one), through CuPy and labkit's cuDNN graphs."""

    def __init__(self):
        super().__init__()
        self._external: Dict[int, object] = {}

    @property
    def name(self) -> str:
        """The GPU's name, as the CUDA runtime gives it."""
        import cupy  # heavy: CuPy, imported on first use

        return str(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode())

    @property
    def provenance(self) -> dict:
        """``mode`` "live", ``gpu``, and ``label`` "measured on <GPU>"."""
        return {"mode": "live", "gpu": self.name, "label": f"measured on {self.name}"}

    def allocate(self, nbytes: int, *, stream=None, what: str = "workspace") -> int:
        """cudaMalloc (`labkit.gpu.buffers.memory.raw_malloc`)."""
        from ..buffers import memory  # heavy: imports CuPy

        self.counts["allocate"] += 1
        return memory.raw_malloc(nbytes, what)

    def free(self, ptr: int) -> None:
        """cudaFree (`labkit.gpu.buffers.memory.raw_free`); `labkit.NotCapturable` while a capture is under
        way."""
        from ..buffers import memory  # heavy: imports CuPy

        if self.capturing():
            raise NotCapturable("cudaFree", CUDAFREE_IN_CAPTURE)
        self.counts["free"] += 1
        memory.raw_free(ptr)

    def pool(self, kind: str) -> Pool:
        """A new `CudaPool`."""
        if kind not in POOL_KINDS:
            raise InvalidSpec("pool", kind, f"must be one of {', '.join(POOL_KINDS)}")
        return CudaPool(kind, self)

    def free_bytes(self) -> int:
        """cudaMemGetInfo's free bytes."""
        from ..buffers import memory  # heavy: imports CuPy

        return memory.free_bytes()

    def stream(self):
        """A new non-blocking ``cupy.cuda.Stream``."""
        import cupy  # heavy: CuPy, imported on first use

        return cupy.cuda.Stream(non_blocking=True)

    def stream_of(self, ptr: int):
        """A CuPy stream object for a raw stream handle (made once per handle; 0: the null stream)."""
        import cupy  # heavy: CuPy, imported on first use

        if not ptr:
            return cupy.cuda.Stream.null
        s = self._external.get(ptr)
        if s is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                s = self._external[ptr] = cupy.cuda.ExternalStream(ptr)
        return s

    def record_event(self, stream) -> Event:
        """cudaEventRecord on ``stream``."""
        self.counts["record_event"] += 1
        return CudaEvent(stream)

    def wait_event(self, stream, event: Event) -> None:
        """cudaStreamWaitEvent."""
        self.counts["wait_event"] += 1
        stream.wait_event(event.event)

    def synchronize(self) -> None:
        """cudaDeviceSynchronize."""
        import cupy  # heavy: CuPy, imported on first use

        self.counts["synchronize"] += 1
        cupy.cuda.runtime.deviceSynchronize()

    def clock_us(self) -> float:
        """``time.perf_counter`` in microseconds."""
        return time.perf_counter() * 1e6

    def elapsed_us(self, start: Event, end: Event) -> float:
        """cudaEventElapsedTime, in microseconds."""
        import cupy  # heavy: CuPy, imported on first use

        return float(cupy.cuda.get_elapsed_time(start.event, end.event)) * 1000.0

    def graph(self, spec, epilogue: str = "none"):
        """`labkit.gpu.cudnn.graph_cache.get_graph`: built, every plan checked against float64."""
        from ..cudnn import graph_cache  # heavy: imports CuPy

        return graph_cache.get_graph(spec, epilogue)

    def operands(self, spec, epilogue: str = "none", *, seed: int = 0):
        """`labkit.gpu.cudnn.operands.Operands`."""
        from ..cudnn import operands  # heavy: imports CuPy

        return operands.Operands(spec, epilogue, seed=seed)

    def prepare_stream(self, stream) -> None:
        """The stream's cuDNN handle (`labkit.gpu.cudnn.frontend.handle_for`)."""
        from ..cudnn import frontend  # heavy: imports CuPy

        frontend.handle_for(stream)

    def release_stream(self, stream) -> None:
        """Destroy the stream's cuDNN handle."""
        from ..cudnn import frontend  # heavy: imports CuPy

        frontend.release_handle(stream)

    def release_cached(self) -> None:
        """CuPy's default pool's cached blocks back to the driver, and what the device's
        stream-ordered pool keeps that nothing uses (``MemoryAsyncPool.free_all_blocks``: a trim)."""
        import cupy  # heavy: CuPy, imported on first use

        cupy.get_default_memory_pool().free_all_blocks()
        cupy.cuda.MemoryAsyncPool().free_all_blocks()

    def _capture_native(self, fn, stream):
        """`labkit.gpu.timing.measure.capture` of one ``fn()``: a ``cupy.cuda.Graph``."""
        from ..timing import measure  # heavy: imports CuPy

        return measure.capture(fn, stream, 1)
