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

from .. import env
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
    """The NVIDIA kernel driver's version, e.g. ``580.159.04``.

    Returns:
        The version from /proc/driver/nvidia/version (Linux); None where that file is absent.
    """
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+(?:\.[0-9]+)+)", text)
    return m.group(1) if m else None


def this_identity() -> Optional[dict]:
    """This machine's identity (`IDENTITY_FIELDS`).

    Returns:
        The identity dict; None when the machine has no usable GPU (recorded mode saves nothing).
    """
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
    """An identity dict from its fields.

    Args:
        **fields: values of `IDENTITY_FIELDS`; missing ones are None, ``labkit_schema`` is filled in.

    Returns:
        A dict with every field of `IDENTITY_FIELDS`; `LabkitError` for an unknown field.
    """
    unknown = set(fields) - set(IDENTITY_FIELDS)
    if unknown:
        raise LabkitError(f"unknown identity field(s) {sorted(unknown)}; known: {', '.join(IDENTITY_FIELDS)}")
    out = {k: fields.get(k) for k in IDENTITY_FIELDS}
    out["labkit_schema"] = SCHEMA_VERSION
    return out


def identity_hash(ident: dict) -> str:
    """16 hex digits naming an identity (the sha256 of its canonical JSON).

    Args:
        ident: an identity dict.

    Returns:
        The hash, as text.
    """
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def slug(name) -> str:
    """A GPU's name as the first part of an identity's folder name.

    Args:
        name: e.g. ``NVIDIA H100 80GB HBM3``.

    Returns:
        e.g. ``h100-80gb-hbm3``; ``gpu`` without a name.
    """
    s = re.sub(r"[^a-z0-9]+", "-", str(name or "gpu").lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "gpu"


def differences(ident: dict, other: dict) -> str:
    """How another identity differs from this machine's, for a warning.

    Args:
        ident: this machine's identity.
        other: the other identity.

    Returns:
        Its first three differing fields, with both values; "another identity" when none differ.
    """
    diff = [
        f"{f.replace('_', ' ')} {other.get(f)} (this machine: {ident.get(f)})"
        for f in IDENTITY_FIELDS
        if other.get(f) != ident.get(f)
    ]
    return "; ".join(diff[:3]) or "another identity"


# ---- the one for this process -----------------------------------------------------------------


def folder_of(root: Path, kind: str, ident: dict) -> Tuple[str, Path]:
    """The folder of an identity for one kind of stored thing.

    Args:
        root: the cache (or shared) folder.
        kind: what is stored, e.g. "recordings" or "plans".
        ident: the identity.

    Returns:
        (the identity's hash, its folder), e.g. ``root/recordings/<gpu slug>-<hash>``.
    """
    key = identity_hash(ident)
    return key, Path(root) / kind / f"{slug(ident.get('gpu'))}-{key}"


class ThisMachine:
    """The one store of this machine's identity for the process.

    It is made on first use under ``root()``, made again when that folder changes, and is None in
    recorded mode (no GPU), when ``root()`` is None, or when the variable ``switch`` is ``0``.

    Args:
        make: ``make(root, identity)`` makes the store (`labkit.store.localcache.LocalRecording`,
            `labkit.store.plan_store.PlanStore`, ...).
        switch: the environment variable that turns the store off with ``0``.
        root: returns the folder (`labkit.store.localcache.cache_root`, or
            `labkit.store.localcache.shared_root` for a class's shared folder), or None.
    """

    def __init__(self, make, switch: str, root):
        self._make, self.switch = make, switch
        self._root = root
        self._store = None
        self._made_for = None
        self._lock = threading.Lock()

    def enabled(self) -> bool:
        """Whether the store is on.

        Returns:
            False when the variable ``switch`` is ``0``.
        """
        return os.environ.get(self.switch, "").strip() != "0"

    def get(self):
        """The store, made on first use.

        Returns:
            The store ``make`` made; None when it is off or there is no folder or identity.

        Raises:
            labkit.store.localcache.CacheError: ``LABKIT_CACHE`` names a file.
        """
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
