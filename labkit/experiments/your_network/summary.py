"""The summary under a network report's chart: the calls measured and what was cut, the fastest
plans' time per pass against the heuristic's, the largest workspace, the strategies' pass times
and peaks, and the pass time within a 64 MiB cap. Bytes; microseconds.
"""

from __future__ import annotations

from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...draw.prose import Text, counted, listed
from ...gpu.timing.stops import eager_stop_text
from ..core import MIB
from .request import STEP_BUDGET_S
from .tables import cut_counts, largest_request, tables_of


def network_report_summary(df) -> Text:
    """What the report found: the calls, what was cut, the plans, the strategies and the budget.

    Args:
        df: `network_report`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    layers, strategies, budget = tables_of(df, "layers", "strategies", "budget")
    if not len(layers):
        return Text("No layers in this report.")
    ok = ok_rows(layers)
    r = df.attrs.get("request") or {}
    partial = bool((layers["status"] == "pending").any())
    parts = [opening_sentence(layers, r, partial=partial)]
    cut = cut_counts(df)
    if cut["slower_plans"]:
        parts.append(slower_plans_sentence(cut["slower_plans"]))
    said = [
        f"**{n} {one if n == 1 else many}**"
        for n, one, many in (
            (cut["plans"], "plan", "plans"),
            (cut["layers"], "distinct layer", "distinct layers"),
            (cut["strategies"], "strategy", "strategies"),
        )
        if n
    ]
    if said:
        parts.append(
            f"Cut by a time budget: {', '.join(said)} (a step has "
            f"{df.attrs.get('step_budget_s', STEP_BUDGET_S):g} s; "
            "the tables say which and where each was stopped)."
        )
    if len(ok):
        parts.append(fastest_plans_sentence(ok, partial=partial))
        bad = int((~ok["checked"].astype(bool)).sum()) if "checked" in ok else 0
        parts.append(reference_check_sentence(bad))
        if cut["wrong_plans"]:
            parts.append(wrong_plans_sentence(cut["wrong_plans"]))
    sok = ok_rows(strategies) if len(strategies) else strategies
    if len(sok) and len(ok):
        host = sok["pass_host_us"].median() / max(len(layers), 1)
        parts.append(pass_times_sentence(sok, kernels=float(ok["fastest_gpu_us"].sum()), host_us=host))
        parts.append(least_peak_sentence(sok, ok))
    if len(sok) and len(ok):
        parts += [x for x in (async_pool_sentence(sok, ok), identical_passes_sentence(sok)) if x]
    capped = budget[(budget["cap_bytes"] == 64 * MIB)] if len(budget) else budget
    if len(capped) and capped.iloc[0]["calls_without_plan"] == 0:
        c = capped.iloc[0]
        parts.append(
            f"With a 64 MiB cap the pass would take {fmt_us(c['pass_gpu_us'])} ({c['slowdown']:.2f}x the "
            f"uncapped; {calls_changing_plan(c['calls_changing_plan'])})."
        )
    return Text(" ".join(parts))


def opening_sentence(layers, request: dict, *, partial: bool = False) -> str:
    """How many convolution calls the pass makes, how many distinct, and how many of those are
    measured (each once; a report still measuring says how many so far).

    Args:
        layers: the report's ``layers`` table.
        request: the report's request (``batch``, ``dtype``, ``layout``).
        partial: whether some layers of the pass are still ``pending``.

    Returns:
        The sentence, in Markdown.
    """
    distinct = layers["spec_id"].nunique()
    at = f"at batch {request.get('batch')}, {request.get('dtype')} {request.get('layout')}"
    if partial:
        measured = layers.loc[layers["status"] != "pending", "spec_id"].nunique()
        return f"**{len(layers)} convolution calls** ({distinct} distinct, {measured} measured so far) {at}."
    return f"**{len(layers)} convolution calls** ({distinct} distinct, each measured once) {at}."


def calls_changing_plan(count) -> str:
    """How many calls change plan under a cap, in words that agree: ``1 call changes plan``.

    Args:
        count: the budget table's ``calls_changing_plan``.

    Returns:
        The clause.
    """
    n = int(count)
    return "1 call changes plan" if n == 1 else f"{n} calls change plan"


def slower_plans_sentence(slower: int) -> str:
    """How many plans one eager call set aside as too slow to win (`stops.EAGER_STOP_RATIO`).

    Args:
        slower: how many plans were set aside (1 or more).

    Returns:
        The sentence, with the ratio autotune stops at.
    """
    ratio = eager_stop_text()
    if slower == 1:
        return (
            f"1 plan was set aside after one eager call showed it over {ratio} slower than the best so far "
            "(not timed further: it cannot win)."
        )
    return (
        f"{slower} plans were set aside after one eager call showed them over {ratio} slower than the best "
        "so far (not timed further: they cannot win)."
    )


def reference_check_sentence(bad: int) -> str:
    """Whether every checked call matched the float64 reference, or how many failed.

    Args:
        bad: how many calls failed the reference check.

    Returns:
        The sentence, in Markdown.
    """
    if not bad:
        return "Every checked plan matched the float64 reference."
    return f"**{counted(bad, 'call')} failed the reference check.**"


def wrong_plans_sentence(wrong: int) -> str:
    """How many plans computed wrong results when checked before timing, and what became of them.

    Args:
        wrong: how many plans were left for a wrong result (`cut_counts`'s ``wrong_plans``).

    Returns:
        The sentence, in Markdown.
    """
    if wrong == 1:
        return (
            "**1 plan** computed wrong results against float64 when checked before timing: it was never "
            "timed, chosen or run (the plans table says which)."
        )
    return (
        f"**{wrong} plans** computed wrong results against float64 when checked before timing: they were "
        "never timed, chosen or run (the plans table says which)."
    )


def fastest_plans_sentence(layers, *, partial: bool = False) -> str:
    """The fastest plans' time per pass against the heuristic's picks, and the largest workspace one asks for.

    A layer is named for the largest workspace only where some fastest plan asks for one. A partial
    report's sums are over the layers measured so far, and the sentence says so.

    Args:
        layers: the report's ``layers`` table (rows that ran).
        partial: whether some layers of the pass are still ``pending``.

    Returns:
        The sentences, in Markdown.
    """
    fast, heur = fmt_us(layers["fastest_gpu_us"].sum()), fmt_us(layers["heuristic_gpu_us"].sum())
    over = f"over the {counted(len(layers), 'layer')} measured so far" if partial else "per pass"
    big = layers.loc[layers["fastest_workspace_bytes"].idxmax()]
    if not big["fastest_workspace_bytes"] > 0:
        return (
            f"Each call's fastest plan adds up to **{fast}** {over} against {heur} for the heuristic's "
            "picks, and none of those fastest plans asks for a workspace."
        )
    so_far = " so far" if partial else ""
    return (
        f"Each call's fastest plan adds up to **{fast}** {over} against {heur} for the heuristic's picks. "
        f"The largest workspace a fastest plan asks for{so_far} is "
        f"**{fmt_bytes(big['fastest_workspace_bytes'])}** ({big['layer']}, {big['direction']})."
    )


def pass_times_sentence(strategies, *, kernels: float, host_us: float) -> str:
    """The strategies' pass times against the kernels alone, and how much of a pass the GPU sat idle.

    The GPU is said to mostly wait for launches only where it sat idle for over half of every pass.

    Args:
        strategies: the report's ``strategies`` table (rows that ran).
        kernels: the sum of each call's fastest plan time, us (CUDA-graph replay medians).
        host_us: the median host time per call, us.

    Returns:
        The sentence, in Markdown.
    """
    fastest, slowest = float(strategies["pass_gpu_us"].min()), float(strategies["pass_gpu_us"].max())
    took = (
        f"Run from Python under each strategy, one timed pass took {fmt_us(fastest)} to {fmt_us(slowest)} "
        f"of GPU time, against {fmt_us(kernels)} for the kernels alone"
    )
    if kernels < fastest / 2:
        return (
            f"{took}: the GPU mostly waits for launches ({fmt_us(host_us)} of host time per call), so these "
            "pass times rank host costs, and one pass is one sample."
        )
    least, most = (max(0.0, 1 - kernels / t) for t in (fastest, slowest))
    return (
        f"{took}: the GPU sat idle between launches for {least:.0%} to {most:.0%} of a pass "
        f"({fmt_us(host_us)} of host time per call), so the differences between these pass times are host "
        "costs, and one pass is one sample."
    )


#: strategies whose peaks lie within this share of the least are said to hold about the same
SAME_PEAK = 0.01


def least_peak_sentence(strategies, layers) -> str:
    """Which strategies held the least workspace at their peak.

    Every one at the least is named, and those within `SAME_PEAK` of it are said to hold about the
    same (the chart draws them as one line).

    Args:
        strategies: the report's ``strategies`` table (rows that ran).
        layers: its ``layers`` table (rows that ran).

    Returns:
        The sentence, in Markdown.
    """
    peaks = strategies.set_index("strategy")["peak_workspace_bytes"].astype(float)
    least = float(peaks.min())
    if not (layers["fastest_workspace_bytes"] > 0).any():
        held = fmt_bytes(least)
        return f"No call's fastest plan asks for a workspace: every strategy held {held} at its peak."
    exact = [str(s) for s in peaks.index[peaks == least]]
    near = [str(s) for s in peaks.index[peaks <= least * (1 + SAME_PEAK)]]
    others = [str(s) for s in peaks.index if str(s) not in near]
    if len(near) == 1:
        least_held = f"**{near[0]}** held the least workspace at its peak ({fmt_bytes(least)})"
    elif len(near) == len(exact):
        least_held = f"{_names(near)} tie for the least workspace held at the peak ({fmt_bytes(least)} each)"
    else:
        who = (
            "Every strategy"
            if not others
            else f"Every strategy but {_names(others)}"
            if len(others) <= 2
            else _names(near)
        )
        least_held = (
            f"{who} held about the same workspace at the peak, {fmt_bytes(least)}: the least, "
            f"{least:,.0f} B, by {_names(exact)}, the others at most "
            f"{fmt_bytes(peaks[near].max() - least)} more"
        )
    malloc = (
        "; malloc_per_call holds nothing between calls but allocates on every call that needs a workspace"
        if "malloc_per_call" in peaks.index
        else ""
    )
    return f"{least_held}{malloc}."


def _names(labels) -> str:
    """``**a**``, ``**a** and **b**``, ``**a**, **b** and **c**``."""
    return listed(f"**{x}**" for x in labels)


def async_pool_sentence(strategies, layers) -> str:
    """What async_pool holds against the largest request (lesson 09's first exercise asks why).

    Args:
        strategies: the report's ``strategies`` table.
        layers: its ``layers`` table.

    Returns:
        The sentence; empty without them, or when no call asks for a workspace and the pool holds none.
    """
    pool = strategies[strategies["strategy"] == "async_pool"]
    if pool.empty or not len(layers):
        return ""
    p = pool.iloc[0]
    largest = largest_request(layers)
    if not largest and not p["peak_workspace_bytes"]:
        return ""  # no call asks for a workspace, and the pool holds none
    after = (
        "and still held it after the pass"
        if p["held_after_bytes"] == p["peak_workspace_bytes"]
        else f"and {fmt_bytes(p['held_after_bytes'])} after the pass"
    )
    return (
        f"async_pool held {fmt_bytes(p['peak_workspace_bytes'])} from its first workspace on, where the "
        f"largest one a call asks for is {fmt_bytes(largest)}, {after}."
    )


def identical_passes_sentence(strategies) -> str:
    """How far two passes that did the same work differ: the two keyed caches.

    Args:
        strategies: the report's ``strategies`` table.

    Returns:
        The sentence; empty unless both caches ran with the same peak and allocations and no fallback.
    """
    k = strategies[strategies["strategy"].str.startswith("keyed_cache")]
    if len(k) != 2:
        return ""
    a, b = k.iloc[0], k.iloc[1]
    same = (
        a["peak_workspace_bytes"] == b["peak_workspace_bytes"]
        and a["fallbacks_per_pass"] == b["fallbacks_per_pass"] == 0
        and a["alloc_calls_first_pass"] == b["alloc_calls_first_pass"]
    )
    if not same:
        return ""
    spread = abs(a["pass_gpu_us"] - b["pass_gpu_us"]) / min(a["pass_gpu_us"], b["pass_gpu_us"])
    if spread < 0.005:  # would read as "differ by 0%"
        return (
            "The two keyed caches ran the same calls with the same plans and held the same bytes, and their "
            f"passes took {fmt_us(a['pass_gpu_us'])} and {fmt_us(b['pass_gpu_us'])}: two identical passes "
            "within 0.5% of each other. That is one sample of the noise, not its bound: farther apart, pass "
            "times may still be noise."
        )
    return (
        "The two keyed caches ran the same calls with the same plans and held the same bytes, yet one pass "
        f"took {fmt_us(a['pass_gpu_us'])} and the other {fmt_us(b['pass_gpu_us'])}: two identical passes "
        f"differ by {spread:.0%}. That is one sample of the noise, not its bound: pass times that close do "
        "not rank the strategies, and farther apart they may still be noise."
    )
