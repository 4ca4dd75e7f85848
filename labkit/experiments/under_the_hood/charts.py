"""The charts of lesson 10: GPU time per call stacked by kernel role (per plan; fused against
unfused), Gantt timelines of traced runs (each strategy's pass, the race's streams) and cuDNN's
build log as a table. Microseconds.
"""

from __future__ import annotations

import math
import re

import pandas as pd
import plotly.graph_objects as go

from ...draw.names import plan_labels
from ...draw.plots import COLORS, NOTE_CHARS, finish, grid, new_figure, ok_rows, wrap
from ...draw.units import us_text
from ...gpu.workspaces.workloads import ONE_CONV
from .race_trace import band_words, overlap_stretches, overlap_total, why_they_met
from .runs import RACE_CONVS, TRACED_CALLS, heuristic_plan

#: the kernel roles, in the order the stacked bars show them, and their colours
ROLES = (
    "layout conversion",
    "setup",
    "zeroing (memset)",
    "FFT transform",
    "Winograd transform",
    "main convolution",
    "split-K reduction",
    "epilogue",
    "copy",
    "other",
)
ROLE_COLORS = dict(
    zip(
        ROLES,
        (
            "#ff7f0e",
            "#8c564b",
            "#bcbd22",
            "#17becf",
            "#e377c2",
            "#1f77b4",
            "#9467bd",
            "#2ca02c",
            "#7f7f7f",
            "#c7c7c7",
        ),
    )
)
#: plans a kernels chart shows (the fastest by traced kernel time; the table has every plan)
CHART_PLANS = 14


def _plan_order(ok):
    per = ok.drop_duplicates("plan_name").sort_values("plan_kernel_us")
    return list(per.plan_name)


KERNELS_GRID = grid(
    rows=1,
    cols=2,
    shared_yaxes=True,
    column_widths=[0.68, 0.32],
    horizontal_spacing=0.05,  # the left panel's last tick and the right's first apart
    subplot_titles=("GPU time per call, by kernel role (traced)", "host time per call (untraced)"),
)


def kernels_chart(df) -> go.Figure:
    """Per plan (the `CHART_PLANS` fastest), its GPU time per call stacked by kernel role, and its host time.

    Each stack's end and each host bar write their time (us); a host bar also the number of kernels
    the call launches. Rows are labelled `plan_labels` (``eng62 #2``), the full name in the hover.

    Args:
        df: `kernels`' result.

    Returns:
        The ``go.Figure``. Traces: one per role (`ROLES`), then host time = len(ROLES) + 1.
    """
    fig = new_figure(**KERNELS_GRID)
    ok = ok_rows(df)
    order = _plan_order(ok)[:CHART_PLANS] if len(ok) else []
    sub = ok[ok.plan_name.isin(order)]
    for role in ROLES:
        r = sub[sub.role == role]
        per_plan = (r.kernel_us * r.launches_per_call).groupby(r.plan_name).sum() if len(r) else {}
        names = (
            r.groupby("plan_name").kernel.apply(lambda k: "<br>".join(k.str.slice(0, 60))) if len(r) else {}
        )
        fig.add_trace(
            go.Bar(
                y=order,
                x=[per_plan.get(p) if len(r) else None for p in order],
                orientation="h",
                name=role,
                marker_color=ROLE_COLORS[role],
                legendgroup=role,
                showlegend=bool(len(r)),  # a legend entry only for a role drawn
                customdata=[names.get(p, "") if len(r) else "" for p in order],
                hovertemplate=f"%{{y}}<br>{role}: %{{x:.1f}} us<br>%{{customdata}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    _times_written(fig, order, sub)
    fig.update_layout(barmode="stack")
    pick = heuristic_plan(df) if "plan_index" in df.columns else ""
    fig.update_yaxes(
        autorange="reversed",
        tickfont=dict(size=11),
        tickvals=order,
        ticktext=[
            f"<b>{lab}</b> (heuristic's pick)" if p == pick else lab
            for p, lab in zip(order, plan_labels(order))
        ],
        row=1,
        col=1,
    )
    label = df["spec_label"].iloc[0] if "spec_label" in df.columns and len(df) else ""
    more = max(0, ok.plan_name.nunique() - len(order)) if len(ok) else 0
    drawn = (
        f"{len(order)} fastest plans of {len(order) + more} (the table has all)"
        if more
        else f"{len(order)} fastest plans"
    )
    detail = f"{label}; {drawn}"
    notes = [
        f"each plan traced over {TRACED_CALLS} calls with CUPTI (cupti-python); host time measured "
        "untraced first",
        "a row: the plan's engine, and #n its rank among that engine's plans here (hover for the full name)",
    ]
    if pick and pick not in order:
        notes.append(f"the heuristic's pick, {pick}, is not among the fastest drawn")
    note = " · ".join(notes)
    return finish(
        fig,
        df,
        "Kernels per plan: what one cuDNN call launches",
        detail,
        note=note,
        height=300 + 26 * max(len(order), 4),
        legend_rows=2,
    )


def _times_written(fig, order: list, sub) -> None:
    """The kernels chart's times as numbers: each stack's GPU time per call at its end, and the host
    bars (host time per call, with the kernels a call launches), each axis with room for them.

    Args:
        fig: the kernels chart.
        order: the plans drawn, top first.
        sub: their rows of `kernels`' result.
    """
    per = sub.drop_duplicates("plan_name").set_index("plan_name") if len(sub) else None
    host = [float(per.loc[p, "host_us"]) if per is not None else None for p in order]
    text = [
        f"{us_text(per.loc[p, 'host_us'])} · {per.loc[p, 'kernels_per_call']:g} "
        f"kernel{'s' if per.loc[p, 'kernels_per_call'] != 1 else ''}"
        for p in order
    ]
    totals = (sub.kernel_us * sub.launches_per_call).groupby(sub.plan_name).sum() if len(sub) else {}
    for p in order:
        fig.add_annotation(
            x=float(totals[p]), y=p, text=us_text(totals[p]), showarrow=False, xanchor="left", row=1, col=1
        )
    fig.add_trace(
        go.Bar(
            y=order,
            x=host,
            orientation="h",
            name="host time to launch",
            marker_color=COLORS["muted"],
            text=text,
            textposition="outside",
            cliponaxis=False,
            showlegend=False,
            hovertemplate="%{y}: %{text} launched<extra></extra>",
        ),
        row=1,
        col=2,
    )
    top = max([float(totals[p]) for p in order] or [1.0])
    fig.update_xaxes(title_text="GPU time per call (us)", range=[0, 1.25 * top], row=1, col=1)
    fig.update_xaxes(title_text="host us per call", range=[0, 2.2 * max(host or [1.0])], row=1, col=2)


def fusion_kernels_chart(df) -> go.Figure:
    """Fused vs unfused: GPU time per call stacked by kernel role, with the kernel count.

    Args:
        df: `fusion_kernels`' result.

    Returns:
        The ``go.Figure``. Traces: one per role = len(ROLES).
    """
    fig = new_figure()
    paths = [p for p in ("fused", "unfused") if p in set(df.get("path", []))]
    for role in ROLES:
        r = df[df.role == role] if len(df) else df
        x = (
            [
                float((r[r.path == p].kernel_us * r[r.path == p].launches_per_call).sum())
                if len(r[r.path == p])
                else None
                for p in paths
            ]
            if len(r)
            else [None] * len(paths)
        )
        names = ["<br>".join(r[r.path == p].kernel.str.slice(0, 60)) if len(r) else "" for p in paths]
        fig.add_trace(
            go.Bar(
                y=paths,
                x=x,
                orientation="h",
                name=role,
                marker_color=ROLE_COLORS[role],
                showlegend=any(v for v in x),  # a legend entry only for a role drawn
                customdata=names,
                hovertemplate=f"%{{y}} {role}: %{{x:.1f}} us<br>%{{customdata}}<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="GPU time per call (us, traced)")
    per = df.drop_duplicates("path").set_index("path") if len(df) else None
    ticks = [f"{p} ({per.loc[p, 'kernels_per_call']:g} kernels)" for p in paths] if per is not None else paths
    fig.update_yaxes(tickvals=paths, ticktext=ticks)
    label = df["spec_label"].iloc[0] if len(df) else ""
    epi = df["epilogue"].iloc[0] if len(df) else ""
    return finish(
        fig,
        df,
        f"Fusion under the hood: conv + {epi}",
        f"{label}; fused = one cuDNN graph, unfused = cuDNN conv + CuPy elementwise kernels",
        note=f"traced over {TRACED_CALLS} calls with CUPTI",
        height=380,
    )


#: a timeline's event classes as (class, legend name, colour): one trace each, in this order
TIMELINE_KINDS = (
    ("kernel", "kernels", COLORS["primary"]),
    ("memset", "memsets", "#bcbd22"),
    ("alloc", "allocate / free (host)", COLORS["bad"]),
    ("launch", "launch calls (host)", COLORS["muted"]),
    ("sync", "synchronise (host)", COLORS["purple"]),
)


def _timeline_class(kind: str, name: str) -> str:
    if kind in ("kernel", "memset", "memcpy"):
        return "kernel" if kind == "kernel" else "memset"
    low = str(name).lower()
    if "alloc" in low or "free" in low:
        return "alloc"
    if "sync" in low:
        return "sync"
    return "launch"


def _gantt(fig, events, lane, label_of, order=None):
    """Add the 5 `TIMELINE_KINDS` traces (always, possibly empty; a legend entry only for those
    that draw something) of ``events`` to ``fig``, the waits for a stream (CUPTI's
    synchronisation records, on that stream's lane) drawn first and pale, so that they never hide
    the kernels they wait for; the legend keeps `TIMELINE_KINDS`' order. ``order(lanes)``: the
    lanes top to bottom (default: the order of their first event, kernels' lanes first)."""
    rows = list(events.itertuples()) if len(events) else []
    classes = [_timeline_class(r.kind, r.name) for r in rows]
    lanes = [lane(r) for r in rows]
    starts = list(events.start_us) if rows else []
    widths = list(events.dur_us.clip(lower=0.3)) if rows else []
    of = {cls: [i for i, c in enumerate(classes) if c == cls] for cls, _, _ in TIMELINE_KINDS}
    first = list(dict.fromkeys(lanes[i] for cls, _, _ in TIMELINE_KINDS for i in of[cls]))
    fig.update_yaxes(categoryorder="array", categoryarray=order(first) if order else first)
    for rank in sorted(range(len(TIMELINE_KINDS)), key=lambda k: TIMELINE_KINDS[k][0] != "sync"):
        cls, name, color = TIMELINE_KINDS[rank]
        idx = of[cls]
        fig.add_trace(
            go.Bar(
                base=[starts[i] for i in idx],
                x=[widths[i] for i in idx],
                y=[lanes[i] for i in idx],
                orientation="h",
                name=name,
                marker_color=color,
                marker_line_width=0,
                legendrank=1000 + rank,
                showlegend=bool(idx),
                opacity=0.45 if cls == "sync" else None,
                customdata=[label_of(rows[i]) for i in idx],
                hovertemplate="%{customdata}<br>%{base:.1f} us + %{x:.1f} us<extra></extra>",
            )
        )


def strategy_timeline_chart(df) -> go.Figure:
    """Each strategy's traced pass as a Gantt chart: a GPU lane and a host lane.

    The GPU lane holds kernels and memsets, the host lane allocation, launch and sync calls; the GPU's
    idle share is in its lane's name.

    Args:
        df: `strategy_timeline`'s result.

    Returns:
        The ``go.Figure``. Traces: 5 (`TIMELINE_KINDS`).
    """
    fig = new_figure()
    ev = df[df.kind != "none"] if "kind" in df.columns else df
    col = "idle_share_api" if "idle_share_api" in df.columns else "idle_share"
    idle = df.drop_duplicates("strategy").set_index("strategy")[col] if len(df) else {}

    def lane(r):
        share = idle.get(r.strategy) if len(df) else None
        who = "GPU" if r.kind in ("kernel", "memset", "memcpy") else "host"
        tag = f" (idle {share:.0%})" if who == "GPU" and share is not None and share == share else ""
        return f"{r.strategy} · {who}{tag}"

    strategies = list(dict.fromkeys(df["strategy"])) if len(df) else []

    def order(lanes):  # each strategy's GPU lane, then its host lane, in the strategies' order
        rank = {s: i for i, s in enumerate(strategies)}
        return sorted(lanes, key=lambda x: (rank.get(x.split(" · ")[0], len(rank)), "· host" in x))

    _gantt(fig, ev, lane, lambda r: f"{r.strategy}: {r.name}", order)
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=10), type="category")
    fig.update_xaxes(title_text="microseconds from the strategy's first traced call")
    calls = int(df["calls"].iloc[0]) if "calls" in df.columns and len(df) else None
    wl = df["workload"].iloc[0] if len(df) else ""
    if wl == "one_conv":
        wl = f"one convolution ({ONE_CONV.label})"
    detail = (
        f"{wl}, {calls or 8} calls per strategy in steady state, traced with CUPTI; each strategy's GPU lane "
        "above its host lane; idle = the GPU waiting for the host"
    )
    lanes = 2 * (df["strategy"].nunique() if len(df) else 8)
    return finish(
        fig,
        df,
        "The GPU timeline of each workspace strategy",
        detail,
        note="a traced run: CUPTI adds host time to every API call, so gaps are wider than untraced (the "
        "summary gives the idle share traced without API calls); the strategies chart's timings are untraced",
        height=220 + 26 * lanes,
        legend_rows=1,
    )


def race_timeline_chart(df) -> go.Figure:
    """The race's traced round: one lane per stream and one for the host.

    Args:
        df: `race_timeline`'s result.

    Returns:
        The ``go.Figure``. Traces: 5.
    """
    fig = new_figure()
    _gantt(
        fig,
        df,
        lambda r: r.row,
        lambda r: f"{r.row}: {r.name}",
        lambda lanes: sorted(lanes, key=lambda x: (x == "host", x)),
    )
    fig.update_layout(barmode="overlay", bargap=0.3, shapes=_overlap_bands(df))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title_text="microseconds from the round's first traced record")
    if len(df):
        r0 = df.iloc[0]
        detail = (
            f"{r0.spec_label}, {int(r0.streams)} streams x {RACE_CONVS} convolutions sharing one workspace, "
            f"{r0.launch} launch; "
            f"overlap of stream 1 and 2: {us_text(overlap_total(df))} of {us_text(r0.busy_us)} busy"
        )
    else:
        detail = ""
    note = _race_note(df)
    return finish(
        fig,
        df,
        "The race, traced: do the streams' kernels overlap?",
        detail,
        note=note,
        height=405 + 15 * (wrap(note, NOTE_CHARS).count("<br>") + 1),
    )


def _race_note(df) -> str:
    """The note under the race's timeline: what the shaded stretches add up to (the overlap the
    detail line states) and why the streams met as much as they did."""
    band = band_words(df)
    if not band:
        return "the two streams' kernels never ran at the same time in this round"
    why = why_they_met(df)
    shaded = f"shaded: {band}: two convolutions writing the one workspace"
    return f"{shaded}. Why: {why}" if why else shaded


def _overlap_bands(df) -> list:
    """Shaded bands behind the race's timeline, one per stretch in which stream 1's and stream 2's
    kernels ran at the same time (`race_trace.overlap_stretches`: their total is the overlap the
    detail line states), the first one named in the legend. A band spans those two streams' lanes
    (the first two categories, `race_timeline_chart`'s order), not the host's."""
    return [
        dict(
            type="rect",
            xref="x",
            yref="y",
            x0=s,
            x1=e,
            y0=-0.5,
            y1=1.5,
            layer="below",
            line_width=0,
            fillcolor=COLORS["bad"],
            opacity=0.18,
            name="both streams' kernels at once",
            showlegend=i == 0,
        )
        for i, (s, e) in enumerate(overlap_stretches(df))
    ]


#: a build-log line about the engines proposed, a warning or an error (frontend WARN/ERROR,
#: backend W!/E!) when no engine is named in it
LOG_KEPT = r"Heuristic query|WARN|ERROR|W!|E!|Warning:|Error:"
#: backend lines that only say when and where the message above was logged
LOG_CONTEXT = r"^\s*[wWeEiI]!\s+(?:Time:|Process=)"


def log_kinds(df):
    """The build log's lines about engines, warnings and errors, each kind of line once.

    Digits and engine names stand for any, so "plan at position 0" and "position 7" are one kind,
    shown by the first of them, with its engine's name.

    Args:
        df: `build_log`'s result.

    Returns:
        A DataFrame: ``source``, ``line`` (the first one's number), ``times`` (how many lines of the
        kind) and ``text`` (the first line, as cuDNN wrote it).
    """
    if not len(df):
        return pd.DataFrame(columns=["source", "line", "times", "text"])
    engine = df.engine.fillna("").astype(str)
    text = df.text.fillna("").astype(str)
    keep = df[((engine != "") | text.str.contains(LOG_KEPT)) & ~text.str.contains(LOG_CONTEXT)]
    rows: dict = {}
    for r in keep.itertuples():
        body = str(r.text).replace("[cudnn_frontend] ", "").strip()
        kind = re.sub(r"\d+", "N", re.sub(r"eng\d+(?:_k\d+=\d+)*", "ENGINE", body))
        key = (r.source, kind)
        if key not in rows:
            rows[key] = dict(source=r.source, line=int(r.line), times=0, text=body)
        rows[key]["times"] += 1
    return pd.DataFrame(list(rows.values()), columns=["source", "line", "times", "text"])


def build_log_chart(df) -> go.Figure:
    """cuDNN's log of the build, trimmed to the lines about engines, warnings and errors, as a table.

    Each kind of line is shown once, with how many times it appears (`log_kinds`).

    Args:
        df: `build_log`'s result.

    Returns:
        The ``go.Figure``. Traces: 1.
    """
    fig = new_figure()
    keep = log_kinds(df)
    texts = [t[:320] for t in keep.text]
    fig.add_trace(
        go.Table(
            columnwidth=[60, 40, 40, 560],
            header=dict(
                values=[
                    "source",
                    "first line",
                    "times",
                    "the first line (others of its kind differ in numbers and engines)",
                ],
                align="left",
                fill_color="#e8eaed",
            ),
            cells=dict(
                values=[list(keep.source), list(keep.line), list(keep.times), texts],
                align="left",
                font=dict(size=10),
                height=20,
            ),
        )
    )
    label = df["spec_label"].iloc[0] if len(df) else ""
    detail = (
        (
            f"{label}: {int(df['built'].iloc[0])} of {int(df['plans'].iloc[0])} plans built in "
            f"{df['build_seconds'].iloc[0]:.1f} s; {int(keep.times.sum())} of {len(df)} log lines are about "
            f"engines, warnings or errors, {len(keep)} kinds of them shown once each"
        )
        if len(df)
        else ""
    )
    return finish(
        fig,
        df,
        "cuDNN's own words: the build log",
        detail,
        note="CUDNN_FRONTEND_LOG_INFO=1 and CUDNN_LOGLEVEL_DBG=2 in a fresh process",
        height=230 + _table_height(texts),
        legend_rows=0,
    )


def _table_height(texts, chars_per_line: int = 110) -> int:
    """Pixels the build-log table takes: its header, and per row 20 px plus 16 for each line its text
    wraps to (10 px font in the text column's width)."""
    rows = [20 + 16 * (max(1, math.ceil(len(t) / chars_per_line)) - 1) for t in texts]
    return 45 + sum(rows) + 20 * max(0, 4 - len(rows))
