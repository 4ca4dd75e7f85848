"""What a lesson's charts cost in the browser: plotly's own FigureWidget (its 5 MB front end in
every figure) against labkit's (`labkit.draw.figure_widget`: the front end sent once per kernel).

For each way, in turn (``--repeats`` times each, alternating), a fresh page of a throw-away
JupyterLab (tests/browser_helpers.py, recorded mode, headless Chromium) runs a notebook whose
cells each build one panel (``--panels``), with ``LABKIT_PLOTLY_ONCE`` set in its first cell.
Measured from "Run All Cells": when each chart is drawn (a plotly ``.main-svg`` in the page),
the bytes the page received on the kernel's websocket, and the page's JavaScript heap once all
are drawn. Prints a table with ratios against plotly's own class measured in the same run, and
writes it as CSV (``--out``).

    python scripts/bench_browser_figures.py [--repeats 2] [--panels AlgorithmsPanel ...] [--out CSV]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import browser_helpers as bh  # noqa: E402

PANELS = [
    "AlgorithmsPanel",
    "SweepPanel",
    "StrategiesPanel",
    "ReportPanel",
    "PlansPanel",
    "FusionPanel",
    "PrecisionPanel",
    "LayoutPanel",
]
WAYS = {"plotly": "0", "labkit": "1"}  # LABKIT_PLOTLY_ONCE

# Installed before "Run All": the times (ms since the click) at which the page's count of drawn
# plotly charts grows, and the bytes received on websockets counted by Playwright on our side.
WATCH_JS = """() => {
  window.__charts = [];
  const t0 = performance.now();
  let seen = 0;
  const count = () => {
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const n = plots.filter(p => p.querySelector('.main-svg')).length;
    while (seen < n) { seen++; window.__charts.push(performance.now() - t0); }
  };
  new MutationObserver(count).observe(document.body, {childList: true, subtree: true});
}"""
HEAP_JS = "() => (performance.memory ? performance.memory.usedJSHeapSize : null)"


def notebook(way: str, panels) -> dict:
    cells = [
        f"import os\nos.environ['LABKIT_PLOTLY_ONCE'] = {WAYS[way]!r}\n"
        "from labkit import lessons, widgets\nlessons.banner()"
    ]
    cells += [f"p{i} = widgets.{name}()\np{i}" for i, name in enumerate(panels)]
    return {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c}
            for c in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def run_once(ctx, lab, name: str, charts: int, deadline, limit_s: float) -> dict:
    """One fresh page: open ``name``, Run All, wait for ``charts`` charts; what was measured."""
    page = ctx.new_page()
    received = [0]
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)[:200]))
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived",
            lambda payload: received.__setitem__(
                0, received[0] + len(payload if isinstance(payload, (bytes, str)) else b"")
            ),
        ),
    )
    try:
        stem = Path(name).stem
        page.goto(
            lab.url(f"/lab/workspaces/{stem}-{time.monotonic_ns()}/tree/{name}"),
            wait_until="domcontentloaded",
            timeout=deadline.ms(60),
        )
        page.locator(f"{bh.NOTEBOOK} .jp-Notebook .jp-Cell").first.wait_for(
            state="visible", timeout=deadline.ms(60)
        )
        bh.poll(
            lambda: any(k.get("execution_state") == "idle" for k in lab.kernels()), min(60, deadline.left())
        )
        page.evaluate(WATCH_JS)
        page.locator(f"{bh.NOTEBOOK} .jp-Notebook").first.click(position={"x": 5, "y": 5})
        before = received[0]
        page.keyboard.press("Escape")
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator('.lm-Menu-content .lm-Menu-item[data-command="runmenu:run-all"]').first.click()
        got = bh.poll(lambda: len(page.evaluate("() => window.__charts")) >= charts, limit_s, 0.1)
        times = page.evaluate("() => window.__charts")
        time.sleep(1.0)  # the last messages in
        return {
            "charts": len(times),
            "times_ms": times,
            "complete": bool(got),
            "ws_bytes": received[0] - before,
            "heap_bytes": page.evaluate(HEAP_JS),
            "errors": errors,
        }
    finally:
        page.close()
        lab.shutdown_sessions()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--panels", nargs="+", default=PANELS)
    ap.add_argument("--limit", type=float, default=120.0, help="seconds to wait for a run's charts")
    ap.add_argument("--out", type=Path, default=None, help="CSV to append the rows to")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = bh.which_chromium()
    if chromium is None:
        print("no Chromium (set LABKIT_CHROMIUM)", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    root = scratch / "notebooks"
    root.mkdir()
    for way in WAYS:
        (root / f"figures_{way}.ipynb").write_text(json.dumps(notebook(way, args.panels), indent=1))
    deadline = bh.Deadline(args.repeats * len(WAYS) * (args.limit + 60) + 120)
    lab = bh.LabServer(root, ROOT, scratch)
    rows = []
    browser_version = "?"
    pw = sync_playwright().start()
    try:
        lab.start()
        lab.wait_ready(deadline)
        browser_version = subprocess.run(
            [chromium, "--version"], capture_output=True, text=True
        ).stdout.split()[1:2]
        browser_version = browser_version[0] if browser_version else "?"
        ctx = pw.chromium.launch_persistent_context(
            str(scratch / "profile"),
            executable_path=chromium,
            headless=True,
            args=bh.CHROMIUM_ARGS + ["--enable-precise-memory-info"],
            viewport={"width": 1366, "height": 768},
        )
        for rep in range(args.repeats):
            for way in WAYS:
                r = run_once(ctx, lab, f"figures_{way}.ipynb", len(args.panels), deadline, args.limit)
                t = r["times_ms"]
                gaps = [b - a for a, b in zip(t, t[1:])]
                row = {
                    "way": way,
                    "run": rep + 1,
                    "panels": len(args.panels),
                    "charts_drawn": r["charts"],
                    "first_chart_ms": round(t[0]) if t else None,
                    "last_chart_ms": round(t[-1]) if t else None,
                    "median_gap_ms": round(statistics.median(gaps)) if gaps else None,
                    "ws_mb": round(r["ws_bytes"] / 1e6, 2),
                    "heap_mb": round(r["heap_bytes"] / 1e6, 1) if r["heap_bytes"] else None,
                    "page_errors": len(r["errors"]),
                }
                for e in r["errors"]:
                    print(f"  page error: {e}")
                rows.append(row)
                print(json.dumps(row), flush=True)
        ctx.close()
    finally:
        pw.stop()
        lab.stop()
    base = {
        k: statistics.median([r[k] for r in rows if r["way"] == "plotly" and r[k] is not None] or [0])
        for k in ("last_chart_ms", "median_gap_ms", "ws_mb", "heap_mb")
    }
    host = (
        f"{platform.machine()} CPU, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Chromium {browser_version}"
    )
    date = datetime.date.today().isoformat()
    print(
        f"\n{len(args.panels)} panels, recorded mode, headless Chromium, "
        f"this machine ({os.cpu_count()} cores); ratio = labkit / plotly's own (median of runs)"
    )
    print(
        f"{'way':8} {'run':>3} {'charts':>6} {'first ms':>9} {'last ms':>8} {'gap ms':>7} {'ws MB':>7} "
        f"{'heap MB':>8}  {'last x':>7} {'ws x':>6} {'heap x':>7}"
    )
    for r in rows:
        ratio = {
            k: (f"{r[k] / base[k]:.2f}" if base[k] and r[k] is not None else "-")
            for k in ("last_chart_ms", "ws_mb", "heap_mb")
        }
        print(
            f"{r['way']:8} {r['run']:>3} {r['charts_drawn']:>6} {r['first_chart_ms']!s:>9} "
            f"{r['last_chart_ms']!s:>8} {r['median_gap_ms']!s:>7} {r['ws_mb']:>7} {r['heap_mb']!s:>8}  "
            f"{ratio['last_chart_ms']:>7} {ratio['ws_mb']:>6} {ratio['heap_mb']:>7}"
        )
    if args.out:
        new = not args.out.exists()
        with args.out.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["date", "host", *rows[0]])
            if new:
                w.writeheader()
            for r in rows:
                w.writerow({"date": date, "host": host, **r})
    return 0 if all(r["charts_drawn"] == len(args.panels) and not r["page_errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
