"""The network workspace report live (`labkit.report`, `labkit.experiments.your_network`): every
checked plan matches float64, identical layers are measured once, a strategy's timeline peak is
its reported peak, training adds dgrad and wgrad, an out-of-memory layer is a row and the rest
goes on, and a PyTorch model's Conv1d is listed as skipped."""

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

import labkit  # noqa: E402
from labkit import ConvSpec  # noqa: E402
from labkit.experiments import your_network  # noqa: E402
from labkit.session import lessons  # noqa: E402

A = ConvSpec(N=4, C=32, H=28, W=28, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
B = ConvSpec(N=4, C=64, H=28, W=28, K=64, R=1, S=1, padding=0, dtype="fp16", layout="NHWC")
DW = ConvSpec(N=4, C=64, H=28, W=28, K=64, R=3, S=3, padding=1, groups=64, dtype="fp16", layout="NHWC")
SMALL_NET = [A, B, DW, B]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    yield from gpu_helpers.own_cache(tmp_path, monkeypatch)


def test_every_layer_has_three_checked_plans_and_identical_layers_are_measured_once():
    rep = labkit.report(SMALL_NET, batch=4)
    layers = rep.layers
    assert list(layers.layer) == ["conv0", "conv1", "conv2", "conv3"] and rep.complete
    assert layers.spec_id.nunique() == 3 and list(layers["count"]) == [1, 2, 1, 2]
    assert layers.checked.astype(bool).all() and (layers.status == "ok").all(), layers[
        ["layer", "status", "reason"]
    ]
    assert (layers.max_rel_error <= layers.tolerance).all()
    assert (layers.fastest_gpu_us <= layers.heuristic_gpu_us).all()
    assert (layers.smallest_workspace_bytes <= layers.fastest_workspace_bytes).all()
    assert (layers.smallest_workspace_bytes <= layers.heuristic_workspace_bytes).all()
    plans = rep.plans
    assert set(plans.spec_id) == {0, 1, 2} and (plans[plans.status == "ok"].gpu_us > 0).all()


def test_a_report_tells_its_listener_every_step_in_order():
    """The report's progress (a panel draws it while the worker runs the next step) reaches its
    listener once per step, in order, from 0 (the layers, none measured) to the last; at step i
    the first i distinct convolutions are measured."""
    from labkit.signals import progress

    heard = []

    def listen(make_frame, done, total, unit):
        df = make_frame()
        layers = df[df.table == "layers"]
        heard.append((done, total, int(layers[layers.status != "pending"].spec_id.nunique())))

    with progress.listening(listen):
        labkit.experiments.registry()["network_report"](SMALL_NET, batch=4)
    total = heard[0][1]
    assert [d for d, _, _ in heard] == list(range(total + 1)), heard
    assert [m for _, _, m in heard][:4] == [0, 1, 2, 3]


def test_a_strategys_timeline_peak_is_its_reported_peak():
    rep = labkit.report(SMALL_NET, batch=4)
    strategies, timeline = rep.strategies, rep.timeline
    assert len(strategies) == len(your_network.REPORT_STRATEGIES) and (strategies.status == "ok").all(), (
        strategies
    )
    for row in strategies.itertuples():
        tl = timeline[timeline.strategy == row.strategy]
        assert len(tl) == len(rep.layers)
        assert tl.held_bytes.max() == row.peak_workspace_bytes == row.stats_peak_bytes, row.strategy
        assert tl.held_after_bytes.iloc[-1] == row.held_after_bytes or row.strategy.startswith(
            ("cupy", "async")
        )
    mpc = strategies.set_index("strategy").loc["malloc_per_call"]
    assert (
        mpc.held_after_bytes == 0
        and mpc.alloc_calls_per_pass == (rep.layers.fastest_workspace_bytes > 0).sum()
    )
    budget = rep.budget
    assert budget.iloc[-1].cap_label == "no cap" and budget.iloc[-1].slowdown == 1.0
    assert (budget.pass_gpu_us.dropna().diff().dropna() <= 1e-9).all()  # a larger cap is never slower


def test_training_adds_dgrad_and_wgrad_in_backward_order():
    rep = labkit.report([A, B], batch=4, training=True)
    got = list(zip(rep.layers.layer, rep.layers.direction))
    assert got == [
        ("conv0", "fprop"),
        ("conv1", "fprop"),
        ("conv1", "dgrad"),
        ("conv1", "wgrad"),
        ("conv0", "wgrad"),
    ]
    assert rep.layers.checked.astype(bool).all()


def test_a_layer_that_runs_out_of_memory_is_a_row_and_the_rest_goes_on():
    import cupy

    from labkit.gpu.buffers import memory

    big = ConvSpec(
        N=256, C=256, H=56, W=56, K=256, R=1, S=1, padding=0, dtype="fp16", layout="NHWC"
    )  # ~2 GB of inputs
    labkit.report([A], batch=None)  # graphs, handles and libraries loaded before memory is taken
    cupy.get_default_memory_pool().free_all_blocks()
    hog = memory.raw_malloc(memory.free_bytes() - (1536 << 20), "memory pressure")  # leave 1.5 GiB
    try:
        lessons.forget()
        rep = labkit.report([A, big], batch=None, force=True)
    finally:
        memory.raw_free(hog)
    layers = rep.layers.set_index("layer")
    assert layers.loc["conv1", "status"] == "out_of_memory", layers.loc["conv1"].to_dict()
    assert layers.loc["conv0", "status"] == "ok" and bool(layers.loc["conv0", "checked"])
    assert (rep.strategies.status == "ok").all() and rep.strategies.reason.str.contains("left out").all()
    assert not rep.complete or "out_of_memory" in set(rep.layers.status)


def test_a_torch_model_reports_its_conv2d_and_lists_the_rest_as_skipped():
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.mix = torch.nn.Conv1d(16, 16, 3, padding=1)
            self.head = torch.nn.Conv2d(16, 8, 1)

        def forward(self, x):
            y = self.stem(x)
            n, c, h, w = y.shape
            y = self.mix(y.flatten(2)).view(n, c, h, w)
            return self.head(y)

    rep = labkit.report(Model(), input_shape=(2, 3, 16, 16), batch=None)
    assert list(rep.layers.layer) == ["stem", "head"] and rep.layers.checked.astype(bool).all()
    assert [s.name for s in rep.skipped] == ["mix"] and "Conv1d" in rep.skipped[0].kind


def test_a_second_report_is_answered_from_disk(tmp_path):
    first = labkit.report([A, B], batch=4)
    lessons.forget()
    again = labkit.report([A, B], batch=4)
    assert again.frame.attrs.get("loaded_from_disk") and list(again.layers.fastest_gpu_us) == list(
        first.layers.fastest_gpu_us
    )
    out = again.write(tmp_path / "out")
    assert (out / "report.html").stat().st_size > 100_000 and (out / "layers.csv").is_file()
