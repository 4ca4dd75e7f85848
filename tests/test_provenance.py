"""One provenance per chart, the same wherever it shows: the lesson's banner names the GPU and the
date of every chart it draws, a panel's header and GPU list give the date of the measurement drawn
(the chart's subtitle), and the reason for recorded mode is the real cause."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import recorded_charts

from labkit import env, experiments
from labkit.draw import plots
from labkit.session import lessons
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
#: what a notebook's code draws: lessons.data("x"), compare.frames("x"), widgets.XPanel, labkit.report
DRAW_CALLS = re.compile(
    r'(?:lessons\.data|compare\.frames)\(\s*"([a-z_]+)"|widgets\.([A-Za-z]+)Panel\(|labkit\.report\('
)


@pytest.fixture(autouse=True)
def recorded(recorded_mode):
    """Recorded mode from the default recording; a test that picks another puts it back."""


def notebook_code(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def drawn_by(code: str) -> set:
    from labkit.present import widgets

    panels = {cls.__name__[: -len("Panel")]: name for name, cls in widgets.PANELS.items()}
    out = set()
    for m in DRAW_CALLS.finditer(code):
        if m.group(1):
            out.add(m.group(1))
        elif m.group(2):
            out |= set(widgets.SPEC_EXPERIMENTS) if m.group(2) == "Lab" else {panels[m.group(2)]}
        else:
            out.add("network_report")
    if "race_all(" in code:
        out.add("race")
    return out


LESSON_FILES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.name[:2])
def test_every_lesson_calls_its_banner_and_draws_what_the_table_says(path):
    lesson = path.name[:2]
    code = notebook_code(path)
    assert f'lessons.banner("{lesson}")' in code, f"{path.name} must show lessons.banner({lesson!r})"
    missing = drawn_by(code) - set(lessons.DRAWS[lesson])
    assert not missing, f"{path.name} draws {sorted(missing)}: add them to lessons.DRAWS[{lesson!r}]"


def _subtitle(fig) -> str:
    return fig.layout.title.text.split("<br>", 1)[1]


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize("lesson", sorted(lessons.DRAWS))
def test_the_banner_names_the_gpu_and_date_of_every_chart_in_its_lesson(monkeypatch, recording, lesson):
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    text = str(lessons.banner(lesson))
    rec = recordings.current()
    for name in lessons.DRAWS[lesson]:
        answering = {recordings.for_experiment(name).path: recordings.for_experiment(name)}
        if name in rec.experiments():
            answering[rec.path] = rec
        if lesson == "08":
            answering = {r.path: r for r in recordings.shipped() if name in r.experiments()}
        for r in answering.values():
            if name not in r.experiments():
                assert f"has no `{name}`" in text or name in text, (lesson, name, text)
                continue
            prov = r.provenance(name)
            gpu = env.gpu_label(prov["gpu"])
            assert gpu in text and prov["date"] in text, (lesson, name, r.name, text)
            for req in r.requests(name)[:3]:
                found = recorded_charts.drawn(r, name, req)
                if found is None:
                    continue
                sub = _subtitle(found[1])
                assert gpu in sub and prov["date"] in sub, (name, sub)


@pytest.mark.parametrize("name", ["plans", "network_report", "precision"])
def test_a_panels_header_and_gpu_list_give_the_date_its_chart_gives(name):
    from labkit.present import widgets

    panel = widgets.Panel(name)
    header = panel.view.header.value
    sub = _subtitle(panel.fig)
    dates = set(re.findall(r"\d{4}-\d\d-\d\d", sub))
    assert dates and all(d in header for d in dates), (header, sub)
    picked = panel.view.gpu.label if hasattr(panel.view, "gpu") else None
    if picked:
        assert all(d in picked for d in dates), (picked, sub)


def test_recorded_mode_names_the_missing_driver():
    from labkit import env

    if env.nvidia_driver_present():
        pytest.skip("this machine has an NVIDIA driver")
    assert env.environment().problem == "no NVIDIA GPU driver on this machine"
    monkey = env.mode()
    assert "driver" in monkey.reason or monkey.forced


def test_compare_describe_gives_the_dates_its_charts_give():
    from labkit.present import compare

    text = str(compare.describe(experiments=lessons.DRAWS["08"]))
    for r in recordings.shipped():
        for name in lessons.DRAWS["08"]:
            if name in r.experiments():
                assert r.provenance(name)["date"] in text, (r.name, name, text)


def test_bad_lesson_names_get_one_line_errors():
    from labkit.errors import InvalidSpec
    from labkit.present import check
    from labkit.session import handson

    for call in (
        lambda: lessons.banner("99"),
        lambda: check.solutions("99"),
        lambda: lessons.show_source("no_such_module", "f"),
        lambda: lessons.show_source("gpu.workspaces.workspace", "NoSuchClass.get"),
        lambda: handson.run("no_such_cell", "", {}),
    ):
        with pytest.raises(InvalidSpec) as info:
            call()
        assert "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
def test_lesson_00_reads_provenance_in_two_lines_without_a_machine_path(
    recorded_mode, monkeypatch, recording
):
    """Lesson 00 shows where a result comes from as the line its chart carries and the call it
    answers, not ``df.attrs`` itself (a 25-line dict with the recording's folder on this machine)."""
    monkeypatch.setenv("LABKIT_RECORDING", recording)
    cells = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())["cells"]
    code = ["".join(c["source"]).strip() for c in cells if c["cell_type"] == "code"]
    assert "df.attrs" not in code and "lessons.provenance(df)" in code
    df = lessons.data("layout")
    text = str(lessons.provenance(df))
    assert len(text.splitlines()) == 2
    line = plots.provenance_subtitle(df)  # the line the layout chart carries
    assert line in _subtitle(experiments.CHARTS["layout"](df)) and line in text
    assert str(df.attrs["source"]) not in text and str(ROOT) not in text and "data/recordings" not in text
    assert env.gpu_label(df.attrs["gpu"]) in text and "fp16 NHWC fprop 32x64x56x56" in text
