"""labkit.gpu.buffers.numerics on CuPy arrays: the fused quantize and bf16 decode kernels give the NumPy
path's bits for every code of each format, the values between codes (ties included), specials
and random values across the exponent range; GuardedBuffer's poison (GPU)."""

import numpy as np
import pytest

from labkit.gpu.buffers import numerics

pytestmark = pytest.mark.gpu
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")


def _codes(dtype):
    """float64 values of every finite code of ``dtype`` (fp32/tf32: a sample of float32s), sorted."""
    if dtype == "fp16":
        v = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    elif dtype == "bf16":
        v = numerics.decode(np.arange(1 << 16, dtype=np.uint16), "bf16")
    elif dtype == "fp8_e4m3":
        v = numerics.FP8_E4M3_TABLE.copy()
    else:
        bits = np.random.default_rng(1).integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
        v = bits.view(np.float32).astype(np.float64)
    v = v[np.isfinite(v)]
    return np.unique(v)


def _inputs(dtype):
    codes = _codes(dtype)
    mids = (codes[:-1] + codes[1:]) / 2  # ties between neighbours: to even
    rng = np.random.default_rng(7)
    spread = rng.standard_normal(50_000) * np.exp2(rng.integers(-160, 140, 50_000))
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            448.0,
            449.0,
            464.0,
            1e6,
            -1e6,
            65504.0,
            65520.0,
            65519.99,
            3.4e38,
            3.5e38,
            1e-300,
            -1e-300,
            2.0**-9,
            2.0**-10,
            1.5 * 2.0**-10,
            2.0**-24,
            2.0**-25,
            2.0**-149,
            2.0**-150,
            1.0 + 2.0**-11,
            1.0 + 3 * 2.0**-11,
        ]
    )
    return np.concatenate(
        [codes, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), spread, specials]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_quantize_matches_numpy_bit_for_bit(dtype):
    import cupy

    x = _inputs(dtype)
    want_s, want_e = numerics.quantize(x, dtype, np)
    got_s, got_e = numerics.quantize(cupy.asarray(x), dtype)
    got_s, got_e = cupy.asnumpy(got_s), cupy.asnumpy(got_e)
    assert got_s.dtype == want_s.dtype
    nan = np.isnan(x)  # a NaN of the format, whichever payload (CUDA's and NumPy's differ)
    differ = np.any(
        got_s.view(np.uint8).reshape(len(x), -1) != want_s.view(np.uint8).reshape(len(x), -1), axis=1
    )
    bad = np.flatnonzero(differ & ~nan)
    assert bad.size == 0, [(x[i], got_s[i], want_s[i]) for i in bad[:5]]
    assert np.isnan(numerics.decode(got_s[nan], dtype)).all()
    same = (got_e.view(np.uint64) == want_e.view(np.uint64)) | (np.isnan(got_e) & np.isnan(want_e))
    assert same.all(), [(x[i], got_e[i], want_e[i]) for i in np.flatnonzero(~same)[:5]]
    back = cupy.asnumpy(numerics.decode(cupy.asarray(got_s), dtype))
    assert (back.view(np.uint64)[~nan] == got_e.view(np.uint64)[~nan]).all()


def test_fused_bf16_decode_every_code():
    import cupy

    codes = np.arange(1 << 16, dtype=np.uint16)
    want = numerics.decode(codes, "bf16")
    got = cupy.asnumpy(numerics.decode(cupy.asarray(codes), "bf16"))
    assert ((got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_inputs_same_on_gpu_and_cpu(dtype):
    import cupy

    s_cpu, e_cpu = numerics.random_inputs((3, 5, 7), dtype, np, seed=4)
    s_gpu, e_gpu = numerics.random_inputs((3, 5, 7), dtype, cupy, seed=4, chunk_elements=40)
    assert (cupy.asnumpy(s_gpu).view(np.uint8) == s_cpu.view(np.uint8)).all()
    assert (cupy.asnumpy(e_gpu) == e_cpu).all()
    only, none = numerics.random_inputs((3, 5, 7), dtype, cupy, seed=4, keep_exact=False)
    assert none is None and (cupy.asnumpy(only).view(np.uint8) == s_cpu.view(np.uint8)).all()


def test_unrounded_values_same_on_gpu_and_cpu():
    import cupy

    for shape, seed in (((3, 5, 7), 4), (100_003, 2**40 + 9)):
        got = cupy.asnumpy(numerics.unrounded_values(shape, seed, cupy))
        assert got.tobytes() == numerics.unrounded_values(shape, seed).tobytes()


@pytest.mark.parametrize("nbytes", [1, 4096, (1 << 20) + 7, 5 * (1 << 20) + 3])
def test_guarded_buffer_poison_fills_the_whole_body(nbytes):
    import cupy

    from labkit.gpu.buffers import memory

    buf = memory.GuardedBuffer(nbytes, "test workspace", seed=3)
    body = cupy.asnumpy(buf.body)
    block = np.random.default_rng(3).integers(0, 256, min(nbytes, memory.POISON_BLOCK_BYTES), dtype=np.uint8)
    block[::7] = 0xFF
    want = np.resize(block, nbytes)  # the block repeated
    assert (body == want).all()
    buf.check()
    buf.body[-1:] = 0  # inside: fine
    buf.check()
    buf.poison()  # a new seed: new bytes
    assert nbytes < 8 or not (cupy.asnumpy(buf.body) == body).all()
    buf.free()


def test_a_write_into_a_guard_band_is_seen_by_the_check_and_by_the_copy_read_later():
    import cupy

    from labkit.errors import LabkitError
    from labkit.gpu.buffers import memory

    buf = memory.GuardedBuffer(1000, "test workspace")
    host = memory.pinned(2 * memory.GUARD_BYTES)
    buf.copy_guards(host)
    cupy.cuda.get_current_stream().synchronize()
    assert memory.guard_damage(host, buf.nbytes) == ""
    raw = buf._raw
    raw[memory.GUARD_BYTES - 3 : memory.GUARD_BYTES] = 0  # 3 B before the body
    raw[memory.GUARD_BYTES + 1000 : memory.GUARD_BYTES + 1002] = 1  # 2 B after it
    buf.copy_guards(host)  # no wait: the copy is read after the stream's
    cupy.cuda.get_current_stream().synchronize()
    said = memory.guard_damage(host, buf.nbytes)
    assert said == "workspace guard bands overwritten: 3 B before and 2 B after a 1,000 B workspace"
    with pytest.raises(LabkitError, match="3 B before and 2 B after"):
        buf.check()
    with pytest.raises(LabkitError, match="uint8 bytes"):
        buf.copy_guards(np.zeros(3, np.uint8))
    buf.free()


def test_a_copy_to_the_host_lands_every_byte_on_the_current_stream_and_refuses_a_strided_array():
    import cupy

    from labkit.errors import LabkitError
    from labkit.gpu.buffers import memory

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        src = cupy.arange(1000, dtype=cupy.float64) * 1.5
        host = memory.pinned(1000 * 8, np.float64)
        memory.copy_to_host_async(host[10:], src.data.ptr)  # 990 values: host.nbytes of them
        stream.synchronize()
    assert (host[10:] == np.arange(990) * 1.5).all()
    with pytest.raises(LabkitError, match="contiguous"):
        memory.copy_to_host_async(host[::2], src.data.ptr)


_COUNT_COMPILES = """
import json, sys
import cupy.cuda.compiler as compiler
calls = []
real = compiler._compile_using_nvrtc_no_warning
def counted(*a, **k):
    calls.append(1)
    return real(*a, **k)
compiler._compile_using_nvrtc_no_warning = counted
from labkit import ConvSpec
from labkit.gpu.audits import verify
for dtype, layout in (("fp16", "NHWC"), ("bf16", "NCHW"), ("fp32", "NHWC")):
    verify.check_plan(ConvSpec(N=4, C=16, H=10, W=10, K=16, dtype=dtype, layout=layout))
print(json.dumps(len(calls)))
"""


#: a new process builds the run-time compiled plans of the lessons' fprop at another batch size and
#: channel count, and prints how many it built
_BUILD_COMPILED = """
from labkit.experiments.core import BASE
from labkit.gpu import kernel_warmup
print(kernel_warmup.build_compiled_plans([(BASE.replace(N=8, C=128, K=128), "none")]))
"""


def _files(folder):
    import os

    return sorted(os.path.join(d, f) for d, _, names in os.walk(folder) for f in names)


def test_warm_kernels_leaves_a_checked_run_nothing_to_compile(tmp_path):
    """`python -m labkit warm-kernels` into an empty CuPy kernel cache and an empty CUDA JIT cache;
    then a new process's checked runs (other sizes than the warm-up's) compile no CuPy kernel, and
    its builds of the lessons' run-time compiled fprop plans at another shape add nothing to CUDA's
    JIT cache: cuDNN's kernels come from there."""
    import json
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        CUPY_CACHE_DIR=str(tmp_path / "kernels"),
        CUDA_CACHE_PATH=str(tmp_path / "jit"),
        LABKIT_CACHE=str(tmp_path / "labkit"),  # the compiled plans it keeps: not the user's cache
    )
    warm = subprocess.run(
        [sys.executable, "-m", "labkit", "warm-kernels"], env=env, capture_output=True, text=True, timeout=540
    )
    assert warm.returncode == 0 and "tasks in" in warm.stdout, warm.stdout + warm.stderr[-2000:]
    assert "Error" not in warm.stdout, warm.stdout
    jit_files = _files(tmp_path / "jit")
    assert jit_files, "cuDNN's compiled plans left nothing in CUDA's JIT cache"
    built = subprocess.run(
        [sys.executable, "-c", _BUILD_COMPILED], env=env, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0 and int(built.stdout.strip().splitlines()[-1]) > 0, built.stderr[-2000:]
    assert _files(tmp_path / "jit") == jit_files  # another shape's plans found their kernels there
    after = subprocess.run(
        [sys.executable, "-c", _COUNT_COMPILES], env=env, capture_output=True, text=True, timeout=300
    )
    assert after.returncode == 0, after.stderr[-2000:]
    assert json.loads(after.stdout.strip().splitlines()[-1]) == 0, after.stdout
