"""Every panel has a GPU picker: recorded mode lists every shipped recording, the
default (H100) first; picking one answers from that recording, exactly its rows; a convolution
that recording lacks sends the controls back to its base, saying so; an unknown name is an
`InvalidSpec` that lists the recordings."""

import pytest
import recording_copies

from labkit import InvalidSpec, experiments
from labkit.present import widgets
from labkit.store import recordings


@pytest.fixture(autouse=True)
def recorded(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "recorded")


def test_the_picker_lists_every_recording_the_default_first():
    p = widgets.PrecisionPanel()
    values = [v for _, v in p.gpu_picker.options]
    assert values[0] == recordings.DEFAULT_RECORDING == p.gpu_picker.value
    assert set(values) == {r.name for r in recordings.available()}
    labels = dict((v, t) for t, v in p.gpu_picker.options)
    assert labels["h200"] == f"H200 SXM (recorded {recordings.named('h200').provenance('precision')['date']})"
    assert p.gpu_picker.layout.display is None  # shown: there is a choice


ON_BOTH = sorted(n for n in widgets.PANELS if n in recordings.named("h200").metadata["experiments"])


def test_a_panel_offers_only_the_gpus_that_recorded_its_experiment(tmp_path, monkeypatch):
    assert [v for _, v in widgets.ReportPanel().gpu_picker.options] == ["h100-sxm", "h200"]
    recording_copies.without(tmp_path, monkeypatch, "h200", "network_report")
    p = widgets.ReportPanel()
    assert [v for _, v in p.gpu_picker.options] == ["h100-sxm"] and p.gpu_picker.layout.display == "none"
    with pytest.raises(InvalidSpec, match="no 'network_report'"):
        p.set(gpu="h200")


@pytest.mark.parametrize("name", ON_BOTH)
def test_picking_the_h200_draws_exactly_its_rows(name):
    p = widgets.PANELS[name]()
    p.set(gpu="h200")
    assert p.gpu.name == "h200" and p.gpu_picker.value == "h200"
    assert p.error is None, p.error
    assert p.df.attrs["gpu"] == "NVIDIA H200" and "recorded on H200 SXM" in p.fig.layout.title.text
    req = p.df.attrs["request"]
    rows = recordings.named("h200").lookup(name, req)
    assert p.df.drop(columns=[c for c in p.df.columns if c not in rows.columns]).equals(
        experiments.with_model(name, rows)[[c for c in p.df.columns if c in rows.columns]]
    )


def test_a_convolution_the_other_gpu_lacks_goes_back_to_the_base(tmp_path, monkeypatch):
    n8 = experiments.request_of("precision", spec=experiments.BASE.replace(N=8))
    recording_copies.without(tmp_path, monkeypatch, "h200", "precision", n8)
    p = widgets.PrecisionPanel()
    p.set(N=8)
    assert p.df.attrs["request"]["spec"]["N"] == 8
    p.set(gpu="h200")
    assert p.state["N"] == 32 and p.error is None
    assert "not recorded on that GPU" in p.status.value
    p.set(N=8)  # that H200 recording lacks N=8: the panel says so and names the values it has
    assert "not recorded on H200 SXM" in str(p.error) and "N = 1, 32, 64" in str(p.error)
    p.set(gpu="h100-sxm")
    p.set(N=8)
    assert p.df.attrs["gpu"] == "NVIDIA H100 80GB HBM3" and p.df.attrs["request"]["spec"]["N"] == 8


def test_the_lab_panel_starts_on_a_gpu_and_keeps_it_across_charts():
    lab = widgets.LabPanel(gpu="h200")
    assert lab.df.attrs["gpu"] == "NVIDIA H200"
    lab.set(chart="fusion")
    assert lab.error is None and lab.df.attrs["gpu"] == "NVIDIA H200"


def test_an_unknown_gpu_names_the_recordings():
    with pytest.raises(InvalidSpec, match=r"available: .*h100-sxm.*h200"):
        widgets.PrecisionPanel(gpu="a100")
    p = widgets.PrecisionPanel()
    with pytest.raises(InvalidSpec, match="recording='rtx'"):
        p.set(gpu="rtx")
    assert p.gpu.name is None and p.df.attrs["gpu"] == "NVIDIA H100 80GB HBM3"
