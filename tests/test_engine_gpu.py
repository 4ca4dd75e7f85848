"""The engine on a real GPU: every plan against the float64 reference, caps, cache, errors."""

import gc
import time

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from gpu_helpers import random_specs, small_grid  # noqa: E402

from labkit import ConvSpec, InvalidSpec, OutOfMemory, Unsupported, env  # noqa: E402
from labkit.gpu.audits import verify  # noqa: E402
from labkit.gpu.buffers import memory  # noqa: E402
from labkit.gpu.checks import plan_checks  # noqa: E402
from labkit.gpu.cudnn import (  # noqa: E402
    conv_graph,
    graph_cache,
    operands,
    reference_runs,  # noqa: E402
    saved_plans,
)
from labkit.gpu.timing import autotune, measure  # noqa: E402
from labkit.signals.cancel import was_cut  # noqa: E402


def _graph_or_unsupported(spec, **kw):
    try:
        return graph_cache.get_graph(spec, **kw)
    except Unsupported as exc:
        assert exc.reason, "Unsupported must carry cuDNN's reason"
        return None


def test_every_plan_of_the_small_grid_matches_the_reference():
    checked, unsupported, failures = 0, [], []
    for spec in small_grid():
        g = _graph_or_unsupported(spec)
        if g is None:
            unsupported.append(spec.label)
            continue
        for plan in g.runnable:
            r = verify.check_plan(spec, plan_index=plan.index, seed=plan.index, graph=g)
            checked += 1
            if not r.ok:
                failures.append(
                    f"{spec.label} plan {plan.index} {plan.name}: rel {r.rel_error:.2e} > {r.tolerance:.0e}"
                )
    print(f"checked {checked} plans; unsupported: {unsupported}")
    assert not failures, "\n".join(failures[:20])
    assert checked > 500
    cc = float(env.environment().compute_capability or 0)
    if cc >= 8.9:  # fp8 tensor cores (Ada, Hopper and later)
        # plans found wrong (eng7_k24=26 here on an H100 with cuDNN 9.19) are excluded with their
        # error, and the plan run by default is a right one
        fp8 = graph_cache.get_graph(
            ConvSpec(N=2, C=32, H=12, W=12, K=32, padding=1, dtype="fp8_e4m3", layout="NCHW")
        )
        wrong = {p.name: v.rel_error for p, v in fp8.wrong}
        print(
            f"fp8 NCHW: plans found wrong and excluded: {wrong}; {fp8.fell_through or 'heuristic pick right'}"
        )
        assert fp8.verdicts[fp8.default_plan.index].ok and fp8.default_plan.name not in wrong
        assert not wrong.keys() & {p.name for p in fp8.runnable}
        table = fp8.plan_table()
        assert set(table[table.verdict.map(plan_checks.is_wrong)].name) == set(wrong)
    # cuDNN 9.19 on Hopper runs fp8 fprop; anything it refuses must be a dtype this GPU may lack
    # (fp8 on some configurations and before compute capability 8.9; bf16 and tf32 before 8.0)
    lacks = ("fp8",) + (("bf16", "tf32") if cc < 8.0 else ())
    assert all(any(d in u for d in lacks) for u in unsupported), unsupported


@pytest.mark.parametrize("direction", ["fprop", "dgrad", "wgrad"])
def test_random_specs_match_the_reference(direction):
    bad = []
    for i, spec in enumerate(
        random_specs(direction, 100, seed={"fprop": 1, "dgrad": 2, "wgrad": 3}[direction])
    ):
        g = _graph_or_unsupported(spec, all_plans=False)
        if g is None:
            if spec.dtype != "tf32":  # tf32 = tensor-core plans only; some odd shapes have none
                bad.append(f"{spec.label}: unsupported")
            continue
        r = verify.check_plan(spec, seed=i, graph=g)
        if not r.ok:
            bad.append(f"{spec.label} plan {r.plan_name}: rel {r.rel_error:.2e} > {r.tolerance:.0e}")
    assert not bad, "\n".join(bad[:20])


def test_fused_epilogues_match_the_reference():
    for epi in ("bias_relu", "bias_relu_add"):
        spec = ConvSpec(N=2, C=32, H=12, W=12, K=32, dtype="fp16", layout="NHWC")
        g = graph_cache.get_graph(spec, epi)
        for plan in g.runnable[:6]:
            r = verify.check_plan(spec, epi, plan_index=plan.index, graph=g)
            assert r.ok, (epi, plan.name, r.rel_error)


@pytest.mark.parametrize("cap", [0, 1 << 20, 64 << 20, None])
def test_workspace_cap_is_respected(cap):
    spec = ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NCHW")
    g = graph_cache.get_graph(spec, workspace_cap=cap)
    assert g.runnable
    for plan in g.runnable:
        if cap is not None:
            assert plan.workspace_bytes <= cap, plan
    for plan in g.runnable[:4]:
        assert verify.check_plan(spec, plan_index=plan.index, workspace_cap=cap, graph=g).ok


def test_autotune_takes_the_times_of_plans_timed_under_another_cap():
    """`experiments.caps` times each plan once: a capped graph's plans reuse the unlimited graph's
    rows (same convolution, same plan name) instead of being timed again."""
    spec = ConvSpec(N=8, C=64, H=28, W=28, K=64, dtype="fp16", layout="NCHW")
    unlimited = autotune.autotune(graph_cache.get_graph(spec), save=False)
    rows = {r["plan_name"]: r for r in unlimited.table.to_dict("records") if r["status"] == "ok"}
    capped = autotune.autotune(graph_cache.get_graph(spec, workspace_cap=16 << 20), save=False, timed=rows)
    ok = capped.table[capped.table.status == "ok"]
    reused = ok[ok.plan_name.isin(list(rows))]
    assert len(reused) >= 2 and (reused.seconds == 0).all()
    assert (ok[~ok.plan_name.isin(list(rows))].seconds > 0).all()  # a plan not timed before is timed
    for r in reused.itertuples():  # its time as given, or (timed again in the final rounds) its first pass
        assert rows[r.plan_name]["gpu_us"] in (r.gpu_us, r.first_pass_us)


def test_cache_hit_is_much_faster_than_a_rebuild_and_keys_never_collide():
    cache = graph_cache.GraphCache(max_entries=8)
    base = ConvSpec(N=4, C=32, H=20, W=20, K=32, dtype="fp16", layout="NHWC")
    t0 = time.perf_counter()
    g1 = cache.get(base)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert cache.get(base) is g1
    hit = time.perf_counter() - t0
    rebuild_t0 = time.perf_counter()
    conv_graph.ConvGraph(base)
    rebuild = time.perf_counter() - rebuild_t0
    print(f"build {build * 1e3:.1f} ms, rebuild {rebuild * 1e3:.1f} ms, hit {hit * 1e6:.1f} us")
    assert hit * 3 <= rebuild
    variants = [
        base.replace(dtype="fp32"),
        base.replace(layout="NCHW"),
        base.replace(dilation=2, padding=2),
        base.replace(direction="dgrad"),
        base.replace(stride=2),
        base.replace(groups=2),
    ]
    graphs = [cache.get(v) for v in variants] + [cache.get(base, workspace_cap=0)]
    assert len({id(g) for g in graphs + [g1]}) == len(graphs) + 1
    assert cache.stats.misses == 1 + len(graphs) and cache.stats.hits == 1
    for v, g in zip(variants, graphs):
        assert g.spec == v


def test_plan_table_says_which_plans_are_deterministic():
    wgrad = graph_cache.get_graph(ConvSpec(N=8, C=64, H=28, W=28, K=64, direction="wgrad"))
    table = wgrad.plan_table(determinism=True)
    assert set(table.columns) >= {"index", "name", "workspace_bytes", "built", "notes", "deterministic"}
    assert table.deterministic.any()
    print(f"wgrad: {int((~table.deterministic).sum())} of {len(table)} plans nondeterministic")


def test_cache_is_bounded_lru():
    cache = graph_cache.GraphCache(max_entries=2)
    a, b, c = (
        ConvSpec(N=1, C=8, H=8, W=8, K=8, dtype="fp16", layout="NHWC", R=r, S=r, padding=0) for r in (1, 3, 5)
    )
    cache.get(a), cache.get(b), cache.get(a), cache.get(c)
    assert len(cache) == 2 and cache.stats.evictions == 1
    assert conv_graph.graph_key(b) not in cache and conv_graph.graph_key(a) in cache


def test_bad_inputs_raise_labkit_errors():
    spec = ConvSpec(N=1, C=8, H=8, W=8, K=8)
    with pytest.raises(InvalidSpec):
        graph_cache.get_graph(spec, "gelu")
    with pytest.raises(InvalidSpec):
        graph_cache.get_graph(spec.replace(direction="dgrad"), "bias_relu")
    with pytest.raises(InvalidSpec):
        graph_cache.get_graph(spec, workspace_cap=1 << 40)
    with pytest.raises(InvalidSpec):
        graph_cache.get_graph(spec, workspace_cap=-1)
    with pytest.raises(InvalidSpec):
        graph_cache.get_graph(spec).plan(10_000)
    with pytest.raises(InvalidSpec):
        memory.GuardedBuffer(1 << 40)
    for bad in (
        lambda: saved_plans.load_plan("32x64x56x56"),
        lambda: saved_plans.load_plan(spec, "gelu"),
        lambda: saved_plans.load_plan(spec, kind="fastest"),
        lambda: autotune.tuned_graph(None),
    ):
        with pytest.raises(InvalidSpec):
            bad()


def test_out_of_memory_is_an_answer_and_frees_everything():
    from labkit.session import prefetch

    with prefetch.PREFETCHER.foreground(
        "out-of-memory test"
    ):  # no background measurement allocates meanwhile
        _out_of_memory_is_an_answer_and_frees_everything()


def _out_of_memory_is_an_answer_and_frees_everything():
    for dtype, layout in (
        ("fp32", "NCHW"),
        ("fp16", "NHWC"),
    ):  # load the kernels Operands uses first (as `big` needs)
        operands.Operands(ConvSpec(N=1, C=8, H=8, W=8, K=8, dtype=dtype, layout=layout))
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    free0 = memory.free_bytes()
    hog = memory.raw_malloc(free0 - (256 << 20), "pressure")  # leave ~256 MiB free
    try:
        big = ConvSpec(
            N=16, C=256, H=128, W=128, K=256, dtype="fp16", layout="NHWC"
        )  # 64 Mi elements per image
        with pytest.raises(OutOfMemory) as info:
            operands.Operands(big)
        assert info.value.requested_bytes > 0 and info.value.free_bytes is not None
        assert "out of device memory" in str(info.value)
    finally:
        memory.raw_free(hog)
        del info  # its traceback holds the frames that allocated
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()
    # nothing of ours is left: free memory is back (it can be higher: the GPU's free memory is
    # device-wide, and another process of this run, e.g. a build worker, may have given some back)
    assert free0 - memory.free_bytes() < (8 << 20), (free0, memory.free_bytes())
    assert verify.check_plan(ConvSpec(N=1, C=8, H=8, W=8, K=8)).ok  # the process goes on


def test_fast_path_is_used_and_dispatch_is_cheap():
    from labkit.gpu.timing import measure

    spec = ConvSpec(N=1, C=64, H=56, W=56, K=64, dtype="fp16", layout="NHWC")
    g = graph_cache.get_graph(spec)
    ops = operands.Operands(spec)
    ws = memory.alloc(g.default_plan.workspace_bytes, "ws")
    stream = cupy.cuda.Stream(non_blocking=True)
    b = g.bind(ops.arrays, int(ws.data.ptr), stream=stream)
    assert b._fast is not None
    host = measure.host_dispatch(b.run, stream)
    replay = measure.graph_replay(b.run, stream)
    print(f"host dispatch {host.median_us:.1f} us, graph replay {replay.median_us:.1f} us per conv")
    assert host.median_us < 200  # sanity only; the benchmark reports the real numbers


def test_a_capture_holds_the_garbage_collector_off():
    """No finalizer may synchronise the device inside a capture (`labkit.gpu.timing.collector`)."""
    import cupy

    from labkit.gpu.timing import measure

    seen, x = [], cupy.zeros(8)
    stream = measure.timing_stream()
    with stream:
        x += 1  # its kernel loaded before the capture
    measure.capture(lambda: (seen.append(gc.isenabled()), x.__iadd__(1)), stream, 3)
    assert seen == [False] * 3 and gc.isenabled()


def test_bind_with_workspace_holds_the_plans_workspace_and_computes_the_reference():
    from labkit.gpu.checks import reference

    spec = ConvSpec(N=2, C=32, H=14, W=14, K=32, R=3, S=3, padding=1, dtype="fp16", layout="NCHW")
    g = graph_cache.get_graph(spec)
    needs = [p for p in g.runnable if p.workspace_bytes > 0]
    assert needs, "no plan of this convolution asks for a workspace: pick another"
    ops = operands.Operands(spec)
    want = reference_runs.expected(spec, ops)
    for plan in (needs[0], g.default_plan):
        ops.poison_output()
        b = g.bind_with_workspace(ops.arrays, plan.index)
        assert b.workspace.nbytes == plan.workspace_bytes
        assert b.workspace_ptr == int(b.workspace.data.ptr)
        b.run()
        cupy.cuda.get_current_stream().synchronize()
        assert reference.relative_error(ops.output(), want) < 1e-2, plan.name


def test_a_first_eager_call_far_over_its_bound_is_not_made_again():
    """`measure.eager_us` with ``first_stop_us``: a call that is already far over its bound once is
    not called a second time (a depthwise convolution's slow plans take tens of milliseconds)."""
    import cupy

    a = cupy.ones((4096, 4096))  # one float64 product: about 2 ms
    calls = []

    def fn():
        calls.append(1)
        a @ a

    stream = measure.timing_stream()
    with pytest.raises(measure.TooSlow) as slow:
        measure.eager_us(fn, stream, first_stop_us=10.0)
    assert len(calls) == 1 and slow.value.eager_us > 10.0
    assert measure.eager_us(fn, stream, first_stop_us=1e9) > 10.0 and len(calls) == 3


def test_a_loaded_call_within_its_bound_is_called_eagerly_once():
    """`measure.eager_us` with ``enough_us`` (a call whose kernels are loaded, as a plan's check
    loads them): a first call within it is the answer; one over it is called a second time."""
    import cupy

    a = cupy.ones((1024, 1024))
    calls = []

    def fn():
        calls.append(1)
        a @ a

    stream = measure.timing_stream()
    with stream:
        fn()  # loaded
    stream.synchronize()
    calls.clear()
    assert measure.eager_us(fn, stream, enough_us=1e9) > 0 and len(calls) == 1
    assert measure.eager_us(fn, stream, enough_us=0.0) > 0 and len(calls) == 3


def test_a_first_call_made_already_within_its_bound_is_the_eager_time():
    """`measure.graph_replay` with ``first_us`` (a plan's run in its check): within the eager bound it
    is the eager time, with no eager call (``eager_reused``); over it (a first launch loads kernels)
    or NaN, the eager calls are made as without it, and it stops nothing."""
    import cupy

    a, b = cupy.ones((256, 256)), cupy.empty((256, 256))
    calls = []

    def fn():  # an elementwise kernel: cuBLAS cannot be captured
        calls.append(1)
        cupy.multiply(a, 2.0, out=b)

    stream = measure.timing_stream()
    with stream:
        fn()  # loaded
    stream.synchronize()
    kw = dict(calls=2, warmup=1, repeats=2, min_repeats=1, ran_before=True)
    calls.clear()
    t = measure.graph_replay(fn, stream, eager_stop_above_us=1e6, first_us=40.0, **kw)
    assert t.eager_us == 40.0 and t.eager_reused and len(calls) == 2  # the two captured calls only
    calls.clear()
    t = measure.graph_replay(fn, stream, eager_stop_above_us=1e6, first_us=1e8, **kw)
    assert t.eager_us < 1e8 and not t.eager_reused and len(calls) == 3  # one eager call, then the capture
    calls.clear()
    t = measure.graph_replay(fn, stream, eager_stop_above_us=1e6, first_us=float("nan"), **kw)
    assert not t.eager_reused and len(calls) == 3


def test_the_check_times_each_plans_run_here_and_autotune_stops_a_far_slower_one_on_it():
    spec = ConvSpec(
        N=16, C=240, H=28, W=28, K=240, R=3, S=3, padding=1, groups=240, dtype="fp16", layout="NHWC"
    )
    cg = graph_cache.get_graph(spec)
    cg.check()
    assert {p.index for p in cg.built} <= set(cg.ran_here)
    assert all(us > 0 for us in cg.ran_here.values())  # each run's GPU time, in microseconds
    tuned = autotune.autotune(cg, operands.Operands(spec))
    slower = tuned.table[tuned.table.status.str.startswith("slower")]
    ok = tuned.table[tuned.table.status == "ok"]
    assert len(ok) and (slower.eager_us > autotune.EAGER_STOP_RATIO * ok.eager_us.min()).all()
    # the rows the report reads say what the table says
    table = tuned.table
    assert len(tuned.rows) == len(table) and tuned.slower == len(slower) > 0
    assert tuned.best_index == int(ok.loc[ok.gpu_us.idxmin(), "plan_index"])
    assert tuned.cut == int(table.status.map(was_cut).sum())
    assert tuned.wrong == int(table.status.map(plan_checks.is_wrong).sum())
    for index in ok.plan_index:
        assert tuned.gpu_us(int(index)) == float(table[table.plan_index == index].gpu_us.iloc[0])
