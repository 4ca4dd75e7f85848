"""The GPU lock (`labkit.gpu.host.lock`) with CUDA: a turn taken and given back by a process that
did no GPU work leaves it without a CUDA context (a report's parent waits for its worker under the
lock, and making a context to wait on nothing cost it half a second), and one that did work has its
work waited for."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json
from labkit.gpu.host import lock
with lock.hold() as turn:
    pass
before = lock.has_context(0)
import cupy
with lock.hold():
    x = cupy.ones(1 << 20)
    (x * 2).sum()
print(json.dumps(dict(locked=turn.locked, before=before, after=lock.has_context(0))))
"""


def test_a_turn_without_gpu_work_makes_no_context_and_one_with_work_has_it(tmp_path):
    env = dict(__import__("os").environ, LABKIT_GPU_LOCK_DIR=str(tmp_path / "locks"), LABKIT_GPU_LOCK="1")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == dict(locked=True, before=False, after=True)
