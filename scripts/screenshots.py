#!/usr/bin/env python3
"""Look at what a learner sees: every lesson run in JupyterLab + headless Chromium (recorded mode),
one PNG per lesson and two per panel (as first drawn, and after one control moved).

    python scripts/screenshots.py                    # every lesson, into artifacts/screenshots/
    python scripts/screenshots.py 03 07              # lessons whose file name starts with 03 or 07
    python scripts/screenshots.py --out /tmp/shots --width 1366 --height 768
    python scripts/screenshots.py --executed DIR     # notebooks run elsewhere (a GPU host), as saved
    python scripts/screenshots.py --docs             # the README's pictures: docs/screenshots/<lesson>.png

It reuses the browser test's server and steps (tests/browser_helpers.py, tests/test_browser.py):
a throw-away JupyterLab over a stripped copy of ``notebooks/`` with ``LABKIT_MODE=recorded``,
Chromium at ``$LABKIT_CHROMIUM`` (default /usr/bin/chromium), a 1366x768 viewport with the file
browser open, as a new user has it. Files written:

* ``<lesson>.png``: the whole notebook after Run All, every prediction's answer still hidden;
* ``<lesson>-answered.png``: the same once each hidden answer was shown (its button clicked);
  the charts and panels below are shot so;
* ``<lesson>-chart<i>.png``: the i-th chart drawn outside a panel (a static figure);
* ``<lesson>-panel<i>.png``: panel i (the i-th widget output) as first drawn;
* ``<lesson>-panel<i>-moved.png``: the same panel after one of its dropdowns was changed (the
  control and values are printed); a panel with no other value to pick is said so.

``--docs`` writes one PNG per lesson into ``docs/screenshots/``, for the README: its first panel
as first drawn after Run All (a lesson without one: its first chart, else the top of the notebook),
at 1366x768, recorded mode; with ImageMagick's ``convert`` on the PATH, reduced to 128 colours.
Its hands-on cells are filled with their reference solutions, as a learner who solved them has
them, and lesson 01's ``-handson.png`` (the README's) shows the first one a check judges, with the
check's reply (on the GPU simulated from the recording).

``--executed DIR`` shoots notebooks that ran elsewhere, with their outputs and widget state
(``scripts/execute_notebooks.py``, e.g. live on a GPU host: ``bash scripts/gpu.sh executed``):
nothing is run here, so the PNGs show that machine's live charts as a learner's browser draws
them; panels are shot as saved, none moved.

A tool, not a test: it checks nothing beyond what the browser test's steps assert, and CI does not
run it. Run it before and after changing what a lesson shows, and look at the PNGs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import browser_helpers as bh  # noqa: E402
import test_browser as tb  # noqa: E402  (its steps: open_notebook, run_all_cells, ...)


def _shoot(page, el, path: Path) -> Path:
    """A PNG of one output element, scrolled into view and given a moment to draw."""
    el.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    el.screenshot(path=str(path))
    return path


class _TallEnough:
    """A window tall enough for ``el`` while the block runs (JupyterLab's scroll area would cut an
    element taller than the window at its top); the width, and so the layout, stays."""

    def __init__(self, page, el):
        self.page, self.el, self.size = page, el, page.viewport_size

    def __enter__(self):
        tall = int(self.el.evaluate("e => e.getBoundingClientRect().height")) + 200
        self.page.set_viewport_size({"width": self.size["width"], "height": max(self.size["height"], tall)})
        return self

    def __exit__(self, *exc):
        self.page.set_viewport_size(self.size)


def _say(msg: str) -> None:
    print(f"    {msg}", flush=True)


#: where ``--docs`` writes
DOCS = ROOT / "docs" / "screenshots"


def small_png(path: Path) -> Path:
    """``path`` reduced to 128 colours in place, when ImageMagick's ``convert`` is on the PATH."""
    convert = shutil.which("convert")
    try:
        if (
            convert
            and "ImageMagick" in subprocess.run([convert, "-version"], capture_output=True, text=True).stdout
        ):
            subprocess.run([convert, str(path), "-strip", "-colors", "128", f"png8:{path}"], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        _say(f"{path.name}: kept as Chromium wrote it ({exc})")
    return path


def solve_handson(path: Path) -> int:
    """Fill a notebook copy's hands-on cells with their reference solutions, as a learner who solved
    them has them (``--docs``: the picture of a hands-on cell shows its check's reply to real code).

    Args:
        path: the stripped copy of a lesson, rewritten in place.

    Returns:
        How many cells were filled.
    """
    from labkit.session import handson

    handson.register_topics()
    nb = json.loads(path.read_text())
    filled = 0
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and src.startswith("%%handson "):
            magic = src.splitlines()[0]
            ref = handson.HANDS_ON.get(magic.split()[1])
            if ref is not None:
                cell["source"] = f"{magic}\n{ref.source.strip()}\n".splitlines(keepends=True)
                filled += 1
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return filled


#: a hands-on cell's magic, and the call by which a check judges its code
HANDSON_MAGIC, CHECK_CALL = "%%handson", "check."
#: the lesson whose hands-on cell the README shows
HANDSON_PICTURE = "01"


def shoot_for_docs(page, lab, name: str, out: Path, deadline) -> Path:
    """One PNG of a lesson after Run All: its first panel, else its first chart, else its top; and,
    for lesson `HANDSON_PICTURE`, ``<lesson>-handson.png``: its first checked hands-on cell, solved.

    Args:
        page: the Playwright page.
        lab: the running `LabServer`.
        name: the lesson's file name.
        out: the folder written.
        deadline: the run's `Deadline`.

    Returns:
        The lesson's PNG.
    """
    tb.open_notebook(page, lab, name, deadline)
    tb.run_all_cells(page, name, deadline)
    tb.wait_rendered(page, deadline)
    cells = (
        page.locator(f"{bh.NOTEBOOK} .jp-CodeCell").filter(has_text=HANDSON_MAGIC).filter(has_text=CHECK_CALL)
    )
    if name.startswith(HANDSON_PICTURE) and cells.count():
        cell = cells.first
        with _TallEnough(page, cell):
            small_png(_shoot(page, cell, out / f"{Path(name).stem}-handson.png"))
        _say(f"{name}: its first checked hands-on cell, solved")
    path = out / f"{Path(name).stem}.png"
    panels = page.locator(tb.WIDGET_OUTPUT)
    charts = page.locator(f"{bh.NOTEBOOK} .js-plotly-plot")
    el = panels.first if panels.count() else charts.first if charts.count() else None
    if el is None:
        page.screenshot(path=str(path))
    else:
        with _TallEnough(page, el):
            _shoot(page, el, path)
    _say(f"{name}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return small_png(path)


def shoot_lesson(page, lab, name: str, out: Path, deadline, run: bool = True) -> list:
    """PNGs of one lesson; ``run=False``: as saved (outputs from elsewhere), no cell run, no control moved."""
    stem = Path(name).stem
    written = []
    t0 = time.monotonic()
    tb.open_notebook(page, lab, name, deadline)
    if (
        not run
    ):  # saved widget views carry a "no kernel holds this model" mark a learner's live panel does not
        page.add_style_tag(content=".jupyter-widgets-disconnected::before { display: none !important; }")
    ran = tb.run_all_cells(page, name, deadline, reveal=False) if run else 0.0
    info = tb.wait_rendered(page, deadline) or {"views": []}
    written.append(bh.screenshot_full(page, out / f"{stem}.png"))
    if run and page.locator(f"{bh.NOTEBOOK} {bh.HIDDEN_ANSWER}").count():
        _say(f"{name}: {tb.reveal_answers(page, name, deadline)} hidden answer(s) shown")
        info = tb.wait_rendered(page, deadline) or {"views": []}
        written.append(bh.screenshot_full(page, out / f"{stem}-answered.png"))
    problems = page.evaluate(bh.PROBLEMS_JS)
    layout = page.evaluate(bh.LAYOUT_JS)
    cut = page.evaluate(bh.DROPDOWN_FIT_JS)
    # plotly's empty default axes, no trace: the browser-side race test_browser.py reloads the page for
    empty = [v["cell"] for v in info["views"] for p in v["plots"] if not p["traces"]]
    bh.log(
        f"{name}: ran in {ran:.1f} s, {len(info['views'])} panel(s); problems {problems or 'none'}; "
        f"layout {layout or 'ok'}; cut dropdown options {cut or 'none'}; "
        f"panel charts drawn empty {f'in cells {empty} (run again)' if empty else 'none'}"
    )
    # the static charts too (a chart a cell draws once, outside any panel)
    charts = page.locator(f"{bh.NOTEBOOK} .js-plotly-plot")
    static = [
        charts.nth(k)
        for k in range(charts.count())
        if not charts.nth(k).evaluate(f"e => !!e.closest({json.dumps(bh.WIDGET_OUTPUT)})")
    ]
    for i, el in enumerate(static):
        with _TallEnough(page, el):
            written.append(_shoot(page, el, out / f"{stem}-chart{i}.png"))
    outputs = page.locator(tb.WIDGET_OUTPUT)
    for i in range(outputs.count()):
        el = outputs.nth(i)
        with _TallEnough(page, el):
            written.append(_shoot(page, el, out / f"{stem}-panel{i}.png"))
            if not run:
                continue
            try:
                label, old, new, took = tb.change_a_dropdown(page, i, name, deadline)
                _say(f"panel {i}: {label} {old} -> {new} ({took:.2f} s)")
            except AssertionError as exc:
                _say(f"panel {i}: no control moved ({str(exc).splitlines()[0]})")
                continue
            written.append(_shoot(page, el, out / f"{stem}-panel{i}-moved.png"))
    _say(f"{name}: {len(written)} PNG(s) in {time.monotonic() - t0:.0f} s")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lessons", nargs="*", help="prefixes of lesson file names (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "screenshots")
    ap.add_argument("--width", type=int, default=1366)
    ap.add_argument("--height", type=int, default=768)
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds for the whole run")
    ap.add_argument(
        "--executed",
        type=Path,
        metavar="DIR",
        help="shoot the notebooks in DIR (.ipynb or .ipynb.gz, with outputs) as saved; run nothing",
    )
    ap.add_argument("--docs", action="store_true", help=f"one PNG per lesson into {DOCS.relative_to(ROOT)}/")
    args = ap.parse_args(argv)
    if args.docs:
        if args.executed:
            ap.error("--docs shoots the lessons in recorded mode; it takes no --executed")
        args.out = DOCS

    chromium = bh.which_chromium()
    if chromium is None:
        print("no Chromium: apt-get install chromium, or set LABKIT_CHROMIUM", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    sources = {p.name: p for p in tb.NOTEBOOKS.glob("*.ipynb")}
    if args.executed:
        sources = {p.name.removesuffix(".gz"): p for p in args.executed.glob("*.ipynb*")}
    names = sorted(sources)
    if args.lessons:
        names = [n for n in names if any(n.startswith(a) for a in args.lessons)]
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = bh.Deadline(args.budget)
    scratch = Path(tempfile.mkdtemp(prefix="labkit-shots-"))
    root = scratch / "notebooks"
    root.mkdir()
    for name, src in sources.items():
        if args.executed:
            (root / name).write_bytes(
                gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
            )
        else:
            bh.copy_stripped(src, root / name)
            if args.docs:
                solve_handson(root / name)
    lab = bh.LabServer(root, ROOT, scratch)
    if (
        args.executed
    ):  # signed with this server's key: JupyterLab draws saved widget views only in a trusted notebook
        subprocess.run(
            [sys.executable, "-m", "jupyter", "trust", *map(str, sorted(root.glob("*.ipynb")))],
            env=lab.env(),
            check=True,
            capture_output=True,
        )
    failed = []
    try:
        lab.start()
        lab.wait_ready(deadline)
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                str(scratch / "profile"),
                executable_path=chromium,
                headless=True,
                args=bh.CHROMIUM_ARGS,
                viewport={"width": args.width, "height": args.height},
            )
            try:
                for name in names:
                    page = ctx.new_page()
                    page.set_default_timeout(deadline.ms(60))
                    page.console_errors = []
                    try:
                        if args.docs:
                            shoot_for_docs(page, lab, name, args.out, deadline)
                        else:
                            shoot_lesson(page, lab, name, args.out, deadline, run=not args.executed)
                    except Exception as exc:  # noqa: BLE001 - go on with the next lesson, say which failed
                        failed.append(name)
                        _say(f"{name}: FAILED: {type(exc).__name__}: {exc}")
                        page.screenshot(path=str(args.out / f"{Path(name).stem}-FAILED.png"), full_page=True)
                    finally:
                        page.close()
                        lab.shutdown_sessions()
            finally:
                ctx.close()
    finally:
        lab.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"screenshots in {args.out}" + (f"; FAILED: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
