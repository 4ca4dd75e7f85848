"""Runtime-compiled plans built in worker processes (labkit.gpu.cudnn.builds), on a real GPU: the same
plans as a build in one process, each correct against the float64 reference; a worker that dies
is replaced and its plan built here; Ctrl-C stops the workers; no worker outlives its parent."""

import _thread
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit import ConvSpec  # noqa: E402
from labkit.gpu.audits import verify  # noqa: E402
from labkit.gpu.cudnn import build_pool, builds, conv_graph, frontend, graph_cache  # noqa: E402
from labkit.signals.cancel import Budget  # noqa: E402

#: graphs with several runtime-compiled plans on the H100 and H200 (data/bench/build_costs_h200.csv):
#: fp8 fprop (eng4_k24 variants, eng2) and a 16-bit dgrad (eng78)
SPECS = [
    ConvSpec(N=4, C=32, H=20, W=20, K=32, R=3, S=3, padding=1, dtype="fp8_e4m3", layout=lay)
    for lay in ("NHWC", "NCHW")
]
SPECS.append(
    ConvSpec(N=4, C=32, H=20, W=20, K=48, R=3, S=3, padding=1, dtype="bf16", layout="NHWC", direction="dgrad")
)


@pytest.fixture(scope="module")
def pool():
    p = build_pool.pool()
    if p is None:
        pytest.skip("LABKIT_BUILD_WORKERS=0 or a daemonic process: no build workers")
    p.start()
    return p


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.label)
def test_worker_built_plans_are_the_same_plans_and_correct(spec, pool):
    here = conv_graph.ConvGraph(spec, parallel=False)
    there = conv_graph.ConvGraph(spec)
    compiled = builds.runtime_compiled(there.graph, len(there.plans))
    assert [(p.name, p.built) for p in there.plans] == [(p.name, p.built) for p in here.plans]
    assert [p.workspace_bytes for p in there.plans] == [p.workspace_bytes for p in here.plans]
    if len(compiled) >= 2:
        assert there.remote, f"{spec.label}: {len(compiled)} runtime-compiled plans, none built by a worker"
    for index in [p.index for p in there.runnable if p.index in there.remote]:  # not those found wrong
        r = verify.check_plan(spec, plan_index=index, seed=index, graph=there)
        assert r.ok, (
            f"{spec.label} plan {index} ({there.plans[index].name}) built in a worker: rel {r.rel_error:.2e}"
        )


def test_planned_ahead_graphs_use_the_queued_compiles(pool):
    specs = [s.replace(N=6) for s in SPECS]
    before = pool.stats.remote
    queued = builds.ahead([(s, "none", None) for s in specs])
    assert queued >= 2
    for s in specs:
        cg = graph_cache.get_graph(s)
        assert cg.runnable
    assert pool.stats.remote + pool.stats.local > before
    assert not any(builds.take_ahead(s, "none", None)[0] for s in specs), "a planned graph was left behind"


@pytest.mark.parametrize("fault", ["die_building", "hang_building"])
def test_a_worker_that_dies_or_hangs_is_replaced_and_its_plan_built_here(pool, monkeypatch, fault):
    spec = SPECS[0].replace(N=7 if fault == "die_building" else 8)
    here = conv_graph.ConvGraph(spec, parallel=False)
    faults = pool.stats.worker_faults
    monkeypatch.setattr(pool, "target", f"isolated_steps:{fault}")
    monkeypatch.setattr(build_pool, "PLAN_BUDGET_S", 3.0)
    t0 = time.perf_counter()
    cg = conv_graph.ConvGraph(spec)
    took = time.perf_counter() - t0
    assert [(p.name, p.built) for p in cg.plans] == [(p.name, p.built) for p in here.plans]
    assert not cg.remote
    assert pool.stats.worker_faults > faults, "no worker failed: the fault was not exercised"
    assert took < 30, f"{took:.1f} s: waited on failed workers"
    monkeypatch.undo()
    again = conv_graph.ConvGraph(spec.replace(N=spec.N + 20))  # the pool works again: new workers start
    assert again.runnable and pool.pids()


def _planned(spec):
    cg = conv_graph.ConvGraph.__new__(conv_graph.ConvGraph)
    cg.spec, cg.epilogue, cg.workspace_cap = spec, "none", None
    cg.graph = frontend.planned_graph(spec)
    return cg


def test_ctrl_c_while_waiting_stops_the_workers(pool):
    cg = _planned(SPECS[0].replace(N=11))  # a new shape: its compiles take seconds
    pool.start()
    before = pool.pids()
    threading.Timer(0.3, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt) as info:
        builds.build_plans(cg, Budget(60, "a build"))
        time.sleep(5)  # the build was faster than the timer: the interrupt lands here
    if any(entry.name == "build_plans" for entry in info.traceback):
        time.sleep(0.5)
        assert not [p for p in before if _running(p)], "Ctrl-C during a build left its workers running"
    assert conv_graph.ConvGraph(SPECS[1].replace(N=13)).runnable  # and they come back for the next build


def test_no_worker_outlives_a_killed_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent("""
        import time
        from labkit.gpu.cudnn import build_pool

        if __name__ == "__main__":  # spawned workers import this file again
            p = build_pool.pool(); p.start()
            t0 = time.time()
            while len(p.pids()) < p.size and time.time() - t0 < 60:
                time.sleep(0.2)
            print(" ".join(map(str, p.pids())), flush=True)
            time.sleep(600)
    """)
    )
    env = dict(os.environ, LABKIT_BUILD_WORKERS="2", PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    pids = [int(x) for x in proc.stdout.readline().split()]
    assert len(pids) == 2
    proc.kill()
    proc.wait()
    deadline = time.time() + 5
    alive = pids
    while alive and time.time() < deadline:
        time.sleep(0.1)
        alive = [p for p in pids if _running(p)]
    assert not alive, f"workers {alive} outlived their killed parent"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_a_budget_spent_while_workers_compile_cuts_the_rest(pool):
    cg = _planned(SPECS[0].replace(N=15))
    t0 = time.perf_counter()
    why_not, remote = builds.build_plans(cg, Budget(0.2, "a build"))
    assert time.perf_counter() - t0 < 5, "the build waited on its workers past its budget"
    cut = [i for i, why in why_not.items() if why.startswith("cut")]
    assert cut, "nothing was cut by a 0.2 s budget on a new fp8 shape"


def test_without_workers_every_plan_is_built_here():
    cg = _planned(SPECS[2].replace(N=17))
    why_not, remote = builds.build_plans(cg, Budget(60, "a build"), parallel=False)
    assert remote == {}
    assert len(why_not) < cg.graph.get_execution_plan_count()


def test_compiles_cut_by_a_budget_finish_for_the_next_build_of_the_graph(pool):
    spec = SPECS[0].replace(N=19)  # a new fp8 shape: its compiles take seconds
    first = graph_cache.get_graph(spec, compile_budget_s=0.3)
    assert first.build_cut, "a 0.3 s compile budget cut nothing on a new fp8 shape"
    cut = {p.index for p in first.plans if p.error.startswith("cut")}
    assert cut <= set(builds.runtime_compiled(first.graph, len(first.plans))), "a precompiled plan was cut"
    late = builds.late_compiles(spec, "none", None)
    assert late, "no compile was running in a worker when the budget cut it"
    deadline = time.time() + 60
    while not all(j.future.done() for j in late.values()) and time.time() < deadline:
        time.sleep(0.1)
    t0 = time.perf_counter()
    again = graph_cache.get_graph(spec, compile_budget_s=5.0)
    took = time.perf_counter() - t0
    assert again is not first, "the cut graph was served from the cache although its late compiles were done"
    built = {p.index for p in again.plans if p.built}
    failed = {
        p.index for p in again.plans if not p.built and not p.error.startswith("cut")
    }  # cuDNN's own refusal
    assert set(late) <= built | failed, "a compile finished in a worker was not taken by the next build"
    assert took < 5, f"the next build took {took:.1f} s with every late compile done"
    for index in sorted(set(late) & {p.index for p in again.runnable})[:2]:
        r = verify.check_plan(spec, plan_index=index, seed=index, graph=again)
        assert r.ok, f"late-compiled plan {index} ({again.plans[index].name}): rel {r.rel_error:.2e}"


def test_fusion_waits_for_compiles_only_within_its_budget(pool, monkeypatch):
    from labkit import experiments

    spec = experiments.BASE.replace(C=96, K=96, N=24)  # a new shape: its fused compiles take seconds
    monkeypatch.setenv("LABKIT_COMPILE_BUDGET_S", "0.5")
    t0 = time.perf_counter()
    df = experiments.fusion(spec=spec)
    took = time.perf_counter() - t0
    tuned = df[df.path == "fused, autotuned"]
    assert (tuned.status == "ok").all(), tuned.status.tolist()
    assert (tuned.rel_error < 1e-2).all()
    assert (tuned.compile_budget_s == 0.5).all()
    print(
        f"fusion {spec.label} with a 0.5 s compile budget: {took:.1f} s, "
        f"plans cut {tuned.plans_cut.tolist()}, timed {tuned.plans_timed.tolist()}"
    )
    monkeypatch.setenv("LABKIT_COMPILE_BUDGET_S", "none")
    full = experiments.fusion(spec=spec.replace(N=25))
    assert (full[full.path == "fused, autotuned"].plans_cut == 0).all()


def test_a_spent_compile_budget_starts_no_more_compiles_of_its_request(pool):
    """Lesson 01's workspace sizes: every variant's compiles queued at once (`ahead`), one compile
    budget for all. Once it is spent, the request's compiles no worker has started are cancelled
    and the later graphs cut theirs without starting them: the workers are left with at most the
    compiles they were running (they kept the next panel's first paint waiting 17.5 s)."""
    specs = [s.replace(N=n) for n in (21, 22) for s in SPECS]  # new shapes: compiles of seconds
    queued = builds.ahead([(s, "none", None) for s in specs])
    assert queued > pool.size, f"{queued} compiles queued for {pool.size} workers: nothing to cancel"
    compiles = Budget(0.3, "compiling the variants' plans")
    graphs = [graph_cache.get_graph(s, compile_budget_s=compiles.left) for s in specs]
    assert all(g.runnable for g in graphs)
    cut = [p for g in graphs for p in g.plans if p.error.startswith("cut")]
    assert cut, "a 0.3 s compile budget over new fp8 and dgrad shapes cut nothing"
    assert any("compile budget" in p.error and "was spent" in p.error for p in cut), [p.error for p in cut][
        :4
    ]
    late = [j for s in specs for j in builds.late_compiles(s, "none", None).values()]
    running = [j for j in late if not j.future.done()]  # a finished one waits for the next build
    assert len(running) <= pool.size, f"{len(running)} compiles left running for {pool.size} workers"
    names = {(s.key, "none") for s in specs}
    waiting = [j for j in pool.waiting() if (ConvSpec.from_dict(j.spec_fields).key, j.epilogue) in names]
    assert not waiting, f"{len(waiting)} of the request's compiles still wait for a worker"
    for g in graphs:
        compiled = set(builds.runtime_compiled(g.graph, len(g.plans)))
        assert {p.index for p in g.plans if p.error.startswith("cut")} <= compiled, (
            "a precompiled plan was cut"
        )


def test_compiles_pending_counts_a_graphs_queued_compiles_until_its_build_takes_them(pool):
    """What the network report asks before it measures a layer (`labkit.gpu.report_steps.spec_step` with
    ``defer_compiling``): the compiles `ahead` queued for the graph that no worker has finished."""
    spec = SPECS[0].replace(N=23)  # a new shape: compiles of seconds
    assert builds.compiles_pending(spec, "none", None) == 0, "nothing queued yet"
    queued = builds.ahead([(spec, "none", None)])
    assert queued > 0
    assert 0 < builds.compiles_pending(spec, "none", None) <= queued
    g = graph_cache.get_graph(spec)
    assert g.runnable
    assert builds.compiles_pending(spec, "none", None) == 0, "the build took its compiles"
