"""A process's CUDA context made through the driver, beside its imports (`labkit.gpu.host.context`):
without a driver the thread ends having done nothing; with a GPU, the context it makes is the one
CuPy then uses (a fresh process: no context before, one after, and CuPy's work runs in it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.errors import InvalidSpec
from labkit.gpu.host import context

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json
from labkit.errors import InvalidSpec
from labkit.gpu.host import context
before = context.has_context(0)
context.make_soon().join(60)
made = context.has_context(0)
import cupy
ok = float((cupy.ones(1 << 20) * 2).sum()) == 2.0 * (1 << 20)
print(json.dumps(dict(before=before, made=made, cupy=ok)))
"""


def test_making_the_context_soon_never_raises_and_returns_a_thread(monkeypatch):
    def no_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(context, "_driver", no_driver)
    t = context.make_soon()
    t.join(10)
    assert not t.is_alive() and t.daemon
    assert context.has_context(
        0
    )  # cannot tell without the driver: True, so a caller still waits for its work


@pytest.mark.parametrize("device", [-1, 1.0, "0", True, None])
def test_a_device_that_is_not_an_index_is_refused_before_any_thread(device):
    with pytest.raises(InvalidSpec, match="device"):
        context.make_soon(device)


@pytest.mark.gpu
def test_the_context_made_soon_is_the_one_cupy_uses():
    pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == dict(before=False, made=True, cupy=True)
