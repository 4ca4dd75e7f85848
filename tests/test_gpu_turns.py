"""Tests run side by side on a live GPU take turns (`conftest.pytest_runtest_protocol`) and ``-n auto``
starts few workers there (`conftest.pytest_xdist_auto_num_workers`); no GPU needed. That a GPU test
runs in its turn is tested on a fake live labkit (tests/test_packaging.py)."""

from __future__ import annotations

from types import SimpleNamespace

import conftest


def test_a_gpu_test_or_a_notebook_takes_a_turn_and_no_other_test_does():
    def item(*markers, path="tests/test_x.py"):
        return SimpleNamespace(get_closest_marker=lambda m: m if m in markers else None, path=path)

    assert conftest.uses_gpu(item("gpu"))
    assert conftest.uses_gpu(item(path="notebooks/01_what_is_a_workspace.ipynb"))
    assert not conftest.uses_gpu(item())
    assert not conftest.uses_gpu(item("browser"))


def test_auto_workers_are_capped_on_a_live_gpu_only(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(conftest.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(conftest, "gpu_skip_reason", lambda: None)
    assert conftest.pytest_xdist_auto_num_workers(None) == conftest.LIVE_WORKERS
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "16")  # set by hand: pytest-xdist reads it
    assert conftest.pytest_xdist_auto_num_workers(None) is None
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS")
    monkeypatch.setattr(conftest, "gpu_skip_reason", lambda: "needs a CUDA GPU")
    assert conftest.pytest_xdist_auto_num_workers(None) is None
