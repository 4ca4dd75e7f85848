"""Saved plans, live (`labkit.store.plan_store` with `labkit.gpu.cudnn.saved_plans.save_plan`/`load_plan` and
`labkit.gpu.timing.autotune.tuned_graph`): a second process loads the heuristic's pick and the autotune
winner from disk with zero graph builds and gets results that pass the float64 check; a plan
saved under another cuDNN version, or a corrupted one, is set aside (named) and built again;
build_cost measures the cold build against the load."""

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

from gpu_helpers import live_process_env  # noqa: E402  (tests/ is on sys.path under pytest)

from labkit import experiments  # noqa: E402
from labkit.gpu.audits import verify  # noqa: E402
from labkit.gpu.cudnn import conv_graph, saved_plans  # noqa: E402
from labkit.gpu.timing import autotune  # noqa: E402
from labkit.store import plan_store  # noqa: E402

SMALL = dict(N=4, C=32, H=20, W=20, K=48)

USE = textwrap.dedent("""
    import json, sys
    from labkit import experiments
    from labkit.gpu.audits import verify
    from labkit.gpu.cudnn import graph_cache, saved_plans
    from labkit.gpu.timing import autotune
    spec = experiments.BASE.replace(**json.loads(sys.argv[1]))
    heur = graph_cache.get_graph(spec, all_plans=False)
    tuned = autotune.tuned_graph(spec, "bias_relu")
    checks = [
        verify.check_plan(spec, graph=heur),
        verify.check_plan(spec, "bias_relu", plan_index=tuned.plan_index, graph=tuned.graph),
    ]
    print(json.dumps({
        "builds": graph_cache.graphs.stats.misses, "loads": graph_cache.graphs.stats.loads,
        "heuristic_plan": heur.default_plan.name,
        "heuristic_loaded": isinstance(heur, saved_plans.LoadedGraph),
        "tuned_plan": tuned.plan.name, "tuned_from_disk": tuned.from_disk, "gpu_us": tuned.gpu_us,
        "plans_timed": tuned.plans_timed, "seconds": tuned.seconds,
        "checks_ok": [bool(c.ok) for c in checks], "rel_errors": [c.rel_error for c in checks],
    }))
""")


def use(cache: Path, **changes):
    env = live_process_env(cache)
    proc = subprocess.run(
        [sys.executable, "-c", USE, json.dumps({**SMALL, **changes})],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ans = json.loads(proc.stdout.strip().splitlines()[-1])
    ans["stderr"] = proc.stderr
    return ans


def plan_files(cache: Path):
    """The chosen plans saved (tests/test_compiled_plans_gpu.py has the compiled ones kept beside them)."""
    return sorted(f for f in (cache / "plans").rglob("*.json") if not f.name.endswith(".compiled.json"))


def test_a_second_process_loads_both_plans_with_zero_builds_and_they_pass_the_check(tmp_path):
    first = use(tmp_path)
    assert first["builds"] >= 2 and not first["heuristic_loaded"] and not first["tuned_from_disk"]
    assert len(plan_files(tmp_path)) == 2  # the heuristic's pick and the fused graph's autotune winner
    second = use(tmp_path)
    print({k: v for k, v in second.items() if k != "stderr"})
    assert (
        second["builds"] == 0
        and second["loads"] == 1
        and second["heuristic_loaded"]
        and second["tuned_from_disk"]
    )
    assert second["heuristic_plan"] == first["heuristic_plan"] and second["tuned_plan"] == first["tuned_plan"]
    assert second["plans_timed"] == first["plans_timed"] > 0
    assert all(first["checks_ok"]) and all(second["checks_ok"]), (first["rel_errors"], second["rel_errors"])
    assert second["seconds"] < first["seconds"]
    assert math.isclose(second["gpu_us"], first["gpu_us"], rel_tol=0.5)  # the same plan, timed again


def test_a_plan_saved_under_another_cudnn_is_set_aside_never_loaded(tmp_path):
    use(tmp_path)
    for f in plan_files(tmp_path):
        body = json.loads(f.read_text())
        body["cudnn_backend"] = "9.0.0"
        f.write_text(json.dumps(body))
    again = use(tmp_path)
    assert again["builds"] >= 2 and again["loads"] == 0 and not again["tuned_from_disk"]
    assert "a plan is never loaded into another cuDNN" in again["stderr"] and "set aside" in again["stderr"]
    assert len(list((tmp_path / "set-aside").iterdir())) == 2
    assert all(again["checks_ok"])


def test_a_corrupted_plan_is_named_set_aside_and_built_again(tmp_path):
    use(tmp_path)
    victim = plan_files(tmp_path)[0]
    victim.write_bytes(victim.read_bytes()[:200])
    again = use(tmp_path)
    assert str(victim) in again["stderr"] and again["builds"] >= 1
    assert all(again["checks_ok"])
    assert len(plan_files(tmp_path)) == 2  # saved again


def test_plan_bytes_cudnn_rejects_are_set_aside_with_a_warning(tmp_path):
    """Well-formed file, valid checksum, bytes cuDNN cannot deserialize: a warning, no crash."""
    spec = experiments.BASE.replace(**SMALL, dtype="fp32", layout="NCHW")
    ident = {**plan_store.current().identity}
    store = plan_store.PlanStore(tmp_path, ident)
    store.put(conv_graph.graph_key(spec, "none", None, False), "heuristic", b"not a cudnn plan", "eng0", 0)
    with pytest.warns(UserWarning, match="would not deserialize"):
        assert saved_plans.load_plan(spec, store=store) is None
    assert any((tmp_path / "set-aside").iterdir())


def test_build_cost_times_the_cold_build_against_the_load_from_disk():
    df = experiments.build_cost(experiments.BASE.replace(**SMALL))
    s = df.set_index("stage")["seconds"]
    print(df[["stage", "seconds"]].to_string(index=False))
    assert list(df["stage"]) == list(experiments.plans_autotune.BUILD_STAGES)
    load = s["load the winner from disk"]
    assert 0 < load < s["build every plan"] + s["autotune (time every plan)"]
    assert df["serialized_bytes"].iloc[0] > 0


def test_tuned_graph_reuses_the_saved_winner_in_process():
    spec = experiments.BASE.replace(**SMALL, dtype="fp32", layout="NCHW")
    first = autotune.tuned_graph(spec)
    again = autotune.tuned_graph(spec)
    assert again.from_disk and again.plan.name == first.plan.name and not first.from_disk
    assert verify.check_plan(spec, graph=again.graph, plan_index=0).ok
