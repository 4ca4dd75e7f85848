"""`Memory`: what a `labkit.practice.Practice`'s ``allocate`` gave and ``free`` took back, with the
running cell's own share (its peak, its allocations, the host time in them). Bytes, microseconds."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import InvalidSpec
from .findings import Problem


class Memory:
    """The learner's allocations on one device.

    Args:
        device: the seam's device.

    Attributes:
        allocations: address -> bytes, for what `allocate` gave and `free` has not taken back.
        freed: (address, bytes) of what `free` took back, in order.
        cell_peak_bytes: the most bytes the running cell held at once (its own allocations).
        cell_alloc_calls: its allocate calls.
        cell_alloc_us: host time in its allocate and free calls.
    """

    def __init__(self, device):
        self.device = device
        self.allocations: Dict[int, int] = {}
        self.freed: List[Tuple[int, int]] = []
        self.begin_cell()

    def begin_cell(self) -> None:
        """Count the running cell's allocations from zero."""
        self.cell_held = self.cell_peak_bytes = self.cell_alloc_calls = 0
        self.cell_alloc_us = 0.0
        self._cell: Dict[int, int] = {}

    def allocate(self, nbytes: int) -> int:
        """cudaMalloc through the device, written down.

        Args:
            nbytes: bytes.

        Returns:
            The address (0 for 0 bytes).
        """
        t0 = self.device.clock_us()
        ptr = int(self.device.allocate(nbytes, what="your workspace") or 0)
        self.cell_alloc_us += self.device.clock_us() - t0
        self.cell_alloc_calls += 1
        if ptr:
            self.allocations[ptr] = self._cell[ptr] = int(nbytes)
            self.cell_held += int(nbytes)
            self.cell_peak_bytes = max(self.cell_peak_bytes, self.cell_held)
        return ptr

    def free(self, ptr: int) -> None:
        """cudaFree through the device, written down; a clear error for an address it never gave.

        Args:
            ptr: an address from `allocate`.
        """
        if ptr not in self.allocations:
            gone = any(p == ptr for p, _ in self.freed)
            raise InvalidSpec(
                "gpu.free",
                f"0x{int(ptr):x}",
                "was freed already" if gone else "must be an address gpu.allocate returned",
            )
        t0 = self.device.clock_us()
        self.device.free(ptr)
        self.cell_alloc_us += self.device.clock_us() - t0
        self.freed.append((ptr, self.allocations.pop(ptr)))
        self.cell_held -= self._cell.pop(ptr, 0)

    def room(self, ptr: int) -> Optional[int]:
        """The room a workspace at ``ptr`` has.

        Args:
            ptr: an address.

        Returns:
            Bytes from ``ptr`` to the end of the allocation it lies in; None outside every allocation.
        """
        return next((p + n - ptr for p, n in self.allocations.items() if p <= ptr < p + n), None)

    def was_freed(self, ptr: int) -> bool:
        """Whether an address lies in memory `free` took back.

        Args:
            ptr: the address.

        Returns:
            True when a freed allocation held it.
        """
        return any(p <= ptr < p + n for p, n in self.freed)

    def check(self, ptr: int, need: int, what: str) -> Optional[Problem]:
        """What is wrong with a call that needs ``need`` bytes getting its workspace at ``ptr``.

        Args:
            ptr: the workspace's address (0 for none).
            need: the bytes its plan asks for.
            what: the call, for the message.

        Returns:
            None when at least ``need`` bytes of a live allocation lie there; else a ``too_small``
            or ``use_after_free`` `Problem`; `labkit.InvalidSpec` for an address never allocated.
        """
        if not need:
            return None
        room = self.room(ptr)
        if room is None and ptr and not self.was_freed(ptr):
            raise InvalidSpec("workspace", ptr, "must be an address gpu.allocate returned (or 0)")
        if room is None and ptr:
            return Problem("use_after_free", f"{what} got workspace 0x{ptr:x}, which you had freed", need)
        if (room or 0) < need:
            have = room or 0
            return Problem(
                "too_small", f"{what} needs {need:,} B of workspace; you gave it {have:,} B", need - have
            )
        return None
