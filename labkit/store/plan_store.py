"""Saved cuDNN plans: a built graph's chosen plan, serialized to disk and loaded by a later need.

The cuDNN frontend serializes a built graph with one execution plan (``graph.serialize()``: the
plan the graph selected, with its compiled kernel where cuDNN compiled one at run time) and loads
it back with ``graph.deserialize`` in milliseconds, against 0.015 s to seconds to build every plan
and autotune them. labkit saves two kinds of plan per graph (`KINDS`): the heuristic's pick (what a
graph built with only that plan holds) and the autotune winner (with what autotuning measured). A
third kind, `COMPILED`, keeps every plan whose kernel cuDNN compiled at run time, whichever was
chosen, so a later build of its graph deserializes it instead of compiling it again
(`labkit.gpu.cudnn.compiled_plans`; their number is bounded: `PlanStore.trim`).
This module is the file handling only; `labkit.gpu.cudnn.saved_plans` (``save_plan``, ``load_plan``)
serializes and deserializes.

Where: next to this GPU's recording (`labkit.store.localcache`), under the cache folder:

    plans/<gpu-slug>-<identity hash>/<graph digest>.<kind>.json

(a compiled plan's digest covers its graph's key and its name).

**Keyed by every version that changes a plan's meaning.** The folder is the machine identity
(GPU, driver, CUDA, cuDNN backend and frontend, CuPy, labkit schema: `machine.IDENTITY_FIELDS`);
each file repeats the cuDNN backend and frontend versions it was saved under, and a file whose
versions differ from this process's is set aside, never deserialized. The graph digest is the
sha256 of the graph's full key (every spec field, epilogue, workspace cap).

**Files** are JSON objects: the plan (name, workspace bytes, behaviour notes), when it was saved,
what it cost to find (``info``: build and autotune seconds, plans timed, the winner's GPU time),
and the serialized bytes (base64) with their sha256. Writes are atomic (`localcache.write_atomic`);
two writers of the same plan each leave a whole file. A corrupt, truncated, other-schema or
other-version file gets one warning naming it and is moved to ``set-aside/``; a read-only or full
cache folder gets one warning and plans are no longer saved (they are still built and used).
``LABKIT_SAVED_PLANS=0`` turns saving and loading off.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, Optional

from ..errors import InvalidSpec
from . import localcache, machine

#: version of the files written here; a file of another version is set aside, never read
SCHEMA_VERSION = 1
#: what a saved plan is: the heuristic's pick, or the fastest plan autotuning found
KINDS = ("heuristic", "autotuned")
#: the kind of a runtime-compiled plan kept for its compiled kernel (`labkit.gpu.cudnn.compiled_plans`),
#: keyed by its graph and its name, whether or not it was chosen
COMPILED = "compiled"
#: identity fields a saved plan must match to be deserialized (also checked inside each file)
VERSION_FIELDS = ("cudnn_backend", "cudnn_frontend")


@dataclass
class SavedPlan:
    """One plan read back from disk.

    Attributes:
        graph_key: the graph's key as text (`key_text`).
        kind: one of `KINDS`.
        plan_name: the plan's name, e.g. "eng0".
        workspace_bytes: bytes the plan needs.
        notes: cuDNN's behaviour notes.
        saved_at: when it was saved (ISO 8601).
        data: the bytes ``graph.serialize()`` returned.
        info: what finding it cost (seconds, plans timed, GPU microseconds) and its check.
        path: the file.
        read_seconds: seconds spent reading and checking it.
    """

    graph_key: str
    kind: str
    plan_name: str
    workspace_bytes: int
    notes: str
    saved_at: str
    data: bytes
    info: Dict[str, object] = field(default_factory=dict)
    path: Optional[Path] = None
    read_seconds: float = 0.0


def key_text(graph_key) -> str:
    """A graph key as canonical text.

    Args:
        graph_key: `labkit.gpu.cudnn.conv_graph.graph_key`'s nested tuples of plain values.

    Returns:
        Its JSON, keys sorted, without spaces.
    """
    return json.dumps(graph_key, sort_keys=True, default=str, separators=(",", ":"))


def check_kind(kind) -> str:
    """A plan kind, checked.

    Args:
        kind: the kind asked for.

    Returns:
        ``kind``; `InvalidSpec` naming `KINDS` for anything else.
    """
    if kind not in KINDS:
        raise InvalidSpec("kind", kind, f"must be one of {', '.join(KINDS)}")
    return kind


class PlanStore:
    """The saved plans of one machine identity under a cache folder (see the module docstring).

    Args:
        root: the cache folder.
        ident: the machine identity (`labkit.store.machine.identity`).
        shared: a class's shared folder: read, never written or changed.
    """

    def __init__(self, root: Path, ident: dict, shared: bool = False):
        self.root = Path(root)
        self.identity = dict(ident)
        self.key, self.path = machine.folder_of(self.root, "plans", self.identity)
        #: a class's shared folder (`shared`): read, never written or changed
        self.shared = shared
        self.writable = not shared
        self.saved = 0

    def __repr__(self) -> str:
        return f"<PlanStore {self.path} ({'writable' if self.writable else 'read-only'})>"

    def path_for(self, graph_key, kind: str) -> Path:
        """The file for one graph's plan of one kind.

        Args:
            graph_key: the graph's key.
            kind: one of `KINDS`, or `COMPILED`.

        Returns:
            ``<folder>/<digest>.<kind>.json``.
        """
        digest = hashlib.sha256(key_text(graph_key).encode()).hexdigest()[:32]
        return self.path / f"{digest}.{kind if kind == COMPILED else check_kind(kind)}.json"

    def put(
        self,
        graph_key,
        kind: str,
        data: bytes,
        plan_name: str,
        workspace_bytes: int,
        notes: str = "",
        info: Optional[dict] = None,
    ) -> Optional[Path]:
        """Save one serialized plan.

        Args:
            graph_key: the graph's key.
            kind: one of `KINDS`, or `COMPILED`.
            data: the bytes ``graph.serialize()`` returned.
            plan_name: the plan's name.
            workspace_bytes: bytes the plan needs.
            notes: cuDNN's behaviour notes.
            info: what finding it cost, and its check against float64.

        Returns:
            The file; None when saving is off or failed.
        """
        path = self.path_for(graph_key, kind)
        if not self.writable:
            return None
        data = bytes(data)
        body = {
            "schema_version": SCHEMA_VERSION,
            "identity_hash": self.key,
            "graph": key_text(graph_key),
            "kind": kind,
            "plan_name": str(plan_name),
            "workspace_bytes": int(workspace_bytes),
            "notes": str(notes or ""),
            "saved_at": localcache.now(),
            "info": dict(info or {}),
            **{f: self.identity.get(f) for f in VERSION_FIELDS},
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "data": base64.b64encode(data).decode("ascii"),
        }
        try:
            localcache.write_atomic(path, json.dumps(body, default=str).encode())
        except OSError as exc:
            self.writable = False
            localcache._warn_once(
                f"plans-write:{self.root}",
                f"labkit cache: cannot save plans in {self.root} ({type(exc).__name__}: {exc}); "
                "plans are built as usual and not saved",
            )
            return None
        self.saved += 1
        return path

    def get(self, graph_key, kind: str) -> Optional[SavedPlan]:
        """The saved plan for one graph and kind.

        Args:
            graph_key: the graph's key.
            kind: one of `KINDS`, or `COMPILED`.

        Returns:
            The `SavedPlan`; None when none is saved, or it is unusable (set aside with one warning
            naming the file and why).
        """
        t0 = time.perf_counter()
        path = self.path_for(graph_key, kind)
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            localcache._warn_once(
                f"plans-read:{path}", f"labkit cache: cannot read {path} ({exc}); building instead"
            )
            return None
        got = self._check(raw, key_text(graph_key), kind)
        if isinstance(got, str):
            localcache.set_aside(self.root, path, got, read_only=self.shared)
            return None
        got.path, got.read_seconds = path, time.perf_counter() - t0
        return got

    def _check(self, raw: bytes, graph: Optional[str] = None, kind: Optional[str] = None):
        """A `SavedPlan`, or a string saying why the file cannot be used. ``graph``/``kind``: what the
        file must hold (None: whatever it holds)."""
        e = localcache.read_entry(raw, SCHEMA_VERSION)
        if isinstance(e, str):
            return e
        for f in VERSION_FIELDS:
            if e.get(f) != self.identity.get(f):
                return (
                    f"saved under {f.replace('_', ' ')} {e.get(f)!r}, "
                    f"this process has {self.identity.get(f)!r}: a plan is never loaded into another cuDNN"
                )
        if e.get("identity_hash") != self.key:
            return "saved under another machine identity"
        for f in ("graph", "kind", "plan_name", "workspace_bytes", "saved_at", "data", "sha256"):
            if f not in e:
                return f"lacks {f!r}"
        if graph is not None and e["graph"] != graph or kind is not None and e["kind"] != kind:
            return "holds another graph's plan"
        graph, kind = e["graph"], e["kind"]
        try:
            data = base64.b64decode(str(e["data"]).encode("ascii"), validate=True)
        except ValueError as exc:
            return f"plan bytes are not base64: {str(exc)[:80]}"
        if hashlib.sha256(data).hexdigest() != e["sha256"]:
            return "plan bytes do not match their sha256 (corrupt or edited)"
        try:
            return SavedPlan(
                graph_key=graph,
                kind=kind,
                plan_name=str(e["plan_name"]),
                workspace_bytes=int(e["workspace_bytes"]),
                notes=str(e.get("notes") or ""),
                saved_at=str(e["saved_at"]),
                data=data,
                info=dict(e.get("info") or {}),
            )
        except (TypeError, ValueError) as exc:  # e.g. a workspace that is not a number
            return f"a field of the wrong type: {str(exc)[:80]}"

    def set_aside(self, saved: SavedPlan, why: str) -> None:
        """Move a plan that cuDNN would not load to ``set-aside/``, with one warning naming it.

        Args:
            saved: the plan.
            why: the reason, for the warning.
        """
        if saved.path is not None and saved.path.exists():
            localcache.set_aside(self.root, saved.path, why, read_only=self.shared)

    def entries(self) -> Iterator[dict]:
        """What is saved; unreadable files are set aside.

        Returns:
            An iterator of one dict per readable file: graph, kind, plan_name, workspace_bytes,
            saved_at, bytes, info and path.
        """
        if not self.path.is_dir():
            return
        for f in sorted(self.path.glob("*.json")):
            try:
                got = self._check(f.read_bytes())
            except OSError as exc:
                got = f"not a readable plan file: {type(exc).__name__}"
            if isinstance(got, str):
                localcache.set_aside(self.root, f, got, read_only=self.shared)
                continue
            yield dict(
                graph=got.graph_key,
                kind=got.kind,
                plan_name=got.plan_name,
                workspace_bytes=got.workspace_bytes,
                saved_at=got.saved_at,
                bytes=len(got.data),
                info=got.info,
                path=str(f),
            )

    def has(self, graph_key, kind: str) -> bool:
        """Whether a file for one graph's plan of one kind is there (not read, not checked).

        Args:
            graph_key: the graph's key.
            kind: one of `KINDS`, or `COMPILED`.

        Returns:
            True if the file exists.
        """
        return self.path_for(graph_key, kind).is_file()

    def trim(self, kind: str, keep: int) -> int:
        """Delete the oldest files of one kind beyond the newest ``keep`` (by modification time).

        Args:
            kind: one of `KINDS`, or `COMPILED`.
            keep: how many files of that kind to keep.

        Returns:
            How many files were deleted.
        """
        if not self.writable or not self.path.is_dir():
            return 0
        files = []
        for f in self.path.glob(f"*.{kind}.json"):
            try:
                files.append((f.stat().st_mtime, f))
            except OSError:  # deleted by another process meanwhile
                continue
        gone = 0
        for _, f in sorted(files, reverse=True)[keep:]:
            try:
                f.unlink()
                gone += 1
            except OSError:
                continue
        return gone

    def clear(self) -> int:
        """Delete every saved plan of this identity.

        Returns:
            How many files were deleted.
        """
        return localcache.delete_files(self.path, "*.json")


# ---- the one for this process -----------------------------------------------------------------
_this = machine.ThisMachine(PlanStore, "LABKIT_SAVED_PLANS", root=localcache.cache_root)


def enabled() -> bool:
    """Whether saved plans are on.

    Returns:
        False when ``LABKIT_SAVED_PLANS=0``.
    """
    return _this.enabled()


def current() -> Optional[PlanStore]:
    """This machine's saved plans in the cache folder.

    Returns:
        The `PlanStore`; None without a live GPU or with ``LABKIT_SAVED_PLANS=0``.

    Raises:
        localcache.CacheError: ``LABKIT_CACHE`` names a file.
    """
    return _this.get()


def _open_shared(root: Path, ident: dict) -> Optional[PlanStore]:
    if localcache.shared() is None:  # unusable: `localcache.open_shared` said why, once
        return None
    return PlanStore(root, ident, shared=True)


_shared = machine.ThisMachine(_open_shared, "LABKIT_SAVED_PLANS", root=localcache.shared_root)


def shared() -> Optional[PlanStore]:
    """The plans saved in the class's shared folder (``LABKIT_SHARED_CACHE``), read only.

    Returns:
        The `PlanStore` for this machine identity; None when unset or unusable.
    """
    return _shared.get()


def reset() -> None:
    """Forget the process's `current` and `shared` stores.

    The next call reads ``LABKIT_CACHE`` and ``LABKIT_SHARED_CACHE`` again.
    """
    _this.reset()
    _shared.reset()


def describe() -> str:
    """Where saved plans live and how many there are, for ``doctor``.

    Returns:
        One line of text.
    """
    try:
        store = current()
    except localcache.CacheError as exc:
        return f"{'saved plans':>20}: error: {exc}"
    if store is None:
        why = "off (LABKIT_SAVED_PLANS=0)" if not enabled() else "none on this machine (no live GPU)"
        return f"{'saved plans':>20}: {why}"
    files = list(store.path.glob("*.json")) if store.path.is_dir() else []
    compiled = sum(f.name.endswith(f".{COMPILED}.json") for f in files)
    return (
        f"{'saved plans':>20}: {len(files) - compiled} chosen and {compiled} runtime-compiled in {store.path}"
    )
