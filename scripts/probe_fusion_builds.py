"""Where does a fusion panel change's time go at C=K=128 (issue 27: 17 s on the H200's first visit)?

    python scripts/probe_fusion_builds.py [--C 128]

In a fresh process with build workers up: the fusion experiment at C=K, then every graph it
built with its build seconds, plans, and how many were built by workers. Prints; writes nothing.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--C", type=int, default=128)
    args = ap.parse_args()
    from labkit import experiments
    from labkit.gpu import builds, engine

    pool = builds.start_workers()
    t0 = time.perf_counter()
    while pool is not None and len(pool.pids()) < pool.size and time.perf_counter() - t0 < 60:
        time.sleep(0.05)
    spec = experiments.BASE.replace(C=args.C, K=args.C)
    t = time.perf_counter()
    df = experiments.fusion(spec=spec)
    print(f"fusion at C=K={args.C}: {time.perf_counter() - t:.2f} s")
    print(df[["epilogue", "path", "gpu_us", "status"]].to_string(index=False))
    for key, cg in engine.graphs._entries.items():
        print(f"  {cg.spec.label} {cg.epilogue:14s} all_plans={cg.all_plans!s:5s} build {cg.build_seconds:6.2f} s, "
              f"{len(cg.runnable)} runnable, {len(cg.remote)} from workers, cut {cg.build_cut}")
    print(pool.stats if pool else "no pool")
