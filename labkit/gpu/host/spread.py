"""Which GPU of the host each learner's server gets, in a class on one multi-GPU host.

A class hub (``class/jupyterhub_config.py``) asks `Spread.assign` for a GPU before it starts a
learner's JupyterLab and gives the server that GPU alone (`environment`: ``CUDA_VISIBLE_DEVICES``
set to the GPU's UUID, so CUDA's and NVML's numbering cannot disagree). Each GPU keeps its own lock
and queue (`labkit.gpu.host.lock` names a lock by the GPU's UUID), so a learner waits only for the
learners on the same GPU.

**The choice.** A learner the teacher pinned gets the pinned GPU. Anyone else gets the GPU with
the fewest running learners among those not reserved; ties go to the GPU the learner had last
time, then to the GPU given out least often, then to the lowest index. A reserved GPU (a teacher's
own job, a demo) is given only to learners pinned to it.

**The record** is a JSON file (``learners``: name -> GPU UUID, whether the server runs, when it was
given). Every change reads it, decides and writes it back under an exclusive ``flock`` on a file
beside it, and the write is atomic (`labkit.store.localcache.write_atomic`): two hubs, or two
spawns at once, never lose an assignment or see half a file.

**The GPUs** are the ones NVML lists (`host_gpus`), or a list given by the caller.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Union

from ...errors import InvalidSpec
from ...store.localcache import now, write_atomic
from .conditions import _nvml

#: the environment variable that tells a learner's kernel which GPU its server was given
GIVEN_VAR = "LABKIT_CLASS_GPU"
#: version of the record's JSON layout
RECORD_VERSION = 1

GpuRef = Union[int, str]


class SpreadWarning(UserWarning):
    """The class's GPU record could not be read and was set aside."""


@dataclass(frozen=True)
class HostGPU:
    """One GPU of the host.

    Attributes:
        index: NVML's index, the order ``nvidia-smi`` lists.
        uuid: ``GPU-...``.
        name: e.g. ``NVIDIA H100 80GB HBM3``.
    """

    index: int
    uuid: str
    name: str


def host_gpus() -> List[HostGPU]:
    """The GPUs NVML sees on this host, in its order.

    Returns:
        `HostGPU` s; empty without NVML (no ``nvidia-ml-py``, no driver).
    """
    n = _nvml()
    if n is None:
        return []
    out = []
    for i in range(int(n.nvmlDeviceGetCount())):
        h = n.nvmlDeviceGetHandleByIndex(i)
        uuid, name = n.nvmlDeviceGetUUID(h), n.nvmlDeviceGetName(h)
        out.append(HostGPU(i, uuid.decode() if isinstance(uuid, bytes) else uuid, _text(name)))
    return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def as_gpus(gpus: Iterable) -> List[HostGPU]:
    """GPUs as `HostGPU` objects.

    Args:
        gpus: each a `HostGPU` or a mapping with ``index``, ``uuid`` and ``name``.

    Returns:
        The `HostGPU` s; `InvalidSpec` for a repeated index or UUID.
    """
    out = [
        g if isinstance(g, HostGPU) else HostGPU(int(g["index"]), str(g["uuid"]), str(g["name"]))
        for g in gpus
    ]
    for field in ("index", "uuid"):
        values = [getattr(g, field) for g in out]
        if len(set(values)) != len(values):
            raise InvalidSpec("gpus", values, f"each GPU's {field} must appear once")
    return out


class Spread:
    """Gives each learner's server one GPU of the host (see the module docstring).

    Args:
        record: the JSON file that keeps the assignments (made on first use).
        gpus: the host's GPUs (`HostGPU` or mappings, see `as_gpus`).
        pins: learner name -> GPU (its index or UUID) that learner always gets.
        reserved: GPUs (index or UUID) given only to learners pinned to them.

    Raises `InvalidSpec` for a pin or reservation naming no GPU of ``gpus``, or when every GPU is
    reserved.
    """

    def __init__(
        self,
        record: Union[str, Path],
        *,
        gpus: Iterable,
        pins: Optional[Mapping[str, GpuRef]] = None,
        reserved: Iterable[GpuRef] = (),
    ):
        self.record = Path(record)
        self.gpus = as_gpus(gpus)
        self.pins = {str(k): self.find(v, what=f"pins[{k!r}]") for k, v in (pins or {}).items()}
        self.reserved = {self.find(r, what="reserved").uuid for r in reserved}
        if self.gpus and len(self.reserved) == len(self.gpus):
            raise InvalidSpec(
                "reserved", sorted(self.reserved), "leaves no GPU for learners who are not pinned"
            )

    def find(self, ref: GpuRef, *, what: str = "gpu") -> HostGPU:
        """The GPU a reference names.

        Args:
            ref: its index (an int, or digits) or its UUID.
            what: what the reference is, named in the error.

        Returns:
            The `HostGPU`; `InvalidSpec` when no GPU of the host has that index or UUID.
        """
        for g in self.gpus:
            if (str(ref).isdigit() and g.index == int(ref)) or g.uuid == str(ref):
                return g
        known = ", ".join(f"{g.index} ({g.uuid})" for g in self.gpus) or "none"
        raise InvalidSpec(what, ref, f"must name a GPU of this host by index or UUID; it has {known}")

    # -- the record --
    @contextlib.contextmanager
    def _locked(self):
        """The record, read under an exclusive lock; written back (atomically) when the block
        changed it."""
        self.record.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.record.with_name(f"{self.record.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self._read()
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                write_atomic(self.record, (json.dumps(state, indent=1, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)  # closing the descriptor lets the flock go

    def _read(self) -> dict:
        """The record; a file that cannot be read as one is renamed aside (one warning naming
        it) and the class starts a new record (learners are then balanced afresh)."""
        try:
            state = json.loads(self.record.read_text())
            why = None if isinstance(state, dict) else "not a JSON object"
        except FileNotFoundError:
            state, why = {}, None
        except (OSError, ValueError) as exc:
            state, why = {}, f"{type(exc).__name__}: {exc}"
        if why is None and state.get("version", RECORD_VERSION) != RECORD_VERSION:
            why = f"version {state.get('version')!r}; this labkit reads {RECORD_VERSION}"
        if why is not None:
            aside = self.record.with_name(f"{self.record.name}.unreadable-{now().replace(':', '')}")
            with contextlib.suppress(OSError):
                os.replace(self.record, aside)
            warnings.warn(
                f"labkit: the class's GPU record {self.record} cannot be read ({why}); moved to {aside}, "
                "learners are given GPUs afresh",
                SpreadWarning,
                stacklevel=4,
            )
            state = {}
        state.setdefault("version", RECORD_VERSION)
        state.setdefault("learners", {})
        return state

    def table(self) -> Dict[str, dict]:
        """Every learner in the record.

        Returns:
            Name -> ``gpu`` (UUID), ``running``, ``given_at``.
        """
        with self._locked() as state:
            return {k: dict(v) for k, v in state["learners"].items()}

    def running(self) -> Dict[str, List[str]]:
        """The learners whose servers run on each GPU now.

        Returns:
            GPU UUID -> sorted learner names, for every GPU.
        """
        table = self.table()
        return {
            g.uuid: sorted(n for n, e in table.items() if e["running"] and e["gpu"] == g.uuid)
            for g in self.gpus
        }

    # -- giving and taking back --
    def assign(self, learner: str) -> Optional[HostGPU]:
        """The GPU for a learner's server, recorded as running there.

        Args:
            learner: the learner's name.

        Returns:
            The `HostGPU`; None when the host has no GPU.
        """
        if not self.gpus:
            return None
        with self._locked() as state:
            learners = state["learners"]
            gpu = self._choose(str(learner), learners)
            learners[str(learner)] = dict(gpu=gpu.uuid, running=True, given_at=now())
            return gpu

    def release(self, learner: str) -> None:
        """A learner's server stopped: its GPU no longer counts it (it is kept as the learner's last GPU).

        Args:
            learner: the learner's name.
        """
        with self._locked() as state:
            entry = state["learners"].get(str(learner))
            if entry is not None and entry.get("running"):
                entry["running"] = False

    def _choose(self, learner: str, learners: dict) -> HostGPU:
        if learner in self.pins:
            return self.pins[learner]
        running: Dict[str, int] = {}
        given: Dict[str, int] = {}
        for name, e in learners.items():
            given[e["gpu"]] = given.get(e["gpu"], 0) + 1
            if e.get("running") and name != learner:
                running[e["gpu"]] = running.get(e["gpu"], 0) + 1
        last = (learners.get(learner) or {}).get("gpu")
        open_gpus = [g for g in self.gpus if g.uuid not in self.reserved]
        return min(
            open_gpus,
            key=lambda g: (running.get(g.uuid, 0), g.uuid != last, given.get(g.uuid, 0), g.index),
        )


# ---- the learner's side -------------------------------------------------------------------------
def environment(gpu: Optional[HostGPU], *, of: int) -> Dict[str, str]:
    """The environment variables a learner's server gets for its GPU.

    Args:
        gpu: the GPU given; None for none.
        of: how many GPUs the host has.

    Returns:
        ``CUDA_VISIBLE_DEVICES`` (the UUID: the server sees that GPU alone, as its device 0) and
        `GIVEN_VAR` (what `given_text` shows); empty for no GPU.
    """
    if gpu is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": gpu.uuid, GIVEN_VAR: json.dumps(dict(asdict(gpu), of=int(of)))}


def given() -> Optional[dict]:
    """The GPU the class hub gave this server.

    Returns:
        ``index``, ``uuid``, ``name`` and ``of``; None outside such a class, or when `GIVEN_VAR`
        cannot be read.
    """
    raw = os.environ.get(GIVEN_VAR, "").strip()
    if not raw:
        return None
    try:
        got = json.loads(raw)
        return dict(index=int(got["index"]), uuid=str(got["uuid"]), name=str(got["name"]), of=int(got["of"]))
    except (ValueError, KeyError, TypeError):
        return None


def given_text() -> str:
    """One sentence for the mode banner naming the GPU the class hub gave this server.

    Returns:
        The sentence, with a leading space; ``""`` outside such a class.
    """
    g = given()
    if g is None:
        return ""
    return (
        f" **Your GPU: number {g['index']} of the host's {g['of']}** ({g['name']}, {g['uuid']}), given to "
        "your server by the class hub; your measurements queue only behind the learners on that GPU."
    )
