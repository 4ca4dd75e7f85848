"""Checking a workspace strategy somebody wrote (lesson 02's hands-on), beside the built-in ones.

`check_strategy` runs a `labkit.gpu.workspaces.workspace.Strategy` through the `Runner` on real convolutions
and says four things, each measured:

* **outputs**: every call's output against the float64 reference (`labkit.gpu.cudnn.reference_runs.expected`);
  a strategy that hands out fewer bytes than the plan asks is stopped by the `Runner` before
  cuDNN runs (`WorkspaceTooSmall`) and named;
* **memory**: the device memory the strategy held at its peak (cudaMemGetInfo at each ``get`` of
  the first pass, against the free memory before the strategy was made) and what its books say;
* **leaks**: device memory still taken after ``close()`` (the same measurement);
* **races**: two streams each run a call; the first stream is held busy (`HOLD_US`) so its call
  is still queued when the second stream's call gets its workspace. A buffer handed to the second
  call that overlaps the first call's, while the first call's kernels had not run yet, is a race:
  the two calls may write the same bytes at once. Whether they did is timing; that they could is
  what is named (CUDA events say when each call could start and when each was done).

A workspace belongs to its call from ``get`` until the kernels that use it have run on the call's
stream, not until ``put`` (``put`` comes as soon as the kernels are queued). On one stream that
is automatic: anything queued after runs after. Across streams only an event, a synchronisation
or stream-ordered allocation (cudaMallocAsync) orders them. Sizes in bytes, times in microseconds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import cupy

from ...errors import InvalidSpec, LabkitError
from ...spec import ConvSpec
from ..buffers import memory
from ..checks import reference
from ..cudnn import frontend, graph_cache, reference_runs
from ..host import lock
from . import workloads, workspace
from .runner import Runner, WorkspaceTooSmall

#: the convolutions the check runs, in order: the NHWC one (a tiny workspace) before the NCHW one
#: of the same dims (megabytes), so a cache keyed by dims alone hands out a buffer too small
CHECK_SPECS = (
    ConvSpec(N=8, C=64, H=56, W=56, K=64, dtype="fp16", layout="NHWC"),
    ConvSpec(N=8, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW"),
    ConvSpec(N=16, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW"),
    ConvSpec(N=8, C=64, H=56, W=56, K=64, dtype="fp32", layout="NCHW"),
)
#: passes over `CHECK_SPECS` in each of the warm-up and the timed run
PASSES = 3
#: how long the first stream is kept busy before its call in the race test (microseconds)
HOLD_US = 2000.0
#: device memory that may differ after close() without it being a leak (driver noise)
LEAK_SLACK_BYTES = 2 << 20

_SPIN_SOURCE = r"""
extern "C" __global__ void labkit_hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
_spin = None


def _hold(stream, us: float) -> None:
    """Keep ``stream`` busy for ``us`` microseconds (one GPU thread reading the global timer)."""
    global _spin
    if _spin is None:
        _spin = cupy.RawKernel(_SPIN_SOURCE, "labkit_hold")
    with stream:
        _spin((1,), (1,), (cupy.uint64(int(us * 1000)),))


@dataclass
class _Call:
    """One workspace handed out: on which stream, where, how many bytes, and two events on its
    stream: ``start`` after ``get`` returned (the call's kernels may begin), ``done`` recorded at
    ``put`` (after its kernels were queued: complete once they have run)."""

    stream: int
    ptr: int
    nbytes: int
    start: object
    done: object = None


class _Watched(workspace.Strategy):
    """Passes every call to ``inner`` and notes what it handed out (`_Call`)."""

    def __init__(self, inner: workspace.Strategy, base_free: int = 0):
        super().__init__(device=inner.device)
        self.inner, self.name = inner, inner.name
        self.calls: List[_Call] = []
        #: device memory free before the strategy was made; the most taken since, seen at a get
        self.base_free, self.peak = base_free, 0

    def _get(self, req):
        ptr, got = self.inner.get(req)
        if self.base_free:
            self.peak = max(self.peak, self.base_free - memory.free_bytes())
        start = cupy.cuda.Event()
        start.record(self.device.stream_of(req.stream_ptr))
        self.calls.append(_Call(req.stream_ptr, int(ptr or 0), int(req.nbytes), start))
        return ptr, got

    def _put(self, req, ptr):
        done = cupy.cuda.Event()
        done.record(self.device.stream_of(req.stream_ptr))
        for c in reversed(self.calls):
            if c.stream == req.stream_ptr and c.done is None:
                c.done = done
                break
        self.inner.put(req, ptr)

    def _close(self):
        self.inner.close()


@dataclass
class Race:
    """A buffer handed to a call on one stream while a call on another stream still needed it.

    Attributes:
        first_stream: the stream whose call held the buffer first (its handle).
        second_stream: the stream whose call got it too soon.
        ptr: the first device address both workspaces cover.
        overlap_bytes: how many bytes they share.
        lead_us: how long before the first call's kernels were done the second call could start (us).
    """

    first_stream: int
    second_stream: int
    ptr: int
    overlap_bytes: int
    lead_us: float


@dataclass
class Verdict:
    """What `check_strategy` found for one strategy (bytes, microseconds).

    Attributes:
        strategy: its name.
        calls: workspaces it handed out in the one-stream passes.
        outputs_ok: every output within its dtype's tolerance of float64.
        worst_rel_error: the largest relative error of an output (inf for NaN).
        too_small: the `Runner`'s words when a workspace was smaller than the plan asked; else empty.
        error: what the strategy raised; else empty.
        peak_bytes: the most device memory taken at a get of the warm-up (cudaMemGetInfo).
        books_peak_bytes: the most its own books say it held (``stats.peak_held_bytes``).
        largest_request_bytes: the largest workspace a call asked for.
        leaked_bytes: device memory still taken after ``close()``.
        books_held_after_close: what its books still hold after ``close()`` (0 for the pools).
        races: each `Race` of the two-stream test.
        host_us_per_call: host time per call of the timed pass (median).
    """

    strategy: str
    calls: int = 0
    outputs_ok: bool = False
    worst_rel_error: float = float("nan")
    too_small: str = ""
    error: str = ""
    peak_bytes: int = 0
    books_peak_bytes: int = 0
    largest_request_bytes: int = 0
    leaked_bytes: int = 0
    books_held_after_close: int = 0
    races: List[Race] = field(default_factory=list)
    host_us_per_call: float = float("nan")

    @property
    def leaks(self) -> bool:
        return self.leaked_bytes > LEAK_SLACK_BYTES or self.books_held_after_close > 0

    @property
    def ok(self) -> bool:
        """Right outputs, no error, nothing left after close, no race."""
        return self.outputs_ok and not (self.too_small or self.error or self.leaks or self.races)


def _make(strategy) -> workspace.Strategy:
    """An instance from a `Strategy` subclass, a factory, or an instance."""
    made = strategy() if callable(strategy) and not isinstance(strategy, workspace.Strategy) else strategy
    if not isinstance(made, workspace.Strategy):
        raise InvalidSpec(
            "strategy",
            strategy,
            "must be a labkit.gpu.workspaces.workspace.Strategy subclass (or make one when called)",
        )
    return made


def _free_now() -> int:
    cupy.cuda.runtime.deviceSynchronize()
    cupy.get_default_memory_pool().free_all_blocks()
    return memory.free_bytes()


class _Bench:
    """What every strategy's check shares: graphs, inputs and their float64 answers, two streams
    with their cuDNN handles, all made once before any strategy's memory is counted."""

    def __init__(self, specs=CHECK_SPECS):
        self.specs = tuple(specs)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
        self.operands = [{}, {}]  # per stream: (spec key, epilogue) -> Operands (different seeds)
        self.expected = {}
        for spec in self.specs:
            graph_cache.get_graph(spec)
        for i, s in enumerate(self.streams):  # inputs, handles, and the kernels' first load
            with Runner(workspace.Preallocated(), s, seed=i, operands=self.operands[i]) as runner:
                for spec in self.specs:  # closed (its stream synchronised) even when a reference fails
                    runner.run(spec)
                    self.expected[i, spec.key] = reference_runs.expected(spec, runner.operands(spec))

    def close(self) -> None:
        for s in self.streams:
            frontend.release_handle(s)
        self.operands = [{}, {}]
        self.expected.clear()
        cupy.get_default_memory_pool().free_all_blocks()

    def error_of(self, i: int, spec: ConvSpec, runner: Runner) -> float:
        """The relative error of stream ``i``'s last output of ``spec`` against float64 (inf for NaN)."""
        got = runner.operands(spec).output()
        err = reference.relative_error(got, self.expected[i, spec.key])
        return float("inf") if err != err else err


def _one_stream(bench: _Bench, strategy, verdict: Verdict, base_free: int) -> None:
    """Warm-up pass (memory sampled), timed pass, then a checked pass (each output against float64)."""
    watched = _Watched(strategy, base_free)
    runner = Runner(watched, bench.streams[0], seed=0, operands=bench.operands[0])
    try:  # (the runner is not closed: check_strategy closes the strategy once, and the bench its inputs)
        seq = [s for _ in range(PASSES) for s in bench.specs]
        for spec in seq:  # warm-up: first allocations; memory seen at every get
            runner.run(spec)
        bench.streams[0].synchronize()
        verdict.peak_bytes = watched.peak
        watched.base_free = 0  # the timed pass: nothing but the calls
        times = []
        for spec in seq:
            t0 = time.perf_counter()
            runner.run(spec)
            times.append((time.perf_counter() - t0) * 1e6)
        bench.streams[0].synchronize()
        verdict.host_us_per_call = statistics.median(times)
        errors = {}
        for spec in bench.specs:
            runner.operands(spec).poison_output()
            runner.run(spec)
            bench.streams[0].synchronize()
            errors[spec] = bench.error_of(0, spec, runner)
        verdict.worst_rel_error = max(errors.values())
        verdict.outputs_ok = all(err <= reference.tolerance_for(s) for s, err in errors.items())
        verdict.calls = len(watched.calls)
        verdict.largest_request_bytes = max((c.nbytes for c in watched.calls), default=0)
    finally:
        runner._bound.clear()


def _two_streams(bench: _Bench, strategy, verdict: Verdict, hold_us: float) -> None:
    """Stream 0 is held busy, then runs a call; stream 1 runs the same call at once."""
    watched = _Watched(strategy)
    runners = [Runner(watched, s, seed=i, operands=bench.operands[i]) for i, s in enumerate(bench.streams)]
    origin = cupy.cuda.Event()
    for s in bench.streams:
        s.synchronize()
    origin.record(bench.streams[0])
    for spec in bench.specs:
        for r in runners:
            r.operands(spec).poison_output()
        _hold(bench.streams[0], hold_us)
        runners[0].run(spec)
        runners[1].run(spec)
    for s in bench.streams:
        s.synchronize()
    at = lambda ev: cupy.cuda.get_elapsed_time(origin, ev) * 1000.0  # noqa: E731
    for i, a in enumerate(watched.calls):
        if a.done is None or not a.nbytes:
            continue
        for b in watched.calls[i + 1 :]:
            if b.stream == a.stream or not b.nbytes:
                continue
            overlap = min(a.ptr + a.nbytes, b.ptr + b.nbytes) - max(a.ptr, b.ptr)
            lead = at(a.done) - at(b.start)
            if overlap > 0 and lead > 0:
                verdict.races.append(Race(a.stream, b.stream, max(a.ptr, b.ptr), overlap, lead))
    for r in runners:
        r._bound.clear()


def check_strategy(strategy, *, hold_us: float = HOLD_US, bench: Optional[_Bench] = None) -> Verdict:
    """Run ``strategy`` through the `Runner` and say whether it is right, what it held, whether it
    leaks and whether it races (see the module docstring).

    Args:
        strategy: a `labkit.gpu.workspaces.workspace.Strategy` subclass (or anything that makes one when
            called, or an instance).
        hold_us: how long stream 0 is held busy before its call in the race test (microseconds).
        bench: graphs, inputs and streams made once for several checks (`compare`).

    Returns:
        A `Verdict`.
    """
    own = bench is None
    with lock.hold():
        bench = bench or _Bench()
        try:
            base_free = _free_now()
            made = _make(strategy)
            verdict = Verdict(getattr(made, "name", type(made).__name__))
            try:
                _one_stream(bench, made, verdict, base_free)
                if not (verdict.too_small or verdict.error):
                    _two_streams(bench, made, verdict, hold_us)
            except WorkspaceTooSmall as exc:
                verdict.too_small = str(exc)
            except LabkitError as exc:
                verdict.error = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # noqa: BLE001  (the learner's own code raised: say what)
                verdict.error = f"{type(exc).__name__}: {exc}"
            finally:
                for s in bench.streams:
                    s.synchronize()
                verdict.books_peak_bytes = int(made.stats.peak_held_bytes)
                try:
                    made.close()
                except Exception as exc:  # noqa: BLE001
                    verdict.error = verdict.error or f"close() raised {type(exc).__name__}: {exc}"
                pooled = isinstance(made, (workspace.CupyPool, workspace.AsyncPool))  # books: the pool's size
                verdict.books_held_after_close = 0 if pooled else int(made.stats.held_bytes)
                del made
                verdict.leaked_bytes = max(0, base_free - _free_now())
        finally:
            if own:
                bench.close()
    return verdict


def builtins() -> List[Callable[[], workspace.Strategy]]:
    """The built-in strategies as the benchmark runs them
    (`labkit.gpu.workspaces.workloads.BENCH_STRATEGIES`).

    Returns:
        One callable per strategy, each making a new instance.
    """
    return [lambda n=n, o=o: workspace.make(n, **o) for n, o in workloads.BENCH_STRATEGIES]


def compare(strategy, *, hold_us: float = HOLD_US) -> List[Verdict]:
    """`check_strategy` for ``strategy`` and then every built-in strategy, on one shared bench.

    Args:
        strategy: what `check_strategy` takes: a `Strategy` subclass, a maker or an instance.
        hold_us: how long stream 0 is held busy before its call in the race test (microseconds).

    Returns:
        The verdicts, ``strategy``'s first.
    """
    with lock.hold():
        bench = _Bench()
        try:
            return [check_strategy(s, hold_us=hold_us, bench=bench) for s in [strategy, *builtins()]]
        finally:
            bench.close()
