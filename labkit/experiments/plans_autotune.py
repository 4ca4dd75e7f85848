"""Lesson 05, plans, autotuning and caching: every plan cuDNN offers, workspace caps, and what
building, autotuning and loading a graph cost.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
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
from ..errors import LabkitError
from ..signals.cancel import checkpoint
from ..signals.progress import report
from ..spec import ConvSpec
from .checking import CheckResult, emit
from .core import BASE, MIB, as_spec, experiment, request_of, result, status_row, to_frame
from .exercise import Exercise, equal, number, one_of
from .panel_config import SHAPE, spec_panel

# ---- experiments ------------------------------------------------------------------------------
CAPS = (0, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, None)


@experiment
def plans(spec: ConvSpec = BASE):
    """Every plan's GPU time and workspace (autotuned), marking the heuristic pick, best and worst,
    and whether cuDNN marks the plan deterministic."""
    from ..gpu import autotune, engine

    spec = as_spec(spec)
    cg = engine.get_graph(spec)
    heuristic = cg.default_plan.index

    def table(rows, deterministic=None):
        df = to_frame(rows)
        ok = df[df.status == "ok"]
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
    cap costs against the uncapped best. ``cap_bytes`` -1 = unlimited; ``gpu_us_p10``/``_p90``:
    the spread of the best plan's repeated timings."""
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
                gpu_us_p10=float(best.get("gpu_us_p10", float("nan"))),
                gpu_us_p90=float(best.get("gpu_us_p90", float("nan"))),
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
#: the plans chart: GPU time of every plan (top), the workspace each needs (bottom), plans side by side
PLANS_GRID = grid(rows=2, cols=1, shared_xaxes=True, row_heights=[0.66, 0.34], vertical_spacing=0.07)


def plans_chart(df) -> go.Figure:
    """Every plan, fastest to slowest: its GPU time (top, log, with the 10th-90th percentile of its
    repeated timings) and the workspace it needs (bottom); the heuristic pick, the best and the
    worst highlighted. One position per plan, so every plan timed is one visible point.
    Traces: 0 all plans, 1 heuristic pick, 2 best, 3 worst, 4 workspace bars."""
    ok = ok_rows(df).sort_values(["gpu_us", "plan_index"], kind="stable")
    rank = {int(i): k for k, i in enumerate(ok["plan_index"], 1)}
    div, unit = size_unit(ok["workspace_bytes"])

    def pts(mask):
        sub = ok[mask] if mask is not None else ok
        return dict(
            x=[rank[int(i)] for i in sub["plan_index"]],
            y=[num(v) for v in sub["gpu_us"]],
            text=[str(p) for p in sub["plan_name"]],
            customdata=[[int(i), fmt_bytes(w)] for i, w in zip(sub["plan_index"], sub["workspace_bytes"])],
        )

    hover = "plan %{customdata[0]} %{text}<br>%{y:.1f} us, workspace %{customdata[1]}<extra>%{fullData.name}</extra>"
    spread = {}
    if {"gpu_us_p10", "gpu_us_p90"} <= set(ok.columns):
        spread = dict(
            error_y=dict(
                type="data",
                array=[
                    max(0.0, (num(h) or 0) - (num(m) or 0)) for h, m in zip(ok["gpu_us_p90"], ok["gpu_us"])
                ],
                arrayminus=[
                    max(0.0, (num(m) or 0) - (num(lo) or 0)) for lo, m in zip(ok["gpu_us_p10"], ok["gpu_us"])
                ],
                color=COLORS["dark"],
                thickness=1,
                width=2,
            )
        )
    fig = new_figure(**PLANS_GRID)
    fig.add_trace(
        go.Scatter(
            mode="markers",
            name="every plan (bar: 10th-90th percentile of its timings)",
            marker=dict(size=7, color=COLORS["muted"]),
            hovertemplate=hover,
            **spread,
            **pts(None),
        ),
        row=1,
        col=1,
    )
    # the fastest plan is an open diamond drawn around its point, so a heuristic pick that is the
    # same plan still shows its star inside
    for col, name, sym, color, size, line in (
        ("heuristic_pick", "heuristic pick", "star", COLORS["secondary"], 15, dict(width=1, color="white")),
        (
            "best",
            "fastest (autotuned)",
            "diamond-open",
            COLORS["good"],
            20,
            dict(width=3, color=COLORS["good"]),
        ),
        ("worst", "slowest", "x", COLORS["bad"], 12, dict(width=1, color="white")),
    ):
        mask = ok[col].astype(bool) if col in ok.columns else ok["plan_index"] < 0
        fig.add_trace(
            go.Scatter(
                mode="markers",
                name=name,
                marker=dict(size=size, color=color, symbol=sym, line=line),
                hovertemplate=hover,
                **pts(mask),
            ),
            row=1,
            col=1,
        )
    ws = [float(w) for w in ok["workspace_bytes"]]
    top = max(ws, default=0.0)
    # zero, and sizes too small to see beside the largest, are written out ("0 B", "2.3 KiB")
    labels = [fmt_bytes(w) if w == 0 or w < 0.03 * top else "" for w in ws]
    fig.add_trace(
        go.Bar(
            x=[rank[int(i)] for i in ok["plan_index"]],
            y=[w / div for w in ws],
            name="workspace the plan needs",
            marker_color=COLORS["primary"],
            text=labels,
            textposition="outside",
            textangle=-90,
            constraintext="none",
            cliponaxis=False,
            textfont=dict(size=10),
            customdata=[
                [int(i), str(p), fmt_bytes(w)] for i, p, w in zip(ok["plan_index"], ok["plan_name"], ws)
            ],
            hovertemplate="plan %{customdata[0]} %{customdata[1]}: workspace %{customdata[2]}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    n_ok = len(ok)
    ticks = sorted({1, n_ok, *range(5, n_ok, 5)}) if n_ok else []
    fig.update_xaxes(tickmode="array", tickvals=ticks, range=[0.3, n_ok + 0.7], row=1, col=1)
    fig.update_xaxes(
        title_text="plans, fastest to slowest (rank; hover for the plan)",
        tickmode="array",
        tickvals=ticks,
        range=[0.3, n_ok + 0.7],
        row=2,
        col=1,
    )
    axis = log_axis(ok["gpu_us"])
    if axis.get("range"):  # room under the fastest plan's diamond
        axis["range"] = [axis["range"][0] - 0.08, axis["range"][1]]
    fig.update_yaxes(title_text="GPU time per call (us, log)", type="log", **axis, row=1, col=1)
    fig.update_yaxes(
        title_text=f"workspace ({unit})", rangemode="tozero", range=[0, (top / div or 1) * 1.45], row=2, col=1
    )
    spec = request_spec(df)
    n_all = len(df)
    detail = (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}: {n_ok} plans timed, one point each"
        if spec
        else ""
    )
    note = f"{n_all - n_ok} of {n_all} plans could not be timed" if n_all != n_ok else ""
    return finish(
        fig,
        df,
        "Every plan cuDNN offers: GPU time and workspace",
        detail,
        note=note,
        height=560,
        legend_rows=2,
    )


def cap_label(cap_bytes) -> str:
    c = int(cap_bytes)
    return "unlimited" if c < 0 else fmt_bytes(c)


@dataclass(frozen=True)
class Noise:
    """How far separate timings of the unlimited best plan fall from the one the caps compare
    against: ``lo``..``hi`` as ratios (1.0 is that timing), from ``timings`` separate timings of
    plan ``plan`` (each autotune under a cap that kept it, and the plans table's own, with the
    10th-90th percentile of their repeats where recorded)."""

    lo: float
    hi: float
    plan: str
    timings: int

    def holds(self, ratio: float) -> bool:
        """Whether ``ratio`` lies inside the band: no difference the timings can tell apart."""
        return self.lo - 1e-9 <= ratio <= self.hi + 1e-9


def _plans_beside(df):
    """The plans table of ``df``'s convolution from where ``df`` came from (its recording; live,
    this session's results), or None when none is at hand: nothing is measured for it."""
    spec = request_spec(df)
    if spec is None:
        return None
    a = getattr(df, "attrs", {}) or {}
    try:
        if a.get("mode") == "recorded" and a.get("source"):
            from ..store import recordings

            rec = next((r for r in recordings.shipped() if str(r.path) == str(a["source"])), None)
            rec = rec if rec is not None else recordings.load(a["source"])
            if "plans" not in rec.experiments():
                return None
            return rec.lookup("plans", request_of("plans", spec=spec))
        return result("plans", at_hand_only=True, spec=spec)
    except (LabkitError, KeyError, ValueError, OSError):
        return None


def caps_noise(df) -> Optional[Noise]:
    """The timing noise of a caps table (`Noise`), or None when its unlimited best plan was timed
    only once with no spread recorded."""
    ok = ok_rows(df)
    if "best_plan" not in ok.columns or "cap_bytes" not in ok.columns:
        return None
    unl = ok[ok["cap_bytes"] == -1]
    if unl.empty:
        return None
    plan, t = str(unl["best_plan"].iloc[0]), float(unl["gpu_us"].iloc[0])
    same = ok[ok["best_plan"] == plan]
    cols = [c for c in ("gpu_us", "gpu_us_p10", "gpu_us_p90") if c in same.columns]
    xs = [float(v) for c in cols for v in same[c] if num(v)]
    n = len(same)
    pl = _plans_beside(df)
    if pl is not None and "plan_name" in pl.columns:
        row = ok_rows(pl)[ok_rows(pl)["plan_name"] == plan]
        if not row.empty:
            xs += [
                float(row[c].iloc[0])
                for c in ("gpu_us", "gpu_us_p10", "gpu_us_p90")
                if c in row and num(row[c].iloc[0])
            ]
            n += 1
    if len(xs) < 2 or not t > 0:
        return None
    return Noise(min(xs) / t, max(xs) / t, plan, n)


#: the caps chart: the best time under each cap (top), its ratio to the unlimited best (bottom)
CAPS_GRID = grid(rows=2, cols=1, shared_xaxes=True, row_heights=[0.5, 0.5], vertical_spacing=0.1)


def caps_chart(df) -> go.Figure:
    """Best plan under each workspace cap (top) and its slowdown against no cap (bottom), with the
    band within which separate timings of one plan differ (`caps_noise`): a ratio inside it is
    labelled so, never read as a gain or a loss.
    Traces: 0 best GPU time (us, bars), 1 slowdown (x, dots), 2 noise band."""
    labels = [cap_label(c) for c in df["cap_bytes"]]
    ok = list((df["status"] == "ok") if "status" in df.columns else [True] * len(df))
    t = [num(v) if k else None for v, k in zip(df["gpu_us"] if "gpu_us" in df else [None] * len(df), ok)]
    sd = [
        num(v) if k else None
        for v, k in zip(
            df["slowdown_vs_unlimited"] if "slowdown_vs_unlimited" in df else [None] * len(df), ok
        )
    ]
    n = list(df["plans_within_cap"]) if "plans_within_cap" in df else [None] * len(df)
    noise = caps_noise(df)
    fig = new_figure(**CAPS_GRID)
    fig.add_trace(
        go.Bar(
            x=labels,
            y=t,
            name="best GPU time under the cap",
            marker_color=COLORS["primary"],
            text=[
                f"{fmt_us(v)}<br>{int(k)} plans" if v is not None and k is not None and not isnan(k) else ""
                for v, k in zip(t, n)
            ],
            textposition="outside",
            cliponaxis=False,
            customdata=[
                [str(p), fmt_bytes(w)]
                for p, w in zip(
                    df.get("best_plan", [""] * len(df)), df.get("workspace_bytes", [None] * len(df))
                )
            ],
            hovertemplate="cap %{x}: %{y:.1f} us<br>plan %{customdata[0]}, workspace %{customdata[1]}"
            "<extra></extra>",
        ),
        row=1,
        col=1,
    )

    def said(v):
        if v is None:
            return ""
        text = f"{v:.3f}x" if abs(v - 1) < 0.1 else f"{v:.2f}x"
        return f"{text}<br>within noise" if noise is not None and noise.holds(v) else text

    fig.add_trace(
        go.Scatter(
            x=labels,
            y=sd,
            name="slowdown vs unlimited",
            mode="markers+text",
            marker=dict(size=10, color=COLORS["bad"]),
            text=[said(v) for v in sd],
            textposition="top center",
            cliponaxis=False,
            hovertemplate="cap %{x}: %{y:.3f}x the unlimited best<extra></extra>",
        ),
        row=2,
        col=1,
    )
    band = (
        dict(
            x=labels + labels[::-1],
            y=[noise.hi] * len(labels) + [noise.lo] * len(labels),
            name=f"noise: the unlimited best plan timed {noise.timings} times ({noise.lo:.3f}-{noise.hi:.3f}x)",
        )
        if noise is not None and labels
        else dict(x=[], y=[], name="noise (not measured)", showlegend=False)
    )
    fig.add_trace(
        go.Scatter(
            mode="lines",
            fill="toself",
            fillcolor="rgba(60,64,67,0.25)",
            line=dict(width=0),
            hoverinfo="skip",
            **band,
        ),
        row=2,
        col=1,
    )
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(
        title_text="workspace cap (deselect_workspace_greater_than)", type="category", row=2, col=1
    )
    top_t = max([v for v in t if v is not None] or [1.0])
    fig.update_yaxes(title_text="best GPU time (us)", range=[0, top_t * 1.45], row=1, col=1)
    top = max([v for v in sd if v is not None] + ([noise.hi] if noise else []) or [1.0])
    step = nice_step(top * 1.15 / 4)
    fig.update_yaxes(
        title_text="slowdown (x)",
        range=[0, top * 1.4],
        tickmode="linear",
        tick0=0,
        dtick=step,
        tickformat=".0f" if step >= 1 else ".1f" if step >= 0.1 else ".2f",
        ticksuffix="x",
        row=2,
        col=1,
    )
    spec = request_spec(df)
    detail = (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; every plan within the cap autotuned"
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        "What a workspace cap costs",
        detail,
        note=not_ok_note(df, ("cap_bytes",)),
        height=560,
        legend_rows=2,
    )


def build_cost_chart(df) -> go.Figure:
    """Wall time of each build stage: dots on a log axis, each labelled with its time.
    Traces: 0 stages."""
    s = [num(v) for v in df["seconds"]]
    disk = [
        str(st) in BUILD_STAGES[5:] for st in df["stage"]
    ]  # what a later session does instead of building
    fig = new_figure()
    fig.add_trace(
        go.Scatter(
            y=list(df["stage"]),
            x=s,
            mode="markers+text",
            marker=dict(size=12, color=[COLORS["good"] if d else COLORS["primary"] for d in disk]),
            text=[fmt_seconds(v) if v is not None else "not measured" for v in s],
            textposition="middle right",
            cliponaxis=False,
            name="wall time",
            hovertemplate="%{y}: %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    axis = log_axis(s, tick_seconds)
    if axis.get("range"):
        axis["range"] = [axis["range"][0], axis["range"][1] + 0.5]  # room for the largest dot's label
    fig.update_xaxes(title_text="wall time (s, log)", type="log", **axis)
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
        f"{fmt_us(w.gpu_us)}, workspace {fmt_bytes(w.workspace_bytes)}."
    )
    if h.plan_index == b.plan_index:
        text += " The heuristic got it right here: autotuning would only confirm it."
    else:
        text += (
            f" The heuristic's pick is rank {int((ok['gpu_us'] < h.gpu_us).sum()) + 1} of {len(ok)}, "
            f"{(h.gpu_us / b.gpu_us - 1) * 100:.1f}% slower than the fastest."
        )
    return Text(text)


def timing_noise_summary(plans_df, caps_df=None) -> Text:
    """How much the timings of one plan spread: within one measurement (the 10th-90th percentile
    of its repeats) and between two separate measurements of the same plan (the plans table and
    the caps experiment's unlimited row, when ``caps_df`` is given)."""
    ok = ok_rows(plans_df)
    rel = (ok["gpu_us_p90"] - ok["gpu_us_p10"]) / ok["gpu_us"]
    samples = ok["samples"].astype(int) if "samples" in ok else None
    text = (
        f"{where(plans_df)}: each plan's time is the median of "
        + (
            f"{int(samples.min())} to {int(samples.max())} replays"
            if samples is not None and samples.min() != samples.max()
            else f"{int(samples.iloc[0])} replays"
            if samples is not None
            else "repeated replays"
        )
        + f" of a CUDA graph of back-to-back calls. Within one plan, the 10th to 90th percentile of those "
        f"replays spans {rel.median() * 100:.1f}% of its median (the median plan) and at most "
        f"{rel.max() * 100:.1f}%."
    )
    if caps_df is not None:
        unl = ok_rows(caps_df)
        unl = unl[unl["cap_bytes"] == -1]
        if not unl.empty:
            plan = str(unl["best_plan"].iloc[0])
            mine = ok[ok["plan_name"] == plan]
            if not mine.empty:
                a, b = float(mine["gpu_us"].iloc[0]), float(unl["gpu_us"].iloc[0])
                spread = float((mine["gpu_us_p90"].iloc[0] - mine["gpu_us_p10"].iloc[0]) / a)
                gap = abs(b - a) / min(a, b)
                text += (
                    f" Timed again in a separate autotune (the caps experiment below, no cap), plan "
                    f"{int(mine['plan_index'].iloc[0])} read {b:.2f} us instead of {a:.2f} us: "
                    f"{gap * 100:.1f}% apart, "
                    + (
                        "more than its own spread here: a second run moves a plan's time more than its repeats do."
                        if gap > spread
                        else "within its own spread here."
                    )
                )
    return Text(text)


def caps_summary(df) -> Text:
    ok = ok_rows(df)
    noise = caps_noise(df)
    caps = ok["cap_bytes"].replace(-1, float("inf"))
    tightest = ok.loc[caps.idxmin()]
    worst = ok.loc[ok["slowdown_vs_unlimited"].idxmax()]

    def costs(row) -> bool:
        r = float(row.slowdown_vs_unlimited)
        return not (noise.holds(r) if noise is not None else abs(r - 1) < 0.01)

    text = f"{where(df)}: "
    if costs(worst):
        text += (
            f"the tightest cap ({cap_label(tightest.cap_bytes)}) leaves {int(tightest.plans_within_cap)} "
            f"plans and costs {tightest.slowdown_vs_unlimited:.2f}x"
            + (
                "."
                if worst.cap_bytes == tightest.cap_bytes
                or abs(worst.slowdown_vs_unlimited - tightest.slowdown_vs_unlimited)
                < 0.01 * worst.slowdown_vs_unlimited
                else f"; the largest cost is {worst.slowdown_vs_unlimited:.2f}x (cap {cap_label(worst.cap_bytes)})."
            )
        )
        free = ok[[not costs(r) for r in ok.itertuples()]]
        paid = ok[[costs(r) for r in ok.itertuples()]]
        if len(free) and len(paid):
            first = free.loc[free["cap_bytes"].replace(-1, float("inf")).idxmin()]
            below = [c for c in sorted(paid["cap_bytes"]) if 0 <= c < first.cap_bytes or first.cap_bytes < 0]
            text += (
                f" From {cap_label(first.cap_bytes)} up, the best plan under the cap costs nothing measurable: "
                f"it needs {fmt_bytes(first.workspace_bytes)}, so any cap of at least that much keeps the speed"
                + (
                    f" ({cap_label(below[-1])}, the recorded cap below, is too small; caps in between were not "
                    "measured)."
                    if below
                    else "."
                )
            )
    else:
        text += (
            f"even the tightest cap ({cap_label(tightest.cap_bytes)}, {int(tightest.plans_within_cap)} plans "
            "left) costs nothing measurable: every ratio lies within the timing noise."
        )
    if noise is not None:
        text += (
            f" Noise: plan {noise.plan}, the unlimited best, was timed {noise.timings} times in separate "
            f"autotunes (under every cap that keeps it, and in the plans table); those timings lie between "
            f"{noise.lo:.3f}x and {noise.hi:.3f}x of the one the ratios divide by."
        )
        below_one = ok[(ok["slowdown_vs_unlimited"] < 1) & (ok["best_plan"] == noise.plan)]
        if len(below_one):
            text += (
                f" So a cap that reads below 1x ({', '.join(cap_label(c) for c in below_one['cap_bytes'])}) "
                "did not make anything faster: its best plan is that same plan, timed again."
            )
    return Text(text)


def build_cost_summary(df) -> Text:
    s = df.set_index("stage")["seconds"]
    first, rebuild = s.get(BUILD_STAGES[0]), s.get(BUILD_STAGES[1])
    hit, build_all = s.get(BUILD_STAGES[2]), s.get(BUILD_STAGES[3])
    tune = s.get(BUILD_STAGES[4])
    pay = first_value(df, "calls_to_pay_off_autotune")
    spec = request_spec(df)
    text = (
        f"{spec.label} ({where(df)}): the first build took {fmt_seconds(first)}, an identical rebuild "
        f"{fmt_seconds(rebuild)}, a cache hit {fmt_seconds(hit)}; building every plan took "
        f"{fmt_seconds(build_all)} and autotuning them {fmt_seconds(tune)}."
    )
    if first > rebuild:
        text += (
            f" The first build pays a one-time set-up that the identical rebuild right after it does not: "
            f"{fmt_seconds(first - rebuild)} of its {fmt_seconds(first)} (for the first graph a process "
            "builds, that is cuDNN loading its libraries and creating its handle)."
        )
        if build_all < first and build_all >= 1.05 * rebuild:
            text += (
                f" That is why building all plans took less than the first build of one: compare it with "
                f"the rebuild instead, {build_all / rebuild:.1f}x as long."
            )
        elif build_all < first:
            text += (
                f" Building all plans took about as long as that rebuild ({build_all / rebuild:.2f}x): the part "
                "both pay, defining the graph and asking cuDNN's heuristics for its plans, outweighs building "
                "these plans."
            )
    if pay is None or pay == float("inf"):
        text += " The heuristic pick was already the fastest plan: autotuning never pays for itself here."
    else:
        gain = df["heuristic_gpu_us"].iloc[0] - df["best_gpu_us"].iloc[0]
        text += (
            f" Autotuning makes each call {gain:.1f} us faster, so it pays for itself after {pay:,.0f} calls."
        )
    load = s.get(BUILD_STAGES[6])
    if load is not None and build_all is not None and load == load and load > 0:
        cold = build_all + tune
        text += (
            f" Saved to disk ({fmt_bytes(first_value(df, 'serialized_bytes'))}), the autotuned plan loads "
            f"in a later session in {fmt_seconds(load)} instead of building every plan and autotuning again "
            f"({fmt_seconds(cold)}, {cold / load:,.0f}x as long)."
        )
    return Text(text)


# ---- exercises --------------------------------------------------------------------------------
NCHW = BASE.replace(layout="NCHW")
#: the answers of the 1 MiB prediction, from a cap that costs nothing to one that costs a lot
SLOWDOWN_BUCKETS = ("under 1.1x", "1.1x to 2x", "2x to 5x", "over 5x")


def _bucket(ratio: float) -> str:
    return SLOWDOWN_BUCKETS[sum(ratio >= edge for edge in (1.1, 2.0, 5.0))]


def _cap_row(spec, cap_bytes: int):
    df = ok_rows(result("caps", spec=spec))
    return df[df["cap_bytes"] == cap_bytes].iloc[0]


def _1mib_why(truth: str) -> str:
    row = _cap_row(NCHW, MIB)
    unl = _cap_row(NCHW, -1)
    return (
        f"measured {row.slowdown_vs_unlimited:.2f}x ({fmt_us(row.gpu_us)} against {fmt_us(unl.gpu_us)}). Only "
        f"{int(row.plans_within_cap)} of {int(unl.plans_within_cap)} plans need 1 MiB or less; the best of them, "
        f"{row.best_plan}, needs {fmt_bytes(row.workspace_bytes)}, while every fast plan needs about "
        f"{fmt_bytes(unl.workspace_bytes)}: the cap removes them all."
    )


def _1mib_wrong(answer: str, truth: str) -> str:
    lower = SLOWDOWN_BUCKETS.index(answer) < SLOWDOWN_BUCKETS.index(truth)
    return "The cap costs more than that." if lower else "The cap costs less than that."


cap_1mib_prediction = Exercise(
    name="cap_1mib_prediction",
    lesson="05",
    kind="predict",
    question=(
        "Predict before the caps chart: fp16 NCHW with the workspace capped at 1 MiB, how many times "
        f"slower will the best plan that fits be than the unlimited best? One of {', '.join(map(repr, SLOWDOWN_BUCKETS))}."
    ),
    truth=lambda: _bucket(float(_cap_row(NCHW, MIB).slowdown_vs_unlimited)),
    parse=one_of(SLOWDOWN_BUCKETS, "a slowdown range"),
    judge=equal,
    why=_1mib_why,
    hints=(
        "which plans fit in 1 MiB? The workspace panel of the plans chart shows what each plan needs.",
        "find the fastest plan whose workspace is under 1 MiB on the plans chart and compare its time "
        "with the fastest plan's.",
    ),
    wrong=_1mib_wrong,
    example="2x to 5x",
    wrong_answers=lambda t: [b for b in SLOWDOWN_BUCKETS if b != t][:2],
)

FREE_CAP_SPEC = BASE  # fp16 NHWC: the caps panel's layout control reaches it


def _free_cap_mib() -> float:
    df = ok_rows(result("caps", spec=FREE_CAP_SPEC))
    fits = df[(df["slowdown_vs_unlimited"] < 1.05) & (df["cap_bytes"] >= 0)]
    return float(fits["cap_bytes"].min()) / MIB if len(fits) else float("inf")


def _free_cap_why(truth: float) -> str:
    df = ok_rows(result("caps", spec=FREE_CAP_SPEC)).sort_values("cap_bytes")
    row = df[df["cap_bytes"] == int(truth * MIB)].iloc[0]
    below = df[(df["cap_bytes"] >= 0) & (df["cap_bytes"] < row.cap_bytes)]
    text = (
        f"{cap_label(row.cap_bytes)}: its best plan ({row.best_plan}, workspace "
        f"{fmt_bytes(row.workspace_bytes)}) is {row.slowdown_vs_unlimited:.3f}x the unlimited best."
    )
    if len(below):
        b = below.iloc[-1]
        text += f" Below it, {cap_label(b.cap_bytes)} costs {b.slowdown_vs_unlimited:.2f}x."
    else:
        text += " No workspace at all: in fp16 NHWC a plan that needs none comes close to the fastest."
    return text


def _free_cap_wrong(answer: float, truth: float) -> str:
    recorded = {c / MIB for c in result("caps", spec=FREE_CAP_SPEC)["cap_bytes"] if c >= 0}
    if answer not in recorded:
        return f"Answer one of the recorded caps, in MiB: {', '.join(f'{c:g}' for c in sorted(recorded))}."
    return "That cap costs 5% or more." if answer < truth else "A smaller recorded cap also stays under 5%."


smallest_free_cap = Exercise(
    name="smallest_free_cap",
    lesson="05",
    kind="explore",
    question=(
        "Move the caps panel's layout to NHWC (fp16, the base convolution): what is the smallest recorded cap "
        "whose best plan costs less than 5% more than unlimited? Answer in MiB (0 for the 0 B cap)."
    ),
    truth=_free_cap_mib,
    parse=number("a cap in MiB"),
    judge=equal,
    why=_free_cap_why,
    hints=(
        "the caps panel, layout NHWC: read the bottom plot, slowdown against unlimited, from the left.",
        "under 5% is a slowdown below 1.05x; a label marked 'within noise' counts too.",
    ),
    wrong=_free_cap_wrong,
    example=16,
    wrong_answers=lambda t: [256.0, 64.0] if t < 64 else [0.0, 1.0],
)

PAYOFF_SPECS = {"fp32 NCHW": BASE.replace(dtype="fp32", layout="NCHW"), "fp16 NHWC": BASE}


def _payoff(name: str) -> dict:
    df = result("build_cost", spec=PAYOFF_SPECS[name])
    s = df.set_index("stage")["seconds"]
    h, b = float(df["heuristic_gpu_us"].iloc[0]), float(df["best_gpu_us"].iloc[0])
    return dict(
        heuristic=h,
        best=b,
        gain=h - b,
        tune=float(s[BUILD_STAGES[4]]),
        calls=float(df["calls_to_pay_off_autotune"].iloc[0]),
    )


PAYOFF_CHOICES = {
    "more_plans": "fp16 NHWC has more plans to time, so its autotune costs too much to ever pay off.",
    "fp16_is_slower": "fp16 convolutions run slower than fp32 ones, so each call has less to save.",
    "nothing_to_win": "In fp16 NHWC the heuristic's pick is already the fastest plan, or within a few percent "
    "of it: autotuning has little or nothing to save per call.",
    "not_saved": "An fp16 plan cannot be saved to disk, so its autotune is paid again in every session.",
}


def _payoff_truth() -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    if f16["gain"] < 0.25 * f32["gain"]:
        return "nothing_to_win"
    return "more_plans" if f16["tune"] > 4 * f32["tune"] else "fp16_is_slower"


def _calls(p: dict) -> str:
    return "never" if math.isinf(p["calls"]) else f"after {p['calls']:,.0f} calls"


def _payoff_why(truth: str) -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    return (
        f"per call, autotuning saves {f32['gain']:.1f} us in fp32 NCHW (heuristic {f32['heuristic']:.1f} us, best "
        f"{f32['best']:.1f} us) and {f16['gain']:.1f} us in fp16 NHWC ({f16['heuristic']:.1f} us against "
        f"{f16['best']:.1f} us). Its cost divided by that saving: {_calls(f32)} in fp32 NCHW, {_calls(f16)} in fp16 NHWC."
    )


def _payoff_wrong(answer: str, truth: str) -> str:
    f32, f16 = _payoff("fp32 NCHW"), _payoff("fp16 NHWC")
    if answer == "more_plans":
        return (
            f"Its autotune does take longer ({fmt_seconds(f16['tune'])} against {fmt_seconds(f32['tune'])}), but "
            f"with fp32's saving per call that would pay off after {f16['tune'] * 1e6 / f32['gain']:,.0f} calls: "
            "look at what each call saves."
        )
    if answer == "fp16_is_slower":
        return f"fp16 NHWC runs in {f16['best']:.1f} us, fp32 NCHW in {f32['best']:.1f} us: fp16 is the fast one."
    if answer == "not_saved":
        return (
            "Both are saved the same way: the green dots of both build-cost charts are the save and the load."
        )
    return None


autotune_payoff_reason = Exercise(
    name="autotune_payoff_reason",
    lesson="05",
    kind="explain",
    question=(
        "Autotuning the base convolution pays for itself far sooner in fp32 NCHW than in fp16 NHWC (the two "
        "build-cost summaries). Why?"
    ),
    truth=_payoff_truth,
    parse=one_of(tuple(PAYOFF_CHOICES), "one of the reasons"),
    judge=equal,
    why=_payoff_why,
    hints=(
        "autotuning pays off after (what it cost) / (what it saves per call): which of the two differs most?",
        "compare the heuristic's time with the best plan's time in each build-cost chart's note.",
    ),
    wrong=_payoff_wrong,
    choices=PAYOFF_CHOICES,
)


# ---- hands-on: time every plan yourself ---------------------------------------------------------
#: the reference solution of the hands-on cell ``%%handson time_every_plan`` (`labkit.session.handson`)
TIME_EVERY_PLAN = """\
import statistics

import cupy

from labkit.gpu import engine
from labkit.session import lessons

graph = engine.get_graph(lessons.base(layout="NCHW"))  # every plan cuDNN offers, built
ops = engine.Operands(graph.spec)  # random inputs and an output buffer on the GPU
stream = cupy.cuda.Stream(non_blocking=True)
start, end = cupy.cuda.Event(), cupy.cuda.Event()
for plan in graph.runnable:
    workspace = cupy.empty(plan.workspace_bytes, dtype=cupy.uint8)  # the plan's own workspace
    conv = graph.bind(ops.arrays, workspace.data.ptr, plan.index, stream)
    with stream:
        for _ in range(3):  # warm-up: loads the kernels, fills the caches, wakes the clocks
            conv.run()
        start.record(stream)
        conv.run()
        end.record(stream)
        end.synchronize()
        one_ms = cupy.cuda.get_elapsed_time(start, end)
        calls = max(1, min(20, int(2.0 / max(one_ms, 1e-3))))  # about 2 ms of calls per sample
        samples = []
        for _ in range(7):  # the median of repeats, not one sample
            start.record(stream)
            for _ in range(calls):
                conv.run()
            end.record(stream)
            end.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0 / calls)
    my_times[plan.index] = statistics.median(samples)
stream.synchronize()
engine.release_handle(stream)
"""
HANDS_ON = {
    "time_every_plan": ("a CUDA GPU with cuDNN (live mode)", TIME_EVERY_PLAN),
}
#: a learner's time for a plan within this factor of labkit's counts as the same measurement
TIMES_AGREE = 1.25


def plan_times(times, *, spec: ConvSpec = NCHW) -> CheckResult:
    """Check a learner's timings of every plan (hands-on ``time_every_plan``) against labkit's
    autotune of the same graph (the plans table the lesson draws; live, measured on this GPU).

    Args:
        times: plan index -> GPU microseconds per call, as the learner measured them.
        spec: the convolution timed (the lesson's fp16 NCHW base).

    Returns:
        A `CheckResult`: right when every plan is timed, the learner's median ratio to labkit's times
        is within `TIMES_AGREE`, and the learner's fastest plan is labkit's fastest or within 3% of it.
    """
    from .. import env

    m = env.mode()
    if not m.live:
        return emit(
            False, f"this check times plans on the GPU; labkit is in recorded mode ({m.reason}).", "skipped"
        )
    if not isinstance(times, dict) or not times:
        return emit(
            False, "my_times is empty: the hands-on cell fills it, one entry per plan.", "no answer yet"
        )
    bad = [k for k, v in times.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0]
    if bad:
        return emit(
            False, f"plans {sorted(bad)[:6]} have no time in microseconds: replace the ... with your timing."
        )
    ok = ok_rows(result("plans", spec=spec)).set_index("plan_index")
    missing = sorted(set(ok.index) - set(times))
    if missing:
        return emit(
            False, f"{len(missing)} plans not timed yet (e.g. plan {missing[0]}): time every runnable plan."
        )
    ratios = {i: times[i] / float(ok.loc[i, "gpu_us"]) for i in ok.index}
    med = statistics.median(ratios.values())
    mine = min(ok.index, key=lambda i: times[i])
    best = int(ok["gpu_us"].idxmin())
    close = float(ok.loc[mine, "gpu_us"]) <= 1.03 * float(ok.loc[best, "gpu_us"])
    far = max(ratios, key=lambda i: abs(math.log(ratios[i])))
    said = (
        f"your times are {med:.2f}x labkit's (median over {len(ok)} plans; the farthest, plan {far}, "
        f"{ratios[far]:.2f}x). Your fastest: plan {mine}; labkit's: plan {best} ({fmt_us(ok.loc[best, 'gpu_us'])})."
    )
    if not 1 / TIMES_AGREE <= med <= TIMES_AGREE:
        return emit(
            False,
            said + " Too far apart: warm up before timing, time many calls between two events, and take "
            "the median of several samples.",
        )
    if not close:
        return emit(False, said + " Your fastest is not labkit's (nor within 3% of it): time more repeats.")
    return emit(
        True,
        said + " labkit replays a CUDA graph of the calls instead of launching each from Python: its "
        "times leave out the launch gaps yours may include.",
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
    "plans": (plans_chart, 5, plans_summary),
    "caps": (caps_chart, 3, caps_summary),
    "build_cost": (build_cost_chart, 1, build_cost_summary),
}
EXERCISES = (cap_1mib_prediction, smallest_free_cap, autotune_payoff_reason)
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
