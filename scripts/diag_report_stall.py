"""Diagnose a network report that stops making progress (issue 25: MobileNetV3 on an H100).

    python scripts/diag_report_stall.py [--model mobilenet_v3_large] [--batch 16] [--variants asis,...]
                                        [--stall 30] [--limit 120] [--out DIR]

Each variant runs ``labkit.report(torchvision.models.<model>(), input_shape=(B, 3, 224, 224))``
in a child process with an empty cache, logging every plan it times (spec, plan, seconds) to
``DIR/<variant>.plans.log``. When the log has not grown for ``--stall`` seconds the parent takes,
before killing the child: the Python stacks of every thread (faulthandler on SIGUSR1), the native
stacks (cuda-gdb attached in batch mode), each thread's state and kernel wait channel, and the
GPU's utilisation. Variants (changes made only inside the child, to test a cause):

- ``asis``: labkit as it is.
- ``eager_modules``: CUDA_MODULE_LOADING=EAGER (no kernel is loaded for the first time inside a capture).
- ``warm_before_capture``: every plan runs once eagerly before its CUDA graph is captured.
- ``one_stream``: every autotune uses one stream (and so one cuDNN handle) for the whole report.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import faulthandler, json, os, signal, sys, time
out, variant, model_name, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stacks = open(f"{out}/{variant}.pystacks.txt", "w")
faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
log = open(f"{out}/{variant}.plans.log", "w", buffering=1)
t00 = time.perf_counter()
def say(*a):
    log.write(f"{time.perf_counter() - t00:8.2f} " + " ".join(str(x) for x in a) + "\n")
import cupy, torchvision
import labkit
from labkit.gpu import autotune, measure, engine
orig_time_plan = autotune.time_plan
def time_plan(cg, plan_index, ops, stream=None, calls=10, stop_above_us=None):
    p = cg.plan(plan_index)
    say("start", cg.spec.label, f"plan {plan_index} {p.name} ws={p.workspace_bytes} stream={0 if stream is None else stream.ptr:#x}")
    t = time.perf_counter()
    try:
        r = orig_time_plan(cg, plan_index, ops, stream, calls, stop_above_us)
        say("done", f"{time.perf_counter() - t:.3f}s", f"{r.median_us:.1f}us x{r.samples}")
        return r
    except BaseException as e:
        say("fail", f"{time.perf_counter() - t:.3f}s", type(e).__name__, str(e)[:200])
        raise
autotune.time_plan = time_plan
if variant == "warm_before_capture":
    orig_capture = measure.capture
    def capture(fn, stream, calls):
        with stream:
            fn()
        stream.synchronize()
        return orig_capture(fn, stream, calls)
    measure.capture = capture
if variant == "one_stream":
    import types
    shared = cupy.cuda.Stream(non_blocking=True)
    proxy = types.SimpleNamespace(**{k: getattr(cupy.cuda, k) for k in dir(cupy.cuda) if not k.startswith("__")})
    proxy.Stream = lambda non_blocking=False: shared
    autotune.cupy = types.SimpleNamespace(cuda=proxy)
from labkit.signals import progress
def listen(make_frame, done, total, unit):
    say("step", done, "of", total, unit, f"handles={len(engine._handles)}",
        f"pool_used={cupy.get_default_memory_pool().used_bytes()}", f"free={cupy.cuda.runtime.memGetInfo()[0]}")
model = getattr(torchvision.models, model_name)()
say("model built", model_name)
with progress.listening(listen):
    rep = labkit.report(model, input_shape=(batch, 3, 224, 224), batch=batch)
say("finished", "complete" if rep.complete else "incomplete", len(rep.layers), "layers")
say("statuses", json.dumps(rep.layers.status.value_counts().to_dict()))
"""


def sh(cmd, timeout=60) -> str:
    try:
        p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        return p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return f"(timed out after {timeout}s) " + (e.stdout or b"").decode(errors="replace")[-4000:]


def diagnose(pid: int, out: Path, variant: str) -> None:
    parts = []
    parts.append(
        "== nvidia-smi\n"
        + sh("nvidia-smi --query-gpu=utilization.gpu,memory.used,clocks.sm,power.draw --format=csv")
    )
    parts.append(
        "== thread states (name state wchan)\n"
        + sh(
            f"for t in /proc/{pid}/task/*; do echo \"$(cat $t/comm) $(awk '{{print $3}}' $t/stat) $(cat $t/wchan 2>/dev/null)\"; done"
        )
    )
    os.kill(pid, signal.SIGUSR1)
    time.sleep(1)
    parts.append(
        "== cuda-gdb thread apply all bt\n"
        + sh(
            f"cuda-gdb -q -batch -p {pid} -ex 'set pagination off' -ex 'info threads' -ex 'thread apply all bt 25' 2>&1 | "
            "grep -v '^\\[New LWP' | head -400",
            timeout=120,
        )
    )
    parts.append(
        "== thread states again\n"
        + sh(
            f"for t in /proc/{pid}/task/*; do echo \"$(cat $t/comm) $(awk '{{print $3, $14, $15}}' $t/stat)\"; done"
        )
    )
    (out / f"{variant}.diagnosis.txt").write_text("\n".join(parts))


def run_variant(variant: str, args, out: Path) -> dict:
    env = dict(
        os.environ,
        LABKIT_CACHE=str(out / f"cache-{variant}"),
        LABKIT_MODE="live",
        LABKIT_PREFETCH="0",
        PYTHONUNBUFFERED="1",
    )
    if variant == "eager_modules":
        env["CUDA_MODULE_LOADING"] = "EAGER"
    log = out / f"{variant}.plans.log"
    t0 = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out), variant, args.model, str(args.batch)],
        env=env,
        stdout=open(out / f"{variant}.stdout.txt", "w"),
        stderr=subprocess.STDOUT,
    )
    last_size, last_change, outcome = -1, time.time(), "?"
    while True:
        time.sleep(1)
        size = log.stat().st_size if log.exists() else 0
        if size != last_size:
            last_size, last_change = size, time.time()
        if child.poll() is not None:
            outcome = f"exited {child.returncode}"
            break
        if time.time() - last_change > args.stall:
            outcome = f"stalled: no plan logged for {args.stall}s"
            diagnose(child.pid, out, variant)
            break
        if time.time() - t0 > args.limit:
            outcome = f"still going at the {args.limit}s limit"
            break
    if child.poll() is None:
        child.kill()
        child.wait()
    lines = log.read_text().splitlines() if log.exists() else []
    steps = [ln for ln in lines if " step " in ln]
    slow = sorted((ln for ln in lines if " done " in ln), key=lambda ln: -float(ln.split()[2].rstrip("s")))[
        :5
    ]
    return dict(
        variant=variant,
        outcome=outcome,
        seconds=round(time.time() - t0, 1),
        last_step=steps[-1].strip() if steps else "",
        last_line=lines[-1].strip() if lines else "",
        slowest_plans=slow,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mobilenet_v3_large")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--variants", default="asis,warm_before_capture,eager_modules,one_stream")
    p.add_argument("--stall", type=float, default=30)
    p.add_argument("--limit", type=float, default=120)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/diag"))
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for v in args.variants.split(","):
        r = run_variant(v, args, out)
        results.append(r)
        print(json.dumps(r, indent=1), flush=True)
    (out / "summary.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
