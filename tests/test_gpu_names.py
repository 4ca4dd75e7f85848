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
        *(p for p in ROOT.joinpath("scripts").glob("*") if p.is_file()),  # not its __pycache__
        ROOT / "tests" / "test_experiments_gpu.py",
    ]:
        text = path.read_text()
        for bad in ('_h100"', "_h100.csv", '"H100" in', "recordings/h100-sxm "):
            assert bad not in text, f"{path.relative_to(ROOT)}: {bad}"


def test_each_card_has_one_name_wherever_a_learner_sees_it(recorded_mode, monkeypatch):
    """A chart's provenance line, the roofline's roof, the banner, a panel's header and status line,
    lesson 08's legends and the GPU picker name each shipped card the same way (`env.gpu_label`:
    "H100 SXM", "H200 SXM"), never by its CUDA device name ("NVIDIA H100 80GB HBM3")."""
    import json

    from labkit import experiments
    from labkit.present import compare, widgets
    from labkit.present.panel.gpu_picker import GPUPicker
    from labkit.session import lessons
    from labkit.store import recordings

    shipped = recordings.shipped()
    panel = widgets.Panel("roofline")  # on the default recording
    header = panel.view.header.value + panel.status.value
    both = json.dumps(compare.figure(compare.frames("roofline")).to_plotly_json())
    options = [t for t, _ in GPUPicker(can_measure=False).options("roofline")]
    assert len({o.split(" (")[0] for o in options}) == len(shipped) >= 2
    for rec in shipped:
        device, label = rec.metadata["gpu"], env.gpu_label(rec.metadata["gpu"])
        assert label != device and label in ("H100 SXM", "H200 SXM")
        fig = experiments.CHARTS["roofline"](rec.lookup("roofline", rec.requests("roofline")[0]))
        drawn = json.dumps(fig.to_plotly_json())
        assert f"recorded on {label} ·" in fig.layout.title.text and f"roof: {label}," in drawn
        monkeypatch.setenv("LABKIT_RECORDING", rec.name)
        seen = {
            "chart": drawn,
            "lesson 08": both,
            "banner": str(lessons.banner("03")),
            "picker": str(options),
        }
        if rec.name == panel.gpu_picker.value:
            seen["panel"] = header
        for where, text in seen.items():
            assert device not in text, (where, device)
            assert label in text, (where, label)
        assert f"{label} (recorded {rec.provenance('roofline')['date']})" in options
