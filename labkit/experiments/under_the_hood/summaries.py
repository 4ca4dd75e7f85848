"""The summaries under lesson 10's charts: kernels per plan, fused against unfused, the GPU's idle
share per strategy, the race's overlap, and the build log's engines and warnings. Microseconds.
"""

from __future__ import annotations

from ...draw.plots import fmt_us, ok_rows
from ...draw.prose import Text, where


def kernels_summary(df) -> Text:
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
        f"kernel{'s' if fastest.kernels_per_call != 1 else ''} in {fmt_us(fastest.plan_kernel_us)}.",
    ]
    if conv:
        parts.append(
            f"{conv} plan(s) spend GPU time converting layouts (a kernel before and after the main one)."
        )
    if len(one) and len(many):
        parts.append(
            f"Host time to launch: median {fmt_us(one.host_us.median())} for one-kernel plans, "
            f"{fmt_us(many.host_us.median())} for multi-kernel ones."
        )
    return Text(" ".join(parts))


def fusion_kernels_summary(df) -> Text:
    per = df.drop_duplicates("path").set_index("path")
    if not {"fused", "unfused"} <= set(per.index):
        return Text(f"{where(df)}: fusion could not be traced.")
    f, u = per.loc["fused"], per.loc["unfused"]
    return Text(
        f"{where(df)}, {df['spec_label'].iloc[0]} + {df['epilogue'].iloc[0]}: the fused graph launches "
        f"{f.kernels_per_call:g} kernel(s) per call ({fmt_us(f.path_kernel_us)}), the unfused path "
        f"{u.kernels_per_call:g} ({fmt_us(u.path_kernel_us)}): each extra kernel reads and writes a whole "
        f"tensor."
    )


def strategy_timeline_summary(df) -> Text:
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
    ev = df[df.kind == "api"]
    allocs = ev[ev.name.str.contains("alloc|free", case=False)].groupby("strategy").size()
    if len(allocs):
        parts.append(
            "Allocation calls in the traced pass: "
            + ", ".join(f"{k} {int(v)}" for k, v in allocs.items())
            + "."
        )
    return Text(" ".join(parts))


def race_timeline_summary(df) -> Text:
    """The traced round's overlap and corrupted outputs, beside lesson 06's untraced rounds of the
    same launch when they are at hand (and why the two differ, when they do)."""
    r = df.iloc[0]
    share = r.overlap_us / r.busy_us if r.busy_us else 0.0
    text = (
        f"{where(df)}, {r.launch} launch: the two streams' kernels ran at the same time for "
        f"{fmt_us(r.overlap_us)} ({share:.0%} of the {fmt_us(r.busy_us)} the GPU was busy); "
        f"{int(r.corrupted)} of {int(r.runs)} outputs of this round were corrupted."
    )
    untraced = _untraced_race(r.launch, int(r.streams))
    if untraced is not None:
        bad, runs = untraced
        text += f" Lesson 06's untraced {r.launch}-launched rounds: {bad} of {runs} corrupted."
        traced, alone = r.corrupted / r.runs, bad / runs
        one_missed = (bad > 0) != (r.corrupted > 0)
        if one_missed or max(traced, alone) > 2 * min(traced, alone):
            text += (
                " The same code, another timing: tracing adds host time to every CUDA call, which moves "
                "when each stream's kernels start, and with it how often the two meet."
            )
            if one_missed:
                text += " A round that misses the race proves nothing."
    return Text(text)


def _untraced_race(launch: str, streams: int):
    """(corrupted, runs) of lesson 06's shared-workspace race for ``launch`` and ``streams``, when at
    hand without measuring; else None."""
    from ...errors import LabkitError
    from ..core import result

    try:
        race = result("race", at_hand_only=True, launch=launch, streams=streams, min_runs=1024)
    except LabkitError:
        return None
    if race is None or "shared" not in race:
        return None
    race = ok_rows(race)
    shared = race[race["shared"].astype(bool)]
    if shared.empty:
        return None
    return int(shared["mismatches_bitwise"].iloc[0]), int(shared["runs"].iloc[0])


def build_log_summary(df) -> Text:
    fe = df[df.source == "frontend"]
    engines = [e for e in dict.fromkeys(fe.engine.dropna()) if e]
    warn = int(df.text.str.contains("WARN|W!", regex=True).sum())
    text = (
        f"{where(df)}, {df['spec_label'].iloc[0]}: the frontend log names {len(engines)} engine "
        f"configurations; {int(df['built'].iloc[0])} of {int(df['plans'].iloc[0])} plans built in "
        f"{df['build_seconds'].iloc[0]:.1f} s; {warn} warning lines."
    )
    asked = int((fe.text.str.contains("SHARED_MEMORY_USED") & fe.text.str.contains("NOT_SUPPORTED")).sum())
    if asked:
        be = df[df.source == "backend"]
        calls = int(be.text.str.contains("cudnnBackendGetAttribute", regex=False).sum())
        errors = int(fe.text.str.contains("ERROR", regex=False).sum())
        which = f"All {asked}" if asked == errors else f"{asked} of the {errors}"
        text += (
            f" {which} of the frontend's ERROR lines are it asking an engine configuration for its "
            "shared-memory use (CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED), which this cuDNN does not "
            f"report (the backend logs each such cudnnBackendGetAttribute call: {calls})"
            + (
                "; every plan built all the same."
                if int(df["built"].iloc[0]) == int(df["plans"].iloc[0])
                else "."
            )
        )
    return Text(text)
