"""``python -m labkit bench sim-fidelity``: the simulated GPU against the live one, same sequences.

On a GPU, each shipped strategy (`labkit.gpu.workspaces.workloads.BENCH_STRATEGIES`) runs each of
`labkit.simgpu.sequences.FIDELITY_WORKLOADS` on 1, 2 and 4 streams, launched from Python and as CUDA
graphs, twice: on this GPU (`labkit.gpu.device.cuda.CudaDevice`) and on the GPU simulated from this
GPU's shipped recording (`labkit.simgpu.SimDevice`), through the same code, timed the same way
(`labkit.simgpu.sequences.run_sequence`: a warm-up, then the median of several timed passes of at
least 20 calls per stream). Then lesson 06's race: its live experiment
(`labkit.gpu.workspaces.concurrency.scratchpad_race`) against the simulated one. One row per configuration
goes to data/bench/sim_fidelity_<gpu slug>.csv (a .json beside it: the GPU, the commit, how the sequences
ran), with the goals (`labkit.simgpu.fidelity`): allocation counts and peak bytes exact; host time
and GPU time per call within 15 %; the race corrupting in exactly the configurations that corrupt
live. It prints every row and the sentences that say where the goals are missed, and by how much.

``--calibrate`` first times what the simulator reads besides the recording on this GPU (events,
synchronisations, cudaMalloc/cudaFree by size, the pools, each sequence convolution's launch, bind,
GPU time on 1-4 streams at once, graph launches: `labkit.cli.sim_calibrate`) into
data/bench/sim_costs_<gpu slug>.csv. ``--dry-run`` runs the simulated half only, on any machine,
and writes nothing. ``--resimulate`` runs the simulated half of a committed table again with this
simulator, the sequences run as that table says, and writes it back beside the same live half: the
way to try a change of the simulator against the live numbers without a GPU. Microseconds, bytes.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import List, Optional

import pandas as pd

from ..env import environment
from ..errors import InvalidSpec
from ..gpu.device.cuda import CudaDevice
from ..gpu.host import lock
from ..gpu.workspaces import workloads
from ..simgpu import SimDevice, fidelity, sequences
from ..simgpu.recorded import Recorded
from ..store import recordings
from . import bench, sim_calibrate

GOAL = fidelity.GOAL
#: the race's configurations: (launch, streams)
RACE_CASES = (("graph", 2), ("python", 2), ("graph", 4), ("python", 4))
#: what each configuration's row holds, live and simulated
COMPARED = (
    "status",
    "alloc_calls",
    "warmup_alloc_calls",
    "peak_bytes",
    "hits",
    "misses",
    "host_us_per_call",
    "gpu_us_per_call",
    "host_us_min",
    "host_us_max",
    "gpu_us_min",
    "gpu_us_max",
)
#: how the sequences of a table written before it said so ran (one warm-up pass, one timed pass,
#: the workload twice in each, the graphs launched first in the timed pass)
OLD_SEQUENCES = dict(repeats=2, passes=1, warmup=1, graph_warmup=0)


def recording_for(gpu_name: str) -> str:
    """The shipped recording of the GPU called ``gpu_name``.

    Args:
        gpu_name: e.g. "NVIDIA H100 80GB HBM3".

    Returns:
        The recording's name; `InvalidSpec` listing the shipped ones when none is of that GPU.
    """
    recs = recordings.shipped()
    for r in recs:
        if r.metadata.get("gpu") == gpu_name:
            return r.name
    names = ", ".join(f"{r.name} ({r.metadata.get('gpu')})" for r in recs)
    raise InvalidSpec(
        "GPU", gpu_name, f"has no shipped recording to simulate (shipped: {names}); pass --recording"
    )


def configurations(workload_names=sequences.FIDELITY_WORKLOADS):
    """Every configuration the fidelity runs.

    Args:
        workload_names: the workloads.

    Yields:
        (workload, strategy, options, streams, launch).
    """
    for w in workload_names:
        for name, opts in workloads.BENCH_STRATEGIES:
            for streams in sequences.STREAMS:
                for launch in sequences.LAUNCHES:
                    yield w, name, opts, streams, launch


def compare(live: Optional[dict], sim: dict) -> dict:
    """One configuration's row: the live and simulated figures side by side, and the goals met.

    Args:
        live: `run_sequence` 's row on the GPU (None in a dry run).
        sim: its row on the simulated GPU.

    Returns:
        workload, strategy, streams, launch, calls, passes; ``live_<x>`` and ``sim_<x>`` for each of
        `COMPARED`; ``counts_exact``, ``peak_exact``, ``status_as_live``, ``host_ratio``/``gpu_ratio``
        (simulated over live) and ``host_within_goal``/``gpu_within_goal``; ``sim_missing``,
        ``sim_findings``, ``sim_corrupt``; ``source`` (the simulated rows' provenance).
    """
    row = {k: sim.get(k) for k in ("workload", "strategy", "streams", "launch", "calls", "passes")}
    for side, r in (("live", live or {}), ("sim", sim)):
        for k in COMPARED:
            row[f"{side}_{k}"] = r.get(k)
    row.update(
        sim_missing=sim.get("missing", ""),
        sim_findings=sim.get("findings", ""),
        sim_corrupt=sim.get("corrupt"),
        sim_reason=sim.get("reason", ""),
        source=sim.get("source"),
    )
    if live is not None:
        row["live_reason"] = live.get("reason", "")
        both = live.get("status") == sim.get("status") == "ok"
        row["status_as_live"] = live.get("status") == sim.get("status")
        row["counts_exact"] = both and all(live[k] == sim[k] for k in ("alloc_calls", "warmup_alloc_calls"))
        row["peak_exact"] = both and live["peak_bytes"] == sim["peak_bytes"]
        for t in ("host", "gpu"):
            a, b = (live.get(f"{t}_us_per_call"), sim.get(f"{t}_us_per_call")) if both else (None, None)
            ratio = b / a if a and b is not None and not math.isnan(b) else math.nan
            row[f"{t}_ratio"] = ratio
            row[f"{t}_within_goal"] = bool(abs(ratio - 1) <= GOAL) if not math.isnan(ratio) else False
    return row


def race_rows(recorded: Recorded, live: bool) -> List[dict]:
    """Lesson 06's race, simulated and measured now, per scratchpad and configuration.

    Args:
        recorded: the recording the simulator reads.
        live: also run the race on this GPU.

    Returns:
        One row per (launch, streams, scratchpad): the simulated corrupted outputs and, live, the
        measured ones and whether the verdicts match.
    """
    rows = []
    for launch, streams in RACE_CASES:
        for shared in (True, False):
            sim = sequences.race(shared, launch, streams=streams, recording=recorded)
            row = dict(
                workload="race",
                strategy="scratchpad_shared" if shared else "scratchpad_per_stream",
                streams=streams,
                launch=launch,
                calls=sim["runs"],
                sim_corrupt=sim["corrupted"],
                sim_missing=sim["missing"],
                source=sim["source"],
            )
            if live:
                from ..gpu.workspaces import concurrency  # heavy: imports CuPy

                try:
                    with lock.hold():
                        got = concurrency.scratchpad_race(
                            shared=shared, launch=launch, streams=streams, min_runs=1024
                        )
                except Exception as exc:  # noqa: BLE001  (said in the row; the other rows go on)
                    row["live_reason"] = f"{type(exc).__name__}: {exc}"[:300]
                    rows.append(row)
                    continue
                row.update(live_corrupt=got.mismatches_bitwise, live_calls=got.runs)
                row["race_verdict_match"] = (got.mismatches_bitwise > 0) == (sim["corrupted"] > 0)
            rows.append(row)
    return rows


def run(
    *,
    dry_run: bool = False,
    recording: Optional[str] = None,
    passes: int = sequences.PASSES,
    name: Optional[str] = None,
    calibrate: bool = False,
) -> pd.DataFrame:
    """The fidelity table (see the module docstring); written to data/bench unless ``dry_run``.

    Args:
        dry_run: the simulated half only (no GPU needed), nothing written.
        recording: the shipped recording to simulate; default this GPU's (`recording_for`).
        passes: timed passes per configuration (their median is the row's).
        name: the CSV's name; default sim_fidelity_<gpu slug>.
        calibrate: time what the simulator reads on this GPU first (`labkit.cli.sim_calibrate.write`).

    Returns:
        The table, one row per configuration.
    """
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise InvalidSpec("--passes", passes, "must be an int >= 1")
    t0 = time.perf_counter()
    live_device = None
    if not dry_run:
        live_device = CudaDevice()
        recording = recording or recording_for(environment().gpu_name)
        if calibrate:
            print(f"wrote {sim_calibrate.write(recording)}", flush=True)
    recorded = Recorded(recording or recordings.current().name)
    how = dict(repeats=None, passes=passes, warmup=sequences.WARMUP, graph_warmup=1)
    rows = []
    for w, strategy, opts, streams, launch in configurations():
        kw = dict(streams=streams, launch=launch, **how)
        sim = sequences.run_sequence(SimDevice(recorded), strategy, opts, w, **kw)
        live = None
        if live_device is not None:
            with lock.hold():
                live = sequences.run_sequence(live_device, strategy, opts, w, **kw)
        rows.append(compare(live, sim))
        print(_line(rows[-1]), flush=True)
    rows += race_rows(recorded, live=live_device is not None)
    df = pd.DataFrame(rows)
    meta = {
        "gpu": recorded.gpu if dry_run else environment().gpu_name,
        "git_commit": bench.commit(),
        "simulated_recording": recorded.recording.name,
        "sequences": {**how, "min_calls": sequences.MIN_CALLS},
        "goal": GOAL,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    df.attrs["meta"] = meta
    print(summary(df), flush=True)
    if not dry_run:
        path = bench._write(df, name or bench.default_name("sim_fidelity"), meta)
        print(f"wrote {path} in {meta['wall_seconds']:.0f} s")
    return df


def resimulate(path) -> pd.DataFrame:
    """Run the simulated half of a committed fidelity table again with this simulator, the sequences
    run as the table's .json says (`OLD_SEQUENCES` when it says nothing), and write the table back
    with its live half as measured.

    Args:
        path: data/bench/sim_fidelity_<gpu>.csv.

    Returns:
        The new table.
    """
    path = Path(path)
    old = fidelity.load(path)
    meta = dict(old.attrs["meta"])
    how = dict(meta.get("sequences") or OLD_SEQUENCES)
    how.pop("min_calls", None)
    recorded = Recorded(meta.get("simulated_recording") or recording_for(meta["gpu"]))
    by_key = {(r.workload, r.strategy, int(r.streams), r.launch): r for r in old.itertuples()}
    rows = []
    for w, strategy, opts, streams, launch in configurations():
        sim = sequences.run_sequence(
            SimDevice(recorded), strategy, opts, w, streams=streams, launch=launch, **how
        )
        got = by_key.get((w, sim["strategy"], streams, launch))
        live = None if got is None else _live_side(got)
        rows.append(compare(live, sim))
        print(_line(rows[-1]), flush=True)
    for r in race_rows(recorded, live=False):
        got = by_key.get(("race", r["strategy"], int(r["streams"]), r["launch"]))
        if got is not None and getattr(got, "live_corrupt", None) == getattr(got, "live_corrupt", None):
            r.update(live_corrupt=got.live_corrupt, live_calls=got.live_calls)
            r["race_verdict_match"] = (got.live_corrupt > 0) == (r["sim_corrupt"] > 0)
        rows.append(r)
    df = pd.DataFrame(rows)
    meta.update(
        simulated_recording=recorded.recording.name,
        sequences=meta.get("sequences") or OLD_SEQUENCES,
    )
    df.attrs["meta"] = meta
    df.to_csv(path, index=False)
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    print(summary(df), flush=True)
    print(f"wrote {path}")
    return df


def _live_side(r) -> dict:
    """A committed row's live figures, as `run_sequence` gave them."""
    out = {k: getattr(r, f"live_{k}", None) for k in COMPARED}
    out = {
        k: (None if isinstance(v, float) and math.isnan(v) and k == "status" else v) for k, v in out.items()
    }
    out["reason"] = getattr(r, "live_reason", "")
    for k in ("alloc_calls", "warmup_alloc_calls", "peak_bytes", "hits", "misses"):
        if out.get(k) is not None and out[k] == out[k]:
            out[k] = int(out[k])
    return out


def _line(r: dict) -> str:
    def us(v):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"

    pairs = [
        ("allocs", "alloc_calls", str),
        ("peak", "peak_bytes", str),
        ("host us", "host_us_per_call", us),
        ("gpu us", "gpu_us_per_call", us),
    ]
    cells = "  ".join(f"{t} {f(r.get(f'live_{k}'))}/{f(r.get(f'sim_{k}'))}" for t, k, f in pairs)
    head = f"{r['workload']:>18} {str(r['strategy'])[:30]:<30} {r['streams']} {r['launch']:<6}"
    return f"{head} live/sim: {cells}  {r.get('sim_status')}"


def summary(df: pd.DataFrame) -> str:
    """How many configurations meet each goal, and by how much the others miss.

    In a dry run, it says how many simulate fully.

    Args:
        df: the fidelity table (`run`).

    Returns:
        Lines of text.
    """
    seq = df[df.workload != "race"]
    race = df[df.workload == "race"]
    lines = [f"{len(seq)} sequences, {len(race)} race configurations, simulated: {seq.source.iloc[0]}"]
    ok = seq[seq.sim_status == "ok"]
    timed = ok[ok.sim_host_us_per_call.notna()]
    lines.append(f"simulated: {len(ok)} ran, {len(timed)} with every time measured")
    lacking = sorted({m for v in seq.sim_missing.fillna("") for m in str(v).split("; ") if m})
    if lacking:
        more = f"; and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        first = "; ".join(lacking[:5])
        lines.append(
            f"the simulator lacks {len(lacking)} numbers (bench sim-fidelity --calibrate measures them): "
            f"{first}{more}"
        )
    if "counts_exact" in seq:
        lines += fidelity.sentences(df)
    return "\n".join(lines)
