"""What checking every plan against float64 costs, beside the autotune it comes before.

For the lessons' base convolution (N=32, C=K=64, 56x56, 3x3) in every dtype and layout, and for
every distinct convolution of ResNet-50's forward pass (fp16 NHWC, batch 32): the plans built,
the plans found wrong, the float64 reference alone, the whole check (the reference and one run
of every plan: the first run of each plan in the process), the autotune after it, and the same
check again on a new graph of the same convolution (every kernel loaded: what the check itself
costs). Each graph is built fresh (not from labkit's cache).

    python scripts/probe_plan_checks.py [--csv out.csv] [--base-only | --resnet-only] [--seconds S]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time

import cupy

from labkit import ConvSpec, LabkitError, networks
from labkit.experiments import BASE
from labkit.gpu import autotune, engine, plan_checks, verify


def measure(spec: ConvSpec, group: str) -> dict:
    row = dict(group=group, spec=spec.label)
    try:
        cg = engine.ConvGraph(spec)
        ops = engine.Operands(spec)
        for _ in range(2):  # the second: CuPy's kernels are compiled by then
            cupy.cuda.get_current_stream().synchronize()
            t0 = time.perf_counter()
            ref = verify.expected(spec, ops)
            cupy.cuda.get_current_stream().synchronize()
            ref_s = time.perf_counter() - t0
            del ref
        cg.check(ops=ops)
        tune = autotune.autotune(cg, ops, save=False)
        plan_checks.BOOK.clear()  # the same check again on a new graph, every kernel loaded by now
        again = engine.ConvGraph(spec)
        again.check(ops=ops)
    except LabkitError as exc:
        return dict(row, status=f"{type(exc).__name__}: {exc}"[:160])
    wrong = [f"{p.index}:{p.name}:{v.rel_error:.3g}" for p, v in cg.wrong]
    return dict(
        row,
        plans=len(cg.built),
        wrong=len(wrong),
        wrong_plans=" ".join(wrong),
        fell_through=cg.fell_through,
        reference_s=round(ref_s, 4),
        check_s=round(cg.check_seconds, 4),
        check_again_s=round(again.check_seconds, 4),
        autotune_s=round(tune.seconds, 4),
        check_share=round(cg.check_seconds / (cg.check_seconds + tune.seconds), 3),
        status="ok",
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    ap.add_argument("--base-only", action="store_true")
    ap.add_argument("--resnet-only", action="store_true")
    ap.add_argument(
        "--seconds", type=float, default=600.0, help="start no convolution after this many seconds"
    )
    args = ap.parse_args()
    specs = []
    if not args.resnet_only:
        dtypes = ("fp16", "bf16", "fp32", "tf32", "fp8_e4m3")
        specs += [("base", BASE.replace(dtype=d, layout=lay)) for d in dtypes for lay in ("NHWC", "NCHW")]
    if not args.base_only:
        net = networks.layers_of("resnet50", batch=32, dtype="fp16", layout="NHWC")
        specs += [("resnet50", g.spec) for g in networks.unique(net.layers)]
    rows, t0 = [], time.perf_counter()
    for group, spec in specs:
        if time.perf_counter() - t0 > args.seconds:
            print(f"stopped after {args.seconds:g} s: {len(specs) - len(rows)} convolutions not measured")
            break
        rows.append(measure(spec, group))
        r = rows[-1]
        ms = {
            k: r.get(k, float("nan")) * 1e3 for k in ("reference_s", "check_s", "check_again_s", "autotune_s")
        }
        print(
            f"{r['spec']:55s} plans {r.get('plans', '-'):>3} wrong {r.get('wrong', '-'):>2} "
            f"ref {ms['reference_s']:5.1f} ms  check {ms['check_s']:6.1f} ms "
            f"(again {ms['check_again_s']:6.1f})  "
            f"autotune {ms['autotune_s']:8.1f} ms  "
            f"{r.get('wrong_plans', '')} {r['status'] if r['status'] != 'ok' else ''}",
            flush=True,
        )
    ok = [r for r in rows if r["status"] == "ok"]
    for name in ("base", "resnet50"):
        part = [r for r in ok if r["group"] == name]
        if part:
            check, tune = sum(r["check_s"] for r in part), sum(r["autotune_s"] for r in part)
            again = sum(r["check_again_s"] for r in part)
            print(
                f"{name}: {len(part)} convolutions, check {check:.2f} s "
                f"(again, kernels loaded: {again:.2f} s), "
                f"autotune {tune:.2f} s; the first check = {check / (check + tune):.1%} of both"
            )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, sorted({k for r in rows for k in r}))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
