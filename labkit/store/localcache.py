"""This GPU's own recording: every live measurement saved on disk as it completes.

Live panels look here before they measure, so a value measured once (in this notebook, another
one, or before a kernel restart) is shown again at recorded speed, with the time it was measured.

Where: ``LABKIT_CACHE`` (a folder), else the user's cache folder (`platformdirs`, e.g.
``~/.cache/labkit`` on Linux); never inside the repository. Under it:

    recordings/<gpu-slug>-<identity hash>/metadata.json     who measured: the identity + created
    recordings/<gpu-slug>-<identity hash>/<experiment>/<request hash>.json   one measured call
    set-aside/                                               files that could not be read

**Identity.** A folder belongs to one machine identity (`labkit.store.machine`): GPU name,
compute capability, NVIDIA driver, CUDA driver and runtime, cuDNN backend and frontend, CuPy, and
labkit's data schema (`SCHEMA_VERSION`). Any change gives a new folder, so numbers from another
identity are never served as this GPU's.

**One file per measured call**, a JSON object holding the call's rows as CSV text (the same
request-keyed rows as ``data/recordings/``; `export` writes a standard recording folder), when it
was measured and how long it took, the identity hash and a sha256 of the rows. Files are written
atomically (a temporary file in the same folder, then ``os.replace``): a crash or Ctrl-C mid-write
leaves the previous content whole, and two writers at once (the prefetch worker and the
foreground, or two kernels) each leave a complete file; for the same call the last one wins.

**A class's shared recording.** ``LABKIT_SHARED_CACHE`` names a folder of the same layout that
an instructor filled once (``python -m labkit fill --into DIR``: `labkit.cli.record.fill`); it is only
read (`shared`): a call saved there for this machine identity answers at recorded speed, a
learner's own measurements go to their own cache, and a folder of another identity is never
read. A missing or unreadable folder, one filled on another identity (another GPU, driver or
cuDNN), or one whose fill did not finish (``fill.json``) gets one warning naming it, and the
learner's own cache and live mode go on. Nothing in it is moved or changed.

**Faults are answers, not crashes.** A corrupt, truncated or other-schema file gets one warning
naming it and is moved to ``set-aside/`` (the call is measured again). A read-only or full cache
folder gets one warning and live mode goes on without saving. ``LABKIT_CACHE`` naming a file is
a `CacheError` naming it.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import platformdirs

from ..errors import LabkitError
from ..version import __version__
from . import recordings
from .machine import SCHEMA_VERSION, ThisMachine, differences, folder_of


class CacheError(LabkitError):
    """The cache folder cannot be used as asked (e.g. ``LABKIT_CACHE`` names a file).

    Args:
        message: what is wrong.
        path: the folder or file (``path``).
    """

    def __init__(self, message: str, path):
        self.path = path
        super().__init__(f"{message} [{path}]")


class CacheWarning(UserWarning):
    """A cache file was set aside, or the cache folder cannot be written."""


_warned: set = set()
_warn_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=3)


# ---- where ------------------------------------------------------------------------------------
def cache_root() -> Path:
    """The cache folder: ``LABKIT_CACHE``, or the user's cache folder for labkit.

    It is created on first write, not here.

    Returns:
        The folder's path.

    Raises:
        CacheError: it exists and is not a folder.
    """
    env = os.environ.get("LABKIT_CACHE", "").strip()
    if env:
        root = Path(env).expanduser()
    else:
        root = Path(platformdirs.user_cache_dir("labkit", appauthor=False))
    if root.exists() and not root.is_dir():
        raise CacheError("LABKIT_CACHE must name a folder (it may not exist yet), not a file", root)
    return root


# ---- atomic files -----------------------------------------------------------------------------
def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that a reader sees the old file or the new one, never a part.

    The bytes go to a unique temporary file in the same folder, flushed to disk, then ``os.replace``
    puts it in place.

    Args:
        path: the file; its folder is created if needed.
        data: the bytes to write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def set_aside(
    root: Path,
    path: Path,
    why: str,
    *,
    read_only: bool = False,
    then: str = "That call will be measured again.",
) -> Optional[Path]:
    """Move an unreadable cache file to ``root/set-aside/``, with one warning naming it and why.

    Args:
        root: the cache folder.
        path: the file.
        why: why it cannot be used, for the warning.
        read_only: a shared folder, which is never changed: the file is named and left there.
        then: the warning's last sentence: what happens instead.

    Returns:
        Where it went; None when it was not moved (it is then left in place).
    """
    if read_only:
        _warn_once(
            f"aside:{path}",
            f"labkit shared recording: {path} cannot be used ({why}); that call is "
            "measured on this GPU instead",
        )
        return None
    dest_dir = root / "set-aside"
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    dest = dest_dir / f"{path.parent.name}--{path.name}.{stamp}"
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
    except OSError:
        dest = None
    moved = f"; moved to {dest}" if dest else "; could not move it"
    _warn_once(f"aside:{path}", f"labkit cache: set aside {path} ({why}){moved}. {then}")
    return dest


# ---- this GPU's recording ---------------------------------------------------------------------
class LocalRecording:
    """The measurements of one machine identity under a cache folder (see the module docstring).

    A write that fails (read-only or full disk) turns saving off for this object, with one warning.

    Args:
        root: the cache folder.
        ident: the machine identity (`labkit.store.machine.identity`).
        shared: a class's shared recording: read, never written or changed.
    """

    def __init__(self, root: Path, ident: dict, shared: bool = False):
        self.root = Path(root)
        self.identity = dict(ident)
        self.key, self.path = folder_of(self.root, "recordings", self.identity)
        #: a class's shared recording (`shared`): read, never written or changed
        self.shared = shared
        self.writable = not shared
        self.saved = 0

    def __repr__(self) -> str:
        return f"<LocalRecording {self.path} ({'writable' if self.writable else 'read-only'})>"

    # -- files --
    def entry_path(self, name: str, request: dict) -> Path:
        """The file that holds one experiment's result for one request.

        Args:
            name: the experiment.
            request: its canonical arguments (a dict).

        Returns:
            <recording folder>/<name>/<first 32 hex digits of the request key's sha256>.json.
        """
        digest = hashlib.sha256(recordings.request_key(request).encode()).hexdigest()[:32]
        return self.path / name / f"{digest}.json"

    def _write_failed(self, exc: OSError) -> None:
        self.writable = False
        _warn_once(
            f"write:{self.root}",
            f"labkit cache: cannot write to {self.root} ({type(exc).__name__}: {exc}); "
            "live mode goes on without saving measurements "
            "(set LABKIT_CACHE to a writable folder to keep them)",
        )

    def _ensure_metadata(self) -> None:
        meta = self.path / "metadata.json"
        if meta.is_file():
            return
        body = {
            "schema_version": SCHEMA_VERSION,
            "kind": "local",
            "identity": self.identity,
            "identity_hash": self.key,
            "created": _now(),
            "labkit": __version__,
        }
        write_atomic(meta, (json.dumps(body, indent=2) + "\n").encode())

    def put(self, name: str, request: dict, df, seconds: Optional[float] = None) -> Optional[Path]:
        """Save one measured call.

        Args:
            name: the experiment.
            request: the call's arguments.
            df: its result.
            seconds: how long it took to measure, in seconds.

        Returns:
            The file written; None when saving is off or failed.
        """
        if not self.writable:
            return None
        key = recordings.request_key(request)
        table = df.copy()
        table.attrs = {}
        table.insert(0, "request", key)
        csv_text = table.to_csv(index=False)
        body = {
            "schema_version": SCHEMA_VERSION,
            "identity_hash": self.key,
            "experiment": name,
            "request": key,
            "measured_at": _now(),
            "measure_seconds": None if seconds is None else round(float(seconds), 4),
            "gpu": self.identity.get("gpu"),
            "cudnn_backend": self.identity.get("cudnn_backend"),
            "rows": len(table),
            "csv_sha256": hashlib.sha256(csv_text.encode()).hexdigest(),
            "conditions": df.attrs.get("conditions"),
            "csv": csv_text,
        }
        path = self.entry_path(name, request)
        try:
            self._ensure_metadata()
            write_atomic(path, json.dumps(body).encode())
        except OSError as exc:
            self._write_failed(exc)
            return None
        self.saved += 1
        return path

    def has(self, name: str, request: dict) -> bool:
        """Whether a file for this call exists (it is not read: `get` checks it).

        Args:
            name: the experiment.
            request: the call's arguments.

        Returns:
            True when the file is there.
        """
        try:
            return self.entry_path(name, request).is_file()
        except OSError:
            return False

    def _read(
        self, path: Path, name: Optional[str] = None, request_key: Optional[str] = None
    ) -> Optional[dict]:
        """A checked entry, or None (missing; or unreadable: set aside with a warning)."""
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            _warn_once(f"read:{path}", f"labkit cache: cannot read {path} ({exc}); measuring instead")
            return None
        why = _check_entry(raw, self.key, name, request_key)
        if isinstance(why, str):
            set_aside(self.root, path, why, read_only=self.shared)
            return None
        return why

    def get(self, name: str, request: dict):
        """The saved result of one call.

        Args:
            name: the experiment.
            request: the call's arguments.

        Returns:
            A DataFrame with its provenance in ``attrs`` (``mode`` live, ``gpu``, ``measured_at``,
            ``saved_in``, ...); None when nothing usable is saved.
        """
        path = self.entry_path(name, request)
        entry = self._read(path, name, recordings.request_key(request))
        return None if entry is None else _frame(self, entry, request, path)

    def entries(self, name: Optional[str] = None) -> Iterator[dict]:
        """Every readable entry of an experiment; unreadable ones are set aside (`set_aside`).

        Args:
            name: the experiment; None for every experiment.

        Yields:
            Each entry as read (its JSON fields, ``_df`` its rows as a DataFrame), in file name order.
        """
        if not self.path.is_dir():
            return
        folders = [self.path / name] if name else sorted(p for p in self.path.iterdir() if p.is_dir())
        for folder in folders:
            if not folder.is_dir():
                continue
            for f in sorted(folder.glob("*.json")):
                entry = self._read(f, folder.name)
                if entry is not None:
                    yield entry

    def experiments(self) -> List[str]:
        """The experiments with at least one saved call.

        Returns:
            Their names, sorted; empty when nothing is saved.
        """
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and any(p.glob("*.json")))

    def requests(self, name: str) -> List[dict]:
        """Every request saved for an experiment.

        Args:
            name: the experiment.

        Returns:
            Each saved entry's request (a dict of its arguments), in `entries` order.
        """
        return [json.loads(e["request"]) for e in self.entries(name)]

    def table(self, name: str):
        """Every saved row of an experiment.

        Args:
            name: the experiment.

        Returns:
            A DataFrame with its ``request`` column (as in a shipped recording's CSV) and ``measured_at``.
        """
        import pandas as pd  # heavy: pandas, off the light path

        frames = []
        for e in self.entries(name):
            df = e["_df"].copy()
            df["measured_at"] = e["measured_at"]
            frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["request"])

    def export(self, out) -> Path:
        """Write this recording as a standard recording folder (`labkit.store.recordings`).

        Args:
            out: a new folder; one that already holds a metadata.json is refused (`CacheError`).

        Returns:
            The folder: one CSV per experiment, and ``metadata.json`` with rows and sha256 per file.
        """
        out = Path(out)
        if (out / "metadata.json").exists():
            raise CacheError("a recording is already there; export to a new folder", out)
        out.mkdir(parents=True, exist_ok=True)
        files: Dict[str, dict] = {}
        dates = []
        for name in self.experiments():
            df = self.table(name)
            dates += list(df["measured_at"])
            csv = out / f"{name}.csv"
            csv.write_text(df.drop(columns=["measured_at"]).to_csv(index=False))
            files[name] = {"file": csv.name, "rows": len(df), "sha256": recordings.sha256(csv)}
        ident = self.identity
        meta = {
            "schema_version": recordings.SCHEMA_VERSION,
            "gpu": ident.get("gpu"),
            "compute_capability": ident.get("compute_capability"),
            "driver": ident.get("cuda_driver"),
            "nvidia_driver": ident.get("nvidia_driver"),
            "cuda_runtime": ident.get("cuda_runtime"),
            "cudnn_backend": ident.get("cudnn_backend"),
            "cudnn_frontend": ident.get("cudnn_frontend"),
            "cupy": ident.get("cupy"),
            "labkit": __version__,
            "date": max(dates)[:10] if dates else _now()[:10],
            "command": f"labkit.store.localcache export of {self.path}",
            "complete": False,
            "experiments": files,
        }
        (out / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        return out

    def clear(self) -> int:
        """Delete every saved measurement of this identity.

        Returns:
            How many files were deleted.
        """
        return delete_files(self.path, "*/*.json")


def _frame(store: "LocalRecording", entry: dict, request: dict, path: Path):
    """A saved entry as the DataFrame `LocalRecording.get` returns, its provenance in ``attrs``."""
    df = recordings.result_rows(entry["_df"])
    ident = store.identity
    df.attrs.update(
        {
            "mode": "live",
            "gpu": ident.get("gpu"),
            "compute_capability": ident.get("compute_capability"),
            "cudnn_backend": ident.get("cudnn_backend"),
            "cudnn_frontend": ident.get("cudnn_frontend"),
            "cupy": ident.get("cupy"),
            "date": entry["measured_at"][:10],
            "measured_at": entry["measured_at"],
            "measure_seconds": entry.get("measure_seconds"),
            "saved_in": str(path),
            "loaded_from_disk": True,
            "from_shared": store.shared,
            "experiment": entry["experiment"],
            "request": request,
            "conditions": entry.get("conditions"),
        }
    )
    return df


def read_entry(raw: bytes, schema_version: int):
    """A stored file's JSON object, checked.

    Args:
        raw: the file's bytes.
        schema_version: the schema this labkit reads.

    Returns:
        The object; or a string saying why it cannot be used (not JSON, not an object, another schema).
    """
    try:
        entry = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        return f"not valid JSON, truncated or corrupt: {str(exc)[:80]}"
    if not isinstance(entry, dict):
        return "not a JSON object"
    if entry.get("schema_version") != schema_version:
        return f"schema version {entry.get('schema_version')!r}; this labkit reads {schema_version}"
    return entry


def _check_entry(raw: bytes, identity_key: str, name: Optional[str], request_key: Optional[str]):
    """The entry dict, or a string saying why it cannot be used."""
    entry = read_entry(raw, SCHEMA_VERSION)
    if isinstance(entry, str):
        return entry
    if entry.get("identity_hash") != identity_key:
        return "measured under another machine identity"
    for field in ("experiment", "request", "measured_at", "csv", "csv_sha256", "rows"):
        if field not in entry:
            return f"lacks {field!r}"
    if name is not None and entry["experiment"] != name:
        return f"holds experiment {entry['experiment']!r}, not {name!r}"
    if request_key is not None and entry["request"] != request_key:
        return "holds another request"
    if hashlib.sha256(str(entry["csv"]).encode()).hexdigest() != entry["csv_sha256"]:
        return "rows do not match their sha256 (corrupt or edited)"
    try:
        df = recordings.read_csv_exact(io.StringIO(str(entry["csv"])))
    except Exception as exc:  # noqa: BLE001  (pandas' parser errors say what is wrong)
        return f"rows cannot be parsed: {str(exc)[:80]}"
    try:
        rows = int(entry["rows"])
    except (TypeError, ValueError) as exc:
        return f"a field of the wrong type: {str(exc)[:80]}"
    if "request" not in df.columns or len(df) != rows:
        return f"expected {entry['rows']} rows with a request column, found {len(df)}"
    entry["_df"] = df
    return entry


def now() -> str:
    """The local time now.

    Returns:
        ISO 8601 with its UTC offset, to the second.
    """
    return _now()


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


# ---- the one for this process -----------------------------------------------------------------
def delete_files(folder: Path, pattern: str) -> int:
    """Delete files (a store's ``clear``).

    Args:
        folder: where to look; a missing folder deletes nothing.
        pattern: a glob under it, e.g. ``"*/*.json"``.

    Returns:
        How many files were deleted.
    """
    n = 0
    if folder.is_dir():
        for f in folder.glob(pattern):
            try:
                f.unlink()
                n += 1
            except OSError:
                pass
    return n


_this = ThisMachine(LocalRecording, "LABKIT_LOCAL_RECORDING", root=cache_root)


def current() -> Optional[LocalRecording]:
    """This machine's recording in the cache folder.

    Returns:
        The `LocalRecording`; None in recorded mode (no GPU) or with ``LABKIT_LOCAL_RECORDING=0``.

    Raises:
        CacheError: ``LABKIT_CACHE`` names a file.
    """
    return _this.get()


def reset() -> None:
    """Forget the process's `current` and `shared` recordings.

    The next call reads ``LABKIT_CACHE`` and ``LABKIT_SHARED_CACHE`` again.
    """
    _this.reset()
    _shared.reset()


# ---- a class's shared recording ---------------------------------------------------------------
#: the file a fill into a shared folder writes first ("running") and last ("complete")
FILL_STATUS = "fill.json"


def shared_root() -> Optional[Path]:
    """The folder ``LABKIT_SHARED_CACHE`` names.

    Returns:
        The path; None when the variable is unset.
    """
    env = os.environ.get("LABKIT_SHARED_CACHE", "").strip()
    return Path(env).expanduser() if env else None


def open_shared(root: Path, ident: dict) -> Optional[LocalRecording]:
    """The shared recording at ``root`` for this identity, when it can be used.

    A folder whose fill did not finish is used, with one warning.

    Args:
        root: the shared folder.
        ident: this machine's identity.

    Returns:
        A read-only `LocalRecording`; None, with one warning naming the folder and why, when it is
        missing, unreadable or filled on another identity.
    """

    def skip(why: str) -> None:
        _warn_once(
            f"shared:{root}",
            f"labkit shared recording {root} (LABKIT_SHARED_CACHE): {why}; panels "
            "use your own cache and measure on this GPU as usual",
        )

    store = LocalRecording(root, ident, shared=True)
    try:
        if not root.is_dir():
            skip("no such folder")
            return None
        kinds = list((root / "recordings").iterdir()) if (root / "recordings").is_dir() else []
        if not store.path.is_dir():
            others = []
            for folder in kinds:
                try:
                    others.append(json.loads((folder / "metadata.json").read_text())["identity"])
                except (OSError, ValueError, KeyError, TypeError):
                    continue
            skip(
                f"it was filled on another machine identity: {differences(ident, others[0])}"
                if others
                else "it holds no recording (fill it with `python -m labkit fill --into` that folder)"
            )
            return None
        status = {}
        try:
            status = json.loads((root / FILL_STATUS).read_text())
        except (OSError, ValueError):
            pass
        if status.get("status") != "complete":
            _warn_once(
                f"shared-unfinished:{root}",
                f"labkit shared recording {root}: its fill did not finish "
                f"({status.get('status') or f'no {FILL_STATUS}'}, started {status.get('started', '?')}); "
                "panels answer what it holds and measure the rest on this GPU",
            )
    except OSError as exc:
        skip(f"cannot be read ({type(exc).__name__}: {exc})")
        return None
    return store


_shared = ThisMachine(open_shared, "LABKIT_SHARED_RECORDING", root=shared_root)


def shared() -> Optional[LocalRecording]:
    """The class's shared recording (``LABKIT_SHARED_CACHE``) for this machine identity, read only.

    Returns:
        The `LocalRecording`; None when unset, unusable (one warning: `open_shared`) or in recorded
        mode.
    """
    return _shared.get()


def describe() -> str:
    """Where this GPU's recording lives and how much it holds, for ``doctor``.

    Returns:
        Lines of text.
    """
    try:
        root = cache_root()
    except CacheError as exc:
        return f"{'saved measurements':>20}: error: {exc}"
    store = current()
    if store is None:
        why = (
            "off (LABKIT_LOCAL_RECORDING=0)" if not _this.enabled() else "none on this machine (no live GPU)"
        )
        return f"{'saved measurements':>20}: {why}; cache folder {root}"
    n = sum(1 for _ in store.path.glob("*/*.json")) if store.path.is_dir() else 0
    return (
        f"{'saved measurements':>20}: {n} calls measured on this GPU, in {store.path}\n"
        f"{'':>20}  (`python -m labkit fill` measures every lesson's values ahead)"
    )
