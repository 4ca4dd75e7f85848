"""The learner's exercise progress lasts (`labkit.store.progress`, `labkit.experiments.exercise`):

* what one Python process answered, the next one (a kernel restarted) sees, in ``check.progress()``;
* two processes answering at once lose no answer;
* a corrupt file, or one of another format, is set aside with one warning, never a traceback,
  and progress starts again; a record of another version of an exercise, or of other numbers
  (another recording), is not this one's;
* ``check.reset(lesson)`` forgets that lesson only, ``check.reset()`` all, in every process;
* a cache folder that cannot be used keeps progress in the kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from labkit.errors import InvalidSpec
from labkit.experiments import exercise
from labkit.present import check
from labkit.store import progress, recordings
from labkit.store.localcache import CacheWarning

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(fresh_progress, recorded_mode):
    """A fresh cache folder for this test (what a learner's first start has)."""
    yield fresh_progress


def python(code: str, cache: Path, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python process (a kernel started afresh) with this cache folder."""
    full = dict(os.environ, LABKIT_CACHE=str(cache), LABKIT_MODE="recorded", PYTHONPATH=str(ROOT), **env)
    full.pop("LABKIT_RECORDING", None)
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_progress_survives_a_restart(cache):
    python(
        "from labkit.present import check\n"
        "check.mode('live'); check.mode('recorded')\n"
        "check.less_workspace_layout(reveal=True)\n"
        "check.malloc_slowdown(100.0)\n",
        cache,
    )
    out = python(
        "import json\n"
        "from labkit.present import check\n"
        "print(json.dumps({'00': check.progress('00').reset_index().to_dict('records'),\n"
        "                  '01': check.progress('01').reset_index().to_dict('records'),\n"
        "                  'lessons': check.progress().reset_index().to_dict('records')}, default=int))\n",
        cache,
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["00"] == [dict(exercise="mode", kind="read", tries=2, done=True, revealed=False)]
    first = seen["01"][0]
    assert first["exercise"] == "less_workspace_layout" and first["revealed"] and first["tries"] == 0
    by_lesson = {row["lesson"]: row for row in seen["lessons"]}
    assert by_lesson["02"]["answered"] == 1 and by_lesson["02"]["done"] == 0
    assert by_lesson["01"]["revealed"] == 1 and by_lesson["00"]["done"] == 1
    # and this process (a third) reads the same
    assert check.progress("00").loc["mode", "tries"] == 2


def test_the_second_hint_comes_on_the_next_try_after_a_restart(cache):
    first = python("from labkit.present import check\ncheck.mode('live')\n", cache).stdout
    second = python("from labkit.present import check\ncheck.mode('live')\n", cache).stdout
    assert first.split("Hint: ")[1] != second.split("Hint: ")[1], (first, second)


def test_two_writers_at_once_lose_no_answer(cache):
    """Two processes each answer 25 times, released together: every answer is counted."""
    go = cache.parent / "go"
    code = (
        "import os, time, sys\n"
        "from labkit.present import check\n"
        "from labkit.experiments import exercise\n"
        "ex = check.mode.exercise\n"
        "open(sys.argv[2], 'w').close()\n"
        "while not os.path.exists(sys.argv[1]):\n"
        "    time.sleep(0.01)\n"
        "for _ in range(25):\n"
        "    exercise.record(ex, tries=1)\n"
        "    exercise.record(check.less_workspace_layout.exercise, tries=1)\n"
    )
    env = dict(os.environ, LABKIT_CACHE=str(cache), LABKIT_MODE="recorded", PYTHONPATH=str(ROOT))
    env.pop("LABKIT_RECORDING", None)
    ready = [cache.parent / f"ready{i}" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(go), str(r)], env=env, stderr=subprocess.PIPE, text=True
        )
        for r in ready
    ]
    try:
        deadline = time.monotonic() + 120
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), [p.stderr.read() for p in procs if p.poll()]
            time.sleep(0.02)  # both imported and waiting (a late one still counts: it only runs later)
        go.write_text("go")
        for p in procs:
            assert p.wait(timeout=300) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert check.progress("00").loc["mode", "tries"] == 50
    assert check.progress("01").loc["less_workspace_layout", "tries"] == 50
    assert not list(progress.path().parent.glob("*.tmp")), "a temporary file was left behind"


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00",
        json.dumps({"format": 99, "sources": {}}).encode(),
        json.dumps({"format": progress.FORMAT, "sources": ["a list"]}).encode(),
        json.dumps([1, 2, 3]).encode(),
    ],
    ids=["not-json", "not-utf8", "other-format", "bad-shape", "a-list"],
)
def test_a_corrupt_or_foreign_file_is_set_aside_with_one_warning(cache, content):
    path = progress.path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = check.progress("00")
    assert table.loc["mode", "tries"] == 0
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and str(path) in said[0] and "progress starts again" in said[0], said
    assert not path.exists() and list((cache / "set-aside").iterdir())
    check.mode("recorded")  # a fresh file, written whole
    assert check.progress("00").loc["mode", "done"]
    assert json.loads(path.read_text())["format"] == progress.FORMAT


def test_a_foreign_file_in_a_fresh_process_prints_no_traceback(cache):
    path = progress.path()
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "sources": {"x": 3}}')
    r = python("from labkit.present import check\nprint(check.progress('00'))\ncheck.mode('live')\n", cache)
    assert "Traceback" not in r.stderr and "not a labkit progress file" in r.stderr
    assert "mode" in r.stdout and "not yet" in r.stdout


def test_a_record_of_another_version_of_the_exercise_or_other_numbers_is_not_this_ones(cache, monkeypatch):
    ex = check.mode.exercise
    check.mode("recorded")
    assert check.progress("00").loc["mode", "done"]
    # the same name, another question: a record of the old one is ignored
    records = json.loads(progress.path().read_text())
    for recs in records["sources"].values():
        recs["mode"]["exercise"] = "0" * 12
    progress.path().write_text(json.dumps(records))
    assert not check.progress("00").loc["mode", "done"]
    exercise.record(ex, done=True)
    # another recording: other numbers, other answers
    names = [r.name for r in recordings.shipped()]
    if len(names) > 1:
        recordings.use(names[1])
        assert not check.progress("00").loc["mode", "done"]
        recordings.use(names[0])
        assert check.progress("00").loc["mode", "done"]


def test_reset_forgets_one_lesson_or_all_in_every_process(cache, capsys):
    check.mode("recorded")
    check.less_workspace_layout("NCHW")
    check.malloc_slowdown(reveal=True)
    check.reset("01")
    assert "lesson 01" in capsys.readouterr().out
    assert check.progress("00").loc["mode", "done"]
    assert check.progress("01").tries.sum() == 0
    assert check.progress("02").revealed.sum() == 1
    out = python("from labkit.present import check\nprint(int(check.progress().answered.sum()))\n", cache)
    assert out.stdout.strip().splitlines()[-1] == "1"
    python("from labkit.present import check\ncheck.reset()\n", cache)
    table = check.progress()
    assert table.answered.sum() == 0 and table.revealed.sum() == 0
    with pytest.raises(InvalidSpec):
        check.reset("99")


def test_a_cache_folder_that_cannot_be_used_keeps_progress_in_the_kernel(
    tmp_path, monkeypatch, recorded_mode
):
    """``LABKIT_CACHE`` naming a file: one warning, then progress kept in this process."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv("LABKIT_CACHE", str(a_file))
    monkeypatch.setattr(exercise, "_on_disk", True)
    monkeypatch.setattr(exercise, "_MEMORY", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = check.mode("live").message
        second = check.mode("live").message
    assert first.split("Hint: ")[1] != second.split("Hint: ")[1]
    assert check.progress("00").loc["mode", "tries"] == 2
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert said and all("kept in this kernel only" in m for m in said), said
    check.reset()
    assert check.progress("00").loc["mode", "tries"] == 0
