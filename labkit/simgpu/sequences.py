"""The same call sequences on any device, live or simulated: what ``bench sim-fidelity`` compares.

`run_sequence` runs one workspace strategy over a workload (`labkit.gpu.workloads`) on 1, 2 or 4
streams that share the strategy, launched from Python (call by call, the streams in turn) or as CUDA
graphs (each stream's pass captured once, then the graphs launched back to back). A warm-up pass
comes first (first allocations); the row's counters are the timed pass's (with graphs: the
capture's, where the strategy was asked), its peak covers all.
`race` runs lesson 06's race on a simulated GPU: ``streams`` streams sharing one scratchpad (or
one each), `RACE_CONVS` calls per stream per round, counting the calls the sanitizer marks corrupt.

The code is the device's: only the seam (`labkit.gpu.device`) and the `Runner`. Host time is the
device's clock around the launches; GPU time runs from the start of the timed pass to the end of
its last call: two CUDA events live, the simulated calls' own times simulated (an event there
would cost host time the recordings lack). Microseconds, bytes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List

from ..errors import InvalidSpec
from ..gpu import device as devices
from ..gpu import workloads, workspace
from ..gpu.runner import Runner
from .device import SimDevice

LAUNCHES = ("python", "graph")
STREAMS = (1, 2, 4)
#: the workloads the fidelity compares
WORKLOADS = ("one_conv", "resnet50_fp16_nhwc")
#: calls per stream in one round of the race (lesson 06's batch)
RACE_CONVS = 64


def _check(launch: str, streams: int) -> None:
    if launch not in LAUNCHES:
        raise InvalidSpec("launch", launch, f"must be one of {', '.join(LAUNCHES)}")
    if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= 8:
        raise InvalidSpec("streams", streams, "must be an int from 1 to 8")


def _sync(runners: List[Runner]) -> None:
    for r in runners:
        r.stream.synchronize()


def _timed_pass(device, runners: List[Runner], seq, launch: str, graphs) -> tuple:
    """(host us, GPU us) of one pass: every runner's ``seq``, from Python in turn, or its graph."""
    _sync(runners)
    live = not isinstance(device, SimDevice)
    origin = device.record_event(runners[0].stream) if live else None
    first, t_gpu = (None, None) if live else (len(device.calls), device.host_now)
    t0 = device.clock_us()
    if launch == "graph":
        for g, r in zip(graphs, runners):
            g.launch(r.stream)
    else:
        for spec in seq:
            for r in runners:
                r.run(spec)
    host = device.clock_us() - t0
    if live:
        ends = [device.record_event(r.stream) for r in runners]
        _sync(runners)
        gpu = max(device.elapsed_us(origin, e) for e in ends)
    else:
        _sync(runners)
        timed = device.calls[first:]
        known = all(c.timing_known for c in timed)
        gpu = max(c.end for c in timed) - t_gpu if timed and known else math.nan
    return host, gpu


def run_sequence(
    device,
    strategy: str,
    options: dict,
    workload: str,
    *,
    streams: int = 1,
    launch: str = "python",
    repeats: int = 2,
) -> dict:
    """One strategy over one workload on ``device``: one row.

    Args:
        device: a `labkit.gpu.device.Device` (live or simulated).
        strategy: a strategy's name (`labkit.gpu.workspace.STRATEGIES`).
        options: its options.
        workload: one of `labkit.gpu.workloads.WORKLOADS` but "pressure".
        streams: streams sharing the strategy.
        launch: "python" or "graph".
        repeats: passes over the workload in each of the warm-up and the timed pass.

    Returns:
        workload, strategy, streams, launch, calls (every stream's), alloc_calls, hits, misses (the
        timed pass), warmup_alloc_calls, peak_bytes, host_us_per_call, gpu_us_per_call, source (the
        device's provenance label), status and reason; simulated also corrupt, findings and missing
        (what the recording lacked for the timed pass: its times are then NaN).
    """
    _check(launch, streams)
    if workload == "pressure":
        raise InvalidSpec("workload", workload, "pressure needs the live GPU's free memory; not a sequence")
    seq = workloads.sequence(workload, repeats)
    sim = isinstance(device, SimDevice)
    with devices.use(device):
        made = workspace.make(strategy, **options)
    row = dict(
        workload=workload,
        strategy=made.describe(),
        streams=streams,
        launch=launch,
        calls=len(seq) * streams,
        source=device.provenance["label"],
    )
    runners = [Runner(made, seed=i) for i in range(streams)]  # each its own stream, closed with it
    before = len(device.findings) if sim else 0
    try:
        for spec in dict.fromkeys(seq):
            for r in runners:
                r.operands(spec)
        for spec in seq:  # warm-up: first allocations, every stream in turn
            for r in runners:
                r.run(spec)
        _sync(runners)
        if sim:  # what the warm-up lacked (e.g. a first cudaMalloc's time) does not reach the timed pass
            device.rebase()
            lacked = len(device.lacked)
        warm = dataclasses.replace(made.stats)
        graphs = None
        if launch == "graph":
            graphs = [device.capture(lambda r=r: [r.run(spec) for spec in seq], r.stream) for r in runners]
        first_call = len(device.calls) if sim else 0
        host, gpu = _timed_pass(device, runners, seq, launch, graphs)
        st = made.stats
        row.update(
            alloc_calls=st.alloc_calls - warm.alloc_calls,
            hits=st.hits - warm.hits,
            misses=st.misses - warm.misses,
            warmup_alloc_calls=warm.alloc_calls,
            peak_bytes=st.peak_held_bytes,
            host_us_per_call=host / row["calls"],
            gpu_us_per_call=gpu / row["calls"],
            status="ok",
            reason="",
        )
        if sim:
            row["corrupt"] = sum(c.corrupt for c in device.calls[first_call:])
            row["missing"] = "; ".join(dict.fromkeys(device.lacked[lacked:]))
    except Exception as exc:  # noqa: BLE001  (a live GPU's own refusal, e.g. in a capture, is a result)
        row.update(status=type(exc).__name__, reason=str(exc)[:300])
    finally:
        try:
            _sync(runners)
            for r in runners:
                r.close()
        except Exception as exc:  # noqa: BLE001
            row["reason"] = (row.get("reason") or "") + f" close: {type(exc).__name__}: {exc}"[:300]
    if sim:
        found = device.findings[before:]
        row["findings"] = "; ".join(sorted({f.kind for f in found}))
    return row


def race(
    shared: bool, launch: str = "graph", *, streams: int = 2, min_runs: int = 1024, recording=None
) -> dict:
    """Lesson 06's race on a simulated GPU: ``streams`` streams, one scratchpad for all (``shared``)
    or one each, `RACE_CONVS` calls of `labkit.gpu.workloads.RACE_SPEC` per stream per round.

    Args:
        shared: one scratchpad for every stream.
        launch: "graph" (each stream's calls as one CUDA graph) or "python".
        streams: streams (>= 2).
        min_runs: the fewest calls in all.
        recording: the recording simulated; default the one in use.

    Returns:
        shared, launch, streams, runs, corrupted (calls whose output the sanitizer marks corrupt),
        races and handovers (the sanitizer's findings), workspace_bytes, source, missing (what the
        rounds lacked) and timing_known (False: the counts rest on a stopped clock).
    """
    _check(launch, streams)
    if streams < 2:
        raise InvalidSpec("streams", streams, "a race needs 2 streams or more")
    device = SimDevice(recording)
    with devices.use(device):
        pad = workspace.Scratchpad(shared=shared)
    runners = [Runner(pad, device.stream(), seed=i) for i in range(streams)]
    spec = workloads.RACE_SPEC
    for r in runners:  # first allocations and bindings, outside the rounds
        r.run(spec)
    _sync(runners)
    device.rebase()  # what the warm-up lacked does not reach the rounds
    lacked = len(device.lacked)
    graphs = [device.capture(lambda r=r: [r.run(spec) for _ in range(RACE_CONVS)], r.stream) for r in runners]
    rounds = -(-min_runs // (streams * RACE_CONVS))
    first, found = len(device.calls), len(device.findings)
    for _ in range(rounds):
        if launch == "graph":
            for g, r in zip(graphs, runners):
                g.launch(r.stream)
        else:
            for _ in range(RACE_CONVS):
                for r in runners:
                    r.run(spec)
        _sync(runners)
    calls = device.calls[first:]
    kinds = [f.kind for f in device.findings[found:]]
    out = dict(
        shared=bool(shared),
        launch=launch,
        streams=streams,
        runs=len(calls),
        corrupted=sum(c.corrupt for c in calls),
        races=kinds.count("race"),
        handovers=kinds.count("handover"),
        workspace_bytes=runners[0].device.graph(spec).default_plan.workspace_bytes,
        source=device.provenance["label"],
    )
    out["missing"] = "; ".join(dict.fromkeys(device.lacked[lacked:]))
    out["timing_known"] = all(c.timing_known for c in calls)
    for r in runners:
        r.close()
    return out
