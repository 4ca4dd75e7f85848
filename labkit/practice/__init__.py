"""The GPU a hands-on cell runs on: this machine's, or one simulated from a recording, behind one small API.

A learner writes a hands-on cell against `Practice` (``gpu = lessons.device()``), the device seam's
calls said for a person (`labkit.gpu.device`): live it is this machine's GPU (CuPy, cuDNN), in
recorded mode a `labkit.simgpu.SimDevice` replaying the recording in use. The same code runs on both:

===============================================  =====================================================
``gpu.conv(spec)``                               a convolution with its inputs: ``.plans`` (each
                                                 ``.index``, ``.name``, ``.workspace_bytes``), ``.plan``
                                                 (the heuristic's pick)
``gpu.conv(spec, workspace_cap=c)``              only the plans that need at most ``c`` bytes
``gpu.conversion(conv)``                         ``.run(stream=s)``: a user's NCHW input into an NHWC
                                                 ``conv``, its output back (lesson 03)
``gpu.conv(spec, epilogue="bias_relu")``         conv + bias + ReLU as one cuDNN graph (lesson 04)
``gpu.unfused(spec)``                            the same unfused: ``.run(ptr, stream=s)`` queues the
                                                 convolution, CuPy's bias add and ReLU (lesson 04)
``gpu.stream()``                                 a new stream (``.synchronize()``)
``gpu.allocate(nbytes)`` / ``gpu.free(ptr)``     cudaMalloc / cudaFree (an int address)
``conv.run(ptr, stream=s, plan=p)``              queue one call of plan ``p`` on ``s``, workspace at ``ptr``
``gpu.event(s)``                                 cudaEventRecord (``.wait()``, ``.done()``)
``gpu.elapsed_us(start, end)``                   GPU microseconds between two events
``gpu.capture(fn, s)``                           a CUDA graph of the calls ``fn`` queues (``.launch(s)``)
``gpu.synchronize()``                            the host waits for every stream
``gpu.runner(strategy)``                         a `labkit.gpu.workspaces.runner.Runner` on its own stream
``conv.wrong_outputs()``                         outputs written since the last look that are wrong
``gpu.label``                                    "simulated from the H100 SXM recording", or "measured
                                                 on this H100 SXM"
===============================================  =====================================================

The workspace strategies run on ``gpu.device`` (a hands-on cell makes it current, so a strategy the
cell makes is on it). Every call is logged (`Practice.launches`, `Practice.timings`, the allocations),
and `labkit.practice.findings` reads the log, with the simulator's sanitizer, for what a check
judges: races, leaks, workspaces smaller than the plan asks, a timing of one call.

* `device`: `Practice`, its streams, events and graphs;
* `conv`: `Conv`, a convolution's plans, calls and outputs (`capped`: its plans under a workspace cap;
  `fusion`: a fused graph's epilogue and label);
* `lesson_calls`: what single lessons' cells call besides (`layout`: lesson 03's conversion;
  `unfused`: lesson 04's unfused path);
* `findings`: what is wrong with what ran (`Problem`);
* `memory`: what ``allocate`` gave and ``free`` took back;
* `runner`: the Runner ``gpu.runner`` makes, its calls logged;
* `passes`: a pass of convolutions under a workspace strategy, for the shipped strategies beside a
  learner's own, and the simulated check of a learner's strategy.

`gpus` gives the same API on two GPUs at once (lesson 08): this GPU and the other shipped
recordings' GPUs, simulated; each `Practice`'s ``ceiling`` holds its datasheet's peaks
(`labkit.ceilings`).
"""

from __future__ import annotations

from typing import Dict, Optional

from .. import env
from ..store import recordings
from .conv import Conv  # noqa: F401  (the room's names)
from .device import Practice, simulated_label

_current: Optional[Practice] = None
_gpus: Dict[str, Practice] = {}


def new(recording=None) -> Practice:
    """A fresh `Practice`, which `current` returns from now on: this GPU live, else a new GPU
    simulated from the recording in use (nothing allocated, its clock at zero).

    Args:
        recording: simulate this shipped recording (e.g. "h200") instead; default the one in use.

    Returns:
        The `Practice`.
    """
    global _current
    _current = Practice.for_mode(recording)
    return _current


def current() -> Practice:
    """The `Practice` hands-on cells use now (`new`'s last, made on first use).

    Returns:
        The `Practice`.
    """
    return _current if _current is not None else new()


def gpus() -> Dict[str, Practice]:
    """The same code on two GPUs (lesson 08's hands-on): one `Practice` per shipped recording's GPU,
    by its name (``"H100 SXM"``), in the recordings' order; this GPU live in its recording's place (or
    first, when no recording is of its kind), `current` in recorded mode. `last_gpus` returns them.

    Returns:
        GPU name -> `Practice`: live, this GPU measured and the others simulated from their recordings;
        recorded, each simulated from its recording.
    """
    global _gpus
    here = current()
    out: Dict[str, Practice] = (
        {} if any(_gpu_of(r) == here.gpu for r in recordings.shipped()) else {here.gpu: here}
    )
    for rec in recordings.shipped():
        name = _gpu_of(rec)
        if name not in out:
            out[name] = here if name == here.gpu else Practice.for_mode(rec.name)
    _gpus = out
    return dict(out)


def gpu_labels() -> Dict[str, str]:
    """Where each GPU `gpus` gives takes its numbers from, without making them (a cell's header).

    Returns:
        GPU name -> its `Practice.label`, e.g. ``"simulated from the H200 SXM recording"``, in `gpus`'s order.
    """
    here = current()
    out = {} if any(_gpu_of(r) == here.gpu for r in recordings.shipped()) else {here.gpu: here.label}
    for rec in recordings.shipped():
        name = _gpu_of(rec)
        if name not in out:
            out[name] = here.label if name == here.gpu else simulated_label(name)
    return out


def last_gpus() -> Dict[str, Practice]:
    """What `gpus` gave last (a check reads them).

    Returns:
        GPU name -> `Practice`; empty before any call.
    """
    return dict(_gpus)


def _gpu_of(rec) -> str:
    """A recording's GPU, as every label names it."""
    return env.gpu_label(rec.metadata.get("gpu") or rec.name)
