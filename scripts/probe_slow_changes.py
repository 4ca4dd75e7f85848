"""Where the slowest first-visit control changes spend their time (issue 27): the fusion panel at
C=K=128 (14-17 s on the H200) and a network-report change (18-24 s). Prints; writes nothing.

    python scripts/probe_slow_changes.py [fusion] [report]

``fusion``: the experiment at the base shape (the panel's build), then at C=K=128, under
cProfile (the notebook's thread; build workers up), and every autotune's table (seconds per plan).
``report``: resnet50 batch 32 fp16 NHWC (the panel's build), then bf16 (a change): seconds per
step (layer or strategy), plans timed, and each layer's slowest plans to time.
"""

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def workers_up():
    from labkit.gpu import build_pool

    pool = build_pool.start_workers()
    t0 = time.perf_counter()
    while pool is not None and len(pool.pids()) < pool.size and time.perf_counter() - t0 < 60:
        time.sleep(0.05)
    return pool


def fusion():
    from labkit import experiments
    from labkit.gpu import autotune

    real = autotune.autotune

    def loud(cg, *a, **k):
        r = real(cg, *a, **k)
        t = r.table
        print(f"  autotune {cg.spec.label} {cg.epilogue}: {r.seconds:.2f} s, {len(t)} plans")
        cols = [
            c
            for c in ("plan_name", "gpu_us", "eager_us", "capture_s", "samples", "seconds", "status")
            if c in t
        ]
        print(t.sort_values("seconds", ascending=False)[cols].head(8).to_string(index=False))
        return r

    autotune.autotune = loud
    pool = workers_up()
    t = time.perf_counter()
    experiments.fusion(spec=experiments.BASE)
    print(f"fusion base (the panel's build): {time.perf_counter() - t:.2f} s")
    spec = experiments.BASE.replace(C=128, K=128)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    df = experiments.fusion(spec=spec)
    prof.disable()
    print(f"fusion C=K=128: {time.perf_counter() - t:.2f} s; build pool {pool.stats if pool else None}")
    print(df[["epilogue", "path", "gpu_us", "status"]].to_string(index=False))
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(35)
    print(s.getvalue()[-9000:])


def report():
    from labkit import experiments
    from labkit.experiments.your_network import table_of

    workers_up()
    for dtype in ("fp16", "bf16"):
        t = time.perf_counter()
        df = experiments.network_report(net="resnet50", batch=32, dtype=dtype, layout="NHWC")
        print(f"report resnet50 b32 {dtype} NHWC: {time.perf_counter() - t:.2f} s")
        layers, plans, strategies = table_of(df, "layers"), table_of(df, "plans"), table_of(df, "strategies")
        per = layers.drop_duplicates("spec_id") if "spec_id" in layers else layers
        cols = [c for c in ("spec", "step_seconds", "plans_timed", "plans_cut", "fastest_gpu_us") if c in per]
        print(per[cols].to_string(index=False))
        print(
            f"  layer steps {per.step_seconds.sum():.2f} s; strategy steps {strategies.step_seconds.sum():.2f} s"
        )
        print(strategies[["strategy", "step_seconds", "status"]].to_string(index=False))
        if "tune_seconds" in plans:
            print(f"  plan timings {plans.tune_seconds.sum():.2f} s over {len(plans)} plans; by status word:")
            print(
                plans.groupby(plans.status.str.split().str[0])
                .tune_seconds.agg(["count", "sum", "max"])
                .to_string()
            )
            print(
                plans.sort_values("tune_seconds", ascending=False)[
                    ["spec", "plan_name", "gpu_us", "tune_seconds", "status"]
                ]
                .head(12)
                .to_string(index=False)
            )


if __name__ == "__main__":
    for what in sys.argv[1:] or ["fusion", "report"]:
        print(f"== {what}", flush=True)
        {"fusion": fusion, "report": report}[what]()
