"""This process's CUDA context, through the driver's C API (``libcuda``, by ctypes), without CuPy:
whether it has been made (`has_context`), and making it in a thread (`make_soon`).

CUDA's runtime, and so CuPy and cuDNN, use each device's primary context. On an H200 host, making
it took about 0.2 s, and importing CuPy, cuDNN's frontend and labkit's measuring modules 0.6-0.8 s;
ctypes lets the interpreter go while the driver works, so a worker process that starts making its
context before those imports has both in about the time of the imports (docs/findings.md).
"""

from __future__ import annotations

import ctypes
import functools
import threading

from ...errors import InvalidSpec


@functools.lru_cache(maxsize=None)
def _driver() -> ctypes.CDLL:
    """CUDA's driver library, initialised (``cuInit``: no context is made)."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuInit(0)
    return lib


def has_context(device: int) -> bool:
    """Whether this process has made its CUDA context on a device, asked of the driver
    (``cuDevicePrimaryCtxGetState``) without making it.

    Args:
        device: the CUDA device index.

    Returns:
        False only when the driver says there is none; True when it cannot tell.
    """
    try:
        lib = _driver()
        dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), int(device)) != 0:
            return True
        if lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) != 0:
            return True
        return bool(active.value)
    except (OSError, AttributeError):
        return True


def _retain(device: int) -> None:
    try:
        lib = _driver()
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if lib.cuDeviceGet(ctypes.byref(dev), int(device)) == 0:
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # kept for the process's life
    except (OSError, AttributeError):
        pass  # no driver: whoever needs CUDA next says why


def make_soon(device: int = 0) -> threading.Thread:
    """Start making this process's primary context on a device, in a daemon thread; returns at once.

    The context is retained for the rest of the process, as CUDA's runtime retains it at its first
    call on the device; that call then finds it made (or waits for the driver to finish making it).
    Without a driver or a device, the thread ends having done nothing.

    Args:
        device: the CUDA device index: 0, the device CuPy and a worker process use unless told
            otherwise (``CUDA_VISIBLE_DEVICES`` picks which GPU that is).

    Returns:
        The thread; `InvalidSpec` (before any thread starts) for a device that is not an int >= 0.
    """
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise InvalidSpec("device", device, "must be a CUDA device index, an int >= 0")
    t = threading.Thread(target=_retain, args=(device,), daemon=True, name="labkit-cuda-context")
    t.start()
    return t
