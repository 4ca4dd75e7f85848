"""labkit.gpu.checks.error_kernel: one launch per output gives the errors `reference.errors` gives
on the decoded output, for every dtype's storage, in both layouts, with NaN, infinities, subnormals
and all-zero references, on sizes below one block and above the grid's stride; the same bits run
after run (GPU)."""

import math

import numpy as np
import pytest

from labkit.errors import InvalidSpec
from labkit.gpu.checks.reference import errors, errors_from_terms, reference_norms

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")


def _kernel_errors(storage, dtype, ref_logical, layout):
    from labkit.gpu.buffers import memory
    from labkit.gpu.checks import error_kernel

    slots = error_kernel.ErrorSlots(2)
    stored_ref = error_kernel.storage_order(ref_logical, layout)
    norms = reference_norms(ref_logical)
    slots.launch(1, 0, storage, dtype, stored_ref, norms[0])
    host = memory.pinned(slots.terms.nbytes, np.float64).reshape(slots.terms.shape)
    slots.copy_to_host(host)
    cupy.cuda.get_current_stream().synchronize()
    assert list(host[0]) == [0.0, 0.0]  # the other slot is untouched
    return errors_from_terms(host[1], norms), host[1].copy()


def _want(storage, dtype, ref_logical, layout):
    from labkit.gpu.buffers import numerics
    from labkit.gpu.cudnn.frontend import logical_view

    return errors(logical_view(numerics.decode(storage, dtype), layout), ref_logical)


def _same(got, want):
    for g, w in zip(got, want):
        if math.isnan(w) or math.isinf(w):
            assert g == w or (math.isnan(w) and math.isnan(g)), (got, want)
        else:
            assert g == pytest.approx(w, rel=1e-12, abs=0), (got, want)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 3, 2, 5), (4, 37, 29, 31)])  # under one block; over the grid
def test_one_launch_gives_the_errors_of_the_decoded_output(dtype, layout, shape):
    from labkit.gpu.buffers import numerics
    from labkit.gpu.cudnn.frontend import logical_view, storage_shape

    rng = np.random.default_rng(3)
    sshape = storage_shape(shape, layout)
    storage, exact = numerics.quantize(cupy.asarray(rng.normal(size=sshape)), dtype)
    ref = logical_view(exact, layout) + cupy.asarray(rng.normal(size=shape)) * 1e-2
    got, terms = _kernel_errors(storage, dtype, ref, layout)
    _same(got, _want(storage, dtype, ref, layout))
    again = _kernel_errors(storage, dtype, ref, layout)[1]
    assert terms.tobytes() == again.tobytes()  # the blocks' parts are summed in a fixed order


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_inf_subnormal_and_zero_cases(dtype):
    from labkit.gpu.buffers import numerics

    shape = (2, 3, 4, 5)
    rng = np.random.default_rng(4)
    storage, exact = numerics.quantize(cupy.asarray(rng.normal(size=shape)), dtype)
    ref = exact * (1 + 1e-3)
    poisoned = storage.copy()
    poisoned.view(cupy.uint8)[:8] = 0xFF  # NaN bits, as an unwritten output holds
    cases = [("poisoned", poisoned, ref), ("zero ref", storage, cupy.zeros(shape)), ("equal", storage, exact)]
    if dtype != "fp8_e4m3":  # fp8 e4m3 has no infinity
        big, _ = numerics.quantize(cupy.full(shape, 1e39), dtype)
        cases.append(("inf", big, ref))
    if dtype in ("fp32", "tf32", "fp16", "bf16"):
        tiny, tiny_exact = numerics.quantize(cupy.full(shape, 1e-7 if dtype == "fp16" else 1e-39), dtype)
        assert float(tiny_exact[0, 0, 0, 0]) != 0.0  # a subnormal of the format
        cases.append(("subnormal vs zero", tiny, cupy.zeros(shape)))
        cases.append(("subnormal vs itself", tiny, tiny_exact))
    for name, out, r in cases:
        got, _ = _kernel_errors(out, dtype, r, "NCHW")
        _same(got, _want(out, dtype, r, "NCHW"))


def test_float64_values_empty_outputs_and_bad_operands():
    from labkit.gpu.checks import error_kernel

    rng = np.random.default_rng(5)
    ref = cupy.asarray(rng.normal(size=(2, 3, 4, 5)))
    out = ref + 1e-6
    got, _ = _kernel_errors(out, "float64", ref, "NCHW")
    _same(got, errors(out, ref))
    empty = cupy.zeros((0, 3, 4, 5))
    assert _kernel_errors(empty, "float64", empty, "NCHW")[0] == (0.0, 0.0)
    slots = error_kernel.ErrorSlots(1)
    with pytest.raises(InvalidSpec, match="storage"):
        slots.launch(0, 0, out.astype(cupy.float32), "fp16", ref, 1.0)
    with pytest.raises(InvalidSpec, match="storage"):
        slots.launch(0, 0, out.transpose(0, 2, 3, 1), "float64", ref, 1.0)
    with pytest.raises(InvalidSpec, match="ref"):
        slots.launch(0, 0, out, "float64", ref[:1], 1.0)
