"""Steps for tests/test_isolated.py: the worker process imports them by name ("isolated_steps:...")."""

import ctypes
import os
import time

from labkit.errors import InvalidSpec, OutOfMemory
from labkit.signals.progress import announce


def add(a, b):
    return a + b


def pid():
    return os.getpid()


def env(name):
    return os.environ.get(name)


def sleep_in(phase, seconds):
    announce(phase)
    time.sleep(seconds)
    return "woke"


def refuse(value):
    raise InvalidSpec("value", value, "is refused by this step")


def fail_plainly():
    raise ZeroDivisionError("a plain bug")


def die(code):
    announce("about to die")
    os._exit(code)


def run_out_of_memory(nbytes):
    raise OutOfMemory("a workspace", nbytes, 1024)


def die_building(*job):
    """A build worker that crashes on its plan (tests/test_builds_gpu.py)."""
    os._exit(3)


def hang_building(*job):
    """A build worker that never finishes its plan."""
    time.sleep(3600)


def slow_build(spec_fields, epilogue, workspace_cap, index, name, seconds=0.8):
    """Stands in for `labkit.gpu.cudnn.build_pool.build_remote` in a CPU test of the pool's queue."""
    time.sleep(seconds)
    return dict(index=index, name=name, seconds=seconds)


def pid_build(spec_fields, epilogue, workspace_cap, index, name, seconds=0.4):
    """A stand-in build that says which worker process built it."""
    time.sleep(seconds)
    return dict(index=index, name=name, seconds=seconds, pid=os.getpid())


#: the worker's pid once `warm` ran in it (a step called later reads it)
WARMED = []


def warm():
    WARMED.append(os.getpid())


def warmed():
    return list(WARMED)


def announce_many(n, end="return", seconds=0.0, last=None):
    """Announce "plan i of n" n times as fast as it can (then ``last``, if given), and end: return
    the seconds the announcements took, after sleeping ``seconds``; or die ("exit", "segfault")."""
    t0 = time.perf_counter()
    for i in range(n):
        announce(f"plan {i} of {n}")
    if last is not None:
        announce(last)
    elapsed = time.perf_counter() - t0
    if end == "exit":
        os._exit(3)
    if end == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    time.sleep(seconds)
    return elapsed


def announce_paced(n, every_s, then_s):
    """Announce "plan i" n times, one every ``every_s``, then "almost" and "last" at once, then sleep
    ``then_s``."""
    for i in range(n):
        announce(f"plan {i}")
        time.sleep(every_s)
    announce("almost")
    announce("last")
    time.sleep(then_s)
