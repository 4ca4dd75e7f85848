"""Lesson 02's run function (every strategy on one workload: live, measured now; recorded, answered
from the recording) and the workloads the recorded grid holds."""

from __future__ import annotations

from ...gpu.workspaces import workloads
from ...gpu.workspaces.workloads import WORKLOADS  # noqa: F401  (the recorded grid holds every workload)
from ..core import experiment


# ---- experiments ------------------------------------------------------------------------------
@experiment
def strategies(workload: str = "one_conv", repeats: int = 20):
    """Every workspace strategy on one workload (`labkit.gpu.workspaces.workloads`).

    Args:
        workload: one of `WORKLOADS`.
        repeats: passes over the workload's convolutions.

    Returns:
        One row per strategy (`labkit.gpu.workspaces.workloads.run_one`): host time and GPU time per call
        (us), allocations, peak and held workspace (bytes), fallbacks.
    """
    return workloads.run_all(workload, repeats)


def strategies_repeats(workload: str) -> int:
    """Passes a ``strategies`` call records for a workload (ResNet-50 passes are long: 3).

    Args:
        workload: one of `WORKLOADS`.

    Returns:
        The number of passes.
    """
    return 3 if workload.startswith("resnet") else 20
