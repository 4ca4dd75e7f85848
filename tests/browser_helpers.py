"""Helpers for tests/test_browser.py: a throw-away JupyterLab server and the page-side probes.

Nothing here touches the repository's notebooks: the server runs on a temporary copy (outputs
stripped), with its own Jupyter config, data, runtime, settings and workspace folders, so a run
neither reads nor writes the user's Jupyter state. Every process the server starts (kernels
included) carries a marker in its environment; `LabServer.stop` ends the server's process group
and then any process still carrying the marker, by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Dict, List, Optional

MARKER_VAR = "LABKIT_BROWSER_TEST_RUN"

# Chromium in a container: no sandbox (root), no GPU, nothing fetched from Google at start.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# User settings for the throw-away JupyterLab: every cell attached to the DOM (the default
# windowing leaves off-screen cells unrendered, and their charts with them), no news/update
# requests to the internet.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "scrollPastEnd": False,
    },
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


class Deadline:
    """One budget for a whole module of browser tests."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def ms(self, cap_s: float) -> float:
        """Milliseconds for a Playwright timeout: ``cap_s`` or what is left, whichever is less
        (at least 1 s, so an exhausted budget fails fast with a timeout, not a hang)."""
        return max(1.0, min(cap_s, self.left())) * 1000

    def check(self, what: str) -> None:
        if self.left() <= 0:
            raise TimeoutError(f"browser tests ran out of their {self.seconds:.0f} s budget ({what})")


def log(msg: str) -> None:
    print(f"[browser {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def truthy_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- notebooks ---------------------------------------------------------------------------------
def copy_stripped(src: Path, dst: Path) -> None:
    """Copy a notebook without outputs or execution counts: whatever the page shows comes from
    this run, and 'every cell ran' is simply 'every code cell has a number'."""
    nb = json.loads(src.read_text())
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    dst.write_text(json.dumps(nb, indent=1))


#: smoke_notebook(labkit_figures=True): labkit's FigureWidgets (`labkit.draw.figure_widget`): the
#: kernel's first (it carries plotly's front end) is closed at once, so the next carries it again;
#: a third, in the same box, shares it (only the loader comes with it)
LABKIT_FIGURES = """from labkit.draw import figure_widget as figure
figure.new_figure_widget(go.Bar(x=["a"], y=[1])).close()
fig = figure.new_figure_widget(go.Bar(x=["a", "b", "c"], y=DATA["fp16"]))
assert figure.carrier() is fig
other = figure.new_figure_widget(go.Scatter(x=[1, 2, 3], y=[2, 1, 3]), layout={"width": 900, "height": 250})
assert figure.carrier() is fig and len(other._esm) < 10_000
fig.update_layout(width=900)  # as labkit's panels do (plotly/plotly.py#5208: drawn before it is in the page)"""


def smoke_notebook(labkit_figures: bool = False) -> dict:
    """A minimal panel of the shape labkit's panels take: a plotly FigureWidget inside an
    ipywidgets VBox with a Dropdown that changes the bars in place. It tells 'the widget stack
    is broken' apart from 'a lesson is broken'. ``labkit_figures``: labkit's FigureWidgets instead
    (`LABKIT_FIGURES`), two in the box."""
    make = (
        LABKIT_FIGURES
        if labkit_figures
        else 'fig = go.FigureWidget(go.Bar(x=["a", "b", "c"], y=DATA["fp16"]))'
    )
    src = (
        """import ipywidgets as W
import plotly.graph_objects as go

DATA = {"fp16": [3, 1, 2], "fp32": [1, 4, 9]}
"""
        + make
        + """
fig.update_layout(height=300, title="smoke")
dd = W.Dropdown(options=list(DATA), value="fp16", description="dtype")

def on_change(change):
    with fig.batch_update():
        fig.data[0].y = DATA[change["new"]]

dd.observe(on_change, names="value")
"""
        + ("W.VBox([dd, fig, other])" if labkit_figures else "W.VBox([dd, fig])")
    )
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "smoke0",
                "metadata": {},
                "outputs": [],
                "source": src,
            }
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


# ---- the server ----------------------------------------------------------------------------------
class LabServer:
    """``python -m jupyterlab`` from this interpreter's environment, on 127.0.0.1:<free port>,
    a random token, serving ``root``. Its output goes to ``root.parent / 'jupyterlab.log'``."""

    def __init__(self, root: Path, repo: Path, scratch: Path, extra_env: Optional[Dict[str, str]] = None):
        self.root = root
        self.extra_env = dict(extra_env or {})
        self.repo = repo
        self.token = secrets.token_hex(16)
        self.marker = secrets.token_hex(8)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = scratch / "jupyterlab.log"
        self.scratch = scratch
        self.proc: Optional[subprocess.Popen] = None
        self._log = None

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        bindir = str(Path(sys.executable).parent)
        dirs = {}
        for var in (
            "JUPYTER_CONFIG_DIR",
            "JUPYTER_DATA_DIR",
            "JUPYTER_RUNTIME_DIR",
            "JUPYTERLAB_SETTINGS_DIR",
            "JUPYTERLAB_WORKSPACES_DIR",
            "IPYTHONDIR",
        ):
            d = self.scratch / var.lower()
            d.mkdir(parents=True, exist_ok=True)
            dirs[var] = str(d)
        env.update(dirs)
        env.pop("JUPYTER_PATH", None)
        env.update(
            {
                "LABKIT_MODE": "recorded",
                # a new learner's cache folder: no exercise answered yet (labkit.store.progress)
                "LABKIT_CACHE": str(self.scratch / "labkit-cache"),
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(self.repo), os.environ.get("PYTHONPATH", "")) if p
                ),
                "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                "PYTHONUNBUFFERED": "1",
                "MPLBACKEND": "Agg",
                MARKER_VAR: self.marker,
            }
        )
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        env = self.env()
        settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
        for rel, value in LAB_SETTINGS.items():
            p = settings / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(value))
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=False",
            "--allow-root",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        self._log = open(self.log_path, "wb")
        log(f"starting JupyterLab on {self.base} (root {self.root}; log {self.log_path})")
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def api(self, path: str, method: str = "GET", timeout: float = 5.0):
        sep = "&" if "?" in path else "?"
        req = urllib.request.Request(f"{self.base}{path}{sep}token={self.token}", method=method)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_ready(self, deadline: Deadline, limit_s: float = 90.0) -> float:
        t0 = time.monotonic()
        last = ""
        while time.monotonic() - t0 < min(limit_s, max(deadline.left(), 1.0)):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with {self.proc.returncode} before it was ready:\n{self.log_tail()}"
                )
            try:
                status = self.api("/api/status", timeout=2.0)
                if isinstance(status, dict) and "started" in status:
                    return time.monotonic() - t0
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.25)
        raise TimeoutError(
            f"JupyterLab not ready on {self.base}/api/status after {time.monotonic() - t0:.0f} s "
            f"(last: {last})\n{self.log_tail()}"
        )

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def kernels(self) -> List[dict]:
        try:
            return self.api("/api/kernels") or []
        except (urllib.error.URLError, OSError, ValueError):
            return []

    def shutdown_sessions(self) -> None:
        """End every kernel session (best effort): one notebook's kernel never outlives its test."""
        try:
            for s in self.api("/api/sessions") or []:
                self.api(f"/api/sessions/{s['id']}", method="DELETE", timeout=10.0)
        except (urllib.error.URLError, OSError, ValueError):
            pass

    def stop(self) -> None:
        """Stop the server and every process it started, even when the tests failed."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.api("/api/shutdown", method="POST", timeout=5.0)  # shuts kernels down cleanly
            except (urllib.error.URLError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        # kernels run in sessions of their own: end whatever still carries this run's marker
        left = kill_marked(self.marker)
        if left:
            log(f"ended {len(left)} leftover process(es) of this run: {left}")
        if self._log:
            self._log.close()


def marked_pids(marker: str) -> List[int]:
    """Pids of processes (other than this one) whose environment has MARKER_VAR=marker (Linux)."""
    want = f"{MARKER_VAR}={marker}".encode()
    pids = []
    for d in Path("/proc").glob("[0-9]*"):
        pid = int(d.name)
        if pid == os.getpid():
            continue
        try:
            if want in (d / "environ").read_bytes().split(b"\0"):
                pids.append(pid)
        except OSError:
            continue
    return pids


def kill_marked(marker: str) -> List[int]:
    pids = marked_pids(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pids


# ---- page-side probes ----------------------------------------------------------------------------
# The one notebook panel on screen (each test opens its notebook in a workspace of its own).
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# A prediction's answer hidden until answered (labkit.present.hidden: an ipywidgets Output with
# this class; a button in it shows the answer without predicting).
HIDDEN_ANSWER = ".labkit-after-answer"
# its button (once the answer is shown, a chart's or a panel's own buttons are in it too)
SHOW_ANSWER = ".labkit-show-answer"
# An output that holds a widget view (JupyterLab 4 puts no mime type on it; the view's root
# element has the class jupyter-widgets): a panel, not the Output that holds a hidden answer (a
# panel shown in one is found inside it).
WIDGET_OUTPUT = ".jp-OutputArea-output:has(> .jupyter-widgets):not(:has(.labkit-after-answer))"

RUN_STATE_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!nb) return null;
  const cells = [...nb.querySelectorAll('.jp-CodeCell')];
  const prompts = cells.map(c => {
    const src = (c.querySelector('.jp-InputArea-editor .cm-content') || {}).textContent || '';
    const p = (c.querySelector('.jp-InputPrompt') || {}).textContent || '';
    return {empty: src.trim() === '', prompt: p.trim()};
  });
  const ind = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
  return {prompts, indicator: ind ? ind.getAttribute('data-status') : null};
}"""

# Everything that says "this output is broken", per output, with the cell's index.
PROBLEMS_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const found = [];
  const cells = [...nb.querySelectorAll('.jp-Cell')];
  cells.forEach((cell, i) => {
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      const mime = out.getAttribute('data-mime-type') || '';
      const text = out.innerText || '';
      if (mime === 'application/vnd.jupyter.stderr' && /Traceback|Error|Exception/.test(text))
        found.push({cell: i, kind: 'stderr', text: text.slice(0, 1500)});
      for (const needle of ['Error displaying widget', 'Model not found', 'Failed to load model class',
                            'Could not create a view', 'unexpected error (please report it)',
                            'Javascript Error', 'Error rendering output'])
        if (text.includes(needle)) found.push({cell: i, kind: needle, text: text.slice(0, 1500)});
      if (out.querySelector('.jp-RenderedJavaScript, .jp-mod-error'))
        found.push({cell: i, kind: 'render error', text: text.slice(0, 1500)});
    }
  });
  return found;
}"""

# Per widget output: its controls and its plotly charts, with their sizes.
WIDGETS_JS = """() => {
  const WIDGET_OUTPUT = '.jp-OutputArea-output:has(> .jupyter-widgets):not(:has(.labkit-after-answer))';
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const cells = [...nb.querySelectorAll('.jp-Cell')];
  const views = [];
  cells.forEach((cell, i) => {
    for (const out of cell.querySelectorAll(WIDGET_OUTPUT)) {
      const plots = [...out.querySelectorAll('.js-plotly-plot')].map(p => {
        const r = p.getBoundingClientRect();
        const sv = p.querySelector('.main-svg');
        return {w: r.width, h: r.height, svg: p.querySelectorAll('.main-svg').length,
                svg_w: sv ? Math.round(sv.getBoundingClientRect().width) : 0,
                traces: p.querySelectorAll('.main-svg .trace').length};
      });
      views.push({cell: i, html: out.innerHTML.length,
                  controls: out.querySelectorAll('.widget-dropdown select, .widget-slider, .widget-text input, .widget-button, .widget-toggle-buttons').length,
                  plots});
    }
  });
  const all = [...nb.querySelectorAll('.js-plotly-plot')];
  return {views, plots: all.length, svgs: nb.querySelectorAll('.js-plotly-plot .main-svg').length,
          undrawn: all.filter(p => !p.querySelector('.main-svg')).length,
          static_plots: all.filter(p => !p.closest(WIDGET_OUTPUT)).length};
}"""

# What the user sees of a chart: the traces' SVG geometry and text, plus the data plotly holds.
CHART_SIGNATURE_JS = """(el) => {
  const svg = [...el.querySelectorAll('.main-svg .trace path, .main-svg .trace text, .main-svg .trace .point, .gtitle')]
      .map(n => (n.getAttribute('d') || '') + (n.textContent || '') + (n.getAttribute('transform') || ''));
  const ticks = [...el.querySelectorAll('.main-svg .xtick text, .main-svg .ytick text')].map(n => n.textContent);
  const data = (el.data || []).map(t => {
    const arr = v => (v && v.length !== undefined) ? Array.from(v).map(String) : v;
    return {name: t.name, x: arr(t.x), y: arr(t.y)};
  });
  return JSON.stringify({svg, ticks, data});
}"""


# How each plotly chart is laid out: its drawn width against the width it was given (wider: cut
# off; much narrower: e.g. plotly's 700 px fallback when it could not measure), and whether
# its subtitle sits on its title (what happens when plotly.js draws into an element that is not
# in the page yet: nothing can be measured).
LAYOUT_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const cells = [...nb.querySelectorAll('.jp-Cell')];
  const found = [];
  cells.forEach((cell, i) => {
    for (const p of cell.querySelectorAll('.js-plotly-plot')) {
      const svg = p.querySelector('.main-svg');
      if (!svg) continue;
      const widget = !!p.closest('.jp-OutputArea-output:has(> .jupyter-widgets)');
      const title = p.querySelector('.gtitle'), sub = p.querySelector('.gtitle-subtitle');
      const name = title ? title.textContent.slice(0, 60) : '(untitled)';
      const out = p.closest('.jp-OutputArea-output') || p;
      const box = out.getBoundingClientRect().width, drawn = svg.getBoundingClientRect().width;
      if (drawn > box + 1)
        found.push({cell: i, widget, chart: name, problem: `drawn ${Math.round(drawn)} px wide in a ${Math.round(box)} px output: its right side is cut off`});
      else if (drawn < 0.8 * box)
        found.push({cell: i, widget, chart: name, problem: `drawn ${Math.round(drawn)} px wide in a ${Math.round(box)} px output`});
      if (title && sub) {
        const t = title.getBoundingClientRect(), s = sub.getBoundingClientRect();
        if (s.top < t.bottom - 2)
          found.push({cell: i, widget, chart: name, problem: `subtitle drawn over the title (${Math.round(t.bottom - s.top)} px overlap)`});
      }
    }
  });
  return found;
}"""


# Every dropdown in a widget output whose longest option is wider than the room its <select>
# gives text (its width less padding and the arrow): the option would show cut ("random_sha").
# Text is measured with a canvas in the select's own computed font.
DROPDOWN_FIT_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const cells = [...nb.querySelectorAll('.jp-Cell')];
  const ctx = document.createElement('canvas').getContext('2d');
  const found = [];
  cells.forEach((cell, i) => {
    for (const sel of cell.querySelectorAll('.jp-OutputArea-output .widget-dropdown select')) {
      if (!sel.offsetParent) continue;  // hidden control
      const cs = getComputedStyle(sel);
      ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
      for (const o of sel.options) {
        const w = ctx.measureText(o.text).width;
        if (w > room + 0.5) {
          const label = (sel.closest('.widget-dropdown').querySelector('label') || {}).textContent || '?';
          found.push({cell: i, control: label.trim(), option: o.text, text_px: Math.round(w), room_px: Math.round(room)});
        }
      }
    }
  });
  return found;
}"""


def poll(fn: Callable[[], object], timeout_s: float, interval_s: float = 0.25):
    """Call ``fn`` until it returns something truthy; return it, or the last value at timeout."""
    end = time.monotonic() + timeout_s
    value = fn()
    while not value and time.monotonic() < end:
        time.sleep(interval_s)
        value = fn()
    return value


def screenshot_full(page, path: Path, max_height: int = 15000) -> Path:
    """A screenshot of the whole notebook: JupyterLab scrolls inside a fixed-height shell, so the
    viewport is made as tall as the notebook (capped) for the shot, then put back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or {"width": 1400, "height": 1000}
    need = page.evaluate("""() => {
      const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
      if (!outer) return 0;
      return outer.scrollHeight + outer.getBoundingClientRect().top + 60;
    }""")
    height = int(min(max(size["height"], need or 0), max_height))
    try:
        if height > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": height})
        # the notebook keeps its scroll position (the last cell, after Run All): back to the top
        page.evaluate("""() => {
          const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
          if (outer) outer.scrollTop = 0;
        }""")
        page.wait_for_timeout(700)
        page.screenshot(path=str(path), full_page=True)
    finally:
        if height > size["height"]:
            page.set_viewport_size(size)
    return path


def collapse_left_sidebar(page) -> None:
    """Give the notebook the whole width (the file browser is open in a fresh workspace)."""
    tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if tab.count():
        tab.first.click()


def relpath(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def which_chromium(default: str = "/usr/bin/chromium") -> Optional[str]:
    path = os.environ.get("LABKIT_CHROMIUM") or default
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    found = shutil.which(path)
    return found


_PROMPT_NUM = re.compile(r"^\[\s*\d+\s*\]:?$")


def run_summary(state: Optional[dict]) -> Dict[str, int]:
    """Counts of code cells by prompt: done ([3]:), running/queued ([*]:), not run ([ ]:)."""
    out = {"done": 0, "busy": 0, "not_run": 0, "empty": 0}
    for p in (state or {}).get("prompts", []):
        if p["empty"]:
            out["empty"] += 1
        elif _PROMPT_NUM.match(p["prompt"]):
            out["done"] += 1
        elif "*" in p["prompt"]:
            out["busy"] += 1
        else:
            out["not_run"] += 1
    return out


# What a learner cannot read: in every plotly chart of the notebook, a text label (trace text,
# annotation, tick label) drawn over another label, or over a marker of another trace; and every
# output wider than the notebook gives it (a table or a line the learner must scroll sideways to
# read, or a line of text wrapped mid-word). Boxes are the elements' client rectangles; two
# boxes overlap when they share more than `OVERLAP_PX` in both directions.
READING_JS = """(OVERLAP_PX) => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  const cells = [...nb.querySelectorAll('.jp-Cell')];
  const found = [];
  const shown = el => {
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return null;
    for (let e = el; e && e.tagName !== 'svg'; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return null;
      if (e.getAttribute && e.getAttribute('opacity') === '0') return null;
    }
    if (el.textContent !== undefined && el.tagName === 'text' && !el.textContent.trim()) return null;
    return r;
  };
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > OVERLAP_PX &&
                         Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > OVERLAP_PX;
  cells.forEach((cell, i) => {
    for (const p of cell.querySelectorAll('.js-plotly-plot')) {
      // every labkit chart has a title: one without is a FigureWidget not drawn yet (its empty
      // default axes), which the learner never reads
      if (!p.querySelector('.gtitle')) continue;
      const title = (p.querySelector('.gtitle') || {}).textContent || '(untitled)';
      const chart = title.slice(0, 70);
      const traceOf = el => { const t = el.closest('g.trace'); return t ? t : null; };
      const labels = [];
      for (const el of p.querySelectorAll('.main-svg g.trace text, .main-svg .annotation-text, .main-svg .xtick text, .main-svg .ytick text')) {
        const r = shown(el);
        if (r) labels.push({el, r, trace: traceOf(el), text: el.textContent.trim().slice(0, 40)});
      }
      const markers = [];
      for (const el of p.querySelectorAll('.main-svg .scatterlayer g.trace path.point')) {
        const r = shown(el);
        if (r) markers.push({el, r, trace: traceOf(el)});
      }
      for (let a = 0; a < labels.length; a++) {
        for (let b = a + 1; b < labels.length; b++) {
          if (meet(labels[a].r, labels[b].r))
            found.push({cell: i, chart, kind: 'label over label', what: `"${labels[a].text}" and "${labels[b].text}"`});
        }
        for (const m of markers) {
          if (labels[a].trace && m.trace === labels[a].trace) continue;
          if (!labels[a].trace && labels[a].el.closest('.xtick, .ytick')) continue;
          if (meet(labels[a].r, m.r))
            found.push({cell: i, chart, kind: 'label over a marker of another trace', what: `"${labels[a].text}"`});
        }
      }
    }
    for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
      if (out.querySelector('.jupyter-widgets')) continue;  // panels: their charts are checked above
      if (out.scrollWidth > out.clientWidth + 2)
        found.push({cell: i, chart: '', kind: 'output wider than the notebook',
                    what: `${out.scrollWidth} px in ${out.clientWidth} px: ${(out.innerText || '').slice(0, 80)}`});
      for (const pre of out.querySelectorAll('pre')) {
        const lines = pre.textContent.replace(/\\n$/, '').split('\\n').length;
        const lh = parseFloat(getComputedStyle(pre).lineHeight) || 17;
        if (pre.getBoundingClientRect().height > lines * lh + lh / 2)
          found.push({cell: i, chart: '', kind: 'text wrapped to the next line',
                      what: (pre.textContent || '').split('\\n').find(l => l.length > 0 && pre.clientWidth < l.length * 7.2) || pre.textContent.slice(0, 80)});
      }
    }
  });
  return found;
}"""


# The text a learner sees in each cell's outputs (widget panels and charts included), by cell.
OUTPUT_TEXTS_JS = """() => {
  const nb = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  return [...nb.querySelectorAll('.jp-Cell')].map(cell =>
    [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => {
      const svgText = [...o.querySelectorAll('svg text')].map(t => t.textContent).join(' ');
      return (o.innerText || '') + ' ' + svgText;
    }).join('\\n'));
}"""


@contextlib.contextmanager
def chromium_context(executable: str, profile: Path, viewport: dict, timeout_ms: float):
    """Headless Chromium at ``executable`` with a fresh ``profile`` folder, as Playwright's
    persistent context (what the browser tests drive); closed, and Playwright stopped, on exit."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    ctx = None
    try:
        ctx = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=viewport,
            timeout=timeout_ms,
        )
        yield ctx
    finally:
        try:
            if ctx is not None:
                ctx.close()
        finally:
            pw.stop()


# How one plotly chart is laid out, as a learner would judge it, measured on the drawn page
# (plotly.js's own layout, `gd._fullLayout`, and the SVG's client rectangles). ``el`` is the chart
# (`.js-plotly-plot`); ``o`` the thresholds (`tests/test_browser_controls.py`). Problems found:
#
# * the plot area: the subplots' drawn width less than ``o.min_plot_width`` of the chart's width,
#   or their summed area less than ``o.min_plot_area`` of the chart's (a legend or a margin that
#   grew until the data had no room left);
# * a text box over another: titles, subtitles, axis titles, tick labels, trace labels, annotations
#   (footnotes, subplot titles) and legend entries, pairwise, sharing more than ``o.overlap_px``;
# * a legend or an annotation over the data: its box over a bar, a marker or a point of a line;
# * a legend entry not drawn: fewer entries than traces shown in a legend, or an entry outside
#   its legend's box or the chart (plotly scrolls or cuts a legend taller than its room);
# * the chart wider than its output, or than the notebook;
# * a trace label in another unit than its value axis (``10.16 ms`` on an axis in us), unless its
#   value is under 0.01 of the axis's unit and so written in a smaller one (``131 B`` on MiB).
GEOMETRY_JS = """(el, o) => {
  const found = [];
  const gd = el, fl = gd._fullLayout;
  const svg = gd.querySelector('.main-svg');
  if (!fl || !svg) return found;
  const add = (kind, what) => found.push({kind, what});
  const shown = e => {
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return null;
    for (let x = e; x && x !== gd; x = x.parentElement) {
      const cs = getComputedStyle(x);
      if (cs.display === 'none' || cs.visibility === 'hidden' || parseFloat(cs.opacity) === 0) return null;
      if (x.getAttribute && x.getAttribute('opacity') === '0') return null;
    }
    if (e.tagName === 'text' && !e.textContent.trim()) return null;
    return r;
  };
  const meet = (a, b, px) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > px &&
                             Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > px;
  const inside = (a, b, px) => a.left >= b.left - px && a.right <= b.right + px &&
                               a.top >= b.top - px && a.bottom <= b.bottom + px;
  const W = fl.width, H = fl.height;
  // -- the plot area --
  let area = 0, left = Infinity, right = -Infinity;
  for (const k of Object.keys(fl._plots || {})) {
    const p = fl._plots[k];
    if (!p.xaxis || !p.yaxis) continue;
    area += p.xaxis._length * p.yaxis._length;
    left = Math.min(left, p.xaxis._offset);
    right = Math.max(right, p.xaxis._offset + p.xaxis._length);
  }
  if (right > left) {
    if (right - left < o.min_plot_width * W)
      add('plot squeezed', `the plot is ${Math.round(right - left)} px wide in a ${W} px chart (margins l ${Math.round(fl._size.l)}, r ${Math.round(fl._size.r)})`);
    if (area < o.min_plot_area * W * H)
      add('plot squeezed', `the plot area is ${(100 * area / (W * H)).toFixed(0)} % of the chart`);
  }
  // -- text over text --
  const texts = [];
  const SEL = '.gtitle, .gtitle-subtitle, [class^="g-"][class$="title"] text, .xtick text, .ytick text, ' +
              'g.trace text, .annotation-text, .legendtext';
  for (const t of svg.parentElement.querySelectorAll(SEL)) {
    const r = shown(t);
    if (!r) continue;
    const kind = t.closest('.xtick, .ytick') ? 'tick' : t.closest('.legendtext, .traces') ? 'legend' :
                 t.closest('g.trace') ? 'trace' : t.classList.contains('annotation-text') ? 'annotation' : 'title';
    texts.push({r, kind, trace: t.closest('g.trace'), text: t.textContent.trim().slice(0, 50)});
  }
  for (let a = 0; a < texts.length; a++)
    for (let b = a + 1; b < texts.length; b++) {
      const A = texts[a], B = texts[b];
      if (A.kind === 'legend' && B.kind === 'legend') continue;  // one legend's own rows
      if (meet(A.r, B.r, o.overlap_px))
        add('text over text', `${A.kind} "${A.text}" and ${B.kind} "${B.text}"`);
    }
  // -- legends and annotations over the data --
  const data = [];
  for (const p of svg.querySelectorAll('.barlayer .point path, .scatterlayer path.point')) {
    const r = shown(p);
    if (r) data.push(r);
  }
  for (const line of svg.querySelectorAll('.scatterlayer path.js-line')) {
    if (!shown(line)) continue;
    const n = line.getTotalLength(), m = line.getScreenCTM();
    if (!m || !n) continue;
    const steps = Math.min(400, Math.max(20, Math.round(n / 4)));
    for (let i = 0; i <= steps; i++) {
      const q = line.getPointAtLength(n * i / steps);
      const x = m.a * q.x + m.c * q.y + m.e, y = m.b * q.x + m.d * q.y + m.f;
      data.push({left: x - 1, right: x + 1, top: y - 1, bottom: y + 1});
    }
  }
  const boxes = [];
  const LEGENDS = '.infolayer > g[class^="legend"]';  // 'legend', 'legend2', ...: one group per legend
  for (const lg of svg.parentElement.querySelectorAll(LEGENDS)) {
    const bg = lg.querySelector('.bg'), r = bg && shown(bg);
    if (r) boxes.push({r, what: 'legend "' + [...lg.querySelectorAll('.legendtext')].map(t => t.textContent).join(' | ').slice(0, 80) + '"'});
  }
  for (const a of svg.parentElement.querySelectorAll('.annotation')) {
    const t = a.querySelector('.annotation-text'), r = t && shown(t);
    if (r) boxes.push({r, what: 'annotation "' + t.textContent.slice(0, 60) + '"'});
  }
  for (const b of boxes) {
    const hit = data.filter(d => meet(b.r, d, 0)).length;
    if (hit) add('legend or annotation over the data', `${b.what} covers ${hit} point(s) of the data`);
  }
  // -- every legend entry drawn --
  if (fl.showlegend) {
    const want = (gd._fullData || []).filter(t => t.visible === true && t.showlegend).length;
    const entries = [...svg.parentElement.querySelectorAll(LEGENDS.replace('>', '>') + ' .traces')];
    if (entries.length < want) add('legend entry not drawn', `${entries.length} legend entries for ${want} traces shown in a legend`);
    const chart = svg.getBoundingClientRect();
    for (const e of entries) {
      const r = e.getBoundingClientRect(), lg = e.closest('g[class^="legend"]:not(.legendpoints)'), bg = lg && lg.querySelector('.bg');
      const room = bg ? bg.getBoundingClientRect() : chart;
      if (r.height < 1 || !inside(r, room, 2) || !inside(r, chart, 2))
        add('legend entry not drawn', `"${e.textContent.slice(0, 60)}" lies outside its legend or the chart`);
    }
  }
  // -- wider than its output or the notebook --
  const out = gd.closest('.jp-OutputArea-output') || gd;
  const nb = gd.closest('.jp-Notebook');
  const drawn = svg.getBoundingClientRect();
  if (drawn.width > out.getBoundingClientRect().width + 1)
    add('wider than its output', `${Math.round(drawn.width)} px in a ${Math.round(out.getBoundingClientRect().width)} px output`);
  if (nb && drawn.right > nb.getBoundingClientRect().right + 1)
    add('wider than the notebook', `its right edge is ${Math.round(drawn.right - nb.getBoundingClientRect().right)} px past the notebook's`);
  // -- a trace label in its axis's unit --
  const UNIT = /\\((us|ms|s|B|KiB|MiB|GiB)\\)/;
  const LABEL = /([\\d,.]*\\d)\\s*(us|µs|ms|s|B|KiB|MiB|GiB)\\b/;
  const family = u => (['us', 'µs', 'ms', 's'].includes(u) ? 'time' : 'bytes');
  const SCALE = {us: 1, 'µs': 1, ms: 1e3, s: 1e6, B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824};
  // a value under 0.01 of the axis's unit is written in a smaller one (tests/chart_grammar.py: so does it)
  const tiny = (value, unit, axisUnit) => SCALE[unit] < SCALE[axisUnit] && value * SCALE[unit] < 0.01 * SCALE[axisUnit];
  (gd._fullData || []).forEach((t, i) => {
    if (t.visible !== true) return;
    const horizontal = t.orientation === 'h';
    const axisName = horizontal ? 'xaxis' + (t.xaxis || 'x').slice(1) : 'yaxis' + (t.yaxis || 'y').slice(1);
    const axis = fl[axisName];
    const title = axis && axis.title && axis.title.text;
    const want = title && UNIT.exec(title);
    if (!want) return;
    for (const txt of [...svg.querySelectorAll('g.trace')].filter(g => g.__data__ && g.__data__[0] && g.__data__[0].trace && g.__data__[0].trace.index === i).flatMap(g => [...g.querySelectorAll('text')])) {
      const got = LABEL.exec(txt.textContent);
      const zero = /^\\s*0(\\.0+)?\\s*[a-zA-Zµ]+\\s*$/.test(txt.textContent);  // zero is zero in any unit
      const small = got && tiny(parseFloat(got[1].replace(/,/g, '')), got[2], want[1]);
      if (got && !zero && !small && family(got[2]) === family(want[1]) && got[2].replace('µ', 'u') !== want[1])
        add('label in another unit', `"${txt.textContent.trim().slice(0, 30)}" on an axis in ${want[1]} ("${title.slice(0, 50)}")`);
    }
  });
  return found;
}"""
