#!/usr/bin/env python3
"""A learner's first panels in a real Jupyter kernel, and the first-visit CSV.

``run``: lesson 01's first cells (the banner, a data cell, its summary), then one cell per panel
named, in a kernel started by nbclient (cells back to back, as "Run all"), so that each widget's
comm is opened and its state sent, as in JupyterLab. ``--read S``: a cell that sleeps S seconds
before the panels (a running cell); ``--idle S``: S seconds with no cell running (a learner
reading); ``--cpu``: each panel cell also prints its wall time, the main thread's CPU time and every
other thread's (Linux, /proc/self/task). Prints each cell's time.

``csv``: the CSV of those runs' lines and of `execute_notebooks.py`'s (a lesson run as "Run all":
``NAME.ipynb: ran in`` then ``cell I  N ms  SOURCE``), as `scripts/gpu.sh firstvisit` prints them
(a run per ``-- real kernel, MODE IDLE [VAR=value]`` header, then ``cpu: Panel: wall N ms, main
thread CPU M ms`` lines). Nothing is measured there: it copies what the logs say, with the GPU,
the date and the commit given.

    LABKIT_MODE=live LABKIT_SHARED_CACHE=DIR python3 scripts/bench_kernel_panels.py run --idle 3 --cpu
    python3 scripts/bench_kernel_panels.py csv --gpu "NVIDIA H200" --date 2026-11-25 --commit 03b699c LOG... \
        > data/bench/first_visit_h200.csv

CSV columns: gpu, date, labkit_commit, fill (how the class's shared recording was filled), source
(kernelcpu or classnotebooks), run (numbered per source across the logs), mode, idle_s (seconds
with no cell running before the panels; none: "Run all"), prefetch (on/off), notebook, cell (the
panel or the cell's first line), wall_ms, main_cpu_ms (kernelcpu only), panel (whether the cell
makes a panel).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: a cell defining _cpu_begin/_cpu_end: CPU seconds per thread from /proc/self/task/*/stat
#: (utime + stime, in clock ticks: 10 ms steps), named by Python's threads where they are Python's
CPU_HELPER = """
import os, threading, time
def _cpu_ticks():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            out[int(tid)] = int(f[11]) + int(f[12])
        except OSError:
            pass
    return out
def _cpu_begin():
    return time.perf_counter(), time.thread_time(), _cpu_ticks()
def _cpu_end(t, what):
    wall, main = time.perf_counter() - t[0], time.thread_time() - t[1]
    now, hz = _cpu_ticks(), os.sysconf("SC_CLK_TCK")
    names = {th.native_id: th.name for th in threading.enumerate()}
    others = {names.get(tid, f"tid {tid}"): (n - t[2].get(tid, 0)) * 1000 // hz for tid, n in now.items()
              if tid != threading.get_native_id() and n - t[2].get(tid, 0) > 0}
    print(f"cpu: {what}: wall {wall * 1000:.0f} ms, main thread CPU {main * 1000:.0f} ms, "
          f"others (ms) {others}")
"""


HEADER = re.compile(r"^-- real kernel, (\w+) ([\d.]+)(?: (\S+))? \(mode")
CPU = re.compile(r"^cpu: (\w+): wall (\d+) ms, main thread CPU (\d+) ms")
NOTEBOOK = re.compile(r"^(\S+\.ipynb): ran in")
CELL = re.compile(r"^\s+cell\s+(\d+)\s+(\d+) ms\s+(.*)$")
COLUMNS = (
    "gpu",
    "date",
    "labkit_commit",
    "fill",
    "source",
    "run",
    "mode",
    "idle_s",
    "prefetch",
    "notebook",
    "cell",
    "wall_ms",
    "main_cpu_ms",
    "panel",
)


def rows_of(lines, common: dict, runs: dict):
    """The CSV rows of one log's lines; ``runs`` counts each source's runs (across logs)."""
    run = None
    for line in lines:
        if m := HEADER.match(line):
            runs["kernelcpu"] += 1
            run = dict(
                source="kernelcpu",
                run=runs["kernelcpu"],
                mode=m[1],
                idle_s=m[2],
                prefetch="off" if (m[3] or "") == "LABKIT_PREFETCH=0" else "on",
                notebook="",
            )
        elif m := NOTEBOOK.match(line):
            runs["classnotebooks"] += 1
            run = dict(
                source="classnotebooks",
                run=runs["classnotebooks"],
                mode="live",
                idle_s="none",
                prefetch="on",
                notebook=m[1],
            )
        elif run and run["source"] == "kernelcpu" and (m := CPU.match(line)):
            yield dict(common, **run, cell=m[1], wall_ms=int(m[2]), main_cpu_ms=int(m[3]), panel=True)
        elif run and run["source"] == "classnotebooks" and (m := CELL.match(line)):
            text = m[3].strip()
            yield dict(
                common,
                **run,
                cell=f"{m[1]}: {text}",
                wall_ms=int(m[2]),
                main_cpu_ms="",
                panel="widgets." in text and "Panel(" in text,
            )


def run(args) -> int:
    """Lesson 01's first cells, then the panels' cells, in a fresh kernel; each cell's time printed."""
    import nbclient
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_notebooks import cell_times

    cells = [
        "import labkit\nfrom labkit import lessons, widgets\nlessons.banner()",
        'algos = lessons.data("algorithms", spec=lessons.base(layout="NCHW"))',
        "lessons.algorithms_summary(algos)",
    ]
    if args.read:
        cells.append(f"import time; time.sleep({args.read})")
    if args.cpu:
        cells.append(CPU_HELPER)
    for i, name in enumerate(args.panel):
        build = f"panel{i} = widgets.{name}()"
        cells.append(f"_t = _cpu_begin(); {build}; _cpu_end(_t, {name!r})" if args.cpu else build)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    )
    first_panel = len(cells) - len(args.panel)
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            if i == first_panel and args.idle:
                time.sleep(args.idle)  # no cell runs: the kernel is idle, as while a learner reads
            client.execute_cell(cell, i)
    for i, first_line, ms in cell_times(nb):
        print(f"  cell {i} {ms:8.0f} ms  {first_line[:80]}")
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("name") == "stdout" and "cpu:" in out.get("text", ""):
                print(out["text"], end="")
    return 0


def to_csv(args) -> int:
    """The logs' lines as CSV rows on stdout."""
    out = csv.DictWriter(sys.stdout, COLUMNS)
    out.writeheader()
    runs = {"kernelcpu": 0, "classnotebooks": 0}
    common = dict(gpu=args.gpu, date=args.date, labkit_commit=args.commit, fill=args.fill)
    for path in args.logs:
        with open(path, encoding="utf-8", errors="replace") as f:
            out.writerows(rows_of(f, common, runs))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="lesson 01's first cells, then the panels' cells, in a real kernel")
    r.add_argument("--read", type=float, default=0.0, help="seconds of a sleeping cell before the panels")
    r.add_argument("--idle", type=float, default=0.0, help="seconds with no cell running before the panels")
    r.add_argument("--panel", default=["AlgorithmsPanel"], nargs="+", help="classes in labkit.widgets")
    r.add_argument("--cpu", action="store_true", help="each panel cell's CPU time per thread (Linux)")
    c = sub.add_parser("csv", help="the CSV of those lines and of execute_notebooks.py's")
    c.add_argument("logs", nargs="+")
    c.add_argument("--gpu", required=True)
    c.add_argument("--date", required=True)
    c.add_argument("--commit", required=True)
    c.add_argument("--fill", default="quick", help="how the shared recording was filled (default quick)")
    args = ap.parse_args(argv)
    return run(args) if args.what == "run" else to_csv(args)


if __name__ == "__main__":
    sys.exit(main())
