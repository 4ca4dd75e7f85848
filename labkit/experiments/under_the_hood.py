"""Lesson 10, under the hood: the kernels each plan launches, the GPU timeline of each workspace
strategy, the race's overlapping streams, and cuDNN's own log of a build.

Every number here comes from a traced run (`labkit.gpu.trace`: CUPTI activity records), separate
from any timing run: a trace adds host time to every CUDA call, so traced durations are what the
GPU did while traced, and the host times shown (``host_us``) were measured untraced before it.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""
from __future__ import annotations

import functools
from typing import Optional

import plotly.graph_objects as go

from ..errors import InvalidSpec, LabkitError
from ..draw.plots import COLORS, finish, fmt_us, new_figure, ok_rows
from ..signals.progress import report
from ..draw.prose import Text, where
from ..spec import ConvSpec
from .checking import CheckResult, as_number, as_word, frame_for, is_close, pending, say
from .core import BASE, as_spec, experiment, status_row, to_frame

#: conv calls traced per plan (their kernels are averaged per call)
TRACED_CALLS = 3
#: the kernel roles, in the order the stacked bars show them, and their colours
ROLES = ("layout conversion", "setup", "zeroing (memset)", "FFT transform", "Winograd transform", "main convolution",
         "split-K reduction", "epilogue", "copy", "other")
ROLE_COLORS = dict(zip(ROLES, ("#ff7f0e", "#8c564b", "#bcbd22", "#17becf", "#e377c2", "#1f77b4", "#9467bd",
                               "#2ca02c", "#7f7f7f", "#c7c7c7")))
#: convolutions per stream in the traced race round (lesson 06's batch)
RACE_CONVS = 64
#: plans a kernels chart shows (the fastest by traced kernel time; the table has every plan)
CHART_PLANS = 14


def _kernel_rows(dev, calls: int, **tags) -> list:
    """One row per distinct kernel (by name) of a traced device frame: launches per call, mean
    microseconds per launch, share of the traced GPU time."""
    total = float(dev.dur_us.sum()) or float("nan")
    rows = []
    for name, sub in dev.groupby("name", sort=False):
        rows.append(dict(tags, kernel=name, role=sub.role.iloc[0], launches_per_call=len(sub) / calls,
                         kernel_us=float(sub.dur_us.mean()), share=float(sub.dur_us.sum()) / total,
                         grid=str(sub.grid.iloc[0]) if sub.grid.iloc[0] is not None else "",
                         block=str(sub.block.iloc[0]) if sub.block.iloc[0] is not None else ""))
    return rows


def _traced(fn, calls: int, stream, label: str):
    """``fn`` run ``calls`` times under a tracer (after one untraced warm-up call): its device rows."""
    from ..gpu import trace

    with stream:
        fn()
    stream.synchronize()
    with trace.Tracer(label) as t:
        with stream:
            for _ in range(calls):
                fn()
        stream.synchronize()
    df = t.frame()
    return trace.device_rows(df), df.attrs.get("dropped", 0)


# ---- experiments ------------------------------------------------------------------------------
def _traced_experiment(fn):
    """Run ``fn`` in one `labkit.gpu.trace.session` (CUPTI attached and warmed before its traces,
    detached after them), keeping its name and doc for `experiment`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from ..gpu import trace

        with trace.session():
            return fn(*args, **kwargs)
    return wrapper


@experiment
@_traced_experiment
def kernels(spec: ConvSpec = BASE):
    """Every runnable plan of ``spec``: the kernels one call launches (traced, `TRACED_CALLS`
    calls), each kernel's role, launches per call, microseconds per launch and share of the plan's
    GPU time; per plan ``kernels_per_call``, ``plan_kernel_us`` (the kernels' time per call, traced)
    and ``host_us`` (host time to launch one call, measured untraced before the trace)."""
    from ..gpu import engine, measure, memory
    from ..gpu.ranges import annotate

    spec = as_spec(spec)
    cg = engine.get_graph(spec)
    ops = engine.Operands(spec)
    stream = measure.timing_stream()
    rows = []
    plans = cg.runnable
    for i, plan in enumerate(plans):
        tags = dict(plan_index=plan.index, plan_name=plan.name, workspace_bytes=plan.workspace_bytes)
        try:
            with annotate(f"kernels of plan {plan.name}", "plan"):
                ws = memory.alloc(plan.workspace_bytes, f"workspace of plan {plan.index}")
                bound = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
                eager = measure.eager_us(bound.run, stream)
                n = 20 if eager < 200 else 5 if eager < 2000 else 2  # a 15 ms plan: 2 launches a repeat
                host = measure.host_dispatch(bound.run, stream, calls=n, repeats=5).median_us
                dev, dropped = _traced(bound.run, TRACED_CALLS, stream, f"plan {plan.name}")
            per_call = dict(kernels_per_call=len(dev) / TRACED_CALLS, plan_kernel_us=float(dev.dur_us.sum()) / TRACED_CALLS,
                            host_us=host, eager_us=eager, status="ok", reason="")
            rows += [dict(r, **per_call) for r in _kernel_rows(dev, TRACED_CALLS, **tags)]
        except LabkitError as exc:
            rows.append(dict(tags, **status_row(exc)))
        report(lambda: to_frame(rows), i + 1, len(plans), "plans traced")
    df = to_frame(rows)
    df.insert(0, "spec_label", spec.label)
    df.attrs["heuristic_plan"] = cg.default_plan.name
    return df


@experiment
@_traced_experiment
def fusion_kernels(spec: ConvSpec = BASE, epilogue: str = "bias_relu"):
    """The fused graph's kernels (the heuristic's plan of conv + ``epilogue``) against the unfused
    path's (the heuristic conv plan, then CuPy's elementwise kernels), traced per call."""
    from ..gpu import engine, measure, memory, unfused

    spec = as_spec(spec)
    unfused.check_spec(spec)
    stream = measure.timing_stream()
    ops = engine.Operands(spec, epilogue)
    fused = engine.get_graph(spec, epilogue, all_plans=False)
    fplan = fused.default_plan
    fws = memory.alloc(fplan.workspace_bytes, "workspace")
    fb = fused.bind(ops.arrays, int(fws.data.ptr), fplan.index, stream)
    plain = unfused.UnfusedPath(spec, ops, stream)
    rows = []
    for path, fn, plan in (("fused", fb.run, fplan.name), ("unfused", plain.run, plain.plan.name)):
        dev, _ = _traced(fn, TRACED_CALLS, stream, f"{path} {epilogue}")
        per = dict(kernels_per_call=len(dev) / TRACED_CALLS, path_kernel_us=float(dev.dur_us.sum()) / TRACED_CALLS)
        rows += [dict(r, **per) for r in _kernel_rows(dev, TRACED_CALLS, path=path, epilogue=epilogue, plan_name=plan)]
    df = to_frame(rows)
    df.insert(0, "spec_label", spec.label)
    return df


@experiment
@_traced_experiment
def strategy_timeline(workload: str = "one_conv", calls: int = 8):
    """The GPU timeline of ``calls`` calls of ``workload`` under each workspace strategy, in steady
    state: every kernel on its stream and the allocation, launch and synchronisation calls on the
    host, traced (`labkit.gpu.workloads.traced_pass`). Per strategy: ``gpu_us``/``host_us`` of the
    same pass untraced (events; host clock), the traced ``busy_us`` and ``idle_share`` (the share
    of the pass in which the GPU waited for the host). Times are microseconds from the strategy's
    first traced record. ``idle_share`` comes from a pass traced with device records only,
    ``idle_share_api`` from the pass drawn (API calls traced too: CUPTI's host time widens the gaps)."""
    from ..gpu import workloads

    if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= 64:
        raise InvalidSpec("calls", calls, "must be an int from 1 to 64")
    if workload not in workloads.WORKLOADS or workload == "pressure":
        raise InvalidSpec("workload", workload, f"must be one of {', '.join(w for w in workloads.WORKLOADS if w != 'pressure')}")
    rows, n = [], len(workloads.BENCH_STRATEGIES)
    for i, (name, opts) in enumerate(workloads.BENCH_STRATEGIES):
        row, tr = workloads.traced_pass(name, opts, workload, calls)
        summary = {k: row.get(k) for k in ("strategy", "calls", "gpu_us", "host_us", "busy_us", "idle_share",
                                           "idle_share_api", "status", "reason")}
        if tr is None or tr.empty:
            rows.append(dict(summary, kind="none"))
        else:
            for r in tr[["kind", "row", "name", "role", "start_us", "end_us", "dur_us"]].to_dict("records"):
                rows.append(dict(summary, **r))
        report(lambda: to_frame(rows), i + 1, n, "strategies traced")
    df = to_frame(rows)
    df.insert(0, "workload", workload)
    return df


@experiment
@_traced_experiment
def race_timeline(launch: str = "graph", streams: int = 2):
    """One round of lesson 06's race, traced: `RACE_CONVS` convolutions per stream sharing one workspace,
    launched as CUDA graphs or from Python. Rows: every kernel and API call; per frame
    ``overlap_us`` (stream 1 and stream 2 running at once: when a shared workspace is overwritten)
    and ``busy_us``."""
    from ..gpu import concurrency, trace

    if isinstance(streams, bool) or not isinstance(streams, int) or not 2 <= streams <= 4:
        raise InvalidSpec("streams", streams, "must be an int from 2 to 4")
    r = concurrency.scratchpad_race(shared=True, launch=launch, streams=streams, convs_per_launch=RACE_CONVS,
                                    min_runs=RACE_CONVS * streams, tracer=lambda: trace.Tracer(f"race, {launch} launch"))
    tr = r.trace
    cols = ["kind", "row", "name", "role", "start_us", "end_us", "dur_us", "graph_id"]
    df = tr[cols].copy()
    df.insert(0, "launch", launch)
    df.insert(1, "streams", streams)
    df["overlap_us"] = trace.overlap_us(tr, "stream 1", "stream 2")
    df["busy_us"] = trace.busy_us(tr)
    df["corrupted"] = r.mismatches_bitwise
    df["runs"] = r.runs
    df["spec_label"] = r.spec_label
    return df


@experiment
def build_log(spec: ConvSpec = BASE, epilogue: str = "none"):
    """Building ``spec``'s graph (every candidate plan) in a fresh process with cuDNN's frontend
    log at INFO and the backend's at warnings (`labkit.gpu.buildlog`): one row per log line
    (``source``, ``line``, ``text``; tensor dumps and blank lines left out), with per-engine
    ``engine`` where a line names one."""
    from ..gpu import buildlog

    spec = as_spec(spec)
    got = buildlog.capture(spec, epilogue)
    rows = []
    for source in ("frontend", "backend"):
        for no, text in enumerate(got[source]):
            t = text.rstrip()
            if not t.strip() or _is_dump(t):
                continue
            rows.append(dict(source=source, line=no, text=t[:300], engine=buildlog.engine_in(t)))
    df = to_frame(rows)
    b = got["build"]
    df.insert(0, "spec_label", spec.label)
    df["plans"], df["built"], df["build_seconds"] = b["plans"], b["built"], b["seconds"]
    return df


def _is_dump(line: str) -> bool:
    """A line of a descriptor dump (indented fields under "CUDNN_BACKEND_TENSOR_DESCRIPTOR :")."""
    body = line.replace("[cudnn_frontend]", "", 1)
    return body.startswith("          ") or body.strip().startswith(("=====", "{\"context\""))


# ---- charts --------------------------------------------------------------------------------
def _plan_order(ok):
    per = ok.drop_duplicates("plan_name").sort_values("plan_kernel_us")
    return list(per.plan_name)


def kernels_chart(df) -> go.Figure:
    """Per plan (the `CHART_PLANS` fastest), its GPU time per call stacked by kernel role, and the
    host time to launch one call with the number of kernels it launches.
    Traces: one per role (`ROLES`), then host time = len(ROLES) + 1."""
    fig = new_figure(rows=1, cols=2, shared_yaxes=True, column_widths=[0.68, 0.32], horizontal_spacing=0.02,
                     subplot_titles=("GPU time per call, by kernel role (traced)", "host time per call (untraced)"))
    ok = ok_rows(df)
    order = _plan_order(ok)[:CHART_PLANS] if len(ok) else []
    sub = ok[ok.plan_name.isin(order)]
    for role in ROLES:
        r = sub[sub.role == role]
        per_plan = (r.kernel_us * r.launches_per_call).groupby(r.plan_name).sum() if len(r) else {}
        names = r.groupby("plan_name").kernel.apply(lambda k: "<br>".join(k.str.slice(0, 60))) if len(r) else {}
        fig.add_trace(go.Bar(y=order, x=[per_plan.get(p) if len(r) else None for p in order], orientation="h", name=role,
                             marker_color=ROLE_COLORS[role], legendgroup=role,
                             customdata=[names.get(p, "") if len(r) else "" for p in order],
                             hovertemplate=f"%{{y}}<br>{role}: %{{x:.1f}} us<br>%{{customdata}}<extra></extra>"),
                      row=1, col=1)
    per = sub.drop_duplicates("plan_name").set_index("plan_name") if len(sub) else None
    host = [float(per.loc[p, "host_us"]) if per is not None else None for p in order]
    text = [f"{per.loc[p, 'kernels_per_call']:g} kernel{'s' if per.loc[p, 'kernels_per_call'] != 1 else ''}"
            if per is not None else "" for p in order]
    fig.add_trace(go.Bar(y=order, x=host, orientation="h", name="host time to launch", marker_color=COLORS["muted"],
                         text=text, textposition="auto", showlegend=False,
                         hovertemplate="%{y}: %{x:.1f} us of host time, %{text}<extra></extra>"), row=1, col=2)
    fig.update_layout(barmode="stack")
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=10), row=1, col=1)
    fig.update_xaxes(title_text="GPU time per call (us)", row=1, col=1)
    fig.update_xaxes(title_text="host us per call", row=1, col=2)
    label = df["spec_label"].iloc[0] if "spec_label" in df.columns and len(df) else ""
    more = max(0, ok.plan_name.nunique() - len(order)) if len(ok) else 0
    detail = f"{label}; {len(order)} fastest plans" + (f" of {len(order) + more} (the table has all)" if more else "")
    note = (f"each plan traced over {TRACED_CALLS} calls with CUPTI (cupti-python); host time measured untraced first"
            + (f" · heuristic's pick: {df.attrs.get('heuristic_plan')}" if df.attrs.get("heuristic_plan") else ""))
    return finish(fig, df, "Kernels per plan: what one cuDNN call launches", detail, note=note,
                  height=300 + 26 * max(len(order), 4), legend_rows=2)


def fusion_kernels_chart(df) -> go.Figure:
    """Fused vs unfused: GPU time per call stacked by kernel role, with the kernel count.
    Traces: one per role = len(ROLES)."""
    fig = new_figure()
    paths = [p for p in ("fused", "unfused") if p in set(df.get("path", []))]
    for role in ROLES:
        r = df[df.role == role] if len(df) else df
        x = [float((r[r.path == p].kernel_us * r[r.path == p].launches_per_call).sum()) if len(r[r.path == p]) else None
             for p in paths] if len(r) else [None] * len(paths)
        names = ["<br>".join(r[r.path == p].kernel.str.slice(0, 60)) if len(r) else "" for p in paths]
        fig.add_trace(go.Bar(y=paths, x=x, orientation="h", name=role, marker_color=ROLE_COLORS[role],
                             customdata=names, hovertemplate=f"%{{y}} {role}: %{{x:.1f}} us<br>%{{customdata}}<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="GPU time per call (us, traced)")
    per = df.drop_duplicates("path").set_index("path") if len(df) else None
    ticks = [f"{p} ({per.loc[p, 'kernels_per_call']:g} kernels)" for p in paths] if per is not None else paths
    fig.update_yaxes(tickvals=paths, ticktext=ticks)
    label = df["spec_label"].iloc[0] if len(df) else ""
    epi = df["epilogue"].iloc[0] if len(df) else ""
    return finish(fig, df, f"Fusion under the hood: conv + {epi}", f"{label}; fused = one cuDNN graph, unfused = cuDNN "
                  "conv + CuPy elementwise kernels", note=f"traced over {TRACED_CALLS} calls with CUPTI", height=380)


_TIMELINE_KINDS = (("kernel", "kernels", COLORS["primary"]), ("memset", "memsets", "#bcbd22"),
                   ("alloc", "allocate / free (host)", COLORS["bad"]), ("launch", "launch calls (host)", COLORS["muted"]),
                   ("sync", "synchronise (host)", COLORS["purple"]))


def _timeline_class(kind: str, name: str) -> str:
    if kind in ("kernel", "memset", "memcpy"):
        return "kernel" if kind == "kernel" else "memset"
    low = str(name).lower()
    if "alloc" in low or "free" in low:
        return "alloc"
    if "sync" in low:
        return "sync"
    return "launch"


def _gantt(fig, events, lane, label_of):
    """Add the 5 `_TIMELINE_KINDS` traces (always, possibly empty) of ``events`` to ``fig``."""
    classes = [_timeline_class(k, n) for k, n in zip(events.kind, events.name)] if len(events) else []
    for cls, name, color in _TIMELINE_KINDS:
        sel = events[[c == cls for c in classes]] if len(events) else events
        fig.add_trace(go.Bar(base=list(sel.start_us) if len(sel) else [], x=list(sel.dur_us.clip(lower=0.3)) if len(sel) else [],
                             y=[lane(r) for r in sel.itertuples()] if len(sel) else [], orientation="h", name=name,
                             marker_color=color, marker_line_width=0,
                             customdata=[label_of(r) for r in sel.itertuples()] if len(sel) else [],
                             hovertemplate="%{customdata}<br>%{base:.1f} us + %{x:.1f} us<extra></extra>"))


def strategy_timeline_chart(df) -> go.Figure:
    """Each strategy's traced pass as a Gantt chart: a GPU lane (kernels, memsets) and a host lane
    (allocation, launch and sync calls), with the GPU's idle share in the lane's name.
    Traces: 5 (`_TIMELINE_KINDS`)."""
    fig = new_figure()
    ev = df[df.kind != "none"] if "kind" in df.columns else df
    col = "idle_share_api" if "idle_share_api" in df.columns else "idle_share"
    idle = df.drop_duplicates("strategy").set_index("strategy")[col] if len(df) else {}

    def lane(r):
        share = idle.get(r.strategy) if len(df) else None
        who = "GPU" if r.kind in ("kernel", "memset", "memcpy") else "host"
        tag = f" (idle {share:.0%})" if who == "GPU" and share is not None and share == share else ""
        return f"{r.strategy} · {who}{tag}"

    _gantt(fig, ev, lane, lambda r: f"{r.strategy}: {r.name}")
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=10), type="category")
    fig.update_xaxes(title_text="microseconds from the strategy's first traced call")
    calls = int(df["calls"].iloc[0]) if "calls" in df.columns and len(df) else None
    wl = df["workload"].iloc[0] if len(df) else ""
    detail = f"{wl}, {calls or 8} calls per strategy in steady state, traced with CUPTI; idle = the GPU waiting for the host"
    lanes = 2 * (df["strategy"].nunique() if len(df) else 8)
    return finish(fig, df, "The GPU timeline of each workspace strategy", detail,
                  note="a traced run: CUPTI adds host time to every API call, so gaps are wider than untraced (the "
                       "summary gives the idle share traced without API calls); the strategies chart's timings are untraced",
                  height=220 + 26 * lanes, legend_rows=1)


def race_timeline_chart(df) -> go.Figure:
    """The race's traced round: one lane per stream and one for the host. Traces: 5."""
    fig = new_figure()
    _gantt(fig, df, lambda r: r.row, lambda r: f"{r.row}: {r.name}")
    fig.update_layout(barmode="overlay", bargap=0.3)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title_text="microseconds from the round's first traced record")
    if len(df):
        r0 = df.iloc[0]
        detail = (f"{r0.spec_label}, {int(r0.streams)} streams x {RACE_CONVS} convolutions sharing one workspace, {r0.launch} launch; "
                  f"overlap of stream 1 and 2: {fmt_us(r0.overlap_us)} of {fmt_us(r0.busy_us)} busy")
    else:
        detail = ""
    return finish(fig, df, "The race, traced: do the streams' kernels overlap?", detail,
                  note="where the lanes overlap, two convolutions use the one workspace at once", height=420)


def build_log_chart(df) -> go.Figure:
    """cuDNN's log of the build, trimmed: the frontend's lines about engines and the backend's
    warnings, as a table. Traces: 1."""
    fig = new_figure()
    keep = df[(df.engine != "") | df.text.str.contains("WARN|ERROR|heur|Deselect|filter|not supported", case=False)] \
        if len(df) else df
    keep = keep.head(60)
    fig.add_trace(go.Table(columnwidth=[60, 40, 600],
                           header=dict(values=["source", "line", "text"], align="left", fill_color="#e8eaed"),
                           cells=dict(values=[list(keep.source), list(keep.line),
                                              [str(t).replace("[cudnn_frontend] ", "")[:220] for t in keep.text]]
                                      if len(keep) else [[], [], []], align="left", font=dict(size=10), height=20)))
    label = df["spec_label"].iloc[0] if len(df) else ""
    detail = (f"{label}: {int(df['built'].iloc[0])} of {int(df['plans'].iloc[0])} plans built in "
              f"{df['build_seconds'].iloc[0]:.1f} s; {len(keep)} of {len(df)} log lines shown") if len(df) else ""
    return finish(fig, df, "cuDNN's own words: the build log", detail,
                  note="CUDNN_FRONTEND_LOG_INFO=1 and CUDNN_LOGLEVEL_DBG=2 in a fresh process", height=760, legend_rows=0)


# ---- summaries --------------------------------------------------------------------------------
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
    parts = [f"{where(df)}, {df['spec_label'].iloc[0]}: {len(per)} plans traced;",
             ", ".join(f"{int(n)} launch {k:g} kernel{'s' if k != 1 else ''} per call" for k, n in counts.items()) + ".",
             f"The fastest, {fastest.plan_name}, runs {fastest.kernels_per_call:g} in {fmt_us(fastest.plan_kernel_us)}."]
    if conv:
        parts.append(f"{conv} plan(s) spend GPU time converting layouts (a kernel before and after the main one).")
    if len(one) and len(many):
        parts.append(f"Host time to launch: median {fmt_us(one.host_us.median())} for one-kernel plans, "
                     f"{fmt_us(many.host_us.median())} for multi-kernel ones.")
    return Text(" ".join(parts))


def fusion_kernels_summary(df) -> Text:
    per = df.drop_duplicates("path").set_index("path")
    if not {"fused", "unfused"} <= set(per.index):
        return Text(f"{where(df)}: fusion could not be traced.")
    f, u = per.loc["fused"], per.loc["unfused"]
    return Text(f"{where(df)}, {df['spec_label'].iloc[0]} + {df['epilogue'].iloc[0]}: the fused graph launches "
                f"{f.kernels_per_call:g} kernel(s) per call ({fmt_us(f.path_kernel_us)}), the unfused path "
                f"{u.kernels_per_call:g} ({fmt_us(u.path_kernel_us)}): each extra kernel reads and writes a whole tensor.")


def strategy_timeline_summary(df) -> Text:
    s = df.drop_duplicates("strategy").set_index("strategy")
    s = s[s.status == "ok"]
    if "idle_share_api" in s.columns:  # the pass the chart draws
        s = s.assign(idle_share=s.idle_share_api)
    if s.empty:
        return Text(f"{where(df)}: no strategy could be traced.")
    worst, best = s.idle_share.idxmax(), s.idle_share.idxmin()
    parts = [f"{where(df)}: the GPU waited for the host {s.loc[worst, 'idle_share']:.0%} of {worst}'s pass "
             f"and {s.loc[best, 'idle_share']:.0%} of {best}'s."]
    ev = df[df.kind == "api"]
    allocs = ev[ev.name.str.contains("alloc|free", case=False)].groupby("strategy").size()
    if len(allocs):
        parts.append("Allocation calls in the traced pass: " + ", ".join(f"{k} {int(v)}" for k, v in allocs.items()) + ".")
    return Text(" ".join(parts))


def race_timeline_summary(df) -> Text:
    r = df.iloc[0]
    share = r.overlap_us / r.busy_us if r.busy_us else 0.0
    return Text(f"{where(df)}, {r.launch} launch: the two streams' kernels ran at the same time for "
                f"{fmt_us(r.overlap_us)} ({share:.0%} of the {fmt_us(r.busy_us)} the GPU was busy); "
                f"{int(r.corrupted)} of {int(r.runs)} outputs of this round were corrupted.")


def build_log_summary(df) -> Text:
    fe = df[df.source == "frontend"]
    engines = [e for e in dict.fromkeys(fe.engine) if e]
    warn = int(df.text.str.contains("WARN|W!", regex=True).sum())
    return Text(f"{where(df)}, {df['spec_label'].iloc[0]}: the frontend log names {len(engines)} engine configurations; "
                f"{int(df['built'].iloc[0])} of {int(df['plans'].iloc[0])} plans built in {df['build_seconds'].iloc[0]:.1f} s; "
                f"{warn} warning lines.")


# ---- exercise checks --------------------------------------------------------------------------------
def heuristic_kernels(answer=None, df=None) -> CheckResult:
    """Lesson 10: how many kernels does one call of the heuristic's plan of the base convolution
    launch (memsets count)? (exact)"""
    df = ok_rows(frame_for(df, "kernels", spec=BASE))
    name = df.attrs.get("heuristic_plan") or df.sort_values("plan_index").plan_name.iloc[0]
    row = df[df.plan_name == name].iloc[0]
    truth = float(row.kernels_per_call)
    if answer is None:
        return pending(f"How many kernels does one call of the heuristic's plan ({name}) launch?",
                       "hover its bar in the kernels chart, or count its rows in the table.")
    a = as_number(answer, "a count", 2)
    if a == truth:
        roles = ", ".join(dict.fromkeys(df[df.plan_name == name].role))
        return say(True, f"{truth:g} per call ({roles}).")
    return say(False, f"{a:g} is {'too many' if a > truth else 'too few'}; memsets are kernels here too.")


def idle_strategy(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 10: in the strategy timeline, under which strategy does the GPU sit idle longest
    (largest idle share)? Answer a strategy as the chart names it."""
    df = frame_for(df, "strategy_timeline", workload="one_conv", calls=8)
    s = df.drop_duplicates("strategy").set_index("strategy")
    if "idle_share_api" in s.columns:  # the pass the chart draws
        s = s.assign(idle_share=s.idle_share_api)
    truth = s.idle_share.idxmax()
    if answer is None:
        return pending("Under which strategy does the GPU wait longest for the host?",
                       "the lane names in the timeline chart end with the idle share.")
    a = as_word(answer, "a strategy", "malloc_per_call")
    if a.lower() == str(truth).lower() or (a.lower() in str(truth).lower() and len(a) > 4):
        return say(True, f"{truth}: idle {s.loc[truth, 'idle_share']:.0%} of its pass; every call waits for cudaFree "
                          "(which synchronises) and cudaMalloc before its kernel can start.")
    if a not in s.index and not any(a.lower() in str(i).lower() for i in s.index):
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(map(str, s.index))}")
    return say(False, "look for the widest gaps between kernels in the GPU lanes.")


def race_overlap(answer=None, df=None) -> CheckResult:
    """Lesson 10: with CUDA-graph launches, for how many microseconds did the two streams' kernels
    run at the same time in the traced round? (within 25%: traces vary run to run)"""
    df = frame_for(df, "race_timeline", launch="graph", streams=2)
    truth = float(df.overlap_us.iloc[0])
    if answer is None:
        return pending("How long did stream 1 and stream 2 run at the same time (us)?", "the chart's detail line.")
    a = as_number(answer, "microseconds", 100)
    if is_close(a, truth, 0.25) or (truth == 0 and a == 0):
        return say(True, f"{fmt_us(truth)}: during it both streams wrote the same workspace.")
    return say(False, f"{a:g} us is {'too much' if a > truth else 'too little'}.")


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base calls only."""
    calls = [("kernels", dict(spec=BASE)), ("strategy_timeline", dict(workload="one_conv", calls=8)),
             ("race_timeline", dict(launch="graph", streams=2)), ("fusion_kernels", dict(spec=BASE, epilogue="bias_relu")),
             ("build_log", dict(spec=BASE, epilogue="none"))]
    if quick:
        return calls
    calls += [("kernels", dict(spec=BASE.replace(layout="NCHW"))), ("kernels", dict(spec=BASE.replace(dtype="fp32"))),
              ("race_timeline", dict(launch="python", streams=2)),
              ("fusion_kernels", dict(spec=BASE, epilogue="bias_relu_add"))]
    return calls


LESSON = "10"
CHARTS = {"kernels": (kernels_chart, len(ROLES) + 1, kernels_summary),
          "fusion_kernels": (fusion_kernels_chart, len(ROLES), fusion_kernels_summary),
          "strategy_timeline": (strategy_timeline_chart, len(_TIMELINE_KINDS), strategy_timeline_summary),
          "race_timeline": (race_timeline_chart, len(_TIMELINE_KINDS), race_timeline_summary),
          "build_log": (build_log_chart, 1, build_log_summary)}
EXERCISES = (heuristic_kernels, idle_strategy, race_overlap)
