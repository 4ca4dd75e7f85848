"""Build workers' settings, without a GPU (labkit.gpu.cudnn.builds imports nothing of CUDA at the top)."""

import threading

import pytest

from labkit import InvalidSpec
from labkit.gpu.cudnn import build_pool, builds
from labkit.spec import ConvSpec


@pytest.mark.parametrize("raw, want", [("0", 0), ("3", 3), (" 2 ", 2)])
def test_labkit_build_workers_sets_the_count(monkeypatch, raw, want):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", raw)
    assert build_pool.default_workers() == want


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_a_bad_labkit_build_workers_is_named(monkeypatch, raw):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", raw)
    with pytest.raises(InvalidSpec, match="LABKIT_BUILD_WORKERS"):
        build_pool.default_workers()


def test_the_default_leaves_a_core_free_and_stops_at_eight(monkeypatch):
    monkeypatch.delenv("LABKIT_BUILD_WORKERS", raising=False)
    monkeypatch.setattr(build_pool.os, "cpu_count", lambda: 2)
    assert build_pool.default_workers() == 1
    monkeypatch.setattr(build_pool.os, "cpu_count", lambda: 64)
    assert build_pool.default_workers() == build_pool.MAX_WORKERS


def test_a_class_gets_fewer_workers_and_starts_them_with_the_first_build(monkeypatch):
    """A learner reading a class's shared recording: at most CLASS_WORKERS (each is a CUDA context
    on the GPU the class shares), none started by the lesson's first cell; LABKIT_BUILD_WORKERS
    still decides when set."""
    from labkit import env
    from labkit.session import lessons

    monkeypatch.delenv("LABKIT_BUILD_WORKERS", raising=False)
    monkeypatch.setattr(build_pool.os, "cpu_count", lambda: 64)
    monkeypatch.setenv("LABKIT_SHARED_CACHE", "/srv/labkit-class")
    assert build_pool.in_class()
    assert build_pool.default_workers() == build_pool.CLASS_WORKERS < build_pool.MAX_WORKERS
    monkeypatch.setattr(env, "mode", lambda: type("Live", (), {"live": True})())
    started = []
    monkeypatch.setattr(build_pool, "start_workers", lambda: started.append(1))
    assert lessons.start_build_workers() == 0 and not started
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", "5")
    assert build_pool.default_workers() == 5
    monkeypatch.setenv("LABKIT_SHARED_CACHE", " ")
    monkeypatch.delenv("LABKIT_BUILD_WORKERS")
    assert not build_pool.in_class() and build_pool.default_workers() == build_pool.MAX_WORKERS
    monkeypatch.setattr(
        build_pool, "start_workers", lambda: started.append(1) or type("P", (), {"size": 8})()
    )
    assert lessons.start_build_workers() == 8 and started


def test_zero_workers_means_no_pool(monkeypatch):
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", "0")
    assert build_pool.pool() is None
    assert builds.ahead([]) == 0


@pytest.mark.parametrize(
    "raw, want",
    [("", builds.INTERACTIVE_COMPILE_BUDGET_S), ("none", None), ("0", None), ("2.5", 2.5), (" 10 ", 10.0)],
)
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


def test_a_spent_requests_queued_compiles_are_cancelled_with_their_batch_and_others_run():
    """Real worker processes, a stand-in build: one worker; a request's first job runs, its other
    two are cancelled together (`cancel_queued`), and an older request's job still runs."""
    import time

    pool = build_pool.BuildPool(1)
    pool.target = "isolated_steps:slow_build"
    try:
        older, request = pool.batch(), pool.batch()
        mine = [pool.submit(build_pool.Job({}, "none", None, i, f"plan{i}"), request) for i in range(3)]
        theirs = pool.submit(build_pool.Job({}, "none", None, 9, "plan9"), older)
        t0 = time.monotonic()
        while not mine[0].future.running() and time.monotonic() - t0 < 60:
            time.sleep(0.02)
        assert mine[0].future.running()  # the newest batch first
        assert pool.cancel_queued(request) == 2
        assert [j.future.cancelled() for j in mine] == [False, True, True]
        assert mine[0].future.result(timeout=60)["index"] == 0
        assert theirs.future.result(timeout=60)["index"] == 9
        assert pool.cancel_queued(request) == 0
    finally:
        pool.close()


def test_a_plan_goes_back_to_the_worker_that_built_its_engine_unless_that_one_has_a_queue():
    """Real worker processes, a stand-in build: the same engine of the same dtype, layout and
    direction at another shape goes to the worker that built it (cuDNN's compiled kernels live
    there); a new engine goes to the idle worker; a second job queued behind a busy worker's own is
    taken by another."""
    pool = build_pool.BuildPool(2)
    pool.target = "isolated_steps:pid_build"

    def job(n, name):
        return build_pool.Job(
            dict(dtype="fp16", layout="NHWC", direction="fprop", N=n), "none", None, 0, name
        )

    try:
        first = pool.submit(job(8, "eng1")).future.result(timeout=60)["pid"]
        again, other = pool.submit(job(16, "eng1")), pool.submit(job(16, "eng2"))
        assert again.future.result(timeout=60)["pid"] == first
        assert other.future.result(timeout=60)["pid"] != first
        three = [pool.submit(job(n, "eng1")) for n in (1, 2, 4)]
        pids = [j.future.result(timeout=60)["pid"] for j in three]
        assert pids[0] == first and len(set(pids)) == 2
    finally:
        pool.close()


def test_a_long_wait_for_a_workers_plan_says_where_it_is_on_the_progress_bar(monkeypatch):
    """A fill's call that waits minutes for runtime-compiled plans (fusion on the H200: about 4
    minutes) is not silent: the wait announces itself every WAIT_NOTE_S seconds, and the fill's
    progress bar shows it (cli.record.saying_on). Real Future, Budget and tqdm; the plan never
    arrives, so the budget ends the wait as it would."""
    import io
    import types

    from tqdm import tqdm

    from labkit.cli.record import saying_on
    from labkit.signals.cancel import Budget

    monkeypatch.setattr(builds, "WAIT_NOTE_S", 0.1)
    cg = types.SimpleNamespace(
        spec=types.SimpleNamespace(label="conv fp8", key="k"), epilogue="", workspace_cap=None
    )
    job = build_pool.Job({}, "", None, 3, "eng3")
    why_not, out = {}, io.StringIO()
    bar = tqdm(total=1, file=out, mininterval=0)
    with saying_on(bar, "fusion"):
        builds._collect(cg, job, Budget(0.5, "test budget"), why_not, {}, None)
    bar.close()
    assert "fusion: plan 3 (eng3) of conv fp8: compiled at run time in a worker" in out.getvalue()
    assert why_not[3].startswith("cut: not compiled when the budget")


def test_a_process_that_measures_while_its_workers_start_runs_fewer_by_default(monkeypatch):
    """The network report's worker (`worker_warmup.warm`) caps its default at MEASURING_WORKERS,
    under the class's cap, and LABKIT_BUILD_WORKERS still decides when set."""
    monkeypatch.delenv("LABKIT_BUILD_WORKERS", raising=False)
    monkeypatch.delenv("LABKIT_SHARED_CACHE", raising=False)
    monkeypatch.setattr(build_pool.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(build_pool, "_cap", None)
    build_pool.capped_by_default()
    assert build_pool.default_workers() == build_pool.MEASURING_WORKERS < build_pool.MAX_WORKERS
    monkeypatch.setenv("LABKIT_SHARED_CACHE", "/srv/labkit-class")
    assert build_pool.default_workers() == min(build_pool.CLASS_WORKERS, build_pool.MEASURING_WORKERS)
    monkeypatch.setenv("LABKIT_BUILD_WORKERS", "6")
    assert build_pool.default_workers() == 6


@pytest.mark.parametrize("most", [-1, 2.5, "4", True, None])
def test_a_bad_cap_is_named(monkeypatch, most):
    monkeypatch.setattr(build_pool, "_cap", None)
    with pytest.raises(InvalidSpec, match="most"):
        build_pool.capped_by_default(most)
    assert build_pool._cap is None


def test_ready_ahead_answers_the_graphs_with_no_compile_running_waiting_for_the_first_to_finish(monkeypatch):
    """What the network report asks when its next layer still compiles (`report_steps.ready_step`):
    the graphs whose queued compiles are all done, in order; when none is, it waits for the first
    to finish, not for the first graph's; [] when none finishes in time."""
    specs = [ConvSpec(N=1, C=8, H=8, W=8, K=k) for k in (8, 16, 32)]
    graphs = [(s, "none", None) for s in specs]
    jobs = {k: build_pool.Job({}, "none", None, 0, f"p{k}") for k in range(3)}
    monkeypatch.setattr(builds, "_ahead", builds._ahead.__class__())
    for k, s in enumerate(specs):
        builds._ahead[(s.key, "none", None)] = (None, {0: jobs[k]})
    jobs[1].future.set_result({})
    assert builds.ready_ahead(graphs, wait_s=0.0) == [1]
    jobs[1] = build_pool.Job({}, "none", None, 0, "p1")  # running again
    builds._ahead[(specs[1].key, "none", None)] = (None, {0: jobs[1]})
    assert builds.ready_ahead(graphs, wait_s=0.05) == [], "none finished in time"
    threading.Timer(0.2, lambda: jobs[2].future.set_result({})).start()
    assert builds.ready_ahead(graphs, wait_s=10.0) == [2], "the first to finish, not the first graph"
    assert builds.ready_ahead([(ConvSpec(N=2, C=8, H=8, W=8, K=8), "none", None)], wait_s=0.0) == [0], (
        "a graph not planned ahead has nothing running"
    )
