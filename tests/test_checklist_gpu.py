"""The performance checklist's measurements live (`labkit.experiments.checklist_items`): every
timed plan was checked against float64 first and is within its tolerance, each distinct layer has
its variants, its build and load and its reuse rows, the network's input conversion is timed, an
out-of-memory variant is a row and the rest goes on, and a small preset stays within its budgets."""

import time

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit import ConvSpec, experiments  # noqa: E402
from labkit.experiments import your_network  # noqa: E402
from labkit.signals.cancel import was_cut  # noqa: E402

A = ConvSpec(N=4, C=32, H=28, W=28, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
B = ConvSpec(N=4, C=64, H=28, W=28, K=64, R=1, S=1, padding=0, dtype="fp16", layout="NHWC")
SMALL_NET = [["conv0", A], ["conv1", B], ["conv2", B]]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    yield from gpu_helpers.own_cache(tmp_path, monkeypatch)


def _table(df, name):
    return df[df.table == name]


def test_every_variant_is_checked_against_float64_and_timed():
    df = experiments.checklist_items(net=SMALL_NET, batch=None, dtype=None, layout=None, production_batch=16)
    convs = _table(df, "convs")
    assert set(convs.spec_id) == {0, 1}
    for i, spec in enumerate([A, B]):
        rows = convs[convs.spec_id == i]
        want = {(spec.dtype, spec.layout, spec.N)} | {
            (v.dtype, v.layout, v.N) for v in your_network.variants_of(spec, 16)
        }
        assert set(zip(rows.dtype, rows.layout, rows.N)) == want
    ok = convs[convs.status == "ok"]
    assert len(ok) == len(convs), convs[["spec", "status", "reason"]]
    assert (ok.rel_error <= ok.tolerance).all() and (ok.gpu_us > 0).all() and (ok.operands_bytes > 0).all()
    plans, reuse = _table(df, "plans"), _table(df, "reuse")
    assert (plans.status == "ok").all() and (plans.build_seconds > 0).all()
    assert (plans.load_seconds.dropna() > 0).all()
    assert (reuse.status == "ok").all()
    assert (reuse.rebuild_call_us > reuse.reuse_call_us).all()  # a build costs more than nothing
    convert = _table(df, "convert").iloc[0]
    assert convert.status == "ok" and convert.convert_gpu_us > 0
    assert convert.input_bytes == A.N * A.C * A.H * A.W * 2


def test_a_production_batch_out_of_memory_is_a_row_and_the_rest_goes_on():
    import cupy

    from labkit.gpu.buffers import memory

    # 4,000 images: 0.2e9 elements a tensor, well under cuDNN's int32 limit; with all but 1.5 GiB
    # of the GPU held, their float64 reference (its im2col: 288 x 3.1e6 values, 7.2 GB) cannot fit
    experiments.checklist_items(net=[["conv0", A]], batch=None, dtype=None, layout=None)
    cupy.get_default_memory_pool().free_all_blocks()
    hog = memory.raw_malloc(memory.free_bytes() - (1536 << 20), "memory pressure")
    try:
        df = experiments.checklist_items(
            net=[["conv0", A]], batch=None, dtype=None, layout=None, production_batch=4_000
        )
    finally:
        memory.raw_free(hog)
    convs = _table(df, "convs")
    big = convs[convs.N == 4_000]
    assert len(big) == 1 and big.status.iloc[0] in ("out_of_memory", "unsupported", "error"), big.reason.iloc[
        0
    ]
    assert (convs[convs.N == A.N].status == "ok").all()


def test_a_small_preset_stays_within_its_budgets():
    t0 = time.perf_counter()
    df = experiments.checklist_items(net="deeplabv3_aspp")
    seconds = time.perf_counter() - t0
    one_layer = your_network.LAYER_BUDGET_S + 6 * your_network.VARIANT_BUDGET_S
    assert seconds < your_network.WARM_BUDGET_S + your_network.CHECKLIST_BUDGET_S + one_layer + 30
    assert df.attrs["warm_seconds"] < your_network.WARM_BUDGET_S
    convs = _table(df, "convs")
    done = convs[~convs.status.map(was_cut)]
    assert (done[done.status == "ok"].rel_error <= done[done.status == "ok"].tolerance).all()
    assert set(df.spec_id.dropna()) == set(range(6))
