"""labkit.gpu.checks.reference's error measures on CuPy arrays: the fused reductions give the NumPy
path's numbers (to rounding of the sums) on random, strided, scaled, NaN, inf and all-zero
operands (GPU)."""

import math

import numpy as np
import pytest

from labkit.gpu.checks.reference import errors, reference_norms

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")


def _cases():
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(3, 5, 7, 11))
    near = ref + rng.normal(size=ref.shape) * 1e-4
    yield "near", near, ref
    yield "equal", ref.copy(), ref
    yield "zeros out", np.zeros_like(ref), ref
    yield "huge", near * 1e300, ref * 1e300  # no overflow in the sums of squares
    yield "tiny", near * 1e-300, ref * 1e-300  # nor underflow
    nan, inf = near.copy(), near.copy()
    nan[1, 2, 3, 4], inf[0, 0, 0, 0] = np.nan, np.inf
    yield "NaN in out", nan, ref
    yield "inf in out", inf, ref
    bad_ref = ref.copy()
    bad_ref[2, 1, 0, 3] = np.nan
    yield "NaN in ref", near, bad_ref
    yield "zero ref", np.zeros_like(ref), np.zeros_like(ref)
    yield "zero ref, nonzero out", near, np.zeros_like(ref)
    nhwc = np.ascontiguousarray(near.transpose(0, 2, 3, 1))
    yield "strided out (an NHWC buffer seen as NCHW)", nhwc, ref


@pytest.mark.parametrize("case", [c[0] for c in _cases()])
def test_fused_errors_match_numpys(case):
    name, out, ref = next(c for c in _cases() if c[0] == case)
    if name.startswith("strided"):
        got_out = cupy.asarray(out).transpose(0, 3, 1, 2)  # a view, not a copy
        out = out.transpose(0, 3, 1, 2)
        assert not got_out.flags.c_contiguous
    else:
        got_out = cupy.asarray(out)
    got_ref = cupy.asarray(ref)
    want_norms, got_norms = reference_norms(ref), reference_norms(got_ref)
    want, got = errors(out, ref), errors(got_out, got_ref, ref_norms=got_norms)
    for w, g in zip(want_norms + want, got_norms + got):
        assert isinstance(g, float)
        if math.isnan(w) or math.isinf(w):
            assert g == w or (math.isnan(w) and math.isnan(g)), (name, want, got)
        else:
            assert g == pytest.approx(w, rel=1e-12, abs=0), (name, want_norms + want, got_norms + got)
