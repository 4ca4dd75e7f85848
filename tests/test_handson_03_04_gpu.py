"""The hands-on cells of lessons 03 and 04 on a GPU (live): the reference solutions (the convolution in
NCHW and in NHWC and the CuPy copies between the layouts, timed with CUDA events, does converting pay;
conv + bias + ReLU built as one cuDNN graph, timed against the unfused path) pass their checks on this
GPU beside the layout and fusion experiments measured here; the copies write the NHWC convolution's
input and bring its output back to NCHW unchanged; the fused graph and the unfused path compute the
same output; the checks name a timing of one call and a workspace never freed. The same cells on the
simulated GPU: tests/test_handson_03_04.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit import practice  # noqa: E402
from labkit.experiments.epilogue_fusion import handson as fusion  # noqa: E402
from labkit.experiments.precision_layout import handson as layout  # noqa: E402
from labkit.session import lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    yield from gpu_helpers.live_session(monkeypatch)


run = gpu_helpers.run_cell


def test_nhwc_pays_reference_passes_beside_the_layout_experiment(capsys):
    ns = run("nhwc_pays", layout.NHWC_PAYS)  # asserts check.nhwc_pays(my_layout, pays=..., layers=...)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out and "Beside the layout experiment" in out
    assert "run-to-run noise" in out  # why the learner's times are not the experiment's
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


def test_fused_graph_reference_passes_beside_the_fusion_experiment(capsys):
    ns = run("fused_graph", fusion.FUSED_GRAPH)  # asserts check.fused_graph(my_fusion)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out and "Beside the fusion experiment" in out
    assert "run-to-run noise" in out  # why the learner's times are not the experiment's
    times = ns["my_fusion"]
    assert 0 < times["fused_us"] < times["unfused_us"] and not ns["gpu"].memory.allocations


def test_the_fused_graph_and_the_unfused_path_compute_the_same_output():
    gpu = practice.new()
    fused = gpu.conv(lessons.base(), epilogue="bias_relu")
    unfused, stream = gpu.unfused(lessons.base()), gpu.stream()
    assert fused.operands.epilogue == "bias_relu" and len(fused.plans) >= 1
    for role in ("x", "w", "b"):  # the same inputs: the same seed
        assert cupy.array_equal(fused.operands.arrays[role], unfused.operands.arrays[role])
    workspace = gpu.allocate(max(fused.plan.workspace_bytes, unfused.plan.workspace_bytes))
    fused.run(workspace, stream=stream)
    unfused.run(workspace, stream=stream)
    stream.synchronize()
    assert fused.wrong_outputs() == 0, fused.errors
    y = unfused.operands.arrays[unfused.operands.output_role].astype(cupy.float32)
    want = fused.operands.arrays[fused.operands.output_role]  # poisoned again by wrong_outputs: recompute
    fused.run(workspace, stream=stream)
    stream.synchronize()
    got = want.astype(cupy.float32)
    assert float(cupy.abs(got - y).max()) <= 0.05 * float(cupy.abs(y).max()) + 1e-3
    assert gpu.launches[-2].conv == unfused.spec.label
    gpu.free(workspace)


def test_fused_graph_names_one_call_timed_and_a_workspace_never_freed(capsys):
    ref = fusion.FUSED_GRAPH.replace("assert check.", "check.")
    run("fused_graph", ref.replace("CALLS = 20", "CALLS = 1"))
    assert "one call timed" in capsys.readouterr().out
    run("fused_graph", ref.replace("    gpu.free(workspace)\n", ""))
    assert "leak: " in capsys.readouterr().out
