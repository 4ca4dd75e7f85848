"""`labkit.report(...).checklist()` and ``python -m labkit report NET --checklist`` in recorded mode:
the checklist of the recording the report came from, its table's columns and units, the target
GPU from another recording's metadata, and bad input as one-line errors before anything is
measured."""

import pytest

import labkit
from labkit import InvalidSpec, RecordedDataError
from labkit.cli.main import main
from labkit.experiments.your_network import checklist
from labkit.store import recordings

pytestmark = pytest.mark.usefixtures("recorded_mode")
HELD = [r.name for r in recordings.shipped() if "checklist_items" in r.experiments()]


@pytest.mark.parametrize("recording", HELD)
def test_the_checklist_comes_from_the_reports_own_recording(recording):
    rep = labkit.report("resnet50", recording=recording)
    cl = rep.checklist()
    assert cl.items.attrs["source"] == rep.frame.attrs["source"]
    assert list(cl.table.columns) == list(checklist.COLUMNS)
    counts = {"layers", "layers_compared", "error_before", "error_after"}  # distinct layers; relative errors
    numbers = set(cl.table.select_dtypes("number").columns) - counts
    assert all(c.endswith(("_us", "_bytes", "_percent", "_passes")) for c in numbers), numbers
    memory = cl.table.set_index("item").loc["memory fits"]
    this = recordings.named(recording).metadata
    other = next(r for r in recordings.shipped() if r.metadata["gpu"] != this["gpu"])
    assert memory.memory_before_bytes == this["gpu_memory_bytes"]
    assert memory.target_memory_bytes == other.metadata["gpu_memory_bytes"]
    assert memory.target_gpu == labkit.env.gpu_label(other.metadata["gpu"])
    assert "* Precision: " in cl._repr_markdown_()


@pytest.mark.parametrize("recording", HELD)
def test_a_named_target_gpu_is_that_recordings(recording):
    cl = labkit.report("vgg16", recording=recording).checklist(target_gpu=recording)
    memory = cl.table.set_index("item").loc["memory fits"]
    assert memory.target_memory_bytes == memory.memory_before_bytes


def test_bad_checklist_input_is_a_clear_error():
    rep = labkit.report("resnet50", recording=HELD[0]) if HELD else pytest.skip("no checklist recorded")
    with pytest.raises(InvalidSpec, match="recording='a100'"):
        rep.checklist(target_gpu="a100")
    with pytest.raises(InvalidSpec, match="production_batch"):
        rep.checklist(production_batch=0)
    with pytest.raises(RecordedDataError, match="production_batch"):
        rep.checklist(production_batch=64)
    with pytest.raises(TypeError):
        rep.checklist(64)  # keyword-only


@pytest.mark.parametrize("recording", HELD)
def test_the_command_line_writes_the_checklist_beside_the_report(capsys, tmp_path, monkeypatch, recording):
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    recordings._current = recordings._picked = None
    assert main(["report", "deeplabv3_aspp", "--checklist", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Precision: " in out and "Profile (the network report): " in out
    assert (tmp_path / "checklist.csv").read_text().splitlines()[0].startswith("item,applies,before,after")
    assert (
        "The performance checklist, measured for deeplabv3_aspp" in (tmp_path / "checklist.html").read_text()
    )


def test_a_bad_production_batch_on_the_command_line_is_refused_before_anything_is_written(capsys, tmp_path):
    assert (
        main(["report", "resnet50", "--checklist", "--production-batch", "0", "--out", str(tmp_path / "r")])
        != 0
    )
    err = capsys.readouterr().err
    assert "production_batch=0" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
