"""Do cuDNN graph builds go faster in several processes? (issue 27, measured before building on it)

    python scripts/probe_parallel_builds.py [--workers 1,2,4,8] [--repeat-first]

The work is lesson 01's workspace_sizes panel for one new shape: 30 graphs (5 dtypes x 2 layouts
x 3 directions) with every plan built, answering each plan's workspace size. For each worker
count P, P fresh worker processes (`labkit.gpu.isolated.Worker`, spawned, each with its own CUDA
context) are started (start-up timed on its own), then the 30 builds are spread over them, each
worker taking the next graph when it is free, and the wall time of all 30 is taken. Every round
uses another batch size, so no process has built that graph before; the first round (P=1) runs
again at the end (--repeat-first) as a control for anything cached on disk between rounds. Build
seconds summed inside the workers are printed beside the wall time: their ratio is the
parallelism reached. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")
LAYOUTS = ("NCHW", "NHWC")
DIRECTIONS = ("fprop", "dgrad", "wgrad")


def build(spec_kwargs: dict) -> dict:
    """One graph with every plan built, in the worker: seconds and the plans' workspaces."""
    from labkit import ConvSpec
    from labkit.errors import LabkitError
    from labkit.gpu import engine

    spec = ConvSpec(**spec_kwargs)
    t0 = time.perf_counter()
    try:
        cg = engine.ConvGraph(spec)
        return dict(seconds=time.perf_counter() - t0, plans=len(cg.runnable), ok=True)
    except LabkitError as exc:
        return dict(seconds=time.perf_counter() - t0, plans=0, ok=False, why=str(exc)[:80])


def specs_for(batch: int) -> list:
    out = []
    for dtype, layout, direction in itertools.product(DTYPES, LAYOUTS, DIRECTIONS):
        if dtype == "fp8_e4m3" and direction != "fprop":
            continue  # the panel's fp8 row is fprop only
        out.append(
            dict(
                N=batch,
                C=64,
                H=56,
                W=56,
                K=64,
                R=3,
                S=3,
                padding=1,
                dtype=dtype,
                layout=layout,
                direction=direction,
            )
        )
    return out


def round_(workers: int, batch: int) -> dict:
    from labkit.gpu import isolated

    pool = [isolated.Worker() for _ in range(workers)]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        list(
            ex.map(lambda w: w.call("probe_parallel_builds:build", (specs_for(1)[0],)), pool)
        )  # start + warm each
    started = time.perf_counter() - t0
    specs = specs_for(batch)
    free = list(pool)
    t0 = time.perf_counter()
    results = []

    def one(spec):
        w = free.pop()
        try:
            return w.call("probe_parallel_builds:build", (spec,), budget_s=300)
        finally:
            free.append(w)

    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(one, specs))
    wall = time.perf_counter() - t0
    for w in pool:
        w.stop()
    inside = sum(r["seconds"] for r in results)
    return dict(
        workers=workers,
        batch=batch,
        graphs=len(specs),
        start_s=round(started, 2),
        wall_s=round(wall, 2),
        build_s_summed=round(inside, 2),
        parallelism=round(inside / wall, 2),
        plans=sum(r["plans"] for r in results),
        failed=sum(not r["ok"] for r in results),
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4,8")
    p.add_argument("--repeat-first", action="store_true")
    args = p.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    if args.repeat_first:
        counts.append(counts[0])
    rows = []
    for i, n in enumerate(counts):
        rows.append(round_(n, batch=20 + i))
        print(rows[-1], flush=True)
    base = rows[0]["wall_s"]
    print(
        f"{'workers':>7} {'batch':>5} {'start s':>8} {'wall s':>7} {'summed s':>9} {'parallel':>8} {'vs P=1':>7}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['batch']:>5} {r['start_s']:>8} {r['wall_s']:>7} {r['build_s_summed']:>9} "
            f"{r['parallelism']:>8} {base / r['wall_s']:>6.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
