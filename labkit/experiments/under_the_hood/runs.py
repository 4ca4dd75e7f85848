"""The run functions of lesson 10, each a traced run (`labkit.gpu.timing.trace`: CUPTI activity records)
in one trace session: `kernels` (the kernels each plan launches), `fusion_kernels` (fused against
unfused), `strategy_timeline` (each workspace strategy's GPU timeline), `race_timeline` (the
race's overlapping streams), and `build_log` (cuDNN's own log of a build, untraced). Microseconds;
``host_us`` is measured untraced before the trace.
"""

from __future__ import annotations

import functools

from ...errors import InvalidSpec, LabkitError, status_row
from ...gpu.cudnn import buildlog
from ...gpu.timing import trace
from ...gpu.timing.ranges import annotate
from ...gpu.workspaces import workloads
from ...signals.progress import report
from ...spec import ConvSpec
from ..core import BASE, as_spec, experiment, to_frame

#: conv calls traced per plan (their kernels are averaged per call)
TRACED_CALLS = 3
#: convolutions per stream in the traced race round (lesson 06's batch)
RACE_CONVS = 64


def _kernel_rows(dev, calls: int, **tags) -> list:
    """One row per distinct kernel (by name) of a traced device frame: launches per call, mean
    microseconds per launch, share of the traced GPU time."""
    total = float(dev.dur_us.sum()) or float("nan")
    rows = []
    for name, sub in dev.groupby("name", sort=False):
        rows.append(
            dict(
                tags,
                kernel=name,
                role=sub.role.iloc[0],
                launches_per_call=len(sub) / calls,
                kernel_us=float(sub.dur_us.mean()),
                share=float(sub.dur_us.sum()) / total,
                grid=str(sub.grid.iloc[0]) if sub.grid.iloc[0] is not None else "",
                block=str(sub.block.iloc[0]) if sub.block.iloc[0] is not None else "",
            )
        )
    return rows


def _traced(fn, calls: int, stream, label: str):
    """``fn`` run ``calls`` times under a tracer, after one untraced warm-up call and one
    traced call that is not kept (CUPTI's set-up of each kernel): its device rows."""
    with stream:
        fn()
    stream.synchronize()
    with trace.Tracer(label) as t:
        with stream:
            fn()
            stream.synchronize()
            t.keep_from_now()
            for _ in range(calls):
                fn()
        stream.synchronize()
    df = t.frame()
    return trace.device_rows(df), df.attrs.get("dropped", 0)


def _traced_experiment(fn):
    """Run ``fn`` in one `labkit.gpu.timing.trace.session` (CUPTI attached and warmed before its traces,
    detached after them), keeping its name and doc for `experiment`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with trace.session():
            return fn(*args, **kwargs)

    return wrapper


@experiment
@_traced_experiment
def kernels(spec: ConvSpec = BASE):
    """Every runnable plan of a convolution: the kernels one call launches, traced.

    Args:
        spec: the convolution.

    Returns:
        One row per kernel of each plan (traced over `TRACED_CALLS` calls): its role, launches per
        call, microseconds per launch and share of the plan's GPU time. Per plan:
        ``kernels_per_call``, ``plan_kernel_us`` (the kernels' time per call, traced) and ``host_us``
        (host time to launch one call, measured untraced before the trace).
    """
    from ...gpu.cudnn import graph_cache, operands  # heavy: CuPy, live only
    from ...gpu.timing import measure  # heavy: CuPy, live only

    spec = as_spec(spec)
    cg = graph_cache.get_graph(spec)
    ops = operands.Operands(spec)
    stream = measure.timing_stream()
    rows = []
    plans = cg.runnable
    for i, plan in enumerate(plans):
        tags = dict(plan_index=plan.index, plan_name=plan.name, workspace_bytes=plan.workspace_bytes)
        try:
            with annotate(f"kernels of plan {plan.name}", "plan"):
                bound = cg.bind_with_workspace(ops.arrays, plan.index, stream)
                eager = measure.eager_us(bound.run, stream)
                n = 20 if eager < 200 else 5 if eager < 2000 else 2  # a 15 ms plan: 2 launches a repeat
                host = measure.host_dispatch(bound.run, stream, calls=n, repeats=5).median_us
                dev, dropped = _traced(bound.run, TRACED_CALLS, stream, f"plan {plan.name}")
            per_call = dict(
                kernels_per_call=len(dev) / TRACED_CALLS,
                plan_kernel_us=float(dev.dur_us.sum()) / TRACED_CALLS,
                host_us=host,
                eager_us=eager,
                status="ok",
                reason="",
            )
            rows += [dict(r, **per_call) for r in _kernel_rows(dev, TRACED_CALLS, **tags)]
        except LabkitError as exc:
            rows.append(dict(tags, **status_row(exc)))
        report(lambda: to_frame(rows), i + 1, len(plans), "plans traced")
    df = to_frame(rows)
    df.insert(0, "spec_label", spec.label)
    df.attrs["heuristic_plan"] = cg.default_plan.name
    return df


def heuristic_plan(df) -> str:
    """The plan cuDNN's heuristic picks in a `kernels` table.

    It is the table's own record of it, else the plan of the smallest index: the table holds the plans
    that compute the right result, in the heuristic's order, so its first is the pick.

    Args:
        df: `kernels`' result.

    Returns:
        The plan's name; empty for an empty table.
    """
    name = df.attrs.get("heuristic_plan")
    if name:
        return str(name)
    return str(df.sort_values("plan_index").plan_name.iloc[0]) if len(df) else ""


@experiment
@_traced_experiment
def fusion_kernels(spec: ConvSpec = BASE, epilogue: str = "bias_relu"):
    """The fused graph's kernels against the unfused path's, traced per call.

    The fused graph is the heuristic's plan of conv + ``epilogue``; the unfused path is the heuristic
    conv plan, then CuPy's elementwise kernels.

    Args:
        spec: the convolution (fprop).
        epilogue: "bias_relu" or "bias_relu_add".

    Returns:
        One row per kernel of each ``path`` (fused, unfused): its role, launches and time per call;
        per path ``kernels_per_call`` and ``path_kernel_us``.
    """
    from ...gpu.cudnn import graph_cache, operands, unfused  # heavy: CuPy, live only
    from ...gpu.timing import measure  # heavy: CuPy, live only

    spec = as_spec(spec)
    unfused.check_spec(spec)
    stream = measure.timing_stream()
    ops = operands.Operands(spec, epilogue)
    fused = graph_cache.get_graph(spec, epilogue, all_plans=False)
    fplan = fused.default_plan
    fb = fused.bind_with_workspace(ops.arrays, fplan.index, stream)
    plain = unfused.UnfusedPath(spec, ops, stream)
    rows = []
    for path, fn, plan in (("fused", fb.run, fplan.name), ("unfused", plain.run, plain.plan.name)):
        dev, _ = _traced(fn, TRACED_CALLS, stream, f"{path} {epilogue}")
        per = dict(
            kernels_per_call=len(dev) / TRACED_CALLS, path_kernel_us=float(dev.dur_us.sum()) / TRACED_CALLS
        )
        rows += [
            dict(r, **per)
            for r in _kernel_rows(dev, TRACED_CALLS, path=path, epilogue=epilogue, plan_name=plan)
        ]
    df = to_frame(rows)
    df.insert(0, "spec_label", spec.label)
    return df


@experiment
@_traced_experiment
def strategy_timeline(workload: str = "one_conv", calls: int = 8):
    """The GPU timeline of a few calls of a workload under each workspace strategy, in steady state.

    Every kernel is on its stream and the allocation, launch and synchronisation calls on the host,
    traced (`labkit.gpu.workspaces.workloads.traced_pass`). Times are microseconds from the strategy's first
    traced record.

    Args:
        workload: one of `labkit.gpu.workspaces.workloads.WORKLOADS` but "pressure".
        calls: calls per pass, 1 to 64.

    Returns:
        One row per traced record of each strategy. Per strategy: ``gpu_us``/``host_us`` of the same
        pass untraced (events; host clock), the traced ``busy_us`` and ``idle_share`` (the share of
        the pass in which the GPU waited for the host, from a pass traced with device records only);
        ``idle_share_api`` is the pass drawn (API calls traced too: CUPTI's host time widens the gaps).
    """
    if isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= 64:
        raise InvalidSpec("calls", calls, "must be an int from 1 to 64")
    if workload not in workloads.WORKLOADS or workload == "pressure":
        raise InvalidSpec(
            "workload",
            workload,
            f"must be one of {', '.join(w for w in workloads.WORKLOADS if w != 'pressure')}",
        )
    rows, n = [], len(workloads.BENCH_STRATEGIES)
    for i, (name, opts) in enumerate(workloads.BENCH_STRATEGIES):
        row, tr = workloads.traced_pass(name, opts, workload, calls)
        summary = {
            k: row.get(k)
            for k in (
                "strategy",
                "calls",
                "gpu_us",
                "host_us",
                "busy_us",
                "idle_share",
                "idle_share_api",
                "status",
                "reason",
            )
        }
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
    """One round of lesson 06's race, traced.

    `RACE_CONVS` convolutions per stream share one workspace, launched as CUDA graphs or from Python.

    Args:
        launch: "graph" or "python".
        streams: concurrent streams, 2 to 4.

    Returns:
        One row per kernel and API call; per frame ``overlap_us`` (stream 1 and stream 2 running at
        once: when a shared workspace is overwritten), ``busy_us``, ``corrupted`` and ``runs``.
    """
    from ...gpu.workspaces import concurrency  # heavy: CuPy, live only

    if isinstance(streams, bool) or not isinstance(streams, int) or not 2 <= streams <= 4:
        raise InvalidSpec("streams", streams, "must be an int from 2 to 4")
    r = concurrency.scratchpad_race(
        shared=True,
        launch=launch,
        streams=streams,
        convs_per_launch=RACE_CONVS,
        min_runs=RACE_CONVS * streams,
        tracer=lambda: trace.Tracer(f"race, {launch} launch"),
    )
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
    """Building a convolution's graph (every candidate plan) in a fresh process, with cuDNN's logs on.

    The frontend's log is at INFO and the backend's at warnings (`labkit.gpu.cudnn.buildlog`).

    Args:
        spec: the convolution.
        epilogue: its fused epilogue.

    Returns:
        One row per log line (``source``, ``line``, ``text``; tensor dumps and blank lines left out),
        with ``engine`` where a line names one.
    """
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
    return body.startswith("          ") or body.strip().startswith(("=====", '{"context"'))
