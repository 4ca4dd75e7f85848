"""Nothing assumes an H100: what a benchmark or a recording is called comes from the GPU that ran
it (`labkit.env.gpu_slug`), on this CPU machine with the GPU's name given."""

from pathlib import Path

import pytest

from labkit import __main__ as cli
from labkit import env
from labkit.cli import bench, vs_torch
from labkit.cli.record import gpu_slug

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "name,slug",
    [
        ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("Tesla T4", "tesla-t4"),
        ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
        (None, "gpu"),
        ("", "gpu"),
    ],
)
def test_gpu_slug(name, slug):
    assert env.gpu_slug(name) == slug and gpu_slug(name) == slug  # record re-exports it


def test_bench_default_names_follow_the_gpu(monkeypatch):
    assert bench.default_name("vs_torch", "NVIDIA H100 80GB HBM3") == "vs_torch_h100-80gb-hbm3"
    assert bench.default_name("strategies", "NVIDIA H200") == "strategies_h200"
    fake = env.environment().__class__(**{**env.environment().__dict__, "gpu_name": "NVIDIA L40S"})
    monkeypatch.setattr(env, "environment", lambda: fake)
    assert bench.default_name("strategies") == "strategies_l40s"


@pytest.mark.parametrize(
    "which,func,expected",
    [
        ("strategies", (bench, "strategies"), "strategies_h200"),
        ("vs-torch", (vs_torch, "run"), "vs_torch_h200"),
    ],
)
def test_cli_bench_writes_the_gpus_file(monkeypatch, which, func, expected):
    seen = {}
    monkeypatch.setattr(env, "require_live", lambda what: None)  # as on a GPU machine
    monkeypatch.setattr(bench, "require_torch", lambda: None)
    monkeypatch.setattr(bench, "default_name", lambda w, gpu_name=None: f"{w}_{gpu_slug('NVIDIA H200')}")
    monkeypatch.setattr(*func, lambda name=None, **k: seen.setdefault("name", name))
    assert cli.main(["bench", which]) == 0
    assert seen["name"] == expected
    seen.clear()
    assert cli.main(["bench", which, "--name", "mine"]) == 0 and seen["name"] == "mine"


def test_no_code_names_its_output_after_the_h100():
    """The shipped recording folder (h100-sxm) and texts about what was measured on an H100 may
    say H100; no default output name, GPU test assertion or script path may."""
    for path in [
        *ROOT.joinpath("labkit").rglob("*.py"),
        *ROOT.joinpath("scripts").glob("*"),
        ROOT / "tests" / "test_experiments_gpu.py",
    ]:
        text = path.read_text()
        for bad in ('_h100"', "_h100.csv", '"H100" in', "recordings/h100-sxm "):
            assert bad not in text, f"{path.relative_to(ROOT)}: {bad}"
