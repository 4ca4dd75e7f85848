"""The hands-on cell of lesson 07 on a GPU (live): the reference solution (every plan cuDNN keeps
under each of the caps experiment's caps, timed with CUDA events; the knee) passes its check on this
GPU, beside the caps experiment measured here, and the check names a timing of one call and a
workspace never freed. The same cell on the simulated GPU: tests/test_handson_07_08.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit.experiments import core as experiment_core  # noqa: E402
from labkit.experiments.lab import handson as lab  # noqa: E402
from labkit.present import check  # noqa: E402
from labkit.session import handson, lessons, results  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    handson.register_topics()
    # a notebook's session has its results installed: a check reads what the cell read
    before = experiment_core.use_results(results.SESSION)
    yield
    experiment_core.use_results(before)
    lessons.forget()


def run(name: str, source: str) -> dict:
    ns = {"lessons": lessons, "check": check}
    handson.run(name, source, ns)
    return ns


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
