"""Every lesson as a learner reads it and moves it, in a real browser, from each shipped recording.

For each shipped recording, a throw-away JupyterLab (``LABKIT_MODE=recorded``,
``LABKIT_RECORDING=<name>``) over a stripped copy of ``notebooks/``; headless Chromium at
1366x768 with the file browser open runs every lesson (Run All). Once every chart is drawn:

* the page as read (`browser_helpers.READING_JS`): in every plotly chart, no text label over
  another label or over a marker of another trace; no output wider than the notebook and no line of
  printed text wrapped to the next line; no exercise's answer printed above its check; no error;
* every chart as first drawn, then every control of every panel moved through each of its values
  (each dropdown, the GPU picker and a chart chooser included; a recorded panel offers the values
  recorded one factor away from its base, and the control goes back to its first value before the
  next one moves). After each move, once the chart has redrawn, `browser_helpers.GEOMETRY_JS`
  measures every chart of the panel: the plot keeps its room, no text over other text, no legend or
  annotation over the data, every legend entry drawn, nothing wider than the notebook, every trace
  label in its axis's unit.

Bounded: one budget for the module (``LABKIT_READING_BUDGET_S``, default 1800 s), a watchdog past
it; each redraw waits at most `SETTLE_S`. Skipped (or failed, with CI set) without Chromium.
Screenshots go to ``artifacts/reading/``: each lesson after Run All, and each panel in a state
that has a problem.
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
BUDGET_S = float(os.environ.get("LABKIT_READING_BUDGET_S", "1800"))
RECORDINGS = sorted(p.parent.name for p in (ROOT / "data" / "recordings").glob("*/metadata.json"))
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
#: two text boxes overlap when they share more than this many pixels in both directions
OVERLAP_PX = 2
#: seconds a chart may take to redraw after a control moved
SETTLE_S = 10.0
#: what a learner needs of a chart (`browser_helpers.GEOMETRY_JS`): the plot at least this share of
#: the chart's width, and its subplots together at least this share of its area; two text boxes
#: overlap when they share more than ``overlap_px`` in both directions
LIMITS = {"min_plot_width": 0.5, "min_plot_area": 0.2, "overlap_px": 2}


# Every dropdown of one panel (a widget output): its label, the text of its selected option and
# of every option it offers (a recorded panel marks the values it cannot show "not recorded").
DROPDOWNS_JS = """(out) => [...out.querySelectorAll('.widget-dropdown')].map(dd => {
  const s = dd.querySelector('select');
  return {label: ((dd.querySelector('label') || {}).textContent || '').trim(),
          enabled: !!s && !s.disabled && !!dd.offsetParent,
          current: s && s.options[s.selectedIndex] ? s.options[s.selectedIndex].text : '',
          options: s ? [...s.options].filter(o => !o.disabled).map(o => o.text) : []};
})"""


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
    """Each predict or explore exercise, and each explain that asks for a worked-out number, whose
    answer (its leak patterns, computed from ``recording``) shows in an output above its check cell."""
    import re

    from labkit.present import check
    from labkit.store import recordings

    cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
    exercises = {
        e.name: e
        for e in check.exercise_list()
        if e.kind in ("predict", "explore") or (e.kind == "explain" and not e.choices)
    }
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


def measure(charts, where: str) -> list:
    """The problems `browser_helpers.GEOMETRY_JS` finds in each chart of a locator, each a line
    naming the chart and ``where`` (the state it is in); a problem found several times in one
    chart is one line, with its count."""
    found = []
    for k in range(charts.count()):
        chart = charts.nth(k)
        title = chart.evaluate(
            "e => ((e.querySelector('.gtitle') || {}).textContent || '(untitled)').slice(0, 60)"
        )
        if title == "(untitled)":  # a FigureWidget not drawn yet shows plotly's empty default
            continue
        lines = [
            f"{where}, chart {title!r}: {p['kind']}: {p['what']}"
            for p in chart.evaluate(bh.GEOMETRY_JS, LIMITS)
        ]
        found += [
            line + (f" ({lines.count(line)} times)" if lines.count(line) > 1 else "")
            for line in dict.fromkeys(lines)
        ]
    return found


#: a redraw is over once the panel's first visible chart has differed from before for this long,
#: unchanged (milliseconds), read this often (milliseconds), in the page
SETTLED_MS, READ_EVERY_MS = 250, 50

# The signature (`browser_helpers.CHART_SIGNATURE_JS`) of a panel's first visible chart, read in the
# page: a chart chooser shows another chart, so the first visible one is looked up at each read.
_FIRST_CHART = (
    """const firstChart = (out) => [...out.querySelectorAll('.js-plotly-plot')].find(e => {
  const r = e.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
});
const signature = """
    + bh.CHART_SIGNATURE_JS
    + ";"
)
FIRST_CHART_SIGNATURE_JS = (
    "(out) => {" + _FIRST_CHART + " const c = firstChart(out); return c ? signature(c) : ''; }"
)
# Wait in the page until that signature differs from ``before`` and has stayed the same for
# ``settledMs``: "settled", "changed" (still changing at ``timeoutMs``) or "unchanged".
SETTLE_JS = (
    "async (out, [before, settledMs, everyMs, timeoutMs]) => {"
    + _FIRST_CHART
    + """
  const t0 = performance.now();
  let last = null, since = 0;
  while (performance.now() - t0 < timeoutMs) {
    await new Promise(r => setTimeout(r, everyMs));
    const c = firstChart(out), now = c ? signature(c) : '';
    if (now === before) continue;
    if (now !== last) { last = now; since = performance.now(); }
    else if (performance.now() - since >= settledMs) return 'settled';
  }
  return last === null ? 'unchanged' : 'changed';
}"""
)


def settle(out, before: str, deadline) -> bool:
    """Wait until the first visible chart of panel ``out`` differs from ``before`` (its
    `FIRST_CHART_SIGNATURE_JS`) and stays the same for `SETTLED_MS`, reading it every `READ_EVERY_MS`
    in the page. Returns whether it changed within `SETTLE_S`."""
    timeout_ms = 1000 * min(SETTLE_S, max(deadline.left(), 1))
    return out.evaluate(SETTLE_JS, [before, SETTLED_MS, READ_EVERY_MS, timeout_ms]) != "unchanged"


def select(out, index: int, option: str, deadline) -> bool:
    """Choose ``option`` in the panel's ``index``-th dropdown and wait for its first visible chart
    to redraw. Returns whether it changed."""
    before = out.evaluate(FIRST_CHART_SIGNATURE_JS)
    out.locator(".widget-dropdown").nth(index).locator("select").select_option(label=option, timeout=5000)
    return settle(out, before, deadline)


def move_every_control(page, out, panel: int, deadline) -> tuple:
    """Each dropdown of panel ``out`` through each value it offers, measuring after each move.
    Returns (problems, moves made)."""
    found, moves = [], 0
    charts = out.locator(
        ".js-plotly-plot >> visible=true"
    )  # a panel keeps the charts it switched away from, hidden
    found += measure(charts, f"panel {panel} as first drawn")
    for index, dd in enumerate(out.evaluate(DROPDOWNS_JS)):
        if not dd["enabled"]:
            continue
        start = dd["current"]
        for option in dd["options"]:
            if option == start or "not recorded" in option:
                continue
            deadline.check(f"panel {panel}: {dd['label']} = {option}")
            # the options of this control at the base can differ from those after a move: read them again
            now = out.evaluate(DROPDOWNS_JS)[index]
            if option not in now["options"] or not now["enabled"]:
                continue
            if not select(out, index, option, deadline):
                found.append(f"panel {panel}: {dd['label']} = {option!r}: no redraw within {SETTLE_S:.0f} s")
            moves += 1
            problems = measure(charts, f"panel {panel}, {dd['label']} = {option!r}")
            if problems:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                slug = "".join(c if c.isalnum() else "_" for c in f"{panel}-{dd['label']}-{option}")[:80]
                out.screenshot(path=str(ARTIFACTS / f"{page.lesson}-{slug}.png"))
            found += problems
        if out.evaluate(DROPDOWNS_JS)[index]["current"] != start:
            select(out, index, start, deadline)
    return found, moves


#: (recording, lesson) pairs known to fail, each an expected failure until fixed (strict: a pair
#: that passes must leave this set)
KNOWN: set = set()


def _cases():
    for recording in RECORDINGS:
        for name in LESSONS:
            marks = [pytest.mark.xfail(strict=True, reason="known")] if (recording, name) in KNOWN else []
            yield pytest.param(recording, name, marks=marks, id=f"{recording}-{name[:2]}")


def read_as_run(page, name: str, recording: str) -> list:
    """What a learner cannot read on the page after Run All: overlapping labels, wide outputs,
    answers shown above their checks, error outputs (one line each)."""
    found = page.evaluate(bh.READING_JS, OVERLAP_PX)
    found += answers_given_away(name, recording, page.evaluate(bh.OUTPUT_TEXTS_JS))
    found += [
        {"cell": p["cell"], "chart": "", "kind": f"error output ({p['kind']})", "what": p["text"][:200]}
        for p in page.evaluate(bh.PROBLEMS_JS)
    ]
    return [f"cell {f['cell']} {f['chart']!r}: {f['kind']}: {f['what']}" for f in found]


@pytest.mark.parametrize("recording, name", list(_cases()))
def test_lesson_reads_cleanly_as_every_control_moves(browser, servers, deadline, recording, name):
    lab = servers(recording)
    page = browser.new_page()
    page.lesson = f"{recording}-{Path(name).stem}"
    page.set_default_timeout(deadline.ms(30))
    t0 = time.monotonic()
    try:
        tb.open_notebook(page, lab, name, deadline)
        ran = tb.run_all_cells(page, name, deadline)
        tb.wait_rendered(page, deadline)
        page.wait_for_timeout(500)
        found = read_as_run(page, name, recording)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = bh.screenshot_full(page, ARTIFACTS / f"{page.lesson}.png")
        static = page.locator(
            f"{bh.NOTEBOOK} .jp-OutputArea-output:not(:has(> .jupyter-widgets)) .js-plotly-plot"
        )
        found += measure(static, "as first drawn")
        outputs = page.locator(tb.WIDGET_OUTPUT)
        moves = 0
        for i in range(outputs.count()):
            out = outputs.nth(i)
            out.scroll_into_view_if_needed()
            problems, n = move_every_control(page, out, i, deadline)
            found += problems
            moves += n
        (ARTIFACTS / f"{page.lesson}.json").write_text(json.dumps(found, indent=1))
        print(
            f"\n    {recording} {name}: ran in {ran:.1f} s; {outputs.count()} panel(s), {moves} move(s); "
            f"{len(found)} problem(s) in {time.monotonic() - t0:.1f} s; {shot}",
            flush=True,
        )
        assert not found, f"{recording} {name}: {len(found)} thing(s) a learner cannot read:\n" + "\n".join(
            f"  {f}" for f in found
        )
    finally:
        page.close()
        lab.shutdown_sessions()
