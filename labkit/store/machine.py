"""Which machine this is: the identity every saved measurement and plan is keyed by, and the one
store of it per process.

**Identity.** GPU name, compute capability, NVIDIA driver, CUDA driver and runtime, cuDNN backend
and frontend, CuPy, and labkit's data schema (`SCHEMA_VERSION`): `IDENTITY_FIELDS`. This GPU's
recording (`labkit.store.localcache`) and its saved plans (`labkit.store.plan_store`) keep one
folder per identity, named ``<gpu-slug>-<identity hash>`` (`slug`, `identity_hash`); any change
gives a new folder, so numbers or plans from another identity are never served as this GPU's.
`this_identity` asks this machine (None without a usable GPU); `identity` builds one from its
fields (tests, a recording opened under another machine's identity); `differences` says how two
identities differ, for a warning.

**The one store per process.** `ThisMachine` makes a store of this machine's identity on first
use under a root folder (the cache folder, or a class's shared folder), again when that folder
changes, and none in recorded mode (no GPU) or when its switch variable is ``0``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Optional, Tuple

from ..errors import LabkitError

#: labkit's data schema: part of every identity, and the version of the files this GPU's recording
#: writes (`labkit.store.localcache`); a file of another version is set aside, never read
SCHEMA_VERSION = 1
#: the identity fields, in the order they are shown
IDENTITY_FIELDS = (
    "gpu",
    "compute_capability",
    "nvidia_driver",
    "cuda_driver",
    "cuda_runtime",
    "cudnn_backend",
    "cudnn_frontend",
    "cupy",
    "labkit_schema",
)


# ---- who --------------------------------------------------------------------------------------
def nvidia_driver_version() -> Optional[str]:
    """The NVIDIA kernel driver's version (e.g. ``580.159.04``) from /proc/driver/nvidia/version
    (Linux); None where that file is absent."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+(?:\.[0-9]+)+)", text)
    return m.group(1) if m else None


def this_identity() -> Optional[dict]:
    """This machine's identity (`IDENTITY_FIELDS`), or None when it has no usable GPU (recorded
    mode has nothing to save)."""
    from .. import env

    e = env.environment()
    if e.problem is not None or not e.gpu_name:
        return None
    return identity(
        gpu=e.gpu_name,
        compute_capability=e.compute_capability,
        nvidia_driver=nvidia_driver_version(),
        cuda_driver=e.driver_version,
        cuda_runtime=e.cuda_runtime,
        cudnn_backend=e.cudnn_backend,
        cudnn_frontend=e.cudnn_frontend,
        cupy=e.cupy_version,
    )


def identity(**fields) -> dict:
    """An identity dict from its fields (missing ones None; ``labkit_schema`` filled in)."""
    unknown = set(fields) - set(IDENTITY_FIELDS)
    if unknown:
        raise LabkitError(f"unknown identity field(s) {sorted(unknown)}; known: {', '.join(IDENTITY_FIELDS)}")
    out = {k: fields.get(k) for k in IDENTITY_FIELDS}
    out["labkit_schema"] = SCHEMA_VERSION
    return out


def identity_hash(ident: dict) -> str:
    """16 hex digits naming an identity (sha256 of its canonical JSON)."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def slug(name) -> str:
    """A GPU's name as the first part of an identity's folder name (``NVIDIA H100 80GB HBM3`` ->
    ``h100-80gb-hbm3``; no name: ``gpu``)."""
    s = re.sub(r"[^a-z0-9]+", "-", str(name or "gpu").lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "gpu"


def differences(ident: dict, other: dict) -> str:
    """How ``other`` differs from this machine's ``ident``: its first three differing fields."""
    diff = [
        f"{f.replace('_', ' ')} {other.get(f)} (this machine: {ident.get(f)})"
        for f in IDENTITY_FIELDS
        if other.get(f) != ident.get(f)
    ]
    return "; ".join(diff[:3]) or "another identity"


# ---- the one for this process -----------------------------------------------------------------


def folder_of(root: Path, kind: str, ident: dict) -> Tuple[str, Path]:
    """(the identity's hash, its folder of ``kind`` under ``root``): e.g. ``root/recordings/<gpu
    slug>-<hash>``. One machine identity, one folder per kind of stored thing."""
    key = identity_hash(ident)
    return key, Path(root) / kind / f"{slug(ident.get('gpu'))}-{key}"


class ThisMachine:
    """The one store of this machine's identity for the process (`labkit.store.localcache.LocalRecording`,
    saved plans in `labkit.store.plan_store`): made on first use under ``root()``
    (`labkit.store.localcache.cache_root`; `labkit.store.localcache.shared_root` for a class's shared
    folder), made again when that folder changes; None in recorded mode (no GPU), when ``root()`` is
    None, or when the environment variable ``switch`` is ``0``."""

    def __init__(self, make, switch: str, root):
        self._make, self.switch = make, switch
        self._root = root
        self._store = None
        self._made_for = None
        self._lock = threading.Lock()

    def enabled(self) -> bool:
        return os.environ.get(self.switch, "").strip() != "0"

    def get(self):
        """The store, or None. Raises `labkit.store.localcache.CacheError` for a ``LABKIT_CACHE``
        that is a file."""
        if not self.enabled():
            return None
        root = self._root()
        if root is None:
            return None
        with self._lock:
            if self._made_for == root:
                return self._store
            ident = this_identity()
            if ident is None:
                return None
            self._store, self._made_for = self._make(root, ident), root
            return self._store

    def reset(self) -> None:
        """Forget the store (the next `get` looks at its root folder again)."""
        with self._lock:
            self._store = self._made_for = None
