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


@pytest.mark.parametrize("raw, want", [("", builds.INTERACTIVE_COMPILE_BUDGET_S), ("none", None), ("0", None),
                                       ("2.5", 2.5), (" 10 ", 10.0)])
def test_labkit_compile_budget_s_sets_how_long_a_change_waits_for_compiles(monkeypatch, raw, want):
    monkeypatch.setenv("LABKIT_COMPILE_BUDGET_S", raw)
    assert builds.compile_budget_s() == want


@pytest.mark.parametrize("raw", ["soon", "-1"])
def test_a_bad_labkit_compile_budget_s_is_named(monkeypatch, raw):
    monkeypatch.setenv("LABKIT_COMPILE_BUDGET_S", raw)
    with pytest.raises(InvalidSpec, match="LABKIT_COMPILE_BUDGET_S"):
        builds.compile_budget_s()


def test_fill_and_record_wait_for_every_plan_unless_told_otherwise(monkeypatch):
    from labkit.cli import record

    monkeypatch.delenv("LABKIT_COMPILE_BUDGET_S", raising=False)
    with record.every_plan():
        assert builds.compile_budget_s() is None
    assert builds.compile_budget_s() == builds.INTERACTIVE_COMPILE_BUDGET_S
    monkeypatch.setenv("LABKIT_COMPILE_BUDGET_S", "7")
    with record.every_plan():
        assert builds.compile_budget_s() == 7.0
