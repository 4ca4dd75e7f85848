"""Where a panel's cell spends its time in a real Jupyter kernel (nbclient, cells back to back as
"Run all"): lesson 01's first cells (the banner, a data cell, its summary), then a cell per panel
named, the first under IPython's ``%%prun`` (``--plain``: none); ``--read S`` seconds of reading
(a cell that sleeps: it counts as a running cell) before the panels. Unlike
scripts/probe_panel_build.py, the kernel's side of the widgets is in it: each widget's comm is
opened and its state sent to the front end.

    LABKIT_MODE=live LABKIT_SHARED_CACHE=DIR python3 scripts/probe_kernel_panel.py [--read S] [--plain] [--panel A B]
"""
import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--read", type=float, default=0.0)
    ap.add_argument("--lines", type=int, default=45, help="profile lines printed")
    ap.add_argument("--panel", default=["AlgorithmsPanel"], nargs="+", help="classes in labkit.widgets, one cell each")
    ap.add_argument("--plain", action="store_true", help="no profiler: the cells' times alone")
    args = ap.parse_args(argv)
    import nbclient
    import nbformat

    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_notebooks import cell_times

    prof = Path(tempfile.mkdtemp()) / "prun.txt"
    cells = ["import labkit\nfrom labkit import lessons, widgets\nlessons.banner()",
             'algos = lessons.data("algorithms", spec=lessons.base(layout="NCHW"))',
             "lessons.algorithms_summary(algos)"]
    if args.read:
        cells.append(f"import time; time.sleep({args.read})")
    for i, name in enumerate(args.panel):
        prun = "" if args.plain or i else f"%%prun -q -s cumulative -l {args.lines} -T {prof}\n"
        cells.append(f"{prun}panel{i} = widgets.{name}()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    for i, first_line, ms in cell_times(nb):
        print(f"  cell {i} {ms:8.0f} ms  {first_line[:80]}")
    if prof.exists():
        print(prof.read_text())


if __name__ == "__main__":
    main()
