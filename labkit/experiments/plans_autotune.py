"""Lesson 05, plans, autotuning and caching: every plan cuDNN offers, workspace caps, and what
building, autotuning and loading a graph cost.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

import math
import time
from typing import Optional, Sequence

import plotly.graph_objects as go

from ..draw.plots import (
    COLORS,
    finish,
    first_value,
    fmt_bytes,
    fmt_seconds,
    fmt_us,
    grid,
    isnan,
    log_axis,
    new_figure,
    nice_step,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
    size_unit,
    tick_seconds,
)
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from ..gpu.plan_checks import is_wrong
from ..signals.cancel import checkpoint
from ..signals.progress import report
from ..spec import ConvSpec
from .checking import CheckResult, as_number, frame_for, is_close, pending, say
from .core import BASE, MIB, as_spec, experiment, status_row, to_frame
from .panel_config import SHAPE, spec_panel

# ---- experiments ------------------------------------------------------------------------------
CAPS = (0, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, None)


@experiment
def plans(spec: ConvSpec = BASE):
    """Every plan's GPU time and workspace (autotuned), marking the heuristic pick, best and worst,
    and whether cuDNN marks the plan deterministic. Every plan is checked against float64 first
    (``rel_error``); one whose result is wrong has status ``wrong result: ...`` and no time.
    ``first_choice`` marks the heuristic's first choice; ``heuristic_pick`` the plan run without
    autotuning (the first choice, or its next correct plan when the first choice is wrong)."""
    from ..gpu import autotune, engine

    spec = as_spec(spec)
    cg = engine.get_graph(spec)
    heuristic, first = cg.default_plan.index, cg.heuristic_plan.index

    def table(rows, deterministic=None):
        df = to_frame(rows)
        ok = df[df.status == "ok"]
        df["first_choice"] = df.plan_index == first
        df["heuristic_pick"] = df.plan_index == heuristic
        df["best"] = df.plan_index == int(ok.loc[ok.gpu_us.idxmin(), "plan_index"]) if not ok.empty else False
        df["worst"] = (
            df.plan_index == int(ok.loc[ok.gpu_us.idxmax(), "plan_index"]) if not ok.empty else False
        )
        df["candidates"] = len(cg.plans)
        df["deterministic"] = df.plan_name.isin(deterministic if deterministic is not None else ())
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        df.insert(2, "direction", spec.direction)
        return df

    tuned = autotune.autotune(
        cg,
        on_row=lambda rows, total: report(lambda: table(list(rows)), len(rows), total, "plans timed"),
        eager_stop=False,
    )  # a bar for every plan
    df = table(tuned.table.to_dict("records"), cg.deterministic_names())
    assert int(df[df.best].plan_index.iloc[0]) == tuned.best_index
    return df


@experiment
def caps(spec: ConvSpec = BASE, caps: Sequence[Optional[int]] = CAPS):
    """The best plan under each workspace cap (``deselect_workspace_greater_than``) and what the
    cap costs against the uncapped best. ``cap_bytes`` -1 = unlimited."""
    from ..gpu import autotune, engine

    spec = as_spec(spec)
    order = sorted(range(len(caps)), key=lambda i: caps[i] is not None)  # unlimited first: the yardstick
    engine.build_ahead(
        [(spec, "none", caps[i]) for i in order]
    )  # every cap's compiles at once, while the first is timed
    done = {}

    def table():
        df = to_frame([done[i] for i in sorted(done)])
        unlimited = df[(df.cap_bytes == -1) & (df.status == "ok")] if "status" in df.columns else df.iloc[0:0]
        if not unlimited.empty:
            df["slowdown_vs_unlimited"] = df.gpu_us / float(unlimited.gpu_us.iloc[0])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    for i in order:
        cap = caps[i]
        try:
            cg = engine.get_graph(spec, workspace_cap=cap)
            tuned = autotune.autotune(cg)
            best = tuned.table[tuned.table.plan_index == tuned.best_index].iloc[0]
            done[i] = dict(
                cap_bytes=-1 if cap is None else cap,
                plans_within_cap=len(cg.runnable),
                best_plan=best.plan_name,
                workspace_bytes=int(best.workspace_bytes),
                gpu_us=float(best.gpu_us),
                status="ok",
                reason="",
            )
        except LabkitError as exc:
            done[i] = dict(cap_bytes=-1 if cap is None else cap, plans_within_cap=0, **status_row(exc))
        report(table, len(done), len(caps), "caps autotuned")
    return table()


#: build_cost's stages, in the order they run
BUILD_STAGES = (
    "build (heuristic plan)",
    "rebuild (same graph, new object)",
    "labkit cache hit",
    "build every plan",
    "autotune (time every plan)",
    "save the winner to disk",
    "load the winner from disk",
)


@experiment
def build_cost(spec: ConvSpec = BASE):
    """What building costs, stage by stage (`BUILD_STAGES`): first build (heuristic plan), identical
    rebuild (cuDNN's own caches warm), labkit cache hit, build of every plan, autotune, and then
    what a later session does instead: save the autotune winner to disk (``graph.serialize`` and
    an atomic write) and load it back (read, check, ``graph.deserialize``). ``seconds`` is wall
    time; ``serialized_bytes`` the saved plan's size; ``calls_to_pay_off_autotune`` how many calls
    autotuning needs to pay for itself. Saves go to a temporary folder, not this GPU's store."""
    import tempfile

    from ..gpu import autotune, engine
    from ..store import machine, plan_store

    spec = as_spec(spec)
    rows = []

    def timed(stage, fn):
        checkpoint()  # between stages: a prefetch job gives the GPU back here (labkit.session.prefetch)
        t0 = time.perf_counter()
        out = fn()
        rows.append(dict(stage=stage, seconds=time.perf_counter() - t0))
        report(lambda: to_frame(rows), len(rows), len(BUILD_STAGES), "build stages")
        return out

    cache = engine.GraphCache(4, saved_plans=False)  # nothing loaded from disk: these are real builds
    timed(BUILD_STAGES[0], lambda: cache.get(spec, all_plans=False))
    timed(BUILD_STAGES[1], lambda: engine.ConvGraph(spec, all_plans=False))
    timed(BUILD_STAGES[2], lambda: cache.get(spec, all_plans=False))
    full = timed(
        BUILD_STAGES[3], lambda: engine.ConvGraph(spec, parallel=False)
    )  # what cuDNN costs in one process
    tuned = timed(BUILD_STAGES[4], lambda: autotune.autotune(full, save=False))
    with tempfile.TemporaryDirectory(prefix="labkit-build-cost-") as tmp:
        store = plan_store.PlanStore(tmp, machine.this_identity() or machine.identity())
        path = timed(
            BUILD_STAGES[5], lambda: engine.save_plan(full, tuned.best_index, "autotuned", store=store)
        )
        loaded = (
            timed(BUILD_STAGES[6], lambda: engine.load_plan(spec, kind="autotuned", store=store))
            if path
            else None
        )
    if loaded is None:  # reported, not hidden: the chart shows the stage without a bar
        if len(rows) < len(BUILD_STAGES):
            rows.append(dict(stage=BUILD_STAGES[6], seconds=float("nan")))
        rows[-1].update(seconds=float("nan"), reason="cuDNN did not serialize or deserialize this plan")
    gain = tuned.gpu_us(tuned.heuristic_index) - tuned.gpu_us(tuned.best_index)
    df = to_frame(rows)
    df["heuristic_gpu_us"] = tuned.gpu_us(tuned.heuristic_index)
    df["best_gpu_us"] = tuned.gpu_us(tuned.best_index)
    df["calls_to_pay_off_autotune"] = (tuned.seconds * 1e6 / gain) if gain > 0 else float("inf")
    df["serialized_bytes"] = len(loaded.saved.data) if loaded is not None else None
    return df


# ---- charts --------------------------------------------------------------------------------


def plans_chart(df) -> go.Figure:
    """Every plan: workspace vs GPU time; the heuristic pick, the best and the worst highlighted.
    Traces: 0 all plans, 1 heuristic pick, 2 best, 3 worst."""
    ok = ok_rows(df)
    div, unit = size_unit(ok["workspace_bytes"])

    def pts(mask):
        sub = ok[mask] if mask is not None else ok
        return dict(
            x=[float(v) / div for v in sub["workspace_bytes"]],
            y=[num(v) for v in sub["gpu_us"]],
            text=[str(p) for p in sub["plan_name"]],
            customdata=[[int(i), fmt_bytes(w)] for i, w in zip(sub["plan_index"], sub["workspace_bytes"])],
        )

    hover = "plan %{customdata[0]} %{text}<br>%{y:.1f} us, workspace %{customdata[1]}<extra>%{fullData.name}</extra>"
    fig = new_figure()
    fig.add_trace(
        go.Scatter(
            mode="markers",
            name="every plan",
            marker=dict(size=8, color=COLORS["muted"], opacity=0.7),
            hovertemplate=hover,
            **pts(None),
        )
    )
    # the fastest plan is an open diamond drawn around its point, so a heuristic pick that is the
    # same plan (or one next to it) still shows its star inside
    for col, name, sym, color, size, line in (
        ("heuristic_pick", "heuristic pick", "star", COLORS["secondary"], 16, dict(width=1, color="white")),
        (
            "best",
            "fastest (autotuned)",
            "diamond-open",
            COLORS["good"],
            24,
            dict(width=3, color=COLORS["good"]),
        ),
        ("worst", "slowest", "x", COLORS["bad"], 13, dict(width=1, color="white")),
    ):
        mask = ok[col].astype(bool) if col in ok.columns else ok["plan_index"] < 0
        fig.add_trace(
            go.Scatter(
                mode="markers",
                name=name,
                marker=dict(size=size, color=color, symbol=sym, line=line),
                hovertemplate=hover,
                **pts(mask),
            )
        )
    top = float(ok["workspace_bytes"].max()) / div if len(ok) else 1.0
    fig.update_xaxes(
        title_text=f"workspace the plan needs ({unit})",
        range=[-0.04 * (top or 1), 1.06 * (top or 1)],
        zeroline=True,
    )
    fig.update_yaxes(title_text="GPU time per call (us, log)", type="log", **log_axis(ok["gpu_us"]))
    spec = request_spec(df)
    n_ok, n_all = len(ok), len(df)
    detail = (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}: {n_ok} plans timed" if spec else ""
    )
    n_wrong = int(df["status"].map(is_wrong).sum()) if "status" in df.columns else 0
    notes = (
        [f"{n_wrong} of {n_all} plans computed wrong results (checked vs float64): not timed"]
        if n_wrong
        else []
    )
    if n_all - n_ok - n_wrong:
        notes.append(f"{n_all - n_ok - n_wrong} of {n_all} plans could not be timed")
    note = "; ".join(notes)
    return finish(fig, df, "Every plan cuDNN offers: workspace vs GPU time", detail, note=note, height=480)


def cap_label(cap_bytes) -> str:
    c = int(cap_bytes)
    return "unlimited" if c < 0 else fmt_bytes(c)


CAPS_GRID = grid(specs=[[{"secondary_y": True}]])


def caps_chart(df) -> go.Figure:
    """Best plan under each workspace cap and its slowdown against no cap.
    Traces: 0 best GPU time (us, bars), 1 slowdown (x, line on the right axis)."""
    labels = [cap_label(c) for c in df["cap_bytes"]]
    ok = (df["status"] == "ok") if "status" in df.columns else [True] * len(df)
    t = [num(v) if k else None for v, k in zip(df["gpu_us"] if "gpu_us" in df else [None] * len(df), ok)]
    sd = [
        num(v) if k else None
        for v, k in zip(
            df["slowdown_vs_unlimited"] if "slowdown_vs_unlimited" in df else [None] * len(df), ok
        )
    ]
    n = list(df["plans_within_cap"]) if "plans_within_cap" in df else [None] * len(df)
    fig = new_figure(**CAPS_GRID)
    fig.add_trace(
        go.Bar(
            x=labels,
            y=t,
            name="best GPU time under the cap",
            marker_color=COLORS["primary"],
            text=[f"{int(k)} plans" if k is not None and not isnan(k) else "" for k in n],
            textposition="inside",
            insidetextanchor="start",
            customdata=[
                [str(p), fmt_bytes(w)]
                for p, w in zip(
                    df.get("best_plan", [""] * len(df)), df.get("workspace_bytes", [None] * len(df))
                )
            ],
            hovertemplate="cap %{x}: %{y:.1f} us (%{text})<br>plan %{customdata[0]}, workspace %{customdata[1]}"
            "<extra></extra>",
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=sd,
            name="slowdown vs unlimited",
            mode="lines+markers+text",
            text=[f"{v:.2f}x" if v is not None else "" for v in sd],
            textposition="top center",
            line=dict(color=COLORS["bad"]),
            hovertemplate="cap %{x}: %{y:.2f}x the unlimited best<extra></extra>",
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title_text="workspace cap (deselect_workspace_greater_than)", type="category")
    fig.update_yaxes(title_text="best GPU time (us)", secondary_y=False, rangemode="tozero")
    top = max([v for v in sd if v is not None] or [1.0])
    step = nice_step(top * 1.15 / 4)
    fig.update_yaxes(
        title_text="slowdown (x)",
        secondary_y=True,
        range=[0, top * 1.25],
        showgrid=False,
        tickmode="linear",
        tick0=0,
        dtick=step,
        tickformat=".0f" if step >= 1 else ".1f" if step >= 0.1 else ".2f",
        ticksuffix="x",
    )
    spec = request_spec(df)
    detail = (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; every plan within the cap autotuned"
        if spec
        else ""
    )
    return finish(
        fig, df, "What a workspace cap costs", detail, note=not_ok_note(df, ("cap_bytes",)), height=460
    )


def build_cost_chart(df) -> go.Figure:
    """Wall time of each build stage (log). Traces: 0 bars."""
    s = [num(v) for v in df["seconds"]]
    disk = [
        str(st) in BUILD_STAGES[5:] for st in df["stage"]
    ]  # what a later session does instead of building
    fig = new_figure()
    fig.add_trace(
        go.Bar(
            y=list(df["stage"]),
            x=s,
            orientation="h",
            marker_color=[COLORS["good"] if d else COLORS["primary"] for d in disk],
            text=[fmt_seconds(v) for v in s],
            textposition="auto",
            name="wall time",
            hovertemplate="%{y}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="wall time (s, log)", type="log", **log_axis(s, tick_seconds))
    spec = request_spec(df)
    pay = first_value(df, "calls_to_pay_off_autotune")
    if pay is None:
        pay_txt = ""
    elif math.isinf(pay):
        pay_txt = "autotuning found nothing faster than the heuristic pick, so it never pays for itself here"
    else:
        pay_txt = (
            f"autotuning pays for itself after {pay:,.0f} calls (heuristic {first_value(df, 'heuristic_gpu_us'):.1f} us "
            f"vs best {first_value(df, 'best_gpu_us'):.1f} us per call)"
        )
    detail = f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}" if spec else ""
    if any(disk):
        detail += "; green: saving the autotuned plan and loading it in a later session"
    return finish(
        fig, df, "What building a cuDNN graph costs", detail, note=pay_txt, height=420, legend_rows=0
    )


# ---- summaries --------------------------------------------------------------------------------


def plans_summary(df) -> Text:
    ok = ok_rows(df)
    h = ok[ok["heuristic_pick"]].iloc[0]
    b = ok[ok["best"]].iloc[0]
    w = ok[ok["worst"]].iloc[0]
    spec = request_spec(df)
    text = (
        f"{spec.label} ({where(df)}): {len(ok)} plans timed. Heuristic pick: plan {int(h.plan_index)}, "
        f"{fmt_us(h.gpu_us)}, workspace {fmt_bytes(h.workspace_bytes)}. Fastest: plan {int(b.plan_index)}, "
        f"{fmt_us(b.gpu_us)}, workspace {fmt_bytes(b.workspace_bytes)}. Slowest: plan {int(w.plan_index)}, "
        f"{fmt_us(w.gpu_us)} ({w.gpu_us / b.gpu_us:.0f}x the fastest)."
    )
    if h.plan_index == b.plan_index:
        text += " The heuristic got it right here: autotuning would only confirm it."
    else:
        text += f" Autotuning gains {h.gpu_us / b.gpu_us:.2f}x over the heuristic here."
    return Text(text + wrong_plans_sentence(df))


def wrong_plans_sentence(df) -> str:
    """A sentence on the plans whose result was wrong against float64 ("" when there are none):
    how many, the worst error, and whether the heuristic's first choice was one of them."""
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
    """A relative error for a sentence: 1.4, 3.1e-05, or "inf" (NaN or inf in the output)."""
    v = float(value)
    if not math.isfinite(v):
        return "inf (NaN or inf in the output)"
    return f"{v:.2g}" if v >= 1e-3 else f"{v:.1e}"


def caps_summary(df) -> Text:
    ok = ok_rows(df)
    worst = ok.loc[ok["slowdown_vs_unlimited"].idxmax()]
    free = ok[ok["slowdown_vs_unlimited"] <= 1.05]
    cheapest = free.loc[free["cap_bytes"].replace(-1, float("inf")).idxmin()] if len(free) else None
    if worst.slowdown_vs_unlimited > 1.05:
        text = (
            f"{where(df)}: the tightest caps leave {int(ok['plans_within_cap'].min())} plans and cost up to "
            f"{worst.slowdown_vs_unlimited:.1f}x (cap {cap_label(worst.cap_bytes)})."
        )
    else:
        text = (
            f"{where(df)}: even the tightest cap ({cap_label(ok['cap_bytes'].replace(-1, float('inf')).min())}, "
            f"{int(ok['plans_within_cap'].min())} plans left) costs at most {worst.slowdown_vs_unlimited:.2f}x: "
            "within 5% of unlimited, timing noise included."
        )
    if cheapest is not None and worst.slowdown_vs_unlimited > 1.05:
        caps = sorted(c for c in ok["cap_bytes"] if c >= 0)
        below = [c for c in caps if cheapest.cap_bytes < 0 or c < cheapest.cap_bytes]
        text += (
            f" The best plan under a cap of {cap_label(cheapest.cap_bytes)} is within 5% of unlimited, and "
            f"it needs {fmt_bytes(cheapest.workspace_bytes)}: any cap of at least that much keeps the speed. "
            f"{cap_label(cheapest.cap_bytes)} is only the first recorded cap above it"
            + (
                f" (the one below, {cap_label(below[-1])}, is too small; caps in between were not measured)."
                if below
                else "."
            )
        )
    return Text(text)


def build_cost_summary(df) -> Text:
    s = df.set_index("stage")["seconds"]
    first = s.get("build (heuristic plan)")
    hit = s.get("labkit cache hit")
    tune = s.get("autotune (time every plan)")
    pay = first_value(df, "calls_to_pay_off_autotune")
    spec = request_spec(df)
    text = (
        f"{spec.label} ({where(df)}): the first build took {fmt_seconds(first)}, a cache hit "
        f"{fmt_seconds(hit)} ({first / hit:,.0f}x less); autotuning every plan took {fmt_seconds(tune)}."
    )
    if pay is None or pay == float("inf"):
        text += " The heuristic pick was already the fastest plan, so autotuning never pays for itself for this convolution."
    else:
        text += (
            f" It makes each call {df['heuristic_gpu_us'].iloc[0] - df['best_gpu_us'].iloc[0]:.1f} us faster, "
            f"so it pays for itself after {pay:,.0f} calls."
        )
    load, build_all = s.get(BUILD_STAGES[6]), s.get(BUILD_STAGES[3])
    if load is not None and build_all is not None and load == load and load > 0:
        cold = build_all + tune
        text += (
            f" Saved to disk ({fmt_bytes(first_value(df, 'serialized_bytes'))}), the autotuned plan loads in a later "
            f"session in {fmt_seconds(load)} instead of building every plan and autotuning again "
            f"({fmt_seconds(cold)}, {cold / load:,.0f}x more)."
        )
    return Text(text)


# ---- exercise checks --------------------------------------------------------------------------------


def worst_vs_best(answer=None, df=None) -> CheckResult:
    """Lesson 05: for fp16 NCHW (base shape), how many times slower is the slowest plan than the
    fastest? (within 10%)"""
    df = ok_rows(frame_for(df, "plans", spec=BASE.replace(layout="NCHW")))
    b, w = df.loc[df["gpu_us"].idxmin()], df.loc[df["gpu_us"].idxmax()]
    truth = w["gpu_us"] / b["gpu_us"]
    if answer is None:
        return pending(
            "How many times slower is the slowest plan than the fastest (fp16 NCHW)?",
            "the red x and the green diamond; mind the log axis.",
        )
    a = as_number(answer, "a ratio", 10)
    if is_close(a, truth, 0.10):
        return say(
            True,
            f"{fmt_us(w['gpu_us'])} / {fmt_us(b['gpu_us'])} = {truth:.0f}x: picking a plan matters more than "
            "anything else on this page.",
        )
    return say(
        False,
        f"{a:g}x is {'too high' if a > truth else 'too low'}; read the two times from the hover labels.",
    )


def cap_slowdown(answer=None, cap_mib: float = 1, df=None) -> CheckResult:
    """Lesson 05: fp16 NCHW, workspace capped at ``cap_mib`` MiB: how many times slower is the best
    plan that fits than the unlimited best? (within 10%)"""
    df = ok_rows(frame_for(df, "caps", spec=BASE.replace(layout="NCHW")))
    row = df[df["cap_bytes"] == int(cap_mib * 2**20)]
    if row.empty:
        raise InvalidSpec(
            "cap_mib", cap_mib, f"must be a recorded cap: {', '.join(cap_label(c) for c in df['cap_bytes'])}"
        )
    truth = float(row["slowdown_vs_unlimited"].iloc[0])
    if answer is None:
        return pending(
            f"How many times slower is the best plan under a {cap_mib:g} MiB cap (fp16 NCHW)?",
            "the red slowdown line.",
        )
    a = as_number(answer, "a ratio", 1.5)
    if is_close(a, truth, 0.10):
        free = df[df["cap_bytes"] == -1]
        need = fmt_bytes(free["workspace_bytes"].iloc[0]) if len(free) else "more"
        return say(
            True,
            f"{truth:.1f}x: only {int(row['plans_within_cap'].iloc[0])} plans fit in {cap_mib:g} MiB, while the "
            f"unlimited best plan needs {need}.",
        )
    return say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}.")


def autotune_payoff_calls(answer=None, df=None) -> CheckResult:
    """Lesson 05: fp32 NCHW (base shape): after how many calls has autotuning paid for itself?
    (within 10%)"""
    df = frame_for(df, "build_cost", spec=BASE.replace(dtype="fp32", layout="NCHW"))
    truth = float(df["calls_to_pay_off_autotune"].iloc[0])
    tune = float(df.set_index("stage").loc["autotune (time every plan)", "seconds"])
    gain = float(df["heuristic_gpu_us"].iloc[0] - df["best_gpu_us"].iloc[0])
    if answer is None:
        return pending(
            "After how many calls does autotuning pay for itself (fp32 NCHW)?",
            "autotune time (in us) divided by the time it saves per call.",
        )
    if isinstance(answer, str) and answer.strip().lower() in ("never", "inf", "infinity"):
        answer = float("inf")
    a = as_number(answer, "a number of calls (or 'never')", 1000)
    if math.isinf(truth):
        if math.isinf(a):
            return say(
                True, "the heuristic pick was already the fastest: autotuning never pays for itself here."
            )
        return say(False, "did autotuning find anything faster than the heuristic pick?")
    if is_close(a, truth, 0.10):
        return say(
            True,
            f"{tune * 1e6:,.0f} us of autotuning / {gain:.1f} us saved per call = {truth:,.0f} calls: "
            "worth it for a training run, not for a one-off.",
        )
    return say(
        False, f"{a:,.0f} is {'too many' if a > truth else 'too few'}; seconds to microseconds is 1e6."
    )


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base calls only.
    ``build_cost`` of the base comes first: the recorder runs it while its process has built nothing."""
    nchw = BASE.replace(layout="NCHW")
    calls = [
        ("build_cost", dict(spec=BASE)),
        ("plans", dict(spec=BASE)),
        ("plans", dict(spec=nchw)),
        ("caps", dict(spec=nchw)),
    ]
    if quick:
        return calls
    for d in ("fp32", "tf32", "bf16", "fp8_e4m3"):
        for lay in ("NHWC", "NCHW"):
            calls.append(("plans", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for direction in ("dgrad", "wgrad"):
        calls.append(("plans", dict(spec=BASE.replace(direction=direction))))
    for d in ("fp16", "fp32"):
        for lay in ("NHWC", "NCHW"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("caps", dict(spec=BASE.replace(dtype=d, layout=lay))))
    calls.append(("build_cost", dict(spec=BASE.replace(dtype="fp32", layout="NCHW"))))
    return calls


LESSON = "05"
CHARTS = {
    "plans": (plans_chart, 4, plans_summary),
    "caps": (caps_chart, 2, caps_summary),
    "build_cost": (build_cost_chart, 1, build_cost_summary),
}
EXERCISES = (worst_vs_best, cap_slowdown, autotune_payoff_calls)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "plans": spec_panel("plans", "Every plan", SHAPE + ("dtype", "layout", "direction"), BASE),
    "caps": spec_panel(
        "caps", "Workspace cap", SHAPE + ("dtype", "layout", "direction"), BASE.replace(layout="NCHW")
    ),
    "build_cost": spec_panel(
        "build_cost",
        "Build cost",
        SHAPE + ("dtype", "layout", "direction"),
        BASE,
        recorded_controls=("dtype_layout",),
    ),
}
