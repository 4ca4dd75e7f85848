"""Benchmark for lesson 10's traces, three goals, each against a baseline measured in
the same run:

1. kernel count per plan: every plan of the base convolution, CUPTI (labkit.gpu.timing.trace) against
   torch.profiler (its own CUPTI client), in one process, one after the other;
2. tracing off the timing path: the heuristic plan's graph-replay time in a fresh process that
   traced first (every plan's kernels) against a fresh process that never traced (5 rounds each,
   median of medians); goal within 2%;
3. the strategy timeline's idle share against the same pass untraced: 1 - traced kernel time /
   untraced GPU wall time (events), per strategy, medians of `IDLE_PASSES` passes of 8 calls each
   way (one pass lasts about 0.4 ms on the H200 under a fixed arena, and its gaps vary with the
   host from pass to pass); goal within 10% (relative) for malloc_per_call and fixed_arena.

    python scripts/bench_under_the_hood.py [--out data/bench/under_the_hood_<gpu>.csv]

Prints a table and writes the CSV (check, subject, value, baseline, ratio, goal, met, gpu, date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: passes per strategy, untraced and traced, for the idle shares (medians)
IDLE_PASSES = 21

TIMING = """
import json, statistics, sys
from labkit import experiments
from labkit.gpu.cudnn import graph_cache, operands
from labkit.gpu.timing import autotune, measure
spec = experiments.BASE
if sys.argv[1] == "traced":
    experiments.kernels(spec=spec)   # trace every plan first
cg = graph_cache.get_graph(spec)
ops = operands.Operands(spec)
meds = [autotune.time_plan(cg, cg.default_plan.index, ops).median_us for _ in range(5)]
print(json.dumps(dict(median_us=statistics.median(meds), all=meds)))
"""


def counts():
    import torch
    from torch.profiler import ProfilerActivity, profile

    from labkit import experiments
    from labkit.gpu.buffers import memory
    from labkit.gpu.cudnn import graph_cache, operands
    from labkit.gpu.timing import measure, trace

    spec = experiments.BASE
    cg = graph_cache.get_graph(spec)
    ops, stream = operands.Operands(spec), measure.timing_stream()
    ours, theirs = {}, {}
    for p in cg.runnable:
        ws = memory.alloc(p.workspace_bytes, "ws")
        b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
        b.run()
        stream.synchronize()
        with trace.Tracer(p.name) as t:
            for _ in range(3):
                b.run()
            stream.synchronize()
        ours[p.name] = len(trace.device_rows(t.frame())) / 3
    torch.cuda.init()
    for p in cg.runnable:
        ws = memory.alloc(p.workspace_bytes, "ws")
        b = cg.bind(ops.arrays, int(ws.data.ptr), p.index, stream)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                b.run()
            stream.synchronize()
        theirs[p.name] = len([e for e in prof.events() if getattr(e.device_type, "name", "") == "CUDA"]) / 3
    return [
        dict(
            check="kernels per call, CUPTI vs torch.profiler",
            subject=n,
            value=ours[n],
            baseline=theirs[n],
            ratio=ours[n] / theirs[n] if theirs[n] else float("nan"),
            goal="equal",
            met=ours[n] == theirs[n],
        )
        for n in ours
    ]


def overhead():
    got = {}
    for kind in ("untraced", "traced"):
        r = subprocess.run(
            [sys.executable, "-c", TIMING, kind], capture_output=True, text=True, cwd=ROOT, timeout=300
        )
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if not line:
            raise SystemExit(f"{kind} timing failed:\n{r.stderr[-3000:]}")
        got[kind] = json.loads(line[-1])["median_us"]
    ratio = got["traced"] / got["untraced"]
    return [
        dict(
            check="untimed-path: heuristic plan's replay time after tracing vs a process that never traced",
            subject="base conv, heuristic plan",
            value=got["traced"],
            baseline=got["untraced"],
            ratio=ratio,
            goal="within 2%",
            met=abs(ratio - 1) <= 0.02,
        )
    ]


def idle():
    from labkit.gpu.workspaces import workloads

    rows = []
    for name, opts in workloads.BENCH_STRATEGIES:
        row, _ = workloads.traced_pass(name, opts, "one_conv", 8, passes=IDLE_PASSES)
        if row["status"] != "ok":
            continue
        expected = 1 - row["busy_us"] / row["gpu_us"]
        ratio = row["idle_share"] / expected if expected > 0 else float("nan")
        rows.append(
            dict(
                check="idle share: trace vs untraced events",
                subject=row["strategy"],
                value=row["idle_share"],
                baseline=expected,
                ratio=ratio,
                goal="within 10%" if name in ("malloc_per_call", "fixed_arena") else "shown",
                met=abs(ratio - 1) <= 0.10 if name in ("malloc_per_call", "fixed_arena") else None,
            )
        )
    return rows


def main() -> int:
    import pandas as pd

    from labkit import env

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    e = env.environment()
    out = Path(args.out or ROOT / "data" / "bench" / f"under_the_hood_{env.gpu_slug(e.gpu_name)}.csv")
    rows = overhead() + idle() + counts()
    df = pd.DataFrame(rows)
    df["gpu"], df["cudnn"], df["date"] = e.gpu_name, e.cudnn_backend, datetime.date.today().isoformat()
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(df[["check", "subject", "value", "baseline", "ratio", "goal", "met"]].to_string(index=False))
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
