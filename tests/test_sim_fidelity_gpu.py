"""``bench sim-fidelity`` on a GPU: its sequences run the same way live (graphs of streams that share
a buffer included), a configuration starts from an empty stream-ordered pool, and the calibration
measures what the simulator reads (`labkit.cli.sim_calibrate`), a few convolutions' worth."""

import math

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit.cli import sim_calibrate  # noqa: E402
from labkit.gpu import device as devices  # noqa: E402
from labkit.gpu.workspaces import workloads  # noqa: E402
from labkit.simgpu import sequences  # noqa: E402


@pytest.fixture
def dev():
    d = devices.current()
    d.synchronize()
    return d


@pytest.mark.parametrize(
    "strategy, options", [("preallocated", {}), ("fixed_arena", {"size_bytes": 256 << 20})]
)
def test_graphs_on_streams_that_share_a_buffer_run_as_a_sequence(dev, strategy, options):
    row = sequences.run_sequence(dev, strategy, options, "one_conv", streams=2, launch="graph", passes=2)
    assert row["status"] == "ok", row["reason"]
    assert row["alloc_calls"] == 0 and row["calls"] == 2 * sequences.MIN_CALLS
    assert row["host_us_min"] <= row["host_us_per_call"] <= row["host_us_max"] and row["gpu_us_per_call"] > 0


def test_malloc_per_call_in_a_graph_is_refused_in_one_line_on_the_gpu_as_simulated(dev):
    row = sequences.run_sequence(dev, "malloc_per_call", {}, "one_conv", launch="graph", passes=1)
    assert row["status"] == "NotCapturable" and row["reason"].startswith("malloc_per_call (a cudaFree")


def test_a_configuration_starts_from_an_empty_stream_ordered_pool(dev):
    """The device's async pool is shared by the process: what another user left in it (here 1 GiB,
    freed but kept) is given back before a configuration, so its peak is its own."""
    pool = cupy.cuda.MemoryAsyncPool()
    kept = pool.malloc(1 << 30)
    del kept
    dev.synchronize()
    row = sequences.run_sequence(dev, "async_pool", {}, "one_conv", passes=1)
    assert row["status"] == "ok" and row["peak_bytes"] == 32 << 20, row


def test_the_calibration_measures_launch_bind_graphs_and_streams_at_once(dev):
    specs = [workloads.ONE_CONV, workloads.RACE_SPEC]
    rows = sim_calibrate.launches(dev, specs) + sim_calibrate.concurrency(dev, specs)
    for spec in specs:
        mine = [r for r in rows if r["spec_label"] == spec.label]
        kinds = {r["call"] for r in mine}
        assert kinds == {"python_launch", "bind", "call_gpu", "graph_launch"}, kinds
        gpu = {r["streams"]: r["gpu_us"] for r in mine if r["call"] == "call_gpu"}
        assert set(gpu) == {1, 2, 3, 4} and all(v > 0 and math.isfinite(v) for v in gpu.values()), gpu
        for k, v in gpu.items():  # k streams at once: at most k times the throughput of one
            assert 0.7 <= gpu[1] / v <= k * 1.1, (spec.label, gpu)
        graph = {r["graph_calls"]: r["host_us"] for r in mine if r["call"] == "graph_launch"}
        assert 0 < graph[1] < graph[sim_calibrate.GRAPH_CALLS], graph
        print(spec.label, {r["call"]: r["host_us"] for r in mine if r["call"] != "call_gpu"}, gpu, graph)
