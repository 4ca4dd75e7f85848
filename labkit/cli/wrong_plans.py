"""``python -m labkit wrong-plans``: re-check the plans cuDNN got wrong (``docs/wrong-plans.md``) on
this GPU, or search for more (``--sweep SECONDS``: every plan of seeded random convolutions,
each wrong plan then shrunk to its smallest failing convolution, printed as rows for the doc), or
measure what checking every plan costs beside the autotune after it (``--cost``: the lessons' base
convolution in every dtype and layout and ResNet-50's distinct convolutions; each graph built
fresh; the check again on a new graph of the same convolution, every kernel loaded by then).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from pathlib import Path

from .. import env, networks
from ..errors import LabkitError
from ..gpu.audits import wrong_plans
from ..gpu.checks import plan_checks
from ..spec import ConvSpec


def add_parser(sub) -> None:
    """Add the ``wrong-plans`` command and its options to ``python -m labkit``'s subparsers.

    Args:
        sub: the subparsers of the top-level parser.
    """
    p = sub.add_parser(
        "wrong-plans",
        help="re-check on this GPU the plans cuDNN got wrong (docs/wrong-plans.md), or search for more",
    )
    p.add_argument("--doc", help="the table to re-check (default docs/wrong-plans.md of this checkout)")
    p.add_argument(
        "--sweep",
        type=float,
        metavar="SECONDS",
        help="search instead: check every plan of random convolutions",
    )
    p.add_argument("--seed", type=int, default=0, help="the sweep's seed (default 0)")
    p.add_argument("--dtype", help="sweep this dtype only")
    p.add_argument("--layout", help="sweep this layout only")
    p.add_argument("--direction", help="sweep this direction only")
    p.add_argument(
        "--shrink",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="seconds to shrink each wrong plan (default 20)",
    )
    p.add_argument("--max-shrink", type=int, default=12, help="wrong plans to shrink at most (default 12)")
    p.add_argument(
        "--csv", help="write the sweep's rows (one per plan checked), or --cost's rows, to this CSV file"
    )
    p.add_argument(
        "--cost",
        type=float,
        metavar="SECONDS",
        help="measure what the check costs beside autotune; start no convolution after SECONDS",
    )
    p.add_argument(
        "--shrink-rows",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="re-checking: also shrink each row still wrong for this long and print the smaller row",
    )


def main(args) -> int:
    """``python -m labkit wrong-plans``: re-check the table, or ``--sweep`` for more, or ``--cost``.

    Args:
        args: the parsed command line.

    Returns:
        The exit code: 2 without a live GPU.
    """
    m = env.mode()
    if not m.live:
        print(f"labkit wrong-plans: needs a live GPU ({m.reason})")
        return 2
    if args.sweep is not None:
        return _sweep(args)
    if args.cost is not None:
        return _cost(args)

    doc = Path(args.doc) if args.doc else wrong_plans.DOC
    rows = wrong_plans.read_table(doc.read_text())
    e = env.environment()
    print(
        f"re-checking {len(rows)} plans of {doc} on {e.gpu_name}, "
        f"cuDNN {e.cudnn_backend}, frontend {e.cudnn_frontend}"
    )
    counts = {}
    for rep, spec, verdict in wrong_plans.recheck(rows):
        state = wrong_plans.state_of(verdict)
        counts[state] = counts.get(state, 0) + 1
        now = "" if verdict is None else f": relative error {_error(verdict.rel_error)}"
        was = f"was {_error(rep.rel_error)}" if spec == rep.spec else "its larger convolution"
        print(f"  {state:12s} {rep.plan:16s} {spec.label}{now} ({was} on {rep.gpu}, cuDNN {rep.cudnn})")
        if args.shrink_rows and spec == rep.spec and state == "still wrong":
            small, v, trials = wrong_plans.shrink(spec, rep.plan, seconds=args.shrink_rows)
            if small != spec and v is not None and not v.ok:
                found = wrong_plans.Reproduction(
                    rep.plan,
                    small,
                    v.rel_error,
                    e.gpu_name,
                    e.cudnn_backend,
                    e.cudnn_frontend,
                    rep.larger or spec,
                )
                print(f"    smaller ({trials} trials): {wrong_plans.table_row(found)}")
    print("  " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    return 0


def _error(value: float) -> str:
    return "inf" if not math.isfinite(value) else f"{value:.3g}"


def _sweep(args) -> int:
    fixed = {k: getattr(args, k) for k in ("dtype", "layout", "direction") if getattr(args, k)}
    t0 = time.perf_counter()
    rows = list(wrong_plans.sweep(args.sweep, seed=args.seed, **fixed))
    checked = [r for r in rows if "plan" in r]
    convs = {r["label"] for r in rows}
    wrong = [r for r in checked if not r["ok"]]
    disagree = [r for r in checked if r["ok_at_batch_1"] is not None and r["ok_at_batch_1"] != r["ok"]]
    print(
        f"swept {len(convs)} convolutions in {time.perf_counter() - t0:.0f} s: {len(checked)} plans checked, "
        f"{len(wrong)} wrong ({sum(r['first_choice'] for r in wrong)} of them the heuristic's first choice), "
        f"{len(rows) - len(checked)} convolutions refused; "
        f"at batch 1 the verdict differed for {len(disagree)}"
    )
    for r in wrong + [r for r in disagree if r["ok"]]:
        print(
            f"  {'WRONG' if not r['ok'] else 'right'} {r['plan']:16s} {r['label']}: {r['status']}"
            f" (at batch 1: {r['ok_at_batch_1']})"
        )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            cols = [
                "label",
                "plan_index",
                "plan",
                "rel_error",
                "ok",
                "first_choice",
                "ok_at_batch_1",
                "status",
            ]
            w = csv.DictWriter(f, cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    e = env.environment()
    first = {}
    for r in wrong:  # one convolution per wrong plan (and class), the smallest seen
        key = (r["plan"],) + tuple(r["label"].split()[:3])
        spec = ConvSpec.from_label(r["label"])
        if key not in first or wrong_plans.size(spec) < wrong_plans.size(first[key]):
            first[key] = spec
    print(
        f"shrinking {min(len(first), args.max_shrink)} of {len(first)} wrong plans, {args.shrink:g} s each:"
    )
    for (plan, *_), spec in list(first.items())[: args.max_shrink]:
        small, verdict, trials = wrong_plans.shrink(spec, plan, seconds=args.shrink)
        if verdict is None or verdict.ok:
            print(f"  {plan} {spec.label}: {'not offered' if verdict is None else 'right'} when run again")
            continue
        rep = wrong_plans.Reproduction(
            plan, small, verdict.rel_error, e.gpu_name, e.cudnn_backend, e.cudnn_frontend, spec
        )
        print(f"  {wrong_plans.table_row(rep)}  <- {spec.label} ({trials} trials)")
    sys.stdout.flush()
    return 0


def _measure_check(spec, group: str) -> dict:
    """One convolution's check and autotune times (`_cost`)."""
    import cupy  # heavy: CuPy, live only

    from ..gpu.cudnn import (  # heavy: CuPy, live only
        conv_graph,
        operands,
        reference_runs,  # heavy: CuPy, live only
    )
    from ..gpu.timing import autotune  # heavy: CuPy, live only

    row = dict(group=group, spec=spec.label)
    try:
        cg = conv_graph.ConvGraph(spec)
        ops = operands.Operands(spec)
        for _ in range(2):  # the second: CuPy's kernels are compiled by then
            cupy.cuda.get_current_stream().synchronize()
            t0 = time.perf_counter()
            ref = reference_runs.expected(spec, ops)
            cupy.cuda.get_current_stream().synchronize()
            ref_s = time.perf_counter() - t0
            del ref
        cg.check(ops=ops)
        tune = autotune.autotune(cg, ops, save=False)
        plan_checks.BOOK.clear()  # the same check again on a new graph, every kernel loaded by now
        again = conv_graph.ConvGraph(spec)
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


def _cost(args) -> int:
    """``--cost``: what checking every plan costs, per convolution, printed (and ``--csv``)."""
    from ..experiments import BASE  # heavy: plotly, where a chart is drawn

    dtypes = ("fp16", "bf16", "fp32", "tf32", "fp8_e4m3")
    specs = [("base", BASE.replace(dtype=d, layout=lay)) for d in dtypes for lay in ("NHWC", "NCHW")]
    net = networks.layers_of("resnet50", batch=32, dtype="fp16", layout="NHWC")
    specs += [("resnet50", g.spec) for g in networks.unique(net.layers)]
    rows, t0 = [], time.perf_counter()
    for group, spec in specs:
        if time.perf_counter() - t0 > args.cost:
            print(f"stopped after {args.cost:g} s: {len(specs) - len(rows)} convolutions not measured")
            break
        rows.append(_measure_check(spec, group))
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
