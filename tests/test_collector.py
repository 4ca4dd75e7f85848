"""Python's garbage collector is held off during a CUDA graph capture (`labkit.gpu.timing.collector`):
off inside, as it was after, with overlapping captures in two threads and after an error. No GPU
(tests/test_engine_gpu.py checks that `measure.capture` holds it off)."""

import gc
import threading

import pytest

from labkit.gpu.timing import collector


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_held_off_inside_and_back_on_after():
    with collector.held_off():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with collector.held_off():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_turns_it_back_on():
    with pytest.raises(ZeroDivisionError):
        with collector.held_off():
            1 / 0
    assert gc.isenabled()


def test_overlapping_blocks_in_two_threads_turn_it_on_after_the_last():
    inside, leave = threading.Event(), threading.Event()

    def other():
        with collector.held_off():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    with collector.held_off():
        t.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's block still runs
    leave.set()
    t.join(10)
    assert gc.isenabled()
