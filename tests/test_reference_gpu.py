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


def test_the_error_terms_read_later_give_the_same_errors():
    from labkit.gpu.checks.reference import error_terms, errors_from_terms

    for name, out, ref in _cases():
        if name.startswith("strided"):
            out = out.transpose(0, 3, 1, 2)
        got = error_terms(cupy.asarray(out), cupy.asarray(ref))
        assert isinstance(got, cupy.ndarray) and got.shape == (2,)
        norms = reference_norms(ref)
        want = errors_from_terms(error_terms(out, ref), norms)
        for w, g in zip(want, errors_from_terms(got.get(), norms)):
            assert g == w or g == pytest.approx(w, rel=1e-12, abs=0), name  # sums differ in the last bits


@pytest.mark.parametrize(
    "spec",
    [
        dict(N=4, C=32, H=14, W=14, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC"),
        dict(N=2, C=16, H=9, W=9, K=8, R=3, S=3, padding=1, stride=2, dtype="fp32", layout="NCHW"),
    ],
)
def test_plans_judged_together_get_the_errors_each_gets_alone(spec):
    """`reference_runs.judge` launches every plan's check and reads them after one wait: each plan's
    verdict is the error of its own output, as when each is run, waited for and read in turn."""
    from labkit import ConvSpec
    from labkit.gpu.checks import reference
    from labkit.gpu.cudnn import graph_cache, operands, reference_runs

    spec = ConvSpec(**spec)
    cg = graph_cache.get_graph(spec)
    built = [p.index for p in cg.built]
    ops = operands.Operands(spec)
    verdicts = reference_runs.judge(cg, built, ops=ops)
    ref = reference_runs.expected(spec, ops)
    alone = []
    for index in built:
        ops.poison_output()
        ws = cupy.empty(max(1, cg.plan(index).workspace_bytes), cupy.uint8)  # alive through the run
        cg.execute(ops.arrays, int(ws.data.ptr), index)
        cupy.cuda.get_current_stream().synchronize()
        alone.append(reference.errors(ops.output(), ref)[0])
    assert len(built) > 3
    if spec.dtype == "fp16":  # its plans' errors differ, so a mix-up of outputs shows
        assert len({v.rel_error for v in verdicts}) > 1
    assert [v.rel_error for v in verdicts] == pytest.approx(alone, rel=1e-12, abs=0)
    assert all(v.ok for v in verdicts)
    checked = reference_runs.check_plans(cg, built, ops, vs_unrounded=True)
    assert [c.rel_error for c in checked] == pytest.approx(alone, rel=1e-12, abs=0)
    assert all(c.rel_error_vs_unrounded >= 0 for c in checked)
