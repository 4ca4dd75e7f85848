"""This GPU's own recording on disk (`labkit.store.localcache`): file handling, on any machine.

The rows saved here are real ones, taken from the shipped H100 recording; the store is opened
with that recording's identity (as a live H100 would). What a live GPU adds (a second process
answered from disk with zero graph builds) is in tests/test_localcache_gpu.py.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pandas as pd
import pytest

from labkit import experiments
from labkit.store import localcache, machine, recordings
from labkit.store.localcache import CacheError, CacheWarning, LocalRecording

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_warnings(recorded_mode):
    localcache._warned.clear()


def h100_identity(**changes):
    m = recordings.use(recordings.DEFAULT_RECORDING).metadata
    fields = dict(
        gpu=m["gpu"],
        compute_capability=m["compute_capability"],
        nvidia_driver=None,
        cuda_driver=m["driver"],
        cuda_runtime=m["cuda_runtime"],
        cudnn_backend=m["cudnn_backend"],
        cudnn_frontend=m["cudnn_frontend"],
        cupy=m["cupy"],
    )
    fields.update(changes)
    return machine.identity(**fields)


def real_call(name="precision", **kwargs):
    """(request, DataFrame) of a call recorded in the shipped recording."""
    request = experiments.request_of(name, **kwargs)
    return request, recordings.current().lookup(name, request)


@pytest.fixture
def store(tmp_path):
    return LocalRecording(tmp_path / "cache", h100_identity())


def test_round_trip_keeps_rows_and_says_when(store):
    request, df = real_call()
    path = store.put("precision", request, df, seconds=1.25)
    assert path is not None and path.is_file() and path.parent.parent == store.path
    got = store.get("precision", request)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), df.reset_index(drop=True), check_dtype=False)
    assert got.attrs["mode"] == "live" and got.attrs["gpu"] == df.attrs["gpu"]
    assert got.attrs["measure_seconds"] == 1.25 and got.attrs["saved_in"] == str(path)
    assert got.attrs["measured_at"][:4].isdigit() and got.attrs["request"] == request
    meta = json.loads((store.path / "metadata.json").read_text())
    assert meta["identity"] == store.identity and meta["identity_hash"] == store.key
    assert store.has("precision", request) and store.requests("precision") == [request]


def test_other_requests_and_experiments_are_misses(store):
    request, df = real_call()
    store.put("precision", request, df)
    other, _ = real_call(spec=experiments.BASE.replace(layout="NCHW"))
    assert store.get("precision", other) is None
    assert store.get("layout", request) is None


def test_identity_names_every_version_that_changes_meaning(tmp_path):
    base = h100_identity()
    seen = {machine.identity_hash(base)}
    for field, value in [
        ("gpu", "NVIDIA H200"),
        ("nvidia_driver", "590.1"),
        ("cuda_driver", "12.8"),
        ("cudnn_backend", "9.20.0"),
        ("cudnn_frontend", "1.29.0"),
        ("cupy", "15.0.0"),
        ("compute_capability", "8.0"),
        ("cuda_runtime", "12.9"),
    ]:
        h = machine.identity_hash(h100_identity(**{field: value}))
        assert h not in seen, field
        seen.add(h)
    assert base["labkit_schema"] == localcache.SCHEMA_VERSION


def test_a_changed_cudnn_version_never_serves_old_numbers(tmp_path):
    root = tmp_path / "cache"
    old = LocalRecording(root, h100_identity())
    request, df = real_call()
    path = old.put("precision", request, df)
    new = LocalRecording(root, h100_identity(cudnn_backend="9.20.0"))
    assert new.path != old.path and new.get("precision", request) is None
    # even a file copied by hand into the new identity's folder is refused
    dest = new.entry_path("precision", request)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(path.read_bytes())
    with pytest.warns(CacheWarning, match="another machine identity"):
        assert new.get("precision", request) is None
    assert not dest.exists() and any((root / "set-aside").iterdir())


@pytest.mark.parametrize(
    "damage,why",
    [
        (lambda b: b[: len(b) // 2], "not valid JSON"),
        (lambda b: b"", "not valid JSON"),
        (lambda b: b.replace(b'"schema_version": 1', b'"schema_version": 99'), "schema version 99"),
        (lambda b: b"fp17".join(b.rsplit(b"fp16", 1)), "sha256"),  # a value in the rows edited
        (lambda b: b.replace(b'"experiment": "precision"', b'"experiment": "layout"'), "holds experiment"),
        (lambda b: re.sub(rb'"rows": \d+', b'"rows": "many"', b), "wrong type"),
    ],
)
def test_corrupt_truncated_or_other_schema_file_is_named_and_set_aside(store, damage, why):
    request, df = real_call()
    path = store.put("precision", request, df)
    path.write_bytes(damage(path.read_bytes()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.get("precision", request) is None
        assert store.get("precision", request) is None  # the second look finds nothing, warns nothing
    msgs = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(msgs) == 1 and str(path) in msgs[0]
    import re

    assert re.search(why, msgs[0])
    assert not path.exists()
    aside = list((store.root / "set-aside").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith("precision--")
    # the call can be saved again
    assert store.put("precision", request, df) is not None and store.get("precision", request) is not None


def test_interrupted_write_leaves_the_previous_content_whole(store, monkeypatch):
    request, df = real_call()
    path = store.put("precision", request, df)
    before = path.read_bytes()

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(localcache.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.put("precision", request, df.iloc[:1])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert len(store.get("precision", request)) == len(df)


def test_unwritable_folder_warns_once_and_goes_on(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    store = LocalRecording(blocker / "cache", h100_identity())
    request, df = real_call()
    with pytest.warns(CacheWarning, match="cannot write") as caught:
        assert store.put("precision", request, df) is None
        assert store.put("precision", request, df) is None
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not store.writable and store.get("precision", request) is None


def test_full_disk_warns_once_and_goes_on(store, monkeypatch):
    request, df = real_call()

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(localcache.os, "fsync", full)
    with pytest.warns(CacheWarning, match="No space left"):
        assert store.put("precision", request, df) is None
    monkeypatch.undo()
    assert not [p for p in store.path.rglob("*.tmp")]


def test_labkit_cache_naming_a_file_is_a_clear_error(tmp_path, monkeypatch):
    f = tmp_path / "cache.txt"
    f.write_text("x")
    monkeypatch.setenv("LABKIT_CACHE", str(f))
    with pytest.raises(CacheError, match="must name a folder") as err:
        localcache.cache_root()
    assert str(f) in str(err.value)


def test_cache_root_is_the_user_cache_folder_unless_set(monkeypatch, tmp_path):
    monkeypatch.delenv("LABKIT_CACHE", raising=False)
    import platformdirs

    assert localcache.cache_root() == Path(platformdirs.user_cache_dir("labkit", appauthor=False))
    assert ROOT not in localcache.cache_root().parents
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "mine"))
    assert localcache.cache_root() == tmp_path / "mine"


def test_recorded_mode_has_no_local_recording(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    localcache.reset()
    assert localcache.current() is None or machine.this_identity() is not None


WRITER = textwrap.dedent("""
    import sys
    from labkit import experiments
    from labkit.store import localcache, recordings
    sys.path.insert(0, {tests!r})
    from test_localcache import h100_identity
    store = localcache.LocalRecording({root!r}, h100_identity())
    rec = recordings.use(recordings.DEFAULT_RECORDING)
    reqs = rec.requests("precision")
    for i in range({n}):
        req = reqs[i % len(reqs)]
        store.put("precision", req, rec.lookup("precision", req), seconds=float({who}))
    print("ok", store.saved)
""")


def test_two_writers_at_once_lose_nothing(tmp_path):
    """Two processes write the same and different calls into one folder at the same time:
    afterwards every file is whole and every call is there."""
    root = tmp_path / "cache"
    env = dict(os.environ, LABKIT_MODE="recorded", PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER.format(tests=str(ROOT / "tests"), root=str(root), n=60, who=w)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in (1, 2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        assert out.split() == ["ok", "60"]
    store = LocalRecording(root, h100_identity())
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # no file may be unreadable
        saved = store.requests("precision")
        for req in saved:
            assert store.get("precision", req) is not None
    want = recordings.current().requests("precision")
    assert sorted(map(experiments.request_key, saved)) == sorted(map(experiments.request_key, want))
    assert not list(root.rglob("*.tmp")) and not (root / "set-aside").exists()


def test_export_is_a_recording_recorded_mode_can_read(store, tmp_path):
    rec = recordings.current()
    for req in rec.requests("precision")[:3] + rec.requests("layout")[:2]:
        name = "precision" if "dtypes" in req else "layout"
        store.put(name, req, rec.lookup(name, req))
    out = store.export(tmp_path / "exported")
    mine = recordings.load(out)
    assert set(mine.experiments()) == {"precision", "layout"}
    for req in rec.requests("precision")[:3]:
        pd.testing.assert_frame_equal(
            mine.lookup("precision", req), rec.lookup("precision", req), check_dtype=False
        )
    with pytest.raises(CacheError, match="already there"):
        store.export(out)


def test_the_live_status_says_where_a_number_came_from():
    import datetime
    import time

    from labkit.present.widgets import live_note

    request, df = real_call()
    now = time.time()
    earlier = datetime.datetime.fromtimestamp(now - 3600).astimezone().isoformat(timespec="seconds")
    just_now = datetime.datetime.fromtimestamp(now).astimezone().isoformat(timespec="seconds")
    d = df.copy()
    d.attrs = dict(measured_at=earlier, saved_in="/x.json", loaded_from_disk=True)
    assert live_note(d, now).startswith("measured on this GPU at ") and "measure again" in live_note(d, now)
    d.attrs = dict(measured_at=earlier, saved_in="/x.json")
    assert "ahead of this change" in live_note(d, now)
    d.attrs = dict(measured_at=just_now, measure_seconds=2.345, saved_in="/x.json")
    assert live_note(d, now) == "measured now in 2.3 s and saved in this GPU's recording"
    d.attrs = dict(measured_at=just_now)
    assert live_note(d, now) == "measured now"
    assert "ahead of this change" in live_note(d, now, ahead=True)


def test_bad_input_gets_labkit_errors():
    from labkit import LabkitError, ModeError
    from labkit.cli.record import fill

    with pytest.raises(LabkitError, match="unknown identity field"):
        machine.identity(gpu="x", colour="blue")
    with pytest.raises(ModeError, match="needs a live GPU"):
        fill(quick=True)  # recorded mode: nothing to measure with
