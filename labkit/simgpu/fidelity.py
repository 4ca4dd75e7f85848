"""How close the simulated GPU comes to the live one, as measured: the fidelity tables ``python -m
labkit bench sim-fidelity`` writes on a GPU (data/bench/sim_fidelity_<gpu>.csv: one row per
configuration, the live and the simulated figures side by side, a .json beside it), their goals,
and the sentence that says which goals a table meets and by how much it misses the others.

The goals: allocation counts and peak bytes exact; host time and GPU time per call within `GOAL`
of the live figure; lesson 06's race corrupting outputs in exactly the configurations that corrupt
live. Ratios are simulated over live. Bytes, microseconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Optional

import pandas as pd

from ..draw.plots import fmt_bytes
from ..env import gpu_label
from ..store.recordings import data_dir

#: the most a simulated time per call may differ from the live one, as a share of it
GOAL = 0.15


def bench_folder() -> Path:
    """data/bench: where the fidelity tables are committed.

    Returns:
        The folder's path (beside the recordings' data folder).
    """
    return data_dir().parent / "bench"


def tables(folder: Optional[Path] = None) -> Dict[str, Path]:
    """The committed fidelity tables, by GPU slug (e.g. "h100-80gb-hbm3").

    Args:
        folder: where to look; default `bench_folder`.

    Returns:
        GPU slug -> the table's CSV path, in name order.
    """
    folder = Path(folder) if folder else bench_folder()
    return {p.stem[len("sim_fidelity_") :]: p for p in sorted(folder.glob("sim_fidelity_*.csv"))}


def load(path: Path) -> pd.DataFrame:
    """A fidelity table, its .json beside it in ``attrs["meta"]``.

    Args:
        path: the table's CSV.

    Returns:
        Its rows; ``attrs["meta"]`` the side file's metadata (empty without one), ``attrs["path"]``
        the path.
    """
    df = pd.read_csv(path)
    side = Path(path).with_suffix(".json")
    df.attrs["meta"] = json.loads(side.read_text()) if side.is_file() else {}
    df.attrs["path"] = str(path)
    return df


def _ok(df: pd.DataFrame, side: str) -> pd.Series:
    return df.get(f"{side}_status", pd.Series("", index=df.index)).fillna("") == "ok"


def _where(r) -> str:
    streams = f"{int(r.streams)} stream{'s' if int(r.streams) > 1 else ''}"
    return f"{r.workload} {r.strategy}, {streams}, {r.launch}"


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _configs(rows: pd.DataFrame) -> str:
    """Configurations in a few words: the strategies that share launch and stream counts together."""
    by = {}
    for (name, launch), sub in rows.groupby([rows.strategy.str.split(" (", regex=False).str[0], "launch"]):
        by.setdefault((launch, tuple(sorted(sub.streams.astype(int).unique()))), []).append(name)
    return "; ".join(
        f"{_and(sorted(set(names)))} with {launch} launches on {_and([str(n) for n in streams])} "
        f"stream{'s' if streams != (1,) else ''}"
        for (launch, streams), names in sorted(by.items())
    )


def _time_goal(both: pd.DataFrame, col: str) -> dict:
    ratio = pd.to_numeric(both[col], errors="coerce")
    timed = both[ratio.notna()]
    off = (ratio[ratio.notna()] - 1).abs()
    within = off <= GOAL + 1e-12
    misses = off[~within]
    worst = timed.loc[misses.idxmax()] if len(misses) else None
    return dict(
        timed=len(timed),
        untimed=int(ratio.isna().sum()),
        within=int(within.sum()),
        missed=len(misses),
        median_miss=float(misses.median()) if len(misses) else 0.0,
        worst_miss=float(misses.max()) if len(misses) else 0.0,
        worst_where=_where(worst) if worst is not None else "",
        worst_ratio=float(ratio[misses.idxmax()]) if len(misses) else math.nan,
    )


def goals(df: pd.DataFrame) -> dict:
    """What a fidelity table shows against each goal.

    Args:
        df: a table from `load` (or ``bench sim-fidelity``).

    Returns:
        sequences, both (configurations that ran live and simulated), refused (on both sides, with
        the errors and where), one_sided and one_sided_as (ran on one side only: how and where),
        counts_exact,
        peak_exact, peak_misses (each miss: where, live and simulated bytes), host and gpu (from
        `_time_goal`: timed, untimed, within, missed, median_miss, worst_miss, worst_where,
        worst_ratio), race and race_as_live.
    """
    seq, race = df[df.workload != "race"], df[df.workload == "race"]
    live_ok, sim_ok = _ok(seq, "live"), _ok(seq, "sim")
    both = seq[live_ok & sim_ok]
    refused = seq[~live_ok & ~sim_ok]
    one_sided = seq[live_ok != sim_ok]
    counts = (both.live_alloc_calls == both.sim_alloc_calls) & (
        both.live_warmup_alloc_calls == both.sim_warmup_alloc_calls
    )
    peaks = both.live_peak_bytes == both.sim_peak_bytes
    return dict(
        sequences=len(seq),
        both=len(both),
        refused=len(refused),
        refused_as=sorted({f"live {r.live_status}, simulated {r.sim_status}" for r in refused.itertuples()}),
        refused_where=_configs(refused) if len(refused) else "",
        one_sided=len(one_sided),
        one_sided_as=[
            f"live {live}, simulated {sim}: {_configs(sub)}"
            for (live, sim), sub in one_sided.groupby(
                [one_sided.live_status.astype(str), one_sided.sim_status.astype(str)]
            )
        ],
        counts_exact=int(counts.sum()),
        peak_exact=int(peaks.sum()),
        peak_misses=[
            (_where(r), int(r.live_peak_bytes), int(r.sim_peak_bytes)) for r in both[~peaks].itertuples()
        ],
        host=_time_goal(both, "host_ratio"),
        gpu=_time_goal(both, "gpu_ratio"),
        race=len(race),
        race_as_live=int(race.race_verdict_match.fillna(False).astype(bool).sum()) if len(race) else 0,
    )


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _time_sentence(name: str, g: dict) -> str:
    missed = (
        f"; the other {g['missed']} miss by a median {_pct(g['median_miss'])}, the worst by "
        f"{_pct(g['worst_miss'])} ({g['worst_where']}: simulated {g['worst_ratio']:.2f} times live)"
        if g["missed"]
        else ""
    )
    untimed = (
        f"; {g['untimed']} with no simulated time (a number the calibration lacks stops its clock)"
        if g["untimed"]
        else ""
    )
    return f"{name} per call within {_pct(GOAL)} in {g['within']} of {g['timed']}{missed}{untimed}"


def sentences(df: pd.DataFrame) -> List[str]:
    """What a fidelity table says against each goal, as sentences (the misses and by how much).

    Args:
        df: a fidelity table (`load`).

    Returns:
        The sentences, in order: what ran, the counts, bytes and times against `GOAL`, and the race
        where the table has it; every number computed from ``df``.
    """
    meta = df.attrs.get("meta", {})
    g = goals(df)
    when = ", ".join(str(v) for v in (meta.get("date"), meta.get("git_commit")) if v)
    refused = (
        f"; {g['refused']} ({g['refused_where']}) were refused on both sides ({'; '.join(g['refused_as'])})"
        if g["refused"]
        else ""
    )
    one_sided = (
        f"; {g['one_sided']} ran on one side only ({'; '.join(g['one_sided_as'])})" if g["one_sided"] else ""
    )
    out = [
        f"On the {gpu_label(meta.get('gpu'))} (measured {when}), {g['sequences']} sequences ran live and on "
        f"the GPU simulated from its recording: {g['both']} ran both ways{refused}{one_sided}."
    ]
    peak_misses = ""
    if g["peak_misses"]:
        worst = max(g["peak_misses"], key=lambda m: abs(m[2] - m[1]))
        peak_misses = (
            f" (the other {len(g['peak_misses'])} miss, the most on {worst[0]}: simulated "
            f"{fmt_bytes(worst[2])} against {fmt_bytes(worst[1])} live)"
        )
    host, gpu = _time_sentence("host time", g["host"]), _time_sentence("GPU time", g["gpu"])
    out.append(
        f"Of those {g['both']}: allocation counts exact in {g['counts_exact']}, peak bytes exact in "
        f"{g['peak_exact']}{peak_misses}; {host}; {gpu}."
    )
    if g["race"]:
        out.append(
            f"Lesson 06's race: the simulated GPU corrupts outputs where the live one does in "
            f"{g['race_as_live']} of {g['race']} configurations."
        )
    return out


def summary(df: pd.DataFrame) -> str:
    """What a fidelity table says, in one sentence a learner can read before any lesson (no workload
    or strategy named).

    Args:
        df: a fidelity table (`load`).

    Returns:
        The sentence; every number computed from ``df``.
    """
    g = goals(df)
    race = (
        f"; it found lesson 06's race where the real GPU does in {g['race_as_live']} of {g['race']} cases"
        if g["race"]
        else ""
    )
    return (
        f"On the {gpu_label(df.attrs.get('meta', {}).get('gpu'))}, of {g['both']} sequences run both ways, "
        f"the simulated GPU made as many allocations as the real one in {g['counts_exact']}, held the same "
        f"peak memory in {g['peak_exact']}, and came within {_pct(GOAL)} of its host time in "
        f"{g['host']['within']} and of its GPU time in {g['gpu']['within']}{race}."
    )


def sentence(df: pd.DataFrame) -> str:
    """`sentences` as one paragraph.

    Args:
        df: a fidelity table (`load`).

    Returns:
        The sentences joined by spaces.
    """
    return " ".join(sentences(df))
