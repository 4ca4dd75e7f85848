"""Recordings: real GPU measurements on disk, and answering experiment calls from them.

A recording is a folder ``data/recordings/<gpu-slug>/`` with ``metadata.json`` (schema version,
GPU, driver, CUDA, cuDNN backend and frontend, CuPy, labkit version, git commit, date, command,
wall time, and per experiment its file, row count and sha256) and one CSV per experiment. Every
CSV row carries ``request``: the canonical JSON of the call that produced it
(`request_key`). Replaying a call returns exactly the rows recorded for exactly
that request; anything else raises `RecordedDataError` naming the nearest recorded values.

``LABKIT_RECORDING`` (a folder name under data/recordings, or a path) picks the recording;
otherwise `use` does, otherwise the shipped H100 recording.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..env import gpu_label
from ..errors import InvalidSpec, LabkitError, OutOfMemory, RecordedDataError, Unsupported
from .frozen import freeze

SCHEMA_VERSION = 1
REQUIRED_METADATA = ("schema_version", "gpu", "cudnn_backend", "cudnn_frontend", "date", "experiments")
DEFAULT_RECORDING = "h100-sxm"
_ERROR_CLASSES = {"Unsupported": Unsupported, "OutOfMemory": OutOfMemory}


def data_dir() -> Path:
    """The shipped recordings' folder.

    Returns:
        ``data/recordings`` of this checkout (``LABKIT_DATA`` names another ``data`` folder).
    """
    root = os.environ.get("LABKIT_DATA")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "data"
    return base / "recordings"


def read_csv_exact(source):
    """``pandas.read_csv`` with every float read back bit for bit as it was written.

    pandas' C parser may land one unit in the last place away, depending on its version and
    ``float_precision`` (seen on the GPU host: 14.391999691724777 read as ...775). Its
    ``float_precision="round_trip"`` parses each float with Python's own, correctly rounded,
    conversion in one pass (the network report's table: 3-4x faster than parsing twice). A pandas that
    no longer takes the argument (deprecated in pandas 3.1) gets the float columns parsed again from
    their text with Python's ``float``.

    Args:
        source: a path, or a file-like object with ``read()``.

    Returns:
        The DataFrame.
    """
    import pandas as pd  # heavy: pandas, off the light path

    text = source.read() if hasattr(source, "read") else Path(source).read_text()
    try:
        return pd.read_csv(io.StringIO(text), keep_default_na=True, float_precision="round_trip")
    except (TypeError, ValueError) as exc:
        if "float_precision" not in str(exc):
            raise
    return _read_csv_twice(text)


#: pandas 3.1 deprecates ``float_precision``; labkit's one use of it (`read_csv_exact`) says nothing
warnings.filterwarnings(
    "ignore", message=r".*'float_precision' argument is deprecated", module=r"labkit\.store\.recordings"
)


def _read_csv_twice(text: str):
    """`read_csv_exact` without ``float_precision``: the float columns parsed again as Python
    strings (not pandas' string type, pyarrow-backed where pyarrow is installed) and converted with
    Python's ``float``; a column is replaced only where the first parse was off."""
    import pandas as pd  # heavy: pandas, off the light path

    df = pd.read_csv(io.StringIO(text), keep_default_na=True)
    floats = [c for c, t in df.dtypes.items() if t == np.float64]
    if floats:
        raw = pd.read_csv(io.StringIO(text), usecols=floats, dtype=object, keep_default_na=True)
        exact = raw[floats].to_numpy(dtype=object).astype(np.float64)  # each text by Python's float, in C
        parsed = df[floats].to_numpy(dtype=np.float64)
        same = ((exact == parsed) | (np.isnan(exact) & np.isnan(parsed))) & (
            np.signbit(exact) == np.signbit(parsed)
        )
        for j in np.flatnonzero(~same.all(axis=0)):
            df[floats[j]] = exact[:, j]
    return df


def sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read 1 MiB at a time.

    Args:
        path: the file.

    Returns:
        64 hex digits.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class Recording:
    """One recording folder; tables are read, checked and cached on first use.

    Attributes:
        path: the folder.
        metadata: its ``metadata.json``.
    """

    path: Path
    metadata: dict
    _tables: Dict[str, object] = field(default_factory=dict, repr=False)
    _keys: Dict[str, Dict[str, None]] = field(default_factory=dict, repr=False)
    #: experiment -> request key -> the positions of its rows in the table
    _at: Dict[str, Dict[str, object]] = field(default_factory=dict, repr=False)
    #: (experiment, request key) -> (its rows in the table, `result_rows` of them)
    _rows: Dict[Tuple[str, str], Tuple[object, object]] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """The folder's name, e.g. ``h100-sxm``."""
        return self.path.name

    def describe(self) -> str:
        """The recording's GPU, cuDNN, date and how many experiments it holds.

        Returns:
            One line of text.
        """
        m = self.metadata
        return (
            f"{self.name}: {gpu_label(m.get('gpu'))}, cuDNN {m.get('cudnn_backend')} "
            f"(frontend {m.get('cudnn_frontend')}), recorded {m.get('date')}, "
            f"{len(m.get('experiments', {}))} experiments"
        )

    def provenance(self, name: Optional[str] = None) -> dict:
        """Where the numbers come from.

        Args:
            name: an experiment; its own table's date is used when the metadata has one (a table
                recorded later than the rest of the folder).

        Returns:
            mode, gpu, compute_capability, cudnn_backend, cudnn_frontend, cupy, date, source (the
            folder) and conditions.
        """
        m = self.metadata
        entry = (m.get("experiments") or {}).get(name) or {}
        return {
            "mode": "recorded",
            "gpu": m.get("gpu"),
            "compute_capability": m.get("compute_capability"),
            "cudnn_backend": m.get("cudnn_backend"),
            "cudnn_frontend": m.get("cudnn_frontend"),
            "cupy": m.get("cupy"),
            "date": entry.get("date") or m.get("date"),
            "source": str(self.path),
            "conditions": entry.get("conditions"),
        }

    def experiments(self) -> List[str]:
        """The experiments this recording holds.

        Returns:
            Their names, sorted.
        """
        return sorted(self.metadata.get("experiments", {}))

    def table(self, name: str):
        """The whole CSV of one experiment, validated against the metadata (rows, sha256).

        Args:
            name: the experiment.

        Returns:
            The DataFrame, with its ``request`` column; `RecordedDataError` naming the file at fault.
        """
        if name in self._tables:
            return self._tables[name]
        info = self.metadata.get("experiments", {}).get(name)
        if info is None:
            raise RecordedDataError(
                f"experiment {name!r} is not in this recording (it has: {', '.join(self.experiments())})",
                self.path / "metadata.json",
            )
        path = self.path / info["file"]
        if not path.is_file():
            raise RecordedDataError(f"file missing for experiment {name!r}", path)
        if info.get("sha256") and sha256(path) != info["sha256"]:
            raise RecordedDataError(
                "file content does not match its sha256 in metadata.json (corrupt or edited)", path
            )
        try:
            df = read_csv_exact(path)
        except Exception as exc:  # pandas' parser errors name the line
            raise RecordedDataError(f"cannot parse CSV: {exc}", path) from None
        if "request" not in df.columns:
            raise RecordedDataError("CSV has no 'request' column", path)
        if info.get("rows") is not None and len(df) != int(info["rows"]):
            raise RecordedDataError(f"expected {info['rows']} rows, found {len(df)} (truncated?)", path)
        for i, r in df["request"].drop_duplicates().items():  # each distinct request once, at its first row
            try:
                json.loads(r)
            except Exception:
                raise RecordedDataError(
                    "the request column is not valid JSON", path, row=int(i) + 2
                ) from None
        self._tables[name] = df
        return df

    def verify(self) -> "Recording":
        """Check every file the metadata lists, all at once. Reads only.

        Each file must exist, match its sha256, parse and have its row count.

        Returns:
            The recording; `RecordedDataError` naming the folder and every file at fault.
        """
        exps = self.metadata.get("experiments", {})
        missing = [
            info.get("file", name)
            for name, info in exps.items()
            if not (self.path / str(info.get("file", ""))).is_file()
        ]
        changed = [
            info["file"]
            for name, info in exps.items()
            if info.get("file") not in missing
            and info.get("sha256")
            and sha256(self.path / info["file"]) != info["sha256"]
        ]
        problems = ([f"files missing: {', '.join(missing)}"] if missing else []) + (
            [f"content does not match its sha256 in metadata.json (corrupt or edited): {', '.join(changed)}"]
            if changed
            else []
        )
        if problems:
            raise RecordedDataError(
                f"recording {self.name!r} is not usable: {'; '.join(problems)}", self.path
            )
        for name in exps:
            self.table(name)  # parses, checks rows and request JSON (names the file and row)
        return self

    def request_keys(self, name: str) -> Dict[str, None]:
        """Every distinct request key recorded for an experiment (read once).

        Args:
            name: the experiment.

        Returns:
            Request key -> None, in recording order.
        """
        keys = self._keys.get(name)
        if keys is None:
            keys = self._keys[name] = dict.fromkeys(self.table(name)["request"])
        return keys

    def requests(self, name: str) -> List[dict]:
        """Every distinct request recorded for an experiment.

        Args:
            name: the experiment.

        Returns:
            Each request as a dict of arguments, in recording order.
        """
        return [json.loads(r) for r in self.request_keys(name)]

    def has(self, name: str, request: dict) -> bool:
        """Whether this recording holds one call of an experiment.

        Args:
            name: the experiment.
            request: the call's arguments, matched exactly.

        Returns:
            True when it holds them.
        """
        return name in self.experiments() and request_key(request) in self.request_keys(name)

    def lookup(self, name: str, request: dict):
        """The rows recorded for exactly one call.

        Args:
            name: the experiment.
            request: the call's canonical arguments.

        Returns:
            The rows as the experiment returned them, with their provenance in ``attrs``.

        Raises:
            RecordedDataError: the call was not recorded; it names the nearest recorded values.
            Unsupported: the recorded call raised it on the GPU.
        """
        key = request_key(request)
        found = self._rows.get((name, key))
        if found is None:
            df = self.table(name)
            if name not in self._at:  # the table indexed by request, once
                self._at[name] = df.groupby("request", sort=False).indices
            rows = df.iloc[self._at[name].get(key, [])]
            found = (rows, result_rows(rows)) if not rows.empty else None
        if found is None:
            raise RecordedDataError(
                f"{name}: these arguments were not recorded on {gpu_label(self.metadata.get('gpu'))}",
                self.path / self.metadata["experiments"][name]["file"],
                nearest=nearest(self.requests(name), request),
            )
        rows, result = self._rows[name, key] = found
        if "call_error" in rows.columns and rows["call_error"].notna().all():
            cls = _ERROR_CLASSES.get(str(rows["call_error"].iloc[0]))
            reason = f"(recorded on {gpu_label(self.metadata.get('gpu'))}) {rows['reason'].iloc[0]}"
            raise cls(name, reason) if cls is Unsupported else LabkitError(f"{name}: {reason}")
        out = result.copy()  # the caller's own: a chart or a check may add columns
        # read-only, so pandas' copy of the attrs into each frame made from this one costs nothing
        out.attrs.update(freeze(self.provenance(name)))
        out.attrs["experiment"] = name
        out.attrs["request"] = freeze(request)
        return out

    def values(self, name: str, key: str, where: Optional[dict] = None) -> list:
        """Sorted distinct values of one request field among the matching recorded requests.

        Args:
            name: the experiment.
            key: a dotted request field, e.g. ``spec.N``.
            where: dotted field -> value; only requests that match it in every field other than ``key``
                count.

        Returns:
            The values, sorted (None last).
        """
        seen = []
        for req in self.requests(name):
            flat = flatten(req)
            if where and any(flat.get(k) != v for k, v in where.items() if k != key):
                continue
            if key in flat and flat[key] not in seen:
                seen.append(flat[key])
        try:
            return sorted(seen, key=lambda v: (v is None, v))
        except TypeError:
            return seen


def result_rows(rows):
    """Stored rows of one request as the experiment returned them.

    Args:
        rows: rows of a recording's table.

    Returns:
        The rows without the bookkeeping columns (``request``, ``call_error``) and without columns
        that are empty for this request.
    """
    drop = [c for c in ("request", "call_error") if c in rows.columns]
    return rows.drop(columns=drop).dropna(axis=1, how="all").reset_index(drop=True)


def request_key(request: dict) -> str:
    """A request as canonical JSON: the key recordings and this GPU's saved results file rows under.

    Args:
        request: an experiment's canonical arguments.

    Returns:
        Its JSON, keys sorted, without spaces.
    """
    return json.dumps(request, sort_keys=True, separators=(",", ":"))


def flatten(d: dict, prefix: str = "") -> dict:
    """A request as dotted keys, the form `Recording.values` compares.

    Args:
        d: a request (nested dicts).
        prefix: the keys' prefix, for the recursion.

    Returns:
        Dotted key (e.g. ``spec.N``) -> value, lists as tuples.
    """
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = tuple(v) if isinstance(v, list) else v
    return out


def nearest(recorded: List[dict], request: dict) -> dict:
    """What the learner could ask for instead of a request that was not recorded.

    Args:
        recorded: the recorded requests.
        request: the request.

    Returns:
        For the recorded requests that differ from ``request`` in the fewest fields: each differing
        field -> the values recorded for it.
    """
    want = flatten(request)
    if not recorded:
        return {}
    scored = []
    for r in recorded:
        flat = flatten(r)
        diff = [k for k in set(want) | set(flat) if want.get(k) != flat.get(k)]
        scored.append((len(diff), diff, flat))
    best = min(s[0] for s in scored)
    out: Dict[str, list] = {}
    for n, diff, flat in scored:
        if n == best:
            for k in diff:
                out.setdefault(k, [])
                if flat.get(k) not in out[k]:
                    out[k].append(flat.get(k))
    return {k: sorted(v, key=lambda x: (type(x).__name__, x if x is not None else 0)) for k, v in out.items()}


def load(path, verify: bool = False) -> Recording:
    """Open a recording folder and check its metadata.

    Args:
        path: the folder.
        verify: check every file too (`Recording.verify`).

    Returns:
        The `Recording`; `RecordedDataError` naming the file at fault.
    """
    path = Path(path)
    meta_path = path / "metadata.json"
    if not meta_path.is_file():
        raise RecordedDataError("no metadata.json", meta_path)
    try:
        meta = json.loads(meta_path.read_text())
    except Exception as exc:
        raise RecordedDataError(f"metadata.json is not valid JSON ({exc})", meta_path) from None
    if not isinstance(meta, dict):
        raise RecordedDataError("metadata.json must hold an object", meta_path)
    version = meta.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise RecordedDataError(
            f"schema version {version!r} is newer than this labkit reads (version {SCHEMA_VERSION}): "
            "update labkit (git pull) to read this recording; it was left as it is",
            meta_path,
        )
    if version != SCHEMA_VERSION:
        raise RecordedDataError(
            f"schema version {version!r}; this labkit reads version {SCHEMA_VERSION}", meta_path
        )
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise RecordedDataError(f"metadata.json lacks {missing}", meta_path)
    rec = Recording(path, meta)
    return rec.verify() if verify else rec


def available(root: Optional[Path] = None) -> List[Recording]:
    """Every readable recording under a folder; unreadable ones are skipped (`check_all` says why).

    Args:
        root: the folder; default ``data/recordings``.

    Returns:
        The recordings, by folder name; `RecordedDataError` when two claim the same GPU and date.
    """
    root = Path(root) if root else data_dir()
    out = []
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if (p / "metadata.json").is_file():
                try:
                    out.append(load(p))
                except RecordedDataError:
                    continue
    return check_unique(out)


def check_unique(recs: List[Recording]) -> List[Recording]:
    """Recordings, checked that no two claim the same GPU and date.

    A copy, or a second recording of one day, would make "recorded on <GPU>, <date>" ambiguous.
    Nothing is moved or deleted: keep one folder and remove or rename the other yourself.

    Args:
        recs: the recordings.

    Returns:
        ``recs`` unchanged; `RecordedDataError` naming both folders otherwise.
    """
    seen: Dict[tuple, Recording] = {}
    for r in recs:
        key = (r.metadata.get("gpu"), r.metadata.get("date"))
        if key in seen:
            raise RecordedDataError(
                f"recordings {seen[key].name!r} ({seen[key].path}) and {r.name!r} "
                f"both claim {key[0]} recorded {key[1]}: each GPU and date may have one recording; "
                "keep one folder (nothing was changed)",
                r.path,
            )
        seen[key] = r
    return recs


def check_all(root: Optional[Path] = None) -> List[Recording]:
    """Every recording folder loaded and verified. Reads only.

    Args:
        root: the folder; default ``data/recordings``.

    Returns:
        The recordings (every file checked, `Recording.verify`, and no two claiming the same GPU and
        date); `RecordedDataError` naming the first folder at fault.
    """
    root = Path(root) if root else data_dir()
    if not root.is_dir():
        raise RecordedDataError("no recordings folder", root)
    folders = [p for p in sorted(root.iterdir()) if p.is_dir()]
    return check_unique([load(p, verify=True) for p in folders])


def describe_available() -> str:
    """The recordings recorded mode can use, for ``doctor``.

    Returns:
        Lines of text: their count, then one line each.
    """
    try:
        recs = available()
    except Exception as exc:  # noqa: BLE001  (the doctor reports, never fails)
        return f"{'recordings':>20}: unavailable ({exc})"
    return "\n".join([f"{'recordings':>20}: {len(recs)}"] + [f"{'':>20}  {r.describe()}" for r in recs])


_current: Optional[Recording] = None
_picked: Optional[Path] = None  # the folder last chosen with `use` (LABKIT_RECORDING counts too)


def use(name_or_path) -> Recording:
    """Pick the recording recorded-mode answers come from.

    Args:
        name_or_path: a folder name under data/recordings, or a folder path.

    Returns:
        The `Recording`; `RecordedDataError` listing the available ones when there is no such folder.
    """
    global _current, _picked
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise InvalidSpec("recording", name_or_path, "must be a recording name or a folder path")
    p = Path(name_or_path)
    if not p.is_dir():
        p = data_dir() / str(name_or_path)
    if not p.is_dir():
        names = [r.name for r in available()]
        raise RecordedDataError(
            f"no recording {str(name_or_path)!r} (available: {', '.join(names) or 'none'})", p
        )
    _current = load(p)
    _picked = _current.path
    return _current


def current() -> Recording:
    """The recording in use: ``LABKIT_RECORDING``, then the one picked with `use`, then the default.

    Returns:
        The `Recording`; `RecordedDataError` when none is found.
    """
    global _current
    env = os.environ.get("LABKIT_RECORDING")
    if env and (_current is None or env not in (_current.name, str(_current.path))):
        return use(env)
    if _current is None:
        recs = shipped()  # the default first
        if not recs:
            raise RecordedDataError(
                "no recordings found; record one on a GPU with `python -m labkit record`", data_dir()
            )
        _current = recs[0]
    return _current


def shipped() -> List[Recording]:
    """`available`, with the default recording first.

    Each folder is one `Recording` for the whole process: its tables are read and checked once,
    whoever asks (recorded mode, a panel's GPU picker, `labkit.present.compare`).

    Returns:
        The recordings.
    """
    out = []
    for r in sorted(available(), key=lambda r: r.name != DEFAULT_RECORDING):
        known = _loaded.get(r.path)
        if known is None or known.metadata != r.metadata:
            known = _loaded[r.path] = r
        out.append(known)
    return out


_loaded: Dict[Path, Recording] = {}


def named(name: str) -> Recording:
    """The shipped recording called ``name``.

    Args:
        name: a folder under data/recordings.

    Returns:
        The `Recording`; `InvalidSpec` listing the available ones for any other name.
    """
    recs = shipped()
    found = next((r for r in recs if r.name == name), None)
    if found is None:
        raise InvalidSpec(
            "recording",
            name,
            f"must name a recording in {data_dir()} (available: {', '.join(r.name for r in recs) or 'none'})",
        )
    return found


def for_experiment(name: str) -> Recording:
    """The recording a panel of one experiment answers from by default.

    That is the current recording (one picked with `use` or ``LABKIT_RECORDING``, else the default),
    unless nobody picked one and another shipped recording holds more of the experiment's calls, or
    the one picked holds none of them (an experiment recorded on one GPU: its chart names that GPU).
    The panel's GPU picker offers the others.

    Args:
        name: the experiment.

    Returns:
        The `Recording`.
    """
    rec = current()
    if _chosen(rec) and name in rec.experiments():
        return rec

    def held(r: Recording) -> int:
        return len(r.request_keys(name)) if name in r.experiments() else 0

    best = max(shipped(), key=held)  # the default comes first: a tie keeps it
    return best if held(best) > held(rec) else rec


def lookup(name: str, request: dict):
    """Answer an experiment call from the current recording.

    When nobody picked one (no ``LABKIT_RECORDING``, no `use`) and the default recording lacks the
    call, the first other shipped recording that holds exactly this call answers. Its rows carry its
    own provenance, so the chart names that GPU: a call recorded on one GPU only is still shown, never
    filled in from another call.

    Args:
        name: the experiment.
        request: the call's canonical arguments.

    Returns:
        The recorded rows (`Recording.lookup`).
    """
    rec = current()
    if _chosen(rec) or rec.has(name, request):
        return rec.lookup(name, request)
    other = next((r for r in shipped() if r.path != rec.path and r.has(name, request)), None)
    return (other or rec).lookup(name, request)


def _chosen(rec: Recording) -> bool:
    """Whether ``rec`` was chosen (`use`, ``LABKIT_RECORDING``) rather than taken as the default."""
    return rec.path == _picked or bool(os.environ.get("LABKIT_RECORDING"))
