"""How far separate timings of one plan fall apart: the noise band a workspace cap's ratio is read
against (`caps_noise`), one plan timed again in a separate autotune (`timed_again`), and the noise
two plans of one table are read against (`pick_noise`), from the caps table and the plans table
beside it (looked up, never measured)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ...draw.plots import num, ok_rows, request_spec
from ..core import beside


@dataclass(frozen=True)
class Noise:
    """How far separate timings of the unlimited best plan fall from the one the caps compare against.

    The timings are each autotune under a cap that kept the plan, and the plans table's own, with the
    10th-90th percentile of their repeats where recorded.

    Attributes:
        lo: the lowest, as a ratio to that timing (1.0 is that timing).
        hi: the highest, as a ratio.
        plan: the plan's name.
        timings: how many separate timings of it.
    """

    lo: float
    hi: float
    plan: str
    timings: int

    def holds(self, ratio: float) -> bool:
        """Whether a ratio lies inside the band: no difference the timings can tell apart.

        Args:
            ratio: a time over the compared one.

        Returns:
            True inside ``lo``..``hi``.
        """
        return self.lo - 1e-9 <= ratio <= self.hi + 1e-9


def plans_beside(df):
    """The plans table of a result's convolution, from where the result came from.

    Args:
        df: a result whose request names a convolution.

    Returns:
        The `plans` DataFrame; None when none is at hand there (nothing is measured for it).
    """
    spec = request_spec(df)
    return None if spec is None else beside(df, "plans", spec=spec)


def caps_noise(df) -> Optional[Noise]:
    """The timing noise of a caps table.

    Args:
        df: `caps`' result.

    Returns:
        The `Noise`; None when its unlimited best plan was timed only once with no spread recorded.
    """
    ok = ok_rows(df)
    if "best_plan" not in ok.columns or "cap_bytes" not in ok.columns:
        return None
    unl = ok[ok["cap_bytes"] == -1]
    if unl.empty:
        return None
    plan, t = str(unl["best_plan"].iloc[0]), float(unl["gpu_us"].iloc[0])
    same = ok[ok["best_plan"] == plan]
    cols = [c for c in ("gpu_us", "gpu_us_p10", "gpu_us_p90") if c in same.columns]
    xs = [float(v) for c in cols for v in same[c] if num(v)]
    n = len(same)
    pl = plans_beside(df)
    if pl is not None and "plan_name" in pl.columns:
        row = ok_rows(pl)[ok_rows(pl)["plan_name"] == plan]
        if not row.empty:
            xs += [
                float(row[c].iloc[0])
                for c in ("gpu_us", "gpu_us_p10", "gpu_us_p90")
                if c in row and num(row[c].iloc[0])
            ]
            n += 1
    if len(xs) < 2 or not t > 0:
        return None
    return Noise(min(xs) / t, max(xs) / t, plan, n)


@dataclass(frozen=True)
class Again:
    """One plan timed in the plans table and again in a separate autotune (the caps table, no cap).

    Attributes:
        index: the plan's index.
        first: its time in the plans table, microseconds.
        again: its time in the caps table's unlimited row, microseconds.
        spread: its own replays' 10th to 90th percentile in the plans table, as a fraction of ``first``.
    """

    index: int
    first: float
    again: float
    spread: float

    @property
    def gap(self) -> float:
        """How far the two timings are apart, as a fraction of the smaller."""
        return abs(self.again - self.first) / min(self.first, self.again)


def timed_again(plans_df, caps_df) -> Optional[Again]:
    """The unlimited best plan of a caps table, as the plans table and the caps table timed it.

    Args:
        plans_df: `plans`' result.
        caps_df: `caps`' result of the same convolution; None when not at hand.

    Returns:
        The `Again`; None when either table lacks the plan.
    """
    if caps_df is None or "cap_bytes" not in caps_df.columns:
        return None
    unl = ok_rows(caps_df)
    unl = unl[unl["cap_bytes"] == -1]
    ok = ok_rows(plans_df)
    mine = ok[ok["plan_name"] == str(unl["best_plan"].iloc[0])] if not unl.empty else ok.iloc[0:0]
    if mine.empty:
        return None
    a = float(mine["gpu_us"].iloc[0])
    spread = float((mine["gpu_us_p90"].iloc[0] - mine["gpu_us_p10"].iloc[0]) / a)
    return Again(int(mine["plan_index"].iloc[0]), a, float(unl["gpu_us"].iloc[0]), spread)


def pick_noise(plans_df, rows) -> Tuple[float, str, bool]:
    """How far timings of one plan move here: the larger of each row's own replays' spread (10th to
    90th percentile) and, where the caps table is at hand, how far a plan moved when autotuned again.

    Args:
        plans_df: `plans`' result.
        rows: the plans' rows to read the spread of (e.g. the heuristic pick's and the fastest's).

    Returns:
        (the noise as a fraction, a clause saying where it comes from, e.g. "plan 5's time moved
        2.2% between two separate autotunes", whether a second autotune was at hand); (0.0, "", False)
        when nothing says.
    """
    spec = request_spec(plans_df)
    again = timed_again(plans_df, None if spec is None else beside(plans_df, "caps", spec=spec))
    spreads = [
        (float((r.gpu_us_p90 - r.gpu_us_p10) / r.gpu_us), int(r.plan_index))
        for r in rows.itertuples()
        if num(getattr(r, "gpu_us_p10", None)) is not None and num(getattr(r, "gpu_us_p90", None)) is not None
    ]
    spread, plan = max(spreads, default=(0.0, None))
    if again is not None and again.gap >= spread:
        return (
            again.gap,
            f"plan {again.index}'s time moved {again.gap:.1%} between two separate autotunes",
            True,
        )
    if plan is None:
        return 0.0, "", again is not None
    said = f"plan {plan}'s replays spread {spread:.1%} from their 10th to their 90th percentile"
    return spread, said, again is not None
