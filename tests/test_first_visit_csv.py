"""scripts/bench_kernel_panels.py's csv reads the lines `scripts/gpu.sh firstvisit` prints (these
lines are from a real H200 log) and copies their numbers, nothing else."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_kernel_panels  # noqa: E402

LOG = """\
-- real kernel, live 3 LABKIT_PREFETCH=0 (mode, seconds idle before the panels), CPU per thread:
cpu: AlgorithmsPanel: wall 45 ms, main thread CPU 45 ms, others (ms) {}
cpu: ReportPanel: wall 50 ms, main thread CPU 48 ms, others (ms) {}
-- real kernel, live 0 (mode, seconds idle before the panels), CPU per thread:
cpu: AlgorithmsPanel: wall 387 ms, main thread CPU 302 ms, others (ms) {'IOPub': 10, 'labkit-warm-up': 150}
01_what_is_a_workspace.ipynb: ran in 5.5 s; 5.2 MiB of notebook (1.5 MiB gzipped) \
-> /root/out/class-executed/x.gz
  cell  1     1321 ms  import labkit
  cell  7      274 ms  algo_panel = widgets.AlgorithmsPanel()
"""


def test_each_panel_and_cell_line_becomes_a_row_with_its_run():
    runs = {"kernelcpu": 0, "classnotebooks": 0}
    rows = list(bench_kernel_panels.rows_of(LOG.splitlines(), {"gpu": "G"}, runs))
    got = [
        (
            r["source"],
            r["run"],
            r["idle_s"],
            r["prefetch"],
            r["cell"],
            r["wall_ms"],
            r["main_cpu_ms"],
            r["panel"],
        )
        for r in rows
    ]
    assert got == [
        ("kernelcpu", 1, "3", "off", "AlgorithmsPanel", 45, 45, True),
        ("kernelcpu", 1, "3", "off", "ReportPanel", 50, 48, True),
        ("kernelcpu", 2, "0", "on", "AlgorithmsPanel", 387, 302, True),
        ("classnotebooks", 1, "none", "on", "1: import labkit", 1321, "", False),
        ("classnotebooks", 1, "none", "on", "7: algo_panel = widgets.AlgorithmsPanel()", 274, "", True),
    ]
    assert rows[-1]["notebook"] == "01_what_is_a_workspace.ipynb" and rows[0]["gpu"] == "G"
    assert runs == {"kernelcpu": 2, "classnotebooks": 1}
