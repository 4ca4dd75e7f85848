"""Honest timing on the GPU.

Three numbers, never mixed up:
- ``graph_replay``: GPU time per call from replaying a CUDA graph of back-to-back calls (the
  host is out of the loop: the kernels' own time).
- ``back_to_back``: GPU time per call for many calls launched from Python in a row (what an
  eager framework sees; for small convolutions this is bound by the host's dispatch).
- ``host_dispatch``: host (CPU) time per call to *launch* one call, no synchronisation.
A single event pair around one Python call is never reported as convolution time.
All times are microseconds; each result has a median and its spread (p10, p90) over repeats.

Bounded: ``graph_replay`` first runs the call eagerly, outside any capture: twice (the second
between two events: ``eager_us``), or once (below). That loads its kernels before a capture, sizes
the graph (a call that takes 2 ms gets a graph of one call, not ten: a plan that launches one kernel
per group, as cuDNN's engine 1 does for grouped convolutions, puts 1,200 nodes in a graph per call
of a 240-group convolution, and capturing 10 of them takes seconds to minutes), and lets autotune
drop a plan already far slower than the best without capturing it (`TooSlow`). A call that ran in
this process before (its kernels loaded) needs no second eager call when its first is within the
bound (``enough_us``), and stops after it when that one is already far over the bound
(``first_stop_us``: a grouped call of engine 1 can take tens of milliseconds). A
`labkit.signals.cancel.Budget` is checked between the calls of a capture and between replays
(`labkit.TimedOut`).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import cupy

from ...errors import InvalidSpec, LabkitError
from ...signals.cancel import Budget, checkpoint
from . import collector

#: a graph holds as many calls as fit in about this many microseconds of one eager call each
#: (at most ``calls``): short calls are batched to hide the graph launch, long ones are not
REPLAY_TARGET_US = 2000.0
#: `graph_replay` stops before capturing when one eager call is over this many times its
#: ``stop_above_us`` (one eager call includes launch gaps a replay hides, hence the margin); a
#: caller that knows another call's eager time passes ``eager_stop_above_us`` instead
EAGER_STOP_FACTOR = 2.0
#: replays of a new graph before the timed ones (its first launch uploads it)
WARMUP_REPLAYS = 3
#: timed replays before a median may be called stable (`graph_replay`'s ``min_repeats``)
MIN_REPEATS = 5
#: a call that ran in this process before (its kernels loaded) and whose first eager call is over
#: its eager bound by more than this many microseconds is not called a second time: what a first
#: call may add once its kernels are loaded (a new workspace, a stream's first use) is far less
FIRST_CALL_MARGIN_US = 1000.0


@dataclass(frozen=True)
class Timing:
    """Per-call time in microseconds, over repeats.

    Attributes:
        method: how it was measured: "graph_replay", "back_to_back" or "host_dispatch".
        median_us: the median per call, in microseconds.
        p10_us: the 10th percentile.
        p90_us: the 90th percentile.
        samples: how many repeats.
        calls: calls timed in each repeat.
        eager_us: GPU time of one eager call (two events around it), measured before the capture.
        capture_s: wall time of the capture, in seconds.
        eager_reused: ``eager_us`` is a first call made before (a plan's run in its check), not a
            call made here.
    """

    method: str
    median_us: float
    p10_us: float
    p90_us: float
    samples: int
    calls: int
    #: GPU time of one eager call (two events around it), measured before the capture (us)
    eager_us: float = float("nan")
    #: wall time of the capture (seconds)
    capture_s: float = float("nan")
    #: ``eager_us`` is a first call made before (a plan's run in its check), not a call made here
    eager_reused: bool = False

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: 0 is perfectly stable."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us else float("inf")


class TooSlow(LabkitError):
    """One eager call is already far slower than the caller's bound: it is not captured or timed further.

    Args:
        eager_us: the eager call's GPU time, in microseconds (``eager_us``).
        limit_us: the bound it went over, in microseconds (`graph_replay`'s eager bound).
    """

    def __init__(self, eager_us: float, limit_us: float):
        self.eager_us, self.limit_us = float(eager_us), float(limit_us)
        super().__init__(
            f"one call took {us_words(eager_us)} eagerly, over the {us_words(limit_us)} "
            "early-stop bound: not timed further"
        )


def us_words(us: float) -> str:
    """Microseconds in words: '5.8 us', '8.93 ms', '1.20 s'.

    Args:
        us: a time in microseconds.

    Returns:
        The time with its unit.
    """
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} us"


def _summarise(method: str, per_call_us: List[float], calls: int, **extra) -> Timing:
    xs = sorted(per_call_us)
    q = lambda f: xs[min(len(xs) - 1, max(0, round(f * (len(xs) - 1))))]  # noqa: E731
    return Timing(method, statistics.median(xs), q(0.1), q(0.9), len(xs), calls, **extra)


def _positive(name, value, lo=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise InvalidSpec(name, value, f"must be an int >= {lo}")
    return value


def capture(
    fn: Callable[[], None], stream: cupy.cuda.Stream, calls: int, budget: Optional[Budget] = None
) -> cupy.cuda.Graph:
    """A CUDA graph of back-to-back calls, captured with Python's garbage collector held off
    (`collector.held_off`: no finalizer may synchronise inside a capture).

    Args:
        fn: launches one call on ``stream``.
        stream: the stream captured on; not the legacy default stream.
        calls: how many calls the graph holds.
        budget: checked after each captured call: once spent, the capture is ended, dropped and
            `labkit.TimedOut` raised.

    Returns:
        The captured ``cupy.cuda.Graph``.
    """
    _positive("calls", calls)
    checkpoint()  # never inside a capture: before it
    stream.synchronize()
    done = 0
    with stream, collector.held_off():  # no finalizer may synchronise inside the capture
        stream.begin_capture()
        try:
            for _ in range(calls):
                fn()
                done += 1
                if budget is not None and budget.over and done < calls:
                    break
        finally:
            graph = stream.end_capture()
    if done < calls:
        del graph
        budget.check(f"capture ({done} of {calls} calls captured)")
    return graph


def eager_us(
    fn: Callable[[], None],
    stream: cupy.cuda.Stream,
    start=None,
    end=None,
    *,
    first_stop_us: Optional[float] = None,
    enough_us: Optional[float] = None,
) -> float:
    """GPU time of one eager call, between two events, after a first call.

    The first call loads the call's kernels and warms its caches, outside any capture. For a call
    that launches several kernels the time includes the gaps between them: an upper bound on the
    kernels' own time, which `graph_replay` then measures.

    Args:
        fn: launches one call on ``stream``.
        stream: the stream.
        start: a CUDA event to reuse; a new one by default.
        end: another.
        first_stop_us: when the first call alone takes longer than this many microseconds, there is
            no second call: `TooSlow` with the first call's time.
        enough_us: for a call whose kernels are already loaded (it ran in this process before): a
            first call that takes at most this many microseconds is the answer, with no second
            call. What a first call may add (a new workspace, a stream's first use) only makes it
            slower, so taking it never stops a call the second would have let through.
            None with ``first_stop_us`` None always makes the second call.

    Returns:
        The last call's GPU time, in microseconds.
    """
    start = start if start is not None else cupy.cuda.Event()
    end = end if end is not None else cupy.cuda.Event()
    with stream:
        if first_stop_us is None and enough_us is None:
            fn()
        else:
            first = _one_call_us(fn, stream, start, end)
            if first_stop_us is not None and first > first_stop_us:
                raise TooSlow(first, first_stop_us)
            if enough_us is not None and first <= enough_us:
                return first
        return _one_call_us(fn, stream, start, end)


def _one_call_us(fn, stream, start, end) -> float:
    """One ``fn()`` between two events on ``stream``: its GPU time, in microseconds."""
    start.record(stream)
    fn()
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) * 1000.0


def calls_for(one_call_us: float, calls: int, *, target_us: float = REPLAY_TARGET_US) -> int:
    """How many back-to-back calls a graph holds: about ``target_us`` of calls.

    Args:
        one_call_us: one call's time, in microseconds.
        calls: the most calls.
        target_us: the calls' time a graph holds, in microseconds (`REPLAY_TARGET_US`).

    Returns:
        ``calls``, fewer when one call is long, at least one.
    """
    if not one_call_us > 0:
        return calls
    return max(1, min(calls, int(target_us // one_call_us)))


_streams = threading.local()


def timing_stream() -> cupy.cuda.Stream:
    """This thread's non-blocking stream for timing, made once.

    Returns:
        The stream; one per thread, so one cuDNN handle per thread rather than one per measurement
        (`labkit.gpu.cudnn.frontend.handle_for` keeps a handle per stream).
    """
    s = getattr(_streams, "stream", None)
    if s is None:
        s = _streams.stream = cupy.cuda.Stream(non_blocking=True)
    return s


def _replay_us(graph, stream, start, end, calls: int) -> float:
    """One replay of ``graph`` between two events: GPU microseconds per call."""
    start.record(stream)
    graph.launch(stream)
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) * 1000.0 / calls


def graph_replay(
    fn: Callable[[], None],
    stream: cupy.cuda.Stream,
    *,
    calls: int = 20,
    warmup: int = WARMUP_REPLAYS,
    repeats: int = 15,
    min_repeats: int = MIN_REPEATS,
    rel_tol: float = 0.02,
    stop_above_us: float = None,
    budget: Optional[Budget] = None,
    eager_stop: bool = True,
    eager_stop_above_us: Optional[float] = None,
    ran_before: bool = False,
    replay_target_us: float = REPLAY_TARGET_US,
    first_us: Optional[float] = None,
) -> Timing:
    """GPU time per call by CUDA-graph replay (see the module doc).

    Two eager calls come first (`eager_us`; fewer for a call that ran before, none when an earlier
    first call's time, ``first_us``, is within the eager bound); the graph holds `calls_for` that
    time back-to-back calls. Replays repeat until the median is stable or ``repeats`` is reached,
    and stop as soon as the median is above ``stop_above_us``: autotune's early stop, where one
    sample can be enough to know a plan is slower.

    Args:
        fn: launches one call on ``stream``.
        stream: a non-blocking stream.
        calls: the most calls in the graph.
        warmup: replays before the timed ones.
        repeats: the most timed replays.
        min_repeats: replays before the median may be called stable.
        rel_tol: stable when the last two medians are within this fraction.
        stop_above_us: stop once the median is above this, in microseconds.
        budget: checked between the parts (warm-up, each captured call, each replay); a spent budget
            raises `labkit.TimedOut`, except after the first sample, where it ends the repeats.
        eager_stop: raise `TooSlow`, without capturing, when the eager call alone is over its
            bound: ``eager_stop_above_us``, else `EAGER_STOP_FACTOR` x ``stop_above_us``.
        eager_stop_above_us: the eager call's own bound, in microseconds. One eager call of a
            short convolution is bound by the host's launch (about 15 us) and a replay is not, so
            a bound from another call's eager time compares like with like.
        ran_before: the call ran in this process before (its kernels are loaded): a first eager
            call within the eager bound is its eager time (no second call), and one already
            `FIRST_CALL_MARGIN_US` over the bound raises `TooSlow` without a second call (a
            convolution's slow plan can take tens of milliseconds a call).
        replay_target_us: the calls' time a graph holds, in microseconds (`calls_for`).
        first_us: with ``ran_before``, that earlier first call's GPU time, in microseconds:
            within the eager bound it is the eager time, with no eager call here
            (``eager_reused``). Over it, the eager calls are made as without it: a first launch
            in a process loads the call's kernels, which added up to 74 ms to a plan's run in
            the checks of ResNet-50's first layers on the H200, so it never stops a plan.

    Returns:
        A `Timing`; ``samples`` says how many replays were timed.
    """
    _positive("repeats", repeats)
    _positive("calls", calls)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    checkpoint()
    eager_bound = eager_stop_above_us
    if eager_bound is None and stop_above_us is not None:
        eager_bound = EAGER_STOP_FACTOR * stop_above_us
    first_stop = enough = None
    if eager_stop and ran_before and eager_bound is not None:
        first_stop, enough = eager_bound + FIRST_CALL_MARGIN_US, eager_bound
    reused = enough is not None and first_us is not None and first_us <= enough  # NaN: False
    one = first_us
    if not reused:
        one = eager_us(fn, stream, start, end, first_stop_us=first_stop, enough_us=enough)
    if eager_stop and eager_bound is not None and one > eager_bound:
        raise TooSlow(one, eager_bound)
    if budget is not None:
        budget.check("warm-up (eager calls)")
    calls = calls_for(one, calls, target_us=replay_target_us)
    t0 = time.perf_counter()
    graph = capture(fn, stream, calls, budget)
    captured_s = time.perf_counter() - t0
    for _ in range(warmup):
        graph.launch(stream)
        if budget is not None and budget.over:
            break
    stream.synchronize()
    if budget is not None:
        budget.check("replay warm-up")
    samples, last = [], None
    for _ in range(repeats):
        samples.append(_replay_us(graph, stream, start, end, calls))
        med = statistics.median(samples)
        if stop_above_us is not None and med > stop_above_us:
            break
        if budget is not None and budget.over:
            break
        if len(samples) >= min_repeats:
            if last is not None and abs(med - last) <= rel_tol * med:
                break
            last = med
    timing = dict(eager_us=one, capture_s=captured_s, eager_reused=reused)
    return _summarise("graph_replay", samples, calls, **timing)


def replay_timer(graph: cupy.cuda.Graph, stream: cupy.cuda.Stream, calls: int, replays: int = 10):
    """A function that times replays of a captured graph, for alternating comparisons with another library.

    Args:
        graph: a graph of ``calls`` convolutions (`capture`).
        stream: the stream it replays on.
        calls: the convolutions in the graph.
        replays: replays per measurement.

    Returns:
        A function with no arguments that returns the median GPU microseconds per convolution.
    """
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    graph.launch(stream)

    def median_us() -> float:
        return statistics.median(_replay_us(graph, stream, start, end, calls) for _ in range(replays))

    return median_us


def back_to_back(
    fn: Callable[[], None], stream: cupy.cuda.Stream, *, calls: int = 50, warmup: int = 5, repeats: int = 7
) -> Timing:
    """GPU time per call for Python launches in a row, between two events.

    Args:
        fn: launches one call on ``stream``.
        stream: the stream.
        calls: launches per repeat.
        warmup: launches before the timed ones.
        repeats: timed repeats.

    Returns:
        A `Timing`, in microseconds per call.
    """
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


def host_dispatch(
    fn: Callable[[], None], stream: cupy.cuda.Stream, *, calls: int = 100, repeats: int = 7
) -> Timing:
    """Host time per launch: a host clock around launches, synchronising only between repeats.

    The queue never fills, and nothing waits on the GPU inside the timed loop.

    Args:
        fn: launches one call on ``stream``.
        stream: the stream.
        calls: launches per repeat.
        repeats: timed repeats.

    Returns:
        A `Timing`, in host microseconds per launch.
    """
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
