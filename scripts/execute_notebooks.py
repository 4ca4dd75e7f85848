#!/usr/bin/env python3
"""Run lessons top to bottom and keep what they drew: each notebook executed by nbclient (as
nbmake runs it, in the mode labkit picks: live on a GPU host) and written with its outputs and its
widgets' state, so that the live charts can be looked at, and shot at 1366x768, on a machine
without a GPU (``python scripts/screenshots.py --executed DIR``).

    LABKIT_MODE=live python scripts/execute_notebooks.py notebooks/10_under_the_hood.ipynb --out $OUT/executed

Writes ``<out>/<name>.ipynb.gz`` (gzip: a lesson's traces are a few MiB of JSON) and prints each
notebook's seconds and output size, and each code cell's time in the kernel (nbclient's
timestamps: the kernel's start of the cell to its reply; cells run back to back, as "Run all"
runs them). A cell that raises stops that notebook, which is still written (with the error in its
output) and counted as failed: exit 1.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path


def execute(src: Path, out: Path, timeout_s: float) -> bool:
    """Run ``src`` in a fresh kernel; write ``out/<name>.gz``. True when every cell ran."""
    import nbclient
    import nbformat

    nb = nbformat.read(str(src), as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(src.parent)}},
    )
    t0 = time.perf_counter()
    ok = True
    try:
        client.execute()
    except Exception as exc:  # noqa: BLE001  (nbclient's CellExecutionError, a timeout: written and said)
        ok = False
        print(f"{src.name}: FAILED: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
    data = nbformat.writes(nb).encode()
    path = out / f"{src.name}.gz"
    path.write_bytes(gzip.compress(data))
    print(
        f"{src.name}: {'ran' if ok else 'stopped'} in {time.perf_counter() - t0:.1f} s; "
        f"{len(data) / 2**20:.1f} MiB of notebook ({path.stat().st_size / 2**20:.1f} MiB gzipped) -> {path}",
        flush=True,
    )
    for i, first_line, ms in cell_times(nb):
        print(f"  cell {i:2d} {ms:8.0f} ms  {first_line[:90]}", flush=True)
    return ok


def cell_times(nb):
    """(index, first source line, milliseconds) of each code cell that ran: from the kernel's
    ``execute_input`` to its ``execute_reply`` (nbclient's ``record_timing`` metadata)."""
    from datetime import datetime

    out = []
    for i, cell in enumerate(nb.cells):
        t = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type != "code" or "iopub.execute_input" not in t or "shell.execute_reply" not in t:
            continue
        start, end = (
            datetime.fromisoformat(t[k].replace("Z", "+00:00"))
            for k in ("iopub.execute_input", "shell.execute_reply")
        )
        out.append((i, (cell.source.strip().splitlines() or [""])[0], (end - start).total_seconds() * 1000))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=500.0, help="seconds per cell (default 500)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = [nb.name for nb in args.notebooks if not execute(nb, args.out, args.timeout)]
    if failed:
        print(f"FAILED: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
