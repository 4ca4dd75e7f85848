"""Where does an all-plan build's time go? (issue 27: measured before choosing what to parallelise)

    python scripts/probe_build_costs.py [--out DIR] [--batches 32,64,32]

For lesson 01's workspace_sizes graphs (5 dtypes x 2 layouts x 3 directions, fp8 fprop only, as
`probe_parallel_builds.py`), one round per batch size in one process: every graph is defined,
planned (cuDNN's heuristics query) and checked, then every plan built one at a time, each phase
timed. A later round with a new batch size says what a control change costs once the kernels a
first round loaded are resident; a repeated batch says what an identical rebuild costs. Writes
``build_phases.csv`` (one row per graph and phase) and ``build_plans.csv`` (one row per plan:
name, cuDNN's behaviour notes, build seconds, workspace bytes) into --out; prints a summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from probe_parallel_builds import specs_for  # noqa: E402  (the same 26 graphs)


def one_graph(spec, round_no, phases, plans):
    import cudnn

    from labkit.gpu import engine

    cg = engine.ConvGraph.__new__(engine.ConvGraph)
    cg.spec, cg.all_plans, cg.epilogue, cg.workspace_cap, cg._deterministic_only = (
        spec,
        True,
        "none",
        None,
        False,
    )
    base = dict(round=round_no, batch=spec.N, dtype=spec.dtype, layout=spec.layout, direction=spec.direction)
    t = time.perf_counter()

    def phase(name):
        nonlocal t
        now = time.perf_counter()
        phases.append(dict(base, phase=name, seconds=round(now - t, 6)))
        t = now

    g = cg._define()
    phase("define")
    g.validate()
    g.build_operation_graph()
    phase("operation graph")
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    phase("heuristics")
    if spec.dtype == "fp32":
        g.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE, cudnn.numerical_note.DOWN_CONVERT_INPUTS])
    elif spec.dtype == "tf32":
        g.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    g.check_support()
    phase("check support")
    for i in range(g.get_execution_plan_count()):
        name = g.get_plan_name_at_index(i)
        t0 = time.perf_counter()
        err, ws, notes = "", None, ""
        try:
            g.build_plan_at_index(i)
            ws = int(g.get_workspace_size_plan_at_index(i))
            notes = ",".join(str(n).split(".")[-1] for n in g.get_behavior_notes_for_plan_at_index(i))
        except Exception as exc:  # noqa: BLE001
            err = " ".join(str(exc).split())[:100]
        plans.append(
            dict(
                base,
                index=i,
                name=name,
                seconds=round(time.perf_counter() - t0, 6),
                built=not err,
                workspace_bytes=ws,
                notes=notes,
                error=err,
            )
        )
    phase("build every plan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--batches", default="32,64,32")
    args = ap.parse_args(argv)
    import pandas as pd

    from labkit import ConvSpec

    phases, plans = [], []
    t_import = time.perf_counter()
    import cupy

    from labkit.gpu import engine  # noqa: F401

    cupy.zeros(1)
    print(f"import + context: {time.perf_counter() - t_import:.2f} s", flush=True)
    for r, batch in enumerate(int(b) for b in args.batches.split(",")):
        t0 = time.perf_counter()
        for kw in specs_for(batch):
            one_graph(ConvSpec(**kw), r, phases, plans)
        print(
            f"round {r} (N={batch}): {time.perf_counter() - t0:.2f} s for {len(specs_for(batch))} graphs",
            flush=True,
        )
    for batch in (16, 8):  # heuristic-only graphs (what a first paint could show), new shapes
        t0, each = time.perf_counter(), []
        for kw in specs_for(batch):
            t1 = time.perf_counter()
            try:
                engine.ConvGraph(ConvSpec(**kw), all_plans=False)
            except Exception as exc:  # noqa: BLE001
                print("  heuristic-only failed:", kw["dtype"], kw["layout"], kw["direction"], str(exc)[:80])
            each.append(time.perf_counter() - t1)
        print(
            f"heuristic plan only (N={batch}): {time.perf_counter() - t0:.2f} s for {len(each)} graphs, "
            f"max {max(each):.3f} s",
            flush=True,
        )
    ph, pl = pd.DataFrame(phases), pd.DataFrame(plans)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ph.to_csv(out / "build_phases.csv", index=False)
    pl.to_csv(out / "build_plans.csv", index=False)
    pd.set_option("display.width", 200)
    print(ph.groupby(["round", "phase"])["seconds"].agg(["sum", "max", "count"]).round(3))
    pl["rtc"] = pl.notes.str.contains("RUNTIME_COMPILATION")
    print(pl.groupby(["round", "rtc", "built"])["seconds"].agg(["sum", "max", "median", "count"]).round(4))
    print(pl.groupby(["round", "dtype"])["seconds"].agg(["sum", "max", "count"]).round(3))
    top = pl[pl["round"] == 1].sort_values("seconds", ascending=False).head(15)
    print(top[["dtype", "layout", "direction", "index", "name", "notes", "seconds", "built"]].to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
