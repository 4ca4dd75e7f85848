"""The simulated GPU's memory (rule 11 of `labkit.simgpu.device`): addresses handed out, what is
taken, what was freed (for the sanitizer), and the graph memory nodes of CUDA graph captures (rule
13). Bytes."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..errors import OutOfMemory

#: simulated addresses start here, 512-byte aligned (a CUDA allocation is at least 256-aligned)
BASE_ADDRESS = 0x7F0000000000


class DeviceMemory:
    """Every byte a simulated GPU hands out: cudaMalloc's buffers, the pools' chunks, graph memory.

    Args:
        total: the GPU's memory (the recording's gpu_memory_bytes), bytes.

    Attributes:
        reservations: address -> bytes of everything taken that can be given back.
        freed: (address, bytes, host time) of every give-back, in order.
        graph: address -> bytes of graph memory nodes (a graph's own, kept while it lives).
    """

    def __init__(self, total: int):
        self.total = int(total)
        self.taken = 0
        self.reservations: Dict[int, int] = {}
        self.freed: List[Tuple[int, int, float]] = []
        self.graph: Dict[int, int] = {}
        self._graph_freed: List[int] = []  # graph memory the capture under way freed
        self._next = BASE_ADDRESS

    def free_bytes(self) -> int:
        """The GPU's memory less what is taken now.

        Returns:
            Bytes.
        """
        return self.total - self.taken

    def reserve(self, nbytes: int, what: str) -> int:
        """Take ``nbytes`` at a new address (`labkit.OutOfMemory` past the total).

        Args:
            nbytes: the size, bytes.
            what: what it is for, named in the error.

        Returns:
            The address (512-byte aligned).
        """
        if self.taken + nbytes > self.total:
            raise OutOfMemory(what, nbytes, self.free_bytes())
        ptr, self._next = self._next, self._next + -(-nbytes // 512) * 512
        self.taken += nbytes
        self.reservations[ptr] = nbytes
        return ptr

    def unreserve(self, ptr: int, at: float) -> None:
        """Give back what `reserve` took at ``ptr``.

        Args:
            ptr: the address `reserve` returned.
            at: the host time of the give-back, microseconds (kept in `freed`).
        """
        nbytes = self.reservations.pop(ptr)
        self.taken -= nbytes
        self.freed.append((ptr, nbytes, at))

    def new_capture(self) -> None:
        """A capture begins: graph memory freed by an earlier one is not this one's to use again."""
        self._graph_freed = []

    def graph_alloc(self, nbytes: int) -> int:
        """A graph memory node's address: ``nbytes`` the graph owns, outside every pool; an address
        the same capture freed before is used again (stream order).

        Args:
            nbytes: the size, bytes.

        Returns:
            The node's address.
        """
        for ptr in self._graph_freed:
            if self.graph[ptr] >= nbytes:
                self._graph_freed.remove(ptr)
                return ptr
        ptr = self.reserve(nbytes, "graph memory node")
        del self.reservations[ptr]  # the graph's, kept while it lives: not the strategy's to free
        self.graph[ptr] = nbytes
        return ptr

    def graph_free(self, ptr: int) -> None:
        """A graph memory node's free, in the capture: later requests of the capture may use it.

        Args:
            ptr: the address `graph_alloc` returned.
        """
        self._graph_freed.append(ptr)
