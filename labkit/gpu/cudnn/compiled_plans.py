"""Runtime-compiled plans kept on disk: cuDNN's compiled kernels, serialized once and loaded by a
later build of the same graph instead of compiled again.

cuDNN compiles some engines' kernels with NVRTC when a plan of them is built (their notes say
``RUNTIME_COMPILATION``): 0.05-2 s a plan on the H100's host, for every new shape of an fp8 or a
fused graph, and CUDA's JIT cache does not keep the slowest of them. A build worker
(`labkit.gpu.cudnn.build_pool`) serializes each plan it builds, compiled kernel included; `keep` writes
that to this machine's plan store (`labkit.store.plan_store`, kind ``compiled``, keyed by the graph
and the plan's name, under a folder keyed by GPU, driver, CUDA and cuDNN versions), and `load`
deserializes it in milliseconds. ``python -m labkit warm-kernels`` (``make setup``) fills it for the
shapes the lessons offer (`labkit.gpu.kernel_warmup`), so a first visit compiles none of them.

A loaded plan is only a compiled kernel: it is checked against float64 before it is timed, like a
plan built now (`labkit.gpu.checks.plan_checks`). At most `MAX_KEPT` plans are kept, the oldest deleted
first. ``LABKIT_SAVED_PLANS=0`` turns keeping and loading off.
"""

from __future__ import annotations

import threading
import time
from typing import Dict, Iterable, Optional, Tuple

from ...errors import LabkitError
from ...store import plan_store
from ...store.plan_store import COMPILED

#: most compiled plans kept on disk (50-500 kB each on the H100); the oldest are deleted beyond it
MAX_KEPT = 6000
#: plans kept by this process between two trims of the store
TRIM_EVERY = 200

_lock = threading.Lock()
_since_trim = 0


def _store():
    """This machine's `labkit.store.plan_store.PlanStore` (None: saving off, no GPU, cache unusable)."""
    try:
        return plan_store.current()
    except LabkitError:
        return None


def plan_key(spec_key, epilogue: str, workspace_cap: Optional[int], name: str) -> tuple:
    """The store key of one compiled plan: its graph's key and its name.

    Args:
        spec_key: the convolution's `ConvSpec.key`.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes (None: none).
        name: the plan's name, e.g. ``eng7_k24=29``.

    Returns:
        A tuple of plain values.
    """
    return ("compiled", spec_key, epilogue, workspace_cap, name)


def keep(spec_key, epilogue: str, workspace_cap: Optional[int], built: dict) -> bool:
    """Write one plan a worker built (`labkit.gpu.cudnn.build_pool.build_remote`'s dict) to the store.

    Never raises: a plan that cannot be kept is compiled again next time.

    Args:
        spec_key: the convolution's `ConvSpec.key`.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        built: name, workspace_bytes, notes, data (the serialized graph) and seconds.

    Returns:
        Whether it was written.
    """
    global _since_trim

    store = _store()
    if store is None:
        return False
    try:
        path = store.put(
            plan_key(spec_key, epilogue, workspace_cap, built["name"]),
            COMPILED,
            built["data"],
            built["name"],
            int(built["workspace_bytes"]),
            str(built.get("notes") or ""),
            {"compile_seconds": round(float(built.get("seconds") or 0.0), 3)},
        )
    except Exception:  # noqa: BLE001  (a cache that cannot take it: compiled again next time)
        return False
    with _lock:
        _since_trim += 1
        trim = _since_trim >= TRIM_EVERY
        if trim:
            _since_trim = 0
    if trim:
        store.trim(COMPILED, MAX_KEPT)
    return path is not None


def serialized(g, index: int) -> dict:
    """One built plan of a frontend graph, serialized with what `keep` stores beside it.

    Args:
        g: the frontend graph; plan ``index`` built and selected (the last one built, or selected
            again with ``build_plan_at_index``, which does not rebuild it), so ``serialize()`` holds it.
        index: the plan.

    Returns:
        name, workspace_bytes, notes (cuDNN's behaviour notes, comma-separated) and data (the bytes).
    """
    return dict(
        name=g.get_plan_name_at_index(index),
        workspace_bytes=int(g.get_workspace_size_plan_at_index(index)),
        notes=",".join(str(n).split(".")[-1] for n in g.get_behavior_notes_for_plan_at_index(index)),
        data=bytes(g.serialize()),
    )


def keep_built(spec_key, epilogue: str, workspace_cap: Optional[int], g, index: int) -> bool:
    """`keep` a plan built in this process, in its planned frontend graph ``g``.

    Never raises: a plan cuDNN will not serialize is compiled again next time.

    Args:
        spec_key: the convolution's `ConvSpec.key`.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        g: the frontend graph the plan was built in.
        index: the plan.

    Returns:
        Whether it was written.
    """
    try:
        g.build_plan_at_index(index)  # built already: selects it, so serialize() holds it
        built = serialized(g, index)
    except Exception:  # noqa: BLE001  (cuDNN would not serialize it)
        return False
    return keep(spec_key, epilogue, workspace_cap, built)


def kept(spec_key, epilogue: str, workspace_cap: Optional[int], name: str) -> bool:
    """Whether the store holds one compiled plan (its file exists; not read).

    Args:
        spec_key: the convolution's `ConvSpec.key`.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        name: the plan's name.

    Returns:
        True if `load` may find it.
    """
    store = _store()
    return store is not None and store.has(plan_key(spec_key, epilogue, workspace_cap, name), COMPILED)


def load(spec_key, epilogue: str, workspace_cap: Optional[int], names: Dict[int, str]) -> Dict[int, Tuple]:
    """Deserialize the kept plans among a graph's runtime-compiled ones.

    A file cuDNN will not deserialize is set aside with one warning naming it (the plan is then
    compiled as usual).

    Args:
        spec_key: the convolution's `ConvSpec.key`.
        epilogue: the graph's epilogue.
        workspace_cap: the graph's workspace cap, in bytes.
        names: plan index -> plan name, for the plans wanted.

    Returns:
        Plan index -> (the deserialized frontend graph, the `labkit.store.plan_store.SavedPlan`,
        seconds reading and deserializing it), for those found.
    """
    store = _store()
    if store is None or not names:
        return {}
    import cudnn  # heavy: the cuDNN frontend loads cuDNN

    from .frontend import handle_for  # heavy: CuPy, live only

    out = {}
    for index, name in names.items():
        t0 = time.perf_counter()
        saved = store.get(
            plan_key(spec_key, epilogue, workspace_cap, name), COMPILED
        )  # its key holds the name
        if saved is None:
            continue
        try:
            g = cudnn.pygraph(handle=handle_for())
            g.deserialize(handle_for(), list(saved.data))
        except Exception as exc:  # noqa: BLE001  (cuDNN refused it: compiled again, and the file named)
            store.set_aside(
                saved, f"cuDNN would not deserialize it: {type(exc).__name__}: {str(exc).strip()[:120]}"
            )
            continue
        out[index] = (g, saved, time.perf_counter() - t0)
    return out


def names_of(g, indices: Iterable[int]) -> Dict[int, str]:
    """Plan index -> name for some plans of a planned frontend graph (plans without a name left out).

    Args:
        g: the planned frontend graph.
        indices: the plans.

    Returns:
        The names.
    """
    out = {}
    for i in indices:
        try:
            out[i] = g.get_plan_name_at_index(i)
        except Exception:  # noqa: BLE001  (no name: built, not loaded)
            continue
    return out
