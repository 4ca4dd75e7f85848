"""On a host with several GPUs, live: a server given one GPU by the class hub's spread
(`labkit.gpu.host.spread.environment`: ``CUDA_VISIBLE_DEVICES`` set to its UUID) measures on that GPU
and queues on that GPU's lock (`labkit.gpu.host.lock` is named by the UUID CUDA reports), whatever its
index."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from labkit.gpu.host import spread  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: what a server given a GPU sees: its device 0, the lock's name for it, and what the banner says
PROBE = (
    "import json; from labkit.gpu.host import lock; from labkit.session import lessons; "
    "print(json.dumps(dict(uuid=lock.gpu_uuid(), banner=str(lessons.banner()))))"
)


def test_each_gpu_given_is_the_one_the_server_measures_on_and_locks(tmp_path):
    gpus = spread.host_gpus()
    if len(gpus) < 2:
        pytest.skip(f"needs 2 GPUs on the host (NVML sees {len(gpus)})")
    s = spread.Spread(tmp_path / "gpus.json", gpus=gpus)
    for name in ("ada", "alan"):
        gpu = s.assign(name)
        env = dict(
            os.environ, **spread.environment(gpu, of=len(gpus)), LABKIT_MODE="live", LABKIT_BUILD_WORKERS="0"
        )
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        out = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180
        )
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        assert seen["uuid"] == gpu.uuid, (name, gpu, seen)
        assert f"number {gpu.index} of the host's {len(gpus)}" in seen["banner"]
    assert [len(v) for v in s.running().values()][:2] == [1, 1]
