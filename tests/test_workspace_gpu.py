"""The workspace strategies with real CUDA memory: correctness, books, leaks, pressure, races."""

import random

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit import ArenaTooSmall, ConvSpec, InvalidSpec, OutOfMemory  # noqa: E402
from labkit.gpu.buffers import memory  # noqa: E402
from labkit.gpu.checks import reference  # noqa: E402
from labkit.gpu.cudnn import (  # noqa: E402
    frontend,
    graph_cache,
    operands,
    reference_runs,  # noqa: E402
)
from labkit.gpu.workspaces import concurrency  # noqa: E402
from labkit.gpu.workspaces import workspace as ws  # noqa: E402
from labkit.gpu.workspaces.runner import Runner, WorkspaceTooSmall  # noqa: E402

BIG_WS = ConvSpec(N=32, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW")  # default plan: ~25.8 MB
SMALL = ConvSpec(N=2, C=32, H=14, W=14, K=32, dtype="fp16", layout="NCHW")
ALL = [
    lambda: ws.FixedArena(256 << 20),
    ws.MallocPerCall,
    lambda: ws.KeyedCache(256 << 20),
    ws.Scratchpad,
    ws.CupyPool,
    ws.AsyncPool,
    ws.Preallocated,
]


def _device_free():
    cupy.cuda.runtime.deviceSynchronize()
    cupy.get_default_memory_pool().free_all_blocks()
    return memory.free_bytes()


def _check_output(runner, spec):
    runner.stream.synchronize()
    ops = runner.operands(spec)
    rel = reference.relative_error(ops.output(), reference_runs.expected(spec, ops))
    assert rel <= reference.tolerance_for(spec), rel


@pytest.mark.parametrize("make", ALL, ids=[n for n in ws.STRATEGIES])
def test_each_strategy_runs_correctly_keeps_books_and_does_not_leak(make):
    for spec in (BIG_WS, SMALL):
        graph_cache.get_graph(spec)  # build outside the memory baseline
    stream = cupy.cuda.Stream(non_blocking=True)
    frontend.handle_for(stream)
    warm = Runner(
        make(), stream
    )  # the first run and check in a process load their kernels (about 70 MiB on an H200)
    for spec in (BIG_WS, SMALL):
        warm.operands(spec).poison_output()
        warm.run(spec)
        _check_output(warm, spec)
    warm.close()
    base = (
        _device_free()
    )  # after the stream's cuDNN handle exists and the kernels are loaded, before the strategy
    strategy = make()
    runner = Runner(strategy, stream)
    for spec in (BIG_WS, SMALL, BIG_WS):
        for _ in range(5):
            runner.operands(spec).poison_output()
            runner.run(spec)
            _check_output(runner, spec)
    st = strategy.stats
    assert st.calls == 15
    assert st.peak_held_bytes >= graph_cache.get_graph(BIG_WS).default_plan.workspace_bytes
    if isinstance(strategy, ws.MallocPerCall):
        assert st.alloc_calls == 15 and st.free_calls == 15 and st.held_bytes == 0
    runner.close()
    assert strategy.stats.held_bytes == 0 or isinstance(strategy, (ws.CupyPool, ws.AsyncPool))
    assert abs(_device_free() - base) <= (4 << 20), "device memory did not return to its baseline"
    frontend.release_handle(stream)


def test_fixed_arena_too_small_raises_or_falls_back():
    need = graph_cache.get_graph(BIG_WS).default_plan.workspace_bytes
    with Runner(ws.FixedArena(1 << 20), fallback=False) as r:
        with pytest.raises(ArenaTooSmall) as info:
            r.run(BIG_WS)
        assert info.value.needed_bytes == need and info.value.arena_bytes == 1 << 20
    with Runner(ws.FixedArena(1 << 20), fallback=True) as r:
        rec = r.run(BIG_WS)
        assert rec.fell_back_from is not None and rec.workspace_bytes <= 1 << 20
        _check_output(r, BIG_WS)


def test_a_key_without_dtype_and_layout_hands_out_a_wrong_sized_buffer():
    nhwc = BIG_WS.replace(layout="NHWC")  # same dims, tiny workspace
    assert (
        graph_cache.get_graph(nhwc).default_plan.workspace_bytes
        < graph_cache.get_graph(BIG_WS).default_plan.workspace_bytes
    )
    with Runner(ws.KeyedCache(1 << 30, key="dims_only")) as r:
        r.run(nhwc)
        with pytest.raises(WorkspaceTooSmall) as info:
            r.run(BIG_WS)
        assert info.value.got < info.value.needed
    with Runner(ws.KeyedCache(1 << 30, key="full")) as r:
        r.run(nhwc)
        r.run(BIG_WS)
        _check_output(r, BIG_WS)
        assert len(r.strategy) == 2


def test_keyed_cache_never_holds_more_than_its_budget():
    budget = 64 << 20
    cache = ws.KeyedCache(budget)
    rng = random.Random(0)
    stream_ptr = int(cupy.cuda.get_current_stream().ptr)
    base = _device_free()
    for _ in range(10_000):
        spec = ConvSpec(
            N=rng.randint(1, 64),
            C=rng.choice([16, 32, 64]),
            H=rng.choice([7, 14, 28]),
            W=14,
            K=rng.choice([16, 64]),
            dtype=rng.choice(["fp16", "fp32"]),
            layout=rng.choice(["NCHW", "NHWC"]),
        )
        plan = rng.randint(0, 3)
        size = random.Random(hash((spec.key, plan))).randint(0, 24 << 20)  # one size per key, as in life
        req = ws.Request(spec, plan, "plan", size, stream_ptr)
        ptr, got = cache.get(req)
        assert got >= req.nbytes or req.nbytes > budget
        assert cache.stats.held_bytes <= budget
    assert cache.stats.evictions > 0 and cache.stats.hits > 0
    cache.close()
    assert abs(_device_free() - base) <= (4 << 20)


def test_scratchpad_grows_only_and_per_stream():
    pad = ws.Scratchpad()
    s1, s2 = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    sizes = [1 << 20, 4 << 20, 2 << 20, 8 << 20, 1 << 20]
    for n in sizes:
        pad.get(ws.Request(SMALL, 0, "p", n, int(s1.ptr)))
    assert pad.stats.alloc_calls == 3 and pad.stats.held_bytes == 8 << 20
    pad.get(ws.Request(SMALL, 0, "p", 1 << 20, int(s2.ptr)))
    assert pad.stats.held_bytes == 9 << 20
    pad.close()
    shared = ws.Scratchpad(shared=True)
    p1, _ = shared.get(ws.Request(SMALL, 0, "p", 1 << 20, int(s1.ptr)))
    p2, _ = shared.get(ws.Request(SMALL, 0, "p", 1 << 20, int(s2.ptr)))
    assert p1 == p2
    shared.close()


@pytest.mark.parametrize(
    "make",
    [ws.MallocPerCall, lambda: ws.KeyedCache(1 << 30), ws.Scratchpad, ws.CupyPool, ws.AsyncPool],
    ids=["malloc_per_call", "keyed_cache", "scratchpad", "cupy_pool", "async_pool"],
)
def test_memory_pressure_falls_back_or_fails_clearly(make):
    cg = graph_cache.get_graph(BIG_WS)
    need = cg.default_plan.workspace_bytes
    runner = Runner(make(), fallback=True)
    strict = Runner(make(), runner.stream, fallback=False)
    runner.operands(BIG_WS).poison_output()
    strict._operands = runner._operands
    free0 = _device_free()
    hog = memory.raw_malloc(free0 - (8 << 20), "pressure")  # leave ~8 MiB: less than the default plan needs
    try:
        rec = runner.run(BIG_WS)
        with pytest.raises(OutOfMemory) as info:
            strict.run(BIG_WS)
        runner.stream.synchronize()
    finally:
        memory.raw_free(hog)
    assert rec.fell_back_from == cg.default_plan.index and rec.workspace_bytes < need
    assert info.value.requested_bytes == need and "out of device memory" in str(info.value)
    _check_output(runner, BIG_WS)
    # the choice made under pressure is not stored as the spec's choice
    assert runner.choices[cg.key] == cg.default_plan.index
    strict.strategy.close()
    runner.close()
    with Runner(make()) as again:  # without pressure: the default plan again
        assert again.run(BIG_WS).fell_back_from is None


def test_bad_strategy_arguments():
    with pytest.raises(InvalidSpec):
        ws.make("bump")
    with pytest.raises(InvalidSpec):
        ws.FixedArena(-1)
    with pytest.raises(InvalidSpec):
        ws.FixedArena(1 << 40)
    with pytest.raises(InvalidSpec):
        ws.KeyedCache(1 << 20, key="shape")
    with pytest.raises(InvalidSpec):
        Runner("malloc")


def test_shared_scratchpad_races_once_kernels_overlap_and_per_stream_never_does():
    shared = concurrency.scratchpad_race(shared=True, launch="graph", min_runs=1024)
    private = concurrency.scratchpad_race(shared=False, launch="graph", min_runs=1024)
    python = concurrency.scratchpad_race(shared=True, launch="python", min_runs=1024)
    for r in (shared, private, python):
        print(r.as_dict())
    assert shared.runs >= 1000 and private.runs >= 1000
    assert shared.solo_rel_error <= 5e-3
    assert private.mismatches_bitwise == 0 and private.mismatches_vs_reference == 0
    assert shared.mismatches_bitwise > 0 and shared.mismatches_vs_reference > 0


def test_runners_in_turn_share_the_callers_operands_and_leave_them_alive():
    """The network report's strategies run one after another over the same pass: inputs made once."""
    shared = {}
    with Runner(ws.FixedArena(256 << 20), operands=shared) as first:
        ops = first.operands(SMALL)
        first.run(SMALL)
    assert shared and next(iter(shared.values())) is ops and ops.arrays  # close() left them alone
    with Runner(ws.MallocPerCall(), operands=shared) as second:
        assert second.operands(SMALL) is ops
        ops.poison_output()
        second.run(SMALL)
        _check_output(second, SMALL)
    with Runner(ws.MallocPerCall()) as own:
        mine = own.operands(SMALL)
    assert mine is not ops and not own._operands  # a runner's own operands go with it


#: the convolution whose output a Runner once read as NaN in the property test: its output's poison,
#: queued on the default stream, landed after the Runner's non-blocking stream had written it
RACED = ConvSpec.from_label("fp32 NHWC fprop 16x4x3x3 -> 1 3x1 s2 p3,0 d2,1")


def test_operands_are_written_before_a_runner_on_its_own_stream_reads_them():
    """Operands are filled on the default stream; a Runner's non-blocking stream does not wait for
    it. With the default stream held busy for 20 ms, a poison then a run at once still give the right
    output, and a new Operands leaves nothing queued behind it."""
    from labkit.gpu.workspaces.strategy_check import _hold

    default = cupy.cuda.get_current_stream()
    with Runner(ws.KeyedCache()) as runner:
        runner.run(RACED)  # graph built and checked, operands made: only the race is left to time
        _check_output(runner, RACED)
        ops = runner.operands(RACED)
        for _ in range(3):
            _hold(default, 20_000)
            ops.poison_output()  # queued behind the hold: it must be done before run() queues the call
            runner.run(RACED)
            _check_output(runner, RACED)
        _hold(default, 20_000)
        fresh = operands.Operands(RACED, seed=1)
        assert default.done, "Operands returned with its tensors still being written"
        assert fresh.arrays


def _count_device_syncs(monkeypatch):
    """Count every cudaDeviceSynchronize made through CuPy's runtime module (labkit's only way to it)."""
    calls = []
    real = cupy.cuda.runtime.deviceSynchronize
    monkeypatch.setattr(cupy.cuda.runtime, "deviceSynchronize", lambda: (calls.append(1), real())[1])
    return calls


#: every shipped strategy, set up to evict or grow on the sequence below
ORDERED = [
    lambda: ws.FixedArena(256 << 20),
    ws.MallocPerCall,
    lambda: ws.KeyedCache(32 << 20),  # BIG_WS (~25.8 MB) and its half batch cannot both stay: evictions
    ws.Scratchpad,
    lambda: ws.Scratchpad(shared=True),
    ws.CupyPool,
    ws.AsyncPool,
    ws.Preallocated,
]


@pytest.mark.parametrize(
    "make",
    ORDERED,
    ids=[*ws.STRATEGIES][:4] + ["scratchpad_shared", "cupy_pool", "async_pool", "preallocated"],
)
def test_no_strategy_synchronises_the_device_in_get_or_put(make, monkeypatch):
    """Eviction, scratchpad growth and buffers handed across streams wait on events, never on the
    whole device: cudaDeviceSynchronize is counted through CuPy's runtime and through the seam."""
    half = BIG_WS.replace(N=16)
    seq = [SMALL, BIG_WS, half, BIG_WS, SMALL, half]  # scratchpads grow, the 32 MiB cache evicts
    strategy = make()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    runners = [Runner(strategy, s, seed=i) for i, s in enumerate(streams)]
    for spec in dict.fromkeys(seq):
        for r in runners:
            graph_cache.get_graph(spec)
            r.operands(spec)
    syncs = _count_device_syncs(monkeypatch)
    before = strategy.device.counts["synchronize"]
    for spec in seq:
        for r in runners:
            r.run(spec)
    assert not syncs and strategy.device.counts["synchronize"] == before, f"{len(syncs)} device syncs"
    for s in streams:
        s.synchronize()
    for r in runners:
        r.close()


def test_a_cached_buffer_used_from_two_streams_is_ordered_by_an_event_and_right():
    """The same key on two streams: the second stream waits for the first's event on the device,
    and both outputs match float64 with the first stream held busy."""
    from labkit.gpu.workspaces.strategy_check import _hold

    cache = ws.KeyedCache(256 << 20)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    runners = [Runner(cache, s, seed=i) for i, s in enumerate(streams)]
    for r in runners:
        r.run(BIG_WS)
        _check_output(r, BIG_WS)
    waits = cache.device.counts["wait_event"]
    for r in runners:
        r.operands(BIG_WS).poison_output()
    _hold(streams[0], 5000)
    runners[0].run(BIG_WS)
    runners[1].run(BIG_WS)  # the same buffer: must not start before stream 0's call is done
    assert cache.device.counts["wait_event"] > waits
    for r in runners:
        _check_output(r, BIG_WS)
        r.close()


def test_the_fixed_arena_no_longer_races_across_streams_and_the_shared_scratchpad_still_does():
    from labkit.gpu.workspaces import strategy_check

    fixed = strategy_check.check_strategy(lambda: ws.FixedArena(256 << 20))
    shared = strategy_check.check_strategy(lambda: ws.Scratchpad(shared=True))
    assert fixed.ok and not fixed.races, fixed
    assert shared.races, shared


@pytest.mark.parametrize(
    "make",
    [lambda: ws.FixedArena(256 << 20), lambda: ws.KeyedCache(256 << 20), ws.Preallocated],
    ids=["fixed_arena", "keyed_cache", "preallocated"],
)
@pytest.mark.parametrize("streams", [2, 4])
def test_graphs_of_streams_that_share_one_buffer_capture_and_take_turns_at_launch(make, streams):
    """No capture waits for an event recorded outside it (CUDA would invalidate it): each launch of a
    graph first waits for the shared buffer's last use on another stream. With stream 0 held busy,
    every output is right."""
    from labkit.gpu.workspaces.strategy_check import _hold

    strategy = make()
    runners = [Runner(strategy, seed=i) for i in range(streams)]
    for r in runners:
        r.run(BIG_WS)
    for r in runners:
        r.stream.synchronize()
    graphs = [
        strategy.device.capture(lambda r=r: [r.run(BIG_WS) for _ in range(3)], r.stream) for r in runners
    ]
    for r in runners:
        r.operands(BIG_WS).poison_output()
        r.stream.synchronize()
    waits = strategy.device.counts["wait_event"]
    _hold(runners[0].stream, 5000)
    for g, r in zip(graphs, runners):
        g.launch(r.stream)
    assert strategy.device.counts["wait_event"] == waits + streams  # each launch waited, outside a capture
    for r in runners:
        _check_output(r, BIG_WS)
        r.close()


def test_what_cuda_forbids_in_a_capture_is_a_one_line_labkit_error_and_the_stream_lives_on():
    from labkit import NotCapturable

    for make, seq in (
        (ws.MallocPerCall, [BIG_WS]),
        (lambda: ws.KeyedCache(32 << 20), [BIG_WS.replace(N=16), BIG_WS]),  # the second evicts
        (ws.Scratchpad, [BIG_WS.replace(N=16), BIG_WS]),  # the second grows it
    ):
        strategy = make()
        runner = Runner(strategy)
        runner.run(seq[0])
        runner.stream.synchronize()
        with pytest.raises(NotCapturable) as got:
            strategy.device.capture(lambda: [runner.run(s) for s in seq], runner.stream)
        assert "cannot be captured in a CUDA graph: CUDA refuses it" in str(got.value)
        assert "\n" not in str(got.value) and not runner.stream.is_capturing()
        runner.operands(BIG_WS).poison_output()
        runner.run(BIG_WS)  # the stream and the strategy still work
        _check_output(runner, BIG_WS)
        runner.close()
