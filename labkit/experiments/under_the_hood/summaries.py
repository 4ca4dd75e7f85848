"""The summaries under lesson 10's charts: kernels per plan, fused against unfused, the GPU's idle
share per strategy, the race's overlap, and the build log's engines and warnings. Microseconds.
"""

from __future__ import annotations

from ...draw.plots import ok_rows
from ...draw.prose import Text, listed, where
from ...draw.units import us_text
from ...gpu.workspaces.workloads import ONE_CONV
from ..core import beside
from .race_trace import launch_pace, launch_pauses, overlap_total, why_they_met
from .runs import heuristic_plan


def kernels_summary(df) -> Text:
    """How many kernels the plans launch per call, the fastest plan's, and which plans convert layouts.

    Args:
        df: `kernels`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    per = ok.drop_duplicates("plan_name")
    if per.empty:
        return Text(f"{where(df)}: no plan could be traced.")
    counts = per.kernels_per_call.value_counts().sort_index()
    fastest = per.sort_values("plan_kernel_us").iloc[0]
    conv = ok[ok.role == "layout conversion"].plan_name.nunique()
    one = per[per.kernels_per_call == 1]
    many = per[per.kernels_per_call > 1]
    parts = [
        f"{where(df)}, {df['spec_label'].iloc[0]}: {len(per)} plans traced;",
        ", ".join(f"{int(n)} launch {k:g} kernel{'s' if k != 1 else ''} per call" for k, n in counts.items())
        + ".",
        f"The fastest, {fastest.plan_name}, runs {fastest.kernels_per_call:g} "
        f"kernel{'s' if fastest.kernels_per_call != 1 else ''} in {us_text(fastest.plan_kernel_us)}.",
    ]
    if conv:
        who = "1 plan spends" if conv == 1 else f"{conv} plans spend"
        parts.append(f"{who} GPU time converting layouts (a kernel before and after the main one).")
    if len(one) and len(many):
        parts.append(
            f"Host time to launch: median {us_text(one.host_us.median())} for one-kernel plans, "
            f"{us_text(many.host_us.median())} for multi-kernel ones."
        )
    same = _lesson_02_call(df)
    if same:
        parts.append(same)
    return Text(" ".join(parts))


#: how the traced experiments' host times are taken, beside lesson 02's (`_lesson_02_call`, the
#: timeline summary); read under their charts, so "here", never a lesson's number
HOST_TIMES_HERE = (
    "the host is timed untraced here but between traces, with CUPTI still attached to the "
    "process (an attached CUPTI can add host time to each CUDA call until it is detached), over calls "
    "launched back to back (a mean per call)"
)


def _one_conv_arena(df):
    """Lesson 02's ``one_conv`` row of fixed_arena (the same convolution as lesson 10's NCHW call),
    from where ``df`` came from, when it is there; else None."""
    one = beside(df, "strategies", workload="one_conv", repeats=20)
    rows = ok_rows(one) if one is not None else None
    if rows is None:
        return None
    arena = rows[rows["strategy"].str.startswith("fixed_arena")]
    return arena.iloc[0] if len(arena) else None


def _lesson_02_call(df) -> str:
    """For the convolution lesson 02 runs (its ``one_conv``): the heuristic plan's host time here
    beside lesson 02's, and why they differ; else empty."""
    ok = ok_rows(df)
    if not len(ok) or str(df["spec_label"].iloc[0]) != ONE_CONV.label:
        return ""
    arena = _one_conv_arena(df)
    pick = ok[ok.plan_name == heuristic_plan(df)]
    if arena is None or pick.empty:
        return ""
    return (
        "Lesson 02 ran this convolution (one_conv) and timed fixed_arena's median call at "
        f"{us_text(arena.median_us)} on the host, strategy included, each call alone, with no tracer "
        f"attached; here the heuristic's plan takes {us_text(pick.host_us.iloc[0])} to launch: "
        f"{HOST_TIMES_HERE}."
    )


def fusion_kernels_summary(df) -> Text:
    """The kernels per call and their time, fused vs unfused.

    Args:
        df: `fusion_kernels`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    per = df.drop_duplicates("path").set_index("path")
    if not {"fused", "unfused"} <= set(per.index):
        return Text(f"{where(df)}: fusion could not be traced.")
    f, u = per.loc["fused"], per.loc["unfused"]
    return Text(
        f"{where(df)}, {df['spec_label'].iloc[0]} + {df['epilogue'].iloc[0]}: the fused graph launches "
        f"{f.kernels_per_call:g} kernel{'s' if f.kernels_per_call != 1 else ''} per call "
        f"({us_text(f.path_kernel_us)}), the unfused path "
        f"{u.kernels_per_call:g} ({us_text(u.path_kernel_us)}): each extra kernel reads and writes a whole "
        f"tensor."
    )


def strategy_timeline_summary(df) -> Text:
    """How long the GPU waited for the host under each strategy, traced and untraced.

    Args:
        df: `strategy_timeline`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    s = df.drop_duplicates("strategy").set_index("strategy")
    s = s[s.status == "ok"]
    if s.empty:
        return Text(f"{where(df)}: no strategy could be traced.")
    drawn = s.idle_share_api if "idle_share_api" in s.columns else s.idle_share  # the pass the chart draws
    worst, best = drawn.idxmax(), drawn.idxmin()
    parts = [
        f"{where(df)}: the GPU waited for the host {drawn[worst]:.0%} of {worst}'s pass "
        f"and {drawn[best]:.0%} of {best}'s, as drawn."
    ]
    if "idle_share_api" in s.columns and {"gpu_us", "busy_us"} <= set(s.columns):
        untraced = 1 - s.busy_us / s.gpu_us
        parts.append(
            "Tracing the API calls adds host time to each, so the chart's gaps are wider than a plain run's. "
            f"Yet with only the kernels traced, the GPU still waited {s.idle_share.min():.0%} to "
            f"{s.idle_share.max():.0%} of every strategy's pass; and untraced, timed with events, every pass "
            f"took longer than its kernels ({untraced.min():.0%} to {untraced.max():.0%} of it idle)."
        )
    if {"host_us", "busy_us", "calls"} <= set(s.columns):
        parts.append(_host_against_kernels(s, df))
    ev = df[df.kind == "api"]
    allocs = ev[ev.name.str.contains("alloc|free", case=False)].groupby("strategy").size()
    if len(allocs):
        calls = ", ".join(f"{k} {int(v)}" for k, v in allocs.items())
        parts.append(f"Allocation calls in the traced pass: {calls}.")
    return Text(" ".join(parts))


def _host_against_kernels(s, df) -> str:
    """The untraced host time per call of each strategy's pass against its kernels' time per call,
    and, for ``one_conv``, lesson 02's host time for the same calls, each said for what it is."""
    host, busy = s.host_us / s.calls, s.busy_us / s.calls
    keeps_up = (host >= 0.95 * busy).all()
    pace = (
        f"Untraced, the host took {us_text(host.min())} to {us_text(host.max())} per call to launch a pass "
        f"(its host time over its {int(s.calls.iloc[0])} calls), the GPU's kernels {us_text(busy.min())} to "
        f"{us_text(busy.max())} per call"
    )
    text = (
        f"{pace}: under every strategy the host needed about as long as the GPU, or longer; "
        f"{HOST_TIMES_HERE}."
        if keeps_up
        else f"{pace}; {HOST_TIMES_HERE}."
    )
    arena = _one_conv_arena(df) if str(df["workload"].iloc[0]) == "one_conv" else None
    mine = s[s.index.str.startswith("fixed_arena")]
    if arena is not None and len(mine):
        text += (
            " Lesson 02 timed fixed_arena's median call of the same convolution at "
            f"{us_text(arena.median_us)} on the host (each call alone, no tracer attached; p95 "
            f"{us_text(arena.p95_us)}), against "
            f"{us_text(float(mine.host_us.iloc[0] / mine.calls.iloc[0]))} per call here."
        )
    return text


def race_timeline_summary(df) -> Text:
    """The traced round's overlap and corrupted outputs, and why the streams met as much as they did.

    The overlap is the chart's shaded stretches. Lesson 06's untraced rounds of the same launch are
    set beside it when they are at hand, with why the two differ.

    Args:
        df: `race_timeline`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    r = df.iloc[0]
    overlap = overlap_total(df)
    share = overlap / r.busy_us if r.busy_us else 0.0
    text = (
        f"{where(df)}, {r.launch} launch: the two streams' kernels ran at the same time for "
        f"{us_text(overlap)} ({share:.0%} of the {us_text(r.busy_us)} the GPU was busy); "
        f"{int(r.corrupted)} of {int(r.runs)} outputs of this round were corrupted."
    )
    why = why_they_met(df)
    if why:
        text += f" Why: {why}."
    untraced = _untraced_race(df, r.launch, int(r.streams))
    if untraced is None:
        return Text(text)
    bad, runs = untraced
    text += f" Lesson 06's untraced {r.launch}-launched rounds: {bad} of {runs} corrupted."
    traced, alone = r.corrupted / r.runs, bad / runs
    one_missed = (bad > 0) != (r.corrupted > 0)
    if one_missed or max(traced, alone) > 2 * min(traced, alone):
        text += (
            " The same code, another timing: tracing adds host time to every CUDA call, which moves when "
            "each stream's kernels start, and with it how often the two meet."
        )
        host, gpu = launch_pace(df)
        if r.launch == "python" and host > gpu:
            pauses = ", as in this round's pauses" if launch_pauses(df).count else ""
            text += (
                f" Launched from Python, a call takes the host longer than the GPU takes to run it (here, "
                f"traced: one every {us_text(host)} on average, {us_text(gpu)} of kernels), so each call is "
                "usually done before the other stream's next one starts; the streams meet only where the "
                f"GPU falls behind the host{pauses}."
            )
        if one_missed:
            text += " A round that misses the race proves nothing."
    return Text(text)


def _untraced_race(df, launch: str, streams: int):
    """(corrupted, runs) of lesson 06's shared-workspace race for ``launch`` and ``streams``, from
    where ``df`` came from, when it is there; else None."""
    race = beside(df, "race", launch=launch, streams=streams, min_runs=1024)
    if race is None or "shared" not in race:
        return None
    race = ok_rows(race)
    shared = race[race["shared"].astype(bool)]
    if shared.empty:
        return None
    return int(shared["mismatches_bitwise"].iloc[0]), int(shared["runs"].iloc[0])


#: cuDNN's heuristic modes by the number the frontend log gives them (``cudnnBackendHeurMode_t``)
HEURISTIC_MODES = {"0": "instant", "1": "heuristics B", "2": "fallback", "3": "heuristics A"}


def _heuristic_queries(fe) -> str:
    """How the engine configurations add up: each heuristic query's mode and count, as the log says.

    Args:
        fe: the build log's frontend lines.

    Returns:
        A sentence (with a leading space), or "" when the log reports fewer than two queries.
    """
    found = fe.text.str.extract(r"Heuristic query for mode (\d+) has (\d+) configurations").dropna()
    if len(found) < 2:
        return ""
    parts = [
        f"{n} in mode {m} ({HEURISTIC_MODES.get(m, 'unnamed')})" for m, n in found.itertuples(index=False)
    ]
    total = sum(int(n) for n in found[1])
    return f" The log's heuristic queries proposed {listed(parts)}: {total} configurations in all."


def build_log_summary(df) -> Text:
    """What the build log names: its engines, the plans built, its warnings, and what its ERROR lines are.

    Args:
        df: `build_log`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    fe = df[df.source == "frontend"]
    engines = [e for e in dict.fromkeys(fe.engine.dropna()) if e]
    warn = int(df.text.str.contains("WARN|W!", regex=True).sum())
    text = (
        f"{where(df)}, {df['spec_label'].iloc[0]}: the frontend log names {len(engines)} engine "
        f"configurations; {int(df['built'].iloc[0])} of {int(df['plans'].iloc[0])} plans built in "
        f"{df['build_seconds'].iloc[0]:.1f} s; {warn} warning lines."
    ) + _heuristic_queries(fe)
    asked = int((fe.text.str.contains("SHARED_MEMORY_USED") & fe.text.str.contains("NOT_SUPPORTED")).sum())
    if asked:
        be = df[df.source == "backend"]
        calls = int(be.text.str.contains("cudnnBackendGetAttribute", regex=False).sum())
        errors = int(fe.text.str.contains("ERROR", regex=False).sum())
        which = f"All {asked}" if asked == errors else f"{asked} of the {errors}"
        built = (
            "; every plan built all the same" if int(df["built"].iloc[0]) == int(df["plans"].iloc[0]) else ""
        )
        text += (
            f" {which} of the frontend's ERROR lines are it asking an engine configuration for its "
            "shared-memory use (CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED), which this cuDNN does not "
            f"report (the backend logs each such cudnnBackendGetAttribute call: {calls}){built}."
        )
    return Text(text)
