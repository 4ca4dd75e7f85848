"""Lesson 11's experiment live (`labkit.experiments.pytorch_knobs.torch_knobs`): each PyTorch
setting runs in its own process and measures, each labkit counterpart is measured and traced, and
the figures hold together (a peak holds the output, TF32 off is fp32-accurate, a deterministic run
repeats its bits). Four of the settings (a process each costs seconds; the recording runs them
all), and one for the network. Needs a CUDA GPU and a CUDA build of torch."""

import json

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")
pytest.importorskip("torch", reason="needs a CUDA build of torch (pip install labkit[torch])")

from labkit import ConvSpec  # noqa: E402
from labkit.experiments import torch_knobs  # noqa: E402
from labkit.experiments.pytorch_knobs import runs  # noqa: E402

SMALL = ConvSpec(N=4, C=64, H=28, W=28, K=64, R=3, S=3, padding=1, dtype="fp32", layout="NCHW")
#: the settings measured here, of the experiment's (`settings.settings_for`)
SOME = ("PyTorch's defaults", "allow_tf32=False", "deterministic=True", "CUDNN_CONV_WSCAP_DBG=16")


def some_settings(monkeypatch, names):
    every = runs.settings_for
    monkeypatch.setattr(
        runs, "settings_for", lambda spec, net: [s for s in every(spec, net) if s.name in names]
    )


@pytest.fixture(scope="module")
def knobs():
    with pytest.MonkeyPatch.context() as mp:
        some_settings(mp, SOME)
        return torch_knobs(spec=SMALL)


def test_every_setting_and_its_counterpart_measured(knobs):
    df = knobs
    assert df.attrs["mode"] == "live"
    pt, lab = df[df.source == "pytorch"], df[df.source == "labkit"]
    assert (pt.status == "ok").all(), pt[["setting", "status", "reason"]]
    capped = lab.setting.str.contains(", cap ")  # a cap may leave no plan: a row that says so
    assert (lab[~capped].status == "ok").all() and lab[capped].status.isin(["ok", "unsupported"]).all(), lab
    assert set(pt.labkit_row) <= set(lab.setting)
    assert (pt.gpu_us > 0).all() and (pt.first_call_ms > 0).all() and (lab[~capped].gpu_us > 0).all()
    assert (pt.gpu_us_p10 <= pt.gpu_us).all() and (pt.gpu_us <= pt.gpu_us_p90).all()


def test_a_peak_holds_the_output_and_what_pytorch_launched_is_named(knobs):
    pt = knobs[knobs.source == "pytorch"]
    out = SMALL.N * SMALL.K * SMALL.P * SMALL.Q * 4
    fp32 = pt[pt.autocast == ""]
    assert (fp32.out_bytes == out).all()
    assert (fp32.steady_peak_bytes >= out).all() and (fp32.first_peak_bytes >= out).all()
    traced = pt.labkit_gpu_us.notna()  # a counterpart that ran was traced
    assert pt.kernels.str.len().gt(0).all() and pt[traced].same_kernels.notna().all() and traced.any()


def test_tf32_off_is_fp32_accurate_and_a_deterministic_run_repeats_its_bits(knobs):
    row = knobs.set_index("setting")
    assert row.loc["allow_tf32=False", "max_rel_error"] < 1e-5
    assert row.loc["allow_tf32=False", "runs_as"] == "fp32 NCHW"
    assert bool(row.loc["deterministic=True", "repeatable"])
    assert json.loads(row.loc["deterministic=True", "flags"])["deterministic"] is True
    assert json.loads(row.loc["CUDNN_CONV_WSCAP_DBG=16", "env"]) == {"CUDNN_CONV_WSCAP_DBG": "16"}
    assert set(row.index[knobs.set_index("setting").source == "pytorch"]) == set(SOME)


def test_a_network_forward_is_measured(monkeypatch):
    pytest.importorskip("torchvision")
    some_settings(monkeypatch, ("PyTorch's defaults",))
    df = torch_knobs(spec=SMALL.replace(N=2), net="resnet50")
    assert (df.status == "ok").all(), df[["setting", "status", "reason"]]
    assert (df.source == "pytorch").all() and (df.gpu_us > 0).all() and (df.first_call_ms > 0).all()
