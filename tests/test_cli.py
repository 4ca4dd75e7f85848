"""Every bad input to ``python -m labkit`` is one line on stderr and exit code 2, before anything is
measured; a command that needs a GPU says so in one line on a machine without one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
from labkit import env, errors
from labkit.cli import bench, record, vs_torch
from labkit.cli.main import main
from labkit.session import lessons

ROOT = Path(__file__).resolve().parents[1]
RECORDED = not env.mode().live
needs_recorded = pytest.mark.skipif(not RECORDED, reason="checks what a machine without a GPU answers")


@pytest.fixture
def nothing_measured(monkeypatch):
    """Any measurement or lookup fails the test: the command must stop before it."""

    def measured(*args, **kwargs):
        raise AssertionError("something was measured before the bad input was refused")

    monkeypatch.setattr(lessons, "data", measured)
    monkeypatch.setattr(bench, "strategies", measured)
    monkeypatch.setattr(vs_torch, "run", measured)
    monkeypatch.setattr(record, "_record_calls", measured)
    monkeypatch.setattr(record, "_fill_calls", measured)


def refused(capsys, argv, says: str) -> str:
    """Run ``argv`` in this process: exit code 2, one line on stderr containing ``says``."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("labkit: "), err
    assert says in err, err
    return err


@needs_recorded
@pytest.mark.parametrize(
    "argv, says",
    [
        (["bench", "strategies"], "ModeError: bench strategies needs a live GPU"),
        (["bench", "vs-torch"], "ModeError: bench vs-torch needs a live GPU"),
        (["fill"], "ModeError: filling this GPU's recording needs a live GPU"),
        (["fill", "--quick", "--into", "/tmp"], "ModeError: filling a class's shared recording"),
        (["record", "--quick"], "ModeError: recording needs a live GPU"),
    ],
)
def test_a_gpu_command_without_a_gpu_is_one_line(capsys, nothing_measured, argv, says):
    refused(capsys, argv, says)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["report", "resnet51", "--out", "{tmp}/r"], "net='resnet51': unknown network"),
        (["report", "resnet50", "--dtype", "fp17", "--out", "{tmp}/r"], "dtype='fp17': must be one of"),
        (["report", "resnet50", "--layout", "NCWH", "--out", "{tmp}/r"], "layout='NCWH': must be one of"),
        (["report", "resnet50", "--batch", "0", "--out", "{tmp}/r"], "batch=0"),
        (["report", "resnet50", "--image", "0", "--out", "{tmp}/r"], "image=0"),
        (
            ["report", "resnet50", "--input-shape", "1,3,224,224", "--out", "{tmp}/r"],
            "input_shape=(1, 3, 224, 224): is a model's example input; a preset takes batch and image",
        ),
        (
            ["report", "torchvision.models:resnet18", "--image", "128", "--out", "{tmp}/r"],
            "image=128: is a preset's image size",
        ),
        (["report", "resnet50", "--input-shape", "16,three", "--out", "{tmp}/r"], "input_shape='16,three'"),
        (["report", "resnet50", "--out", "{tmp}/a-file"], "must be a folder (it is a file)"),
        (["report", "resnet50", "--out", "{tmp}/a-file/below"], "cannot be made: "),
        (["report", "resnet50", "--out", "/proc/labkit-report"], "out='/proc/labkit-report': cannot be made"),
        (["bench", "summary", "--name", "x"], "summary takes --out"),
        (["bench", "strategies", "--out", "x"], "is for bench summary"),
        (["bench", "vs-torch", "--only", "0"], "must be an int >= 1"),
        (["bench", "vs-torch", "--seconds", "-5"], "must be > 0"),
        (["fill", "--into", "{tmp}/a-file"], "--into must name a folder"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_measured(capsys, tmp_path, nothing_measured, argv, says):
    (tmp_path / "a-file").write_text("")
    refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], says)
    assert not (tmp_path / "r").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # the --out check leaves nothing


@needs_recorded
def test_recorded_mode_names_the_settings_that_exist(capsys, tmp_path):
    for extra in (["--training"], ["--train"], ["--batch", "16"], ["--dtype", "bf16"]):
        err = refused(
            capsys, ["report", "resnet50", "--out", str(tmp_path / "r"), *extra], "RecordedDataError"
        )
        assert "recorded: resnet50 batch 32, fp16, NHWC, inference, 224 px (h100-sxm, h200)" in err
    assert not (tmp_path / "r").exists()


@needs_recorded
def test_a_model_in_recorded_mode_is_named_with_what_to_install(capsys, tmp_path):
    torch_there = any(
        __import__("importlib.util").util.find_spec(m) is not None for m in ("torch", "torchvision")
    )
    argv = ["report", "torchvision.models:resnet18", "--input-shape", "2,3,32,32", "--out", str(tmp_path)]
    says = (
        "a model's report is measured live" if torch_there else "install PyTorch: pip install -e '.[torch]'"
    )
    refused(capsys, argv, says)


@needs_recorded
def test_dtype_and_layout_are_read_in_any_case(capsys, tmp_path):
    assert main(["report", "resnet50", "--dtype", "FP16", "--layout", "nhwc", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "53 convolution calls" in out.out  # recorded: no progress bar at all
    layers = (tmp_path / "layers.csv").read_text().splitlines()
    header, first = layers[0].split(","), layers[1].split(",")
    row = dict(zip(header, first))
    assert row["N"] == "32" and row["order"] == "0" and row["fastest_workspace_bytes"].isdigit()
    assert "." in row["fastest_gpu_us"]  # times stay floats
    budget = (tmp_path / "budget.csv").read_text().splitlines()
    assert budget[1].split(",")[1:3] == ["0", "0"]  # peak_workspace_bytes, cap_bytes


def test_the_api_and_the_cli_say_training():
    with pytest.raises(errors.InvalidSpec, match=r"train=True: the option is called training="):
        labkit.report("resnet50", train=True)
    with pytest.raises(errors.InvalidSpec, match="input_shape"):
        labkit.report("resnet50", input_shape=(1, 3, 224, 224))
    with pytest.raises(errors.InvalidSpec, match="dtype='fp17'"):
        labkit.report("resnet50", dtype="fp17")


def test_every_command_answers_help():
    for argv in (
        [],
        ["doctor"],
        ["warm-kernels"],
        ["fill"],
        ["record"],
        ["report"],
        ["bench"],
    ):
        with pytest.raises(SystemExit) as done:
            main([*argv, "--help"])
        assert done.value.code == 0


def test_doctor_says_what_to_install_to_go_live():
    text = env.doctor()
    line = next(x for x in text.splitlines() if "to go live:" in x)
    if env.mode().live:
        assert "nothing" in line or "LABKIT_MODE" in line
    else:
        assert "make setup" in line or "CUDA_VISIBLE_DEVICES" in line


@needs_recorded
def test_the_command_line_itself_exits_2_in_one_line(tmp_path):
    """The real process: no traceback, one line, exit code 2."""
    for argv in (["bench", "vs-torch"], ["report", "resnet50", "--out", "/proc/labkit-report"]):
        done = subprocess.run(
            [sys.executable, "-m", "labkit", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=120,
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_panel_reads_dtype_and_layout_in_any_case():
    """The same spelling rule as the command line and `ConvSpec`: ``FP16`` is ``fp16``."""
    from labkit import spec, widgets

    assert spec.dtype_name("BF16") == "bf16" and spec.layout_name("nchw") == "NCHW"
    with pytest.raises(errors.InvalidSpec, match="dtype='fp17'"):
        spec.dtype_name("fp17")
    panel = widgets.PrecisionPanel()
    panel.set(layout="nchw")
    assert panel.value("layout") == "NCHW"


def test_warm_kernels_builds_what_a_first_visit_builds():
    """`warm-kernels`' cuDNN groups: the lessons' base convolution in every dtype, layout and
    direction cuDNN accepts (fprop also with each fused epilogue), the same at every shape one move
    of a shape control reaches (recorded mode's C=K and H=W, live mode's single controls; fused only
    in lesson 04's dtypes), then lesson 09's reports, each distinct layer once."""
    from labkit import experiments, networks
    from labkit.cli.main import first_visit_graphs
    from labkit.spec import DTYPES

    groups = dict(first_visit_graphs())
    for dtype in DTYPES:
        graphs = groups[f"cuDNN's compiled plans, {dtype}"]
        fprop = {(s.layout, ep) for s, ep in graphs if s.direction == "fprop"}
        assert fprop == {
            (lay, ep) for lay in ("NCHW", "NHWC") for ep in ("none", "bias_relu", "bias_relu_add")
        }
        assert all(
            s.replace(dtype="fp16", layout="NHWC", direction="fprop") == experiments.BASE for s, _ in graphs
        )
    base = {
        (s.dtype, s.layout, s.direction, ep)
        for d in DTYPES
        for s, ep in groups[f"cuDNN's compiled plans, {d}"]
        if ep == "none" or d in experiments.FUSION_DTYPES
    }
    by_shape = {}
    for label, graphs in groups.items():
        if "lesson 09" not in label and not label.endswith(DTYPES):
            for s, ep in graphs:
                by_shape.setdefault((s.N, s.C, s.K, s.H, s.W), set()).add(
                    (s.dtype, s.layout, s.direction, ep)
                )
    b = experiments.BASE
    recorded = {(s.N, s.C, s.K, s.H, s.W) for s in experiments.variants()[1:]}
    one_control = {
        tuple(v if f == name else getattr(b, f) for f in "NCKHW")
        for field, values in experiments.SWEEPS.items()
        for name in field.split("=")
        for v in values
    } - {(b.N, b.C, b.K, b.H, b.W)}
    assert recorded <= set(by_shape) and one_control <= set(by_shape) and len(by_shape) == 21
    assert all(v == base for v in by_shape.values())
    report = groups["cuDNN's compiled plans, resnet50 (lesson 09)"]
    want = networks.unique(networks.layers_of("resnet50", batch=32, dtype="fp16", layout="NHWC"))
    assert [s for s, _ in report][: len(want)] == [g.spec for g in want] and len(want) == 23
    nchw = networks.unique(networks.layers_of("resnet50", batch=32, dtype="fp16", layout="NCHW"))
    assert set(g.spec for g in nchw) <= {s for s, _ in report}
    assert "cuDNN's compiled plans, vgg16 (lesson 09)" in groups
