"""Lesson 05's summaries: the sentences under its charts, every number formatted from the data."""

from __future__ import annotations

import math

from ...draw.plots import first_value, ok_rows, request_spec
from ...draw.prose import Text, where
from ...draw.units import as_written, in_unit, size_text, us_text
from ...gpu.checks.plan_checks import is_wrong
from .charts import SETUP_MARGIN, cap_label
from .noise import caps_noise, pick_noise, plans_beside, timed_again
from .runs import BUILD_STAGES


def plans_summary(df) -> Text:
    """The heuristic pick, the fastest and the slowest plan, and the pick's rank.

    Args:
        df: `plans`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    h = ok[ok["heuristic_pick"]].iloc[0]
    b = ok[ok["best"]].iloc[0]
    w = ok[ok["worst"]].iloc[0]
    spec = request_spec(df)
    text = (
        f"{spec.label} ({where(df)}): {len(ok)} plans timed. Heuristic pick: plan {int(h.plan_index)}, "
        f"{us_text(h.gpu_us)}, workspace {size_text(h.workspace_bytes)}. Fastest: plan {int(b.plan_index)}, "
        f"{us_text(b.gpu_us)}, workspace {size_text(b.workspace_bytes)}. Slowest: plan {int(w.plan_index)}, "
        f"{us_text(w.gpu_us)}, workspace {size_text(w.workspace_bytes)}."
    )
    if h.plan_index == b.plan_index:
        text += " The heuristic got it right here: autotuning would only confirm it."
    else:
        text += pick_sentence(df, h, b)
    return Text(text + wrong_plans_sentence(df))


def pick_sentence(df, pick, best) -> str:
    """The heuristic's pick beside the fastest plan, read against the timing noise (`pick_noise`): within
    it, the two are called within noise; beyond it, the pick is slower by the gap.

    Args:
        df: `plans`' result.
        pick: the heuristic pick's row.
        best: the fastest plan's row (another plan).

    Returns:
        The sentence, starting with a space.
    """
    ok = ok_rows(df)
    rank = int((ok["gpu_us"] < pick.gpu_us).sum()) + 1
    gap = float(pick.gpu_us / best.gpu_us - 1)
    noise, said, again = pick_noise(df, ok[ok["plan_index"].isin([pick.plan_index, best.plan_index])])
    if said and round(gap, 3) <= round(noise, 3):
        return (
            f" The heuristic's pick (rank {rank} of {len(ok)}) and the fastest plan are within noise of each "
            f"other: {gap:.1%} apart, while {said}."
        )
    if said and again:
        return (
            f" The heuristic's pick is rank {rank} of {len(ok)}, {gap:.1%} slower than the fastest: more "
            f"than the timing noise here ({said})."
        )
    if said:
        return (
            f" The heuristic's pick is rank {rank} of {len(ok)}, {gap:.1%} slower than the fastest: more "
            f"than {said}, though no second autotune of this convolution is at hand to say how far a "
            "second run moves a plan."
        )
    return f" The heuristic's pick is rank {rank} of {len(ok)}, {gap:.1%} slower than the fastest."


def wrong_plans_sentence(df) -> str:
    """A sentence on the plans whose result was wrong against float64.

    It says how many, the worst error, and whether the heuristic's first choice was one of them.

    Args:
        df: `plans`' result.

    Returns:
        The sentence, starting with a space; empty when there are none.
    """
    if "status" not in df.columns:
        return ""
    wrong = df[df["status"].map(is_wrong)]
    if wrong.empty:
        return ""
    worst = wrong.loc[wrong["rel_error"].idxmax()] if "rel_error" in wrong.columns else wrong.iloc[0]
    text = (
        f" {len(wrong)} of {len(df)} plans computed wrong results when checked against float64 "
        f"(worst: plan {int(worst.plan_index)} {worst.plan_name}, "
        f"relative error {fmt_error(worst.rel_error)}): "
        "labkit never times or runs them."
    )
    first = wrong[wrong["first_choice"].astype(bool)] if "first_choice" in wrong.columns else wrong.iloc[0:0]
    if not first.empty:
        f = first.iloc[0]
        text += (
            f" One of them is the heuristic's own first choice, plan {int(f.plan_index)} ({f.plan_name}): "
            "without the check, the heuristic's answer here would be wrong."
        )
    return text


def fmt_error(value) -> str:
    """A relative error for a sentence: 1.4, 3.1e-05, or "inf" (NaN or inf in the output).

    Args:
        value: the relative error.

    Returns:
        The text.
    """
    v = float(value)
    if not math.isfinite(v):
        return "inf (NaN or inf in the output)"
    return f"{v:.2g}" if v >= 1e-3 else f"{v:.1e}"


def timing_noise_summary(plans_df, caps_df=None) -> Text:
    """How much the timings of one plan spread.

    Within one measurement: the 10th-90th percentile of its timed replays. Between two separate measurements
    of the same plan: the plans table and the caps experiment's unlimited row.

    Args:
        plans_df: `plans`' result.
        caps_df: `caps`' result of the same convolution; None to leave the second comparison out.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(plans_df)
    samples = ok["samples"].astype(int) if "samples" in ok else None
    once = 0 if samples is None else int((samples < 2).sum())  # stopped after one replay: no spread
    spread = ok if not once or once == len(ok) else ok[samples >= 2]
    rel = (spread["gpu_us_p90"] - spread["gpu_us_p10"]) / spread["gpu_us"]
    if samples is None:
        replays = "repeated timed replays"
    elif samples.min() != samples.max():
        replays = f"{int(samples.min())} to {int(samples.max())} timed replays"
    else:
        replays = f"{int(samples.iloc[0])} timed replays"
    text = (
        f"{where(plans_df)}: each plan's time is the median of {replays} of a CUDA graph of back-to-back "
        "calls (warm-up replays not counted). Within one plan, the 10th to 90th percentile of those replays "
        f"spans {rel.median() * 100:.1f}% of its median (the median plan) and at most {rel.max() * 100:.1f}%."
    )
    if once and len(spread) < len(ok):
        slow = (ok[samples < 2]["gpu_us"] / ok["gpu_us"].min()).min()
        text += (
            f" Left out of that spread: 1 plan stopped after one timed replay, at {slow:.1f}x the fastest "
            "plan's time or more."
            if once == 1
            else f" Left out of that spread: {once} plans stopped after one timed replay, each at "
            f"{slow:.1f}x the fastest plan's time or more."
        )
    again = timed_again(plans_df, caps_df)
    if again is not None:
        a, b = again.first, again.again
        said = (
            "Timed again in a separate autotune (the caps experiment below, no cap), plan "
            f"{again.index} read {b:.2f} us instead of {a:.2f} us: {again.gap * 100:.1f}% apart"
        )
        text += (
            f" {said}, more than its own spread here: a second run moves a plan's time more than its replays "
            "do."
            if again.gap > again.spread
            else f" {said}, within its own spread here."
        )
    return Text(text)


def caps_summary(df) -> Text:
    """What the tightest and the costliest cap cost, read against the timing noise.

    Args:
        df: `caps`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    noise = caps_noise(df)
    caps = ok["cap_bytes"].replace(-1, float("inf"))
    tightest = ok.loc[caps.idxmin()]
    worst = ok.loc[ok["slowdown_vs_unlimited"].idxmax()]

    def costs(row) -> bool:
        r = float(row.slowdown_vs_unlimited)
        return not (noise.holds(r) if noise is not None else abs(r - 1) < 0.01)

    if costs(worst):
        tight = (
            f"the tightest cap ({cap_label(tightest.cap_bytes)}) leaves {int(tightest.plans_within_cap)} "
            f"plans and costs {tightest.slowdown_vs_unlimited:.2f}x"
        )
        worst_is_tightest = (
            worst.cap_bytes == tightest.cap_bytes
            or abs(worst.slowdown_vs_unlimited - tightest.slowdown_vs_unlimited)
            < 0.01 * worst.slowdown_vs_unlimited
        )
        text = (
            f"{where(df)}: {tight}."
            if worst_is_tightest
            else f"{where(df)}: {tight}; the largest cost is {worst.slowdown_vs_unlimited:.2f}x "
            f"(cap {cap_label(worst.cap_bytes)})."
        )
        free = ok[[not costs(r) for r in ok.itertuples()]]
        paid = ok[[costs(r) for r in ok.itertuples()]]
        if len(free) and len(paid):
            first = free.loc[free["cap_bytes"].replace(-1, float("inf")).idxmin()]
            below = [c for c in sorted(paid["cap_bytes"]) if 0 <= c < first.cap_bytes or first.cap_bytes < 0]
            keeps = (
                f"From {cap_label(first.cap_bytes)} up, the best plan under the cap costs nothing "
                f"measurable: it needs {size_text(first.workspace_bytes)}, so any cap of at least that much "
                "keeps the speed"
            )
            text += (
                f" {keeps} ({cap_label(below[-1])}, the recorded cap below, is too small; caps in between "
                "were not measured)."
                if below
                else f" {keeps}."
            )
    else:
        text = (
            f"{where(df)}: even the tightest cap ({cap_label(tightest.cap_bytes)}, "
            f"{int(tightest.plans_within_cap)} plans left) costs nothing measurable: every ratio lies within "
            "the timing noise."
        )
    if noise is not None:
        text += (
            f" Noise: plan {noise.plan}, the unlimited best, was timed {noise.timings} times in separate "
            "autotunes (under every cap that keeps it, and in the plans table); those timings, with the "
            f"10th to 90th percentile of each one's timed replays, lie between {noise.lo:.3f}x and "
            f"{noise.hi:.3f}x of the one the ratios divide by."
        )
        below_one = ok[(ok["slowdown_vs_unlimited"] < 1) & (ok["best_plan"] == noise.plan)]
        if len(below_one):
            text += (
                f" So a cap that reads below 1x ({', '.join(cap_label(c) for c in below_one['cap_bytes'])}) "
                "did not make anything faster: its best plan is that same plan, timed again."
            )
    return Text(text + plans_chart_sentence(df, noise))


def plans_chart_sentence(df, noise) -> str:
    """How the caps' best plans read against the same plans in the plans table.

    The plans table timed them in a separate experiment: the sentence gives the largest gaps, and which
    plans moved further than the noise band spans (it holds the timings of one plan only).

    Args:
        df: `caps`' result.
        noise: its `Noise`, or None.

    Returns:
        The sentence, starting with a space; empty when that table is not at hand or shares no plan.
    """
    plans = plans_beside(df)
    if plans is None or "plan_name" not in plans.columns:
        return ""
    there = ok_rows(plans).drop_duplicates("plan_name").set_index("plan_name")
    ok = ok_rows(df)
    ok = ok[ok["best_plan"].isin(there.index)]
    if ok.empty:
        return ""
    ok = ok.assign(there=ok["best_plan"].map(there["gpu_us"]).astype(float))
    ok = ok.assign(gap=ok["gpu_us"] / ok["there"] - 1)  # this chart against the plans chart
    worst = ok.sort_values("gap", key=abs, ascending=False).drop_duplicates("best_plan")
    named = "; ".join(  # "here": the cap it was timed under, as the chart's hover names it
        f"`{r.best_plan}` {us_text(r.there)} there, {us_text(r.gpu_us)} here at cap {cap_label(r.cap_bytes)}"
        for r in worst.head(2).itertuples()
    )
    text = (
        f" The plans chart above timed the same plans in a separate experiment ({named}): here they read "
        f"{ok['gap'].min():+.1%} to {ok['gap'].max():+.1%} against it."
    )
    if noise is None:
        return text
    span = noise.hi / noise.lo
    outside = [
        r
        for r in worst.itertuples()
        if r.best_plan != noise.plan and max(r.gpu_us, r.there) / min(r.gpu_us, r.there) > span
    ]
    if not outside:
        return text + f" No plan moved further than the noise band spans ({span - 1:.1%})."
    names = " and ".join(f"`{r.best_plan}`" for r in outside[:2])
    samples = there["samples"] if "samples" in there.columns else None
    few = [int(samples[r.best_plan]) for r in outside[:2] if samples is not None]
    few = few if few and max(few) < samples.max() else []
    if len(set(few)) > 1:
        count = ", ".join(map(str, few))
    else:
        count = f"{few[0]} each" if len(few) > 1 else str(few[0]) if few else ""
    replays = (
        f", and the plans chart timed {'them' if len(few) > 1 else 'it'} with fewer timed replays ({count}: "
        "a plan far slower than that chart's best stops being timed early)"
        if few
        else ""
    )
    return text + (
        f" {names} moved further than the noise band spans ({span - 1:.1%}): the band holds the timings "
        f"of one plan, the unlimited best; between two experiments other plans move further{replays}. "
        "Both charts take medians of CUDA-graph replays, each plan with its own workspace: read a cap "
        "against this chart's unlimited best, not against the plans chart."
    )


def ms_text(seconds) -> str:
    """A build stage's wall time in prose as the build-cost chart shows it, in ms: ``258.4 ms``.

    Args:
        seconds: the time in seconds.

    Returns:
        `labkit.draw.units.in_unit` in ms.
    """
    return in_unit(seconds * 1e6, "ms")


def ms_written(seconds) -> float:
    """A build stage's wall time as `ms_text` writes it, in seconds: the sums and differences of
    stages a sentence writes beside them are made of these, so they add up as read.

    Args:
        seconds: the time in seconds.

    Returns:
        Seconds.
    """
    return as_written(seconds, ms_text) / 1e6


#: building every plan is said to take about as long as the rebuild within this fraction
ABOUT_AS_LONG = 0.05


def first_build_sentences(first: float, rebuild: float, build_all: float) -> str:
    """What the first build, the identical rebuild and the build of every plan say of a one-time set-up.

    Args:
        first: the first build's wall time, seconds.
        rebuild: the identical rebuild's, seconds.
        build_all: building every plan's, seconds.

    Returns:
        The sentences, each starting with a space.
    """
    same = abs(build_all / rebuild - 1) <= ABOUT_AS_LONG
    about = (
        f" Building all plans took about as long as the rebuild ({build_all / rebuild:.2f}x): the part both "
        "pay, defining the graph and asking cuDNN's heuristics for its plans, outweighs building these plans."
    )
    if first < SETUP_MARGIN * rebuild:
        ratio = first / rebuild
        text = (
            f" The first build took {ratio:.2f}x as long as the identical rebuild right after it: no "
            "one-time set-up shows beyond what one timing of each can tell apart."
        )
        return text + about if same else text
    setup = ms_written(first) - ms_written(rebuild)  # the difference of the two times written
    text = (
        " The first build pays a one-time set-up that the identical rebuild right after it does not: "
        f"{ms_text(setup)} of its {ms_text(first)} (when it is the first graph its process builds, "
        "that includes cuDNN loading its libraries and creating its handle)."
    )
    if build_all < first and not same and build_all > rebuild:
        return text + (
            " That is why building all plans took less than the first build of one: compare it with the "
            f"rebuild instead, {build_all / rebuild:.1f}x as long."
        )
    return text + about if same else text


def build_cost_summary(df) -> Text:
    """Each build stage's cost, what the first build pays once, and when autotuning pays off.

    Args:
        df: `build_cost`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    s = df.set_index("stage")["seconds"]
    first, rebuild = s.get(BUILD_STAGES[0]), s.get(BUILD_STAGES[1])
    hit, build_all = s.get(BUILD_STAGES[2]), s.get(BUILD_STAGES[3])
    tune = s.get(BUILD_STAGES[4])
    pay = first_value(df, "calls_to_pay_off_autotune")
    spec = request_spec(df)
    text = (
        f"{spec.label} ({where(df)}): the first build took {ms_text(first)}, an identical rebuild "
        f"{ms_text(rebuild)}, a cache hit {ms_text(hit)}; building every plan took "
        f"{ms_text(build_all)} and autotuning them {ms_text(tune)}."
    )
    text += first_build_sentences(first, rebuild, build_all)
    if pay is None or pay == float("inf"):
        text += " The heuristic pick was already the fastest plan: autotuning never pays for itself here."
    else:
        gain = df["heuristic_gpu_us"].iloc[0] - df["best_gpu_us"].iloc[0]
        text += (
            f" Autotuning makes each call {gain:.1f} us faster, so it pays for itself after {pay:,.0f} calls."
        )
    load = s.get(BUILD_STAGES[6])
    if load is not None and build_all is not None and load == load and load > 0:
        cold = ms_written(build_all) + ms_written(tune)  # the sum of the two times written above
        text += (
            f" Saved to disk ({size_text(first_value(df, 'serialized_bytes'))}), the autotuned plan loads "
            f"in a later session in {ms_text(load)} instead of building every plan and autotuning again "
            f"({ms_text(cold)}, {cold / load:,.0f}x as long)."
        )
    return Text(text)
