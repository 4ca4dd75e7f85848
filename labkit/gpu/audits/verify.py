"""Run one cuDNN plan on fresh random inputs and check it against the float64 reference.

`check_plan` checks one plan of a spec (building its graph when none is given); the runs and
comparisons themselves are `labkit.gpu.cudnn.reference_runs` (`expected`, `CheckResult`,
`check_plans`), which checks every plan before it is admitted.
"""

from __future__ import annotations

from typing import Optional

from ...spec import ConvSpec
from ..cudnn import conv_graph, graph_cache, operands
from ..cudnn.reference_runs import CheckResult, check_plans


def check_plan(
    spec: ConvSpec,
    epilogue: str = "none",
    *,
    plan_index: Optional[int] = None,
    seed: int = 0,
    workspace_cap: Optional[int] = None,
    graph: Optional[conv_graph.ConvGraph] = None,
    vs_unrounded: bool = False,
) -> CheckResult:
    """Run one plan of a convolution once and compare it with the float64 reference.

    A plan labkit found wrong raises `WrongResult`; `check_plans` runs any plan that built.

    Args:
        spec: the convolution.
        epilogue: its epilogue.
        plan_index: the plan; default the graph's ``default_plan`` (the heuristic's first choice that
            is right).
        seed: the inputs' seed.
        workspace_cap: the graph's workspace cap, in bytes, when it is built here.
        graph: the built graph; default `graph_cache.get_graph`'s.
        vs_unrounded: also compare with the float64 convolution of the inputs before rounding.

    Returns:
        A `CheckResult`.
    """
    g = graph if graph is not None else graph_cache.get_graph(spec, epilogue, workspace_cap=workspace_cap)
    ops = operands.Operands(spec, epilogue, seed=seed)
    return check_plans(g, [g.plan(plan_index).index], ops, seed=seed, vs_unrounded=vs_unrounded)[0]
