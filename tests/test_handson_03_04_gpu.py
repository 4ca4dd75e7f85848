"""The hands-on cell of lesson 03 on a GPU (live): the reference solution (the convolution in NCHW and
in NHWC and the CuPy copies between the layouts, timed with CUDA events; does converting pay) passes
its check on this GPU beside the layout experiment measured here; the copies write the NHWC
convolution's input and bring its output back to NCHW unchanged; the check names a timing of one
call and a workspace never freed. The same cell on the simulated GPU: tests/test_handson_03_04.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit import practice  # noqa: E402
from labkit.experiments.precision_layout import handson as layout  # noqa: E402
from labkit.present import check  # noqa: E402
from labkit.session import handson, lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    handson.register_topics()
    yield
    lessons.forget()


def run(name: str, source: str) -> dict:
    ns = {"lessons": lessons, "check": check}
    handson.run(name, source, ns)
    return ns


def test_nhwc_pays_reference_passes_beside_the_layout_experiment(capsys):
    ns = run("nhwc_pays", layout.NHWC_PAYS)  # asserts check.nhwc_pays(my_layout, pays=..., layers=...)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out and "Beside the layout experiment" in out
    assert all(v > 0 for v in ns["my_layout"].values()) and not ns["gpu"].memory.allocations


def test_the_conversion_copies_the_input_in_and_the_output_back():
    gpu = practice.new()
    nhwc = gpu.conv(lessons.base())
    copies, stream = gpu.conversion(nhwc), gpu.stream()
    arrays = nhwc.operands.arrays
    x = arrays["x"].copy()
    workspace = gpu.allocate(nhwc.plan.workspace_bytes)
    nhwc.run(workspace, stream=stream)
    copies.run(stream=stream)
    stream.synchronize()
    assert cupy.array_equal(arrays["x"], x)  # the user's NCHW values, transposed in: the same tensor
    assert cupy.array_equal(copies._nchw["y"], arrays["y"].transpose(0, 3, 1, 2))
    assert nhwc.wrong_outputs() == 0 and gpu.launches[-1].conv == copies.spec.label
    gpu.free(workspace)


def test_nhwc_pays_names_one_call_timed_and_a_workspace_never_freed(capsys):
    ref = layout.NHWC_PAYS.replace("assert check.", "check.")
    run("nhwc_pays", ref.replace("CALLS = 20", "CALLS = 1"))
    assert "one call timed" in capsys.readouterr().out
    run("nhwc_pays", ref.replace("    gpu.free(workspace)\n", ""))
    assert "leak: " in capsys.readouterr().out
