"""Bad recordings are refused with a `RecordedDataError` that names the folder (bad input):
a newer schema, missing files, a file that does not match its sha256, two recordings that claim the
same GPU and date. Checking reads only: nothing is overwritten. CPU only, on tmp copies of the
shipped recordings."""

import json
import shutil

import pytest

from labkit import RecordedDataError
from labkit.store import recordings


@pytest.fixture
def root(tmp_path):
    """A recordings folder holding copies of both shipped recordings."""
    dst = tmp_path / "recordings"
    for name in ("h100-sxm", "h200"):
        shutil.copytree(recordings.data_dir() / name, dst / name)
    return dst


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _meta(folder):
    return json.loads((folder / "metadata.json").read_text())


def test_the_shipped_recordings_pass_every_check():
    recs = recordings.check_all()
    assert {r.name for r in recs} >= {"h100-sxm", "h200"}
    assert recordings.load(recordings.data_dir() / "h200", verify=True).metadata["complete"] is True


def test_copies_pass_and_checking_writes_nothing(root):
    before = {d.name: _snapshot(d) for d in root.iterdir()}
    assert [r.name for r in recordings.check_all(root)] == ["h100-sxm", "h200"]
    assert {d.name: _snapshot(d) for d in root.iterdir()} == before


def test_a_newer_schema_says_update_labkit(root):
    folder = root / "h200"
    meta = _meta(folder)
    meta["schema_version"] = recordings.SCHEMA_VERSION + 1
    (folder / "metadata.json").write_text(json.dumps(meta))
    before = _snapshot(folder)
    with pytest.raises(RecordedDataError, match="newer than this labkit reads") as info:
        recordings.check_all(root)
    assert "h200" in str(info.value) and info.value.path == folder / "metadata.json"
    assert _snapshot(folder) == before  # left as it is
    assert [r.name for r in recordings.available(root)] == ["h100-sxm"]  # skipped, not half-read


def test_missing_files_are_all_named_with_the_folder(root):
    folder = root / "h200"
    (folder / "plans.csv").unlink()
    (folder / "sweep.csv").unlink()
    with pytest.raises(RecordedDataError) as info:
        recordings.load(folder, verify=True)
    msg = str(info.value)
    assert "files missing: plans.csv, sweep.csv" in msg and str(folder) in msg
    assert info.value.path == folder


def test_a_mismatched_sha256_names_the_file_and_folder(root):
    folder = root / "h100-sxm"
    path = folder / "roofline.csv"
    path.write_text(path.read_text().replace("eng63", "eng64", 1))
    before = _snapshot(folder)
    with pytest.raises(RecordedDataError, match=r"does not match its sha256.*roofline\.csv") as info:
        recordings.check_all(root)
    assert info.value.path == folder and "h100-sxm" in str(info.value)
    assert _snapshot(folder) == before


def test_a_truncated_file_without_checksum_is_caught_by_verify(root):
    folder = root / "h200"
    meta = _meta(folder)
    meta["experiments"]["layout"]["sha256"] = None
    (folder / "metadata.json").write_text(json.dumps(meta))
    lines = (folder / "layout.csv").read_text().splitlines(True)
    (folder / "layout.csv").write_text("".join(lines[:-1]))
    n = meta["experiments"]["layout"]["rows"]
    with pytest.raises(RecordedDataError, match=f"expected {n} rows, found {n - 1}") as info:
        recordings.load(folder, verify=True)
    assert info.value.path == folder / "layout.csv"


def test_two_recordings_of_one_gpu_and_date_are_refused(root):
    shutil.copytree(root / "h200", root / "h200-again")
    before = {d.name: _snapshot(d) for d in root.iterdir()}
    for check in (recordings.check_all, recordings.available):
        with pytest.raises(RecordedDataError) as info:
            check(root)
        msg = str(info.value)
        date = recordings.load(root / "h200").metadata["date"]
        assert "'h200'" in msg and "'h200-again'" in msg and f"NVIDIA H200 recorded {date}" in msg
        assert info.value.path == root / "h200-again"
    assert {d.name: _snapshot(d) for d in root.iterdir()} == before  # nothing moved or deleted


def test_same_gpu_on_another_date_is_fine(root):
    shutil.copytree(root / "h200", root / "h200-later")
    meta = _meta(root / "h200-later")
    meta["date"] = "2026-12-01"
    (root / "h200-later" / "metadata.json").write_text(json.dumps(meta))
    assert [r.name for r in recordings.check_all(root)] == ["h100-sxm", "h200", "h200-later"]


def test_a_folder_without_metadata_is_named(root):
    (root / "stray").mkdir()
    with pytest.raises(RecordedDataError, match="no metadata.json") as info:
        recordings.check_all(root)
    assert "stray" in str(info.value)
