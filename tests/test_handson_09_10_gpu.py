"""The hands-on cells of lessons 09 and 10, live: each reference solution passes its check on this
GPU (lesson 09's pass over three layers under a strategy, beside every shipped strategy's; lesson
10's idle time, from the trace measured on this GPU), and lesson 09's check names a pass timed over
one call and a strategy never closed. The same cells on the simulated GPU: tests/test_handson.py."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit.experiments import under_the_hood, your_network  # noqa: E402
from labkit.session import lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch, capsys):
    yield from gpu_helpers.live_session(monkeypatch)


run = gpu_helpers.run_cell


def test_network_pass_reference_passes_beside_the_shipped_strategies(capsys):
    ns = run("network_pass", your_network.NETWORK_PASS)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out and "async_pool" in out, out
    assert math.isfinite(ns["my_pass"]["pass_us"]) and ns["my_pass"]["pass_us"] > 0
    assert [row[0] for row in ns["my_pass"]["layers"]] == [s.label for s in lessons.three_layers()]


def test_network_pass_names_one_call_timed_and_a_strategy_never_closed(capsys):
    ref = your_network.NETWORK_PASS.replace("assert check.", "check.")
    one = ref.replace("    start = gpu.event(runner.stream)\n", "").replace(
        "        call = runner.run(spec)",
        "        start = gpu.event(runner.stream)\n        call = runner.run(spec)",
    )
    run("network_pass", one)
    assert "one call timed" in capsys.readouterr().out
    run("network_pass", ref.replace("    runner.close()  # frees what the strategy holds\n", ""))
    assert "leak: " in capsys.readouterr().out


def test_idle_time_reference_reads_the_trace_measured_here(capsys):
    ns = run("idle_time", under_the_hood.IDLE_TIME)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out, out
    assert all(v >= 0 for v in ns["my_idle"].values())
