"""A simulated GPU that replays a recording, for learners without one.

`SimDevice` implements the device seam (`labkit.gpu.device`) from a real GPU's recorded
measurements: streams are queues with events, a convolution call is its plan's recorded kernels
after its recorded launch time, memory follows CUDA's rules as measured (cudaFree waits for the
device, the pools cache), and a sanitizer reports races, use-after-free, under-sized workspaces
and leaks. The workspace strategies and the `labkit.gpu.workspaces.runner.Runner` run on it unchanged: make
it current with `labkit.gpu.device.use` (or `simulated`) and the same code that runs on a GPU
runs here. Every number it gives is "simulated from the <GPU> recording" (``provenance``), never
a measurement; a number the recording lacks is never made up (`labkit.NotRecorded`).

* `device`: `SimDevice` and its rules (module docstring);
* `timeline`: the streams' queues, run as far as the host needs (streams sharing the GPU);
* `sanitizer`: what orders calls on different streams, and the hazards when nothing does;
* `recorded`: every number it reads, and where from;
* `pools`: CuPy's caching pool and the stream-ordered pool;
* `conv`: recorded plans and calls as the `Runner` sees them;
* `lesson_calls`: what else the lesson recordings hold, as calls (lesson 03's layout conversion);
* `sequences`: the same call sequences on a live or a simulated device (``bench sim-fidelity``);
* `fidelity`: how close it comes to the live GPU, as measured, and by how much it misses.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ..gpu import device as devices
from .device import Finding, SimCall, SimDevice  # noqa: F401  (the room's names)


@contextlib.contextmanager
def simulated(recording=None) -> Iterator[SimDevice]:
    """A new `SimDevice`, current inside a ``with`` block.

    Args:
        recording: a shipped recording's name (e.g. "h200"); default the recording in use.

    Yields:
        The device.
    """
    dev = SimDevice(recording)
    with devices.use(dev):
        yield dev
