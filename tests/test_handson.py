"""Hands-on cells (`labkit.session.handson`) without a GPU: every ``%%handson`` cell of a lesson
names a registered reference solution, the cells the learner runs as they are match their
references, every reference compiles, and in recorded mode a cell and its check say what they
need instead of running. The references themselves run on a GPU: tests/test_handson_gpu.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit import experiments
from labkit.present import check
from labkit.session import handson

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def recorded(recorded_mode):
    """Recorded mode from the default shipped recording."""


def handson_cells():
    """(notebook name, hands-on name, the cell's body) for every %%handson cell of every lesson."""
    out = []
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"])
            m = re.match(r"%%handson\s+(\w+)\s*\n", src)
            if cell["cell_type"] == "code" and m:
                out.append((nb.name, m.group(1), src[m.end() :]))
    return out


def test_every_handson_cell_names_a_registered_reference():
    handson.register_topics()
    cells = handson_cells()
    assert {name for _, name, _ in cells} >= {
        "conv_setup",
        "own_workspace",
        "own_strategy",
        "check_own_strategy",
    }
    for nb, name, _ in cells:
        assert name in handson.HANDS_ON, f"{nb}: %%handson {name} has no reference solution"
        assert nb.startswith(handson.HANDS_ON[name].lesson), (nb, name, handson.HANDS_ON[name].lesson)


def test_cells_run_as_they_are_match_their_references():
    """The setup cell and the check cell are not the learner's to change: their reference is the cell
    (the check's asserts what the cell prints)."""
    handson.register_topics()
    bodies = {name: body for _, name, body in handson_cells()}
    assert bodies["conv_setup"].strip() == handson.HANDS_ON["conv_setup"].source.strip()
    assert bodies["check_own_strategy"].strip() in handson.HANDS_ON["check_own_strategy"].source


def test_every_reference_compiles():
    for name, (lesson, source, needs) in experiments.hands_on().items():
        compile(source, f"<reference {name}>", "exec")
        assert lesson in experiments.exercises() and needs


def test_recorded_mode_skips_a_cell_and_says_what_it_needs(capsys):
    ns: dict = {}
    assert handson.run("own_strategy", "raise AssertionError('must not run')", ns) is False
    out = capsys.readouterr().out
    assert out.startswith("skipped: ") and "CUDA GPU" in out and "recorded mode" in out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert not ns


def test_handson_checks_say_they_need_a_gpu(capsys):
    assert not check.own_workspace(None, None)
    assert not check.own_strategy(object)
    out = capsys.readouterr().out
    assert out.count("skipped: ") == 2 and "recorded mode" in out


def test_an_unknown_handson_name_is_one_clear_error():
    from labkit.errors import InvalidSpec

    with pytest.raises(InvalidSpec, match="hands-on"):
        handson.run("no_such_cell", "", {})
