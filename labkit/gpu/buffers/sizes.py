"""A request for device memory, checked before any allocator sees it: `check_request` takes a
whole number of bytes, >= 0 and below `ABSURD_BYTES`. Imports nothing of CuPy, so the simulated GPU
and the strategies check with it as `labkit.gpu.buffers.memory` does."""

from __future__ import annotations

from ...errors import InvalidSpec

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
