"""The same call sequences on any device, live or simulated: what ``bench sim-fidelity`` compares.

`run_sequence` runs one workspace strategy over a workload (`labkit.gpu.workspaces.workloads`) on 1, 2 or 4
streams that share the strategy, launched from Python (call by call, the streams in turn) or as CUDA
graphs (each stream's pass captured once, then the graphs launched back to back). First come
``warmup`` untimed passes from Python (first allocations, bindings; a graph's first launch is untimed
too), then ``passes`` timed passes: the row gives the median pass's host time and GPU time per call,
and the fastest and slowest. A pass is at least `MIN_CALLS` calls per stream (lesson 02's 20 calls of
one_conv; one forward pass of ResNet-50, 53).
`race` runs lesson 06's race on a simulated GPU: ``streams`` streams sharing one scratchpad (or
one each), `RACE_CONVS` calls per stream per round, counting the calls the sanitizer marks corrupt.

The code is the device's: only the seam (`labkit.gpu.device`) and the `Runner`, so both devices are
timed the same way. Host time is the device's clock around a pass's launches; GPU time runs from an
event recorded on the first stream before the pass to the last of the events recorded on every
stream after it (cudaEventElapsedTime). Microseconds, bytes.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import List

from ..errors import InvalidSpec
from ..gpu import device as devices
from ..gpu.workspaces import workloads, workspace
from ..gpu.workspaces.runner import Runner
from .device import SimDevice

LAUNCHES = ("python", "graph")
STREAMS = (1, 2, 4)
#: the workloads the fidelity compares
FIDELITY_WORKLOADS = ("one_conv", "resnet50_fp16_nhwc")
#: calls per stream per round of the race (lesson 06's batch)
RACE_CONVS = 64
#: the fewest calls per stream in one pass (lesson 02's one_conv: strategies.csv calls=20)
MIN_CALLS = 20
#: timed passes per configuration, and untimed ones before them
PASSES, WARMUP = 5, 1


def _check(launch: str, streams: int) -> None:
    if launch not in LAUNCHES:
        raise InvalidSpec("launch", launch, f"must be one of {', '.join(LAUNCHES)}")
    if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= 8:
        raise InvalidSpec("streams", streams, "must be an int from 1 to 8")


def repeats_for(workload: str) -> int:
    """How many times a pass runs a workload's sequence: enough for `MIN_CALLS` calls.

    Args:
        workload: a workload's name (`labkit.gpu.workspaces.workloads`).

    Returns:
        The repeats (at least 1).
    """
    return -(-MIN_CALLS // len(workloads.sequence(workload, 1)))


def _sync(runners: List[Runner]) -> None:
    for r in runners:
        r.stream.synchronize()


def _launch(runners: List[Runner], seq, graphs) -> None:
    if graphs is not None:
        for g, r in zip(graphs, runners):
            g.launch(r.stream)
    else:
        for spec in seq:
            for r in runners:
                r.run(spec)


def _timed_pass(device, runners: List[Runner], seq, graphs, lacked: dict) -> tuple:
    """(host us, GPU us) of one pass: every runner's ``seq`` from Python in turn, or its graph. On a
    simulated GPU each pass starts its clock again (every stream is idle: rule 12); what it lacked
    goes to ``lacked``."""
    _sync(runners)
    if isinstance(device, SimDevice):
        lacked.update(dict.fromkeys(device.lacked))
        device.rebase()
    origin = device.record_event(runners[0].stream)
    t0 = device.clock_us()
    _launch(runners, seq, graphs)
    host = device.clock_us() - t0
    ends = [device.record_event(r.stream) for r in runners]
    _sync(runners)
    gpu = max(device.elapsed_us(origin, e) for e in ends)
    if isinstance(device, SimDevice):
        lacked.update(dict.fromkeys(device.lacked))
    return host, gpu


def _median(values) -> float:
    got = [v for v in values if not math.isnan(v)]
    return statistics.median(got) if len(got) == len(values) and got else math.nan


def run_sequence(
    device,
    strategy: str,
    options: dict,
    workload: str,
    *,
    streams: int = 1,
    launch: str = "python",
    repeats: int = None,
    passes: int = PASSES,
    warmup: int = WARMUP,
    graph_warmup: int = 1,
) -> dict:
    """One strategy over one workload on ``device``: one row.

    Args:
        device: a `labkit.gpu.device.Device` (live or simulated).
        strategy: a strategy's name (`labkit.gpu.workspaces.workspace.STRATEGIES`).
        options: its options.
        workload: one of `labkit.gpu.workspaces.workloads.WORKLOADS` but "pressure".
        streams: streams sharing the strategy.
        launch: "python" or "graph".
        repeats: the workload's sequence per pass; default `repeats_for` (at least `MIN_CALLS` calls).
        passes: timed passes (the row gives their median).
        warmup: untimed passes from Python before them.
        graph_warmup: untimed launches of the graphs before the timed ones (their first launch
            uploads them).

    Returns:
        workload, strategy, streams, launch, calls (per pass, every stream's), passes, alloc_calls,
        hits, misses (after the warm-up: the capture's and the timed passes'), warmup_alloc_calls,
        peak_bytes, host_us_per_call and gpu_us_per_call (the median pass's) with their _min and _max
        over the passes, source (the device's provenance label), status and reason; simulated also
        corrupt, findings and missing (what the timed passes lacked: their times are then NaN).
    """
    _check(launch, streams)
    if workload == "pressure":
        raise InvalidSpec("workload", workload, "pressure needs the live GPU's free memory; not a sequence")
    seq = workloads.sequence(workload, repeats or repeats_for(workload))
    sim = isinstance(device, SimDevice)
    if not sim:  # what an earlier configuration left in the device's pools is not this one's
        device.synchronize()
        device.release_cached()
    with devices.use(device):
        made = workspace.make(strategy, **options)
    row = dict(
        workload=workload,
        strategy=made.describe(),
        streams=streams,
        launch=launch,
        calls=len(seq) * streams,
        passes=passes,
        source=device.provenance["label"],
    )
    runners = [Runner(made, seed=i) for i in range(streams)]  # each its own stream, closed with it
    before = len(device.findings) if sim else 0
    try:
        for spec in dict.fromkeys(seq):
            for r in runners:
                r.operands(spec)
        for _ in range(warmup):  # first allocations and bindings, every stream in turn
            _launch(runners, seq, None)
        _sync(runners)
        warm = dataclasses.replace(made.stats)
        graphs = None
        if launch == "graph":
            graphs = [device.capture(lambda r=r: [r.run(spec) for spec in seq], r.stream) for r in runners]
            for _ in range(graph_warmup):
                _launch(runners, seq, graphs)
            _sync(runners)
        first_call = len(device.calls) if sim else 0
        lacked: dict = {}
        times = [_timed_pass(device, runners, seq, graphs, lacked) for _ in range(passes)]
        st = made.stats
        row.update(
            alloc_calls=st.alloc_calls - warm.alloc_calls,
            hits=st.hits - warm.hits,
            misses=st.misses - warm.misses,
            warmup_alloc_calls=warm.alloc_calls,
            peak_bytes=st.peak_held_bytes,
            status="ok",
            reason="",
        )
        for i, what in enumerate(("host", "gpu")):
            per_call = [t[i] / row["calls"] for t in times]
            row[f"{what}_us_per_call"] = _median(per_call)
            row[f"{what}_us_min"], row[f"{what}_us_max"] = min(per_call), max(per_call)
        if sim:
            row["corrupt"] = sum(c.corrupt for c in device.calls[first_call:])
            row["missing"] = "; ".join(lacked)
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
    or one each, `RACE_CONVS` calls of `labkit.gpu.workspaces.workloads.RACE_SPEC` per stream per round.

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
