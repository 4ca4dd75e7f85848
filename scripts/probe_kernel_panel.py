"""Where a panel's cell spends its time in a real Jupyter kernel (nbclient, cells back to back as
"Run all"): lesson 01's first cells (the banner, a data cell, its summary), then a cell per panel
named, the first (``--profile N``: the N-th) under IPython's ``%%prun`` (``--plain``: none); ``--read S`` seconds of reading
(a cell that sleeps: it counts as a running cell) before the panels, ``--idle S`` seconds with no
cell running (the kernel idle, as while a learner reads); ``--cpu``: each panel's cell
also prints its wall time in the kernel, the main thread's CPU time and every other thread's
CPU time over it (from /proc/self/task: which threads ran beside the panel's build). Unlike
scripts/probe_panel_build.py, the kernel's side of the widgets is in it: each widget's comm is
opened and its state sent to the front end.

    LABKIT_MODE=live LABKIT_SHARED_CACHE=DIR python3 scripts/probe_kernel_panel.py [--read S] [--idle S] [--plain] [--cpu] [--panel A B]
"""

import argparse
import sys
import tempfile
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
    print(f"cpu: {what}: wall {wall * 1000:.0f} ms, main thread CPU {main * 1000:.0f} ms, others (ms) {others}")
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--read",
        type=float,
        default=0.0,
        help="seconds of a sleeping cell before the panels (a running cell)",
    )
    ap.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="seconds with no cell running before the panels (a learner reading)",
    )
    ap.add_argument("--lines", type=int, default=45, help="profile lines printed")
    ap.add_argument(
        "--panel", default=["AlgorithmsPanel"], nargs="+", help="classes in labkit.widgets, one cell each"
    )
    ap.add_argument("--plain", action="store_true", help="no profiler: the cells' times alone")
    ap.add_argument("--profile", type=int, default=0, help="the panel cell run under %%%%prun (its index)")
    ap.add_argument("--sort", default="cumulative", help="the profile's order (cumulative, tottime)")
    ap.add_argument("--cpu", action="store_true", help="each panel cell's CPU time per thread (Linux)")
    args = ap.parse_args(argv)
    import nbclient
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_notebooks import cell_times

    prof = Path(tempfile.mkdtemp()) / "prun.txt"
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
        prun = (
            "" if args.plain or i != args.profile else f"%%prun -q -s {args.sort} -l {args.lines} -T {prof}\n"
        )
        build = f"panel{i} = widgets.{name}()"
        cells.append(prun + (f"_t = _cpu_begin(); {build}; _cpu_end(_t, {name!r})" if args.cpu else build))
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
    if prof.exists():
        print(prof.read_text())


if __name__ == "__main__":
    main()
