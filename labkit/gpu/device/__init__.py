"""The device seam: the few calls a workspace strategy and the `Runner` make of a GPU, real or simulated.

A strategy reaches its GPU through these calls only:

======================================  ==========================================================
``device.allocate(nbytes, what=...)``   cudaMalloc: device memory of the caller's own (an int address)
``device.free(ptr)``                    cudaFree (CUDA waits for the whole device before it frees)
``device.pool("caching" | "async")``    a `Pool`: CuPy's ``MemoryPool`` or the driver's stream-ordered
                                        pool (``cudaMallocAsync``/``cudaFreeAsync``)
``device.stream()``                     a new non-blocking stream (``.ptr``, ``.synchronize()``)
``device.stream_of(ptr)``               the stream behind a request's ``stream_ptr``
``device.record_event(stream)``         an `Event`: complete once the work queued on ``stream`` so
                                        far has run (``done()``: cudaEventQuery; ``wait()``: the
                                        host waits for that work only, cudaEventSynchronize)
``device.wait_event(stream, event)``    cudaStreamWaitEvent: later work on ``stream`` waits for
                                        ``event``; the host does not wait
``device.synchronize()``                cudaDeviceSynchronize: the host waits for every stream
======================================  ==========================================================

and the `Runner` adds what running a convolution needs: ``graph(spec, epilogue)`` (its plans and
``bind``), ``operands``, ``capture`` (a CUDA graph of calls, a `Graph`), ``clock_us`` (the host's
clock) and ``elapsed_us`` (between two events). Every call through the seam is counted in
``device.counts``.

**Inside a capture** no event recorded outside it may be waited for (CUDA invalidates the capture)
and no cudaFree or host wait may run. While ``capture`` runs, ``device.capturing(stream)`` says so:
a strategy then notes a buffer other streams use with ``device.order_at_launch`` (each launch of
the graph first makes its stream wait for the buffer's last use, outside the capture), and what
cannot be captured (malloc_per_call's cudaFree, an eviction, a scratchpad's growth) raises
`labkit.NotCapturable`, on this GPU and on the simulated one alike.

Two devices implement it: `labkit.gpu.device.cuda.CudaDevice` (CuPy on this machine's GPU, the
default) and `labkit.simgpu.SimDevice` (a GPU simulated from a recording). A strategy takes the
device current when it is made (`current`; `use` makes another current), so the same code,
a learner's own `Strategy` subclass included, runs on either. Sizes in bytes, times in microseconds.

This folder holds the seam whole: its interface (`base`), this GPU's implementation (`cuda`) and
the device in use (`current`, `use`). It sits above `cudnn` and `timing`, because this GPU answers
``graph``, ``operands`` and ``capture`` with labkit's cuDNN graphs and CUDA-graph capture, and
below `workspaces`, whose strategies and `Runner` reach the GPU through it; what a device buffer
is (allocations, storage formats) is `labkit.gpu.buffers`, below them all.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

from ...errors import InvalidSpec
from .base import POOL_KINDS, Device, Event, Graph, Pool  # noqa: F401  (the seam's names)
from .cuda import CudaDevice

_current: contextvars.ContextVar = contextvars.ContextVar("labkit_device", default=None)
_cuda: Optional[Device] = None


def current() -> Device:
    """The device strategies and runners use now: the one `use` made current, else this machine's GPU.

    Returns:
        The `Device` (`CudaDevice` unless `use` says otherwise; it needs CuPy at its first call).
    """
    global _cuda
    dev = _current.get()
    if dev is not None:
        return dev
    if _cuda is None:
        _cuda = CudaDevice()
    return _cuda


@contextlib.contextmanager
def use(device: Device) -> Iterator[Device]:
    """Make ``device`` current inside a ``with`` block.

    Args:
        device: a `Device` (e.g. a `labkit.simgpu.SimDevice`).

    Yields:
        The device.
    """
    if not isinstance(device, Device):
        raise InvalidSpec("device", device, "must be a labkit.gpu.device.Device")
    token = _current.set(device)
    try:
        yield device
    finally:
        _current.reset(token)
