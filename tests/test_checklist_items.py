"""The performance checklist's measuring code, on the CPU side: the variants each distinct layer is
measured in, the long frame's rows per layer and their columns, the budgets that cut layers and
steps (named in rows), a step that fails as rows that say so, and bad input as one-line errors.
The worker's steps are replaced here by stand-ins that return rows of the right shape; the live
steps are tests/test_checklist_gpu.py's."""

import pytest

from labkit import ConvSpec, InvalidSpec, TimedOut, networks
from labkit.experiments import request_of, your_network
from labkit.experiments.your_network import checklist_run, checklist_steps
from labkit.signals.cancel import was_cut

BASE = ConvSpec(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")


def test_a_layer_is_measured_in_every_other_dtype_the_other_layout_and_the_production_batch():
    got = [(v.dtype, v.layout, v.N) for v in your_network.variants_of(BASE, 128)]
    assert got == [
        ("fp32", "NHWC", 32),
        ("tf32", "NHWC", 32),
        ("bf16", "NHWC", 32),
        ("fp16", "NCHW", 32),
        ("fp16", "NHWC", 128),
    ]
    same_batch = your_network.variants_of(BASE.replace(layout="NCHW", dtype="fp32"), 32)
    assert [(v.dtype, v.layout, v.N) for v in same_batch] == [
        ("tf32", "NCHW", 32),
        ("fp16", "NCHW", 32),
        ("bf16", "NCHW", 32),
        ("fp32", "NHWC", 32),
    ]  # its own variant and a production batch equal to its batch are measured once, as its own


def test_the_request_names_the_production_batch():
    assert request_of("checklist_items") == dict(
        net="resnet50", batch=32, dtype="fp16", layout="NHWC", production_batch=128, image=224
    )
    calls = [c for c in your_network.recorded_calls() if c[0] == "checklist_items"]
    assert [c[1]["net"] for c in calls] == list(your_network.RECORDED_PRESETS)


@pytest.mark.parametrize("bad", [0, -3, 1.5, "128", True, 2**21])
def test_a_production_batch_that_is_not_a_whole_number_of_images_is_invalid(bad):
    with pytest.raises(InvalidSpec, match="production_batch"):
        checklist_run.check_production_batch(bad)


def test_a_production_batch_too_large_for_a_layer_is_refused_before_anything_is_measured():
    """A batch whose tensors cuDNN cannot index (over 2**31 - 1 elements) is a one-line error naming
    the layer, from the run function itself (here, on a machine without a GPU: nothing was measured)."""
    spec = ConvSpec(N=4, C=32, H=28, W=28, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
    with pytest.raises(InvalidSpec, match="production_batch.*too large for layer conv0"):
        checklist_run.checklist_items.__wrapped__(
            net=[["conv0", spec]], batch=None, dtype=None, layout=None, production_batch=1_000_000
        )


def _fake_layer_step(spec, variants, own_s, variant_s):
    own = [
        dict(table=t, **checklist_steps.spec_columns(spec), status="ok", reason="")
        for t in ("convs", "plans", "reuse")
    ]
    return own + [
        dict(table="convs", **checklist_steps.spec_columns(v), status="ok", reason="") for v in variants
    ]


def _network(name="convnext_tiny"):
    net = networks.layers_of(name, batch=32, dtype="fp16", layout="NHWC", image=224)
    return net, networks.unique(net.layers)


@pytest.fixture
def steps(monkeypatch):
    """The worker's steps, answered here: (step, args) of each call, in order."""
    calls = []

    def in_worker(step, args, budget_s, what):
        calls.append((step, args, budget_s))
        if step == "warm_step":
            return 1.0
        if step == "input_step":
            return dict(table="convert", spec=args[0].label, dtype=args[0].dtype, N=args[0].N, status="ok")
        return _fake_layer_step(*args)

    monkeypatch.setattr(checklist_run, "_in_worker", in_worker)
    return calls


def test_every_distinct_layer_gives_its_variants_its_build_and_its_reuse_rows(steps):
    net, groups = _network()
    df = checklist_run._checklist(net, groups, 128)
    assert [s for s, *_ in steps] == ["warm_step", "input_step"] + ["layer_step"] * len(groups)
    assert steps[0][1] == (your_network.CHECKLIST_DTYPES,)  # every dtype warmed before the first layer
    assert steps[1][1][0] == net.layers[0].spec  # the network's input is its first layer's
    for (_, args, budget_s), g in zip(steps[2:], groups):
        spec, variants, own_s, variant_s = args
        assert (
            spec == g.spec
            and own_s == your_network.LAYER_BUDGET_S
            and variant_s == your_network.VARIANT_BUDGET_S
        )
        assert budget_s == own_s + len(variants) * variant_s  # each variant has a budget of its own
    assert df.attrs["warm_seconds"] == 1.0
    convert = df[df.table == "convert"]
    assert len(convert) == 1 and convert.layer.iloc[0] == net.layers[0].name
    for i, g in enumerate(groups):
        rows = df[df.spec_id == i]
        assert set(rows.layer) == {g.names[0]} and set(rows["count"]) == {g.count}
        convs = rows[rows.table == "convs"]
        assert len(convs) == 1 + len(your_network.variants_of(g.spec, 128))
        assert (rows.table == "plans").sum() == 1 and (rows.table == "reuse").sum() == 1
    assert set(df.table) == set(your_network.CHECKLIST_TABLES)


def test_a_step_that_times_out_is_every_one_of_its_rows_with_the_reason(monkeypatch):
    net, groups = _network()

    def in_worker(step, args, budget_s, what):
        if step == "warm_step":
            raise TimedOut(what, "building", budget_s + 15, budget_s)  # the layers go on without it
        if step == "layer_step" and args[0] == groups[1].spec:
            raise TimedOut(what, "checking plan 0 against float64", budget_s + 15, budget_s)
        if step == "input_step":
            return dict(table="convert", status="ok")
        return _fake_layer_step(*args)

    monkeypatch.setattr(checklist_run, "_in_worker", in_worker)
    df = checklist_run._checklist(net, groups, 128)
    failed = df[df.spec_id == 1]
    assert len(failed) == 3 + len(your_network.variants_of(groups[1].spec, 128))
    assert set(failed.status) == {"timed_out"} and failed.reason.str.contains("float64").all()
    assert set(df[df.spec_id != 1].dropna(subset=["spec_id"]).status) == {"ok"}


def test_layers_left_when_the_checklist_budget_is_spent_are_cut_rows(steps, monkeypatch):
    """The budget starts after the warm-up (charged to no layer): here every clock reading is 30 s
    after the last, so the first layers are measured and the rest cut."""
    net, groups = _network()
    clock = iter(range(0, 10_000, 30))  # every reading of the clock is 30 s after the last
    monkeypatch.setattr(checklist_run, "clock", lambda: next(clock))
    df = checklist_run._checklist(net, groups, 128)
    measured = {args[0] for step, args, _ in steps if step == "layer_step"}
    assert 0 < len(measured) < len(groups)
    cut = df[df.status.map(was_cut)]
    assert len(cut) and set(cut.spec_id) == {i for i, g in enumerate(groups) if g.spec not in measured}
    assert cut.reason.str.contains("checklist's budget").all()


def test_a_cut_row_is_read_as_cut():
    row = checklist_steps.cut_row("the layer's budget of 3.0 s was spent")
    assert was_cut(row["status"]) and row["reason"].startswith("the layer's")
