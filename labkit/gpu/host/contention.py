"""Whether another process used the GPU while labkit measured: NVML's per-process utilisation.

NVML (``nvmlDeviceGetProcessUtilization``) keeps, per process with a CUDA context, samples of the
share of time its kernels ran (``smUtil``) and its memory traffic (``memUtil``), each stamped
with the host time (microseconds) its sampling period ended; the driver samples about once a
second (H200, driver 580: one sample per process per second), so a short measurement is judged
by the samples whose period ends after it began. A process counts as contending when its
samples since then show kernels or memory traffic and it is not this process, one of its
children (build and report workers) or ancestors (the script that started it), a labkit member of
the GPU lock (`labkit.gpu.host.lock`: they do their GPU work under the lock, so their samples are other
turns), or a member's child.

Without NVML, or on a GPU or driver that keeps no samples, every answer is "none": contention is
information, never a reason to fail.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterable, List, Set

from .conditions import _LOCK, _handle, _nvml

#: a process counts when a sample shows this much SM or memory use (percent)
MIN_UTIL = 1
#: seconds looked back before a turn began: a sample is stamped when its period (about a second)
#: ends, so a short turn may have no sample of its own; the one before it covers its start
LOOKBACK_S = 1.0


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _ancestors(pid: int) -> Set[int]:
    """The parent of ``pid``, its parent, ... (at most 6 generations, init left out)."""
    out = set()
    for _ in range(6):
        pid = _ppid(pid)
        if pid <= 1:
            break
        out.add(pid)
    return out


def _family(pid: int, roots: Set[int]) -> bool:
    """Whether ``pid`` is one of ``roots`` or a descendant of one."""
    return pid in roots or bool(_ancestors(pid) & roots)


def active_since(since_us: int) -> Set[int]:
    """Pids whose NVML samples since a moment show GPU use.

    Args:
        since_us: host microseconds since the epoch.

    Returns:
        The pids; empty without NVML or samples.
    """
    n = _nvml()
    if n is None:
        return set()
    with _LOCK:
        try:
            samples = n.nvmlDeviceGetProcessUtilization(_handle(n), int(since_us))
        except Exception:  # noqa: BLE001  (NOT_FOUND: no samples since then; NOT_SUPPORTED; ...)
            return set()
    return {
        int(s.pid)
        for s in samples
        if int(s.timeStamp) >= since_us and (int(s.smUtil) >= MIN_UTIL or int(s.memUtil) >= MIN_UTIL)
    }


def others_since(since_us: int, members: Callable[[], Iterable[int]] = tuple) -> List[int]:
    """Pids of other processes that used the GPU since a moment less `LOOKBACK_S`, sorted.

    This process's family is left out (its children, and its ancestors: the script or test run that
    started it), and so are labkit members of the GPU lock with their children.

    Args:
        since_us: host microseconds since the epoch.
        members: returns the lock's member pids; asked only when some process was active.

    Returns:
        The pids.
    """
    active = active_since(int(since_us - LOOKBACK_S * 1e6))
    if not active:
        return []
    roots = {os.getpid(), *members()}
    mine = _ancestors(os.getpid())
    return sorted(p for p in active if p not in mine and not _family(p, roots))


def busy_now(window_s: float = 2.0, members: Callable[[], Iterable[int]] = tuple) -> List[int]:
    """Pids of other processes (as `others_since`) that used the GPU in the last few seconds.

    Args:
        window_s: how far back to look, in seconds.
        members: returns the lock's member pids.

    Returns:
        The pids.
    """
    return others_since(int((time.time() - window_s + LOOKBACK_S) * 1e6), members)
