"""Python's cyclic garbage collector held off while a CUDA graph is captured.

A collection runs the finalizers of whatever cyclic garbage is due, in whichever thread allocates
at that moment. A finalizer that synchronises the device or a stream (a cuDNN handle's destroy, a
freed buffer's ``cudaFree``) is not permitted while a stream captures, and it ends the capture with
``cudaErrorStreamCaptureUnsupported``. PyTorch's graph capture collects before it starts for the
same reason; a capture here takes milliseconds, so `held_off` only defers collections until it
ends. Reference counting still frees everything else at once.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
#: captures in progress in this process (any thread), and whether the collector was on before the first
_state = dict(depth=0, was_enabled=False)


@contextlib.contextmanager
def held_off():
    """No automatic collection in any thread inside the block; the collector's earlier state after
    the last block ends (blocks may overlap across threads).

    Returns:
        A context manager.
    """
    with _lock:
        if _state["depth"] == 0:
            _state["was_enabled"] = gc.isenabled()
            gc.disable()
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["was_enabled"]:
                gc.enable()
