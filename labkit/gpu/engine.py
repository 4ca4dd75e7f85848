"""cuDNN frontend graphs for a `ConvSpec`: the names the rest of labkit uses, in one place.

* `labkit.gpu.frontend`: tensor layouts and roles, a handle per stream, a graph's definition and
  its planning (`planned_graph`);
* `labkit.gpu.conv_graph`: `ConvGraph`, one built graph with its candidate plans (`graph_key`);
* `labkit.gpu.checked_plans`: which plans may run (`Plan`), each checked against float64 first;
* `labkit.gpu.bound`: `BoundConv`, one plan with its device pointers bound, ready to launch;
* `labkit.gpu.saved_plans`: a graph's chosen plan on disk (`save_plan`, `load_plan`,
  `LoadedGraph`);
* `labkit.gpu.graph_cache`: the process-wide cache (`graphs`, `get_graph`, `build_ahead`);
* `labkit.gpu.operands`: `Operands`, the device tensors a graph runs on.

No plan is handed out before it has been run once against the float64 reference: ``runnable``,
``default_plan`` and ``plan(i)`` hold only plans whose result was right, and a heuristic's pick
that was wrong falls through to its next correct plan (``fell_through`` says so).

Tensors are described in logical NCHW order with strides for the chosen layout; CuPy arrays hold
them in storage order (``storage_shape``). Roles: ``x`` image, ``w`` filter, ``y`` output image,
``b`` bias (1,K,1,1), ``z`` residual (like y). Which one a direction writes: `OUTPUT_ROLE`.
Fused epilogues (fprop only): ``bias_relu`` = relu(conv + b); ``bias_relu_add`` =
relu(conv + b + z) (the ResNet block order). Sizes (workspace caps, plan workspaces) are in bytes;
build and load times in seconds.
"""

from __future__ import annotations

from .bound import BoundConv, _ptr  # noqa: F401
from .checked_plans import CheckedPlans, Plan  # noqa: F401
from .conv_graph import ConvGraph, graph_key  # noqa: F401
from .frontend import (  # noqa: F401
    _CUDNN_DTYPE,
    BUILD_BUDGET_S,
    EPILOGUES,
    INPUT_ROLES,
    OUTPUT_ROLE,
    UIDS,
    _check_cap,
    _check_epilogue,
    _check_spec,
    build_every_plan,
    define_graph,
    handle_for,
    logical_view,
    planned_graph,
    release_handle,
    role_dtype,
    role_shapes,
    storage_shape,
    strides,
)
from .graph_cache import CacheStats, GraphCache, build_ahead, get_graph, graphs  # noqa: F401
from .operands import Operands  # noqa: F401
from .saved_plans import LoadedGraph, load_plan, save_plan  # noqa: F401
