"""Build workers' settings, without a GPU (labkit.gpu.builds imports nothing of CUDA at the top)."""
import pytest

from labkit import InvalidSpec
from labkit.gpu import builds


@pytest.mark.parametrize("raw, want", [("0", 0), ("3", 3), (" 2 ", 2)])
def test_labkit_build_workers_sets_the_count(monkeypatch, raw, want):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", raw)
    assert builds.default_workers() == want


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_labkit_build_workers_is_named(monkeypatch, raw):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", raw)
    with pytest.raises(InvalidSpec, match="LABKIT_BUILD_WORKERS"):
        builds.default_workers()


def test_the_default_leaves_a_core_free_and_stops_at_eight(monkeypatch):
    monkeypatch.delenv("LABKIT_BUILD_WORKERS", raising=False)
    monkeypatch.setattr(builds.os, "cpu_count", lambda: 2)
    assert builds.default_workers() == 1
    monkeypatch.setattr(builds.os, "cpu_count", lambda: 64)
    assert builds.default_workers() == builds.MAX_WORKERS


def test_zero_workers_means_no_pool(monkeypatch):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", "0")
    assert builds.pool() is None
    assert builds.ahead([]) == 0
