"""The lesson notebooks are stored clean: numbered 00..10 as the README lists them, nbformat 4,
kernel python3, no outputs or execution counts, small cells, and no measured number typed into
their text (numbers are formatted from the data when a cell runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXPECTED = [
    "00_start_here",
    "01_what_is_a_workspace",
    "02_workspace_strategies",
    "03_precision_and_layout",
    "04_fusion",
    "05_plans_autotune_and_caching",
    "06_streams_and_scratchpads",
    "07_lab",
    "08_same_conv_other_gpu",
    "09_your_network",
    "10_under_the_hood",
    "11_pytorch_knobs",
]
#: a measured-looking number in prose: a time, a throughput, a bandwidth or a speed-up ratio
MEASURED = re.compile(r"\d\s*(us|µs|ms|TFLOP/s|GB/s)\b|\b\d+(\.\d+)?x\b(?!\d)", re.I)


def _load(name):
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=nbformat.NO_CONVERT)


def test_the_notebooks_are_exactly_00_to_11():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED


def test_readme_lists_the_same_notebooks():
    readme = (ROOT / "README.md").read_text()
    for name in EXPECTED:
        assert f"notebooks/{name}.ipynb" in readme, name


@pytest.mark.parametrize("name", EXPECTED)
def test_stored_clean(name):
    nb = _load(name)
    assert nb.nbformat == 4
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    ids = [cell.get("id") for cell in json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())["cells"]]
    assert all(ids), f"{name}: cell(s) {[i for i, x in enumerate(ids) if not x]} have no id (nbformat 4.5)"
    assert len(set(ids)) == len(ids), f"{name}: two cells share an id"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name}: a code cell has outputs"
            assert cell.execution_count is None, f"{name}: a code cell has an execution count"
            assert len(cell.source.splitlines()) <= 10, f"{name}: a code cell longer than 10 lines"
        assert "attachments" not in cell or not cell.attachments


@pytest.mark.parametrize("name", EXPECTED)
def test_prose_quotes_no_measured_numbers(name):
    for cell in _load(name).cells:
        if cell.cell_type == "markdown":
            hit = MEASURED.search(cell.source)
            assert hit is None, (
                f"{name}: markdown quotes {hit.group(0)!r}; format it from the data at run time"
            )


#: what a lesson may call on `labkit.present.check` besides its exercises
NOT_EXERCISES = {"after_answer", "progress", "reset", "solutions", "exercise_list"}


@pytest.mark.parametrize("name", EXPECTED)
def test_each_lesson_has_goals_a_panel_and_a_recap(name):
    nb = _load(name)
    text = "\n".join(c.source for c in nb.cells)
    assert f'lessons.banner("{name[:2]}")' in nb.cells[1].source, (
        "the mode banner comes right after the title"
    )
    assert "widgets." in text, "every notebook has an interactive panel"
    if name not in ("00_start_here", "07_lab"):
        assert "**Learning goals**" in nb.cells[0].source
        assert "## Recap" in text
        # the exercises' check calls (hands-on cells, %%handson, call checks of their own; the
        # check module's other calls, e.g. check.after_answer, are not exercises)
        calls = [
            call
            for c in nb.cells
            if c.cell_type == "code" and not c.source.startswith("%%handson")
            for call in re.findall(r"check\.(\w+)\(", c.source)
            if call not in NOT_EXERCISES
        ]
        assert 2 <= len(calls) <= 6


def test_nbstripout_would_change_nothing():
    """The notebooks are the source (edited in JupyterLab); `make strip` (nbstripout) must find
    nothing to strip in what is committed."""
    import subprocess
    import sys

    files = sorted(str(p) for p in NOTEBOOKS.glob("*.ipynb"))
    r = subprocess.run(
        [sys.executable, "-m", "nbstripout", "--keep-id", "--verify", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_mode_note_comes_from_labkit():
    """One text, from `lessons.mode_note()`, never pasted into a notebook: in full in lesson 00,
    one line elsewhere."""
    lessons = __import__("labkit.session.lessons", fromlist=["x"])
    for name in EXPECTED:
        text = "\n".join(c.source for c in _load(name).cells)
        assert "Recorded or live?" not in text, name
        if name.startswith("00"):
            assert "lessons.mode_note(full=True)" in text
    assert "Recorded or live?" in lessons.mode_note(full=True)
    assert "Recorded or live?" not in lessons.mode_note() and "Lesson 00" in lessons.mode_note()


#: characters of a code line a lesson shows that fit the notebook at 1366x768 without wrapping
SHOWN_CHARS = 100


def test_every_shown_source_is_found():
    """Each lesson's ``lessons.show_source(module, names...)`` names code that exists where it says
    (the code shown is read from labkit's files, so a moved function must be followed), in lines
    the page shows whole."""
    import ast

    from labkit.session import lessons

    for name in EXPECTED:
        for cell in _load(name).cells:
            for m in re.finditer(r"show_source\(([^)]*)\)", cell.source):
                args = ast.literal_eval(f"({m.group(1)},)")
                shown = str(lessons.show_source(*args))  # raises InvalidSpec naming what is missing
                summary = re.sub(r"<[^>]+>", "", shown.split("</summary>", 1)[0])
                code = shown.split("```python\n", 1)[1].split("\n```", 1)[0]
                long = [line for line in [summary, *code.splitlines()] if len(line) > SHOWN_CHARS]
                assert not long, f"{name}: {args} shows lines the page wraps: {long}"
