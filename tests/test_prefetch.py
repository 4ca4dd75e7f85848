"""The prefetch worker's rules (labkit.session.prefetch), with plain Python jobs: one job at a time under
the GPU lock, only when idle, stopped at a checkpoint by the foreground, disturbed jobs and
failures not kept, a foreground request for the running key waits for it. GPU-free."""

from __future__ import annotations

import threading
import time

import pytest

from labkit.session import prefetch
from labkit.session.prefetch import Prefetcher, checkpoint


@pytest.fixture
def worker():
    p = Prefetcher(idle_s=0.05)
    yield p
    p.close(timeout=5)


class Store(dict):
    def __call__(self, key, value):
        self[key] = value


def job(value, seconds=0.0, steps=1, log=None):
    def fn():
        for _ in range(steps):
            checkpoint()
            time.sleep(seconds / steps)
        if log is not None:
            log.append(value)
        return value

    return fn


def test_runs_jobs_in_order_and_keeps_results(worker):
    store, log = Store(), []
    n = worker.want([(k, job(k, log=log)) for k in "abc"], store, store.__contains__)
    assert n == 3
    assert worker.wait_idle(5)
    assert log == ["a", "b", "c"] and store == {"a": "a", "b": "b", "c": "c"}
    assert worker.stats.done == 3


def test_skips_what_is_done_and_new_wants_go_first(worker):
    store, log = Store(a="old"), []
    gate = threading.Event()
    worker.want(
        [("slow", lambda: gate.wait(5) and "slow"), ("x", job("x", log=log)), ("y", job("y", log=log))],
        store,
        store.__contains__,
    )
    time.sleep(0.2)  # "slow" is running
    assert (
        worker.want(
            [("a", job("new")), ("z", job("z", log=log)), ("y", job("y", log=log))], store, store.__contains__
        )
        == 2
    )  # "a" is done
    gate.set()
    assert worker.wait_idle(5)
    assert log == ["z", "y", "x"]  # the newest wants first, the older ones kept behind them, once each
    assert store == {"a": "old", "slow": "slow", "x": "x", "y": "y", "z": "z"}


def test_the_queue_is_bounded(worker):
    worker.cell_started()  # hold the worker back
    store = Store()
    worker.want([(f"a{i}", job(i)) for i in range(50)], store, store.__contains__)
    worker.want([(f"b{i}", job(i)) for i in range(50)], store, store.__contains__)
    assert worker.pending() == prefetch.MAX_QUEUE
    worker.clear()
    worker.cell_finished()


def test_waits_until_idle(worker):
    worker.idle_s = 0.5
    store = Store()
    t0 = time.monotonic()
    worker.want([("a", job("a"))], store, store.__contains__)
    assert worker.wait_idle(5)
    assert time.monotonic() - t0 >= 0.45


def test_an_idle_kernel_is_no_cell_and_no_foreground_for_idle_s(worker):
    """`wait_for_idle_kernel` (what the warm-up's cupyx step waits for): not while a cell runs or a
    foreground request holds the GPU, and only ``idle_s`` after the last of them ended."""
    worker.idle_s = 0.3
    worker.cell_started()
    assert not worker.wait_for_idle_kernel(0.4)
    worker.cell_finished()
    t0 = time.monotonic()
    assert worker.wait_for_idle_kernel(5)
    assert time.monotonic() - t0 >= 0.25
    with worker.foreground("k"):
        assert not worker.wait_for_idle_kernel(0.4)
    t0 = time.monotonic()
    assert worker.wait_for_idle_kernel(5) and time.monotonic() - t0 >= 0.25


def test_foreground_stops_a_running_job_at_its_next_checkpoint(worker):
    store = Store()
    # 30 checkpoints 0.05 s apart: still running when the foreground asks, and long enough that a
    # foreground left to wait for its end would wait over the 1 s allowed
    worker.want([("long", job("long", seconds=1.5, steps=30))], store, store.__contains__)
    time.sleep(0.3)
    assert worker.pending() == 1
    t0 = time.monotonic()
    with worker.foreground("other"):
        waited = time.monotonic() - t0
        assert "long" not in store
    assert waited < 1.0, f"the foreground waited {waited:.2f} s for a job that checks every 0.05 s"
    assert worker.stats.superseded == 1
    assert worker.wait_idle(10)  # requeued, run again once idle, kept
    assert store == {"long": "long"} and worker.stats.done == 1


def test_foreground_for_the_running_key_waits_for_it_and_gets_it(worker):
    store = Store()
    worker.want([("k", job("value", seconds=0.6, steps=12))], store, store.__contains__)
    time.sleep(0.2)
    with worker.foreground("k"):
        assert store.get("k") == "value"  # stored before the lock was released
    assert worker.stats.superseded == 0 and worker.stats.done == 1


def test_a_disturbed_job_is_discarded_not_kept(worker):
    store = Store()
    worker.want([("a", job("a", seconds=0.5))], store, store.__contains__)  # no checkpoint while it sleeps
    time.sleep(0.2)
    worker.cell_started()  # a cell ran while it measured
    worker.cell_finished()
    assert worker.wait_idle(5)
    assert worker.stats.discarded == 1 and "a" not in store


def test_no_job_starts_while_a_cell_runs(worker):
    store = Store()
    worker.cell_started()
    worker.want([("a", job("a"))], store, store.__contains__)
    time.sleep(0.4)
    assert store == {}
    worker.cell_finished()
    assert worker.wait_idle(5) and store == {"a": "a"}


def test_failures_are_not_kept_and_the_worker_goes_on(worker):
    store = Store()

    def boom():
        raise RuntimeError("no GPU today")

    worker.want([("bad", boom), ("good", job("good"))], store, store.__contains__)
    assert worker.wait_idle(5)
    assert store == {"good": "good"}
    assert worker.stats.failed == 1 and "no GPU today" in worker.stats.last_error


def test_superseded_is_not_an_exception_experiments_catch():
    assert not issubclass(prefetch.Superseded, Exception)


def test_checkpoint_outside_a_worker_does_nothing(worker):
    with worker.foreground("x"):
        checkpoint()


def test_off_by_environment(worker, monkeypatch):
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    store = Store()
    assert worker.want([("a", job("a"))], store, store.__contains__) == 0
    time.sleep(0.2)
    assert store == {}


def test_close_stops_a_running_job(worker):
    store = Store()
    worker.want([("long", job("long", seconds=5.0, steps=100))], store, store.__contains__)
    time.sleep(0.2)
    t0 = time.monotonic()
    worker.close(timeout=5)
    assert time.monotonic() - t0 < 1.0
    assert "long" not in store


def test_in_ipython_the_cell_that_starts_the_worker_counts_as_running(worker, monkeypatch):
    """Hooked from inside a cell (a panel's first draw): no job starts before that cell ends."""
    import IPython

    class Events:
        def __init__(self):
            self.callbacks = {}

        def register(self, name, fn):
            self.callbacks.setdefault(name, []).append(fn)

        def trigger(self, name):
            for fn in self.callbacks.get(name, []):
                fn(None)

    class Shell:
        events = Events()

    shell = Shell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    store = Store()
    worker.want([("a", job("a"))], store, store.__contains__)
    time.sleep(0.4)
    assert store == {}, "a job ran while the cell that queued it was still running"
    shell.events.trigger("post_run_cell")
    assert worker.wait_idle(5) and store == {"a": "a"}
    shell.events.trigger("pre_run_cell")  # the next cell
    worker.want([("b", job("b"))], store, store.__contains__)
    time.sleep(0.4)
    assert "b" not in store
    shell.events.trigger("post_run_cell")
    assert worker.wait_idle(5) and store["b"] == "b"


@pytest.mark.parametrize(
    "value, on",
    [
        (None, True),
        ("", True),
        ("1", True),
        ("yes", True),
        ("0", False),
        ("off", False),
        (" OFF ", False),
        ("No", False),
        ("false", False),
    ],
)
def test_switches_read_the_same_words(monkeypatch, value, on):
    """`env.switched_on`: what LABKIT_PREFETCH and LABKIT_GPU_LOCK (and any on/off switch) accept."""
    from labkit import env
    from labkit.gpu.host import lock
    from labkit.session import prefetch

    for name in ("LABKIT_PREFETCH", "LABKIT_GPU_LOCK"):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert env.switched_on("LABKIT_PREFETCH") is on
    assert prefetch.enabled() is on and lock.enabled() is on
