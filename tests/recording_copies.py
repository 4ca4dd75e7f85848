"""Copies of the shipped recordings with one call (or one experiment) taken out of one of them, for
tests of what happens when one GPU lacks what another has (the shipped recordings hold the same
grid). The copies are real recordings: rows are removed, never written; the metadata's row counts
and sha256 are updated so they pass validation. ``LABKIT_DATA`` points at the copies."""

import json
import shutil

import pandas as pd

from labkit.store import recordings

NAMES = ("h100-sxm", "h200")


def without(tmp_path, monkeypatch, recording: str, experiment: str, request=None):
    """Copy both shipped recordings under ``tmp_path`` and drop, from ``recording``, the rows of
    ``experiment`` for ``request`` (None: the whole experiment). Returns the copied folder."""
    root = tmp_path / "data" / "recordings"
    for name in NAMES:
        shutil.copytree(recordings.data_dir() / name, root / name)
    folder = root / recording
    meta = json.loads((folder / "metadata.json").read_text())
    csv = folder / f"{experiment}.csv"
    if request is None:
        csv.unlink()
        del meta["experiments"][experiment]
    else:
        key = json.dumps(request, sort_keys=True, separators=(",", ":"))
        df = pd.read_csv(csv, dtype=str, keep_default_na=False)
        kept = df[df["request"] != key]
        assert len(kept) < len(df), f"{recording} has no {experiment} rows for {key}"
        kept.to_csv(csv, index=False)
        meta["experiments"][experiment].update(rows=len(kept), sha256=recordings.sha256(csv))
    meta["complete"] = False
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(recordings, "_current", None)
    return folder
