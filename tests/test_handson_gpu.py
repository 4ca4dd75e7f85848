"""The hands-on cells of lessons 01 and 02 on a GPU (live): their reference solutions pass their checks
on this GPU, lesson 01's check refuses a workspace smaller than the plan asks (cuDNN never runs with
it) and names a leak, and lesson 02's check names what is wrong with a strategy (a leak, a race, a
buffer too small, an error) and passes every built-in strategy (those that share one buffer across
streams order it with events: no race). The same cells on the simulated GPU: tests/test_handson.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import gpu_helpers  # noqa: E402

from labkit.gpu.workspaces import strategy_check  # noqa: E402
from labkit.gpu.workspaces import workspace as ws  # noqa: E402
from labkit.present import check  # noqa: E402
from labkit.session import handson, lessons  # noqa: E402


@pytest.fixture(autouse=True)
def live(monkeypatch):
    yield from gpu_helpers.live_session(monkeypatch)


def _namespace() -> dict:
    return {"lessons": lessons, "check": check}


def _run(name: str, ns: dict, source: str = None) -> bool:
    """Run hands-on ``name`` as a notebook does (its reference, or ``source``), on this GPU."""
    handson.register_topics()
    return handson.run(name, handson.HANDS_ON[name].source if source is None else source, ns)


def test_lesson_01_reference_runs_one_convolution_with_its_own_workspace(capsys):
    ns = _namespace()
    _run("conv_setup", ns)
    assert _run("own_workspace", ns)  # asserts check.own_workspace(gpu)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "measured on this" in out and "relative error" in out
    assert not ns["gpu"].simulated and not ns["gpu"].memory.allocations
    assert ns["gpu"].launches[-1].workspace_bytes == ns["plan"].workspace_bytes > 0


def test_lesson_01_check_refuses_a_workspace_too_small_and_names_a_leak(capsys):
    ns = _namespace()
    _run("conv_setup", ns)
    small = "workspace = gpu.allocate(16)\nconv.run(workspace, stream=stream)\ngpu.free(workspace)\n"
    _run("own_workspace", ns, small + "check.own_workspace(gpu)\n")
    out = capsys.readouterr().out
    assert out.startswith("not yet: ") and "workspace too small" in out and "you gave it 16 B" in out
    assert ns["conv"].wrong_outputs() == 0  # refused: nothing ran, and the slot was looked at already
    kept = "workspace = gpu.allocate(plan.workspace_bytes)\nconv.run(workspace, stream=stream)\n"
    _run("own_workspace", ns, kept + "check.own_workspace(gpu)\n")
    out = capsys.readouterr().out
    assert "leak: " in out and "Hint: " in out


def test_lesson_02_reference_strategy_passes_beside_the_builtins(capsys):
    ns = _namespace()
    _run("own_strategy", ns)
    assert _run("check_own_strategy", ns)  # asserts check.own_strategy(MyStrategy)
    out = capsys.readouterr().out
    assert out.startswith("correct: ") and "fixed_arena" in out and "scratchpad_per_stream" in out


class Leaky(ws.Strategy):
    """Allocates every call and never frees."""

    name = "leaky"

    def _get(self, req):
        return (self._malloc(req.nbytes, "leaky workspace") if req.nbytes else 0), req.nbytes


class FreeList(ws.Strategy):
    """Gives a buffer back to a free list at put, for any stream to take: it races."""

    name = "free_list"

    def __init__(self):
        super().__init__()
        self.free, self.made = [], []

    def _get(self, req):
        if not req.nbytes:
            return 0, 0
        for i, (ptr, n) in enumerate(self.free):
            if n >= req.nbytes:
                return self.free.pop(i)
        ptr = self._malloc(req.nbytes, "free-list workspace")
        self.made.append((ptr, req.nbytes))
        return ptr, req.nbytes

    def _put(self, req, ptr):
        if ptr:
            self.free.append(next(b for b in self.made if b[0] == ptr))

    def _close(self):
        cupy.cuda.runtime.deviceSynchronize()
        for ptr, n in self.made:
            self._free(ptr, n)
        self.made, self.free = [], []


class Broken(ws.Strategy):
    name = "broken"

    def _get(self, req):
        return None


def test_a_leaking_strategy_is_named_a_leak(capsys):
    v = strategy_check.check_strategy(Leaky)
    assert v.outputs_ok and v.leaks and v.leaked_bytes > strategy_check.LEAK_SLACK_BYTES and not v.ok
    assert not check.own_strategy(Leaky)
    assert "leak: " in capsys.readouterr().out


def test_a_strategy_that_hands_a_busy_buffer_to_another_stream_is_named_a_race(capsys):
    v = strategy_check.check_strategy(FreeList)
    assert v.outputs_ok and not v.leaks and v.races and not v.ok
    assert all(r.lead_us > 0 and r.overlap_bytes > 0 for r in v.races)
    assert not check.own_strategy(FreeList)
    assert "race: " in capsys.readouterr().out


def test_a_dims_only_key_is_named_too_small_and_an_error_is_said():
    v = strategy_check.check_strategy(lambda: ws.KeyedCache(1 << 30, key="dims_only"))
    assert v.too_small and "needs" in v.too_small and not v.ok
    v = strategy_check.check_strategy(Broken)
    assert v.error.startswith("TypeError") and not v.ok


@pytest.mark.parametrize(
    "name, options",
    [
        ("malloc_per_call", {}),
        ("scratchpad", {}),
        ("cupy_pool", {}),
        ("async_pool", {}),
        ("fixed_arena", {"size_bytes": 256 << 20}),
        ("keyed_cache", {"budget_bytes": 256 << 20}),
        ("preallocated", {}),
    ],
)
def test_builtin_strategies_are_right_do_not_leak_and_do_not_race(name, options):
    """Every built-in strategy keeps streams apart: its own buffer per stream or per call, a pool
    that reuses in stream order, or one buffer for all (fixed_arena, keyed_cache, preallocated)
    that the next stream waits for with an event, so the check's held-busy first stream never
    overlaps the second. The shared scratchpad alone races (tests/test_workspace_gpu.py)."""
    v = strategy_check.check_strategy(lambda: ws.make(name, **options))
    assert v.outputs_ok and not v.leaks and not v.error and not v.too_small, v
    assert not v.races, v.races
    assert v.ok
    assert v.peak_bytes >= v.largest_request_bytes > 0
