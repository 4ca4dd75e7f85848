"""The order in which a network report measures its layers (`runs._report`), with the worker's
steps answered here: a layer whose plans a build worker still compiles is measured after the
others, once, never the first; the tables keep the network's order."""

from __future__ import annotations

from labkit import networks
from labkit.experiments.your_network import runs
from labkit.experiments.your_network.request import network_of, pass_steps


def _fake_worker(compiling: set, calls: list):
    def in_worker(step, args, budget_s, what, meanwhile=None):
        if meanwhile is not None:
            meanwhile()
        if step == "ahead_step":
            return 0
        if step == "spec_step":
            spec, _, _, may_defer = args
            calls.append((spec.key, may_defer))
            if may_defer and spec.key in compiling:
                return None
            compiling.discard(spec.key)  # measured: its compiles were waited for
            summary = dict(status="ok", fastest_plan="p0", fastest_workspace_bytes=0, fastest_gpu_us=1.0)
            return summary, [dict(plan_index=0, plan_name="p0", workspace_bytes=0, gpu_us=1.0, status="ok")]
        return dict(table="strategies", strategy=args[0], status="ok"), []

    return in_worker


def _run(monkeypatch, compiling: set):
    network = network_of("resnet50", 32, "fp16", "NHWC", 224)
    steps = pass_steps(network.layers, False)
    groups = networks.unique([networks.Layer(n, s) for n, s in steps])
    keys = [g.spec.key for g in groups]
    calls: list = []
    monkeypatch.setattr(runs, "_in_worker", _fake_worker({keys[i] for i in compiling}, calls))
    df = runs._report(network, steps, groups, 10.0)
    deferred = {keys[i] for i in compiling}
    measured = [keys.index(k) for k, may in calls if not (may and k in deferred)]
    return df, [(keys.index(k), may) for k, may in calls], measured, len(keys)


def test_a_layer_still_compiling_is_measured_after_the_others_and_the_tables_keep_the_networks_order(
    monkeypatch,
):
    df, calls, measured, n = _run(monkeypatch, {0, 1, 2, 22})
    assert n == 23
    assert sorted(measured) == list(range(n)), "every layer measured exactly once"
    assert calls[0] == (0, False), "the first layer is measured first, never deferred"
    assert measured == [0] + list(range(3, 22)) + [1, 2, 22], "the deferred layers come last, in order"
    assert [i for i, may in calls if may] == list(range(1, n)), "a deferred layer is not deferred again"
    assert (df[df.table == "layers"].status == "ok").all()
    plans = df[df.table == "plans"]
    assert plans.spec_id.tolist() == sorted(plans.spec_id.tolist()), "plan rows in the network's order"
    assert plans.spec_id.nunique() == n


def test_the_last_layer_is_not_deferred_when_nothing_is_left_to_measure(monkeypatch):
    _, calls, measured, n = _run(monkeypatch, {22})
    assert measured == list(range(n))
    assert calls[-1] == (22, False)
