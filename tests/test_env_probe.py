"""The machine's probe (`labkit.env.environment`) runs once per process: in the background from
the moment a lesson's first cell reads ``lessons.banner`` (never at an import), and a caller waits
for the probe in flight rather than starting another. Real threads, a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import threading, labkit
from labkit import env
calls = []
real = env._probe.__wrapped__
env._probe.cache_clear()
def counted():
    calls.append(threading.current_thread().name)
    return real()
import functools
env._probe = functools.lru_cache(maxsize=1)(counted)
from labkit import check, lessons, widgets   # a notebook's first import: nothing starts
quiet = threading.active_count() == 1 and not calls
lessons.banner                        # the banner asks: the probe starts in the background
started = env._probe_started
first = env.environment()             # waits for it, or finds it done
assert env.environment() is first
env.probe_soon()                      # once per process
print(quiet, started, len(calls), calls[0], first.problem is None or bool(first.problem))
"""


def test_the_probe_runs_once_and_the_banner_starts_it():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    quiet, started, count, thread, answered = r.stdout.split()
    assert quiet == started == "True" and count == "1" and answered == "True"
    assert thread in ("labkit-environment", "MainThread")
