"""Every lesson as a learner reads it, in a real browser, from each shipped recording.

For each shipped recording, a throw-away JupyterLab (``LABKIT_MODE=recorded``,
``LABKIT_RECORDING=<name>``) over a stripped copy of ``notebooks/``; headless Chromium at
1366x768 with the file browser open runs every lesson (Run All) and, once every chart is drawn,
measures the page (`browser_helpers.READING_JS`):

* in every plotly chart, no text label (trace text, annotation, tick label) over another label or
  over a marker of another trace;
* no output wider than the notebook (a table or a line the learner must scroll sideways to read)
  and no line of printed text wrapped to the next line.

Bounded like tests/test_browser.py: one budget for the module (``LABKIT_READING_BUDGET_S``,
default 900 s), a watchdog past it. Skipped (or failed, with CI set) without Chromium.
"""

from __future__ import annotations

import faulthandler
import json
import os
import time
from pathlib import Path

import browser_helpers as bh
import pytest
import test_browser as tb

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = Path(os.environ.get("LABKIT_ARTIFACTS", ROOT / "artifacts")) / "reading"
BUDGET_S = float(os.environ.get("LABKIT_READING_BUDGET_S", "900"))
RECORDINGS = sorted(p.parent.name for p in (ROOT / "data" / "recordings").glob("*/metadata.json"))
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
#: two text boxes overlap when they share more than this many pixels in both directions
OVERLAP_PX = 2


@pytest.fixture(scope="module")
def deadline():
    d = bh.Deadline(BUDGET_S)
    faulthandler.dump_traceback_later(BUDGET_S + 90, exit=True)
    t0 = time.monotonic()
    try:
        yield d
    finally:
        faulthandler.cancel_dump_traceback_later()
        print(f"\n[browser] tests/test_browser_reading.py took {time.monotonic() - t0:.1f} s", flush=True)


@pytest.fixture(scope="module")
def chromium():
    return tb.find_chromium()


@pytest.fixture(scope="module")
def browser(chromium, deadline, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    with bh.chromium_context(chromium, profile, tb.VIEWPORT, deadline.ms(60)) as ctx:
        yield ctx


_SERVERS: dict = {}


@pytest.fixture(scope="module")
def servers(chromium, deadline, tmp_path_factory):
    """recording -> a JupyterLab answering from it (started on first use, all stopped at the end)."""

    def start(recording: str) -> bh.LabServer:
        if recording not in _SERVERS:
            scratch = tmp_path_factory.mktemp(f"reading-{recording}")
            root = scratch / "notebooks"
            root.mkdir()
            for src in sorted(NOTEBOOKS.glob("*.ipynb")):
                bh.copy_stripped(src, root / src.name)
            server = bh.LabServer(root, ROOT, scratch, extra_env={"LABKIT_RECORDING": recording})
            server.start()
            server.wait_ready(deadline)
            _SERVERS[recording] = server
        return _SERVERS[recording]

    try:
        yield start
    finally:
        for server in _SERVERS.values():
            server.stop()
        _SERVERS.clear()


def answers_given_away(name: str, recording: str, outputs: list) -> list:
    """Each predict or explore exercise whose answer (its leak patterns, computed from
    ``recording``) shows in an output above its check cell."""
    import re

    from labkit.present import check
    from labkit.store import recordings

    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    exercises = {e.name: e for e in check.exercise_list() if e.kind in ("predict", "explore")}
    if not exercises:
        return []
    saved = os.environ.get("LABKIT_RECORDING"), os.environ.get("LABKIT_MODE")
    os.environ.update(LABKIT_RECORDING=recording, LABKIT_MODE="recorded")
    recordings._current = recordings._picked = None
    found = []
    try:
        for i, cell in enumerate(cells):
            src = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            for ex_name in re.findall(r"check\.(\w+)\(", src):
                ex = exercises.get(ex_name)
                if ex is None:
                    continue
                above = "\n".join(outputs[:i])
                for pattern in ex.leak_patterns(ex.truth()):
                    m = re.search(pattern, above)
                    if m:
                        at = above[max(0, m.start() - 60) : m.end() + 20].replace("\n", " ")
                        found.append(
                            {
                                "cell": i,
                                "chart": "",
                                "kind": f"answer of check.{ex_name} shown above it",
                                "what": at,
                            }
                        )
    finally:
        for key, value in zip(("LABKIT_RECORDING", "LABKIT_MODE"), saved):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        recordings._current = recordings._picked = None
    return found


#: (recording, lesson) pairs known to fail, each an expected failure until fixed (strict: a pair
#: that passes must leave this set)
KNOWN: set = set()


def _cases():
    for recording in RECORDINGS:
        for name in LESSONS:
            marks = [pytest.mark.xfail(strict=True, reason="known")] if (recording, name) in KNOWN else []
            yield pytest.param(recording, name, marks=marks, id=f"{recording}-{name[:2]}")


@pytest.mark.parametrize("recording, name", list(_cases()))
def test_lesson_reads_without_overlaps_or_wide_outputs(browser, servers, deadline, recording, name):
    lab = servers(recording)
    page = browser.new_page()
    page.set_default_timeout(deadline.ms(30))
    try:
        tb.open_notebook(page, lab, name, deadline)
        ran = tb.run_all_cells(page, name, deadline)
        tb.wait_rendered(page, deadline)
        page.wait_for_timeout(500)
        found = page.evaluate(bh.READING_JS, OVERLAP_PX)
        found += answers_given_away(name, recording, page.evaluate(bh.OUTPUT_TEXTS_JS))
        found += [
            {"cell": p["cell"], "chart": "", "kind": f"error output ({p['kind']})", "what": p["text"][:200]}
            for p in page.evaluate(bh.PROBLEMS_JS)
        ]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = bh.screenshot_full(page, ARTIFACTS / f"{recording}-{Path(name).stem}.png")
        (ARTIFACTS / f"{recording}-{Path(name).stem}.json").write_text(json.dumps(found, indent=1))
        print(f"\n    {recording} {name}: ran in {ran:.1f} s; {len(found)} problem(s); {shot}", flush=True)
        assert not found, f"{recording} {name}: {len(found)} thing(s) a learner cannot read:\n" + "\n".join(
            f"  cell {f['cell']} {f['chart']!r}: {f['kind']}: {f['what']}" for f in found
        )
    finally:
        page.close()
        lab.shutdown_sessions()
