"""Experiments live on the GPU: the same sense checks as on the recording; record -> replay."""

import hashlib

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import sense  # noqa: E402

from labkit import ConvSpec, env, experiments  # noqa: E402
from labkit.cli import record  # noqa: E402
from labkit.store import recordings  # noqa: E402

SMALL = ConvSpec(N=8, C=64, H=28, W=28, K=64)


def test_live_results_make_sense():
    for df in (
        experiments.precision(SMALL),
        experiments.fusion(SMALL),
        experiments.caps(SMALL.replace(layout="NCHW")),
        experiments.plans(SMALL),
        experiments.race(min_runs=1024),
        experiments.strategies("one_conv", 5),
        experiments.roofline(),
    ):
        assert (
            df.attrs["mode"] == "live" and df.attrs["gpu"] == env.environment().gpu_name
        )  # whichever GPU runs it
    sense.precision(experiments.precision(SMALL))
    sense.fusion(experiments.fusion(SMALL))
    sense.caps(experiments.caps(SMALL.replace(layout="NCHW")))
    sense.plans(experiments.plans(SMALL))
    sense.race(experiments.race(min_runs=1024))
    sense.strategies(experiments.strategies("one_conv", 5))
    sense.roofline(experiments.roofline())


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_record_resume_and_replay(tmp_path, monkeypatch):
    out = tmp_path / "rec"
    record.record(out, quick=True, only=["layout"], argv=["test"])
    first = _sha(out / "layout.csv")
    calls = {"n": 0}
    real = experiments.core._REGISTRY["sweep"]

    def interrupted(*a, **k):  # Ctrl-C during the sweep
        calls["n"] += 1
        raise KeyboardInterrupt

    monkeypatch.setitem(experiments.core._REGISTRY, "sweep", interrupted)
    record.record(out, quick=True, only=["layout", "sweep"], argv=["test"])
    assert calls["n"] == 1 and not (out / "sweep.csv").exists() and _sha(out / "layout.csv") == first
    monkeypatch.setitem(experiments.core._REGISTRY, "sweep", real)
    record.record(out, quick=True, only=["layout", "sweep"], argv=["test"])  # resumes: layout skipped
    assert _sha(out / "layout.csv") == first and (out / "sweep.csv").exists()
    rec = recordings.load(out)
    assert rec.metadata["complete"] is False and rec.metadata["gpu"] == env.environment().gpu_name
    # replay in recorded mode gives the recorded table
    monkeypatch.setenv("LABKIT_MODE", "recorded")
    monkeypatch.setenv("LABKIT_RECORDING", str(out))
    recordings._current = recordings._picked = None
    replay = experiments.layout()
    table = rec.table("layout").drop(columns=["request"]).dropna(axis=1, how="all")
    assert replay.attrs["mode"] == "recorded"
    assert replay.round(9).equals(table.reset_index(drop=True).round(9))
    recordings._current = recordings._picked = None
