"""Lesson 04, fusion: convolution + bias + activation (+ residual add) as one cuDNN graph against
the unfused sequence: time, memory traffic and allocations.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from ..draw.plots import (
    COLORS,
    finish,
    fmt_bytes,
    fmt_us,
    grid,
    log_axis,
    log_if_wide,
    new_figure,
    not_ok_note,
    num,
    ok_rows,
    request_spec,
    shape_label,
)
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from ..gpu.unfused import DTYPES, UnfusedPath, check_spec
from ..signals.cancel import Budget
from ..signals.progress import report
from ..spec import ConvSpec
from .checking import CheckResult, as_number, as_word, frame_for, is_close, pending, say
from .core import BASE, MIB, as_spec, experiment, status_row, timed_plan, to_frame, variants
from .panel_config import SHAPE, spec_panel

# ---- experiments ------------------------------------------------------------------------------
#: the dtypes `fusion` compares (its unfused path needs CuPy elementwise kernels: no bf16 or fp8)
FUSION_DTYPES = DTYPES


def _bytes_model(spec: ConvSpec, epilogue: str, fused: bool) -> int:
    """Bytes a path must move through HBM, from tensor sizes (a model, not a counter reading)."""
    tb = spec.touched_bytes  # the conv reads the input pixels its windows cover
    y, b = tb["y"], spec.K * (2 if spec.output_dtype != "fp32" else 4)
    z = y if epilogue == "bias_relu_add" else 0
    if fused:
        return tb["x"] + tb["w"] + b + z + y
    moved = tb["x"] + tb["w"] + y  # conv
    moved += y + b + y  # + bias: read y and b, write t
    if z:
        moved += y + z + y  # + residual: read t and z, write t2
    moved += y + y  # relu: read, write
    return moved


@experiment
def fusion(spec: ConvSpec = BASE, epilogues: Sequence[str] = ("bias_relu", "bias_relu_add")):
    """Fused conv+bias+relu(+add) (one cuDNN graph, virtual intermediates) vs the unfused sequence
    (cuDNN conv, then CuPy kernels for bias, add and relu, each writing a real tensor).

    ``path``: ``fused`` runs the heuristic's first plan for the fused graph (what a framework that
    does not autotune gets); ``fused, autotuned`` the fastest of every plan cuDNN offers for it
    (`labkit.gpu.autotune`); ``unfused`` the heuristic conv plan and three (or two) CuPy kernels.

    ``allocated_bytes``: bytes of the tensors and workspace each path allocates (real allocations);
    ``modelled_hbm_bytes``: bytes each path must move through HBM (a model from tensor sizes);
    ``achieved_gb_s``: that model over the measured time.
    """
    import cupy

    from ..gpu import autotune, builds, engine, measure, memory, numerics, reference, verify

    spec = as_spec(spec)
    check_spec(spec)
    paths = ("fused", "fused, autotuned", "unfused")
    done = {}  # (epilogue index, path index) -> row
    cases = {}  # epilogue -> (operands, float64 reference)

    def table():
        df = to_frame([done[k] for k in sorted(done)])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    def case(epi):
        if epi not in cases:
            ops = engine.Operands(spec, epi)
            cases[epi] = (ops, verify.expected(spec, ops))
        return cases[epi]

    def fused_row(epi, cg, plan, us, **extra):
        """Run ``plan`` once more on a poisoned output, check it against the reference, make its row."""
        ops, want = case(epi)
        ops.poison_output()
        ws = memory.alloc(plan.workspace_bytes, "workspace")
        cg.execute(ops.arrays, int(ws.data.ptr), plan.index)
        cupy.cuda.get_current_stream().synchronize()
        moved = _bytes_model(spec, epi, True)
        return dict(
            gpu_us=us,
            allocated_bytes=ops.nbytes + plan.workspace_bytes,
            intermediate_bytes=0,
            modelled_hbm_bytes=moved,
            achieved_gb_s=moved / (us * 1e-6) / 1e9,
            rel_error=reference.relative_error(ops.output(), want),
            kernels_per_call="1 graph",
            plan_name=plan.name,
            **extra,
            status="ok",
            reason="",
        )

    def fused(epi):  # the heuristic's fused plan: what a framework that does not autotune gets
        cg = engine.get_graph(spec, epi, all_plans=False)
        plan, t = timed_plan(cg, ops=case(epi)[0])
        return fused_row(epi, cg, plan, t.median_us)

    def autotuned(
        epi,
    ):  # the fastest plan of the fused graph (saved winner, or every plan timed), checked like the heuristic's
        left = None if compiles is None else max(0.05, compiles.left)
        tuned = autotune.tuned_graph(spec, epi, ops=case(epi)[0], compile_budget_s=left)
        return fused_row(
            epi,
            tuned.graph,
            tuned.plan,
            tuned.gpu_us,
            plans_timed=tuned.plans_timed,
            plans_cut=tuned.plans_cut,
            compile_budget_s=None if compiles is None else compiles.seconds,
        )

    def unfused(epi):  # conv alone, then elementwise kernels on real tensors
        ops, want = case(epi)
        stream = measure.timing_stream()
        path = UnfusedPath(spec, ops, stream)
        tu = measure.graph_replay(path.run, stream, calls=5)
        ops.poison_output()
        with stream:
            path.run()
        stream.synchronize()
        got = engine.logical_view(numerics.decode(path.output, spec.output_dtype), spec.layout)
        inter = path.intermediate_bytes
        moved = _bytes_model(spec, epi, False)
        return dict(
            gpu_us=tu.median_us,
            allocated_bytes=ops.nbytes + inter + path.plan.workspace_bytes,
            intermediate_bytes=inter,
            modelled_hbm_bytes=moved,
            achieved_gb_s=moved / (tu.median_us * 1e-6) / 1e9,
            rel_error=reference.relative_error(got, want),
            kernels_per_call=f"conv + {path.elementwise_kernels} elementwise",
            plan_name=path.plan.name,
            status="ok",
            reason="",
        )

    # cheapest and most telling first: the heuristic's fused plan and the unfused sequence for
    # every epilogue, then the autotuned fused plans (every plan of a fused graph: seconds)
    order = [(e, p) for p in (0, 2) for e in range(len(epilogues))] + [(e, 1) for e in range(len(epilogues))]
    make = {0: fused, 1: autotuned, 2: unfused}
    # the fused graphs' compiles run while the rest is timed; a plan still compiling when the
    # compile budget is spent is left out of the autotune (its row says how many: plans_cut)
    seconds = builds.compile_budget_s()
    compiles = None if seconds is None else Budget(seconds, "compiling the fused graphs' plans")
    engine.build_ahead([(spec, epi, None) for epi in epilogues])
    for e, p in order:
        epi = epilogues[e]
        try:
            row = make[p](epi)
        except LabkitError as exc:
            if p == 2:
                raise
            row = status_row(exc)
        done[(e, p)] = dict(epilogue=epi, path=paths[p], **row)
        report(table, len(done), len(order), "paths measured")
    return table()


# ---- charts --------------------------------------------------------------------------------


FUSION_GRID = grid(
    rows=1,
    cols=3,
    horizontal_spacing=0.07,
    subplot_titles=("GPU time per call", "memory allocated", "HBM traffic (model)"),
)


def fusion_chart(df) -> go.Figure:
    """Fused conv+bias+relu(+add) (the heuristic's plan, and autotuned) vs the unfused sequence:
    GPU time, allocated bytes, modelled HBM traffic. Traces: (fused, fused autotuned, unfused) x
    (time us, allocated MiB, modelled MiB) = 9."""
    fig = new_figure(**FUSION_GRID)
    epis = list(dict.fromkeys(df["epilogue"]))
    ok = ok_rows(df)
    paths = (("fused", COLORS["good"]), ("fused, autotuned", COLORS["primary"]), ("unfused", COLORS["muted"]))
    # each path's values by epilogue, read once (a frame selection per bar trace was a third of the chart's time)
    by_path = {path: ok[ok["path"] == path].set_index("epilogue") for path, _ in paths}
    for c, (col, scale, fmt) in enumerate(
        (
            ("gpu_us", 1.0, fmt_us),
            ("allocated_bytes", MIB, fmt_bytes),
            ("modelled_hbm_bytes", MIB, fmt_bytes),
        ),
        start=1,
    ):
        for path, color in paths:
            sub = by_path[path]
            vals = [num(sub.loc[e, col]) if e in sub.index and col in sub.columns else None for e in epis]
            fig.add_trace(
                go.Bar(
                    x=epis,
                    y=[v / scale if v is not None else None for v in vals],
                    name=path,
                    legendgroup=path,
                    showlegend=c == 1,
                    marker_color=color,
                    text=[fmt(v) if v is not None else "" for v in vals],
                    textposition="auto",
                    hovertemplate=f"{path} %{{x}}: %{{text}}<extra></extra>",
                ),
                row=1,
                col=c,
            )
    times = [num(v) for v in ok["gpu_us"]] if "gpu_us" in df.columns else []
    if log_if_wide(times, 10) == "log":  # e.g. fp32: a 10 ms fused plan beside 0.3 ms bars
        time_axis = dict(title_text="GPU time (us, log)", type="log", **log_axis(times, max_ticks=6))
    else:
        time_axis = dict(title_text="GPU time (us)", type="linear")
    # every axis in one layout update (plotly validates each update call on its own)
    fig.update_layout(
        barmode="group",
        yaxis=time_axis,
        yaxis2=dict(title_text="allocated (MiB)"),
        yaxis3=dict(title_text="modelled HBM bytes (MiB)"),
        **{f"xaxis{c if c > 1 else ''}": dict(title_text="epilogue") for c in (1, 2, 3)},
    )
    spec = request_spec(df)
    detail = (
        (
            f"{spec.dtype} {spec.layout} {shape_label(spec)}; fused = one cuDNN graph (heuristic's plan / fastest "
            "plan), unfused = cuDNN conv + CuPy elementwise kernels"
        )
        if spec
        else ""
    )
    note = "HBM traffic is a model from tensor sizes (each tensor read/written once per kernel), not a counter reading"
    bad = not_ok_note(df, ("epilogue", "path"))
    return finish(
        fig,
        df,
        "Fusion: conv + bias + ReLU (+ residual add)",
        detail,
        note=note + (" · " + bad if bad else ""),
        height=460,
    )


# ---- summaries --------------------------------------------------------------------------------


def fusion_summary(df) -> Text:
    ok = ok_rows(df)
    parts = [f"{where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}:"]
    for epi in dict.fromkeys(ok["epilogue"]):
        sub = ok[ok["epilogue"] == epi].set_index("path")
        if {"fused", "unfused"} <= set(sub.index):
            f, u = sub.loc["fused"], sub.loc["unfused"]
            word = "faster" if f.gpu_us < u.gpu_us else "SLOWER"
            parts.append(
                f"**{epi}** fused {fmt_us(f.gpu_us)} vs unfused {fmt_us(u.gpu_us)} "
                f"({max(u.gpu_us, f.gpu_us) / min(u.gpu_us, f.gpu_us):.1f}x {word}); the unfused path allocates "
                f"{fmt_bytes(u.intermediate_bytes)} of intermediates and moves {fmt_bytes(u.modelled_hbm_bytes)} "
                f"through HBM against {fmt_bytes(f.modelled_hbm_bytes)} fused."
            )
            if "fused, autotuned" in sub.index:
                a = sub.loc["fused, autotuned"]
                n, cut = a.get("plans_timed"), a.get("plans_cut")
                cut = int(cut) if cut is not None and cut == cut else 0
                every = (
                    "every fused plan"
                    if n is None or n != n
                    else "the only fused plan cuDNN built here"
                    if int(n) == 1 and not cut
                    else f"the {int(n)} fused plans built within {a.get('compile_budget_s'):g} s"
                    if cut
                    else f"all {int(n)} fused plans"
                )
                if cut:
                    parts.append(
                        f"{cut} more fused plan{'s were' if cut > 1 else ' was'} still being compiled by cuDNN "
                        "(runtime-compiled kernels) and not timed: *measure again* once the compile is done "
                        "times every plan."
                    )
                if a.plan_name == f.plan_name:
                    parts.append(
                        f"Timing {every} confirms the heuristic's pick ({fmt_us(a.gpu_us)})"
                        + (
                            ": no fused plan cuDNN offers here beats the unfused sequence."
                            if a.gpu_us > u.gpu_us
                            else "."
                        )
                    )
                else:
                    word = "faster" if a.gpu_us < u.gpu_us else "still SLOWER"
                    parts.append(
                        f"Timing {every} finds {a.plan_name} at {fmt_us(a.gpu_us)}: "
                        f"{f.gpu_us / a.gpu_us:.1f}x faster than the heuristic's pick and "
                        f"{max(u.gpu_us, a.gpu_us) / min(u.gpu_us, a.gpu_us):.1f}x {word} than unfused."
                    )
    return Text(" ".join(parts))


# ---- exercise checks --------------------------------------------------------------------------------


def fusion_speedup(answer=None, df=None) -> CheckResult:
    """Lesson 04: how many times faster is the fused conv+bias+ReLU than the unfused sequence
    (base spec)? (within 10%)"""
    df = ok_rows(frame_for(df, "fusion"))
    sub = df[df["epilogue"] == "bias_relu"].set_index("path")
    truth = sub.loc["unfused", "gpu_us"] / sub.loc["fused", "gpu_us"]
    if answer is None:
        return pending(
            "How many times faster is fused bias_relu than unfused?", "the GPU-time panel, bias_relu bars."
        )
    a = as_number(answer, "a ratio", 2.0)
    if is_close(a, truth, 0.10):
        return say(
            True,
            f"{fmt_us(sub.loc['unfused', 'gpu_us'])} / {fmt_us(sub.loc['fused', 'gpu_us'])} = {truth:.1f}x: "
            f"the unfused path writes and re-reads {fmt_bytes(sub.loc['unfused', 'intermediate_bytes'])} "
            "of intermediates.",
        )
    if is_close(1 / a, truth, 0.10):
        return say(False, "inverted: unfused time over fused time.")
    return say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}.")


def fusion_saved_bytes(answer=None, df=None) -> CheckResult:
    """Lesson 04: how many bytes of intermediate tensors does the unfused bias_relu path
    allocate (the fused graph: none)? (within 1%)"""
    df = ok_rows(frame_for(df, "fusion"))
    row = df[(df["epilogue"] == "bias_relu") & (df["path"] == "unfused")].iloc[0]
    truth = float(row["intermediate_bytes"])
    if answer is None:
        return pending(
            "How many bytes of intermediates does unfused bias_relu allocate?",
            "the intermediate_bytes column of the table under the first fusion chart (bias_relu, unfused).",
        )
    a = as_number(answer, "bytes", 1000)
    if is_close(a, truth, 0.01):
        return say(
            True,
            f"{truth:,.0f} B ({fmt_bytes(truth)}): the conv output and the biased tensor, each the size of Y.",
        )
    if is_close(a * 2**20, truth, 0.01):
        return say(False, "that is MiB; answer in bytes.")
    return say(
        False,
        f"{a:,.0f} B is {'too much' if a > truth else 'too little'}; count the tensors the elementwise "
        "kernels write besides the final output.",
    )


def fusion_loses(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 04: in fp32 (base shape), for which epilogue is the fused graph SLOWER than the
    unfused sequence? Answer an epilogue name, or 'none'."""
    df = ok_rows(frame_for(df, "fusion", spec=BASE.replace(dtype="fp32")))
    slower = []
    for epi, sub in df.groupby("epilogue", sort=False):
        s = sub.set_index("path")
        if {"fused", "unfused"} <= set(s.index) and s.loc["fused", "gpu_us"] > s.loc["unfused", "gpu_us"]:
            slower.append(epi)
    if answer is None:
        return pending(
            "In fp32, which epilogue is slower fused than unfused ('none' if no such one)?",
            "the fp32 fusion chart's GPU-time panel.",
        )
    a = as_word(answer, "an epilogue or 'none'", "bias_relu").lower()
    valid = set(df["epilogue"]) | {"none"}
    if a not in valid:
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(sorted(valid))}")
    if (a == "none" and not slower) or a in slower:
        if not slower:
            return say(True, "fusion won for every epilogue here.")
        s = df[df["epilogue"] == a].set_index("path")
        return say(
            True,
            f"fused {fmt_us(s.loc['fused', 'gpu_us'])} (plan {s.loc['fused', 'plan_name']}) vs unfused "
            f"{fmt_us(s.loc['unfused', 'gpu_us'])}: fusion saves memory traffic only if a fast plan supports "
            "the fused graph; measure it before you trust it.",
        )
    return say(False, "compare fused and unfused GPU time per epilogue in the fp32 chart.")


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base call only."""
    calls = [("fusion", dict(spec=BASE))]
    if quick:
        return calls
    calls += [("fusion", dict(spec=s)) for s in variants()[1:] if s.N <= 64 and s.H <= 56]
    calls.append(("fusion", dict(spec=BASE.replace(dtype="fp32"))))
    return calls


LESSON = "04"
CHARTS = {"fusion": (fusion_chart, 9, fusion_summary)}
EXERCISES = (fusion_speedup, fusion_saved_bytes, fusion_loses)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "fusion": spec_panel(
        "fusion", "Fusion", SHAPE + ("dtype", "layout"), BASE, live_options=dict(dtype=FUSION_DTYPES)
    )
}
