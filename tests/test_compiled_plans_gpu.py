"""Runtime-compiled plans kept on disk (`labkit.gpu.cudnn.compiled_plans`), live: a first process's build
workers compile an fp8 graph's plans and keep each; a second process builds the same graph with
no compile at all (every plan loaded), the same plans, each passing the float64 check; a kept file
cuDNN will not load is set aside, named, and that plan compiled again; `warm-kernels`' builder keeps
what it compiles and compiles nothing kept."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from gpu_helpers import live_process_env  # noqa: E402  (tests/ is on sys.path under pytest)

#: fp8 NHWC fprop: every plan is compiled at run time
SPEC = dict(N=4, C=32, H=12, W=12, K=32, dtype="fp8_e4m3", layout="NHWC")

BUILD = textwrap.dedent("""
    import json, sys
    from labkit import experiments
    from labkit.gpu.cudnn import build_pool, builds, graph_cache
    spec = experiments.BASE.replace(**json.loads(sys.argv[1]))
    cg = graph_cache.get_graph(spec)
    pool = build_pool.pool()
    verdicts = cg.check()
    g = cg.graph
    compiled = builds.runtime_compiled(g, g.get_execution_plan_count())
    print(json.dumps({
        "plans": [p.name for p in cg.plans if p.built],
        "compiled": len(compiled),
        "from_workers_or_disk": sorted(cg.remote),
        "worker_builds": pool.stats.remote if pool else None,
        "local_builds": pool.stats.local if pool else None,
        "checked_ok": sum(bool(v.ok) for v in verdicts.values()),
        "checked": len(verdicts),
        "load_seconds": [round(r.seconds, 4) for r in cg.remote.values()],
    }))
""")


def build(cache: Path, **env_extra):
    env = live_process_env(cache, LABKIT_COMPILE_BUDGET_S="none", **env_extra)
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, json.dumps(SPEC)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ans = json.loads(proc.stdout.strip().splitlines()[-1])
    ans["stderr"] = proc.stderr
    return ans


def compiled_files(cache: Path):
    return sorted((cache / "plans").rglob("*.compiled.json"))


def test_a_second_process_compiles_nothing_and_its_loaded_plans_pass_the_check(tmp_path):
    first = build(tmp_path)
    print({k: v for k, v in first.items() if k != "stderr"})
    compiles = first["worker_builds"] + first["local_builds"]  # a worker's, or taken back and built here
    assert first["compiled"] >= 2 and compiles >= first["compiled"] - 1
    assert len(compiled_files(tmp_path)) == compiles
    second = build(tmp_path)
    print({k: v for k, v in second.items() if k != "stderr"})
    assert second["worker_builds"] == 0 and second["local_builds"] == 0  # nothing compiled again
    assert second["plans"] == first["plans"]
    assert len(second["from_workers_or_disk"]) == compiles  # every compiled plan came from disk
    assert second["checked"] == first["checked"] and second["checked_ok"] == first["checked_ok"] >= 1
    assert max(second["load_seconds"]) < 0.5


def test_a_kept_file_cudnn_will_not_load_is_set_aside_and_compiled_again(tmp_path):
    first = build(tmp_path)
    victim = compiled_files(tmp_path)[0]
    body = json.loads(victim.read_text())
    import base64
    import hashlib

    junk = b"not a cuDNN plan" * 8
    body.update(
        data=base64.b64encode(junk).decode(), sha256=hashlib.sha256(junk).hexdigest(), bytes=len(junk)
    )
    victim.write_text(json.dumps(body))
    second = build(tmp_path)
    assert victim.name in second["stderr"] and "deserialize" in second["stderr"], second["stderr"][-2000:]
    assert second["plans"] == first["plans"] and second["checked_ok"] == first["checked_ok"]
    assert json.loads(victim.read_text())["sha256"] != body["sha256"]  # compiled again, kept again


def test_warm_kernels_builder_keeps_what_it_compiles_and_compiles_nothing_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    from labkit import experiments
    from labkit.gpu import kernel_warmup
    from labkit.store import plan_store

    plan_store.reset()
    try:
        spec = experiments.BASE.replace(**SPEC)
        built = kernel_warmup.build_compiled_plans([(spec, "none")])
        assert built >= 2 and len(compiled_files(tmp_path)) == built
        assert kernel_warmup.build_compiled_plans([(spec, "none")]) == 0
    finally:
        plan_store.reset()
