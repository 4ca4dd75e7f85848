"""The seam's interface: `Device`, `Event` and `Pool`, which `labkit.gpu.device.cuda` (CuPy) and
`labkit.simgpu` (a simulated GPU) implement. What each call means: `labkit.gpu.device`."""

from __future__ import annotations

import collections
from typing import Callable

from ...errors import InvalidSpec

POOL_KINDS = ("caching", "async")
#: requests of this size or more are refused outright (no GPU has a terabyte)
ABSURD_BYTES = 1 << 40


def check_request(nbytes, what: str) -> int:
    """A byte count, checked: a whole number, >= 0 and < 1 TiB.

    Args:
        nbytes: the count.
        what: what the memory is for, named in the error.

    Returns:
        ``nbytes`` as an int; `InvalidSpec` otherwise.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int,)) and not hasattr(nbytes, "__index__"):
        raise InvalidSpec(f"{what} bytes", nbytes, "must be a whole number of bytes")
    nbytes = int(nbytes)
    if nbytes < 0:
        raise InvalidSpec(f"{what} bytes", nbytes, "must be >= 0")
    if nbytes >= ABSURD_BYTES:
        raise InvalidSpec(f"{what} bytes", nbytes, f"must be < 1 TiB ({ABSURD_BYTES:,} B)")
    return nbytes


class Event:
    """A point in one stream's queue: complete once everything queued there before it has run."""

    def done(self) -> bool:
        """Whether the work before the event has run (cudaEventQuery); never waits.

        Returns:
            True once complete.
        """
        raise NotImplementedError

    def wait(self) -> None:
        """The host waits until the event is complete (cudaEventSynchronize), not for the device."""
        raise NotImplementedError


class Pool:
    """A caching allocator on a device: memory handed back to it is kept for later requests.

    Attributes:
        kind: "caching" (CuPy's ``MemoryPool``: a block freed on a stream is reused by later
            requests on that stream) or "async" (the driver's pool: ``cudaFreeAsync`` on the
            call's stream, reuse in stream order).
    """

    kind = ""

    def allocate(self, nbytes: int, *, stream) -> int:
        """Memory for work on ``stream``.

        Args:
            nbytes: bytes wanted.
            stream: the stream that will use it.

        Returns:
            The device address; `labkit.OutOfMemory` when the device has no room.
        """
        raise NotImplementedError

    def free(self, ptr: int, *, stream) -> None:
        """Hand ``ptr`` back, once the work queued on ``stream`` so far has run.

        Args:
            ptr: an address from `allocate`.
            stream: the stream whose work used it last.
        """
        raise NotImplementedError

    def held_bytes(self) -> int:
        """Device memory the pool holds now, in use or cached, in bytes."""
        raise NotImplementedError

    def release(self) -> None:
        """Give the cached memory back to the device."""
        raise NotImplementedError


class Device:
    """What the strategies and the `Runner` call; see the module docstring for each call.

    Attributes:
        name: the GPU's name, e.g. "NVIDIA H100 80GB HBM3".
        counts: calls made through the seam, by name (e.g. ``counts["synchronize"]``).
    """

    name = ""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()

    @property
    def provenance(self) -> dict:
        """Where this device's numbers come from: ``mode`` ("live" or "simulated"), ``gpu`` and a
        ``label`` a chart or table shows ("measured on ..." or "simulated from the ... recording")."""
        raise NotImplementedError

    # -- memory --
    def allocate(self, nbytes: int, *, stream=None, what: str = "workspace") -> int:
        """cudaMalloc. Args: nbytes: bytes; stream: unused (cudaMalloc is not stream-ordered);
        what: named in an out-of-memory error. Returns: the address (0 for 0 bytes)."""
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then frees. Args: ptr: an address from `allocate`."""
        raise NotImplementedError

    def pool(self, kind: str) -> Pool:
        """A new `Pool` of ``kind`` ("caching" or "async") on this device."""
        raise NotImplementedError

    def free_bytes(self) -> int:
        """Device memory free now, in bytes."""
        raise NotImplementedError

    # -- streams and events --
    def stream(self):
        """A new non-blocking stream."""
        raise NotImplementedError

    def stream_of(self, ptr: int):
        """The stream whose handle is ``ptr`` (0: the default stream)."""
        raise NotImplementedError

    def record_event(self, stream) -> Event:
        """An `Event` recorded on ``stream`` now."""
        raise NotImplementedError

    def wait_event(self, stream, event: Event) -> None:
        """Make later work on ``stream`` wait for ``event`` (the host goes on)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """The host waits for every stream (cudaDeviceSynchronize)."""
        raise NotImplementedError

    def clock_us(self) -> float:
        """The host's clock, in microseconds (simulated time on a simulated device)."""
        raise NotImplementedError

    def elapsed_us(self, start: Event, end: Event) -> float:
        """GPU time between two completed events, in microseconds."""
        raise NotImplementedError

    # -- what the Runner needs to run a convolution --
    def graph(self, spec, epilogue: str = "none"):
        """The built graph of a convolution: ``plans``, ``runnable``, ``default_plan``, ``plan(i)``,
        ``key``, ``fell_through`` and ``bind(arrays, workspace_ptr, plan_index, stream)``."""
        raise NotImplementedError

    def operands(self, spec, epilogue: str = "none", *, seed: int = 0):
        """A convolution's tensors (``.arrays``) on this device."""
        raise NotImplementedError

    def prepare_stream(self, stream) -> None:
        """Make what a stream needs before its first call (a cuDNN handle)."""

    def release_stream(self, stream) -> None:
        """Drop what `prepare_stream` made."""

    def release_cached(self) -> None:
        """Give memory cached outside the strategies (the operands' pool) back to the device."""

    def capture(self, fn: Callable[[], None], stream):
        """A CUDA graph of the work ``fn`` queues on ``stream``; launched with ``.launch(stream)``."""
        raise NotImplementedError
