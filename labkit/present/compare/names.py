"""How every comparison chart names its GPUs and says what it leaves out: a GPU's short name, a
trace's legend name (GPU and date), the note on recordings skipped or quick, the line at ratio 1.
"""

from __future__ import annotations

from ...env import gpu_label

#: the line at ratio 1 (no difference)
COLOR_EQUAL = "#5f6368"


def trace_name(df, rec: str) -> str:
    """A recording's name in a chart's legend: its GPU and date, and whether it is a quick recording.

    Args:
        df: `frames`' result.
        rec: the recording's name.

    Returns:
        The name, e.g. ``H200 SXM (2026-11-23)``.
    """
    p = df.attrs.get("provenance", {}).get(rec, {})
    quick = "" if p.get("complete", True) else ", quick recording"
    return f"{gpu_label(p['gpu']) if p.get('gpu') else rec} ({p.get('date')}{quick})"


def short_gpu(name: str) -> str:
    """A GPU's one name on every chart (`labkit.env.gpu_label`): ``NVIDIA H100 80GB HBM3`` is ``H100 SXM``.

    Args:
        name: the GPU's CUDA name.

    Returns:
        The label.
    """
    return gpu_label(name)


def notes(df) -> str:
    """A comparison chart's note on what it leaves out: recordings without the call, quick ones.

    Args:
        df: `frames`' result.

    Returns:
        The notes joined by " · "; empty for none.
    """
    lines = [
        f"{r}: not in this comparison (this call was not recorded there; df.attrs['skipped'] says more)"
        for r in df.attrs.get("skipped", {})
    ]
    quick = [r for r, p in df.attrs.get("provenance", {}).items() if p.get("complete") is False]
    if quick:
        lines.append(f"{', '.join(quick)}: a quick recording (the lessons' base calls only)")
    return " · ".join(lines)
