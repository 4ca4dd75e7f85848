"""``bench sim-fidelity``: its simulated half runs on the CPU (--dry-run), its comparison is right by
construction, and the fidelity table a GPU wrote (data/bench/sim_fidelity_<gpu>.csv) is read here
against the goals once it is committed."""

import math
from pathlib import Path

import pandas as pd
import pytest

from labkit.cli import main as cli
from labkit.cli import sim_calibrate, sim_fidelity
from labkit.gpu import workloads
from labkit.simgpu import sequences
from labkit.simgpu.recorded import Recorded

BENCH = Path(__file__).resolve().parents[1] / "data" / "bench"


@pytest.fixture(scope="module")
def dry():
    return sim_fidelity.run(dry_run=True, recording="h100-sxm")


def test_the_dry_run_simulates_every_configuration_and_labels_each_row(dry):
    seq = dry[dry.workload != "race"]
    n = (
        len(sequences.WORKLOADS)
        * len(workloads.BENCH_STRATEGIES)
        * len(sequences.STREAMS)
        * len(sequences.LAUNCHES)
    )
    assert len(seq) == n and len(dry[dry.workload == "race"]) == 2 * len(sim_fidelity.RACE_CASES)
    assert set(dry.source) == {"simulated from the NVIDIA H100 80GB HBM3 recording"}
    assert "live_status" not in dry or dry.live_status.isna().all()  # nothing measured
    # every configuration ran but malloc_per_call in a CUDA graph, which CUDA refuses (a cudaFree)
    refused = seq[seq.sim_status != "ok"]
    assert set(zip(refused.strategy, refused.launch)) == {("malloc_per_call", "graph")}, refused
    assert set(refused.sim_status) == {"NotCapturable"}
    assert refused.sim_reason.str.startswith("malloc_per_call (a cudaFree after every call) cannot be").all()
    one = seq[(seq.workload == "one_conv") & (seq.streams == 1) & (seq.launch == "python")].set_index(
        "strategy"
    )
    assert one.loc["preallocated", "sim_peak_bytes"] == 25_763_987  # strategies.csv's peak_bytes
    assert one.loc["async_pool", "sim_peak_bytes"] == 33_554_432
    assert not math.isnan(one.loc["malloc_per_call", "sim_host_us_per_call"])


def test_the_dry_runs_race_corrupts_with_graphs_and_a_shared_scratchpad_only(dry):
    race = dry[dry.workload == "race"]
    corrupting = {(r.strategy, r.launch, r.streams) for r in race.itertuples() if r.sim_corrupt > 0}
    assert corrupting == {("scratchpad_shared", "graph", 2), ("scratchpad_shared", "graph", 4)}


def test_compare_computes_the_goals_from_the_live_and_simulated_rows():
    base = dict(
        workload="one_conv",
        strategy="s",
        streams=1,
        launch="python",
        calls=4,
        status="ok",
        alloc_calls=2,
        warmup_alloc_calls=1,
        peak_bytes=100,
        hits=2,
        misses=0,
        source="sim",
    )
    live = dict(base, host_us_per_call=100.0, gpu_us_per_call=50.0)
    row = sim_fidelity.compare(live, dict(base, host_us_per_call=114.0, gpu_us_per_call=60.0))
    assert row["counts_exact"] and row["peak_exact"]
    assert row["host_ratio"] == pytest.approx(1.14) and row["host_within_goal"]
    assert row["gpu_ratio"] == pytest.approx(1.2) and not row["gpu_within_goal"]
    off = sim_fidelity.compare(
        live, dict(base, peak_bytes=101, alloc_calls=3, host_us_per_call=math.nan, gpu_us_per_call=50.0)
    )
    assert not off["counts_exact"] and not off["peak_exact"] and not off["host_within_goal"]
    failed = sim_fidelity.compare(dict(live, status="OutOfMemory"), dict(base, host_us_per_call=100.0))
    assert not failed["counts_exact"] and not failed["host_within_goal"]


def test_the_calibration_covers_every_size_the_sequences_allocate():
    rec = Recorded("h100-sxm")
    sizes = sim_calibrate.sizes_to_calibrate(rec)
    for n in (131, 272, 12_870_160, 25_763_987, 274_448, 1 << 30, 32 << 20):
        assert n in sizes, n


def test_without_a_gpu_the_live_run_is_refused_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")
    assert cli.main(["bench", "sim-fidelity"]) == 2
    err = capsys.readouterr().err
    assert "bench sim-fidelity" in err and "--dry-run" in err and err.count("\n") == 1
    assert cli.main(["bench", "sim-fidelity", "--dry-run", "--calibrate"]) == 2
    assert cli.main(["bench", "strategies", "--dry-run"]) == 2


FIDELITY = sorted(BENCH.glob("sim_fidelity_*.csv"))


@pytest.mark.skipif(
    not FIDELITY, reason="no data/bench/sim_fidelity_<gpu>.csv yet: run bench sim-fidelity on a GPU"
)
@pytest.mark.parametrize("path", FIDELITY, ids=[p.stem for p in FIDELITY])
def test_the_committed_fidelity_table_meets_the_goals_it_claims(path):
    """Counts and peaks exact where both sides ran; the race's verdicts as live. (Times: the table
    holds the ratios; a lesson that shows a simulated time says how far its configuration missed.)"""
    df = pd.read_csv(path)
    seq, race = df[df.workload != "race"], df[df.workload == "race"]
    both = seq[(seq.live_status == "ok") & (seq.sim_status == "ok")]
    assert len(both) and both.counts_exact.all() and both.peak_exact.all(), both[~both.counts_exact]
    assert race.race_verdict_match.all(), race[~race.race_verdict_match]


def test_bench_summary_renders_a_fidelity_table(dry, tmp_path):
    from labkit.cli import bench_summary

    sim = dry[dry.workload != "race"].head(4)
    rows = []
    for r in sim.to_dict("records"):
        side = {k[4:]: v for k, v in r.items() if k.startswith("sim_")}
        side.update({k: r[k] for k in ("workload", "strategy", "streams", "launch", "calls", "source")})
        rows.append(sim_fidelity.compare(side, side))  # a table whose live side equals the simulated
    race = dry[dry.workload == "race"].assign(race_verdict_match=True)
    pd.concat([pd.DataFrame(rows), race]).to_csv(tmp_path / "sim_fidelity_test.csv", index=False)
    page = bench_summary.render(tmp_path)
    assert "The simulated GPU against the live one" in page
    ran = sum(r["sim_status"] == "ok" for r in rows)
    assert f"{ran} of 4 with exact allocation counts" in page and "race verdicts as live: 8 of 8" in page
