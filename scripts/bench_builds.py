"""Parallel plan builds (labkit.gpu.cudnn.builds) against one process, on the panels' own experiments.

    python scripts/bench_builds.py [--workers 0,8] [--batches 40,48] [--out data/bench/builds_<gpu>.csv]

Each worker setting runs in a fresh Python process (nothing compiled yet, as on a learner's first
visit) with ``LABKIT_BUILD_WORKERS`` set: 0 is the baseline (every plan built in the notebook's
process). The process starts its workers, waits until they are up (timed:
``start_s``), then runs, for each batch size (a shape no process has built), lesson 01's
``workspace_sizes`` (26 graphs, every plan), lesson 05's ``caps`` and lesson 04's ``fusion``
experiments with an empty cache folder of its own, timing the first partial table (``first_s``, what a
panel draws first) and the whole (``complete_s``). Prints the table with each row's ratio to the
baseline of the same experiment and batch; writes it to --out. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXPERIMENTS = ("workspace_sizes", "caps", "fusion")


def child(batches) -> None:
    """In the fresh process: one JSON line per (experiment, batch)."""
    t0 = time.perf_counter()
    from labkit import experiments
    from labkit.gpu.cudnn import build_pool, graph_cache
    from labkit.signals import progress

    pool = build_pool.start_workers()
    if pool is not None:
        while len(pool.pids()) < pool.size and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
    start_s = time.perf_counter() - t0
    for batch in batches:
        for name in EXPERIMENTS:
            spec = (
                experiments.BASE.replace(N=batch)
                if name != "fusion"
                else experiments.BASE.replace(N=batch, layout="NHWC")
            )
            first = []
            g0, before = (
                graph_cache.graphs.stats.misses,
                (pool.stats.remote, pool.stats.local) if pool else (0, 0),
            )
            t = time.perf_counter()
            with progress.listening(lambda *a: first.append(time.perf_counter() - t) if not first else None):
                df = getattr(experiments, name)(spec=spec)
            done = time.perf_counter() - t
            after = (pool.stats.remote, pool.stats.local) if pool else (0, 0)
            print(
                json.dumps(
                    dict(
                        experiment=name,
                        batch=batch,
                        workers=pool.size if pool else 0,
                        start_s=round(start_s, 2),
                        first_s=round(first[0] if first else done, 3),
                        complete_s=round(done, 3),
                        graphs_built=graph_cache.graphs.stats.misses - g0,
                        plans_by_workers=after[0] - before[0],
                        compiles_here=after[1] - before[1],
                        rows=len(df),
                        not_ok=int((df["status"] != "ok").sum()) if "status" in df.columns else 0,
                    )
                ),
                flush=True,
            )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="0,8")
    ap.add_argument("--batches", default="40,48")
    ap.add_argument("--out")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.child:
        child(batches)
        return 0
    import pandas as pd

    from labkit import env

    rows = []
    for w in args.workers.split(","):
        import tempfile

        e = dict(
            os.environ,
            LABKIT_BUILD_WORKERS=w,
            LABKIT_CACHE=tempfile.mkdtemp(prefix="bench-builds-"),
            LABKIT_MODE="live",
            PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
        )
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--batches", args.batches],
            env=e,
            capture_output=True,
            text=True,
            timeout=540,
        )
        got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode or not got:
            print(out.stdout[-2000:], out.stderr[-3000:], file=sys.stderr)
        rows += got
    df = pd.DataFrame(rows)
    base = df[df.workers == 0].set_index(["experiment", "batch"])["complete_s"]
    df["speedup_vs_one_process"] = [
        round(base.get((r.experiment, r.batch), float("nan")) / r.complete_s, 2) for r in df.itertuples()
    ]
    e = env.environment()
    df["gpu"], df["cores"], df["cudnn"], df["date"] = (
        e.gpu_name,
        os.cpu_count(),
        e.cudnn_backend,
        time.strftime("%Y-%m-%d"),
    )
    pd.set_option("display.width", 220)
    print(df.drop(columns=["gpu", "cudnn", "date"]).to_string(index=False))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
