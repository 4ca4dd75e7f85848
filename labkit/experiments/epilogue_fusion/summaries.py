"""Lesson 04's summary: fused against unfused per epilogue, what autotuning the fused graph finds,
and, where the fused graph loses, what its one plan achieves."""

from __future__ import annotations

from ...draw.plots import ok_rows
from ...draw.prose import Text, ratio_amount, where
from ...draw.units import size_text, us_text
from .charts import differs_text, repeat_gaps


def ratio_text(a: float, b: float) -> str:
    """How one time compares with another: ``3.6x faster``, ``11% faster``, ``23.7x SLOWER``.

    Args:
        a: the time described.
        b: the time it is compared with, in the same unit.

    Returns:
        The words: a percentage under 1.2x, else a ratio.
    """
    r = max(a, b) / min(a, b)
    return f"{ratio_amount(r)} {'faster' if a < b else 'SLOWER'}"


def _plans(row) -> tuple:
    """(plans timed, plans cut) of an autotuned row, as integers (None when not recorded)."""
    n, cut = row.get("plans_timed"), row.get("plans_cut")
    n = int(n) if n is not None and n == n else None
    cut = int(cut) if cut is not None and cut == cut else 0
    return n, cut


#: bytes two fused plans' allocations must differ by before the summary names the gap
WORKSPACE_GAP_BYTES = 1 << 20


def _workspace_gap(heuristic, fastest) -> list:
    """A sentence on the workspace between the heuristic's fused plan and the fastest, when their
    allocations differ by more than `WORKSPACE_GAP_BYTES` (both hold the same tensors, so the gap is
    workspace); else none."""
    gap = float(heuristic.allocated_bytes) - float(fastest.allocated_bytes)
    if not abs(gap) > WORKSPACE_GAP_BYTES:
        return []
    return [
        f"Both fused plans hold the same tensors, so the {size_text(abs(gap))} between what they allocate "
        f"({size_text(heuristic.allocated_bytes)} for the heuristic's pick, "
        f"{size_text(fastest.allocated_bytes)} for the fastest) is workspace: the faster plan needs "
        f"{'less' if gap > 0 else 'more'}."
    ]


def fusion_summary(df) -> Text:
    """Fused vs unfused per epilogue: times, intermediates and HBM traffic, then the autotuned plan.

    Args:
        df: `fusion`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    parts = [f"{where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}:"]
    for epi in dict.fromkeys(ok["epilogue"]):
        sub = ok[ok["epilogue"] == epi].set_index("path")
        if not {"fused", "unfused"} <= set(sub.index):
            continue
        f, u = sub.loc["fused"], sub.loc["unfused"]
        parts.append(
            f"**{epi}** fused {us_text(f.gpu_us)} vs unfused {us_text(u.gpu_us)} "
            f"({ratio_text(f.gpu_us, u.gpu_us)}); the unfused path allocates "
            f"{size_text(u.intermediate_bytes)} of intermediates and moves {size_text(u.modelled_hbm_bytes)} "
            f"through HBM against {size_text(f.modelled_hbm_bytes)} fused."
        )
        if "fused, autotuned" not in sub.index:
            continue
        a = sub.loc["fused, autotuned"]
        n, cut = _plans(a)
        every = (
            "every fused plan"
            if n is None
            else "the only fused plan cuDNN built here"
            if n == 1 and not cut
            else f"the {n} fused plans built within {a.get('compile_budget_s'):g} s"
            if cut
            else f"all {n} fused plans"
        )
        if cut:
            parts.append(
                f"{cut} more fused plan{'s were' if cut > 1 else ' was'} still being compiled by cuDNN "
                "(runtime-compiled kernels) and not timed: *measure again* once the compile is done "
                "times every plan."
            )
        if a.plan_name == f.plan_name:
            parts.append(
                f"Timing {every} confirms the heuristic's pick ({us_text(a.gpu_us)}): no fused plan cuDNN "
                "offers here beats the unfused sequence."
                if a.gpu_us > u.gpu_us
                else f"Timing {every} confirms the heuristic's pick ({us_text(a.gpu_us)})."
            )
        else:
            parts.append(
                f"Timing {every} finds {a.plan_name} at {us_text(a.gpu_us)}: "
                f"{ratio_text(a.gpu_us, f.gpu_us)} than the heuristic's pick and "
                f"{ratio_text(a.gpu_us, u.gpu_us)} than unfused."
            )
            parts += _workspace_gap(f, a)
        if a.gpu_us > u.gpu_us and "achieved_gb_s" in sub.columns:
            why = (
                "with one plan for the graph, its speed is that plan's"
                if n == 1
                else "the plans cuDNN has for this graph are slow"
            )
            parts.append(
                f"Fewer bytes do not make it faster: the fused plan `{a.plan_name}` moves its modelled "
                f"{size_text(a.modelled_hbm_bytes)} at {a.achieved_gb_s:.0f} GB/s, the unfused path its "
                f"{size_text(u.modelled_hbm_bytes)} at {u.achieved_gb_s:.0f} GB/s: {why}, whatever the "
                "traffic saved."
            )
    gaps = repeat_gaps(df)
    if len(gaps) == 1:
        parts.append(
            "(One plan timed twice in this table, as the heuristic's and as the fastest, "
            f"differs by {differs_text(gaps[0])}: the noise of a repeated timing here.)"
        )
    elif gaps:
        parts.append(
            f"({len(gaps)} plans timed twice in this table, each as the heuristic's and as the fastest, "
            f"differ by {differs_text(max(gaps))} at most: the noise of a repeated timing here.)"
        )
    return Text(" ".join(parts))
