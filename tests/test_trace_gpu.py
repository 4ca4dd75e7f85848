"""Under the hood, on the GPU: CUPTI traces of real cuDNN calls, strategy timelines, the race's
overlap, cuDNN's build log, NVML conditions and NVTX ranges."""

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")
pytest.importorskip("cupti", reason="needs cupti-python (the trace extra)")

from labkit import experiments  # noqa: E402
from labkit.gpu.cudnn import (  # noqa: E402
    buildlog,  # noqa: E402
    graph_cache,
    operands,
)
from labkit.gpu.host import conditions  # noqa: E402
from labkit.gpu.timing import measure, ranges, trace  # noqa: E402
from labkit.gpu.workspaces import concurrency, workloads  # noqa: E402

SPEC = experiments.BASE


def _bound(cg, plan, ops, stream):
    b = cg.bind_with_workspace(ops.arrays, plan.index, stream)
    return b.workspace, b


def test_a_trace_names_every_kernel_of_a_plan_with_its_role_and_launch():
    cg = graph_cache.get_graph(SPEC)
    ops, stream = operands.Operands(SPEC), measure.timing_stream()
    ws, b = _bound(cg, cg.default_plan, ops, stream)
    b.run()
    stream.synchronize()
    with trace.Tracer("3 calls") as t:
        for _ in range(3):
            b.run()
        stream.synchronize()
    df = t.frame()
    kernels = df[df.kind == "kernel"]
    assert len(kernels) >= 3 and len(kernels) % 3 == 0
    assert (kernels.dur_us > 0).all() and (df.start_us >= 0).all() and df.start_us.min() == 0
    assert set(kernels.role) <= set(trace.ROLES) and "main convolution" in set(kernels.role)
    assert not kernels.name.str.startswith("_Z").any()  # demangled
    launches = df[(df.kind == "api") & df.name.str.contains("Launch")]
    assert set(kernels.correlation_id) <= set(launches.correlation_id)  # each kernel has its launch call
    assert df.attrs["traced"] and df.attrs["dropped"] == 0


def test_keep_from_now_drops_the_warm_up_pass_records():
    x = cupy.zeros(1 << 20, dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    with trace.Tracer("warm-up, then kept") as t:
        x += 1  # the warm-up: dropped
        cupy.cuda.get_current_stream().synchronize()
        t.keep_from_now()
        x *= 2
        x *= 3
        cupy.cuda.get_current_stream().synchronize()
    kernels = t.frame().query("kind == 'kernel'")
    assert len(kernels) == 2 and kernels.name.str.contains("multiply").all(), kernels.name.tolist()
    assert float(x[0]) == 6.0


def test_kernel_counts_per_plan_match_torch_profiler():
    """Every plan of the base convolution: CUPTI's count per call equals torch.profiler's."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    cg = graph_cache.get_graph(SPEC)
    ops, stream = operands.Operands(SPEC), measure.timing_stream()
    ours, theirs = {}, {}
    plans = [p for p in cg.runnable if p.name != "eng0"]  # eng0: 15 ms a call, adds nothing here
    for p in plans:
        ws, b = _bound(cg, p, ops, stream)
        b.run()
        stream.synchronize()
        with trace.Tracer(p.name) as t:
            for _ in range(2):
                b.run()
            stream.synchronize()
        d = trace.device_rows(t.frame())
        ours[p.name] = len(d) / 2
    torch.cuda.init()
    for p in plans:
        ws, b = _bound(cg, p, ops, stream)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                b.run()
            stream.synchronize()
        theirs[p.name] = len([e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]) / 2
    assert ours == theirs


def test_one_trace_at_a_time_and_a_bounded_buffer():
    with trace.Tracer("outer"):
        with pytest.raises(trace.TraceUnavailable, match="another labkit trace"):
            with trace.Tracer("inner"):
                pass
    x = cupy.zeros(16)
    with trace.Tracer("small", max_records=5) as t:
        for _ in range(40):
            x += 1
        cupy.cuda.get_current_stream().synchronize()
    df = t.frame()
    assert len(df) == 5 and df.attrs["dropped"] > 0
    assert trace.available() is None  # released after the errors


def test_malloc_per_call_shows_its_allocations_and_idle_gpu_the_arena_does_not():
    rows = {}
    for name, opts in (("malloc_per_call", {}), ("fixed_arena", {"size_bytes": 1 << 30})):
        row, df = workloads.traced_pass(name, opts, "one_conv", calls=8)
        assert row["status"] == "ok", row
        api = df[df.kind == "api"]
        rows[name] = (row, api)
    m_row, m_api = rows["malloc_per_call"]
    a_row, a_api = rows["fixed_arena"]
    assert m_api.name.str.match(r"^cu(da)?(Malloc|MemAlloc)").sum() >= 8
    assert m_api.name.str.match(r"^cu(da)?(Free|MemFree)").sum() >= 8
    assert not a_api.name.str.match(r"^cu(da)?(Malloc|MemAlloc)").any()
    assert m_row["idle_share"] > a_row["idle_share"]


def test_the_race_trace_shows_two_streams_overlapping_under_graph_launch():
    """Two graph launches on two streams may overlap: the GPU is free to run them one after the
    other in a given round (seen on the H200: overlap 0 in some runs). Up to 3 traced rounds; the
    trace must show the overlap in one of them, and every round's kernels come from the graphs."""
    overlaps = []
    for _ in range(3):
        r = concurrency.scratchpad_race(
            shared=True,
            launch="graph",
            streams=2,
            convs_per_launch=64,
            min_runs=128,
            tracer=lambda: trace.Tracer("race"),
        )
        df = r.trace
        assert {"stream 1", "stream 2"} <= set(df.row)
        assert (df[df.kind == "kernel"].graph_id > 0).all()
        overlaps.append(trace.overlap_us(df, "stream 1", "stream 2"))
        if overlaps[-1] > 0:
            break
    print("overlap of the two streams per round (us):", overlaps)
    assert overlaps[-1] > 0, overlaps


def test_the_build_log_names_engines():
    got = buildlog.capture(SPEC)
    assert got["build"]["built"] >= 1 and got["frontend"], got["build"]
    names = [e["engine"] for e in buildlog.engines(got["frontend"])]
    assert names, got["frontend"][:20]


def test_conditions_and_ranges():
    c = conditions.sample()
    assert c is not None and c["sm_clock_mhz"] > 0 and c["power_w"] > 0 and isinstance(c["throttle"], list)
    assert ranges.enabled()
    with ranges.annotate("a test range", "plan"):
        pass
    df = experiments.algorithms(spec=SPEC.replace(N=1))
    assert df.attrs["conditions"]["sm_clock_mhz"] > 0  # every live result says what the GPU ran at


@pytest.fixture(autouse=True, scope="module")
def _detach_cupti_after_these_tests():
    yield
    trace.detach()  # the next test files measure memory baselines: CUPTI's buffers go now
