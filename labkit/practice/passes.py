"""Passes of convolutions under a workspace strategy on a `labkit.practice.Practice`: the shipped
strategies set beside a learner's own (`strategy_pass`, `shipped_passes`), and a learner's
strategy checked on a simulated GPU (`check_simulated`, the simulator's answer to
`labkit.gpu.workspaces.strategy_check`, which needs a GPU).

A pass is a warm-up over the convolutions (first allocations), then the timed pass: host time
around the launches (the device's clock) and GPU time from the pass's start to its last call's
end (two CUDA events live; on a simulated GPU the calls' own simulated times, as
`labkit.simgpu.sequences` takes them: an event there costs host time the recordings lack). Memory,
simulated, is the device's own count (its free memory before and after every call, and what is
still taken after ``close()``), which a learner's strategy cannot get wrong by keeping wrong books;
live, where the inputs, outputs and cuDNN handles take device memory too, it is the strategy's books
(a learner's strategy is measured live by `labkit.gpu.workspaces.strategy_check`). Bytes, microseconds.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, List, Sequence

from ..errors import InvalidSpec
from ..gpu import device as devices
from ..gpu.workspaces import workloads, workspace
from ..gpu.workspaces.runner import Runner, WorkspaceTooSmall
from ..spec import ConvSpec
from . import findings
from .findings import Problem

#: the convolutions a learner's strategy is checked on, simulated: the base convolution in NHWC (a
#: workspace of a few bytes) before the same dims in NCHW (megabytes), so that a cache keyed by dims
#: alone hands out a buffer too small; then lesson 06's small race convolution
SIM_CHECK_SPECS = (
    ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp16", layout="NHWC"),
    workloads.ONE_CONV,
    workloads.RACE_SPEC,
)
#: passes over the convolutions in the warm-up and in the timed pass
PASSES = 3


@dataclass
class PassResult:
    """One strategy's pass (bytes, microseconds).

    Attributes:
        strategy: its name (``describe()``).
        calls: calls in the timed pass.
        peak_bytes: the most device memory it held at once (simulated: the device's count; live:
            its books).
        alloc_calls: its allocations, warm-up and timed pass.
        timed_alloc_calls: its allocations in the timed pass (steady state).
        host_us_per_call: host time per call of the timed pass (median).
        gpu_us: GPU time of the timed pass.
        leaked_bytes: device memory still taken after ``close()`` (live: what its books still hold).
        problems: what the sanitizer (simulated) or the Runner found.
        error: what the strategy raised, if anything.
        plans: (convolution, plan index, workspace bytes) of each call of the timed pass.
        corrupt: calls whose output the simulator marked corrupt (a race or a bad workspace); 0 live.
    """

    strategy: str
    calls: int = 0
    peak_bytes: int = 0
    alloc_calls: int = 0
    timed_alloc_calls: int = 0
    host_us_per_call: float = math.nan
    gpu_us: float = math.nan
    leaked_bytes: int = 0
    problems: List[Problem] = field(default_factory=list)
    error: str = ""
    plans: list = field(default_factory=list)
    corrupt: int = 0

    @property
    def ok(self) -> bool:
        """No error, no problem, no wrong output."""
        return not (self.error or self.problems or self.corrupt)


def _make(strategy, device) -> workspace.Strategy:
    with devices.use(device):
        made = strategy() if callable(strategy) and not isinstance(strategy, workspace.Strategy) else strategy
    if not isinstance(made, workspace.Strategy):
        raise InvalidSpec("strategy", strategy, "must be a labkit.gpu.workspaces.workspace.Strategy subclass")
    return made


def _gpu_us(practice, runners, first: int, t0: float, origin) -> float:
    """The timed pass's GPU time: its last call's end less its start."""
    dev = practice.device
    if practice.simulated:
        for r in runners:
            r.stream.synchronize()
        calls = dev.calls[first:]
        known = calls and all(c.timing_known for c in calls)
        return max(c.end for c in calls) - t0 if known else math.nan
    ends = [dev.record_event(r.stream) for r in runners]
    for r in runners:
        r.stream.synchronize()
    return max(dev.elapsed_us(origin, e) for e in ends)


def strategy_pass(
    strategy, specs: Sequence[ConvSpec], practice, *, streams: int = 1, passes: int = 1, warm: bool = True
) -> PassResult:
    """Run ``specs`` under ``strategy`` on ``practice``'s device: a warm-up, then the timed pass.

    Args:
        strategy: a `Strategy` subclass, a factory, or an instance.
        specs: the convolutions, in order.
        practice: the `labkit.practice.Practice` (its device is used; a fresh one per strategy keeps
            each strategy's memory its own).
        streams: streams sharing the strategy (each call of the pass runs on every stream in turn).
        passes: passes over ``specs`` in the warm-up and in the timed pass.
        warm: warm up first; False times the first pass, from nothing held.

    Returns:
        A `PassResult`.
    """
    dev, sim = practice.device, practice.simulated
    mark = findings.mark(practice)
    base_free = dev.free_bytes()
    made = _make(strategy, dev)
    out = PassResult(getattr(made, "describe", lambda: type(made).__name__)())
    runners = [Runner(made, seed=i) for i in range(streams)]
    seq = [s for _ in range(passes) for s in specs]
    first_call = len(dev.calls) if sim else 0
    try:
        for spec in seq if warm else ():
            for r in runners:
                r.run(spec)
                if sim:
                    out.peak_bytes = max(out.peak_bytes, base_free - dev.free_bytes())
        for r in runners:
            r.stream.synchronize()
        practice.waited()
        first = len(dev.calls) if sim else 0
        warm_allocs = made.stats.alloc_calls
        origin = None if sim else dev.record_event(runners[0].stream)
        t_gpu, times = dev.clock_us(), []
        for spec in seq:
            for r in runners:
                t0 = dev.clock_us()
                rec = r.run(spec)
                times.append(dev.clock_us() - t0)
                if sim:
                    out.peak_bytes = max(out.peak_bytes, base_free - dev.free_bytes())
                out.plans.append((spec.label, rec.plan_index, rec.workspace_bytes))
        out.calls = len(times)
        out.timed_alloc_calls = made.stats.alloc_calls - warm_allocs
        out.host_us_per_call = statistics.median(times)
        out.gpu_us = _gpu_us(practice, runners, first, t_gpu, origin)
    except WorkspaceTooSmall as exc:
        out.problems.append(Problem("too_small", str(exc), exc.needed - exc.got))
    except Exception as exc:  # noqa: BLE001  (a learner's strategy raised: say what)
        out.error = f"{type(exc).__name__}: {exc}"
    finally:
        _close(runners, made, out)
    out.alloc_calls = made.stats.alloc_calls
    out.peak_bytes = max(out.peak_bytes, int(made.stats.peak_held_bytes))  # a buffer held only in a call
    pooled = isinstance(made, (workspace.CupyPool, workspace.AsyncPool))  # books: the pool's size
    books = 0 if pooled else int(made.stats.held_bytes)
    out.leaked_bytes = max(0, base_free - dev.free_bytes()) if sim else books
    out.problems += findings.collect(practice, mark)
    if sim:
        out.corrupt = sum(c.corrupt for c in dev.calls[first_call:])
    return out


def _close(runners: List[Runner], made, out: PassResult) -> None:
    try:
        for r in runners:
            r.close()
    except Exception as exc:  # noqa: BLE001
        out.error = out.error or f"close() raised {type(exc).__name__}: {exc}"


def race_pass(strategy, specs: Sequence[ConvSpec], practice) -> PassResult:
    """Two streams share ``strategy``; each convolution runs on the first stream, then at once on
    the second, while the first call is still in flight (its kernels take longer than a launch):
    the sanitizer names a buffer the two calls share with nothing ordering them.

    Args:
        strategy: a `Strategy` subclass, a factory, or an instance.
        specs: the convolutions.
        practice: a `Practice` on a simulated GPU.

    Returns:
        A `PassResult` (its problems hold the races).
    """
    return strategy_pass(strategy, specs, practice, streams=2)


def shipped_passes(
    specs: Sequence[ConvSpec],
    fresh: Callable[[], object],
    *,
    warm: bool = True,
    strategies: Sequence[tuple] = workloads.BENCH_STRATEGIES,
) -> List[PassResult]:
    """Every shipped strategy (as the benchmark runs them) over ``specs``, each on a fresh device.

    Args:
        specs: the convolutions, in order.
        fresh: makes a fresh `Practice` of the kind in use.
        warm: time a pass after a warm-up (False: the first pass, from nothing held).
        strategies: (name, options) per strategy, as `labkit.gpu.workspaces.workspace.make` takes
            them (default the benchmark's, `labkit.gpu.workspaces.workloads.BENCH_STRATEGIES`).

    Returns:
        One `PassResult` per strategy, in the order of ``strategies``.
    """
    return [
        strategy_pass(lambda n=n, o=o: workspace.make(n, **o), specs, fresh(), warm=warm)
        for n, o in strategies
    ]


def check_simulated(strategy, fresh: Callable[[], object]) -> List[PassResult]:
    """A learner's strategy on a simulated GPU, then every shipped one, each the same way: one
    stream over `SIM_CHECK_SPECS` (`PASSES` times), then the same on two streams (the race test).

    Args:
        strategy: the learner's `Strategy` subclass (or a factory).
        fresh: makes a fresh simulated `Practice`.

    Returns:
        One `PassResult` per strategy, the learner's first; a result's problems and leaks are both
        passes'.
    """
    out = []
    shipped = [lambda n=n, o=o: workspace.make(n, **o) for n, o in workloads.BENCH_STRATEGIES]
    for s in [strategy, *shipped]:
        one = strategy_pass(s, SIM_CHECK_SPECS, fresh(), passes=PASSES)
        if not (one.error or any(p.kind == "too_small" for p in one.problems)):
            two = race_pass(s, SIM_CHECK_SPECS, fresh())
            one.problems += [p for p in two.problems if p.kind in ("race", "use_after_free")]
            one.corrupt += two.corrupt
            one.error = one.error or two.error
        out.append(one)
    return out
