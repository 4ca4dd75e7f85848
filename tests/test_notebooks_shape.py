"""What a lesson shows, read from its code cells without running them: each figure once (a static
chart or its panel, never both at one base), no chart or summary copied from an earlier lesson (a
link back to it instead), and little code before the first chart (labkit's own source folded).

A figure's identity is the chart it draws and the request it draws it for: ``lessons.chart(df)``
for ``df = lessons.data(name, ...)``, a panel ``widgets.XPanel(...)`` at its base with the
controls it is opened at, ``compare.figure(compare.frames(name, ...))``, a report's
``rep.figure()``. The requests are made canonical by the experiments' own signatures
(`labkit.experiments.request_of`), so ``lessons.data("layout")`` and ``widgets.LayoutPanel()`` are
the same figure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit import experiments
from labkit.present import widgets
from labkit.session import lessons
from labkit.store.recordings import request_key

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: visible code lines a lesson may show before its first chart (code cells, and listings of labkit's
#: source unless folded: a folded one counts as its summary line)
CODE_BEFORE_FIRST_CHART = 25
#: what a code cell's expressions are evaluated with (only the arguments of the calls read here)
NAMESPACE = {"lessons": lessons, "experiments": experiments, "labkit": labkit}
PANELS = {cls.__name__: name for name, cls in widgets.PANELS.items()}


def _attr(node) -> str:
    """``a.b.c`` for a call's function (empty for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _arguments(call: ast.Call):
    return [_eval(a) for a in call.args], {k.arg: _eval(k.value) for k in call.keywords}


def _eval(node):
    return eval(compile(ast.Expression(node), "<cell>", "eval"), dict(NAMESPACE))  # noqa: S307 - the lesson's own code


def _request(name: str, *args, **kwargs) -> str:
    return request_key(experiments.request_of(name, *args, **kwargs))


class Lesson:
    """One notebook's figures (in order, as (cell index, key, what)), summaries and code lines."""

    def __init__(self, path: Path):
        self.name = path.stem
        self.nb = nbformat.read(path, as_version=4)
        self.frames: dict = {}  # variable -> (kind, experiment, request key)
        self.figures: list = []
        self.summaries: list = []
        for i, cell in enumerate(self.nb.cells):
            if cell.cell_type == "code" and not cell.source.startswith("%%"):
                self._read(i, ast.parse(cell.source))

    def _frame(self, call: ast.Call):
        """What a call returns, when it is a result a chart can draw: (kind, experiment, request)."""
        f = _attr(call.func)
        if f in ("lessons.data", "compare.frames"):
            args, kwargs = _arguments(call)
            kind = "chart" if f == "lessons.data" else "compare"
            kwargs.pop("recording", None)
            return kind, args[0], _request(args[0], *args[1:], **kwargs)
        if f == "labkit.report":
            args, kwargs = _arguments(call)
            keep = {k: v for k, v in kwargs.items() if k in ("batch", "dtype", "layout", "training")}
            return "chart", "network_report", _request("network_report", *args, **keep)
        if f == "lessons.knobs":  # lesson 11: torch_knobs of its convolution, or of a network
            _, kwargs = _arguments(call)
            return "chart", "torch_knobs", _request("torch_knobs", net=kwargs.get("net"))
        if f == "lessons.race_all":
            args, _ = _arguments(call)
            return "chart", "race", repr(args)
        return None

    def _panel(self, call: ast.Call):
        """The figure a panel draws first: its experiment at its base with the controls it is opened at."""
        cls = _attr(call.func).removeprefix("widgets.")
        _, initial = _arguments(call)
        if cls == "LabPanel":
            name = initial.pop("chart", "plans")
        elif cls in PANELS:
            name = PANELS[cls]
        else:
            return None
        gpu = initial.pop("gpu", None)
        initial = {k: v for k, v in initial.items() if k not in ("live", "fig_width", "csv_name")}
        cfg = experiments.PANELS[name]
        request = _request(name, **cfg.kwargs({**cfg.base, **initial}))
        return ("chart", name, request + (f" gpu={gpu}" if gpu else ""))

    def _read(self, i: int, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                frame = self._frame(node.value)
                if frame is not None:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.frames[t.id] = frame
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = _attr(node.func)
            if f.startswith("widgets.") and f.endswith("Panel"):
                key = self._panel(node)
                if key is not None:
                    self.figures.append((i, key, f"{f}(...)"))
            elif f in ("lessons.chart", "compare.figure") and node.args:
                key = self._drawn(node.args[0])
                if key is not None:
                    self.figures.append((i, key, f"{f}({ast.unparse(node.args[0])})"))
            elif f.endswith(".figure") and f.count(".") == 1 and f.split(".")[0] in self.frames:
                self.figures.append((i, self.frames[f.split(".")[0]], f"{f}()"))
            elif f.startswith("lessons.") and "summary" in f and node.args:
                frame = self._drawn(node.args[0])
                if frame is not None:
                    self.summaries.append((i, (f, *frame[1:]), f"{f}({ast.unparse(node.args[0])})"))

    def _drawn(self, node):
        if isinstance(node, ast.Name):
            return self.frames.get(node.id)
        if isinstance(node, ast.Call):
            return self._frame(node)
        return None

    def code_lines_before_first_chart(self) -> tuple:
        """(visible code lines up to and including the first chart's cell, that cell's index)."""
        first = min((i for i, _, _ in self.figures), default=len(self.nb.cells))
        lines = 0
        for cell in self.nb.cells[: first + 1]:
            if cell.cell_type != "code":
                continue
            lines += len([line for line in cell.source.splitlines() if line.strip()])
            lines += sum(listing_lines(call) for call in _show_source_calls(cell.source))
        return lines, first


def _show_source_calls(source: str) -> list:
    if source.startswith("%%"):
        return []
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _attr(node.func) == "lessons.show_source"
    ]


def listing_lines(call: ast.Call) -> int:
    """The lines a ``lessons.show_source(...)`` output shows before a click: its summary line when
    folded, every line of the listing otherwise."""
    args, kwargs = _arguments(call)
    shown = str(lessons.show_source(*args, **kwargs))
    if shown.startswith("<details>"):
        return 1
    return len(shown.splitlines())


def _lessons():
    return [Lesson(p) for p in LESSONS]


@pytest.fixture(scope="module")
def read():
    return _lessons()


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_no_lesson_draws_a_figure_twice(path):
    lesson = Lesson(path)
    seen: dict = {}
    twice = []
    for i, key, what in lesson.figures:
        if key in seen:
            twice.append(f"cell {i} {what} draws what cell {seen[key][0]} {seen[key][1]} drew")
        seen.setdefault(key, (i, what))
    assert not twice, f"{lesson.name}: keep the panel (or the static chart), not both: {twice}"


def test_no_chart_or_summary_is_copied_from_an_earlier_lesson(read):
    first: dict = {}
    copies = []
    for lesson in read:
        for i, key, what in lesson.figures + lesson.summaries:
            if key in first and first[key][0] != lesson.name:
                copies.append(f"{lesson.name} cell {i} {what} repeats {first[key][0]} cell {first[key][1]}")
            first.setdefault(key, (lesson.name, i))
    assert not copies, f"link back to the earlier lesson's section instead: {copies}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_little_code_before_the_first_chart(path):
    lesson = Lesson(path)
    assert lesson.figures, f"{lesson.name} draws no chart this test can see"
    lines, cell = lesson.code_lines_before_first_chart()
    assert lines <= CODE_BEFORE_FIRST_CHART, (
        f"{lesson.name}: {lines} lines of code before its first chart (cell {cell}); fold labkit's "
        "source (lessons.show_source) or move code after the chart"
    )


def test_shown_source_is_folded_with_its_name_and_length():
    shown = str(lessons.show_source("gpu.cudnn.frontend", "planned_graph"))
    head, _, body = shown.partition("\n")
    assert head.startswith("<details>") and "<summary>" in head and "planned_graph" in head
    code = body.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert f"{len(code.splitlines())} lines" in head
    assert code.startswith("def planned_graph(") and shown.rstrip().endswith("</details>")


def test_the_reader_sees_what_it_must(tmp_path):
    """The reader finds a static chart and its panel at one base as one figure, and a panel opened
    elsewhere as another (the test above can fail)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('lay = lessons.data("layout")\nlessons.chart(lay)'),
        nbformat.v4.new_code_cell("widgets.LayoutPanel()"),
        nbformat.v4.new_code_cell("widgets.LayoutPanel(N=8)"),
        nbformat.v4.new_code_cell('lessons.chart(lessons.data("layout", spec=lessons.base(N=8)))'),
        nbformat.v4.new_code_cell('lessons.show_source("gpu.cudnn.frontend", "planned_graph")'),
    ]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    lesson = Lesson(path)
    keys = [key for _, key, _ in lesson.figures]
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]
    assert lesson.code_lines_before_first_chart() == (2, 0)
