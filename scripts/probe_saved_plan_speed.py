"""Does a plan loaded from disk run as fast as the same plan in the graph it was built in?
Times the autotune winner of fused and plain graphs both ways (CUDA-graph replay, GPU us per call)."""

import tempfile

from labkit import experiments
from labkit.gpu import autotune, engine
from labkit.store import machine, plan_store

store = plan_store.PlanStore(tempfile.mkdtemp(), machine.this_identity())
for epi in ("bias_relu", "none"):
    spec = experiments.BASE.replace(N=8, H=28, W=28)
    full = engine.ConvGraph(spec, epi)
    ops = engine.Operands(spec, epi)
    tune = autotune.autotune(full, ops, save=False)
    engine.save_plan(full, tune.best_index, "autotuned", store=store)
    loaded = engine.load_plan(spec, epi, None, "autotuned", store=store)
    for rnd in range(3):
        a = autotune.time_plan(full, tune.best_index, ops).median_us
        b = autotune.time_plan(loaded, 0, ops).median_us
        h = autotune.time_plan(full, full.default_plan.index, ops).median_us
        print(
            f"{epi:10s} round {rnd}: winner {full.plan(tune.best_index).name} in its graph {a:7.2f} us, "
            f"loaded {loaded.plans[0].name} {b:7.2f} us, heuristic {h:7.2f} us (autotune said {tune.gpu_us(tune.best_index):.2f})"
        )
