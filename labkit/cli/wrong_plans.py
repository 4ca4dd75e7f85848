"""``python -m labkit wrong-plans``: re-check the plans cuDNN got wrong (``docs/wrong-plans.md``) on
this GPU, or search for more (``--sweep SECONDS``: every plan of seeded random convolutions,
each wrong plan then shrunk to its smallest failing convolution, printed as rows for the doc).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from pathlib import Path


def add_parser(sub) -> None:
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
    p.add_argument("--csv", help="write the sweep's rows (one per plan checked) to this CSV file")
    p.add_argument(
        "--shrink-rows",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="re-checking: also shrink each row still wrong for this long and print the smaller row",
    )


def main(args) -> int:
    from .. import env

    m = env.mode()
    if not m.live:
        print(f"labkit wrong-plans: needs a live GPU ({m.reason})")
        return 2
    if args.sweep is not None:
        return _sweep(args)
    from ..gpu import wrong_plans

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
    from .. import env
    from ..gpu import wrong_plans
    from ..spec import ConvSpec

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
