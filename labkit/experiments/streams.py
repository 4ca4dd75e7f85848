"""Lesson 06, streams and scratchpads: one workspace shared by concurrent streams against one per
stream, launched from Python and as CUDA graphs.

Everything about these experiments lives here: the run functions (live: measured now; recorded:
answered from the recording), their charts, the summaries under them, the exercise checks, and
the calls the recorded grid holds."""

from __future__ import annotations

from typing import Optional

import plotly.graph_objects as go

from ..draw.plots import COLORS, concat, finish, fmt_bytes, new_figure, num
from ..draw.prose import Text, where
from ..errors import InvalidSpec, LabkitError
from .checking import CheckResult, as_flag, as_number, as_word, frame_for, pending, say
from .core import experiment, result, to_frame
from .panel_config import plain_panel


# ---- experiments ------------------------------------------------------------------------------
@experiment
def race(launch: str = "graph", streams: int = 2, min_runs: int = 1024):
    """Shared vs per-stream scratchpads on concurrent streams: corrupted outputs out of ``runs``."""
    from ..gpu import concurrency

    rows = [
        concurrency.scratchpad_race(shared=sh, launch=launch, streams=streams, min_runs=min_runs).as_dict()
        for sh in (True, False)
    ]
    df = to_frame(rows)
    df.insert(0, "scratchpad", ["shared" if s else "per-stream" for s in df.shared])
    return df


def race_all():
    """Every race the lessons use (graph and Python launch on 2 streams, graph on 4) as one DataFrame."""
    frames = [
        result("race", launch=la, streams=st, min_runs=1024)
        for la, st in (("graph", 2), ("python", 2), ("graph", 4))
    ]
    return concat(frames)


# ---- charts --------------------------------------------------------------------------------


def race_chart(df) -> go.Figure:
    """Corrupted outputs with one scratchpad shared by all streams vs one per stream, per launch
    method. ``df`` may hold several race calls (one x category each).
    Traces: 0 shared, 1 per-stream."""
    cases = list(dict.fromkeys(f"{r.launch} launch, {int(r.streams)} streams" for r in df.itertuples()))
    fig = new_figure()
    for sp, color in (("shared", COLORS["bad"]), ("per-stream", COLORS["good"])):
        sub = df[df["scratchpad"] == sp]
        by = {f"{r.launch} launch, {int(r.streams)} streams": r for r in sub.itertuples()}
        y = [int(by[c].mismatches_bitwise) if c in by else None for c in cases]
        txt = [f"{int(by[c].mismatches_bitwise)} / {int(by[c].runs)}" if c in by else "" for c in cases]
        fig.add_trace(
            go.Bar(
                x=cases,
                y=y,
                name=f"{sp} scratchpad",
                marker_color=color,
                text=txt,
                textposition="outside",
                hovertemplate="%{x}: %{text} outputs differ from the solo run<extra>" + sp + "</extra>",
            )
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="how the convolutions were launched")
    # counts of the outputs checked: whole numbers, up to the number checked (an all-zero case then
    # reads "0 of 1024", not an axis of 0.2, 0.4 ... counts)
    runs = [float(v) for v in df["runs"] if num(v)] if "runs" in df.columns else []
    fig.update_yaxes(
        title_text="corrupted outputs (count)",
        rangemode="tozero",
        tickformat=",d",
        **(dict(range=[0, max(runs) * 1.08]) if runs else {}),
    )
    label = str(df["spec_label"].iloc[0]) if "spec_label" in df.columns and len(df) else ""
    ws = fmt_bytes(df["workspace_bytes"].iloc[0]) if "workspace_bytes" in df.columns and len(df) else "?"
    detail = f"{label}, workspace {ws}; every output compared bit for bit with the same convolution run alone"
    return finish(fig, df, "Shared vs per-stream scratchpad on concurrent streams", detail, height=440)


# ---- summaries --------------------------------------------------------------------------------


def _tolerance_of(label: str) -> Optional[float]:
    """`reference.tolerance_for` the spec a `ConvSpec.label` names (None if it cannot be read)."""
    import re

    from ..gpu import reference
    from ..spec import ConvSpec

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
    label = df["spec_label"].iloc[0]
    tol = _tolerance_of(label)
    dtype = str(label).split(" ")[0]
    parts = [f"{where(df)}, {label}, workspace {fmt_bytes(df['workspace_bytes'].iloc[0])}."]
    for (la, st), sub in df.groupby(["launch", "streams"], sort=False):
        s = sub.set_index("scratchpad")
        bad, runs = int(s.loc["shared", "mismatches_bitwise"]), int(s.loc["shared", "runs"])
        err = float(s.loc["shared", "worst_rel_error"])
        if bad:
            how = f"worst relative error {err:.2g}" + (
                f", {err / tol:,.0f}x the {dtype} tolerance of {tol:.0e}" if tol else ""
            )
        else:
            how = f"worst relative error {err:.2g} against float64" + (
                f", within the {dtype} tolerance of {tol:.0e}: {dtype} rounding, not corruption"
                if tol and err <= tol
                else ""
            )
        parts.append(
            f"**{la} launch, {st} streams**: a shared scratchpad corrupted {bad} of {runs} outputs ({how}); "
            f"one scratchpad per stream corrupted {int(s.loc['per-stream', 'mismatches_bitwise'])}."
        )
    return Text(" ".join(parts))


# ---- exercise checks --------------------------------------------------------------------------------


def race_mismatches(answer=None, df=None) -> CheckResult:
    """Lesson 06: with one scratchpad shared by 2 streams and CUDA-graph launches, how many of the
    outputs were corrupted? (exact)"""
    df = frame_for(df, "race", launch="graph", streams=2, min_runs=1024)
    row = df[df["scratchpad"] == "shared"].iloc[0]
    truth = int(row["mismatches_bitwise"])
    if answer is None:
        return pending(
            "How many outputs did the shared scratchpad corrupt (graph launch, 2 streams)?",
            "the red bar's label: corrupted / runs.",
        )
    a = as_number(answer, "a count", 10)
    if a == truth:
        return say(
            True,
            f"{truth} of {int(row['runs'])} outputs differ from the solo run (worst relative error "
            f"{row['worst_rel_error']:.2g}); the per-stream scratchpad: "
            f"{int(df[df['scratchpad'] == 'per-stream']['mismatches_bitwise'].iloc[0])}.",
        )
    return say(False, f"{a:g} is {'too many' if a > truth else 'too few'}; the count is exact.")


def race_hidden_by(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 06: which launch method ('graph' or 'python') corrupted fewer outputs with a shared
    scratchpad (2 streams)?"""
    df = df if df is not None else race_all()
    sh = df[(df["scratchpad"] == "shared") & (df["streams"] == 2)].set_index("launch")["mismatches_bitwise"]
    if answer is None:
        return pending(
            "With a shared scratchpad, which launch method corrupted fewer outputs: 'graph' or 'python'?",
            "compare the red bars of the two 2-stream cases.",
        )
    a = as_word(answer, "a launch method", "graph").lower()
    if a not in sh.index:
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(sh.index)}")
    fewest = sh[sh == sh.min()].index.tolist()
    if a in fewest:
        return say(
            True,
            f"{a}: {int(sh[a])} corrupted vs {int(sh.drop(a).iloc[0]) if len(sh) > 1 else '-'}. A Python "
            "launch takes longer than this small convolution runs, so the streams rarely overlap: the bug "
            "hides, it is not absent.",
        )
    return say(False, "which launch method lets the two streams' kernels actually run at the same time?")


def scratchpad_shared_flag(answer: Optional[bool] = None, df=None) -> CheckResult:
    """Lesson 06: oneDNN's user-scratchpad mode hands one buffer to every primitive; run those
    primitives on concurrent streams and you reproduce the race. Which
    ``labkit.gpu.workspace.Scratchpad(shared=...)`` is that? (True/False)"""
    df = df if df is not None else frame_for(None, "race", launch="graph", streams=2, min_runs=1024)
    s = df.set_index("scratchpad")["mismatches_bitwise"]
    if answer is None:
        return pending(
            "Scratchpad(shared=True) or Scratchpad(shared=False) for one buffer used by all streams?",
            "'shared' is one buffer for every stream.",
        )
    a = as_flag(answer, "shared=?")
    if a:
        return say(
            True,
            f"shared=True is one buffer for all streams: {int(s['shared'])} corrupted outputs here; "
            f"shared=False (one per stream, what oneDNN asks of concurrent users): {int(s['per-stream'])}.",
        )
    return say(False, "shared=False gives each stream its own buffer; that is the safe mode, not the race.")


# ---- the recorded grid ---------------------------------------------------------------------------
def recorded_calls(quick: bool = False) -> list:
    """This lesson's (experiment, kwargs) calls in the recorded grid; ``quick``: the base calls only."""
    calls = [
        ("race", dict(launch="graph", streams=2, min_runs=1024)),
        ("race", dict(launch="python", streams=2, min_runs=1024)),
    ]
    return calls if quick else calls + [("race", dict(launch="graph", streams=4, min_runs=1024))]


LESSON = "06"
CHARTS = {"race": (race_chart, 2, race_summary)}
EXERCISES = (race_mismatches, race_hidden_by, scratchpad_shared_flag)
#: experiment -> its lesson panel (`labkit.present.widgets.panel`)
PANELS = {
    "race": plain_panel(
        "race",
        "Scratchpad race",
        dict(launch="graph", streams=2),
        "graph launch, 2 streams",
        lambda s: dict(launch=s["launch"], streams=s["streams"], min_runs=1024),
    )
}
