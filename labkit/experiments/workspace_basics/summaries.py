"""Lesson 01's summaries: the text under each chart, formatted from its numbers."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import (
    fmt_bytes,
    fmt_us,
    ok_rows,
    request_spec,
    shape_label,
)
from ...draw.prose import Text, where
from ...errors import LabkitError
from ..core import result

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
        " These times are Find's own: one run of each algorithm through the legacy API, as a ranking, "
        "not the "
        "steady-state time of a kernel."
    )
    frontend = _frontend_time(spec)
    if frontend is not None:
        text += (
            " The same convolution through the cuDNN frontend (its heuristic plan), timed as the "
            "median of CUDA-graph "
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
        f"({hi['dtype']} {hi['layout']} {hi['direction']}); the hungriest candidate plan of any "
        "variant wants "
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
            f"{fmt_bytes(same['workspace_bytes'].min())} to {fmt_bytes(big.workspace_bytes)} at "
            f"{f}={big.value}."
            if grows
            else f" The largest, {fmt_bytes(big.workspace_bytes)}, is at {f}={big.value}."
        )
    )
    return Text(text)
