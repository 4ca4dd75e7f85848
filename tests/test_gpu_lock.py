"""One measurement at a time per GPU across processes (`labkit.gpu.host.lock`): real processes and
real ``flock`` on real files, no GPU (the queue logic does not need one): turns never overlap,
waiters are served in the order they asked, a wait is told at once with how many are ahead, a
killed holder's turn is taken within 2 s, this process's threads take turns and the lock is let
go while plans build, and a lock folder that cannot be used is a warning, not a hang."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labkit.gpu.host import lock
from labkit.gpu.host.lock import FileLock

HOLDER = str(Path(__file__).with_name("lock_holder.py"))


def _holder(folder, hold_s, log, name):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    p = subprocess.Popen(
        [sys.executable, HOLDER, str(folder), str(hold_s), str(log), name],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    return p


def _wait_held(p, timeout=30):
    t0 = time.monotonic()
    line = p.stdout.readline()
    assert line.strip() == "held", f"holder said {line!r} after {time.monotonic() - t0:.1f} s"


def _events(log):
    rows = [line.split() for line in Path(log).read_text().splitlines()]
    return [(name, what, float(t)) for name, what, t in rows]


def test_one_process_takes_and_gives_its_turn(tmp_path):
    lk = FileLock(tmp_path / "GPU-x")
    assert lk.acquire() < 0.5 and lk.held
    assert lk.ahead() == 0
    assert os.getpid() in lk.members()
    lk.release()
    assert not lk.held and os.listdir(tmp_path / "GPU-x" / "queue") == []


def test_a_waiter_is_told_at_once_and_gets_the_turn_when_the_holder_gives_it(tmp_path):
    log = tmp_path / "log"
    p = _holder(tmp_path / "GPU-x", 1.0, log, "holder")
    _wait_held(p)
    told = []
    t0 = time.monotonic()
    lk = FileLock(tmp_path / "GPU-x")
    waited = lk.acquire(on_wait=lambda n: told.append((n, time.monotonic() - t0)))
    got = time.time()
    lk.release()
    p.wait(10)
    assert told and told[0][0] == 1 and told[0][1] < 0.3, (
        told
    )  # "waiting for the GPU (1 ahead)" within 300 ms
    assert 0.3 < waited < 5
    released = [t for name, what, t in _events(log) if what == "released"][0]
    assert got >= released  # never both at once


def test_waiters_are_served_in_the_order_they_asked_and_turns_never_overlap(tmp_path):
    log = tmp_path / "log"
    first = _holder(tmp_path / "GPU-x", 0.8, log, "first")
    _wait_held(first)
    later = []
    for name in ("a", "b", "c"):
        later.append(_holder(tmp_path / "GPU-x", 0.2, log, name))
        time.sleep(0.25)  # each asks after the one before
    for p in [first, *later]:
        p.wait(30)
        assert p.returncode == 0
    events = _events(log)
    order = [name for name, what, _ in events if what == "acquired"]
    assert order == ["first", "a", "b", "c"]
    spans = {}
    for name, what, t in events:
        spans.setdefault(name, []).append(t)
    spans = sorted(spans.values())
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert a1 <= b0, f"turns overlap: {a0}-{a1} and {b0}-{b1}"


def test_a_killed_holders_turn_is_taken_within_two_seconds(tmp_path):
    p = _holder(tmp_path / "GPU-x", 60, tmp_path / "log", "holder")
    _wait_held(p)
    done = {}

    def wait_for_turn():
        lk = FileLock(tmp_path / "GPU-x")
        lk.acquire()
        done["at"] = time.monotonic()
        lk.release()

    t = threading.Thread(target=wait_for_turn)
    t.start()
    time.sleep(0.5)
    assert "at" not in done  # still held
    killed = time.monotonic()
    os.kill(p.pid, signal.SIGKILL)
    t.join(10)
    p.wait(5)
    assert "at" in done and done["at"] - killed < 2.0
    assert p.pid not in FileLock(tmp_path / "GPU-x").members()  # its member file went with it


def test_a_waiter_that_is_stopped_withdraws_its_ticket(tmp_path):
    p = _holder(tmp_path / "GPU-x", 2, tmp_path / "log", "holder")
    _wait_held(p)

    class Stop(Exception):
        pass

    calls = []

    def check():
        calls.append(1)
        if len(calls) > 3:
            raise Stop()

    lk = FileLock(tmp_path / "GPU-x")
    with pytest.raises(Stop):
        lk.acquire(check=check)
    assert not lk.held and len(os.listdir(tmp_path / "GPU-x" / "queue")) == 1  # only the holder's
    # the holder's 2 s are room for the waiter's four polls; once they are checked it is not waited for
    p.kill()
    p.wait(10)


# ---- this process: threads, builds, faults (a stand-in GPU UUID; no CUDA) ---------------------
@pytest.fixture
def gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(lock, "gpu_uuid", lambda device=None: "GPU-test")
    lock._gpus.clear()
    yield
    lock._gpus.clear()


def test_threads_of_one_process_take_turns_and_a_hold_is_reentrant(gpu):
    order = []

    def other():
        with lock.hold():
            order.append("other")

    with lock.hold() as turn:
        with lock.hold():
            t = threading.Thread(target=other)
            t.start()
            time.sleep(0.2)
            order.append("main")
        assert turn.locked and turn.holds == 1
    t.join(5)
    assert order == ["main", "other"]


def test_the_turn_is_let_go_while_plans_build_and_taken_again(gpu, tmp_path):
    log = tmp_path / "log"
    with lock.hold() as turn:
        with lock.released():
            p = _holder(tmp_path / "locks" / "GPU-test", 0.3, log, "other")
            _wait_held(p)  # another process got the GPU while this one "built"
        p.wait(10)
        assert turn.holds == 2  # taken again after the build
    assert [w for _, w, _ in _events(log)] == ["acquired", "released"]


def test_an_unwatched_turn_asks_no_contention_check(gpu, monkeypatch):
    asked = []
    monkeypatch.setattr(lock.contention, "others_since", lambda since, members: asked.append(since) or [4242])
    with lock.hold() as watched:
        pass
    assert len(asked) == 1 and watched.contended_by == {4242}
    with lock.hold(watch=False) as unwatched:  # a worker's step: its turn is not sent back
        with lock.released():  # a build inside the step
            pass
    assert len(asked) == 1 and unwatched.contended_by == set()
    with lock.hold(watch=False):
        with lock.hold() as nested:  # an experiment inside the step reads its turn
            with lock.released():
                pass
    assert len(asked) == 3 and nested.contended_by == {4242}  # the build's let-go and the end


def test_lock_off_and_an_unusable_folder(gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_GPU_LOCK", "0")
    with lock.hold() as turn:
        assert not turn.locked
    monkeypatch.setenv("LABKIT_GPU_LOCK", "1")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LABKIT_GPU_LOCK_DIR", str(blocker))
    lock._gpus.clear()
    with pytest.warns(lock.LockWarning, match="a-file"):
        with lock.hold() as turn:
            assert not turn.locked  # measuring goes on without it
