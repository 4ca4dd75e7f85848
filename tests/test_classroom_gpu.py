"""A class on one GPU, live (issue 28): a measurement waits for another process's turn
(`labkit.gpu.host.lock`) and says so; a process that is not labkit's using the GPU meanwhile marks the
result contended, which is shown, not saved, and measured again once the GPU is free
(`labkit.gpu.host.contention`); a class's shared recording filled with ``fill --into`` answers a
learner with an empty cache from disk, plans included (`labkit.store.localcache.shared`)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit import experiments  # noqa: E402
from labkit.cli import record  # noqa: E402
from labkit.draw import plots  # noqa: E402
from labkit.gpu.cudnn import graph_cache, saved_plans  # noqa: E402
from labkit.gpu.host import lock  # noqa: E402
from labkit.session import lessons  # noqa: E402
from labkit.signals.progress import announcing  # noqa: E402
from labkit.store import localcache, plan_store  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMALL = experiments.BASE.replace(N=8, H=28, W=28)
#: another program on the GPU: a matmul loop for argv[1] seconds
BUSY = textwrap.dedent("""
    import os, sys, time, cupy
    a = cupy.random.random((4096, 4096), dtype=cupy.float32)
    print('busy', os.getpid(), flush=True)
    t = time.time()
    while time.time() - t < float(sys.argv[1]):
        a @ a
        cupy.cuda.Device().synchronize()
""")
#: starts BUSY from a short-lived parent, so the loop is neither labkit's nor this process's child
#: (it belongs to init, as a colleague's job would); prints its pid
LAUNCH = textwrap.dedent("""
    import subprocess, sys
    p = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    print(p.stdout.readline().split()[1], flush=True)
""")


def another_program(seconds: float) -> int:
    out = subprocess.run(
        [sys.executable, "-c", LAUNCH, BUSY, str(seconds)], capture_output=True, text=True, timeout=120
    )
    return int(out.stdout.strip())


def _running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.fixture
def live(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("LABKIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("LABKIT_SHARED_CACHE", raising=False)
    for m in (localcache, plan_store):
        m.reset()
    lessons.forget()
    lock._gpus.clear()
    yield tmp_path
    lessons.forget()
    for m in (localcache, plan_store):
        m.reset()
    lock._gpus.clear()


def test_a_measurement_waits_for_another_process_and_says_so(live):
    folder = lock.lock_root() / lock.gpu_uuid()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from labkit.gpu.host.lock import FileLock; "
            f"FileLock({str(folder)!r}).acquire(); print('held', flush=True); time.sleep(1.5)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert holder.stdout.readline().strip() == "held"
    heard = []
    with announcing(heard.append):
        df = experiments.precision(spec=SMALL, dtypes=["fp16"])
    holder.wait(10)
    turn = df.attrs["gpu_turn"]
    assert turn["locked"] and turn["waited_s"] > 0.5, turn
    assert heard[0] == "waiting for the GPU (1 ahead)" and "got the GPU" in heard
    assert df["status"].eq("ok").all()


def test_another_programs_gpu_use_marks_the_result_which_is_not_saved_and_measured_again(live):
    busy = another_program(6)
    time.sleep(1.5)  # NVML has sampled it
    df = lessons.data("precision", spec=SMALL, dtypes=["fp16", "bf16"])
    assert busy in df.attrs["gpu_turn"]["contended_by"], df.attrs["gpu_turn"]
    assert lessons.contended(df) and "saved_in" not in df.attrs
    assert "CONTENDED" in plots.provenance_subtitle(df)
    assert not lessons.is_cached(
        "precision", spec=SMALL, dtypes=["fp16", "bf16"]
    )  # neither on disk nor settled
    t0 = time.monotonic()
    while _running(busy) and time.monotonic() - t0 < 30:
        time.sleep(0.2)
    time.sleep(2.5)  # the GPU is free again
    again = lessons.data("precision", spec=SMALL, dtypes=["fp16", "bf16"])
    assert again is not df and not lessons.contended(again) and again.attrs.get("saved_in")


def test_a_shared_class_recording_answers_a_learner_with_an_empty_cache(live, monkeypatch):
    shared = live / "class"
    # graphs an earlier test built in this process: the fill builds (and shares) its own plans
    graph_cache.graphs.clear()
    counts = record.fill(quick=True, only=["precision"], into=shared)
    assert counts["saved"] >= 1 and counts["failed"] == 0
    assert '"complete"' in (shared / "fill.json").read_text()
    assert all(
        p.stat().st_mode & 0o004 for p in shared.rglob("*") if p.is_file()
    )  # readable by every learner
    monkeypatch.setenv("LABKIT_CACHE", str(live / "learner"))
    monkeypatch.setenv("LABKIT_SHARED_CACHE", str(shared))
    localcache.reset()
    plan_store.reset()
    lessons.forget()
    graph_cache.graphs.clear()
    name, kwargs = next((n, k) for n, k in record._calls(True, ["precision"]))
    df = lessons.data(name, **kwargs)
    # answered from the class's copy without measuring: no graph was built (how long the lookup
    # takes is a benchmark's question, not this test's)
    assert df.attrs["from_shared"] and len(graph_cache.graphs) == 0, len(graph_cache.graphs)
    assert not (live / "learner" / "recordings").exists()  # nothing copied into the learner's own cache
    assert any(True for _ in plan_store.shared().entries())  # the fill's plans are shared too
    spec = experiments.BASE.replace(dtype="fp16")
    loaded = saved_plans.load_plan(spec, kind="heuristic")
    assert loaded is not None and "class" in str(loaded.saved.path)
