"""The hands-on cells of lessons 07 and 08 on a GPU (live): the reference solutions (every plan cuDNN
keeps under each of the caps experiment's caps, timed with CUDA events, the knee; the same timing code
on this GPU and on the other recording's GPU, simulated) pass their checks on this GPU, beside the
caps and plans experiments measured here, and the checks name a timing of one call and a workspace
never freed. The same cells on the simulated GPU: tests/test_handson_07_08.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit import practice  # noqa: E402
from labkit.experiments.lab import handson as lab  # noqa: E402
from labkit.experiments.lab import same_code  # noqa: E402
from labkit.session import lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    yield from gpu_helpers.live_session(monkeypatch)


run = gpu_helpers.run_cell


def test_workspace_knee_reference_passes_beside_the_caps_experiment(capsys):
    ns = run("workspace_knee", lab.WORKSPACE_KNEE)  # asserts check.workspace_knee(my_best, my_knee)
    out = capsys.readouterr().out
    said = " ".join(out.split())  # a verdict wraps at 100 characters
    assert out.startswith("correct: ") and "(measured on this GPU)" in said, out
    assert set(ns["my_best"]) == set(lessons.CAPS) and ns["my_knee"] in lessons.CAPS
    assert all(v > 0 for v in ns["my_best"].values()) and not ns["gpu"].memory.allocations
    capped = ns["gpu"].convs[0]  # the smallest cap's: cuDNN kept only plans within it
    assert capped.workspace_cap == 0 and all(p.workspace_bytes == 0 for p in capped.plans)


def test_workspace_knee_names_one_call_timed_and_a_workspace_never_freed(capsys):
    ref = lab.WORKSPACE_KNEE.replace("assert check.", "check.")
    run("workspace_knee", ref.replace("CALLS = 20", "CALLS = 1"))
    assert "one call timed" in capsys.readouterr().out
    run("workspace_knee", ref.replace("    gpu.free(workspace)\n", ""))
    assert "leak: " in capsys.readouterr().out


def test_other_gpu_runs_the_same_code_live_here_and_simulated_there(capsys):
    ns = run("other_gpu", same_code.OTHER_GPU)  # asserts check.other_gpu(my_gpus)
    said = " ".join(capsys.readouterr().out.split())
    header = said[: said.index("correct: ")]  # the cell runs on both GPUs: its header names both
    assert header.startswith("Running on 2 GPUs: the ") and "measured on this" in header, said
    assert "correct: Your code on 2 GPUs" in said and "simulated from the" in said, said
    gpus = practice.last_gpus()
    assert sum(not g.simulated for g in gpus.values()) == 1 and len(gpus) >= 2
    assert all(v > 0 for v in ns["my_gpus"].values()) and not any(g.memory.allocations for g in gpus.values())


def test_other_gpu_names_one_call_timed(capsys):
    ref = same_code.OTHER_GPU.replace("assert check.", "check.")
    run("other_gpu", ref.replace("CALLS = 20", "CALLS = 1"))
    said = " ".join(capsys.readouterr().out.split())
    assert "one call timed: on the " in said  # a verdict names each kind once: on the first GPU it met
    here = next(g for g in practice.last_gpus().values() if not g.simulated)
    assert max(t.calls for t in here.timings) == 1  # this GPU's own timings: one call between events
