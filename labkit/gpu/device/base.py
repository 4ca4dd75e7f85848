"""The seam's interface: `Device`, `Event` and `Pool`, which `labkit.gpu.device.cuda` (CuPy) and
`labkit.simgpu` (a simulated GPU) implement. What each call means: `labkit.gpu.device`."""

from __future__ import annotations

import collections
from typing import Callable, Dict, List, Optional

from ...errors import LabkitError

POOL_KINDS = ("caching", "async")
#: why no cudaFree may run while a stream captures (`labkit.NotCapturable`)
CUDAFREE_IN_CAPTURE = (
    "CUDA refuses it while a stream captures (cudaFree waits for the whole device, the capturing "
    "stream included), and a replay would reuse the freed address; capture with a strategy that "
    "keeps its buffers, or launch from Python"
)


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
        """Device memory the pool holds now, in use or cached.

        Returns:
            Bytes.
        """
        raise NotImplementedError

    def release(self) -> None:
        """Give the cached memory back to the device."""
        raise NotImplementedError


class Graph:
    """A CUDA graph captured through `Device.capture`, with the orderings each of its launches needs.

    A workspace the graph's calls use may also be used by calls on other streams: the capture
    cannot wait for them (an event recorded outside a capture cannot be waited for inside it), so
    `Device.order_at_launch` noted each such buffer, and every `launch` first asks its owner (a
    `labkit.gpu.workspaces.workspace.Strategy`) to make the launch stream wait for the buffer's last use on
    another stream, outside any capture.

    Args:
        native: what the device captured (``.launch(stream)`` runs it again).
        orders: owner -> the buffers (device addresses) it must order before each launch.
    """

    def __init__(self, native, orders: Dict[object, List[int]]):
        self.native, self.orders = native, orders

    def launch(self, stream) -> None:
        """cudaGraphLaunch on ``stream``, after the waits the graph's buffers need.

        Args:
            stream: the stream it runs on.
        """
        for owner, ptrs in self.orders.items():
            owner.order_launch(ptrs, int(stream.ptr))
        self.native.launch(stream)


class Device:
    """What the strategies and the `Runner` call; see the module docstring for each call.

    Attributes:
        name: the GPU's name, e.g. "NVIDIA H100 80GB HBM3".
        counts: calls made through the seam, by name (e.g. ``counts["synchronize"]``).
    """

    name = ""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        #: the capture under way through `capture`: (its stream, owner -> buffers to order at launch)
        self._capture: Optional[tuple] = None

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
        """Device memory free now.

        Returns:
            Bytes.
        """
        raise NotImplementedError

    # -- streams and events --
    def stream(self):
        """A new non-blocking stream.

        Returns:
            The stream object (``.ptr``, ``.synchronize()``).
        """
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
        """The host's clock (simulated time on a simulated device).

        Returns:
            Microseconds, from an origin of the device's own: compare two readings only.
        """
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
        """Give memory cached outside the strategies (the operands' pool, what the device's
        stream-ordered pool keeps unused) back to the device."""

    def capture(self, fn: Callable[[], None], stream) -> Graph:
        """A CUDA graph of the work ``fn`` queues on ``stream``.

        While ``fn`` runs, `capturing` says so: a strategy then orders a shared buffer at each
        launch of the graph (`order_at_launch`) instead of waiting for an event inside the capture,
        and refuses what CUDA forbids in a capture (a cudaFree, a host wait) with
        `labkit.NotCapturable`.

        Args:
            fn: queues the work (e.g. a few `Runner.run` calls) when called once.
            stream: the stream captured.

        Returns:
            The `Graph`; ``.launch(stream)`` runs it again.
        """
        if self._capture is not None:
            raise LabkitError("a CUDA graph capture is already under way on this device")
        self._capture = (stream, {})
        try:
            native = self._capture_native(fn, stream)
        finally:
            _, orders = self._capture
            self._capture = None
        return Graph(native, {owner: list(ptrs) for owner, ptrs in orders.items()})

    def capturing(self, stream=None) -> bool:
        """Whether a capture through `capture` is under way (on ``stream``, when given).

        Args:
            stream: a stream; None for any.

        Returns:
            True while ``fn`` of `capture` runs (on that stream).
        """
        if self._capture is None:
            return False
        return stream is None or int(self._capture[0].ptr) == int(stream.ptr)

    def order_at_launch(self, stream, owner, ptr: int) -> None:
        """Note, while ``stream`` captures, that each launch of its graph must first call
        ``owner.order_launch(buffers, launch stream's handle)`` for ``ptr`` (see `Graph`).

        Args:
            stream: the capturing stream.
            owner: what orders the buffer (a `labkit.gpu.workspaces.workspace.Strategy`).
            ptr: the buffer's device address.
        """
        if not self.capturing(stream):
            raise LabkitError("order_at_launch needs a capture under way on that stream (Device.capture)")
        self._capture[1].setdefault(owner, {})[int(ptr)] = None

    def _capture_native(self, fn: Callable[[], None], stream):
        """The device's own capture of ``fn`` on ``stream``: an object with ``.launch(stream)``."""
        raise NotImplementedError
