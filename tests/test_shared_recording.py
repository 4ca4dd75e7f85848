"""A class's shared recording (`labkit.store.localcache.shared`, ``LABKIT_SHARED_CACHE``; filled by
``python -m labkit fill --into DIR``): on any machine, with real rows from the shipped H100
recording and the store opened under that recording's identity (as a live H100 would). Read and
never changed; a folder that is missing, of another identity, half-filled, or holds a corrupt
file gets one warning naming it and the learner's own cache goes on. What a live GPU adds (every
panel answered from a filled shared folder within 100 ms) is in scripts/bench_classroom.py."""

import json
import os
import warnings

import pandas as pd
import pytest
from test_localcache import h100_identity, real_call

from labkit.store import localcache, machine, plan_store
from labkit.store.localcache import CacheWarning, LocalRecording


@pytest.fixture(autouse=True)
def fresh(recorded_mode, monkeypatch):
    localcache._warned.clear()
    monkeypatch.setattr(machine, "this_identity", lambda: h100_identity())
    localcache.reset()
    plan_store.reset()
    yield
    localcache.reset()
    plan_store.reset()


def filled(folder, status="complete", ident=None):
    """A shared folder as a fill leaves it: one real call saved, its fill.json."""
    store = LocalRecording(folder, ident or h100_identity())
    request, df = real_call()
    store.put("precision", request, df, seconds=2.0)
    (folder / localcache.FILL_STATUS).write_text(
        json.dumps({"status": status, "started": "2026-11-24T09:00:00"})
    )
    return request, df


def test_a_filled_shared_folder_answers_read_only(tmp_path, monkeypatch):
    request, df = filled(tmp_path / "class")
    monkeypatch.setenv("LABKIT_SHARED_CACHE", str(tmp_path / "class"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete fill of this identity: no warning
        shared = localcache.shared()
    assert shared is not None and shared.shared and not shared.writable
    got = shared.get("precision", request)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), df.reset_index(drop=True), check_dtype=False)
    assert got.attrs["from_shared"] and got.attrs["loaded_from_disk"]
    assert shared.put("precision", request, df) is None  # a learner never writes into it
    before = sorted(p.name for p in (tmp_path / "class").rglob("*"))
    shared.get("precision", dict(request, dtypes=["fp32"]))  # a miss changes nothing
    assert sorted(p.name for p in (tmp_path / "class").rglob("*")) == before


def test_unset_means_none(monkeypatch):
    monkeypatch.delenv("LABKIT_SHARED_CACHE", raising=False)
    assert localcache.shared() is None and plan_store.shared() is None


@pytest.mark.parametrize(
    "case, words",
    [
        ("missing", "no such folder"),
        ("empty", "holds no recording"),
        ("other cudnn", "cudnn backend 9.0.0"),
    ],
)
def test_an_unusable_folder_is_one_warning_naming_it(tmp_path, monkeypatch, case, words):
    folder = tmp_path / "class"
    if case == "empty":
        folder.mkdir()
    elif case == "other cudnn":
        filled(folder, ident=h100_identity(cudnn_backend="9.0.0"))
    monkeypatch.setenv("LABKIT_SHARED_CACHE", str(folder))
    with pytest.warns(CacheWarning) as got:
        assert localcache.shared() is None
        assert localcache.shared() is None  # asked again: no second warning
    assert len(got) == 1 and str(folder) in str(got[0].message) and words in str(got[0].message)
    assert plan_store.shared() is None


def test_a_fill_that_did_not_finish_is_used_with_one_warning(tmp_path, monkeypatch):
    request, _ = filled(tmp_path / "class", status="running")
    monkeypatch.setenv("LABKIT_SHARED_CACHE", str(tmp_path / "class"))
    with pytest.warns(CacheWarning, match="did not finish"):
        shared = localcache.shared()
    assert shared.get("precision", request) is not None


def test_a_corrupt_file_in_it_is_named_and_left_where_it_is(tmp_path, monkeypatch):
    request, _ = filled(tmp_path / "class")
    monkeypatch.setenv("LABKIT_SHARED_CACHE", str(tmp_path / "class"))
    shared = localcache.shared()
    path = shared.entry_path("precision", request)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.warns(CacheWarning, match="shared recording.*cannot be used"):
        assert shared.get("precision", request) is None
    assert path.is_file() and not (tmp_path / "class" / "set-aside").exists()


def test_a_read_only_shared_folder_is_read(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root reads everything: a read-only folder cannot be made here")
    request, _ = filled(tmp_path / "class")
    for p in sorted((tmp_path / "class").rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    (tmp_path / "class").chmod(0o555)
    try:
        monkeypatch.setenv("LABKIT_SHARED_CACHE", str(tmp_path / "class"))
        assert localcache.shared().get("precision", request) is not None
    finally:
        for p in [tmp_path / "class", *(tmp_path / "class").rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_fill_into_needs_a_gpu_and_a_folder(tmp_path):
    from labkit.cli import record
    from labkit.errors import LabkitError

    with pytest.raises(LabkitError):
        record.fill(quick=True, into=tmp_path / "class")  # recorded mode: no GPU to fill from
    assert not (tmp_path / "class").exists()
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    with pytest.raises(localcache.CacheError, match="must name a folder"):
        record.fill(quick=True, into=a_file)
