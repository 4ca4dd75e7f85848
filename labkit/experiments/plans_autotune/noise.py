"""How far separate timings of one plan fall apart: the noise band a workspace cap's ratio is read
against (`caps_noise`), from the caps table and the plans table beside it (looked up, never
measured)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
