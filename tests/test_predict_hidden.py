"""Predict, then see: a prediction's answer (its chart, table or summary) stays hidden until the
learner answers (any answer) or asks to see it (`labkit.present.hidden`, ``check.after_answer``).

* In the kernel: hidden, with a line saying what to do and a button; shown in place after any
  answer (right or wrong), ``reveal=True`` or the button; hidden again after ``check.reset``;
  with several exercises, shown once each has an answer; answered in an earlier process, shown
  at once.
* Every lesson 01-10, read from its cells: each PREDICT exercise's answering cells (`ANSWERED_BY`,
  cell ids) come after its check and show through ``check.after_answer`` naming it, and no
  markdown names its answer, the Recap included: a learner sees it before predicting (its leak
  patterns, on every shipped recording).
* A real kernel (nbclient): lesson 06 run top to bottom with ``answer = None`` keeps its answer
  hidden; an answer in a later cell shows it in place; a new kernel shows it at once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from labkit.errors import InvalidSpec
from labkit.present import check, hidden
from labkit.present.hidden import SHOW, Hidden
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: PREDICT exercise -> the cells of its lesson that show its answer (cell ids): the chart, the
#: summary or table under it, a panel that opens on the same call. Empty: no cell shows the answer
#: at once; it is found by moving a control (the exercise says which).
ANSWERED_BY = {
    "less_workspace_layout": ("c08",),
    "malloc_slowdown": ("c06", "c04"),
    "dtype_speed_order": ("c06", "c04", "c04c"),
    "nhwc_closest_batch": (),  # the layout panel opens on one batch; its N, moved
    "fusion_speedup": ("c11", "c04", "c06"),
    "unfused_tensors": ("c11", "c04", "c06"),
    "cap_1mib_prediction": ("c10", "c09"),
    "race_python_prediction": ("c03",),  # the race panel opens on graph launches
    "lab_widest_spread": (),  # the lab's direction control, moved
    "biggest_gain": ("c11",),
    "best_plan_changes": ("c21",),
    "small_cap_cost": ("c9e10001", "22cb1071", "e1211be9"),
    "checklist_gain": ("c9k00004", "c9k00006"),
    "nchw_kernels": ("c5caf990",),
    "idle_strategy": ("2fb68c9f",),
    "benchmark_faster": ("k11d", "k11pp"),  # the knobs panel opens on the same call
}


@pytest.fixture(autouse=True)
def fresh(recorded_mode, fresh_progress, monkeypatch):
    monkeypatch.setattr(hidden, "_MADE", [])
    yield


def _texts(h: Hidden) -> str:
    return "\n".join(str(o["data"].get("text/markdown", "")) for o in h.out.outputs)


def _shows_button(hidden: Hidden) -> bool:
    ids = [
        o["data"].get("application/vnd.jupyter.widget-view+json", {}).get("model_id")
        for o in hidden.out.outputs
    ]
    return hidden.button.model_id in ids


# ---- the mechanism, in the kernel ------------------------------------------------------------------
def test_hidden_until_any_answer_then_shown_in_place(capsys):
    h = check.after_answer("malloc_slowdown", "THE CHART", "THE SUMMARY")
    assert h.shown is False and _shows_button(h)
    note = _texts(h)
    assert "Hidden until you predict" in note and "check.malloc_slowdown" in note and "any answer" in note
    assert "THE CHART" not in str(h.out.outputs)
    check.malloc_slowdown(None)  # the question again is not an answer
    assert h.shown is False
    assert not check.malloc_slowdown("fast").correct  # nor is an answer of the wrong type (said in a line)
    assert h.shown is False
    check.malloc_slowdown(1000.0)  # a wrong answer is an answer
    assert h.shown is True and not _shows_button(h)
    shown = [o["data"]["text/plain"] for o in h.out.outputs]
    assert shown == ["'THE CHART'", "'THE SUMMARY'"]
    check.reset("02")
    assert h.shown is False and _shows_button(h)
    capsys.readouterr()


def test_reveal_and_the_button_show_it_and_count_as_revealed(capsys):
    h = check.after_answer("less_workspace_layout", "THE CHART")
    check.less_workspace_layout(reveal=True)
    assert h.shown is True
    check.reset()
    assert h.shown is False
    h.button.click()
    assert h.shown is True
    row = check.progress("01").loc["less_workspace_layout"]
    assert bool(row.revealed) and row.tries == 0
    assert SHOW in h.button.description
    capsys.readouterr()


def test_more_of_the_same_answer_says_it_short_and_shows_with_the_first(capsys):
    first = check.after_answer("dtype_speed_order", "THE CHART")
    second = check.after_answer("dtype_speed_order", "THE PANEL")
    assert "any answer" in _texts(first) and "as above" in _texts(second)
    assert len(_texts(second)) < len(_texts(first)) and _shows_button(second)
    second.button.click()
    assert first.shown and second.shown
    capsys.readouterr()


def test_several_exercises_show_once_each_has_an_answer(capsys):
    h = check.after_answer(["fusion_speedup", "unfused_tensors"], "THE CHART")
    check.fusion_speedup("under 1.2x")
    assert h.shown is False and "check.unfused_tensors" in _texts(h)
    check.unfused_tensors(7)
    assert h.shown is True
    capsys.readouterr()


def test_a_figure_shows_in_the_output_not_in_the_cell_that_answers(capsys, monkeypatch):
    """plotly's ``go.Figure`` displays itself (``_ipython_display_``): shown on an answer given in
    another cell, it must land in the hidden answer's Output, in plotly's own format (the renderer
    plotly picks in a Jupyter kernel; this process is none)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")

    h = check.after_answer("nchw_kernels", go.Figure(go.Bar(x=[1], y=[2])))
    check.nchw_kernels(3)
    (chart,) = h.out.outputs
    assert "application/vnd.plotly.v1+json" in chart["data"], chart["data"].keys()
    capsys.readouterr()


def test_answered_before_it_is_made_it_shows_at_once(capsys):
    check.idle_strategy("fixed_arena")
    assert check.after_answer("idle_strategy", "THE CHART").shown is True
    capsys.readouterr()


def test_bad_names_get_one_line_errors():
    for args in [("no_such_check", "x"), ("mode",), ([], "x"), (["nchw_kernels", "nope"], "x")]:
        with pytest.raises(InvalidSpec) as info:
            check.after_answer(*args)
        assert "\n" not in str(info.value)


# ---- every lesson, from its cells --------------------------------------------------------------------
def _cells(lesson: str) -> list:
    (path,) = NOTEBOOKS.glob(f"{lesson}_*.ipynb")
    return [dict(c, text="".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


PREDICTS = [ex for ex in check.exercise_list() if ex.kind == "predict"]


def test_every_prediction_says_what_answers_it():
    assert sorted(ex.name for ex in PREDICTS) == sorted(ANSWERED_BY)


@pytest.mark.parametrize("ex", PREDICTS, ids=lambda ex: f"{ex.lesson}-{ex.name}")
def test_a_predictions_answer_is_hidden_until_answered(ex):
    cells = _cells(ex.lesson)
    ids = [c.get("id") for c in cells]
    asked = [i for i, c in enumerate(cells) if re.search(rf"(?<![\w.])check\.{ex.name}\(", c["text"])]
    assert asked, f"lesson {ex.lesson} never calls check.{ex.name}"
    problems = []
    for cid in ANSWERED_BY[ex.name]:
        assert cid in ids, f"lesson {ex.lesson} has no cell {cid}: update ANSWERED_BY"
        i = ids.index(cid)
        if i < asked[0]:
            problems.append(f"cell {cid} shows the answer above the question")
        calls = re.findall(r"check\.after_answer\(\s*(\[[^\]]*\]|\"[^\"]*\")", cells[i]["text"])
        if not any(f'"{ex.name}"' in c for c in calls):
            problems.append(f'cell {cid} shows it at once: wrap it in check.after_answer("{ex.name}", ...)')
    assert not problems, f"lesson {ex.lesson}, check.{ex.name}:\n" + "\n".join(problems)


def _moved_to():
    """PREDICT exercise found by moving a control -> (the control, the values whose numbers answer it)."""
    from labkit.experiments import BASE
    from labkit.experiments.precision_layout.exercises import NHWC_BATCHES

    return {"nhwc_closest_batch": ("N", {n for n in NHWC_BATCHES if n != BASE.N})}


def test_no_cell_before_a_prediction_moves_a_panel_to_its_answer():
    found = []
    for name, (control, values) in _moved_to().items():
        (ex,) = [ex for ex in PREDICTS if ex.name == name]
        for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
            if path.name[:2] > ex.lesson:
                break
            cells = _cells(path.name[:2])
            asked = [i for i, c in enumerate(cells) if f"check.{name}(" in c["text"]] or [len(cells)]
            for c in cells[: asked[0]]:
                for call in re.findall(r"\.set\(([^)]*)\)", c["text"]) if c["cell_type"] == "code" else []:
                    m = re.search(rf"\b{control}\s*=\s*(\d+)", call)
                    if m and int(m.group(1)) in values:
                        found.append(
                            f"{path.name} cell {c.get('id')}: .set({call}) shows check.{name}'s numbers"
                        )
    assert not found, "a panel is moved to a prediction's answer before it is asked:\n" + "\n".join(found)


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_no_prose_names_a_predictions_answer(monkeypatch, recording):
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    found = []
    for ex in PREDICTS:
        patterns = ex.leak_patterns(ex.truth())
        for c in _cells(ex.lesson):
            if c["cell_type"] != "markdown":
                continue
            for pattern in patterns:
                m = re.search(pattern, c["text"])
                if m:
                    at = c["text"][max(0, m.start() - 60) : m.end()]
                    found.append(f"lesson {ex.lesson} cell {c.get('id')}: {at!r}")
    assert not found, "prose gives a prediction's answer away:\n" + "\n".join(found)


# ---- a real kernel ---------------------------------------------------------------------------------
PROBE = (
    "import json\n"
    "from labkit.present import hidden\n"
    "print(json.dumps([[sorted(h.names), h.shown, [sorted(o['data']) for o in h.out.outputs]]\n"
    "                  for h in hidden.made()]))"
)


def _run(nb, cache: Path) -> list:
    """Execute ``nb`` in a new kernel (recorded mode, this cache folder): what each `PROBE` cell saw."""
    import nbclient

    env = dict(os.environ, LABKIT_MODE="recorded", LABKIT_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("LABKIT_RECORDING", None)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        client = nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
        )
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seen = []
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source == PROBE:
            out = "".join(o["text"] for o in cell.outputs if o.get("name") == "stdout")
            seen.append(json.loads(out.strip().splitlines()[-1]))
    return seen


def test_a_kernel_run_top_to_bottom_keeps_the_answer_hidden_until_answered(tmp_path):
    import nbformat

    cache = tmp_path / "cache"
    lesson = nbformat.read(next(NOTEBOOKS.glob("06_*.ipynb")), as_version=4)
    lesson.cells += [
        nbformat.v4.new_code_cell(PROBE),
        nbformat.v4.new_code_cell("check.race_python_prediction(True)"),  # an answer, in a later cell
        nbformat.v4.new_code_cell(PROBE),
    ]
    before, after = _run(lesson, cache)
    assert before and all(not shown for _, shown, _ in before), before
    assert all(len(outs) == 2 for _, _, outs in before), before  # the line and the button
    mine = [h for h in after if h[0] == ["race_python_prediction"]]
    assert mine and all(shown for _, shown, _ in mine), after
    chart, summary = mine[0][2]
    assert "application/vnd.plotly.v1+json" in chart and "text/markdown" in summary

    fresh = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                'from labkit import check\ncheck.after_answer("race_python_prediction", "x")'
            ),
            nbformat.v4.new_code_cell(PROBE),
        ]
    )
    (restarted,) = _run(fresh, cache)  # a new kernel: the answer kept in the cache folder shows it
    assert restarted == [[["race_python_prediction"], True, [["text/plain"]]]], restarted
