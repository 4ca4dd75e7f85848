"""Benchmark for the network workspace report: ``labkit.report`` of a preset, live on
this GPU, in a fresh Python process with an empty cache, then in another fresh process answered
from the cache the first one filled (what a learner sees after a kernel restart).

    python scripts/bench_report.py [--net resnet50] [--batch 32] [--dtype fp16] [--layout NHWC]
    python scripts/bench_report.py --net torchvision.models:mobilenet_v3_large --batch 16

``--net`` is a preset, or a torchvision model as ``"module:callable"`` (its report reads the model's
Conv2d calls from an input of ``batch`` x 3 x 224 x 224; torch and torchvision are imported before
the clock starts, as PyTorch's own warm-up imports them before its clock).

Between them, condition "empty cache, worker warmed": an empty-cache report in a fresh process
that first ran lesson 09's banner (``labkit.session.texts.banner("09")``: live, it starts and warms
the report's worker process, as it does while a learner reads the lesson) and waited for that
worker to be warm; the clock starts after, as PyTorch's starts after its imports and its CUDA
context.

Beside them, what a framework already pays for the same network: PyTorch's first forward pass
with ``torch.backends.cudnn.benchmark=True`` (it times up to ``cudnn.benchmark_limit`` algorithms
for every new layer shape, then runs), in a fresh process of its own (condition "PyTorch
warm-up"; ``report_seconds`` is that first forward pass, ``steady_seconds`` the next one).

With ``--repeats N`` the four conditions run N times in turn (each empty-cache run with a new
empty cache), and each condition's row is its median run, with the fastest and slowest beside it
(``report_seconds_min``, ``report_seconds_max``): on one GPU a single report varies by tens of
percent from run to run, and so does PyTorch's warm-up. With ``--warmup N``, N rounds of the
empty-cache report and PyTorch's warm-up run first and are not counted (``warmup_runs`` says how
many): on a machine just started, the first process also fills CuPy's own kernel cache and Python's
bytecode cache, which a learner's machine has after its first run (on the H200, the first
empty-cache report of ResNet-50 took 13.7 s, the next two 7.1 and 6.8 s).

Where the empty-cache report's time goes: ``layer_steps_seconds`` (each distinct convolution's
plans built, checked against float64 and timed; the first one's step also waits for the worker
process to start and warm, unless it was warmed before), ``strategy_steps_seconds`` (the pass under
each workspace strategy); the rest is the report's own work around the steps (reading the network,
its tables).

Prints a table (seconds per condition, the ratio to the empty-cache report, the ratio of each
report to PyTorch's warm-up, and the goals: <= 60 s empty, <= 5 s cached) and writes
data/bench/report_<gpu slug>.csv (rows of other nets and GPUs kept). ``report_seconds``: the
``labkit.report`` call alone; ``process_seconds``: the whole process (Python start, imports, CUDA
and cuDNN initialisation included). Each process runs with Python's bytecode cache on, as a
learner's Python runs (a host that sets ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
module from source in every worker process, inside the report's clock).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the condition of the report whose worker lesson 09's banner warmed first
WARMED = "empty cache, worker warmed"
GOALS = {"empty cache": 60.0, WARMED: 60.0, "cached": 5.0, "PyTorch warm-up": float("nan")}
CHILD = """
import json, sys, time
t0 = time.perf_counter()
import labkit
from labkit import env
from labkit.gpu.cudnn import graph_cache
a = json.loads(sys.argv[1])
if a.get("banner"):  # as lesson 09's first cell: its banner starts and warms the report's worker
    from labkit.gpu.host import isolated
    from labkit.session import texts
    texts.banner(a["banner"])
    isolated.worker().call("os:getpid", (), 120.0, "waiting for the warmed worker")  # after the warm step
if ":" in a["net"]:
    import torch, torchvision  # a model's report reads its layers with PyTorch
    kw = dict(input_shape=(a["batch"], 3, 224, 224))
else:
    kw = dict(batch=a["batch"])
t1 = time.perf_counter()
r = labkit.report(a["net"], dtype=a["dtype"], layout=a["layout"], **kw)
t2 = time.perf_counter()
e = env.environment()
f = r.frame
steps = dict(
    layer_steps_seconds=float(r.layers.drop_duplicates("spec_id").step_seconds.sum()),
    strategy_steps_seconds=float(f[f.table == "strategies"].step_seconds.sum()),
) if "step_seconds" in f and not f.attrs.get("loaded_from_disk") else {}  # saved: the first run's steps
print(json.dumps(dict(
    report_seconds=t2 - t1, layers=len(r.layers), complete=r.complete, **steps,
    loaded_from_disk=bool(r.frame.attrs.get("loaded_from_disk")),
    graph_builds=graph_cache.graphs.stats.misses,
    checked=bool(r.layers.checked.astype(bool).all()), gpu=e.gpu_name, cudnn=e.cudnn_backend,
    frontend=e.cudnn_frontend,
)))
"""


TORCH_CHILD = """
import json, sys, time
import torch, torchvision
a = json.loads(sys.argv[1])
dt = dict(fp32=torch.float32, tf32=torch.float32, fp16=torch.float16, bf16=torch.bfloat16)[a["dtype"]]
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = a["dtype"] == "tf32"
fmt = torch.channels_last if a["layout"] == "NHWC" else torch.contiguous_format
model = getattr(torchvision.models, a["net"].split(":")[-1])
m = model(weights=None).cuda().to(dt).to(memory_format=fmt).eval()
x = torch.randn(a["batch"], 3, 224, 224, device="cuda", dtype=dt).to(memory_format=fmt)
torch.cuda.synchronize()
with torch.no_grad():
    t1 = time.perf_counter()
    m(x)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    m(x)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
convs = sum(isinstance(c, torch.nn.Conv2d) for c in m.modules())
print(json.dumps(dict(report_seconds=t2 - t1, steady_seconds=t3 - t2, layers=convs,
                      gpu=torch.cuda.get_device_name(), torch=torch.__version__)))
"""


def run(condition: str, cache: str, args) -> dict:
    """One condition in a fresh process (the report's, or PyTorch's warm-up) with ``cache`` as
    labkit's cache folder: its row (seconds, the process's whole time, what the child printed)."""
    # Python's default, bytecode cached (.pyc): a host that turns it off would time module compiles
    kept = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = dict(
        kept,
        LABKIT_CACHE=cache,
        LABKIT_MODE="live",
        LABKIT_PREFETCH="0",
        PYTHONPATH=os.pathsep.join(
            [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    req = dict(net=args.net, batch=args.batch, dtype=args.dtype, layout=args.layout)
    banner = {"banner": "09"} if condition == WARMED else {}
    t0 = time.perf_counter()
    child = TORCH_CHILD if condition == "PyTorch warm-up" else CHILD
    try:
        proc = subprocess.run(
            [sys.executable, "-c", child, json.dumps(dict(req, **banner))],
            env=env,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired as exc:
        said = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        raise SystemExit(f"{condition}: cut after {args.timeout} s; its last words:\n{(said or '')[-3000:]}")
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{condition}: the report process failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return dict(
        condition=condition,
        **req,
        process_seconds=round(wall, 2),
        **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()},
        goal_seconds=GOALS[condition],
    )


def _median_run(rows: list) -> dict:
    """The run of median ``report_seconds`` (the lower middle one of an even count), with the fastest
    and slowest runs' seconds and the number of runs beside it."""
    seconds = sorted(r["report_seconds"] for r in rows)
    middle = seconds[(len(seconds) - 1) // 2]
    row = dict(next(r for r in rows if r["report_seconds"] == middle))
    row.update(report_seconds_min=seconds[0], report_seconds_max=seconds[-1], runs=len(rows))
    return row


def main(argv=None) -> int:
    import pandas as pd

    from labkit.env import gpu_slug

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", default="resnet50")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dtype", default="fp16")
    p.add_argument("--layout", default="NHWC")
    p.add_argument("--repeats", type=int, default=1, help="runs of the four conditions, in turn (default 1)")
    p.add_argument(
        "--warmup", type=int, default=0, help="uncounted rounds first, on a machine just started (default 0)"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds a condition may take (default 300)")
    p.add_argument(
        "--cache", help="an empty folder to use as the cache, kept afterwards (default: a temporary one)"
    )
    args = p.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: must be 1 or more")
    if args.warmup < 0:
        raise SystemExit(f"--warmup {args.warmup}: must be 0 or more")
    if args.cache and args.repeats != 1:
        raise SystemExit("--cache takes one run: leave out --repeats")
    for k in range(args.warmup):
        with tempfile.TemporaryDirectory(prefix="labkit-bench-report-") as tmp:
            for condition in ("empty cache", "PyTorch warm-up"):
                row = run(condition, tmp, args)
                took = row["report_seconds"]
                print(f"warm-up {k + 1}/{args.warmup} (not counted): {condition}: {took:.2f} s", flush=True)
    runs = {c: [] for c in GOALS}
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="labkit-bench-report-") as tmp:
            cache = args.cache or tmp
            if args.cache and Path(cache).exists() and any(Path(cache).iterdir()):
                raise SystemExit(f"--cache {cache} is not empty: the first condition needs an empty cache")
            for condition in GOALS:
                if condition == WARMED:  # an empty cache of its own; "cached" reads the first one's
                    with tempfile.TemporaryDirectory(prefix="labkit-bench-report-") as own:
                        row = run(condition, own, args)
                else:
                    row = run(condition, cache, args)
                runs[condition].append(row)
                print(f"run {k + 1}/{args.repeats}: {condition}: {row['report_seconds']:.2f} s", flush=True)
    rows = [_median_run(runs[c]) for c in GOALS]
    df = pd.DataFrame(rows)
    df["ratio_to_empty"] = df.report_seconds / df.report_seconds.iloc[0]
    df["report_to_torch_warmup"] = df.report_seconds / df.report_seconds.iloc[-1]
    df["warmup_runs"] = args.warmup
    df["meets_goal"] = (df.report_seconds <= df.goal_seconds).where(df.goal_seconds.notna())
    df["date"] = datetime.date.today().isoformat()
    df["labkit_commit"] = os.environ.get("LABKIT_GIT_COMMIT", "")
    print(
        df[
            [
                "condition",
                "net",
                "batch",
                "dtype",
                "layout",
                "report_seconds",
                "report_seconds_min",
                "report_seconds_max",
                "runs",
                "process_seconds",
                "ratio_to_empty",
                "report_to_torch_warmup",
                "goal_seconds",
                "meets_goal",
                "graph_builds",
                "loaded_from_disk",
                "layers",
                "checked",
            ]
        ].to_string(index=False)
    )
    path = ROOT / "data" / "bench" / f"report_{gpu_slug(df.gpu.iloc[0])}.csv"
    if path.is_file():
        old = pd.read_csv(path)
        same = (
            (old.net == args.net)
            & (old.batch == args.batch)
            & (old.dtype == args.dtype)
            & (old.layout == args.layout)
        )
        df = pd.concat([old[~same], df], ignore_index=True)
    df.to_csv(path, index=False)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
