"""Lesson 06, streams and scratchpads: one workspace shared by concurrent streams against one per
stream, launched from Python and as CUDA graphs.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

import re
from typing import Optional

import plotly.graph_objects as go

from ..draw.plots import COLORS, concat, finish, new_figure, num
from ..draw.prose import Text, where
from ..draw.units import size_text
from ..errors import InvalidSpec, LabkitError
from ..gpu.checks import reference
from ..practice import current, findings
from ..practice.findings import Problem
from ..simgpu import sequences
from ..spec import ConvSpec
from .checking import CheckResult, emit
from .core import experiment, result, to_frame
from .exercise import Exercise, equal, explain, flag, number_leaks, one_of
from .handson_check import verdict
from .panel_config import plain_panel
from .worked import slips, worked


# ---- experiments ------------------------------------------------------------------------------
@experiment
def race(launch: str = "graph", streams: int = 2, min_runs: int = 1024):
    """Shared vs per-stream scratchpads on concurrent streams: how many outputs a race corrupts.

    Args:
        launch: "graph" (each stream's convolutions as a CUDA graph) or "python".
        streams: concurrent streams.
        min_runs: the fewest convolutions in all.

    Returns:
        Two rows, ``scratchpad`` shared and per-stream, with `labkit.gpu.workspaces.concurrency.RaceResult`'s
        counts (``mismatches_bitwise`` out of ``runs``).
    """
    from ..gpu.workspaces import concurrency  # heavy: CuPy, live only

    rows = [
        concurrency.scratchpad_race(shared=sh, launch=launch, streams=streams, min_runs=min_runs).as_dict()
        for sh in (True, False)
    ]
    df = to_frame(rows)
    df.insert(0, "scratchpad", ["shared" if s else "per-stream" for s in df.shared])
    return df


def race_all(cases=None):
    """Several races as one DataFrame.

    Args:
        cases: (launch, streams) pairs; default every one the lessons use (graph and Python launch
            on 2 streams, graph on 4).

    Returns:
        Each race's rows, the first one's provenance in ``attrs``.
    """
    cases = cases or (("graph", 2), ("python", 2), ("graph", 4))
    return concat([result("race", launch=la, streams=st, min_runs=1024) for la, st in cases])


# ---- charts --------------------------------------------------------------------------------
#: the cases the lesson's chart compares: the race itself and the launch that hides it
LESSON_CASES = (("graph", 2), ("python", 2))


def _zero_lines(fig, cases: list, zeros: list, colors: list, *, gap: float) -> None:
    """Draw each zero count as a line across its bar's whole slot, in its scratchpad's colour.

    The slots of the scratchpads lie side by side, in category units: each category is 1 wide, less
    the gap between categories.

    Args:
        fig: the figure, changed in place.
        cases: the x categories, in order.
        zeros: each scratchpad's zero trace (its ``x``: the categories where nothing was corrupted).
        colors: each scratchpad's colour, in the same order.
        gap: the gap between categories (plotly's ``bargap``, a fraction of a category).
    """
    for g, color in enumerate(colors):
        for c in zeros[g].x:
            x0 = cases.index(c) - (1 - gap) / 2 + g * (1 - gap) / 2
            fig.add_shape(
                type="line",
                xref="x",
                yref="y",
                x0=x0,
                x1=x0 + (1 - gap) / 2,
                y0=0,
                y1=0,
                line=dict(color=color, width=4),
                layer="above",
            )


def race_chart(df) -> go.Figure:
    """Corrupted outputs with one scratchpad shared by all streams vs one per stream, per launch method.

    A count of zero is drawn as a flat line at zero across its bar's slot, labelled "0 / runs", in its
    scratchpad's colour. Traces: 0 shared (bars), 1 per-stream (bars), 2 shared zeros, 3 per-stream
    zeros.

    Args:
        df: one or several race results (one x category each).

    Returns:
        The ``go.Figure``.
    """
    cases = list(dict.fromkeys(f"{r.launch} launch, {int(r.streams)} streams" for r in df.itertuples()))
    fig = new_figure()
    zeros = []
    scratchpads = (("shared", COLORS["bad"]), ("per-stream", COLORS["good"]))
    for sp, color in scratchpads:
        sub = df[df["scratchpad"] == sp]
        by = {f"{r.launch} launch, {int(r.streams)} streams": r for r in sub.itertuples()}
        y = [int(by[c].mismatches_bitwise) if c in by else None for c in cases]
        txt = [f"{int(by[c].mismatches_bitwise)} / {int(by[c].runs)}" if c in by else "" for c in cases]
        fig.add_trace(
            go.Bar(
                x=cases,
                y=y,
                name=f"{sp} scratchpad",
                legendgroup=sp,
                offsetgroup=sp,
                marker_color=color,
                text=txt,
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"%{{x}}: %{{text}} outputs differ from the solo run<extra>{sp}</extra>",
            )
        )
        zero = [c for c, v in zip(cases, y) if v == 0]
        zeros.append(
            go.Scatter(
                x=zero,
                y=[0] * len(zero),
                mode="markers",
                name=f"{sp} scratchpad: none corrupted",
                legendgroup=sp,
                offsetgroup=sp,
                showlegend=False,
                marker=dict(symbol="line-ew-open", size=36, line=dict(width=4, color=color), color=color),
                opacity=0,  # for the hover: the line shape below draws the zero across the bar's slot
                cliponaxis=False,
                hovertemplate=f"%{{x}}: no output differs from the solo run<extra>{sp}</extra>",
            )
        )
    fig.add_traces(zeros)
    gap = 0.2
    _zero_lines(fig, cases, zeros, [color for _, color in scratchpads], gap=gap)
    fig.update_layout(barmode="group", scattermode="group", bargap=gap, bargroupgap=0)
    fig.update_xaxes(title_text="how the convolutions were launched")
    # counts of the outputs checked: whole numbers, up to the number checked (an all-zero case then
    # reads "0 / 1024", not an axis of 0.2, 0.4 ... counts)
    runs = [float(v) for v in df["runs"] if num(v)] if "runs" in df.columns else []
    fig.update_yaxes(
        title_text="corrupted outputs (count)",
        rangemode="tozero",
        tickformat=",d",
        **(dict(range=[0, max(runs) * 1.12]) if runs else {}),
    )
    label = str(df["spec_label"].iloc[0]) if "spec_label" in df.columns and len(df) else ""
    ws = size_text(df["workspace_bytes"].iloc[0]) if "workspace_bytes" in df.columns and len(df) else "?"
    detail = f"{label}, workspace {ws}; each output compared bit for bit with a solo run"
    return finish(fig, df, "Shared vs per-stream scratchpad on concurrent streams", detail, height=440)


# ---- summaries --------------------------------------------------------------------------------


def _tolerance_of(label: str) -> Optional[float]:
    """`reference.tolerance_for` the spec a `ConvSpec.label` names (None if it cannot be read)."""
    m = re.match(
        r"(\S+) (NCHW|NHWC) (\w+) (\d+)x(\d+)x(\d+)x(\d+) -> (\d+) (\d+)x(\d+) s(\d+) p(\d+)$", str(label)
    )
    if not m:
        return None
    d, lay, di, n, c, h, w, k, r, s, st, p = m.groups()
    try:
        return reference.tolerance_for(
            ConvSpec(
                N=int(n),
                C=int(c),
                H=int(h),
                W=int(w),
                K=int(k),
                R=int(r),
                S=int(s),
                stride=int(st),
                padding=int(p),
                dtype=d,
                layout=lay,
                direction=di,
            )
        )
    except LabkitError:
        return None


def race_summary(df) -> Text:
    """What the races found, in words: corrupted outputs and their worst error per launch method.

    Args:
        df: one or several race results.

    Returns:
        Markdown, as a `Text`.
    """
    label = df["spec_label"].iloc[0]
    tol = _tolerance_of(label)
    dtype = str(label).split(" ")[0]
    ws = int(df["workspace_bytes"].iloc[0])
    parts = [f"{where(df)}, {label}, workspace {size_text(ws)} ({ws:,} B)."]
    for (la, st), sub in df.groupby(["launch", "streams"], sort=False):
        s = sub.set_index("scratchpad")
        bad, runs = int(s.loc["shared", "mismatches_bitwise"]), int(s.loc["shared", "runs"])
        err = float(s.loc["shared", "worst_rel_error"])
        if bad:
            against = f", {err / tol:,.0f}x the {dtype} tolerance of {tol:.0e}" if tol else ""
            how = f"worst relative error {err:.2g}{against}"
        else:
            within = (
                f", within the {dtype} tolerance of {tol:.0e}: {dtype} rounding, not corruption"
                if tol and err <= tol
                else ""
            )
            how = f"worst relative error {err:.2g} against float64{within}"
        parts.append(
            f"**{la} launch, {st} streams**: a shared scratchpad corrupted {bad} of {runs} outputs ({how}); "
            f"one scratchpad per stream corrupted {int(s.loc['per-stream', 'mismatches_bitwise'])}."
        )
    return Text(" ".join(parts))


# ---- exercises --------------------------------------------------------------------------------
def _race(launch: str, streams: int):
    return result("race", launch=launch, streams=streams, min_runs=1024).set_index("scratchpad")


def _race_counts(truth: bool) -> str:
    """The two launches' corrupted outputs with one shared scratchpad (no reason: Exercise 1 asks it)."""
    py, gr = _race("python", 2), _race("graph", 2)
    return (
        f"Python launches: {int(py.loc['shared', 'mismatches_bitwise'])} of {int(py.loc['shared', 'runs'])} "
        "outputs corrupted with one shared scratchpad; CUDA graphs: "
        f"{int(gr.loc['shared', 'mismatches_bitwise'])} of {int(gr.loc['shared', 'runs'])}."
    )


def _python_why(truth: bool) -> str:
    return _race_counts(truth) + (
        " One launch from Python costs the host longer than this small convolution runs, so the two "
        "streams' kernels rarely run at the same time: the bug is there, hidden, and a change of timing "
        "can bring it out."
    )


def _python_wrong(answer: bool, truth: bool) -> str:
    """What the Python launches' race shows against a wrong answer: how many outputs the shared
    scratchpad corrupted, without the reason (Exercise 2 asks it)."""
    py = _race("python", 2)
    bad, runs = int(py.loc["shared", "mismatches_bitwise"]), int(py.loc["shared", "runs"])
    if bad:
        return (
            f"With Python launches on 2 streams sharing one scratchpad, {bad} of the {runs} outputs came "
            "out corrupted: they differ from the same convolution run alone."
        )
    return (
        f"With Python launches on 2 streams sharing one scratchpad, none of the {runs} outputs came out "
        "corrupted: each matched the same convolution run alone, bit for bit."
    )


race_python_prediction = Exercise(
    name="race_python_prediction",
    lesson="06",
    kind="predict",
    question=(
        "Predict before the chart: one scratchpad shared by 2 streams, every convolution launched from "
        "Python (no CUDA graph). Will any of the outputs be corrupted? True or False."
    ),
    truth=lambda: bool(_race("python", 2).loc["shared", "mismatches_bitwise"] > 0),
    parse=flag("any output corrupted?"),
    judge=equal,
    why=_race_counts,
    wrong=_python_wrong,
    hints=(
        "a corruption needs two streams' kernels using the workspace at the same moment.",
        "run the next cell and read the bars over 'python launch, 2 streams'.",
    ),
)


def _corrupted(streams: int) -> int:
    return int(_race("graph", streams).loc["shared", "mismatches_bitwise"])


def _four_against_two() -> str:
    """'more', 'fewer' or 'same': the shared scratchpad's corrupted outputs with CUDA graphs on 4
    streams against 2 (within 10 % is the same)."""
    four, two = _corrupted(4), _corrupted(2)
    return "more" if four > 1.1 * two else "fewer" if four < 0.9 * two else "same"


def _four_why(truth: str) -> str:
    four, two = _race("graph", 4), _race("graph", 2)
    bad4, bad2 = int(four.loc["shared", "mismatches_bitwise"]), int(two.loc["shared", "mismatches_bitwise"])
    runs = int(four.loc["shared", "runs"])
    text = (
        f"{bad4} of {runs} outputs with 4 streams, against {bad2} of {int(two.loc['shared', 'runs'])} with 2."
    )
    if truth == "more":
        text += (
            " With four streams on one workspace, each stream's kernels can meet three others' instead of "
            "one, so fewer outputs come through untouched."
        )
    if truth == "more" and bad4 < 2 * bad2:
        over = f", and twice {bad2} is more than the {runs} outputs checked" if 2 * bad2 > runs else ""
        text += (
            " But the count does not double: an output is corrupted once, however many streams overwrite its "
            f"scratch data{over}."
        )
    return (
        text + f" One scratchpad per stream: {int(four.loc['per-stream', 'mismatches_bitwise'])} corrupted."
    )


race_four_streams = Exercise(
    name="race_four_streams",
    lesson="06",
    kind="explore",
    question=(
        "Predict, then check on the race panel: with CUDA graphs on 4 streams sharing one scratchpad, will "
        "more, fewer or about the same number of outputs be corrupted as on 2 streams? 'more', 'fewer' or "
        "'same'."
    ),
    truth=_four_against_two,
    parse=one_of(("more", "fewer", "same"), "'more', 'fewer' or 'same'"),
    judge=equal,
    why=_four_why,
    hints=(
        "a corruption needs two streams' kernels on the workspace at once: with four streams, how many "
        "others can each stream's kernels meet?",
        "set the race panel's launch · streams control to 'graph 4' and compare its red bar with 'graph 2'.",
    ),
    leaks=lambda truth: number_leaks(float(_corrupted(4))),
    wrong_answers=lambda truth: [c for c in ("more", "fewer", "same") if c != truth],
)

# ---- explain, worked out: what one scratchpad per stream holds more ---------------------------------
#: the streams the worked exercise counts (the race panel's ``graph 4``)
MANY_STREAMS = 4


def _held_inputs() -> dict:
    return dict(
        workspace_bytes=int(_race("graph", MANY_STREAMS).loc["shared", "workspace_bytes"]),
        streams=MANY_STREAMS,
    )


def _held_model(workspace_bytes, streams) -> float:
    """Bytes that one scratchpad per stream holds beyond one shared scratchpad."""
    return (streams - 1) * workspace_bytes


def _held_why(truth: float) -> str:
    x = _held_inputs()
    text = (
        f"({x['streams']} - 1) x {x['workspace_bytes']:,} B = {truth:,.0f} B ({size_text(truth)}): what "
        "outputs that are right cost here, one workspace per stream that may run at once."
    )
    sizes = result("workspace_sizes", at_hand_only=True)
    if sizes is None:
        return text
    ok = sizes[(sizes["status"] == "ok") & (sizes["direction"] == "fprop")]
    big = ok[(ok["dtype"] == "fp16") & (ok["layout"] == "NCHW")]
    if big.empty:
        return text
    ws = int(big["heuristic_workspace_bytes"].iloc[0])
    extra = _held_model(ws, x["streams"])
    return text + (
        f" The price grows with the plan's workspace: the base convolution's fp16 NCHW plan (lesson 01) asks "
        f"{ws:,} B ({size_text(ws)}), and {x['streams']} streams of it would hold "
        f"{extra:,} B ({size_text(extra)}) more than one shared scratchpad."
    )


def _held_slips() -> list:
    x = _held_inputs()
    t = _held_model(**x)
    return [
        (
            x["streams"] * x["workspace_bytes"],
            "that is all the per-stream scratchpads; the shared one holds a workspace too: how many more?",
        ),
        (t / 1024, "that is in KiB; the answer is in bytes (1 KiB = 1,024 B)."),
        (t / 2**20, "that is in MiB; the answer is in bytes (1 MiB = 1,048,576 B)."),
        (
            t / 2**20 * 1e6,
            "that reads the workspace's MiB as millions of bytes; 1 MiB is 1,048,576 B (the summary gives "
            "the workspace in bytes too).",
        ),
        (x["workspace_bytes"], "that is one stream's more; count every stream beyond the first."),
    ]


per_stream_bytes = worked(
    name="per_stream_bytes",
    lesson="06",
    question=(
        f"The fix costs memory. On {MANY_STREAMS} streams (the race panel's 'graph {MANY_STREAMS}'), how "
        "many bytes more does one scratchpad per stream hold than one scratchpad shared by all? The race's "
        "plan asks for the workspace the summary under the first chart gives."
    ),
    inputs=_held_inputs,
    model=_held_model,
    rel=0.02,
    unit="bytes",
    why=_held_why,
    hints=(
        "A scratchpad per stream is one workspace per stream; the shared scratchpad is one workspace in all.",
        "Subtract the shared scratchpad's bytes from the per-stream ones', in bytes (1 KiB = 1,024 B).",
    ),
    wrong=slips(
        _held_slips,
        rel=0.02,
        unit="bytes",
        high="more than the model gives: one workspace per stream, and the shared one holds one too.",
        low="less than the model gives: every stream beyond the first adds a whole workspace.",
    ),
    wrong_answers=lambda truth: [truth * 4 / 3, truth / 1024, truth / 3],
)

RACE_REASONS = {
    "other_kernel": "A CUDA graph runs other kernels than a Python launch does, and one of them uses its "
    "workspace unsafely; the kernels Python launches do not.",
    "python_syncs": "Each Python launch waits for its convolution to finish before the next one is launched, "
    "so two streams never run at once; a graph does not wait.",
    "overlap": "A graph launches a whole batch at once, so both streams' kernels run together; from Python, "
    "each launch takes the host longer than its convolution runs.",
    "small_workspace": "A captured graph keeps a workspace smaller than the plan asks for, so its kernels "
    "write past it; Python launches get the full size.",
}


def _reasons_wrong(answer: str, truth: str) -> Optional[str]:
    gr = _race("graph", 2)
    if answer == "other_kernel":
        return (
            f"Both launch methods run plan {int(gr['plan_index'].iloc[0])} of the same graph (the race "
            "table's plan_index column): the same kernels."
        )
    if answer == "python_syncs":
        return (
            "labkit launches every convolution of a round on both streams before it waits for any "
            "(`concurrency.scratchpad_race`): nothing synchronises between launches."
        )
    if answer == "small_workspace":
        return (
            f"Every workspace is {size_text(gr['workspace_bytes'].iloc[0])}, what the plan asks for; one "
            "per stream, captured the same way, corrupted "
            f"{int(gr.loc['per-stream', 'mismatches_bitwise'])}."
        )
    return None


race_reason = explain(
    name="race_reason",
    lesson="06",
    question=(
        "Why does the shared scratchpad corrupt many outputs under CUDA graphs, and few or none with "
        "Python launches?"
    ),
    truth=lambda: "overlap",
    why=lambda t: _python_why(False),
    hints=(
        "what has to happen at the same moment for one stream to overwrite another's scratch data?",
        "compare what the host does between two launches with how long one convolution runs.",
    ),
    wrong=_reasons_wrong,
    choices=RACE_REASONS,
)


# ---- hands-on: reproduce the race ---------------------------------------------------------------
#: the reference solution of the hands-on cell ``%%handson scratchpad_race`` (`labkit.session.handson`)
SCRATCHPAD_RACE = '''\
from labkit.gpu.workspaces.workloads import RACE_SPEC  # a small fp16 NCHW convolution

gpu = lessons.device()


def race(shared, calls=64, rounds=8):
    """(wrong outputs, outputs checked): 2 streams, each one CUDA graph of `calls` calls, one
    workspace for both streams (shared) or one each; each call writes an output of its own."""
    streams = [gpu.stream() for _ in range(2)]
    convs = [gpu.conv(RACE_SPEC, seed=i, outputs=calls) for i in range(2)]
    plan = next(p for p in convs[0].plans if p.workspace_bytes)  # a plan that uses a workspace
    workspaces = [gpu.allocate(plan.workspace_bytes) for _ in range(1 if shared else 2)]
    graphs = []
    for i, (conv, stream) in enumerate(zip(convs, streams)):
        ws = workspaces[0 if shared else i]
        queue = lambda conv=conv, stream=stream, ws=ws: [
            conv.run(ws, stream=stream, plan=plan, output=j) for j in range(calls)
        ]
        graphs.append(gpu.capture(queue, stream))
    wrong = 0
    for _ in range(rounds):
        for graph, stream in zip(graphs, streams):  # both graphs in flight before waiting for either
            graph.launch(stream)
        wrong += sum(conv.wrong_outputs() for conv in convs)  # waits for the GPU, then looks
    for ws in workspaces:
        gpu.free(ws)
    return wrong, rounds * 2 * calls


my_race.update(shared=race(True), per_stream=race(False))
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"scratchpad_race": (SCRATCHPAD_RACE, True)}
RACE_NAMES = {
    "not_reproduced": "race not reproduced",
    "not_shared": "race not reproduced",
    "per_stream_wrong": "one workspace per stream",
    "more_checked_than_ran": "more outputs checked than calls ran",
}
RACE_HINTS = {
    "more_checked_than_ran": (
        "an output is checked only if a call wrote it: how many calls did your graphs hold, and how "
        "often did each stream launch its graph?",
        "count what ran: calls per graph x rounds x streams, for each of the two runs.",
    ),
    "not_shared": (
        "a race needs calls of two streams on one workspace at the same time: in your shared run, "
        "which stream did each graph run on, and which workspace did its calls get?",
        "in the shared run, capture each graph on its own stream (gpu.stream() each) and both with "
        "the same workspace (workspaces[0]).",
    ),
    "not_reproduced": (
        "for one stream to overwrite the other's scratch data, what has to happen at the same moment?",
        "launch both streams' graphs before you wait for either (conv.wrong_outputs() waits), so that "
        "their kernels run at the same time on the one workspace.",
    ),
    "per_stream_wrong": (
        "with a workspace per stream nothing is shared: what else could make an output wrong?",
        "give each stream its own workspace (workspaces[i]) and look at each stream's outputs with its "
        "own conv, after both graphs have run.",
    ),
}


def _theirs(gpu) -> str:
    """labkit's run of the same race on the same kind of GPU (and, simulated, the recording's)."""
    ref = _race("graph", 2)
    measured = f"{int(ref.loc['shared', 'mismatches_bitwise'])} of {int(ref.loc['shared', 'runs'])}"
    if not gpu.simulated:
        return f"labkit's run of the same race: {measured}"

    sim = sequences.race(True, "graph", recording=gpu.device.recorded)
    return (
        f"labkit's run of the same race on a GPU {gpu.label}: {sim['corrupted']} of {sim['runs']}; "
        f"measured on the {gpu.gpu} when it was recorded: {measured}. The two count different things: "
        "the simulator, the calls that ran at the same time as one of the other stream's on the shared "
        "bytes; the GPU, the outputs that came out different"
    )


def _not_reproduced(launched, runs: int, gpu) -> Problem:
    """Why no output came out wrong: no workspace that calls on two streams used (kind ``not_shared``:
    both graphs on one stream, or a workspace each), or the calls did not run at the same time
    (``not_reproduced``)."""
    said = f"the shared workspace corrupted 0 of {runs} ({_theirs(gpu)})"
    streams_of: dict = {}
    for c in launched:
        streams_of.setdefault(c.workspace, set()).add(c.stream)
    if not any(len(s) > 1 for w, s in streams_of.items() if w is not None):
        return Problem(
            "not_shared",
            f"no workspace was used by calls on two streams (one stream ran both graphs, or each had a "
            f"workspace of its own): {said}",
        )
    return Problem("not_reproduced", said)


def race_reproduced(counts) -> CheckResult:
    """Check a learner's reproduction of the race (hands-on ``scratchpad_race``), on this GPU or on one
    simulated from the recording.

    Args:
        counts: ``{"shared": (wrong, checked), "per_stream": (wrong, checked)}``: outputs that
            are wrong, and outputs checked, with one workspace shared by both streams and with one
            per stream.

    Returns:
        A `CheckResult`: right when the shared workspace corrupted outputs, one per stream did not,
        and nothing is left allocated; the message names the race as reproduced, hidden (none
        corrupted) or wrongly counted.
    """
    try:
        (bad, runs), (safe_bad, safe_runs) = counts["shared"], counts["per_stream"]
        bad, runs, safe_bad, safe_runs = (int(v) for v in (bad, runs, safe_bad, safe_runs))
    except (KeyError, TypeError, ValueError):
        return emit(
            False,
            "my_race needs shared=(wrong, checked) and per_stream=(wrong, checked).",
            "no answer yet",
        )
    if min(runs, safe_runs) <= 0 or not (0 <= bad <= runs and 0 <= safe_bad <= safe_runs):
        raise InvalidSpec("my_race", counts, "each count is (wrong, checked) with 0 <= wrong <= checked > 0")
    gpu = current()
    if not gpu.launches[gpu.cell_mark.launches :]:
        return emit(
            False, f"no call ran on the GPU ({gpu.label}): run the hands-on cell above.", "no answer yet"
        )
    wrong = (
        "calls marked corrupt (their kernels overlapped on shared bytes)"
        if gpu.simulated
        else "outputs wrong"
    )
    ran = (
        f"The shared workspace: {bad} of {runs} {wrong}; one per stream: {safe_bad} of "
        f"{safe_runs} ({gpu.label})."
    )
    launched = gpu.launches[gpu.cell_mark.launches :]
    problems = [p for p in findings.collect(gpu, gpu.cell_mark) if p.kind != "race"]
    if runs + safe_runs > len(launched):
        problems.append(
            Problem(
                "more_checked_than_ran",
                f"you count {runs} + {safe_runs} outputs checked, but {len(launched)} calls ran in this cell",
            )
        )
    if safe_bad:
        problems.append(Problem("per_stream_wrong", f"{safe_bad} of {safe_runs}: that should never happen"))
    if not bad:
        problems.append(_not_reproduced(launched, runs, gpu))
    if problems:
        return verdict("race_reproduced", ran, problems, right="", hints=RACE_HINTS, names=RACE_NAMES)
    return verdict(
        "race_reproduced",
        ran,
        [],
        right=f"Race reproduced, and none with a workspace per stream ({_theirs(gpu)}).",
    )


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's calls in the recorded grid.

    Args:
        quick: the base calls only.

    Returns:
        (experiment, kwargs) pairs.
    """
    calls = [
        ("race", dict(launch="graph", streams=2, min_runs=1024)),
        ("race", dict(launch="python", streams=2, min_runs=1024)),
    ]
    return calls if quick else calls + [("race", dict(launch="graph", streams=4, min_runs=1024))]


LESSON = "06"
CHARTS = {"race": (race_chart, 4, race_summary)}
#: in the order the lesson asks them (`check.solutions` numbers them so)
EXERCISES = (race_python_prediction, race_reason, race_four_streams, per_stream_bytes)
#: the checks hands-on cells call, as check.<name>
HANDS_ON_CHECKS = (race_reproduced,)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "race": plain_panel(
        "race",
        "Scratchpad race",
        dict(launch="graph", streams=2),
        "graph launch, 2 streams",
        lambda s: dict(launch=s["launch"], streams=int(s["streams"]), min_runs=1024),
        describe=lambda s: f"{s['launch']} launch, {s['streams']} streams",
        # recorded: one control listing the recorded pairs, so no launch is offered with a
        # number of streams it was not recorded with
        recorded_controls=("launch_streams",),
    )
}
