"""A convolution's plans under a workspace cap, as a hands-on cell gets them (``gpu.conv(spec,
workspace_cap=cap)``): live, cuDNN's own graph built with ``deselect_workspace_greater_than(cap)``
(`labkit.gpu.cudnn.graph_cache.get_graph`); simulated, `CappedGraph`, the recorded plans that need at most
``cap`` bytes, in the heuristic's order (what that deselection keeps: the recordings' caps.csv counts
the same plans within each cap as kernels.csv holds, tests/test_handson_07_08.py). Bytes."""

from __future__ import annotations

from typing import Optional

from ..errors import InvalidSpec, Unsupported
from ..gpu.buffers.sizes import check_request


def check_cap(cap) -> Optional[int]:
    """A workspace cap, checked: None (no cap) or a whole number of bytes.

    Args:
        cap: the cap.

    Returns:
        The cap as an int, or None.
    """
    return None if cap is None else check_request(cap, "workspace cap")


class CappedGraph:
    """The plans of a simulated convolution's graph that need at most ``cap`` bytes.

    Args:
        graph: the recorded graph (`labkit.simgpu.conv.SimGraph`).
        cap: the cap, in bytes.

    Attributes:
        runnable: the plans within the cap, in the heuristic's order.
        default_plan: the first of them (the heuristic's pick under the cap).
    """

    def __init__(self, graph, cap: int):
        self.inner, self.cap = graph, cap
        self.spec, self.epilogue = graph.spec, graph.epilogue
        self.runnable = [p for p in graph.runnable if p.workspace_bytes <= cap]
        if not self.runnable:
            raise Unsupported(graph.spec.label, f"no recorded plan needs at most {cap:,} B of workspace")
        self.default_plan = self.runnable[0]

    def plan(self, index: int):
        """One plan within the cap.

        Args:
            index: the plan's index.

        Returns:
            The recorded plan; `labkit.InvalidSpec` for one over the cap (cuDNN would not offer it).
        """
        p = self.inner.plan(index)
        if p.workspace_bytes > self.cap:
            raise InvalidSpec(
                "plan", index, f"needs {p.workspace_bytes:,} B, over the workspace cap of {self.cap:,} B"
            )
        return p

    def bind(self, arrays, workspace_ptr: int, plan_index: int, stream):
        """The recorded graph's `bind` of a plan within the cap.

        Args:
            arrays: the operands (unused by a simulated call).
            workspace_ptr: the workspace's address.
            plan_index: the plan's index (`plan` checks it against the cap).
            stream: the seam's stream it will run on.

        Returns:
            The bound call (`labkit.simgpu.conv.SimBound`).
        """
        return self.inner.bind(arrays, workspace_ptr, self.plan(plan_index).index, stream)
