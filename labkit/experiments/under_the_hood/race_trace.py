"""Reading the race's traced round: where the two streams' kernels ran at once (the shaded
stretches, summed into the overlap), when each stream's kernels ran, and the pauses in which the
GPU started nothing while the host went on launching. The chart, its summary and Exercise 4 read
the round through these, so the band drawn and the number stated come from the same stretches.
Microseconds, from the round's first traced record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from ...draw.units import us_text
from ...gpu.timing.trace import device_rows, merged_spans, overlap_spans

#: a pause: a stretch with no device work during which at least this many launches ended
PAUSE_QUEUED = 3


def overlap_stretches(df) -> List[list]:
    """The stretches in which stream 1's and stream 2's kernels ran at the same time, in time order
    (those that touch joined). Their total is the round's ``overlap_us``.

    Args:
        df: a race_timeline frame.

    Returns:
        ``[start_us, end_us]`` lists.
    """
    return merged_spans(overlap_spans(df, "stream 1", "stream 2") if len(df) else [])


def overlap_total(df) -> float:
    """The round's overlap: the total of `overlap_stretches`.

    Args:
        df: a `race_timeline` result.

    Returns:
        Microseconds.
    """
    return float(sum(e - s for s, e in overlap_stretches(df)))


@dataclass
class Pauses:
    """Stretches in which the GPU ran nothing while launches piled up.

    Attributes:
        count: how many.
        longest_us: the longest one (us).
        most_queued: the most launches that ended within one of them.
    """

    count: int
    longest_us: float
    most_queued: int


def launch_pauses(df) -> Pauses:
    """The gaps between the round's device work during which `PAUSE_QUEUED` or more launch calls
    ended: kernels launched but not started. A Python-launched round that the host paces (each call
    run before the next is launched) has none.

    Args:
        df: a race_timeline frame.

    Returns:
        `Pauses` (count 0 when there is none).
    """
    dev = device_rows(df)
    busy = merged_spans(zip(dev.start_us, dev.end_us))
    launches = df[(df.kind == "api") & df.name.astype(str).str.contains("Launch")]
    ends = np.sort(launches.end_us.to_numpy())
    found: List[Tuple[float, int]] = []
    for (_, gap_start), (gap_end, _) in zip(busy, busy[1:]):
        queued = int(np.searchsorted(ends, gap_end) - np.searchsorted(ends, gap_start))
        if queued >= PAUSE_QUEUED:
            found.append((gap_end - gap_start, queued))
    if not found:
        return Pauses(0, 0.0, 0)
    return Pauses(len(found), max(g for g, _ in found), max(q for _, q in found))


def launch_pace(df) -> Tuple[float, float]:
    """The host's and the GPU's time per convolution of the round.

    The host's is its span of launch calls, the GPU's its busy time, each over the round's
    convolutions (``runs``).

    Args:
        df: a `race_timeline` result.

    Returns:
        (host, GPU) microseconds per convolution.
    """
    launches = df[(df.kind == "api") & df.name.astype(str).str.contains("Launch")]
    runs = max(int(df["runs"].iloc[0]), 1)
    host = float(launches.end_us.max() - launches.start_us.min()) if len(launches) else 0.0
    return host / runs, float(df["busy_us"].iloc[0]) / runs


def stream_spans(df) -> dict:
    """Each stream's first kernel start and last kernel end.

    Args:
        df: a `race_timeline` result.

    Returns:
        ``{"stream 1": (start_us, end_us), ...}``.
    """
    dev = device_rows(df)
    return {row: (float(g.start_us.min()), float(g.end_us.max())) for row, g in dev.groupby("row")}


def band_words(df) -> str:
    """What the shaded stretches add up to, as the chart's note says it.

    Args:
        df: a `race_timeline` result.

    Returns:
        The total, how many stretches and from where to where; empty when there are none.
    """
    spans = overlap_stretches(df)
    if not spans:
        return ""
    n = f"{len(spans)} stretch{'es' if len(spans) > 1 else ''}"
    return (
        f"both streams' kernels at once, {us_text(overlap_total(df))} in {n} between {spans[0][0]:,.0f} and "
        f"{spans[-1][1]:,.0f} us (between two stretches, one stream was between kernels)"
    )


def _graph_launch_words(graphs) -> str:
    """How long the traced ``cudaGraphLaunch`` calls (``graphs``: their ``dur_us``) took the host, as a
    bracket for `why_they_met`; one duration when they all read the same; empty when there are none."""
    if not len(graphs):
        return ""
    low, high = us_text(graphs.min()), us_text(graphs.max())
    if low == high:
        return f" (stream 2's graph launched second; traced, each cudaGraphLaunch took the host {low})"
    return f" (stream 2's graph launched second; traced, a cudaGraphLaunch took the host {low} to {high})"


def why_they_met(df) -> Optional[str]:
    """Why the streams' kernels overlapped as much as they did in this traced round, read from its trace.

    Graph launch: the second stream's graph starts after the first stream's, so the two can share
    only the first stream's last stretch (the overlap is less: each stream pauses between kernels).
    The overlap itself is not restated: the sentence before the reason gives it.
    Python launch: the host paces the calls, and the streams meet where the GPU paused while
    launches piled up on both streams.

    Args:
        df: a `race_timeline` result.

    Returns:
        The reason, as words for a sentence; None when they never met.
    """
    if not len(df) or not overlap_stretches(df):
        return None
    launch = str(df["launch"].iloc[0])
    spans = stream_spans(df)
    if launch == "graph" and {"stream 1", "stream 2"} <= set(spans):
        (s1, e1), (s2, _) = spans["stream 1"], spans["stream 2"]
        graphs = df[(df.kind == "api") & (df.name == "cudaGraphLaunch")].dur_us
        took = _graph_launch_words(graphs)
        window = max(0.0, e1 - s2)
        met = (
            "did for less than that: between its kernels, a stream ran nothing"
            if us_text(overlap_total(df)) != us_text(window)
            else "did for all of it"
        )
        return (
            f"stream 2's kernels began {us_text(s2 - s1)} after stream 1's{took}, so the two could run "
            f"together only in the last {us_text(window)} of stream 1's {us_text(e1 - s1)}, and {met}"
        )
    p = launch_pauses(df)
    if p.count:
        times = f"{p.count} time{'s' if p.count > 1 else ''}"
        return (
            f"{times} the GPU started no kernel for up to {us_text(p.longest_us)} while the host went on "
            f"launching (up to {p.most_queued} launches waiting); when it resumed, both streams' waiting "
            "kernels ran at once"
        )
    return None
