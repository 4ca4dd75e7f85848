"""The device seam on a real GPU (labkit.gpu.device.cuda.CudaDevice), and the CUDA rules the simulated
GPU models (labkit/simgpu/device.py), measured here on the GPU itself, never on the simulator."""

import time

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit import ConvSpec  # noqa: E402
from labkit.gpu import device as devices  # noqa: E402
from labkit.gpu.device.cuda import CudaDevice  # noqa: E402
from labkit.gpu.workspaces import workspace as ws  # noqa: E402
from labkit.gpu.workspaces.runner import Runner  # noqa: E402
from labkit.gpu.workspaces.strategy_check import _hold  # noqa: E402

HOLD_US = 20_000.0


@pytest.fixture
def dev():
    d = devices.current()
    assert isinstance(d, CudaDevice)
    d.synchronize()
    return d


def test_an_event_completes_when_its_streams_work_has_run_and_orders_another_stream(dev):
    s1, s2 = dev.stream(), dev.stream()
    _hold(s1, HOLD_US)
    ev = dev.record_event(s1)
    assert not ev.done()
    dev.wait_event(s2, ev)
    after = dev.record_event(s2)  # queued on s2 behind the wait: completes after ev
    t0 = time.perf_counter()
    after.wait()
    assert (time.perf_counter() - t0) * 1e6 > HOLD_US / 2 and ev.done()
    assert dev.elapsed_us(ev, after) >= 0


def test_cudafree_waits_for_every_stream(dev):
    """Rule 7 of the simulator: cudaFree returns only once every stream is idle."""
    ptr = dev.allocate(1 << 20)
    _hold(dev.stream(), HOLD_US)
    t0 = time.perf_counter()
    dev.free(ptr)
    assert (time.perf_counter() - t0) * 1e6 > HOLD_US / 2


def test_the_pools_round_and_reserve_as_the_simulator_says(dev):
    """Rules 9 and 10: CuPy's pool rounds to 512 B; the async pool reserves whole 32 MiB chunks."""
    s = dev.stream()
    caching = dev.pool("caching")
    p = caching.allocate(25_763_987, stream=s)
    assert caching.held_bytes() == 25_764_352
    caching.free(p, stream=s)
    assert caching.allocate(25_763_987, stream=s) == p  # reused on its stream
    asynch = dev.pool("async")
    asynch.release()
    before = asynch.held_bytes()
    q = asynch.allocate(25_763_987, stream=s)
    assert (asynch.held_bytes() - before) % (32 << 20) == 0 and asynch.held_bytes() > before
    asynch.free(q, stream=s)
    s.synchronize()
    asynch.release()


def test_every_strategy_counts_the_same_way_on_the_gpu(dev):
    spec = ConvSpec(N=8, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW")
    for name in ws.STRATEGIES:
        with Runner(ws.make(name, **({"size_bytes": 256 << 20} if name == "fixed_arena" else {}))) as r:
            for _ in range(3):
                r.run(spec)
            st = r.strategy.stats
            assert st.hits + st.misses == st.calls == 3, name
            want = {"malloc_per_call": 3, "fixed_arena": 0}.get(name, 1)
            # the async pool is the device's: memory it kept from before may answer the first call
            assert st.misses == want or (name == "async_pool" and st.misses == 0), name
