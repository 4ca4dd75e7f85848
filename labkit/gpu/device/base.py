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
        """cudaMalloc: device memory of the caller's own.

        Args:
            nbytes: bytes wanted.
            stream: unused (cudaMalloc is not stream-ordered; the pools are).
            what: what it is for, named in an out-of-memory error.

        Returns:
            The device address (0 for 0 bytes); `labkit.OutOfMemory` when it does not fit.
        """
        raise NotImplementedError

    def free(self, ptr: int) -> None:
        """cudaFree: waits for every stream, then frees.

        Args:
            ptr: an address from `allocate` (nothing for 0).
        """
        raise NotImplementedError

    def pool(self, kind: str) -> Pool:
        """A new pool on this device.

        Args:
            kind: "caching" (CuPy's ``MemoryPool``) or "async" (the stream-ordered pool).

        Returns:
            The `Pool`.
        """
        raise NotImplementedError

    def free_bytes(self) -> int:
        """Device memory free now, in bytes."""
        raise NotImplementedError

    # -- streams and events --
    def stream(self):
        """A new non-blocking stream."""
        raise NotImplementedError

    def stream_of(self, ptr: int):
        """The stream behind a handle (a `labkit.store.keys.Request` carries ``stream_ptr``).

        Args:
            ptr: the stream's handle; 0 for the default stream.

        Returns:
            The stream object (``.ptr``, ``.synchronize()``).
        """
        raise NotImplementedError

    def record_event(self, stream) -> Event:
        """cudaEventRecord: an event that completes once the work queued on ``stream`` so far has run.

        Args:
            stream: the stream.

        Returns:
            The `Event`.
        """
        raise NotImplementedError

    def wait_event(self, stream, event: Event) -> None:
        """cudaStreamWaitEvent: later work on ``stream`` waits for ``event``; the host goes on.

        Args:
            stream: the stream that waits.
            event: an `Event` from `record_event`.
        """
        raise NotImplementedError

    def synchronize(self) -> None:
        """The host waits for every stream (cudaDeviceSynchronize)."""
        raise NotImplementedError

    def clock_us(self) -> float:
        """The host's clock, in microseconds (simulated time on a simulated device)."""
        raise NotImplementedError

    def elapsed_us(self, start: Event, end: Event) -> float:
        """cudaEventElapsedTime: GPU time between two completed events.

        Args:
            start: the earlier `Event`.
            end: the later one.

        Returns:
            Microseconds.
        """
        raise NotImplementedError

    # -- what the Runner needs to run a convolution --
    def graph(self, spec, epilogue: str = "none"):
        """The built graph of a convolution, as the `Runner` uses it.

        Args:
            spec: the `labkit.ConvSpec`.
            epilogue: its fused epilogue.

        Returns:
            An object with ``plans``, ``runnable``, ``default_plan``, ``plan(i)``, ``key``,
            ``fell_through`` and ``bind(arrays, workspace_ptr, plan_index, stream)``.
        """
        raise NotImplementedError

    def operands(self, spec, epilogue: str = "none", *, seed: int = 0):
        """A convolution's tensors on this device.

        Args:
            spec: the `labkit.ConvSpec`.
            epilogue: its fused epilogue.
            seed: the inputs' seed.

        Returns:
            An object with ``.arrays`` (role -> array; empty on a simulated GPU).
        """
        raise NotImplementedError

    def prepare_stream(self, stream) -> None:
        """Make what a stream needs before its first call (a cuDNN handle).

        Args:
            stream: the stream.
        """

    def release_stream(self, stream) -> None:
        """Drop what `prepare_stream` made.

        Args:
            stream: the stream.
        """

    def release_cached(self) -> None:
        """Give memory cached outside the strategies (the operands' pool) back to the device."""

    def capture(self, fn: Callable[[], None], stream):
        """A CUDA graph of the work ``fn`` queues on ``stream``.

        Args:
            fn: queues the work (e.g. a few `Runner.run` calls) when called once.
            stream: the stream captured.

        Returns:
            The graph; ``.launch(stream)`` runs it again.
        """
        raise NotImplementedError
