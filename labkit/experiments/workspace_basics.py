"""Lesson 01, what is a workspace: the classic algorithms and their workspaces, the workspace of every
plan per dtype x layout x direction, and how workspace grows with the shape.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from ..draw.plots import (
    COLORS,
    LAYOUT_COLORS,
    finish,
    fmt_bytes,
    fmt_us,
    grid,
    log_axis,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
    size_unit,
)
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from ..gpu.legacy import DTYPE_PLAN
from ..signals.progress import report
from ..spec import DTYPES, LAYOUTS, ConvSpec
from .checking import CheckResult, emit, say
from .core import BASE, MIB, as_spec, experiment, heuristic_row, result, status_row, to_frame
from .exercise import Exercise, equal, number, one_of
from .panel_config import SHAPE, PanelConfig, spec_of, spec_panel, state_of

#: the dtypes the classic API convolves (it has no fp8 convolution)
LEGACY_DTYPES = tuple(DTYPE_PLAN)


# ---- experiments ------------------------------------------------------------------------------
@experiment
def algorithms(spec: ConvSpec = BASE.replace(layout="NCHW"), workspace_limit_bytes: int = 1 << 30):
    """The classic algorithm table (IMPLICIT_GEMM ... WINOGRAD_NONFUSED): status, workspace and
    time as cuDNN's legacy ``cudnnFindConvolutionForwardAlgorithmEx`` reports them."""
    from ..gpu import legacy

    df = legacy.algorithm_table(as_spec(spec), workspace_limit_bytes=workspace_limit_bytes)
    df.insert(0, "dtype", spec.dtype)
    df.insert(1, "layout", spec.layout)
    return df


SWEEP_FIELDS = ("N", "C=K", "H=W", "R=S")


@experiment
def sweep(field: str = "N", values: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), base: ConvSpec = BASE):
    """GPU time, workspace and TFLOP/s of the heuristic plan as one dimension varies (``C=K``
    moves both channel counts, ``H=W`` both spatial sizes, ``R=S`` the filter with 'same' padding)."""

    base = as_spec(base, "base")
    if field not in SWEEP_FIELDS:
        raise InvalidSpec("field", field, f"must be one of {', '.join(SWEEP_FIELDS)}")
    rows = []
    for v in values:
        change = {
            "N": dict(N=v),
            "C=K": dict(C=v, K=v),
            "H=W": dict(H=v, W=v),
            "R=S": dict(R=v, S=v, padding=(v - 1) // 2 * base.dilation[0]),
        }[field]
        s = base.replace(**change)
        rows.append(
            dict(
                field=field,
                value=v,
                dtype=s.dtype,
                layout=s.layout,
                direction=s.direction,
                flops=s.flops,
                **heuristic_row(s),
            )
        )
        report(lambda: to_frame(rows), len(rows), len(values), f"{field} values")
    return to_frame(rows)


@experiment
def workspace_sizes(spec: ConvSpec = BASE):
    """Workspace of every candidate plan for each dtype x layout x direction of ``spec``'s shape:
    how workspace depends on dtype, layout and direction (min / heuristic pick / max per variant).
    ``plans_cut``: runtime-compiled plans still compiling when the change's compile budget was
    spent (`labkit.gpu.builds.compile_budget_s`; fill and record wait for every plan)."""
    import itertools

    from ..gpu import builds, engine
    from ..signals.cancel import Budget

    spec, rows = as_spec(spec), []
    variants = list(itertools.product(DTYPES, LAYOUTS, ("fprop", "dgrad", "wgrad")))
    specs = {}
    for d, lay, direction in variants:
        try:
            specs[d, lay, direction] = spec.replace(dtype=d, layout=lay, direction=direction)
        except LabkitError:
            pass  # an impossible variant: its row says why below
    engine.build_ahead(
        [(s, "none", None) for s in specs.values()]
    )  # every variant's compiles at once, in the workers
    seconds = builds.compile_budget_s()
    compiles = None if seconds is None else Budget(seconds, "compiling the variants' plans")
    for d, lay, direction in variants:
        row = dict(dtype=d, layout=lay, direction=direction)
        try:
            s = specs.get((d, lay, direction)) or spec.replace(dtype=d, layout=lay, direction=direction)
            cg = engine.get_graph(s, compile_budget_s=None if compiles is None else compiles.left)
            ws = [p.workspace_bytes for p in cg.runnable]
            row.update(
                plans=len(ws),
                heuristic_workspace_bytes=cg.default_plan.workspace_bytes,
                min_workspace_bytes=min(ws),
                max_workspace_bytes=max(ws),
                plans_cut=int(cg.build_cut),
                status="ok",
                reason="",
            )
        except LabkitError as exc:
            row.update(status_row(exc))
        rows.append(row)
        report(lambda: to_frame(rows), len(rows), len(variants), "variants (each builds every plan)")
    return to_frame(rows)


# ---- charts --------------------------------------------------------------------------------


ALGORITHMS_GRID = grid(
    rows=1,
    cols=2,
    shared_yaxes=True,
    horizontal_spacing=0.04,
    subplot_titles=("GPU time (us), as cuDNN's Find reports it", "workspace it asks for (MiB)"),
)


def algorithms_chart(df) -> go.Figure:
    """The classic algorithm table: GPU time and workspace per algorithm; unsupported ones say so.

    Traces: 0 time bars (us), 1 workspace bars (MiB), 2 'not supported' labels.
    """
    df = df.sort_values("algo_id") if "algo_id" in df.columns else df
    names = list(df["algorithm"])
    timed = df["find_status"] == "ok" if "find_status" in df.columns else df["time_us"].notna()
    sized = (
        df["query_status"] == "ok" if "query_status" in df.columns else df["query_workspace_bytes"].notna()
    )
    fastest = None
    if timed.any():
        fastest = df.loc[df.loc[timed, "time_us"].astype(float).idxmin(), "algorithm"]
    fig = new_figure(**ALGORITHMS_GRID)
    t = [num(v) if ok else None for v, ok in zip(df["time_us"], timed)]
    ws = [
        (num(v) / MIB if num(v) is not None else None) if ok else None
        for v, ok in zip(df["query_workspace_bytes"], sized)
    ]
    math_col = df["math"] if "math" in df.columns else [""] * len(df)
    fig.add_trace(
        go.Bar(
            y=names,
            x=t,
            orientation="h",
            name="GPU time",
            marker_color=[COLORS["good"] if n == fastest else COLORS["primary"] for n in names],
            text=[
                (f"{fmt_us(v)}" + (" · fastest" if n == fastest else "")) if v is not None else ""
                for v, n in zip(t, names)
            ],
            textposition="auto",
            customdata=[str(m) if isinstance(m, str) else "" for m in math_col],
            hovertemplate="%{y}: %{x:.1f} us (%{customdata} math)<extra></extra>",
        ),
        row=1,
        col=1,
    )
    wsb = list(df["query_workspace_bytes"])
    fig.add_trace(
        go.Bar(
            y=names,
            x=[v if v is not None else 0 for v in ws],
            orientation="h",
            name="workspace",
            marker_color=COLORS["secondary"],
            text=[fmt_bytes(b) if ok else "not supported" for b, ok in zip(wsb, sized)],
            textposition="outside",
            constraintext="none",
            cliponaxis=False,
            textfont=dict(color=[COLORS["dark"] if ok else COLORS["bad"] for ok in sized]),
            hovertemplate="%{y}: %{text}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    unsup = [
        (n, s) for n, s, ok in zip(names, df.get("find_status", df.get("query_status")), timed) if not ok
    ]
    fig.add_trace(
        go.Scatter(
            y=[n for n, _ in unsup],
            x=[0] * len(unsup),
            mode="text",
            name="not supported",
            text=[f"  not supported ({s})" for _, s in unsup],
            textposition="middle right",
            textfont=dict(color=COLORS["bad"]),
            hoverinfo="skip",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="GPU time of one call, Find's timing (us)", row=1, col=1)
    top = max([v for v in ws if v is not None] + [1.0])
    fig.update_xaxes(title_text="workspace (MiB)", range=[0, 1.4 * top], row=1, col=2)
    spec = request_spec(df)
    detail = (
        (
            f"{spec.dtype} {spec.layout} {shape_label(spec)}; legacy API, times from one run each inside Find "
            "(not the CUDA-graph medians of the other charts)"
        )
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        "The classic algorithm table: time and workspace per algorithm",
        detail,
        height=430,
        legend_rows=0,
    )


DIRECTIONS = ("fprop", "dgrad", "wgrad")
WORKSPACE_SIZES_GRID = grid(
    rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.045, subplot_titles=DIRECTIONS
)


def workspace_sizes_chart(df) -> go.Figure:
    """Per direction, one row per dtype and layout: a bar for the workspace of the plan cuDNN's
    heuristic picks (labelled: "0 B" is drawn, a variant that did not run says so), over a pale bar
    for the largest any candidate plan asks. Linear axes from zero, the same for the three
    directions. Traces: per direction (fprop, dgrad, wgrad) the largest candidate, then the
    heuristic pick in NCHW, then in NHWC (9 in all)."""
    dtypes = list(dict.fromkeys(df["dtype"]))
    rows = [f"{d} {lay}" for d in dtypes for lay in ("NCHW", "NHWC")]
    fig = new_figure(**WORKSPACE_SIZES_GRID)
    top = 0.0
    for c, direction in enumerate(DIRECTIONS, start=1):
        sub = df[df["direction"] == direction].set_index(["dtype", "layout"])
        picks, biggest, text = [], [], []
        for d in dtypes:
            for lay in ("NCHW", "NHWC"):
                r = sub.loc[(d, lay)] if (d, lay) in sub.index else None
                ok = r is not None and ("status" not in sub.columns or r["status"] == "ok")
                h = num(r["heuristic_workspace_bytes"]) if ok else None
                m = num(r["max_workspace_bytes"]) if ok else None
                picks.append(h / MIB if h is not None else 0.0)
                biggest.append(m / MIB if m is not None else 0.0)
                text.append(fmt_bytes(h) if h is not None else ("not run" if r is None else str(r["status"])))
                top = max(top, (m or 0.0) / MIB, (h or 0.0) / MIB)
        fig.add_trace(
            go.Bar(
                y=rows,
                x=biggest,
                orientation="h",
                name="largest any candidate plan asks",
                legendgroup="max",
                showlegend=c == 1,
                marker_color="#dadce0",
                width=0.8,
                customdata=[fmt_bytes(v * MIB) for v in biggest],
                hovertemplate=f"{direction} %{{y}}: the hungriest candidate plan asks %{{customdata}}<extra></extra>",
            ),
            row=1,
            col=c,
        )
        for lay in ("NCHW", "NHWC"):
            mine = [r.endswith(lay) for r in rows]
            fig.add_trace(
                go.Bar(
                    y=rows,
                    x=[v if m else None for v, m in zip(picks, mine)],
                    orientation="h",
                    name=f"{lay}: the heuristic's pick",
                    legendgroup=lay,
                    showlegend=c == 1,
                    marker_color=LAYOUT_COLORS[lay],
                    width=0.45,
                    text=[t if m else "" for t, m in zip(text, mine)],
                    textposition="outside",
                    constraintext="none",
                    cliponaxis=False,
                    textfont=dict(size=10),
                    hovertemplate=f"{direction} %{{y}}: heuristic plan %{{text}}<extra></extra>",
                ),
                row=1,
                col=c,
            )
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    for c in (1, 2, 3):
        fig.update_xaxes(title_text="workspace (MiB)", range=[0, 1.45 * (top or 1.0)], nticks=4, row=1, col=c)
    spec = request_spec(df)
    note = "bars: the plan cuDNN's heuristic picks, labelled; pale bars: the largest workspace any candidate plan asks"
    cut = int(column_sum(df, "plans_cut"))
    if cut:
        note += (
            f" · {cut} runtime-compiled plan{'s' if cut > 1 else ''} still compiling and left out of the pale bars "
            "(measure again once compiled)"
        )
    bad = not_ok_note(df, ("dtype", "layout", "direction"))
    return finish(
        fig,
        df,
        "Workspace by dtype, layout and direction (same dims)",
        shape_label(spec),
        note=(note + (" · " + bad if bad else "")),
        height=560,
    )


def column_sum(df, col: str) -> float:
    """Sum of column ``col`` of ``df`` (0 when absent: a recording made before it existed)."""
    return float(df[col].fillna(0).sum()) if col in df.columns else 0.0


SWEEP_AXIS = {
    "N": "N (batch size)",
    "C=K": "C = K (channels in = out)",
    "H=W": "H = W (image size, pixels)",
    "R=S": "R = S (filter size)",
}


SWEEP_GRID = grid(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])


def sweep_chart(df) -> go.Figure:
    """GPU time and workspace of the heuristic plan as one dimension varies, every point labelled.

    One scale whatever the field: the swept values are categories (evenly spaced, as the recorded
    values double or step), GPU time is on a log axis, workspace on a linear one from zero ("0 B"
    labelled). Traces: 0 GPU time (us), 1 workspace (in the unit `size_unit` picks)."""
    field = str(df["field"].iloc[0]) if len(df) else ""
    ok = ok_rows(df)
    fig = new_figure(**SWEEP_GRID)
    custom = [
        [str(p), num(t)]
        for p, t in zip(ok.get("plan_name", [""] * len(ok)), ok.get("tflops", [None] * len(ok)))
    ]
    label = dict(
        mode="lines+markers+text", textposition="top center", textfont=dict(size=10), cliponaxis=False
    )
    times = [num(v) for v in ok["gpu_us"]]
    fig.add_trace(
        go.Scatter(
            x=list(ok["value"]),
            y=times,
            name="GPU time",
            line=dict(color=COLORS["primary"]),
            text=[fmt_us(v) for v in times],
            customdata=custom,
            hovertemplate=f"{field}=%{{x}}: %{{y:.1f}} us, %{{customdata[1]:.0f}} TFLOP/s<br>plan %{{customdata[0]}}"
            "<extra></extra>",
            **label,
        ),
        row=1,
        col=1,
    )
    div, unit = _size_unit(ok["workspace_bytes"])
    sizes = [num(v) / div if num(v) is not None else None for v in ok["workspace_bytes"]]
    fig.add_trace(
        go.Scatter(
            x=list(ok["value"]),
            y=sizes,
            name="workspace",
            line=dict(color=COLORS["secondary"]),
            text=[fmt_bytes(v) for v in ok["workspace_bytes"]],
            hovertemplate=f"{field}=%{{x}}: workspace %{{text}}<extra></extra>",
            **label,
        ),
        row=2,
        col=1,
    )
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(type="category", title_text=SWEEP_AXIS.get(field, field), row=2, col=1)
    fig.update_yaxes(title_text="GPU time (us)", row=1, col=1, **_log_with_room(times))
    top = max([v for v in sizes if v is not None] + [0.0])
    fig.update_yaxes(
        title_text=f"workspace ({unit})",
        type="linear",
        range=[-0.08 * (top or 1), 1.3 * (top or 1)],
        row=2,
        col=1,
    )
    spec = request_spec(df)
    detail = (
        f"around {spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}; heuristic plan at each point"
        if spec
        else ""
    )
    return finish(
        fig,
        df,
        f"Sweep of {field}: GPU time and workspace",
        detail,
        note=not_ok_note(df, ("field", "value")),
        height=560,
        legend_rows=0,
    )


def _size_unit(values_bytes) -> tuple:
    """(divisor, unit) so that the largest of ``values_bytes`` reads well: B, KiB, MiB or GiB."""
    div, unit = size_unit(values_bytes)
    top = max([num(v) or 0.0 for v in values_bytes] + [0.0])
    return (float(2**30), "GiB") if top >= 2**30 else (div, unit)


def _log_with_room(values) -> dict:
    """A log axis over ``values`` (`log_axis` ticks) with room above the highest point for its label."""
    import math

    v = [x for x in values if x is not None and x > 0]
    if not v:
        return dict(type="log")
    axis = log_axis(v)
    lo, hi = axis.get("range", [math.log10(min(v)) - 0.1, math.log10(max(v))])
    return dict(axis, type="log", range=[lo, hi + max(0.25, 0.12 * (hi - lo))])


# ---- summaries --------------------------------------------------------------------------------


def algorithms_summary(df) -> Text:
    ok = df[df["find_status"] == "ok"]
    fast = ok.loc[ok["time_us"].idxmin()]
    zero = ok[ok["query_workspace_bytes"] == 0]
    bad = df[df["find_status"] != "ok"]
    spec = request_spec(df)
    text = (
        f"For {spec.label} ({where(df)}), cuDNN's Find ranks **{fast.algorithm}** first: "
        f"{fmt_us(fast.time_us)} with a workspace of {fmt_bytes(fast.query_workspace_bytes)}."
    )
    if not zero.empty:
        z = zero.loc[zero["time_us"].idxmin()]
        text += (
            f" The best algorithm that needs no workspace, {z.algorithm}, takes {fmt_us(z.time_us)}: "
            f"{z.time_us / fast.time_us:.1f}x slower. That ratio is what the workspace buys here."
        )
    if len(bad):
        text += f" {len(bad)} of {len(df)} algorithms are not supported for this dtype and layout."
    text += (
        " These times are Find's own: one run of each algorithm through the legacy API, as a ranking, not the "
        "steady-state time of a kernel."
    )
    frontend = _frontend_time(spec)
    if frontend is not None:
        text += (
            f" The same convolution through the cuDNN frontend (its heuristic plan), timed as the median of CUDA-graph "
            f"replays (how "
            f"every other chart times, e.g. lesson 00's layout table), takes {fmt_us(frontend)} "
            f"({where(df)})."
        )
    return Text(text)


def _frontend_time(spec) -> Optional[float]:
    """The heuristic frontend plan's CUDA-graph median for ``spec`` from the layout experiment,
    when it is at hand without measuring (recorded, or already measured this session); else None."""
    if spec is None:
        return None
    for s in (spec, spec.replace(layout="NHWC" if spec.layout == "NCHW" else "NCHW")):  # it runs both layouts
        try:
            found = result("layout", at_hand_only=True, spec=s)
            if found is None:
                continue
            lay = ok_rows(found)
            row = lay[lay["layout"] == spec.layout]
            if len(row):
                return float(row["conv_gpu_us"].iloc[0])
        except (LabkitError, KeyError, IndexError):
            continue
    return None


def workspace_sizes_summary(df) -> Text:
    ok = ok_rows(df)
    hi = ok.loc[ok["heuristic_workspace_bytes"].idxmax()]
    lo = ok.loc[ok["heuristic_workspace_bytes"].idxmin()]
    spread = ok["max_workspace_bytes"].max()
    spec = request_spec(df)
    return Text(
        f"One shape ({shape_label(spec)}), {len(ok)} variants of dtype x layout x direction ({where(df)}). "
        f"The heuristic plan asks for anything from **{fmt_bytes(lo.heuristic_workspace_bytes)}** "
        f"({lo['dtype']} {lo['layout']} {lo['direction']}) to **{fmt_bytes(hi.heuristic_workspace_bytes)}** "
        f"({hi['dtype']} {hi['layout']} {hi['direction']}); the hungriest candidate plan of any variant wants "
        f"{fmt_bytes(spread)}. Same dims, very different workspaces."
    )


def sweep_summary(df) -> Text:
    """What the sweep on screen shows: time and FLOPs from end to end, and where the heuristic's
    plan changes the workspace it asks for (each such switch named, with both sizes)."""
    ok = ok_rows(df)
    f = str(df["field"].iloc[0])
    first, last = ok.iloc[0], ok.iloc[-1]
    text = (
        f"From {f}={first.value} to {f}={last.value} ({where(df)}) the GPU time goes from "
        f"{fmt_us(first.gpu_us)} to {fmt_us(last.gpu_us)} ({last.gpu_us / first.gpu_us:.0f}x) for "
        f"{last.flops / first.flops:.0f}x the FLOPs; throughput goes from {first.tflops:.0f} to "
        f"{last.tflops:.0f} TFLOP/s."
    )
    ws = [int(v) for v in ok["workspace_bytes"]]
    if not any(ws):
        return Text(
            text + f" No point asks for any workspace: the heuristic's plans here need 0 B all along {f}."
        )
    switches = [
        f"at {f}={b.value} it switches to plan {b.plan_name}, which asks for {fmt_bytes(b.workspace_bytes)} "
        f"(the plan before asked for {fmt_bytes(a.workspace_bytes)})"
        for (_, a), (_, b) in zip(ok.iloc[:-1].iterrows(), ok.iloc[1:].iterrows())
        if a.plan_name != b.plan_name and int(a.workspace_bytes) != int(b.workspace_bytes)
    ]
    big = ok.loc[ok["workspace_bytes"].idxmax()]
    same = ok[ok["plan_name"] == big.plan_name]
    grows = len(same) > 1 and same["workspace_bytes"].nunique() > 1
    text += (
        " Where the heuristic switches plans, the workspace jumps: "
        + "; ".join(switches[:3])
        + (f"; and {len(switches) - 3} more switch(es)" if len(switches) > 3 else "")
        + "."
        + (
            f" Within plan {big.plan_name} it grows with the tensors, from "
            f"{fmt_bytes(same['workspace_bytes'].min())} to {fmt_bytes(big.workspace_bytes)} at {f}={big.value}."
            if grows
            else f" The largest, {fmt_bytes(big.workspace_bytes)}, is at {f}={big.value}."
        )
    )
    return Text(text)


# ---- exercises -------------------------------------------------------------------------------------


def _fprop_sizes(dtype: str):
    """layout -> the heuristic plan's workspace (bytes) of ``dtype`` fprop at the base shape."""
    df = ok_rows(result("workspace_sizes"))
    sub = df[(df["dtype"] == dtype) & (df["direction"] == "fprop")]
    return sub.set_index("layout")["heuristic_workspace_bytes"]


def _less_workspace_why(truth: str) -> str:
    sizes = _fprop_sizes("fp16")
    other = "NCHW" if truth == "NHWC" else "NHWC"
    return (
        f"fp16 fprop: {truth}'s heuristic plan asks {fmt_bytes(sizes[truth])}, {other}'s "
        f"{fmt_bytes(sizes[other])} ({where(result('workspace_sizes'))}). The fast fp16 kernels read "
        "channels-last data, so the NCHW plan first copies its tensors into that order, in its workspace."
    )


LESS_WORKSPACE = Exercise(
    name="less_workspace_layout",
    lesson="01",
    kind="predict",
    question=(
        "Before the chart below: for fp16 fprop at the base shape, which layout's heuristic plan asks for "
        "less workspace, 'NCHW' or 'NHWC'?"
    ),
    truth=lambda: str(_fprop_sizes("fp16").idxmin()),
    parse=one_of(("NCHW", "NHWC"), "a layout"),
    judge=equal,
    why=_less_workspace_why,
    wrong_answers=lambda truth: ["NCHW" if truth == "NHWC" else "NHWC"],
    hints=(
        "Tensor cores read fp16 data with the channels of a pixel side by side. Which layout stores them so?",
        "A plan whose kernels want the other order must first rearrange its tensors: where does it put the "
        "rearranged copy?",
    ),
)


def _batch_sweep():
    return ok_rows(result("sweep", field="N", values=SWEEP_VALUES["N"], base=SWEEP_BASE))


def _batch_workspace() -> int:
    return int(_batch_sweep()["workspace_bytes"].max())


def _batch_workspace_why(truth: int) -> str:
    sweep = _batch_sweep()
    plans = list(dict.fromkeys(sweep["plan_name"]))
    text = (
        f"the largest workspace along N is {fmt_bytes(truth)} ({where(sweep)}): from N={sweep['value'].min()} "
        f"to N={sweep['value'].max()} the heuristic picks {_joined(plans)}"
        + (", plans that need no workspace at all." if truth == 0 else ".")
    )
    try:
        channels = ok_rows(result("sweep", field="C=K", values=SWEEP_VALUES["C=K"], base=SWEEP_BASE))
    except LabkitError:
        return text
    big = channels.loc[channels["workspace_bytes"].idxmax()]
    return text + (
        f" Channels are another matter: at C=K={big.value} the heuristic picks {big.plan_name}, which asks "
        f"{fmt_bytes(big.workspace_bytes)}. The workspace is the plan's, and the plan changes with the shape."
    )


def _joined(names) -> str:
    names = [str(n) for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


BATCH_WORKSPACE = Exercise(
    name="batch_workspace",
    lesson="01",
    kind="explore",
    question=(
        "Does a larger batch make fp32 NCHW ask for a workspace? In the sweep panel, keep dtype · layout at "
        "fp32 NCHW and sweep N: what is the largest workspace along that sweep, in bytes?"
    ),
    truth=_batch_workspace,
    parse=number("bytes"),
    judge=lambda answer, truth: abs(answer - truth) <= max(0.01 * truth, 0.5),
    why=_batch_workspace_why,
    hints=(
        "Set the panel's swept field to N; the lower chart labels every point with its workspace.",
        "Give the largest of those labels in bytes (1 KiB = 1,024 B, 1 MiB = 1,048,576 B).",
    ),
    wrong=lambda answer, truth: "a number of bytes is never negative." if answer < 0 else None,
    leaks=lambda truth: (r"Sweep of N: GPU time and workspace.{0,80}fp32 NCHW", r"all along N\b"),
    wrong_answers=lambda truth: [truth + 25_763_987, truth + 131],
)

#: what the fp16 NCHW plan might keep in its workspace
NCHW_REASONS = {
    "layout_copies": "copies of its input, filter and output in channels-last (NHWC) order, for kernels "
    "that read that order",
    "unfolded_input": "the input unfolded into a matrix (im2col): one column per filter tap",
    "frequency_domain": "the input and filter transformed into the frequency domain (FFT)",
    "partial_sums": "partial sums of the output, added up by a second kernel (split-K)",
}
#: which kernel role of a trace points at which reason (`labkit.experiments.under_the_hood`)
ROLE_REASON = {
    "layout conversion": "layout_copies",
    "FFT transform": "frequency_domain",
    "split-K reduction": "partial_sums",
}


def _nchw_evidence():
    """(the fp16 NCHW heuristic plan's workspace, its traced kernels (rows), tensor sizes in bytes)."""
    spec = BASE.replace(layout="NCHW")
    ws = int(_fprop_sizes("fp16")["NCHW"])
    trace = ok_rows(result("kernels", spec=spec))
    first = trace[trace["plan_index"] == trace["plan_index"].min()]
    return spec, ws, first, dict(spec.tensor_bytes)


def _nchw_reason() -> str:
    _, _, kernels, _ = _nchw_evidence()
    for role in kernels["role"]:
        if role in ROLE_REASON:
            return ROLE_REASON[role]
    return "unfolded_input"


def _nchw_why(truth: str) -> str:
    spec, ws, kernels, size = _nchw_evidence()
    names = [
        f"{k.split('::')[-1][:40]}{' x' + str(int(n)) if n > 1 else ''}"
        for k, n in zip(kernels["kernel"], kernels["launches_per_call"])
    ]
    copies = size["x"] + size["w"] + size["y"]
    return (
        f"its traced kernels, in order: {', '.join(names)}. The workspace it asks, {ws:,} B, is the input, "
        f"filter and output in fp16 ({size['x']:,} + {size['w']:,} + {size['y']:,} = {copies:,} B) plus "
        f"{ws - copies:,} B: copies in channels-last order, converted before the NHWC kernel runs and the "
        "output converted back after."
    )


def _fft_size(ws: int) -> str:
    """What the classic FFT algorithm asks for the fp16 NCHW base convolution, beside ``ws``."""
    try:
        algos = result("algorithms", spec=BASE.replace(layout="NCHW"))
        fft = algos[(algos["algorithm"] == "FFT") & (algos["query_status"] == "ok")]
        return f"; the FFT algorithm in the classic table asks {fmt_bytes(fft['query_workspace_bytes'].iloc[0])}, not {fmt_bytes(ws)}."
    except (LabkitError, IndexError, KeyError):
        return "."


def _nchw_wrong(answer: str, truth: str) -> Optional[str]:
    spec, ws, kernels, size = _nchw_evidence()
    roles = set(kernels["role"])
    unfolded = spec.R * spec.S * size["x"]
    return {
        "unfolded_input": (
            f"an unfolded input would be R·S = {spec.R * spec.S} times the input: {fmt_bytes(unfolded)} "
            f"(the GEMM algorithm's workspace in the classic table), not {fmt_bytes(ws)}."
        ),
        "frequency_domain": (
            "the traced kernels include no FFT"
            if "FFT transform" not in roles
            else "its FFT kernels are there, but look at what else the trace holds"
        )
        + _fft_size(ws),
        "partial_sums": (
            "no kernel adds partial sums after the main one"
            if "split-K reduction" not in roles
            else "there is a reduction, but look at what else the trace holds"
        )
        + ": look at the kernels the trace lists before and after the convolution kernel.",
        "layout_copies": "the traced kernels rearrange nothing here.",
    }.get(answer)


NCHW_WORKSPACE = Exercise(
    name="nchw_workspace_reason",
    lesson="01",
    kind="explain",
    question=(
        "The fp16 NCHW heuristic plan asks for megabytes of workspace, the fp16 NHWC one for a few bytes. "
        "What does the NCHW plan keep in its workspace?"
    ),
    truth=_nchw_reason,
    parse=one_of(tuple(NCHW_REASONS), "one of the reasons"),
    judge=equal,
    why=_nchw_why,
    hints=(
        "Divide its workspace by the size of one fp16 tensor of this convolution (32x64x56x56 x 2 bytes).",
        "The input and the output are the same size here; add the small filter. What would need exactly that "
        "much room?",
    ),
    wrong=_nchw_wrong,
    choices=NCHW_REASONS,
)


# ---- hands-on: one convolution with a workspace you allocate ---------------------------------------
#: the setup cell, run as it is (the learner reads it)
CONV_SETUP_SOURCE = """\
import cupy
from labkit.gpu import engine, frontend
spec = lessons.base(layout="NCHW")                 # fp16 NCHW: its heuristic plan needs a workspace
index = engine.get_graph(spec).default_plan.index  # the heuristic's pick (labkit built every plan)
g = frontend.planned_graph(spec)                   # define, validate, list the candidate plans
g.build_plan_at_index(index)                       # build that one plan
ops = engine.Operands(spec)                        # seeded random inputs, a NaN-filled output
pointers = {frontend.UIDS[role]: array.data.ptr for role, array in ops.arrays.items()}
"""
#: the reference solution of the cell the learner completes
OWN_WORKSPACE_SOURCE = """\
size = g.get_workspace_size_plan_at_index(index)
workspace = cupy.empty(size, dtype=cupy.uint8)
assert workspace.nbytes >= engine.get_graph(spec).plan(index).workspace_bytes, "too small"
g.execute_plan_at_index(pointers, workspace.data.ptr, index, handle=frontend.handle_for())
assert check.own_workspace(ops, workspace)
"""


def own_workspace(ops=None, workspace=None) -> CheckResult:
    """Lesson 01 hands-on: the convolution you ran with your workspace, against float64 (GPU).

    Args:
        ops: the `labkit.gpu.engine.Operands` you ran it on.
        workspace: the CuPy array you gave cuDNN as its workspace.

    Returns:
        A `CheckResult`: correct when the workspace is large enough and the output matches the
        float64 reference.
    """
    from .. import env

    m = env.mode()
    if not m.live:
        return emit(
            False,
            f"this check needs your convolution on a CUDA GPU; labkit is in recorded mode ({m.reason}).",
            lead="skipped",
        )
    from ..gpu import engine, reference, verify

    if not isinstance(ops, engine.Operands):
        raise InvalidSpec("ops", ops, "must be the engine.Operands your convolution ran on")
    if not hasattr(workspace, "nbytes") or not hasattr(workspace, "data"):
        raise InvalidSpec("workspace", workspace, "must be the CuPy array you allocated as the workspace")
    spec = ops.spec
    need = int(engine.get_graph(spec).default_plan.workspace_bytes)
    got = int(workspace.nbytes)
    import cupy

    cupy.cuda.runtime.deviceSynchronize()  # the kernels were only queued: wait for them before reading
    if got < need:
        return say(
            False, f"your workspace holds {got:,} B and the plan asks {need:,} B: never hand cuDNN less."
        )
    err = reference.relative_error(ops.output(), verify.expected(spec, ops))
    tol = reference.tolerance_for(spec)
    if not err <= tol:
        return say(
            False,
            f"the output is off: relative error {err:.2e} against float64 (tolerance {tol:.0e}). Did "
            "execute_plan_at_index run with your workspace's pointer, after you allocated it?",
        )
    return say(
        True,
        f"{spec.label}: your {fmt_bytes(got)} workspace, relative error {err:.1e} against the float64 reference "
        f"(tolerance {tol:.0e}). execute_plan_at_index returned as soon as the kernels were queued; the "
        "workspace had to stay yours until they had run, which this check waited for.",
    )


# ---- the recorded grid ---------------------------------------------------------------------------
#: the values each ``sweep`` field is recorded at (widgets offer exactly these)
SWEEP_VALUES = {
    "N": [1, 2, 4, 8, 16, 32, 64],
    "C=K": [16, 32, 64, 128, 256, 512],
    "H=W": [7, 14, 28, 56, 112],
    "R=S": [1, 3, 5, 7],
}


def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base calls only."""
    nchw = BASE.replace(layout="NCHW")
    calls = [
        ("algorithms", dict(spec=nchw)),
        ("sweep", dict(field="N", values=SWEEP_VALUES["N"])),
        ("workspace_sizes", dict(spec=BASE)),
    ]
    if quick:
        return calls
    for d in ("fp16", "fp32", "tf32", "bf16"):
        for lay in ("NCHW", "NHWC"):
            if (d, lay) != ("fp16", "NCHW"):
                calls.append(("algorithms", dict(spec=BASE.replace(dtype=d, layout=lay))))
    for field in ("C=K", "H=W", "R=S"):
        calls.append(("sweep", dict(field=field, values=SWEEP_VALUES[field])))
    for field in ("N", "C=K"):
        calls.append(
            (
                "sweep",
                dict(field=field, values=SWEEP_VALUES[field], base=BASE.replace(dtype="fp32", layout="NCHW")),
            )
        )
    return calls


#: the sweep panel's first view: true fp32 in NCHW across channel counts, where the heuristic plan
#: switches to one that asks for a workspace (the fp16 NHWC sweeps ask for a few hundred bytes at most)
SWEEP_BASE = BASE.replace(dtype="fp32", layout="NCHW")
SWEEP_FIELD = "C=K"

LESSON = "01"
#: experiment -> (chart, number of traces the chart always has, summary)
CHARTS = {
    "algorithms": (algorithms_chart, 3, algorithms_summary),
    "workspace_sizes": (workspace_sizes_chart, 9, workspace_sizes_summary),
    "sweep": (sweep_chart, 2, sweep_summary),
}
EXERCISES = (LESS_WORKSPACE, BATCH_WORKSPACE, NCHW_WORKSPACE)
#: hands-on cells: name -> (reference solution source, what it needs)
HANDS_ON = {
    "conv_setup": (CONV_SETUP_SOURCE, "a CUDA GPU (live mode)"),
    "own_workspace": (OWN_WORKSPACE_SOURCE, "a CUDA GPU (live mode) and the cell above"),
}
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (own_workspace,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "algorithms": spec_panel(
        "algorithms",
        "Classic algorithm table",
        SHAPE + ("dtype", "layout"),
        BASE.replace(layout="NCHW"),
        live_options=dict(dtype=LEGACY_DTYPES),
    ),
    "workspace_sizes": spec_panel("workspace_sizes", "Workspace by dtype/layout/direction", SHAPE, BASE),
    "sweep": PanelConfig(
        "sweep",
        "Sweep one dimension",
        ("field", "dtype", "layout", "direction"),
        state_of(SWEEP_BASE, field=SWEEP_FIELD),
        lambda s: dict(field=s["field"], values=SWEEP_VALUES[s["field"]], base=spec_of(s)),
        "base.",
        base_text=f"swept field {SWEEP_FIELD}, {SWEEP_BASE.dtype} {SWEEP_BASE.layout} fprop "
        + shape_label(SWEEP_BASE),
        recorded_controls=("field", "dtype_layout"),
    ),
}
