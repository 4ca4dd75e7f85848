"""Lesson 09, your network: every convolution layer of a network under every workspace strategy,
with the memory timeline of one pass and the time a workspace cap costs.

One experiment, `network_report`, answers "what do these strategies cost for *my* network, at
*my* batch size, on *my* GPU, and does it fit?". Its DataFrame is long: a ``table`` column says
which of five tables a row belongs to (`labkit.report` splits them into a `Report`):

==============  ===============================================================================
``layers``      one row per convolution call of the pass, in order (forward; with ``training``
                also the backward calls: dgrad and wgrad of each layer, last layer first; no
                dgrad for the first layer, whose input needs no gradient). Per row: the
                heuristic's plan, the fastest plan and the smallest-workspace plan, each with
                its GPU time (CUDA-graph replay median, us) and workspace bytes, and whether all
                three outputs matched the float64 reference (``checked``, ``max_rel_error``).
``plans``       every plan timed, per distinct spec (``spec_id``): what the budget curve is
                made of. Identical layers are measured once (`labkit.networks.unique`).
``strategies``  one row per workspace strategy running the whole pass with each call's fastest
                plan (falling back to a smaller plan when the strategy cannot give its
                workspace): GPU time of a pass (two events around it: kernels plus any GPU idle,
                us), host time of a pass (us), peak workspace held, bytes still held after,
                allocator calls in the first pass and in a later pass, fallbacks.
``timeline``    per strategy and call of the first pass (from nothing held): ``held_bytes``,
                the most workspace memory the strategy held while that call ran (its peak over
                the pass is the strategy's ``peak_workspace_bytes``), and ``held_after_bytes``.
``budget``      per workspace cap: the pass time if each call used its fastest plan within the
                cap (a sum of measured plan times, not a new measurement), and how many calls
                change plan or have none that fits.
==============  ===============================================================================

Bounded: each step of a report (one distinct convolution: its build, autotune and checks; one
strategy's pass) has a budget of `step_budget_s` seconds and runs in a worker process
(`labkit.gpu.isolated`): inside, the build, each plan's timing and the autotune stop between
their parts when their budgets are spent (a plan that took too long is a ``plans`` row ``timed
out after ... in capture``; one left when a budget was spent, ``cut: ...``; one far slower than
the best after one eager call, ``slower: ...``);
a step that still has not answered `KILL_GRACE_S` after its budget is killed with its worker,
and its layer is a row with status ``timed_out`` naming the phase it was in. The report goes
on, and `cut_counts` says how many plans and layers were cut (and how many plans were left as
known to be slower).

Everything about the experiment lives here: the run function, its charts, summary, exercise
checks and the calls of the recorded grid. Bytes; microseconds; seconds for budgets.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

import plotly.graph_objects as go

from .. import networks
from ..signals.cancel import Budget, checkpoint, not_timed, was_cut
from ..errors import InvalidSpec, LabkitError
from ..draw.plots import COLORS, finish, fmt_bytes, fmt_us, new_figure, num, ok_rows
from ..signals.progress import announce, report as report_progress
from ..draw.prose import Text
from ..spec import ConvSpec
from .checking import CheckResult, as_number, as_word, frame_for, pending, say
from .core import MIB, experiment, status_row, to_frame

#: the strategies a report runs, as (label, strategy name, options); ``"sized"``: the fixed arena
#: is made as large as the largest workspace of the pass's fastest plans
REPORT_STRATEGIES: Tuple[Tuple[str, str, object], ...] = (
    ("preallocated", "preallocated", {}),
    ("fixed_arena (sized)", "fixed_arena", "sized"),
    ("malloc_per_call", "malloc_per_call", {}),
    ("keyed_cache (256 MiB)", "keyed_cache", {"budget_bytes": 256 * MIB}),
    ("keyed_cache (32 MiB)", "keyed_cache", {"budget_bytes": 32 * MIB}),
    ("scratchpad", "scratchpad", {}),
    ("cupy_pool", "cupy_pool", {}),
    ("async_pool", "async_pool", {}),
)
#: the workspace caps of the budget curve, bytes (None: no cap)
BUDGET_CAPS = (0, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB, None)
TABLES = ("layers", "plans", "strategies", "timeline", "budget")
#: the presets the recorded grid holds a report for (batch 32, fp16, NHWC, inference)
RECORDED_PRESETS = ("resnet50", "resnext50_32x4d", "mobilenet_v2", "convnext_tiny", "vgg16", "deeplabv3_aspp")
#: seconds one step of a report may take (``LABKIT_STEP_BUDGET_S`` overrides): a distinct
#: convolution's build (at most half of it), autotune and checks, or one strategy's pass
STEP_BUDGET_S = 60.0
#: seconds past a step's budget before its worker is killed (its own budget stops it between
#: parts first; this catches a call that never returns)
KILL_GRACE_S = 15.0


def step_budget_s() -> float:
    """A report step's budget in seconds: `STEP_BUDGET_S`, or ``LABKIT_STEP_BUDGET_S`` when set."""
    raw = os.environ.get("LABKIT_STEP_BUDGET_S", "").strip()
    if not raw:
        return STEP_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise InvalidSpec("LABKIT_STEP_BUDGET_S", raw, "must be a number of seconds > 0")
    return value


# ---- what is measured -------------------------------------------------------------------------
def network_of(net, batch, dtype, layout, image) -> networks.Network:
    """The `Network` a report request names: a preset name, or a list of layers given as
    [name, ConvSpec or spec dict] pairs (what `labkit.report` passes for a list or a model)."""
    if isinstance(net, str):
        return networks.layers_of(net, batch=batch, dtype=dtype, layout=layout, image=image)
    if isinstance(net, (list, tuple)):
        net = [_pair_layer(item) if isinstance(item, (list, tuple)) else item for item in net]
    return networks.layers_of(net, batch=batch, dtype=dtype, layout=layout)


def _pair_layer(item) -> networks.Layer:
    """A [name, ConvSpec or spec dict] pair as a `Layer`."""
    if not (len(item) == 2 and isinstance(item[0], str)):
        raise InvalidSpec("net", item, "a layer given as a list must be a [name, spec] pair")
    spec = item[1] if isinstance(item[1], ConvSpec) else ConvSpec.from_dict(dict(item[1]))
    return networks.Layer(item[0], spec)


def pass_steps(layers: Sequence[networks.Layer], training: bool) -> List[Tuple[str, ConvSpec]]:
    """(layer name, spec) for every convolution call of one pass, in order."""
    steps = [(lay.name, lay.spec) for lay in layers]
    if training:
        for i in reversed(range(len(layers))):
            lay = layers[i]
            if i > 0:  # the network's input needs no gradient
                steps.append((lay.name, lay.spec.replace(direction="dgrad")))
            steps.append((lay.name, lay.spec.replace(direction="wgrad")))
    return steps


def _measure_spec(spec: ConvSpec, budget: Budget) -> Tuple[dict, List[dict]]:
    """Autotune every plan of ``spec`` and check the heuristic, fastest and smallest-workspace
    plans against the float64 reference, within ``budget`` (the build gets at most half of it).
    (summary, plan rows)."""
    import cupy

    from ..gpu import autotune, engine, reference, verify

    cg = engine.get_graph(spec, build_budget_s=budget.left / 2)
    ops = engine.Operands(spec)
    try:
        tuned = autotune.autotune(cg, ops, budget=budget)
        table = tuned.table
        ok = table[table.status == "ok"]
        smallest = int(ok.sort_values(["workspace_bytes", "gpu_us"]).iloc[0]["plan_index"])
        picks = {"heuristic": tuned.heuristic_index, "fastest": tuned.best_index, "smallest": smallest}
        errors = {c.plan_index: c.rel_error for c in verify.check_plans(cg, list(dict.fromkeys(picks.values())), ops)}
    finally:
        del ops
        cupy.get_default_memory_pool().free_all_blocks()
    tol = reference.tolerance_for(spec)
    cut = tuned.cut + cg.build_cut
    out = dict(tolerance=tol, max_rel_error=max(errors.values()), checked=all(e <= tol for e in errors.values()),
               plans_timed=len(ok), plans_cut=cut, status="ok",
               reason=f"{cut} plan(s) cut (not built or not timed to the end: see the plans table)" if cut else "")
    for role, index in picks.items():
        row = table[table.plan_index == index].iloc[0]
        out.update({f"{role}_plan": str(row.plan_name), f"{role}_gpu_us": float(row.gpu_us),
                    f"{role}_workspace_bytes": int(row.workspace_bytes), f"{role}_plan_index": int(index)})
    if not out["checked"]:
        bad = [cg.plan(i).name for i, e in errors.items() if e > tol]
        out.update(status="wrong", reason=f"plan(s) {', '.join(bad)} exceed the {spec.dtype} tolerance {tol:.1e}")
    plans = [dict(plan_index=int(r.plan_index), plan_name=str(r.plan_name), workspace_bytes=int(r.workspace_bytes),
                  gpu_us=float(r.gpu_us), tune_seconds=float(r.seconds), status="ok" if r.status == "ok" else str(r.status)[:200])
             for r in table.itertuples()]
    plans += [dict(plan_index=p.index, plan_name=p.name, workspace_bytes=-1, gpu_us=float("nan"), status=p.error[:200])
              for p in cg.plans if was_cut(p.error)]  # cut from the build
    return out, plans


def _keep_graphs(room: int) -> None:
    """Room in this process's graph cache for ``room`` graphs: every graph of the pass stays built
    from its spec's step to the strategies' passes."""
    from ..gpu import engine

    engine.graphs.max_entries = max(engine.graphs.max_entries, room)


#: seconds the report's worker may take to plan every layer's graph ahead (about 10-40 ms each)
AHEAD_BUDGET_S = 30.0


def ahead_step(specs: Sequence[ConvSpec]) -> int:
    """In the worker process: plan every layer's graph and queue all their runtime-compiled plans
    for its build workers (`labkit.gpu.engine.build_ahead`), so each `spec_step` finds its compiles
    under way or done. Returns how many plans were queued."""
    from ..gpu import engine

    return engine.build_ahead([(s, "none", None) for s in specs])


#: in the worker process: the inputs and outputs of the pass the strategy steps run, made by the
#: first and reused by the others (``key``: the pass's spec keys)
_PASS_OPERANDS: dict = dict(key=None, operands={})


def _drop_pass_operands() -> None:
    import cupy

    if _PASS_OPERANDS["operands"]:
        _PASS_OPERANDS.update(key=None, operands={})
        cupy.get_default_memory_pool().free_all_blocks()


def _pass_operands(steps) -> dict:
    key = tuple(spec.key for _, spec in steps)
    if _PASS_OPERANDS["key"] != key:
        _drop_pass_operands()
        _PASS_OPERANDS["key"] = key
    return _PASS_OPERANDS["operands"]


def spec_step(spec: ConvSpec, budget_s: float, room: int) -> Tuple[dict, List[dict]]:
    """One report step, run in the worker process (`labkit.gpu.isolated`): `_measure_spec` of
    ``spec`` within ``budget_s`` seconds, with room in the graph cache for ``room`` graphs (every
    graph of the pass stays built for the strategies' passes). A pass's operands kept by the
    strategy steps of a report that did not finish are freed first."""
    _drop_pass_operands()
    _keep_graphs(room)
    return _measure_spec(spec, Budget(budget_s, f"measuring {spec.label}"))


def strategy_step(label: str, name: str, options: dict, steps, choice: Dict[tuple, str], budget_s: float,
                  room: int, last: bool = True) -> Tuple[dict, List[dict]]:
    """One report step, run in the worker process: `_strategy_pass` under one strategy, each
    call with the plan named in ``choice`` (spec key -> plan name), within ``budget_s`` seconds.
    The pass's inputs and outputs are made by the first strategy step and kept for the next ones
    (about 1.3 s of a ResNet-50 pass at batch 32 on the H200, per strategy); ``last`` frees them."""
    _keep_graphs(room)
    try:
        return _strategy_step(label, name, options, steps, choice, budget_s)
    finally:
        if last:
            _drop_pass_operands()


def _strategy_step(label, name, options, steps, choice, budget_s):
    from ..gpu import engine

    index = {}
    for _, spec in steps:
        if spec.key not in index:
            named = [p.index for p in engine.get_graph(spec).runnable if p.name == choice[spec.key]]
            if not named:
                raise LabkitError(f"plan {choice[spec.key]} of {spec.label} did not build again in this worker")
            index[spec.key] = named[0]
    return _strategy_pass(label, name, options, steps, index, Budget(budget_s, f"strategy {label}"), _pass_operands(steps))


def _spec_columns(spec: ConvSpec) -> dict:
    return dict(direction=spec.direction, N=spec.N, C=spec.C, H=spec.H, W=spec.W, K=spec.K, R=spec.R, S=spec.S,
                stride=spec.stride[0], padding=spec.padding[0], dilation=spec.dilation[0], groups=spec.groups,
                flops=spec.flops)


def _strategy_pass(label: str, name: str, options: dict, steps, choice: Dict[tuple, int],
                   budget: Budget, operands: Optional[dict] = None) -> Tuple[dict, List[dict]]:
    """Run the pass under one strategy: a first pass from nothing held (the timeline), then a
    timed pass, checking ``budget`` between calls; ``operands`` the pass's inputs and outputs
    kept between strategies (`workspace.Runner`). (strategy row, timeline rows)."""
    import cupy

    from ..gpu import workspace

    checkpoint()
    announce(f"strategy {label}: first pass")
    row = dict(table="strategies", strategy=label, calls=len(steps))
    timeline: List[dict] = []
    strategy = runner = None
    try:
        strategy = workspace.make(name, **options)
        runner = workspace.Runner(strategy, fallback=True, operands=operands)
        st = strategy.stats
        for _, spec in steps:  # inputs and outputs first: not workspace, not in the timeline
            runner.operands(spec)
        for i, (layer, spec) in enumerate(steps):
            outer = st.peak_held_bytes
            st.peak_held_bytes = st.held_bytes
            call = runner.run(spec, choice[spec.key])
            during = st.peak_held_bytes
            st.peak_held_bytes = max(outer, during)
            timeline.append(dict(table="timeline", strategy=label, step=i, layer=layer, direction=spec.direction,
                                 held_bytes=during, held_after_bytes=st.held_bytes, workspace_bytes=call.workspace_bytes,
                                 fell_back=call.fell_back_from is not None))
            budget.check(f"the first pass, call {i} ({layer})")
        runner.stream.synchronize()
        announce(f"strategy {label}: timed pass")
        first = dataclasses.replace(st)
        first_fallbacks = runner.fallbacks
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(runner.stream)
        t0 = time.perf_counter()
        for _, spec in steps:
            runner.run(spec, choice[spec.key])
        host_us = (time.perf_counter() - t0) * 1e6
        end.record(runner.stream)
        end.synchronize()
        row.update(pass_gpu_us=cupy.cuda.get_elapsed_time(start, end) * 1000, pass_host_us=host_us,
                   host_us_per_call=host_us / len(steps),
                   peak_workspace_bytes=max(t["held_bytes"] for t in timeline), stats_peak_bytes=st.peak_held_bytes,
                   held_after_bytes=st.held_bytes, alloc_calls_first_pass=first.alloc_calls,
                   alloc_calls_per_pass=st.alloc_calls - first.alloc_calls,
                   alloc_us_first_pass=first.alloc_us_total, fallbacks_first_pass=first_fallbacks,
                   fallbacks_per_pass=runner.fallbacks - first_fallbacks,
                   describe=strategy.describe(), status="ok", reason="")
    except LabkitError as exc:
        row.update(status_row(exc))
        timeline = []
    finally:
        if runner is not None:
            runner.close()
        elif strategy is not None:
            strategy.close()
    return row, timeline


def budget_rows(plans, steps_specs: List[Tuple[int, str]], caps=BUDGET_CAPS) -> List[dict]:
    """The budget curve from timed plans: ``plans`` a DataFrame of the ``plans`` table,
    ``steps_specs`` (spec_id, direction) per call of the pass. One row per cap."""
    ok = plans[plans.status == "ok"]
    by_spec = {sid: sub for sid, sub in ok.groupby("spec_id")}
    best = {sid: float(sub.gpu_us.min()) for sid, sub in by_spec.items()}
    rows = []
    for cap in caps:
        total, changed, missing, peak = 0.0, 0, 0, 0
        for sid, _ in steps_specs:
            sub = by_spec.get(sid)
            fits = sub if sub is None or cap is None else sub[sub.workspace_bytes <= cap]
            if fits is None or fits.empty:
                missing += 1
                continue
            i = fits.gpu_us.idxmin()
            total += float(fits.gpu_us[i])
            peak = max(peak, int(fits.workspace_bytes[i]))
            changed += float(fits.gpu_us[i]) > best[sid]
        rows.append(dict(table="budget", cap_bytes=-1 if cap is None else int(cap), cap_label="no cap" if cap is None else fmt_bytes(cap),
                         pass_gpu_us=total if not missing else float("nan"), calls_changing_plan=int(changed),
                         calls_without_plan=int(missing), peak_workspace_bytes=peak))
    unlimited = rows[-1]["pass_gpu_us"]
    for r in rows:
        r["slowdown"] = r["pass_gpu_us"] / unlimited if unlimited else float("nan")
    return rows


@experiment
def network_report(net="resnet50", batch: Optional[int] = 32, dtype: Optional[str] = "fp16",
                   layout: Optional[str] = "NHWC", training: bool = False, image=224):
    """Every convolution of ``net`` (a preset name, or [name, ConvSpec] pairs) at ``batch``,
    ``dtype``, ``layout``: per layer the heuristic, fastest and smallest-workspace plans (checked
    against float64), every strategy over one pass, the memory timeline and the budget curve.
    One long DataFrame; see the module doc for its ``table`` s. Each step runs in the worker
    process within `step_budget_s` (see the module doc)."""
    if not isinstance(training, bool):
        raise InvalidSpec("training", training, "must be True or False")
    network = network_of(net, batch, dtype, layout, image)
    steps = pass_steps(network.layers, training)
    groups = networks.unique([networks.Layer(n, s) for n, s in steps])
    return _report(network, steps, groups, step_budget_s())


def _in_worker(step: str, args: tuple, budget_s: float, what: str):
    """``step(*args)`` of this module in the worker process (`labkit.gpu.isolated`), killed
    `KILL_GRACE_S` after ``budget_s``; the phases it announces are announced here too. The step
    takes its own turn on the GPU there (`labkit.gpu.lock`); this process lets its turn go meanwhile."""
    from ..gpu import isolated

    return isolated.run_step(f"{__name__}:{step}", args, budget_s + KILL_GRACE_S, what, announce, hold_gpu=True)


def _report(network, steps, groups, budget_s: float):
    spec_id = {g.spec.key: i for i, g in enumerate(groups)}
    total = len(groups) + len(REPORT_STRATEGIES)
    room = len(groups) + 16  # every graph of the pass stays built until the end
    measured: Dict[int, dict] = {}
    plan_rows: List[dict] = []
    rows: List[dict] = []

    def frame():
        return to_frame(_layer_rows(steps, spec_id, groups, measured) + plan_rows + rows)

    for i, g in enumerate(groups):
        checkpoint()
        if i == 1 and len(groups) > 2:  # the first layer drew; the other layers' compiles now go to build workers at once
            try:
                _in_worker("ahead_step", ([h.spec for h in groups[1:]],), AHEAD_BUDGET_S, "queueing the plan builds")
            except LabkitError:
                pass  # each step builds its own graph anyway
        t0 = time.perf_counter()
        try:
            summary, plans = _in_worker("spec_step", (g.spec, budget_s, room), budget_s, f"measuring {g.spec.label}")
        except LabkitError as exc:
            summary, plans = status_row(exc), []
        measured[i] = dict(summary, step_seconds=time.perf_counter() - t0)
        plan_rows += [dict(table="plans", spec_id=i, spec=g.spec.label, **p) for p in plans]
        report_progress(frame, i + 1, total, "steps")
    choice = {g.spec.key: measured[i]["fastest_plan"] for i, g in enumerate(groups) if measured[i]["status"] in ("ok", "wrong")}
    runnable = [(n, s) for n, s in steps if s.key in choice]
    sized = max([measured[spec_id[s.key]]["fastest_workspace_bytes"] for _, s in runnable] or [0])
    for j, (label, name, options) in enumerate(REPORT_STRATEGIES):
        checkpoint()
        opts = {"size_bytes": int(sized)} if options == "sized" else options
        srow, tl = dict(table="strategies", strategy=label, status="error", reason="no layer could be measured"), []
        if runnable:
            t0 = time.perf_counter()
            try:
                srow, tl = _in_worker("strategy_step", (label, name, opts, runnable, choice, budget_s, room,
                                                        j == len(REPORT_STRATEGIES) - 1), budget_s, f"strategy {label}")
            except LabkitError as exc:
                srow.update(status_row(exc))
            srow["step_seconds"] = time.perf_counter() - t0
        if len(runnable) < len(steps):
            srow["reason"] = (srow.get("reason") or "") + f" {len(steps) - len(runnable)} call(s) left out: not measured"
        rows += [srow] + tl
        report_progress(frame, len(groups) + j + 1, total, "steps")
    import pandas as pd

    plans_df = pd.DataFrame(plan_rows) if plan_rows else pd.DataFrame(columns=["spec_id", "workspace_bytes", "gpu_us", "status"])
    rows += budget_rows(plans_df, [(spec_id[s.key], s.direction) for _, s in steps])
    df = frame()
    df.attrs["network"] = network.name
    df.attrs["network_source"] = network.source
    df.attrs["step_budget_s"] = budget_s
    return df


def cut_counts(df) -> dict:
    """What a report did not measure to the end: ``plans`` a budget cut or timed out (unknown),
    ``slower_plans`` left after one eager call far slower than the best (known to lose), distinct
    ``layers`` whose step timed out or whose worker died, ``strategies`` that did not finish."""
    plans, layers, strategies = (table_of(df, t) for t in ("plans", "layers", "strategies"))
    status = plans["status"] if len(plans) else []
    cut = int(sum(map(was_cut, status)))
    return dict(plans=cut, slower_plans=int(sum(map(not_timed, status))) - cut,
                layers=int(layers[layers["status"].isin(("timed_out", "error"))]["spec_id"].nunique()) if len(layers) else 0,
                strategies=int((strategies["status"] != "ok").sum()) if len(strategies) else 0)


def _layer_rows(steps, spec_id, groups, measured) -> List[dict]:
    out = []
    for order, (name, spec) in enumerate(steps):
        sid = spec_id[spec.key]
        row = dict(table="layers", order=order, layer=name, spec_id=sid, spec=spec.label, count=groups[sid].count,
                   **_spec_columns(spec))
        row.update(measured.get(sid, dict(status="pending", reason="not measured yet")))
        out.append(row)
    return out


# ---- reading the long frame -----------------------------------------------------------------
def table_of(df, table: str):
    """Rows of one of `TABLES` from a `network_report` frame, with only that table's columns."""
    if table not in TABLES:
        raise InvalidSpec("table", table, f"must be one of {', '.join(TABLES)}")
    sub = df[df["table"] == table] if "table" in df.columns else df.iloc[0:0]
    sub = sub.dropna(axis=1, how="all").drop(columns=["table"], errors="ignore").reset_index(drop=True)
    sub.attrs = dict(df.attrs)
    return sub


# ---- charts -----------------------------------------------------------------------------------
STRATEGY_COLORS = ("#3c4043", "#1f77b4", "#d62728", "#2ca02c", "#98df8a", "#9467bd", "#ff7f0e", "#8c564b")
#: lines that lie on top of each other (several strategies hold the same bytes) stay visible
STRATEGY_DASHES = ("solid", "dash", "solid", "dot", "dashdot", "longdash", "dot", "solid")


def network_report_chart(df) -> go.Figure:
    """Three panels. Traces: 0 heuristic plan's GPU time per call, 1 fastest plan's (us, bars per
    call of the pass); 2-9 workspace held during each call of the first pass, one line per
    strategy (`REPORT_STRATEGIES`, MiB); 10 pass time against the workspace cap (ms)."""
    layers, timeline, budget = (table_of(df, t) for t in ("layers", "timeline", "budget"))
    fig = new_figure(rows=3, cols=1, vertical_spacing=0.11, row_heights=[0.34, 0.38, 0.28],
                     subplot_titles=("GPU time per call: the heuristic's plan and the fastest",
                                     "workspace memory held during each call (first pass, from nothing)",
                                     "pass time if every call keeps within a workspace cap"))
    ok = ok_rows(layers) if len(layers) else layers
    x = [int(o) for o in ok.get("order", [])]
    names = [n + ("" if d == "fprop" else f" ({d})") for n, d in zip(ok.get("layer", []), ok.get("direction", []))]
    for col, label, color in (("heuristic_gpu_us", "heuristic plan", COLORS["muted"]),
                              ("fastest_gpu_us", "fastest plan", COLORS["primary"])):
        ws = ok.get(col.replace("gpu_us", "workspace_bytes"), [None] * len(ok))
        fig.add_trace(go.Bar(x=x, y=[num(v) for v in ok.get(col, [])], name=label, marker_color=color,
                             customdata=[[n, fmt_bytes(w)] for n, w in zip(names, ws)], legendgroup="layers",
                             hovertemplate="call %{x}, %{customdata[0]}: %{y:.1f} us, workspace %{customdata[1]}<extra>"
                                           + label + "</extra>"),
                      row=1, col=1)
    for k, (label, _, _) in enumerate(REPORT_STRATEGIES):
        sub = timeline[timeline["strategy"] == label] if len(timeline) else timeline
        steps = [num(v) for v in sub.get("step", [])]
        fig.add_trace(go.Scatter(x=steps, y=[num(v) / MIB for v in sub.get("held_bytes", [])], mode="lines", name=label,
                                 line=dict(color=STRATEGY_COLORS[k], shape="hv", width=2, dash=STRATEGY_DASHES[k]),
                                 legendgroup="timeline",
                                 customdata=list(sub.get("layer", [])),
                                 hovertemplate="call %{x} (%{customdata}): %{y:.1f} MiB held<extra>" + label + "</extra>"),
                      row=2, col=1)
    fits = budget[budget["calls_without_plan"] == 0] if len(budget) else budget
    fig.add_trace(go.Scatter(x=list(fits.get("cap_label", [])), y=[num(v) / 1000 for v in fits.get("pass_gpu_us", [])],
                             mode="lines+markers", name="pass time within the cap", line=dict(color=COLORS["secondary"]),
                             customdata=[f"{s:.2f}x" for s in fits.get("slowdown", [])],
                             hovertemplate="cap %{x}: %{y:.2f} ms per pass (%{customdata} the uncapped)<extra></extra>"),
                  row=3, col=1)
    fig.update_yaxes(title_text="GPU time per call (us)", row=1, col=1)
    fig.update_yaxes(title_text="workspace held (MiB)", row=2, col=1)
    fig.update_xaxes(title_text="call of the pass", row=2, col=1)
    fig.update_yaxes(title_text="pass time (ms)", rangemode="tozero", row=3, col=1)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="call of the pass (hover for the layer)", row=1, col=1)
    fig.update_xaxes(title_text="workspace cap", type="category", row=3, col=1)
    net = df.attrs.get("network") or (df.attrs.get("request") or {}).get("net")
    r = df.attrs.get("request") or {}
    detail = f"{net if isinstance(net, str) else 'your layers'}, batch {r.get('batch')}, {r.get('dtype')} {r.get('layout')}" + \
             (", training (forward + backward)" if r.get("training") else ", inference")
    note = ("Top: CUDA-graph replay medians of each call's plans. Middle: the most workspace each strategy held while "
            "a call ran. Bottom: sums of each call's measured plan times (the kernels alone, no launch gaps).")
    return finish(fig, df, "Workspace report: every convolution layer", detail=detail, note=note, height=1050, legend_rows=2)


# ---- summary ----------------------------------------------------------------------------------
def network_report_summary(df) -> Text:
    layers, strategies, budget = (table_of(df, t) for t in ("layers", "strategies", "budget"))
    if not len(layers):
        return Text("No layers in this report.")
    ok = ok_rows(layers)
    r = df.attrs.get("request") or {}
    parts = [f"**{len(layers)} convolution calls** ({layers['spec_id'].nunique()} distinct, each measured once)"
             f" at batch {r.get('batch')}, {r.get('dtype')} {r.get('layout')}."]
    cut = cut_counts(df)
    if cut["slower_plans"]:
        parts.append(f"{cut['slower_plans']} plan(s) were left after one eager call showed them over 6x slower than the "
                     "best so far (not timed further: they cannot win).")
    said = [f"**{n} {one if n == 1 else many}**" for n, one, many in (
        (cut["plans"], "plan", "plans"), (cut["layers"], "distinct layer", "distinct layers"),
        (cut["strategies"], "strategy", "strategies")) if n]
    if said:
        parts.append(f"Cut by a time budget: {', '.join(said)} (a step has {df.attrs.get('step_budget_s', STEP_BUDGET_S):g} s; "
                     "the tables say which and where each was stopped).")
    if len(ok):
        fast, heur = ok["fastest_gpu_us"].sum(), ok["heuristic_gpu_us"].sum()
        big = ok.loc[ok["fastest_workspace_bytes"].idxmax()]
        parts.append(f"Each call's fastest plan adds up to **{fmt_us(fast)}** per pass against {fmt_us(heur)} for the "
                     f"heuristic's picks. The largest workspace a fastest plan asks for is **{fmt_bytes(big['fastest_workspace_bytes'])}** "
                     f"({big['layer']}, {big['direction']}).")
        bad = int((~ok["checked"].astype(bool)).sum()) if "checked" in ok else 0
        parts.append("Every checked plan matched the float64 reference." if not bad else f"**{bad} call(s) failed the reference check.**")
    sok = ok_rows(strategies) if len(strategies) else strategies
    if len(sok) and len(ok):
        low = sok.loc[sok["peak_workspace_bytes"].idxmin()]
        kernels = float(ok["fastest_gpu_us"].sum())
        parts.append(f"Run from Python under each strategy, one timed pass took {fmt_us(sok['pass_gpu_us'].min())} to "
                     f"{fmt_us(sok['pass_gpu_us'].max())} of GPU time, against {fmt_us(kernels)} for the kernels alone: "
                     f"the GPU mostly waits for launches ({fmt_us(sok['pass_host_us'].median() / max(len(layers), 1))} of host "
                     f"time per call), so these pass times rank host costs, and one pass is one sample. "
                     f"**{low['strategy']}** held the least workspace at its peak ({fmt_bytes(low['peak_workspace_bytes'])}); "
                     f"malloc_per_call holds nothing between calls but allocates on every call that needs a workspace.")
    capped = budget[(budget["cap_bytes"] == 64 * MIB)] if len(budget) else budget
    if len(capped) and capped.iloc[0]["calls_without_plan"] == 0:
        c = capped.iloc[0]
        parts.append(f"With a 64 MiB cap the pass would take {fmt_us(c['pass_gpu_us'])} ({c['slowdown']:.2f}x the uncapped; "
                     f"{int(c['calls_changing_plan'])} call(s) change plan).")
    return Text(" ".join(parts))


# ---- exercise checks --------------------------------------------------------------------------
def _report_frame(df):
    return frame_for(df, "network_report", net="resnet50", batch=32, dtype="fp16", layout="NHWC")


def largest_workspace_layer(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 09: in the ResNet-50 report (batch 32, fp16 NHWC), which layer's fastest plan asks
    for the largest workspace? (its name, e.g. 'layer1.0.conv2')"""
    layers = ok_rows(table_of(_report_frame(df), "layers"))
    big = layers.loc[layers["fastest_workspace_bytes"].idxmax()]
    if answer is None:
        return pending("Which layer's fastest plan needs the largest workspace?", "hover the top chart, or sort "
                       "report.layers by fastest_workspace_bytes.")
    a = as_word(answer, "a layer name", "layer1.0.conv2")
    if a not in set(layers["layer"]):
        raise InvalidSpec("answer", answer, "must be a layer name of the report (report.layers.layer)")
    mine = layers[layers["layer"] == a]["fastest_workspace_bytes"].max()
    if mine >= big["fastest_workspace_bytes"]:
        return say(True, f"{a}: {fmt_bytes(mine)} for its fastest plan ({big['fastest_plan']}).")
    return say(False, f"{a}'s fastest plan needs {fmt_bytes(mine)}; another layer needs more.")


def cap_for_budget(answer_mib=None, budget_mib: float = 16, df=None) -> CheckResult:
    """Lesson 09: you can spare ``budget_mib`` MiB of workspace. Which cap of the budget curve
    (in MiB) loses the least time while keeping within it?"""
    budget = table_of(_report_frame(df), "budget")
    within = budget[(budget["cap_bytes"] >= 0) & (budget["cap_bytes"] <= budget_mib * MIB) & (budget["calls_without_plan"] == 0)]
    if answer_mib is None:
        return pending(f"With {budget_mib:g} MiB to spare, which cap (MiB) loses the least time?",
                       "the bottom chart: the caps you can afford, and their pass times.")
    a = as_number(answer_mib, "a cap in MiB", 4)
    if within.empty:
        return say(False, f"no cap up to {budget_mib:g} MiB gives every call a plan here.")
    best = within.loc[within["pass_gpu_us"].idxmin()]
    if a * MIB > budget_mib * MIB:
        return say(False, f"{a:g} MiB is more than the {budget_mib:g} MiB you can spare.")
    mine = within[within["cap_bytes"] == round(a * MIB)]
    if mine.empty:
        return say(False, f"{a:g} MiB is not one of the caps measured ({', '.join(within['cap_label'])}).")
    m = mine.iloc[0]
    if m["pass_gpu_us"] <= best["pass_gpu_us"] * 1.0001:
        return say(True, f"{m['cap_label']}: {fmt_us(m['pass_gpu_us'])} per pass, {m['slowdown']:.2f}x the uncapped pass "
                         f"({int(m['calls_changing_plan'])} call(s) take a slower plan).")
    return say(False, f"{m['cap_label']} gives {fmt_us(m['pass_gpu_us'])}; a cap you can afford does better.")


def strategy_for_budget(answer: Optional[str] = None, budget_mib: float = 64, df=None) -> CheckResult:
    """Lesson 09: which strategy runs the ResNet-50 pass in the least GPU time while its peak
    workspace stays within ``budget_mib`` MiB? (a strategy label of report.strategies)"""
    strategies = ok_rows(table_of(_report_frame(df), "strategies"))
    within = strategies[strategies["peak_workspace_bytes"] <= budget_mib * MIB]
    if answer is None:
        return pending(f"Which strategy is fastest with a peak of at most {budget_mib:g} MiB?",
                       "report.strategies: peak_workspace_bytes and pass_gpu_us.")
    a = as_word(answer, "a strategy", "cupy_pool")
    if a not in set(strategies["strategy"]):
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(strategies['strategy'])}")
    mine = strategies[strategies["strategy"] == a].iloc[0]
    if mine["peak_workspace_bytes"] > budget_mib * MIB:
        return say(False, f"{a} peaks at {fmt_bytes(mine['peak_workspace_bytes'])}, over {budget_mib:g} MiB.")
    best = within["pass_gpu_us"].min()
    if mine["pass_gpu_us"] <= best * 1.03:  # within 3%: run-to-run noise of a pass
        return say(True, f"{a}: {fmt_us(mine['pass_gpu_us'])} per pass with a peak of {fmt_bytes(mine['peak_workspace_bytes'])}.")
    return say(False, f"{a} takes {fmt_us(mine['pass_gpu_us'])}; a strategy within budget takes {fmt_us(best)}.")


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: ResNet-50 only."""
    calls = [("network_report", dict(net=n, batch=32, dtype="fp16", layout="NHWC")) for n in RECORDED_PRESETS]
    return calls[:1] if quick else calls


LESSON = "09"
CHARTS = {"network_report": (network_report_chart, 11, network_report_summary)}
EXERCISES = (largest_workspace_layer, cap_for_budget, strategy_for_budget)
