"""`BoundConv`: one plan of a built graph with its device pointers bound, ready to launch.

``cg`` is a `labkit.gpu.cudnn.conv_graph.ConvGraph` (its ``spec``, ``epilogue``, ``plans``, ``graph``,
``remote`` and ``_cpp_index``); `ConvGraph.bind` makes one for a plan checked against
float64, and `labkit.gpu.cudnn.reference_runs` makes one to run that check.
"""

from __future__ import annotations

from typing import Dict

import cupy

from ...errors import InvalidSpec
from .frontend import UIDS, handle_for, role_shapes


class BoundConv:
    """A plan with its device pointers bound: ``run()`` launches it at about the frontend's least host cost.

    It calls the lowered graph's ``_execute_plan_at_index`` with a prebuilt uid -> pointer pack, and
    falls back to the public ``execute_plan_at_index``.

    Args:
        cg: the built graph.
        arrays: role -> device array, for every tensor of the graph.
        workspace_ptr: the workspace's device address; 0 only for a plan that needs none.
        plan_index: the plan.
        stream: the CuPy stream it runs on; default the current stream.
    """

    def __init__(self, cg, arrays: Dict[str, object], workspace_ptr: int, plan_index: int, stream=None):
        needed = set(role_shapes(cg.spec, cg.epilogue))
        missing = needed - set(arrays)
        if missing:
            raise InvalidSpec("arrays", sorted(arrays), f"missing tensor(s) {sorted(missing)} for this graph")
        self.graph, self.plan_index = cg, plan_index
        self.workspace_bytes = cg.plans[plan_index].workspace_bytes
        if self.workspace_bytes and not workspace_ptr:
            raise InvalidSpec(
                "workspace_ptr",
                workspace_ptr,
                f"plan {plan_index} needs {self.workspace_bytes} B of workspace",
            )
        self.stream = stream if stream is not None else cupy.cuda.get_current_stream()
        self.handle = handle_for(self.stream)
        self.pack = {UIDS[r]: _ptr(arrays[r]) for r in needed}
        self.workspace_ptr = int(workspace_ptr or 0)
        #: the workspace array, when the graph allocated it for this binding (`ConvGraph.bind_with_workspace`)
        self.workspace = None
        self._fast = None
        remote = cg.remote.get(plan_index)
        #: the frontend graph that holds this plan, and the plan's index there
        self.frontend, self.frontend_index = (
            (remote.graph, 0) if remote is not None else (cg.graph, plan_index)
        )
        cpp = 0 if remote is not None else cg._cpp_index.get(plan_index)
        lowered = getattr(self.frontend, "_lowered_graph", None)
        if cpp is not None and lowered is not None and hasattr(lowered, "_execute_plan_at_index"):
            backend = self.handle.backend_handle
            fn = lowered._execute_plan_at_index
            pack, ws = self.pack, self.workspace_ptr
            self._fast = lambda: fn(pack, ws, cpp, backend)

    def run(self) -> None:
        """Launch the plan once on its stream (enqueued, not synchronised)."""
        if self._fast is not None:
            self._fast()
        else:
            self.frontend.execute_plan_at_index(
                self.pack, self.workspace_ptr, self.frontend_index, handle=self.handle
            )


def _ptr(a) -> int:
    if isinstance(a, int):
        return a
    return int(a.data.ptr)
