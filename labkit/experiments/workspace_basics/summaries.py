"""Lesson 01's summaries: the text under each chart, formatted from its numbers."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import (
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.prose import Text, counted, listed, ratio_amount, where
from ...draw.spreads import spreads_overlap
from ...draw.units import size_text, us_text
from ...env import gpu_label
from ...errors import LabkitError
from ...store import recordings
from ..core import beside, from_recording
from .runs import SWEEP_VALUES

# ---- summaries --------------------------------------------------------------------------------


def algorithms_summary(df) -> Text:
    """Find's ranking of the classic algorithms, then what a workspace buys.

    What a workspace buys comes from the replay medians of the same convolution's frontend plans
    (`workspace_buys`). A second paragraph sets Find's times beside another recorded GPU's
    (`find_elsewhere`), where one holds the call.

    Args:
        df: `algorithms`' result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = df[df["find_status"] == "ok"]
    fast = ok.loc[ok["time_us"].idxmin()]
    zero = ok[ok["query_workspace_bytes"] == 0]
    bad = df[df["find_status"] != "ok"]
    spec = request_spec(df)
    sentences = [
        f"For {spec.label} ({where(df)}), cuDNN's Find ranks **{fast.algorithm}** first: "
        f"{us_text(fast.time_us)} with a workspace of {size_text(fast.query_workspace_bytes)}."
    ]
    if not zero.empty:
        z = zero.loc[zero["time_us"].idxmin()]
        sentences.append(
            f"The best algorithm that needs no workspace, {z.algorithm}, takes {us_text(z.time_us)}."
        )
    if len(bad):
        sentences.append(f"{len(bad)} of {len(df)} algorithms are not supported for this dtype and layout.")
    sentences.append(
        "These times are Find's own: one run of each algorithm through the legacy API, a ranking, not the "
        "steady-state time of a kernel, so their ratio does not say what a workspace buys."
    )
    sentences.append(workspace_buys(beside(df, "plans", spec=spec) if spec is not None else None))
    elsewhere = find_elsewhere(df)  # a paragraph of its own
    return Text(" ".join(sentences) + (f"\n\n{elsewhere}" if elsewhere else ""))


def workspace_buys(plans) -> str:
    """What a workspace buys, from a `plans` table (every frontend plan's CUDA-graph replay median):
    the fastest plan against the fastest that needs no workspace, with their replays' spreads.

    Args:
        plans: the convolution's `plans` table; None when it is not at hand.

    Returns:
        One or two sentences.
    """
    if plans is None or ok_rows(plans).empty:
        return (
            "What a workspace buys is measured in lesson 05, which times every frontend plan of this "
            "convolution as every other chart times (the median of CUDA-graph replays)."
        )
    ok = ok_rows(plans)
    fast = ok.loc[ok["gpu_us"].idxmin()]
    timed = (
        "Timed as every other chart times (the median of CUDA-graph replays; lesson 05's plans chart "
        f"draws each of the {len(ok)} frontend plans of this convolution)"
    )
    plan, time, workspace = f"`{fast.plan_name}`", us_text(fast.gpu_us), size_text(fast.workspace_bytes)
    if int(fast.workspace_bytes) == 0:
        return (
            f"{timed}, the fastest plan, {plan}, takes {time} and needs no workspace: "
            "here a workspace buys nothing."
        )
    zero = ok[ok["workspace_bytes"] == 0]
    if zero.empty:
        return (
            f"{timed}, the fastest plan, {plan}, takes {time} with a workspace of {workspace}; "
            f"none of the {len(ok)} plans runs without one."
        )
    z = zero.loc[zero["gpu_us"].idxmin()]
    without = f"the fastest that needs none, `{z.plan_name}`, takes {us_text(z.gpu_us)}"
    slower = f"{ratio_amount(z.gpu_us / fast.gpu_us)} slower"
    if not {"gpu_us_p10", "gpu_us_p90"} <= set(ok.columns):
        return (
            f"{timed}, the fastest plan, {plan}, takes {time} with a workspace of {workspace}; "
            f"{without}: **{slower}**. That is what the workspace buys here."
        )
    spreads = f"10th to 90th percentile of their replays: {_spread(fast)} and {_spread(z)}"
    if spreads_overlap(fast, z):
        return (
            f"{timed}, the fastest plan, {plan}, takes {time} with a workspace of {workspace}; "
            f"{without}: **{slower}** ({spreads}). "
            "Their spreads overlap: here a workspace buys nothing those timings can tell."
        )
    return (
        f"{timed}, the fastest plan, {plan}, takes {time} with a workspace of {workspace}; "
        f"{without}: **{slower}** ({spreads}). That is what the workspace buys here."
    )


#: a Find time this many times the same algorithm's on another GPU is set beside the two GPUs'
#: replay medians of the convolution (Find runs each algorithm once; a replay median is stable)
FIND_APART = 1.5


def _other_recording(df):
    """The first shipped recording, other than the one ``df`` came from, that holds its call."""
    a = df.attrs
    request = a.get("request")
    if not request:
        return None
    return next(
        (
            r
            for r in recordings.shipped()
            if str(r.path) != str(a.get("source")) and r.has("algorithms", request)
        ),
        None,
    )


def _fastest_replay(plans):
    """The fastest plan's row of a `plans` table (CUDA-graph replay medians); None without one."""
    ok = ok_rows(plans) if plans is not None else None
    return None if ok is None or ok.empty else ok.loc[ok["gpu_us"].idxmin()]


def find_elsewhere(df) -> str:
    """Find's times beside another recorded GPU's for the same call: the algorithm whose time differs
    most, what the two recordings share, and, where it differs `FIND_APART` or more, their replays.

    Args:
        df: `algorithms`' result.

    Returns:
        One or two sentences; "" when no other shipped recording holds the call.
    """
    other = _other_recording(df)
    try:
        there = other.lookup("algorithms", df.attrs["request"]) if other is not None else None
    except LabkitError:  # the call raised on that GPU
        there = None
    if there is None:
        return ""
    here_ok, there_ok = (
        d[(d["find_status"] == "ok") & (d["time_us"] > 0)].set_index("algorithm") for d in (df, there)
    )
    both = [a for a in here_ok.index if a in there_ok.index]
    if not both:
        return ""
    ratio = {a: float(there_ok.at[a, "time_us"]) / float(here_ok.at[a, "time_us"]) for a in both}
    top = max(both, key=lambda a: max(ratio[a], 1 / ratio[a]))
    slow = max(ratio[top], 1 / ratio[top])
    gpu = gpu_label(there.attrs.get("gpu"))
    gpu_slow = gpu_label((df if ratio[top] < 1 else there).attrs.get("gpu"))
    amount = ratio_amount(slow)
    longer = f"{amount} longer" if amount.endswith("%") else f"{amount} as long"
    said = [
        f"On {gpu}'s recording ({there.attrs.get('date')}, here {df.attrs.get('date')}; "
        f"{_shared(df, there, here_ok, there_ok, both)}), "
        f"Find's time differs most for {top}: {us_text(here_ok.at[top, 'time_us'])} here, "
        f"{us_text(there_ok.at[top, 'time_us'])} there, {longer} on {gpu_slow}{_the_others(ratio, top)}."
    ]
    spec = request_spec(df)
    if slow < FIND_APART or spec is None:
        return " ".join(said)
    try:
        theirs = _fastest_replay(from_recording("plans", other, spec=spec))
    except LabkitError:
        theirs = None
    mine = _fastest_replay(beside(df, "plans", spec=spec))
    if theirs is None or mine is None:
        return " ".join(said)
    apart = max(theirs.gpu_us, mine.gpu_us) / min(theirs.gpu_us, mine.gpu_us)
    replayed = (
        f"Replayed, the fastest frontend plan takes {us_text(mine.gpu_us)} here and "
        f"{us_text(theirs.gpu_us)} there ({ratio_amount(apart)} apart)"
    )
    said.append(
        f"{replayed}, far closer than Find's {amount}: Find ran {top} once on each GPU, and nothing in "
        f"the recordings says why that run took {longer} on {gpu_slow}."
        if apart * FIND_APART <= slow
        else f"{replayed}."
    )
    return " ".join(said)


def _shared(df, there, here_ok, there_ok, both: list) -> str:
    """What two recordings of one Find call share, or how they differ: cuDNN, the algorithms that
    ran, their workspaces."""
    mine, theirs = df.attrs.get("cudnn_backend"), there.attrs.get("cudnn_backend")
    cudnn = f"the same cuDNN {mine}" if mine == theirs else f"cuDNN {theirs}, here {mine}"
    if set(here_ok.index) != set(there_ok.index):
        return f"{cudnn}; {len(there_ok)} algorithms ran there, {len(here_ok)} here"
    moved = [
        a for a in both if here_ok.at[a, "query_workspace_bytes"] != there_ok.at[a, "query_workspace_bytes"]
    ]
    asked = (
        "each asking the same workspace"
        if not moved
        else f"{counted(len(moved), 'algorithm')} asking another workspace ({listed(moved)})"
    )
    return f"{cudnn}, the same {len(both)} algorithms, {asked}"


def _the_others(ratio: dict, top: str) -> str:
    """The range of the other algorithms' Find times there over here, as a clause; "" for none."""
    rest = sorted(r for a, r in ratio.items() if a != top)
    if not rest:
        return ""
    if len(rest) == 1:
        return f"; the other took {rest[0]:.2f}x its time here"
    return f"; the other {len(rest)} took {rest[0]:.2f}x to {rest[-1]:.2f}x their time here"


def _spread(row) -> str:
    if "samples" in row.index and row.samples < 2:  # stopped after one replay: no spread to give
        return f"{row.gpu_us:.1f} us (one replay)"
    return f"{row.gpu_us_p10:.1f} to {row.gpu_us_p90:.1f} us"


def workspace_sizes_summary(df) -> Text:
    """The range of workspaces the heuristic's plans ask for across the variants of one shape.

    Args:
        df: `workspace_sizes`' result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    hi = ok.loc[ok["heuristic_workspace_bytes"].idxmax()]
    lo = ok.loc[ok["heuristic_workspace_bytes"].idxmin()]
    spread = ok["max_workspace_bytes"].max()
    spec = request_spec(df)
    return Text(
        f"One shape ({shape_label(spec)}), {len(ok)} variants of dtype x layout x direction ({where(df)}). "
        f"The heuristic plan asks for anything from **{size_text(lo.heuristic_workspace_bytes)}** "
        f"({lo['dtype']} {lo['layout']} {lo['direction']}) to **{size_text(hi.heuristic_workspace_bytes)}** "
        f"({hi['dtype']} {hi['layout']} {hi['direction']}); "
        f"the hungriest candidate plan of any variant wants {size_text(spread)}. "
        "Same dims, very different workspaces." + _fp32_swap(ok)
    )


def _fp32_swap(ok) -> str:
    """A sentence on fp32 fprop's layouts, where they ask the other way round from fp16's ('' where
    they do not): the NCHW plan less in fp16, the NHWC plan less in fp32."""
    fprop = ok[ok["direction"] == "fprop"]
    sizes = {
        d: fprop[fprop["dtype"] == d].set_index("layout")["heuristic_workspace_bytes"]
        for d in ("fp16", "fp32")
    }
    if any(set(s.index) != {"NCHW", "NHWC"} for s in sizes.values()):
        return ""
    half, full = sizes["fp16"], sizes["fp32"]
    if not (half["NHWC"] < half["NCHW"] and full["NCHW"] < full["NHWC"]):
        return ""
    largest = (
        ", the largest of the whole chart" if full["NHWC"] == ok["heuristic_workspace_bytes"].max() else ""
    )
    return (
        f" In fp32 the layouts swap roles: the NCHW forward plan asks {size_text(full['NCHW'])} and the NHWC "
        f"one {size_text(full['NHWC'])}{largest} (lesson 00's kernel trace showed why: true-fp32 kernels "
        "work on NCHW data, so the NHWC plans convert into it)."
    )


#: how each sweep field reads its value off a spec (the base point of a sweep is where they agree)
_FIELD_OF = {"N": lambda s: s.N, "C=K": lambda s: s.C, "H=W": lambda s: s.H, "R=S": lambda s: s.R}


def _base_point(df, base) -> Optional[tuple]:
    """(GPU time, plan) of ``base`` itself in a sweep's table (its point at the base's value), or None."""
    ok = ok_rows(df)
    f = str(df["field"].iloc[0]) if len(df) else ""
    if f not in _FIELD_OF:
        return None
    at = ok[ok["value"] == _FIELD_OF[f](base)]
    return (float(at["gpu_us"].iloc[0]), str(at["plan_name"].iloc[0])) if len(at) else None


def _other_runs(df, base) -> list:
    """(where, GPU time, plan) of the same convolution as the sweep's base point in the other runs at
    hand: the sweeps of the same base along the other fields, and the layout table (lessons 00, 03)."""
    here = str(df["field"].iloc[0])
    out = []
    for field, values in SWEEP_VALUES.items():
        if field == here:
            continue
        other = beside(df, "sweep", field=field, values=values, base=base)
        point = _base_point(other, base) if other is not None else None
        if point is not None:
            out.append((f"the {field} sweep", *point))
    lay = beside(df, "layout", spec=base.replace(layout="NHWC"))
    if lay is not None:
        row = ok_rows(lay)[lambda t: t["layout"] == base.layout]
        if len(row):
            out.append(("the layout table", float(row["conv_gpu_us"].iloc[0]), str(row["plan_name"].iloc[0])))
    return out


def base_point_runs(df) -> str:
    """The sweep's base point beside the same convolution in the other runs at hand.

    It says why they differ: each run times it anew.

    Args:
        df: `sweep`'s result.

    Returns:
        Sentences, starting with a space; empty when there is nothing to compare.
    """
    base = request_spec(df)
    mine = _base_point(df, base) if base is not None else None
    others = _other_runs(df, base) if mine is not None else []
    if not others:
        return ""
    values = [mine[0]] + [v for _, v, _ in others]
    spread = (max(values) - min(values)) / min(values)
    f = str(df["field"].iloc[0])
    read = listed(f"{us_text(v)} in {where_}" for where_, v, _ in others)
    plans = {mine[1]} | {p for _, _, p in others}
    plan = "the same plan" if len(plans) == 1 else f"the plan its heuristic picked ({len(plans)} plans)"
    differ = f"these runs differ by up to {spread:.1%}" if spread >= 0.001 else "these runs agree within 0.1%"
    return (
        f" The base point, {f}={_FIELD_OF[f](base)}, reads {us_text(mine[0])} in this sweep's run; "
        f"the same convolution reads {read}. Each run times it anew (the median of its CUDA-graph "
        f"replays) with {plan}, and {differ}."
    )


def sweep_summary(df) -> Text:
    """What the sweep on screen shows: time and FLOPs from end to end, and where the workspace changes.

    Each switch of the heuristic's plan that changes the workspace it asks for is named, with both
    sizes.

    Args:
        df: `sweep`'s result.

    Returns:
        Markdown, as a `Text`.
    """
    ok = ok_rows(df)
    f = str(df["field"].iloc[0])
    first, last = ok.iloc[0], ok.iloc[-1]
    text = (
        f"From {f}={first.value} to {f}={last.value} ({where(df)}) the GPU time goes from "
        f"{us_text(first.gpu_us)} to {us_text(last.gpu_us)} ({last.gpu_us / first.gpu_us:.0f}x) for "
        f"{last.flops / first.flops:.0f}x the FLOPs; throughput goes from {first.tflops:.0f} to "
        f"{last.tflops:.0f} TFLOP/s."
    )
    text += base_point_runs(df)
    ws = [int(v) for v in ok["workspace_bytes"]]
    if not any(ws):
        return Text(
            text + f" No point asks for any workspace: the heuristic's plans here need 0 B all along {f}."
        )
    switches = [
        f"at {f}={b.value} it switches to plan {b.plan_name}, which asks for {size_text(b.workspace_bytes)} "
        f"(the plan before asked for {size_text(a.workspace_bytes)})"
        for (_, a), (_, b) in zip(ok.iloc[:-1].iterrows(), ok.iloc[1:].iterrows())
        if a.plan_name != b.plan_name and int(a.workspace_bytes) != int(b.workspace_bytes)
    ]
    big = ok.loc[ok["workspace_bytes"].idxmax()]
    same = ok[ok["plan_name"] == big.plan_name]
    grows = len(same) > 1 and same["workspace_bytes"].nunique() > 1
    more = [f"and {len(switches) - 3} more switch(es)"] if len(switches) > 3 else []
    largest = (
        f"Within plan {big.plan_name} it grows with the tensors, from "
        f"{size_text(same['workspace_bytes'].min())} to {size_text(big.workspace_bytes)} at {f}={big.value}."
        if grows
        else f"The largest, {size_text(big.workspace_bytes)}, is at {f}={big.value}."
    )
    jumps = "; ".join(switches[:3] + more)
    return Text(f"{text} Where the heuristic switches plans, the workspace jumps: {jumps}. {largest}")
