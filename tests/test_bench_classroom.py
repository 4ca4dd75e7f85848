"""scripts/bench_classroom.py's parts that need no GPU: its command line, the learners' places on
the host's GPUs (the class hub's spread), the lock log read per GPU and the per-GPU table. The
measuring run itself is live only (scripts/gpu-classroom.sh: bench, bench2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_classroom as bench  # noqa: E402

GPUS = [dict(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3") for i in range(2)]


def test_help_names_the_gpus_option():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_classroom.py"), "--help"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "--gpus" in out.stdout and "--seconds" in out.stdout


def test_without_gpus_it_says_so(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_classroom.py"),
            "--gpus",
            "2",
            "--out",
            str(tmp_path / "x.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "--gpus 2: NVML sees 0 GPU(s) on this host" in out.stderr, out.stderr


def test_eight_learners_on_two_gpus_are_four_and_four(tmp_path):
    places = bench.placements(8, GPUS, tmp_path / "gpus.json")
    by_gpu = {}
    for i, gpu, env in places:
        assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid and json.loads(env["LABKIT_CLASS_GPU"])["of"] == 2
        by_gpu.setdefault(gpu.uuid, []).append(i)
    assert {k: len(v) for k, v in by_gpu.items()} == {"GPU-0": 4, "GPU-1": 4}


def test_lock_overlaps_are_counted_per_gpu(tmp_path):
    """Two processes whose turns overlap in time, each on its own GPU: no overlap on either GPU;
    the same turns on one GPU: one."""
    log = tmp_path / "lock.jsonl"

    def turns(gpu_b):
        return [
            dict(event="acquire", pid=1, gpu="GPU-0", t=0.0),
            dict(event="acquire", pid=2, gpu=gpu_b, t=0.5),
            dict(event="release", pid=1, gpu="GPU-0", t=1.0),
            dict(event="release", pid=2, gpu=gpu_b, t=1.5),
        ]

    log.write_text("".join(json.dumps(e) + "\n" for e in turns("GPU-1")))
    assert bench.lock_overlaps(log, "GPU-0") == 0 and bench.lock_overlaps(log, "GPU-1") == 0
    assert bench.lock_overlaps(log) == 1  # the two GPUs together
    log.write_text("".join(json.dumps(e) + "\n" for e in turns("GPU-0")))
    assert bench.lock_overlaps(log, "GPU-0") == 1
    assert bench.lock_overlaps(tmp_path / "none.jsonl", "GPU-0") == -1


def _row(index, **changes):
    row = {c: 0 for c in bench.columns(True)}
    row.update(gpu="NVIDIA H100 80GB HBM3", gpu_index=index, gpu_uuid=f"GPU-{index}", gpus=2, learners=4)
    row.update(date="2026-11-25", processes=8, seconds=120.0, max_deviation=0.01, alone_noise=0.02)
    row.update(changes)
    return row


def test_one_row_per_gpu_and_a_rerun_replaces_them(tmp_path, capsys):
    out = tmp_path / "classroom_h100_x2.csv"
    bench.write_rows([_row(0), _row(1)], out, several=True)
    bench.write_rows([_row(0, measurements=7), _row(1, measurements=9)], out, several=True)
    import pandas as pd

    df = pd.read_csv(out)
    assert list(df.columns[:5]) == ["gpu", "gpu_index", "gpu_uuid", "gpus", "learners"]
    assert list(df.measurements) == [7, 9] and list(df.gpu_index) == [0, 1]
    assert "wrong_gpu" in df.columns


@pytest.mark.parametrize(
    "changes, met",
    [
        ({}, True),
        (dict(overlaps=1), False),
        (dict(max_deviation=0.051), False),
        (dict(lost_entries=1), False),
    ],
)
def test_the_verdict_names_the_goals(changes, met):
    line = bench.verdict(_row(1, **changes))
    assert line.startswith("GPU 1: 4 learners") and line.endswith("goals met" if met else "GOALS NOT MET")
