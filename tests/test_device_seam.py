"""The device seam (labkit.gpu.device) and the strategies' logic over it, on the CPU.

The strategies here run on `Ledger`, a device that hands out addresses and writes down every call
in order: enough to test what a strategy asks of its device (which calls, in which order, on which
stream) without a GPU and without the simulator's timing (tests/test_simgpu.py runs them there).
"""

import subprocess
import sys

import pytest

from labkit import ArenaTooSmall, ConvSpec, InvalidSpec, NotCapturable
from labkit.gpu import device as devices
from labkit.gpu.device import Device, Event, Pool
from labkit.gpu.workspaces import workspace as ws

SPEC = ConvSpec(N=8, C=64, H=56, W=56, K=64, dtype="fp16", layout="NCHW")
OTHER = SPEC.replace(layout="NHWC")


class _Event(Event):
    def __init__(self, log, stream):
        self.log, self.stream = log, stream

    def done(self):
        self.log.append(("event_query", self.stream))
        return True

    def wait(self):
        self.log.append(("event_wait", self.stream))


class _Stream:
    def __init__(self, log, ptr):
        self.log, self.ptr = log, ptr

    def synchronize(self):
        self.log.append(("stream_sync", self.ptr))


class _Pool(Pool):
    def __init__(self, dev, kind):
        self.dev, self.kind, self.held, self.free_blocks = dev, kind, 0, {}

    def allocate(self, nbytes, *, stream):
        self.dev.log.append((f"{self.kind}_alloc", stream.ptr, nbytes))
        blocks = self.free_blocks.setdefault(stream.ptr, [])
        if nbytes in blocks:
            blocks.remove(nbytes)
        else:
            self.held += nbytes
        return self.dev.allocate(nbytes)

    def free(self, ptr, *, stream):
        self.dev.log.append((f"{self.kind}_free", stream.ptr))
        self.free_blocks.setdefault(stream.ptr, []).append(self.dev.sizes[ptr])

    def held_bytes(self):
        return self.held

    def release(self):
        self.held = 0


class Ledger(Device):
    """A device that writes down every call (`log`) and hands out made-up addresses."""

    name = "ledger"

    def __init__(self):
        super().__init__()
        self.log, self.sizes, self._next = [], {}, 1 << 20

    @property
    def provenance(self):
        return {"mode": "test", "gpu": "none", "label": "a test ledger"}

    def allocate(self, nbytes, *, stream=None, what="workspace"):
        if not nbytes:
            return 0
        ptr, self._next = self._next, self._next + nbytes + 512
        self.sizes[ptr] = nbytes
        self.log.append(("malloc", nbytes))
        return ptr

    def free(self, ptr):
        self.log.append(("free", self.sizes.pop(ptr)))

    def pool(self, kind):
        return _Pool(self, kind)

    def stream_of(self, ptr):
        return _Stream(self.log, ptr)

    def record_event(self, stream):
        self.log.append(("record", stream.ptr))
        return _Event(self.log, stream.ptr)

    def wait_event(self, stream, event):
        self.log.append(("stream_wait", stream.ptr, event.stream))

    def synchronize(self):
        self.log.append(("device_sync",))

    def clock_us(self):
        return 0.0

    def _capture_native(self, fn, stream):
        self.log.append(("begin_capture", stream.ptr))
        fn()
        self.log.append(("end_capture", stream.ptr))
        return _Native(self.log)


class _Native:
    def __init__(self, log):
        self.log = log

    def launch(self, stream):
        self.log.append(("graph_launch", stream.ptr))


#: every shipped strategy, with small options
EVERY = [
    ("fixed_arena", {"size_bytes": 1 << 20}),
    ("malloc_per_call", {}),
    ("keyed_cache", {}),
    ("scratchpad", {}),
    ("cupy_pool", {}),
    ("async_pool", {}),
    ("preallocated", {}),
]


def req(nbytes, stream=1, spec=SPEC, plan=0):
    return ws.Request(spec, plan, f"eng{plan}", nbytes, stream)


@pytest.fixture
def ledger():
    dev = Ledger()
    with devices.use(dev):
        yield dev


def test_importing_the_seam_strategies_and_runner_imports_no_cupy():
    code = (
        "import sys; import labkit.gpu.device.cuda, labkit.gpu.workspaces.workspace;"
        "import labkit.gpu.workspaces.runner;"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('cupy', 'cudnn', 'torch')];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_strategy_takes_the_current_device_and_use_restores_the_one_before(ledger):
    assert ws.FixedArena(1 << 20).device is ledger
    other = Ledger()
    with devices.use(other):
        assert devices.current() is other and ws.Preallocated().device is other
    assert devices.current() is ledger
    with pytest.raises(InvalidSpec):
        with devices.use("gpu"):
            pass


def test_every_strategy_counts_a_get_as_one_hit_or_one_miss(ledger):
    calls = [req(1000), req(1000), req(4000, plan=1), req(0, plan=2), req(1000)]
    for name, opts in EVERY:
        s = ws.make(name, **opts)
        for r in calls:
            ptr, _ = s.get(r)
            s.put(r, ptr)
        st = s.stats
        assert st.hits + st.misses == st.calls == len(calls), name
        s.close()
        assert s.stats.held_bytes == 0, name
    # what each one's misses are: the gets that made the device allocate
    expect = {"fixed_arena": 0, "malloc_per_call": 4, "keyed_cache": 2, "scratchpad": 2, "preallocated": 2}
    for name, misses in expect.items():
        s = ws.make(name, **({"size_bytes": 1 << 20} if name == "fixed_arena" else {}))
        for r in calls:
            s.put(r, s.get(r)[0])
        assert s.stats.misses == misses, name
        s.close()


def test_a_failed_get_is_a_miss(ledger):
    arena = ws.FixedArena(1000)
    with pytest.raises(ArenaTooSmall):
        arena.get(req(4000))
    assert arena.stats.misses == 1 and arena.stats.hits == 0


def test_no_strategy_synchronises_the_device_on_a_get_or_a_put(ledger):
    """Eviction, growth and hand-overs across streams wait on events, never on the whole device."""
    for name, opts in [("keyed_cache", {"budget_bytes": 5000}), ("scratchpad", {"shared": True}), *EVERY]:
        ledger.log.clear()
        s = ws.make(name, **opts)
        for i, n in enumerate([1000, 4000, 3000, 4000, 8000 if name != "keyed_cache" else 2000]):
            r = req(n, stream=1 + i % 2, plan=i % 3)
            s.put(r, s.get(r)[0])
        assert ("device_sync",) not in ledger.log, name
        s.close()  # closing may: it is not a hot path


def test_keyed_cache_frees_an_evicted_buffer_after_its_streams_event(ledger):
    cache = ws.KeyedCache(5000)
    cache.get(req(3000, stream=7, plan=0))
    cache.get(req(3000, stream=1, plan=1))  # evicts plan 0's buffer, last used on stream 7
    i = ledger.log.index(("free", 3000))
    assert ledger.log[i - 2 : i] == [("record", 7), ("event_wait", 7)]
    assert cache.stats.evictions == 1 and cache.stats.held_bytes == 3000


def test_a_buffer_used_from_another_stream_waits_for_its_last_use_on_the_device(ledger):
    for make in (lambda: ws.KeyedCache(1 << 20), ws.Preallocated, lambda: ws.FixedArena(1 << 20)):
        s = make()
        ledger.log.clear()
        s.get(req(1000, stream=1))
        s.get(req(1000, stream=1))  # same stream: in order already
        assert not [e for e in ledger.log if e[0] in ("record", "stream_wait")]
        s.get(req(1000, stream=2))
        assert ledger.log[-2:] == [("record", 1), ("stream_wait", 2, 1)], ledger.log
        assert not [e for e in ledger.log if e[0] == "event_wait"]  # the host never waits for it
        s.close()


def test_the_shared_scratchpad_hands_one_buffer_to_every_stream_unordered(ledger):
    pad = ws.Scratchpad(shared=True)
    p1, _ = pad.get(req(1000, stream=1))
    p2, _ = pad.get(req(1000, stream=2))
    assert p1 == p2 and not [e for e in ledger.log if e[0] in ("record", "stream_wait")]
    pad.get(req(4000, stream=1))  # grows: the old buffer goes once both streams are past it
    i = ledger.log.index(("free", 1000))
    assert set(ledger.log[i - 4 : i]) == {("record", 1), ("event_wait", 1), ("record", 2), ("event_wait", 2)}
    per = ws.Scratchpad()
    a, _ = per.get(req(1000, stream=1))
    b, _ = per.get(req(1000, stream=2))
    assert a != b and per.stats.held_bytes == 2000


def test_a_scratchpad_whose_growth_fails_holds_no_freed_buffer(ledger):
    """Growing frees the old buffer first; when the larger cudaMalloc then fails (memory pressure),
    the next call that fits gets a buffer made for it, never the freed one, and close frees it once."""
    from labkit import OutOfMemory

    def allocate(nbytes, *, stream=None, what="workspace"):
        if nbytes > 1 << 20:
            raise OutOfMemory(what, nbytes, 1 << 20)
        return Ledger.allocate(ledger, nbytes, stream=stream, what=what)

    ledger.allocate = allocate
    pad = ws.Scratchpad()
    first, _ = pad.get(req(2000))
    with pytest.raises(OutOfMemory):
        pad.get(req(1 << 30, plan=1))  # the heuristic's plan: frees the 2000 B buffer, then fails
    again, got = pad.get(req(2000))  # the plan the Runner falls back to
    assert again in ledger.sizes and got >= 2000, (first, again, ledger.log)
    assert pad.stats.alloc_calls == 2 and pad.stats.held_bytes == 2000
    pad.close()
    assert ledger.log.count(("free", 2000)) == 2 and not ledger.sizes


def test_pool_strategies_allocate_and_hand_back_on_the_calls_stream(ledger):
    for make in (ws.CupyPool, ws.AsyncPool):
        s = make()
        r = req(1000, stream=5)
        ptr, _ = s.get(r)
        s.put(r, ptr)
        kind = s.pool.kind
        assert (f"{kind}_alloc", 5, 1000) in ledger.log and (f"{kind}_free", 5) in ledger.log
        s.get(r)
        assert s.stats.misses == 1 and s.stats.hits == 1 and s.stats.alloc_calls == 2
        s.close()
        assert ("device_sync",) in ledger.log  # closing drains every stream, then releases


def test_a_learners_subclass_runs_over_the_seam_with_the_helpers(ledger):
    class Mine(ws.Strategy):
        name = "mine"

        def __init__(self):
            super().__init__()
            self.kept = {}

        def _get(self, r):
            if (r.stream_ptr, r.nbytes) not in self.kept:
                self.kept[r.stream_ptr, r.nbytes] = self._malloc(r.nbytes, "mine")
            return self.kept[r.stream_ptr, r.nbytes], r.nbytes

        def _close(self):
            for (_, n), p in self.kept.items():
                self._free(p, n)

    m = Mine()
    for r in (req(1000), req(1000), req(1000, stream=2)):
        m.put(r, m.get(r)[0])
    assert m.device is ledger and (m.stats.hits, m.stats.misses, m.stats.peak_held_bytes) == (1, 2, 2000)
    m.close()
    assert m.stats.held_bytes == 0


def test_inside_a_capture_a_shared_buffer_is_ordered_at_each_launch_never_by_a_wait_in_the_capture(ledger):
    """CUDA invalidates a capture that waits for an event recorded outside it: the strategies note
    the buffer, and each launch of the graph first waits for its last use on another stream."""
    for make in (lambda: ws.KeyedCache(1 << 20), ws.Preallocated, lambda: ws.FixedArena(1 << 20)):
        s = make()
        s.get(req(1000, stream=1))  # last used on stream 1
        ledger.log.clear()
        graph = ledger.capture(lambda: [s.get(req(1000, stream=2)) for _ in range(2)], _Stream(ledger.log, 2))
        inside = ledger.log[ledger.log.index(("begin_capture", 2)) :]
        assert not [e for e in inside if e[0] in ("record", "stream_wait", "event_wait")], inside
        ledger.log.clear()
        graph.launch(_Stream(ledger.log, 2))
        assert ledger.log == [("record", 1), ("stream_wait", 2, 1), ("graph_launch", 2)], ledger.log
        ledger.log.clear()
        graph.launch(_Stream(ledger.log, 2))  # its own stream used it last: nothing to wait for
        assert ledger.log == [("graph_launch", 2)]
        s.get(req(1000, stream=3))  # a call on another stream waits for the graph's launch
        assert ledger.log[-2:] == [("record", 2), ("stream_wait", 3, 2)]
        s.close()


@pytest.mark.parametrize(
    "make, first, then, what",
    [
        (ws.MallocPerCall, None, req(1000), "malloc_per_call (a cudaFree after every call)"),
        (lambda: ws.KeyedCache(1500), req(1000, plan=1), req(1000), "keyed_cache's eviction (a cudaFree)"),
        (ws.Scratchpad, req(1000), req(4000), "scratchpad_per_stream's growth (a cudaFree)"),
    ],
)
def test_what_cuda_forbids_in_a_capture_is_refused_in_one_line_before_any_cuda_call(
    ledger, make, first, then, what
):
    s = make()
    if first is not None:
        s.get(first)
    ledger.log.clear()
    with pytest.raises(NotCapturable) as got:
        ledger.capture(lambda: s.get(then), _Stream(ledger.log, 1))
    assert str(got.value).startswith(f"{what} cannot be captured in a CUDA graph: CUDA refuses it")
    assert "\n" not in str(got.value) and ledger.log == [("begin_capture", 1)], ledger.log
    assert not ledger.capturing()
    s.close()
