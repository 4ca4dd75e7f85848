"""Widget responsiveness: how long from moving a control to the figure holding the new data.

Builds every lesson's panel (and the lab panel), then, warm (after one change already made on
that panel), changes each control to each value it offers (recorded mode: the recorded values
around the base, one factor at a time; live mode: a few values per control) through
``panel.set(...)``: the same observer a click runs. The latency is the wall time until ``set``
returns, checked to have changed the FigureWidget's trace data (or to show a no-data message).
Two latencies per change: ``first_paint_ms`` (the change until the figure first holds new data:
a live chart that fills in draws its first part early, `labkit.signals.progress`) and ``latency_ms`` (the
change until the figure holds the whole answer). Conditions:

* ``first visit`` (``--pause 0``, the default): results are not kept in the session between
  changes (``lessons.forget()`` before each) and nothing is prefetched, so recorded latency is
  lookup + chart build + in-place update, and live latency includes the whole measurement.
  Live, measurements are saved in this GPU's recording (`labkit.store.localcache`); ``--cache DIR``
  points it at DIR (``LABKIT_CACHE``).
* ``--condition "first visit, empty cache"`` with ``--cache`` naming a fresh folder: as above,
  from an empty recording; ``--condition "revisit after restart"`` with the same ``--cache`` in a
  new process: every change is answered from the recording the first run filled (column
  ``from_disk``; ``graphs_built`` should be 0).
* ``--read S``: S seconds with no cell running between the first cell and the first panel, as a
  learner reads the lesson's text; the banner's warm-up (`labkit.session.warmup`) goes on meanwhile.
  Every lesson has text to read there: 27 words in lesson 07 (its panel comes next), 140 to 1,022
  words and 3 to 18 cells in the others. Without it the first panel is built at once, as in "Run
  all", and waits for what is left of the warm-up (`scripts/bench_kernel_panels.py` measures both
  in a real kernel).
* ``after a pause`` (``--pause S``, live): a learner who looks at each chart for S seconds before
  the next change (the pause follows every change and every reset). The panel's background
  worker (`labkit.session.prefetch`) measures the neighbouring values meanwhile; a change it guessed is
  served from those results (column ``ahead``), any other is measured then. Nothing is forgotten
  between changes: that is the point.

Writes ``data/bench/widget_latency.csv`` (mode, condition, gpu, panel, control, value, ahead,
from_disk, graphs_built, first_paint_ms, latency_ms, date, labkit_commit); rows of other (mode,
condition, gpu, panel)s already in the file are kept. Each panel's build (what a learner waits for
when its cell runs) is a row of its own with control ``(build)``: first paint (the cell hands the
panel back: live, at its first part drawn) and complete (the rest filled in). The lesson's first
cell (lesson 01's, in a fresh Jupyter kernel: IPython is loaded before a notebook's first cell runs) is
a row of panel ``(first cell)``; ``--panels "(first cell)"`` measures only that row. With
``--panels``, this process's first cell is the banner of the first panel's lesson, which prepares
what that lesson measures with (lesson 09's starts the report's worker); without, of no lesson.
Prints the table and a summary (median, p90, max per mode/condition and per panel). Not a timed test.

    python scripts/bench_widgets.py                       # the mode labkit picks, first visits
    LABKIT_MODE=live python scripts/bench_widgets.py --pause 3
    LABKIT_MODE=recorded python scripts/bench_widgets.py
    d=$(mktemp -d)
    LABKIT_MODE=live python scripts/bench_widgets.py --cache $d --condition "first visit, empty cache"
    LABKIT_MODE=live python scripts/bench_widgets.py --cache $d --condition "revisit after restart"
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLUMNS = [
    "mode",
    "condition",
    "gpu",
    "panel",
    "control",
    "value",
    "ahead",
    "from_disk",
    "graphs_built",
    "first_paint_ms",
    "latency_ms",
    "date",
    "labkit_commit",
]
#: live mode: values tried per control (the recorded grid's, so the two modes are comparable)
LIVE_VALUES = {
    "N": [8, 64],
    "C": [128],
    "K": [128],
    "H": [28],
    "W": [28],
    "dtype": ["fp32", "bf16"],
    "layout": ["NCHW"],
    "direction": ["dgrad"],
    "workload": ["random_shapes"],
    "launch": ["python"],
    "streams": [4],
    "field": ["C=K"],
}
LIVE_WARMUP = {"N": 16, "workload": "growing_batch", "streams": 3, "field": "H=W"}
LIVE_CONTROLS = ("N", "C", "H", "dtype", "layout", "direction", "workload", "launch", "streams", "field")


def _fingerprint(fig):
    """What the figure's traces hold (x and y as text: a trace's data may be a list, a tuple or a
    numpy array, with NaN, which equals nothing)."""
    return tuple(
        (t.visible, None if t.x is None else repr(list(t.x)), None if t.y is None else repr(list(t.y)))
        for t in fig.data
    )


def _graph_stats():
    """(graphs built, seconds building them, evictions) of labkit's graph cache (live only)."""
    cache = sys.modules.get("labkit.gpu.cudnn.graph_cache")
    if cache is None:
        return (0, 0.0, 0)
    st = cache.graphs.stats
    return (st.misses, sum(st.build_seconds), st.evictions)


def _values(panel, control, live: bool, per_control: int):
    if live:  # the grid's values this panel offers (a choice control offers a panel's own list)
        offered = panel.options(control)
        vals = [
            v
            for v in LIVE_VALUES.get(control, [])
            if v != panel.value(control) and (not offered or v in offered)
        ]
    else:
        vals = [v for v in panel.options(control) if v != panel.value(control)]
    return vals[:per_control]


def run_label(condition, pause: float):
    """(labkit's mode, this run's condition label, the GPU): the GPU measured on (live) or the one
    the recording was made on; the label defaults from ``pause``."""
    from labkit import env

    m = env.mode()
    if m.live:
        gpu = env.environment().gpu_name
    else:
        from labkit.store import recordings

        gpu = recordings.current().metadata.get("gpu")
    return m, condition or (f"after a {pause:g} s pause" if pause else "first visit"), gpu


def bench(per_control: int = 8, panels=None, verbose: bool = True, pause: float = 0.0, condition=None):
    """Rows of `COLUMNS`. ``pause``: seconds of idleness after every change (0: first visits,
    prefetching off); ``condition``: the label of the run (default from ``pause``)."""
    if not pause:
        os.environ["LABKIT_PREFETCH"] = "0"
    from labkit.present import widgets
    from labkit.session import lessons
    from labkit.session.prefetch import PREFETCHER

    m, condition, gpu = run_label(condition, pause)
    live = m.live

    def between_changes():
        """A pause (the learner looks; the worker measures ahead), or forgetting every result."""
        if pause:
            time.sleep(pause)
        else:
            lessons.forget()

    def row(p, panel, control, value, ms, graphs_built, ahead=False, paint=None) -> dict:
        """One row of `COLUMNS` for a panel that took ``ms`` to complete (its build, or a change), kept;
        ``paint``: its first paint (default: the panel's own measure of it)."""
        if paint is None:
            paint = p.first_paint_ms if p.first_paint_ms is not None else ms
        paint = min(paint, ms)
        rows.append(
            dict(
                mode=m.name,
                condition=condition,
                gpu=gpu,
                panel=panel,
                control=control,
                value=value,
                ahead=ahead,
                from_disk="measured on this GPU at" in p.status.value,
                graphs_built=graphs_built,
                first_paint_ms=round(paint, 2),
                latency_ms=round(ms, 2),
            )
        )
        return rows[-1]

    classes = dict(widgets.PANELS, lab=widgets.LabPanel)
    names = panels or list(classes)
    rows = []
    for name in names:
        lessons.forget()
        t0 = time.perf_counter()
        g0 = _graph_stats()
        PREFETCHER.cell_started()  # the panel's cell, as IPython's events tell labkit in a notebook
        p = classes[name]()  # live: handed back at its first paint when its first request is measured
        shown_ms = (time.perf_counter() - t0) * 1000
        p.wait()  # ... and complete once the rest has filled in
        build_ms = (time.perf_counter() - t0) * 1000
        PREFETCHER.cell_finished()
        g1 = _graph_stats()
        build_paint = row(p, name, "(build)", "", build_ms, g1[0] - g0[0], paint=shown_ms)["first_paint_ms"]
        controls = [c for c in p.controls if not live or c in LIVE_CONTROLS]
        # warm-up: one change on this panel (figure widget, first update path), not counted; live, to a
        # value that is not measured afterwards (cuDNN's and labkit's graph caches would make it a hit)
        warm = next(((c, v) for c in controls for v in _values(p, c, live, 1)), None)
        if live:
            warm = next(((c, v) for c, v in LIVE_WARMUP.items() if c in controls), warm)
        if warm:
            p.set(**{warm[0]: warm[1]})
            p.reset()
        if verbose:
            print(
                f"{name}: built in {build_ms:.0f} ms (first paint {build_paint:.0f} ms, "
                f"{g1[0] - g0[0]} graphs built); controls {controls}",
                flush=True,
            )
        for c in controls:
            for v in _values(p, c, live, per_control):
                between_changes()
                before = _fingerprint(p.fig)
                PREFETCHER.last_wait_s = 0.0
                g0 = _graph_stats()
                t = time.perf_counter()
                p.set(**{c: v})
                ms = (time.perf_counter() - t) * 1000
                g1 = _graph_stats()
                ahead = "ahead of this change" in p.status.value
                changed = _fingerprint(p.fig) != before
                if not changed and p.error is None:
                    print(f"  warning: {name} {c}={v}: the figure did not change", flush=True)
                kept = row(p, name, c, str(v), ms, g1[0] - g0[0], ahead)
                paint, from_disk = kept["first_paint_ms"], kept["from_disk"]
                if verbose:
                    extra = f"  ({p.error[:80]})" if p.error else ""
                    if live and not ahead:
                        extra += (
                            f"  [waited {PREFETCHER.last_wait_s * 1000:.0f} ms for the worker; "
                            f"{g1[0] - g0[0]} graphs built in {g1[1] - g0[1]:.1f} s, {g1[2] - g0[2]} evicted]"
                        )
                    how = (
                        " (measured ahead)" if ahead else " (from this GPU's recording)" if from_disk else ""
                    )
                    print(
                        f"  {c}={v}: first paint {paint:8.1f} ms, complete {ms:8.1f} ms{how}{extra}",
                        flush=True,
                    )
                between_changes()
                p.reset()
    if live and pause and verbose:
        st = PREFETCHER.stats
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        print(
            f"GPU memory in use at the end: {(total - free) / 2**30:.1f} GiB; graph cache "
            f"{len(sys.modules['labkit.gpu.cudnn.graph_cache'].graphs)} entries",
            flush=True,
        )
        print(
            f"prefetch: {st.done} kept, {st.discarded} discarded, "
            f"{st.superseded} stopped for the foreground, {st.failed} failed "
            f"({st.last_error or 'no error'}), {st.seconds:.0f} s of GPU-lock time",
            flush=True,
        )
    return rows


def write(rows, path: Path) -> "object":
    """Replace the rows of this run's (mode, condition, GPU, panel)s in ``path``; keep all others."""
    import pandas as pd

    from labkit.cli.record import git_commit

    new = pd.DataFrame(rows, columns=COLUMNS)
    new["date"], new["labkit_commit"] = datetime.date.today().isoformat(), git_commit()
    runs = set(zip(new["mode"], new["condition"], new["gpu"], new["panel"]))
    if path.exists():
        old = pd.read_csv(path)
        if "condition" not in old.columns:  # written before conditions existed: first visits, no prefetch
            old.insert(1, "condition", "first visit")
        if "ahead" not in old.columns:
            old.insert(6, "ahead", False)
        for col in (
            "from_disk",
            "graphs_built",
            "first_paint_ms",
            "date",
            "labkit_commit",
        ):  # not measured then
            if col not in old.columns:
                old[col] = None
        old = old[[r not in runs for r in zip(old["mode"], old["condition"], old["gpu"], old["panel"])]]
        new = pd.concat([old[COLUMNS], new], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = new.sort_values(["mode", "condition", "gpu", "panel", "control"], kind="stable")
    new.to_csv(path, index=False)
    return new


def summary(df) -> str:
    lines = []
    for (mode, condition, gpu), every in df.groupby(["mode", "condition", "gpu"]):
        builds = every[every["control"] == "(build)"]
        sub = every[every["control"] != "(build)"]
        if sub.empty:
            continue
        lat = sorted(sub["latency_ms"])
        p90 = lat[min(len(lat) - 1, int(0.9 * len(lat)))]
        ahead = int(sub["ahead"].astype(str).str.lower().eq("true").sum())
        disk = int(sub["from_disk"].astype(str).str.lower().eq("true").sum())
        lines.append(
            f"{mode}, {condition}, on {gpu}: {len(lat)} changes ({ahead} measured ahead, {disk} "
            f"from this GPU's recording), complete: median {statistics.median(lat):.1f} ms, "
            f"p90 {p90:.1f} ms, max {lat[-1]:.1f} ms"
        )
        paint = sorted(v for v in sub["first_paint_ms"] if v == v and v is not None)
        if paint:
            lines.append(
                f"  first paint: median {statistics.median(paint):.1f} ms, "
                f"p90 {paint[min(len(paint) - 1, int(0.9 * len(paint)))]:.1f} ms, max {paint[-1]:.1f} ms"
            )
        built = [v for v in sub["graphs_built"] if v == v and v is not None]
        if built:
            lines.append(f"  graphs built: {int(sum(built))} in all")
        per = sub.groupby("panel")["latency_ms"].median().sort_values()
        lines.append("  median per panel: " + ", ".join(f"{k} {v:.0f}" for k, v in per.items()) + " (ms)")
        worst = sub.groupby("panel")["latency_ms"].max().sort_values(ascending=False)
        lines.append("  max per panel: " + ", ".join(f"{k} {v:.0f}" for k, v in worst.items()) + " (ms)")
        if not builds.empty:
            lines.append(
                "  building the panels (first paint / complete, ms): "
                + ", ".join(
                    f"{r.panel} {r.first_paint_ms:.0f}/{r.latency_ms:.0f}" for r in builds.itertuples()
                )
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "data" / "bench" / "widget_latency.csv"))
    ap.add_argument("--per-control", type=int, default=8, help="values tried per control (default 8)")
    ap.add_argument("--panels", nargs="*", help="only these panels (experiment names, or 'lab')")
    ap.add_argument(
        "--pause",
        type=float,
        default=0.0,
        help="seconds of idleness after each change (live: the prefetch worker's time); 0: first visits",
    )
    ap.add_argument(
        "--condition", help="label of this run's rows (default: 'first visit' or 'after a S s pause')"
    )
    ap.add_argument("--cache", help="live: this GPU's recording lives here (sets LABKIT_CACHE)")
    ap.add_argument(
        "--read",
        type=float,
        default=0.0,
        help="seconds with no cell running between the first cell and the first panel: a learner reading "
        "the lesson's text (default 0: the first panel at once, as 'Run all')",
    )
    ap.add_argument(
        "--from-log",
        metavar="LOG",
        help="no measuring: read the rows from the printed log of a run that was stopped before it wrote "
        "them (needs --condition and --gpu; mode live)",
    )
    ap.add_argument("--gpu", help="with --from-log: the GPU the log was measured on")
    args = ap.parse_args(argv)
    if args.from_log:
        if not (args.condition and args.gpu):
            ap.error("--from-log needs --condition and --gpu")
        rows = [
            r
            for r in rows_from_log(Path(args.from_log).read_text(), args.condition, args.gpu)
            if not args.panels or r["panel"] in args.panels
        ]
        df = write(rows, Path(args.out))
    else:
        if args.cache:
            os.environ["LABKIT_CACHE"] = args.cache
        rows = first_cell_in_kernel(args.condition, args.pause)  # its kernel runs alone: first
        asked = [n for n in args.panels or [] if n != "(first cell)"]
        first_cell(lesson_of(asked[0]) if asked else None)  # every panel: the banner of no lesson
        time.sleep(args.read)  # no cell runs: the warm-up goes on as while a learner reads
        pending = list(
            rows
        )  # written with the first panel's: nothing (pandas' import, a CSV) runs between them
        from labkit.present import widgets

        names = asked if args.panels else [*widgets.PANELS, "lab"]
        if not names:
            df = write(pending, Path(args.out))
        for name in names:  # written after each panel: a stopped run keeps its rows
            new = bench(args.per_control, [name], pause=args.pause, condition=args.condition)
            rows += new
            df = write(pending + new, Path(args.out))
            pending = []
    print(f"\nwrote {args.out} ({len(rows)} rows of this run)")
    print(summary(df))
    return 0


def lesson_of(panel: str):
    """The first lesson that draws ``panel`` (its banner prepares what the lesson measures with:
    lesson 09's starts the report's worker), or None."""
    from labkit.session.texts import DRAWS

    return next((lesson for lesson, drawn in DRAWS.items() if panel in drawn), None)


def first_cell(lesson=None) -> None:
    """A lesson's first cell (``import labkit``, its widgets and checks, ``lessons.banner(lesson)``)
    in this process, which the panels then use; timed and printed, not kept (`first_cell_in_kernel`
    is).

    Args:
        lesson: the lesson of the first panel measured, e.g. "09"; None for no lesson.
    """
    t0 = time.perf_counter()
    import labkit  # noqa: F401
    from labkit import check, lessons, widgets  # noqa: F401
    from labkit.session.prefetch import PREFETCHER

    PREFETCHER.cell_started()  # as IPython's events tell labkit in a notebook
    text = lessons.banner(lesson)
    PREFETCHER.cell_finished()
    ms = (time.perf_counter() - t0) * 1000
    print(f"(first cell, this process): {ms:.0f} ms; {str(text)[:120]}", flush=True)


def first_cell_in_kernel(condition, pause: float, lesson: str = "01_what_is_a_workspace.ipynb"):
    """Lesson 01's own first cell in a fresh Jupyter kernel (nbclient), as a learner runs it: from the
    kernel's ``execute_input`` to its ``execute_reply``. One row of panel ``(first cell)``."""
    import json

    import nbclient
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_notebooks import cell_times

    cells = json.loads((ROOT / "notebooks" / lesson).read_text())["cells"]
    source = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nbclient.NotebookClient(
        nb, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    (_, _, ms), *_ = cell_times(nb)
    m, condition, gpu = run_label(condition, pause)
    print(f"(first cell) of {lesson}, in a real kernel: {ms:.0f} ms", flush=True)
    return [
        dict(
            mode=m.name,
            condition=condition,
            gpu=gpu,
            panel="(first cell)",
            control="(build)",
            value="",
            ahead=False,
            from_disk=False,
            graphs_built=0,
            first_paint_ms=round(ms, 2),
            latency_ms=round(ms, 2),
        )
    ]


LOG_PANEL = re.compile(
    r"^(\w+): built in (\d+) ms(?: \(first paint (\d+) ms, (\d+) graphs built\))?; controls"
)
LOG_CHANGE = re.compile(r"^  (\w+)=(.+?): first paint +([\d.]+) ms, complete +([\d.]+) ms(.*)$")


def rows_from_log(text: str, condition: str, gpu: str):
    """Rows of `COLUMNS` from the verbose output of a live `bench` run (one line per change, as printed)."""
    rows, panel = [], None
    for line in text.splitlines():
        if m := LOG_PANEL.match(line):
            panel = m.group(1)
            if m.group(3) is not None:
                rows.append(
                    dict(
                        mode="live",
                        condition=condition,
                        gpu=gpu,
                        panel=panel,
                        control="(build)",
                        value="",
                        ahead=False,
                        from_disk=False,
                        graphs_built=int(m.group(4)),
                        first_paint_ms=float(m.group(3)),
                        latency_ms=float(m.group(2)),
                    )
                )
        elif (m := LOG_CHANGE.match(line)) and panel:
            rest = m.group(5)
            built = re.search(r"; (\d+) graphs built", rest)
            rows.append(
                dict(
                    mode="live",
                    condition=condition,
                    gpu=gpu,
                    panel=panel,
                    control=m.group(1),
                    value=m.group(2),
                    ahead="(measured ahead)" in rest,
                    from_disk="(from this GPU's recording)" in rest,
                    graphs_built=int(built.group(1)) if built else 0,
                    first_paint_ms=float(m.group(3)),
                    latency_ms=float(m.group(4)),
                )
            )
    return rows


if __name__ == "__main__":
    sys.exit(main())
