"""The learner's exercise progress on disk, kept across kernels and restarts.

Where: ``progress/exercises-v<FORMAT>.json`` in labkit's cache folder (`labkit.store.localcache.cache_root`:
``LABKIT_CACHE``, else the user's cache folder), beside a ``.lock`` file. The file holds, per
source of numbers (`labkit.experiments.exercise.source_key`), one record per exercise: the exercise's
fingerprint, tries, done, revealed (`labkit.experiments.exercise` says what each key means and why
records are keyed so).

**Two writers.** Every change is made under an exclusive ``flock`` of the lock file: read the file,
apply the change to what it holds now, write it back. Two kernels answering at once each apply
their own change to the other's result, so no answer is lost.

**Atomic.** The file is written to a temporary file in the same folder and put in place with
``os.replace`` (`labkit.store.localcache.write_atomic`): a reader sees the old file or the new one.

**Faults are answers, not crashes.** A file that is not JSON, not of this format or not shaped as
one is set aside (``set-aside/`` in the cache folder) with one warning, and progress starts again.
A cache folder that cannot be used (not writable, or ``LABKIT_CACHE`` naming a file) gets one
warning; `update` then raises `OSError`, for the caller to keep its progress in the kernel.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Callable, Dict

from .localcache import CacheError, _warn_once, cache_root, now, set_aside, write_atomic

#: the file's format; another format lives in another file, so no labkit reads another's
FORMAT = 1


def path() -> Path:
    """The progress file.

    Returns:
        ``<cache folder>/progress/exercises-v<FORMAT>.json``.
    """
    return cache_root() / "progress" / f"exercises-v{FORMAT}.json"


def _valid(data) -> bool:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return False
    sources = data.get("sources")
    return isinstance(sources, dict) and all(
        isinstance(recs, dict) and all(isinstance(r, dict) for r in recs.values())
        for recs in sources.values()
    )


def read() -> Dict[str, Dict[str, dict]]:
    """Every record on disk: source -> exercise name -> record.

    Returns:
        The records; empty when there is no file, or one that cannot be read (set aside, with one
        warning).
    """
    try:
        p = path()
        raw = p.read_bytes()
    except CacheError as exc:
        _warn_once(
            f"progress-read:{exc.path}", f"labkit progress: {exc}; your answers are kept in this kernel only"
        )
        return {}
    except FileNotFoundError:
        return {}
    except OSError as exc:
        _warn_once(f"progress-read:{p}", f"labkit progress: cannot read {p} ({exc}); progress starts again")
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if not _valid(data):
        set_aside(
            p.parent.parent,
            p,
            f"not a labkit progress file of format {FORMAT}",
            then="Your exercise progress starts again.",
        )
        return {}
    return data["sources"]


@contextlib.contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"exercises-v{FORMAT}.json.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def update(change: Callable[[Dict[str, Dict[str, dict]]], None]) -> Dict[str, Dict[str, dict]]:
    """Apply ``change`` to the records on disk, under the lock, and write them back atomically.

    Args:
        change: ``change(records)`` edits the records (source -> name -> record) in place.

    Returns:
        The records as written.

    Raises:
        OSError: the cache folder cannot be written (one warning says so).
    """
    try:
        p = path()
    except CacheError as exc:
        _warn_once(
            f"progress-write:{exc.path}", f"labkit progress: {exc}; your answers are kept in this kernel only"
        )
        raise OSError(str(exc)) from None
    try:
        with _locked(p.parent):
            records = read()
            change(records)
            body = {"format": FORMAT, "written": now(), "sources": records}
            write_atomic(p, json.dumps(body, indent=1, sort_keys=True).encode("utf-8"))
            return records
    except OSError as exc:
        _warn_once(
            f"progress-write:{p}",
            f"labkit progress: cannot write {p} ({exc}); your answers are kept in this kernel only",
        )
        raise
