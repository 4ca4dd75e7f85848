"""The order in which a network report measures its layers (`runs._report`), with the worker's
steps answered here: a layer whose plans a build worker still compiles is measured after the
others, once, never the first (the worker says which, for every layer at once, in the step that
queues their compiles, or, when that step fails, each layer when asked), and of those, the ones
whose compiles are done by then first (the worker's ready step); the tables keep the network's
order."""

from __future__ import annotations

from labkit import networks
from labkit.errors import LabkitError
from labkit.experiments.your_network import runs
from labkit.experiments.your_network.request import network_of, pass_steps


def _fake_worker(compiling: set, calls: list, ahead_fails: bool, done_after_ahead: set, ready_fails: bool):
    """The worker's steps: ``compiling`` still compile until measured, except ``done_after_ahead``,
    whose compiles are done once the ahead step has answered; the ready step finds none ready in
    time when every layer it is asked about still compiles."""

    def in_worker(step, args, budget_s, what, meanwhile=None):
        if meanwhile is not None:
            meanwhile()
        if step == "ahead_step":
            calls.append(("ahead", len(args[0])))
            if ahead_fails:
                raise LabkitError("the worker died")
            pending = [spec.key in compiling for spec in args[0]]
            compiling.difference_update(done_after_ahead)
            return pending
        if step == "ready_step":
            calls.append(("ready", len(args[0])))
            if ready_fails:
                raise LabkitError("the worker died")
            return [k for k, spec in enumerate(args[0]) if spec.key not in compiling]
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


def _run(monkeypatch, compiling: set, ahead_fails=False, done_after_ahead=frozenset(), ready_fails=False):
    """(the frame, the spec steps asked as (layer, may defer), the layers measured in order, how
    many layers, the ahead steps asked)."""
    network = network_of("resnet50", 32, "fp16", "NHWC", 224)
    steps = pass_steps(network.layers, False)
    groups = networks.unique([networks.Layer(n, s) for n, s in steps])
    keys = [g.spec.key for g in groups]
    calls: list = []
    done = {keys[i] for i in done_after_ahead}
    fake = _fake_worker({keys[i] for i in compiling}, calls, ahead_fails, done, ready_fails)
    monkeypatch.setattr(runs, "_in_worker", fake)
    df = runs._report(network, steps, groups, 10.0)
    ahead = [c for c in calls if c[0] in ("ahead", "ready")]
    asked = [(keys.index(k), may) for k, may in calls if k not in ("ahead", "ready")]
    deferred = {keys.index(k) for k in (keys[i] for i in compiling)}
    measured = [i for i, may in asked if not (may and i in deferred)]
    return df, asked, measured, len(keys), ahead


def test_the_layers_still_compiling_are_measured_after_the_others_without_asking_each(monkeypatch):
    df, asked, measured, n, ahead = _run(monkeypatch, {0, 1, 2, 22})
    assert n == 23
    assert ahead == [("ahead", n - 1), ("ready", 3)], (
        "one step queues and answers for every layer after the first"
    )
    assert asked[0] == (0, False), "the first layer is measured first, never deferred"
    assert measured == [0] + list(range(3, 22)) + [1, 2, 22], "the deferred layers come last, in order"
    assert len(asked) == n, "no layer is asked twice"
    assert [i for i, may in asked if not may] == [0, 1, 2, 22], "a deferred layer is not deferred again"
    assert (df[df.table == "layers"].status == "ok").all()
    plans = df[df.table == "plans"]
    assert plans.spec_id.tolist() == sorted(plans.spec_id.tolist()), "plan rows in the network's order"
    assert plans.spec_id.nunique() == n


def test_when_the_ahead_step_fails_each_layer_still_compiling_is_deferred_when_asked(monkeypatch):
    df, asked, measured, n, _ = _run(monkeypatch, {0, 1, 2, 22}, ahead_fails=True)
    assert sorted(measured) == list(range(n)), "every layer measured exactly once"
    assert measured == [0] + list(range(3, 22)) + [1, 2, 22]
    assert [i for i, may in asked if may] == list(range(1, n)), "a deferred layer is not deferred again"
    assert (df[df.table == "layers"].status == "ok").all()


def test_every_layer_still_compiling_is_measured_in_order_each_asked_once(monkeypatch):
    _, asked, measured, n, _ = _run(monkeypatch, set(range(23)))
    assert measured == list(range(n))
    assert len(asked) == n


def test_the_last_layer_is_not_deferred_when_nothing_is_left_to_measure(monkeypatch):
    _, asked, measured, n, _ = _run(monkeypatch, {22})
    assert measured == list(range(n))
    assert asked[-1] == (22, False)


def test_a_layer_whose_compile_outlasts_the_others_does_not_hold_them_up(monkeypatch):
    # every layer after the first was still compiling when the ahead step answered; all but layer 2
    # are done by their turn (layer 2 compiles a new kernel): it is measured last, not waited for
    others = set(range(1, 23)) - {2}
    _, asked, measured, n, ahead = _run(monkeypatch, set(range(1, 23)), done_after_ahead=others)
    assert measured == [0, 1] + list(range(3, n)) + [2]
    assert len(asked) == n, "no layer is asked twice"
    assert ahead == [("ahead", n - 1), ("ready", n - 1)], "asked once: then every layer but one is ready"


def test_when_the_ready_step_fails_each_layer_waits_for_its_own_compiles_in_order(monkeypatch):
    _, asked, measured, n, ahead = _run(monkeypatch, set(range(1, 23)), ready_fails=True)
    assert measured == list(range(n))
    assert len(asked) == n
    assert ahead == [("ahead", n - 1), ("ready", n - 1)], "not asked again after it failed"
