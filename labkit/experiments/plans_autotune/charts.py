"""Lesson 05's charts: every plan (time and workspace), what a workspace cap costs (with the timing
noise), and what each build stage costs."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ...draw.plots import (
    COLORS,
    finish,
    first_value,
    fmt_bytes,
    fmt_seconds,
    grid,
    isnan,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.units import PLAIN_TICKS, SIZE_AXIS, as_written, in_unit, log_axis, nice_step
from ...gpu.checks.plan_checks import is_wrong
from .noise import caps_noise
from .runs import BUILD_STAGES

#: the plans chart: GPU time of every plan (top), the workspace each needs (bottom), plans side by side
PLANS_GRID = grid(rows=2, cols=1, shared_xaxes=True, row_heights=[0.66, 0.34], vertical_spacing=0.07)


def plans_chart(df) -> go.Figure:
    """Every plan, fastest to slowest: its GPU time (top) and the workspace it needs (bottom).

    GPU time is on a log axis, with the 10th-90th percentile of each plan's timed replays. The
    heuristic pick, the best and the worst are highlighted. One position per plan, so every plan timed
    is one visible point.

    Args:
        df: `plans`' result.

    Returns:
        The ``go.Figure``. Traces: 0 all plans, 1 heuristic pick, 2 best, 3 worst, 4 workspace bars.
    """
    ok = ok_rows(df).sort_values(["gpu_us", "plan_index"], kind="stable")
    rank = {int(i): k for k, i in enumerate(ok["plan_index"], 1)}
    fig = new_figure(**PLANS_GRID)
    _plan_points(fig, ok, rank)
    top = _workspace_bars(fig, ok, rank)
    _plans_axes(fig, ok, top)
    return finish(
        fig,
        df,
        "Every plan cuDNN offers: GPU time and workspace",
        _plans_detail(df, len(ok)),
        note=_plans_note(df, len(ok)),
        height=560,
        legend_rows=2,
    )


#: sizes on the plans chart's axis are in MiB (`SIZE_AXIS`), whatever the spec
_MIB = float(2**20)
#: a plan's point, hovered: its index, name, time and workspace
_PLAN_HOVER = (
    "plan %{customdata[0]} %{text}<br>%{y:.1f} us%{customdata[2]}, workspace %{customdata[1]}"
    "<extra>%{fullData.name}</extra>"
)


def _spread_texts(rows) -> list:
    """Each row's 10th-90th percentile of its timed replays for a hover, and how many there were,
    ``" (p10-p90 20.1-20.9 us, 6 timed replays)"``; empty where not recorded."""
    if not {"gpu_us_p10", "gpu_us_p90"} <= set(rows.columns):
        return [""] * len(rows)
    counts = rows["samples"] if "samples" in rows.columns else [None] * len(rows)
    out = []
    for lo, hi, n in zip(rows["gpu_us_p10"], rows["gpu_us_p90"], counts):
        if num(lo) is None or num(hi) is None:
            out.append("")
            continue
        replays = "" if num(n) is None else f", {int(num(n))} timed replay{'' if int(num(n)) == 1 else 's'}"
        out.append(f" (p10-p90 {num(lo):,.1f}-{num(hi):,.1f} us{replays})")
    return out


def _highlights() -> tuple:
    """The plans drawn over every plan's point: (column, legend name, symbol, colour, size, outline).
    The fastest plan is an open diamond drawn around its point, so a heuristic pick that is the same
    plan still shows its star inside."""
    return (
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
    )


def _whiskers(ok) -> dict:
    """Each plan's 10th-90th percentile of its timings as error bars (none when not recorded)."""
    if not {"gpu_us_p10", "gpu_us_p90"} <= set(ok.columns):
        return {}
    return dict(
        error_y=dict(
            type="data",
            array=[max(0.0, (num(h) or 0) - (num(m) or 0)) for h, m in zip(ok["gpu_us_p90"], ok["gpu_us"])],
            arrayminus=[
                max(0.0, (num(m) or 0) - (num(lo) or 0)) for lo, m in zip(ok["gpu_us_p10"], ok["gpu_us"])
            ],
            color=COLORS["dark"],
            thickness=1,
            width=2,
        )
    )


def _plan_points(fig: go.Figure, ok, rank: dict) -> None:
    """The top panel: every plan's GPU time at its rank, then the heuristic pick, the fastest and the
    slowest over it (traces 0-3)."""

    def pts(mask):
        sub = ok[mask] if mask is not None else ok
        return dict(
            x=[rank[int(i)] for i in sub["plan_index"]],
            y=[num(v) for v in sub["gpu_us"]],
            text=[str(p) for p in sub["plan_name"]],
            customdata=[
                [int(i), fmt_bytes(w), spread]
                for i, w, spread in zip(sub["plan_index"], sub["workspace_bytes"], _spread_texts(sub))
            ],
        )

    fig.add_trace(
        go.Scatter(
            mode="markers",
            name="every plan (whisker: p10-p90, if wider than the dot)",
            marker=dict(size=7, color=COLORS["muted"]),
            hovertemplate=_PLAN_HOVER,
            **_whiskers(ok),
            **pts(None),
        ),
        row=1,
        col=1,
    )
    for col, name, sym, color, size, line in _highlights():
        mask = ok[col].astype(bool) if col in ok.columns else ok["plan_index"] < 0
        fig.add_trace(
            go.Scatter(
                mode="markers",
                name=name,
                marker=dict(size=size, color=color, symbol=sym, line=line),
                hovertemplate=_PLAN_HOVER,
                **pts(mask),
            ),
            row=1,
            col=1,
        )


def _workspace_bars(fig: go.Figure, ok, rank: dict) -> float:
    """The bottom panel: the workspace each plan needs, at its rank (trace 4).

    Returns:
        The largest workspace, in bytes.
    """
    ws = [float(w) for w in ok["workspace_bytes"]]
    top = max(ws, default=0.0)
    # the largest, zero, and sizes too small to see beside the largest are written out ("0 MiB", "0.0022 MiB")
    labels = [in_unit(w, SIZE_AXIS) if w == top or w < 0.03 * top else "" for w in ws]
    fig.add_trace(
        go.Bar(
            x=[rank[int(i)] for i in ok["plan_index"]],
            y=[w / _MIB for w in ws],
            name="workspace the plan needs",
            marker_color=COLORS["primary"],
            text=labels,
            # the largest inside its bar (it fills most of the panel), the others above theirs
            textposition=["inside" if w == top and top > 0 else "outside" for w in ws],
            insidetextanchor="end",
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
    return top


def _plans_axes(fig: go.Figure, ok, top: float) -> None:
    """Ranks ticked every 5 on both panels, the time's log axis with room under the fastest plan's
    diamond, and the workspace's linear axis from zero to above the largest (``top``, bytes)."""
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
        title_text=f"workspace ({SIZE_AXIS})",
        **PLAIN_TICKS,
        rangemode="tozero",
        range=[0, (top / _MIB or 1) * 1.45],
        row=2,
        col=1,
    )


def _plans_detail(df, n_ok: int) -> str:
    """The plans chart's detail line: the convolution and how many plans were timed."""
    spec = request_spec(df)
    if not spec:
        return ""
    return (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}: {n_ok} plans timed, one point each"
    )


def _plans_note(df, n_ok: int) -> str:
    """The plans chart's note: the plans that computed wrong results, and those that could not be timed."""
    n_all = len(df)
    n_wrong = int(df["status"].map(is_wrong).sum()) if "status" in df.columns else 0
    notes = (
        [f"{n_wrong} of {n_all} plans computed wrong results (checked vs float64): not timed"]
        if n_wrong
        else []
    )
    if n_all - n_ok - n_wrong:
        notes.append(f"{n_all - n_ok - n_wrong} of {n_all} plans could not be timed")
    return "; ".join(notes)


def cap_label(cap_bytes) -> str:
    """A workspace cap as a label.

    Args:
        cap_bytes: the cap in bytes; -1 for none.

    Returns:
        "unlimited", or the size as `fmt_bytes` writes it.
    """
    c = int(cap_bytes)
    return "unlimited" if c < 0 else fmt_bytes(c)


#: the caps chart: the best time under each cap (top), its ratio to the unlimited best (bottom)
CAPS_GRID = grid(rows=2, cols=1, shared_xaxes=True, row_heights=[0.5, 0.5], vertical_spacing=0.1)


def caps_chart(df) -> go.Figure:
    """Best plan under each workspace cap (top) and its slowdown against no cap (bottom).

    The band within which separate timings of one plan differ (`caps_noise`) is drawn: a ratio
    inside it is labelled so, never read as a gain or a loss.

    Args:
        df: `caps`' result.

    Returns:
        The ``go.Figure``. Traces: 0 best GPU time (us, bars), 1 slowdown (x, dots), 2 noise band.
    """
    labels = [cap_label(c) for c in df["cap_bytes"]]
    ok = list((df["status"] == "ok") if "status" in df.columns else [True] * len(df))
    t = [num(v) if k else None for v, k in zip(df["gpu_us"] if "gpu_us" in df else [None] * len(df), ok)]
    sd = [
        num(v) if k else None
        for v, k in zip(
            df["slowdown_vs_unlimited"] if "slowdown_vs_unlimited" in df else [None] * len(df), ok
        )
    ]
    noise = caps_noise(df)
    fig = new_figure(**CAPS_GRID)
    _best_time_bars(fig, df, labels, t)
    _slowdown_points(fig, labels, sd, noise)
    _noise_band(fig, labels, noise)
    _caps_axes(fig, t, sd, noise)
    spec = request_spec(df)
    detail = (
        f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; "
        "every plan within the cap autotuned"
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


def _best_time_bars(fig: go.Figure, df, labels: list, t: list) -> None:
    """The top panel: the best plan's GPU time under each cap (``t``, us; None: not timed), labelled
    with how many plans the cap leaves (trace 0)."""
    n = list(df["plans_within_cap"]) if "plans_within_cap" in df else [None] * len(df)
    fig.add_trace(
        go.Bar(
            x=labels,
            y=t,
            name="best GPU time under the cap",
            marker_color=COLORS["primary"],
            text=[
                f"{in_unit(v, 'us')}<br>{int(k)} plans"
                if v is not None and k is not None and not isnan(k)
                else ""
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


def _slowdown_points(fig: go.Figure, labels: list, sd: list, noise) -> None:
    """The bottom panel: each cap's slowdown against no cap (``sd``, x), labelled "within noise"
    where the noise band holds it (trace 1)."""

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


def _noise_band(fig: go.Figure, labels: list, noise) -> None:
    """The band within which separate timings of the unlimited best plan differ, behind the
    slowdowns (trace 2; empty and out of the legend when not measured)."""
    band = (
        dict(
            x=labels + labels[::-1],
            y=[noise.hi] * len(labels) + [noise.lo] * len(labels),
            name=(
                f"noise: the unlimited best plan autotuned {noise.timings} times, with its timed replays' "
                f"p10-p90 ({noise.lo:.3f}-{noise.hi:.3f}x)"
            ),
        )
        if noise is not None and labels
        else dict(x=[], y=[], name="noise (not measured)", showlegend=False)
    )
    fig.add_trace(
        go.Scatter(
            mode="lines",
            fill="toself",
            fillcolor="rgba(60,64,67,0.25)",
            line=dict(width=1, color="rgba(60,64,67,0.55)"),  # its edges: a band 1 % of the axis still shows
            hoverinfo="skip",
            **band,
        ),
        row=2,
        col=1,
    )


def _caps_axes(fig: go.Figure, t: list, sd: list, noise) -> None:
    """Caps as categories on both panels; the time's linear axis from zero, and the slowdown's from
    zero to above the largest slowdown and the noise band, ticked in round steps."""
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


#: the first build is said to pay a one-time set-up only when it took at least this many times the
#: identical rebuild: each stage is one wall-clock timing, and timings of a ~10 ms build move by a few
#: per cent (fp32 NCHW on the H200: building every plan read 0.99x the one rebuild, first build 1.03x)
SETUP_MARGIN = 1.25


def _ms(us) -> str:
    """A build stage's wall time as the build-cost chart writes it: ``258.4 ms``."""
    return in_unit(us, "ms")


def _setup_note(df) -> str:
    """The build-cost chart's clause on the first build's one-time set-up, where building every plan
    took less than that first build of one plan (the chart alone would say one plan costs more to
    build than all of them); empty elsewhere."""
    seconds = dict(zip(df["stage"], df["seconds"]))
    first, rebuild, build_all = (num(seconds.get(BUILD_STAGES[i])) for i in (0, 1, 3))
    if None in (first, rebuild, build_all) or first < SETUP_MARGIN * rebuild or build_all >= first:
        return ""
    setup = as_written(first * 1e6, _ms) - as_written(rebuild * 1e6, _ms)  # as the chart writes them
    return (
        f"the first build pays {_ms(setup)} of one-time set-up that the "
        "identical rebuild right after it does not, so building every plan took less than it"
    )


def build_cost_chart(df) -> go.Figure:
    """Wall time of each build stage, each labelled in ms.

    Dots on a log axis in milliseconds: the stages span a cache hit's microseconds to a full
    autotune's seconds.

    Args:
        df: `build_cost`'s result.

    Returns:
        The ``go.Figure``. Traces: 0 stages.
    """
    s = [num(v) * 1e3 if num(v) is not None else None for v in df["seconds"]]  # ms
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
            text=[_ms(v * 1e3) if v is not None else "not measured" for v in s],
            textposition="middle right",
            cliponaxis=False,
            name="wall time",
            customdata=[fmt_seconds(v / 1e3) if v is not None else "" for v in s],
            hovertemplate="%{y}: %{text} (%{customdata})<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    axis = log_axis(s)
    if axis.get("range"):
        axis["range"] = [axis["range"][0], axis["range"][1] + 0.5]  # room for the largest dot's label
    fig.update_xaxes(title_text="wall time (ms, log)", type="log", **axis)
    spec = request_spec(df)
    pay = first_value(df, "calls_to_pay_off_autotune")
    if pay is None:
        pay_txt = ""
    elif math.isinf(pay):
        pay_txt = (
            f"autotuning found nothing faster than the heuristic pick "
            f"({first_value(df, 'heuristic_gpu_us'):.1f} us per call), so it never pays for itself here"
        )
    else:
        pay_txt = (
            f"autotuning pays for itself after {pay:,.0f} calls (heuristic "
            f"{first_value(df, 'heuristic_gpu_us'):.1f} us vs best {first_value(df, 'best_gpu_us'):.1f} us "
            "per call)"
        )
    shape = f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}" if spec else ""
    detail = (
        f"{shape}; green: saving the autotuned plan and loading it in a later session" if any(disk) else shape
    )
    note = "; ".join(t for t in (pay_txt, _setup_note(df)) if t)
    return finish(fig, df, "What building a cuDNN graph costs", detail, note=note, height=420, legend_rows=0)
