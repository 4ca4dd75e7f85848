"""Honest timing on the GPU.

Three numbers, never mixed up:
- ``graph_replay``: GPU time per call from replaying a CUDA graph of back-to-back calls (the
  host is out of the loop: the kernels' own time).
- ``back_to_back``: GPU time per call for many calls launched from Python in a row (what an
  eager framework sees; for small convolutions this is bound by the host's dispatch).
- ``host_dispatch``: host (CPU) time per call to *launch* one call, no synchronisation.
A single event pair around one Python call is never reported as convolution time.
All times are microseconds; each result has a median and its spread (p10, p90) over repeats.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, List

import cupy

from ..errors import InvalidSpec
from ..cancel import checkpoint


@dataclass(frozen=True)
class Timing:
    """Per-call time in microseconds: median and 10th/90th percentiles over ``samples`` repeats,
    each repeat timing ``calls`` calls."""

    method: str
    median_us: float
    p10_us: float
    p90_us: float
    samples: int
    calls: int

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: 0 is perfectly stable."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us else float("inf")


def _summarise(method: str, per_call_us: List[float], calls: int) -> Timing:
    xs = sorted(per_call_us)
    q = lambda f: xs[min(len(xs) - 1, max(0, round(f * (len(xs) - 1))))]  # noqa: E731
    return Timing(method, statistics.median(xs), q(0.1), q(0.9), len(xs), calls)


def _positive(name, value, lo=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise InvalidSpec(name, value, f"must be an int >= {lo}")
    return value


def capture(fn: Callable[[], None], stream: cupy.cuda.Stream, calls: int) -> cupy.cuda.Graph:
    """A CUDA graph of ``calls`` back-to-back calls of ``fn``, captured on ``stream`` (which must
    not be the legacy default stream; ``fn`` must launch on it)."""
    _positive("calls", calls)
    checkpoint()  # never inside a capture: before it
    stream.synchronize()
    with stream:
        stream.begin_capture()
        try:
            for _ in range(calls):
                fn()
        finally:
            graph = stream.end_capture()
    return graph


def _replay_us(graph, stream, start, end, calls: int) -> float:
    """One replay of ``graph`` between two events: GPU microseconds per call."""
    start.record(stream)
    graph.launch(stream)
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) * 1000.0 / calls


def graph_replay(fn: Callable[[], None], stream: cupy.cuda.Stream, calls: int = 20, warmup: int = 3,
                 repeats: int = 15, min_repeats: int = 5, rel_tol: float = 0.02, stop_above_us: float = None) -> Timing:
    """GPU time per call by CUDA-graph replay (see module doc). Repeats until the median is stable
    (the last two medians within ``rel_tol``) or ``repeats`` is reached; stops as soon as the
    median is above ``stop_above_us`` (autotune's early stop: a plan already 3x slower than the
    best so far needs no more samples to be known slower; one sample can be enough)."""
    _positive("repeats", repeats)
    graph = capture(fn, stream, calls)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(warmup):
        graph.launch(stream)
    stream.synchronize()
    samples, last = [], None
    for _ in range(repeats):
        samples.append(_replay_us(graph, stream, start, end, calls))
        med = statistics.median(samples)
        if stop_above_us is not None and med > stop_above_us:
            break
        if len(samples) >= min_repeats:
            if last is not None and abs(med - last) <= rel_tol * med:
                break
            last = med
    return _summarise("graph_replay", samples, calls)


def replay_timer(graph: cupy.cuda.Graph, stream: cupy.cuda.Stream, calls: int, replays: int = 10):
    """A function that replays ``graph`` (``calls`` convs) ``replays`` times and returns the median
    GPU microseconds per conv: for alternating comparisons against another library."""
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    graph.launch(stream)

    def median_us() -> float:
        return statistics.median(_replay_us(graph, stream, start, end, calls) for _ in range(replays))

    return median_us


def back_to_back(fn: Callable[[], None], stream: cupy.cuda.Stream, calls: int = 50, warmup: int = 5, repeats: int = 7) -> Timing:
    """GPU time per call for ``calls`` Python launches in a row, between two events."""
    _positive("calls", calls)
    _positive("repeats", repeats)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    with stream:
        for _ in range(warmup):
            fn()
        stream.synchronize()
        samples = []
        for _ in range(repeats):
            start.record(stream)
            for _ in range(calls):
                fn()
            end.record(stream)
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0 / calls)
    return _summarise("back_to_back", samples, calls)


def host_dispatch(fn: Callable[[], None], stream: cupy.cuda.Stream, calls: int = 100, repeats: int = 7) -> Timing:
    """Host time per launch: a host clock around ``calls`` launches, synchronising only between
    repeats (so the queue never fills and nothing waits on the GPU inside the timed loop)."""
    _positive("calls", calls)
    samples = []
    with stream:
        fn()
        stream.synchronize()
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) * 1e6 / calls)
            stream.synchronize()
    return _summarise("host_dispatch", samples, calls)
