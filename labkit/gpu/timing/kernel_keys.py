"""A kernel's name as two tracers (CUPTI, ``torch.profiler``) can agree on it, to tell whether
labkit and PyTorch ran the same kernels (`kernel_key`)."""

from __future__ import annotations

from .trace import demangle


def kernel_key(name: str) -> str:
    """A kernel's name as both tracers can agree on it: demangled, without ``void`` and arguments.

    Template arguments stay: they name the tile sizes, so two configurations of one kernel differ.

    Args:
        name: a kernel name as CUPTI or ``torch.profiler`` reports it (mangled or not).

    Returns:
        The key; "memset" or "memcpy" for those records.
    """
    s = demangle(name or "").strip()
    low = s.lower()
    if low.startswith("memset") or low == "memset":
        return "memset"
    if low.startswith("memcpy"):
        return "memcpy"
    if s.startswith("void "):
        s = s[5:]
    if s.endswith(")"):  # drop the argument list: the last balanced (...)
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    return s.strip()
