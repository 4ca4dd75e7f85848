"""A convolution as a cuDNN frontend graph: tensor layouts and roles, one cuDNN handle per stream.

The graph's definition (`define_graph`), its planning (`planned_graph`: the candidate plans,
labkit's filters) and building plans by index within a time budget (`build_every_plan`).
`labkit.gpu.cudnn.conv_graph` builds on this; `labkit.gpu.cudnn.builds` uses it in worker processes, which
must plan a graph exactly as the notebook's process does.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional

import cudnn
import cupy

from ...errors import InvalidSpec, OutOfMemory
from ...signals.cancel import Budget
from ...spec import ConvSpec
from ..buffers import memory, sizes

EPILOGUES = ("none", "bias_relu", "bias_relu_add")
OUTPUT_ROLE = {"fprop": "y", "dgrad": "x", "wgrad": "w"}
INPUT_ROLES = {"fprop": ("x", "w"), "dgrad": ("y", "w"), "wgrad": ("x", "y")}
UIDS = {"x": 1, "w": 2, "y": 3, "b": 4, "z": 5}

_CUDNN_DTYPE = {
    "fp32": cudnn.data_type.FLOAT,
    "tf32": cudnn.data_type.FLOAT,
    "fp16": cudnn.data_type.HALF,
    "bf16": cudnn.data_type.BFLOAT16,
    "fp8_e4m3": cudnn.data_type.FP8_E4M3,
}


# ---- layouts --------------------------------------------------------------------------------
def strides(shape, layout: str) -> tuple:
    """Element strides of a logical (n, c, h, w) tensor stored in ``layout``.

    Args:
        shape: the logical (n, c, h, w) shape.
        layout: NCHW or NHWC.

    Returns:
        The strides, in logical order.
    """
    n, c, h, w = shape
    if layout == "NCHW":
        return (c * h * w, h * w, w, 1)
    return (h * w * c, 1, w * c, c)


def storage_shape(shape, layout: str) -> tuple:
    """Shape of the CuPy array that holds a logical (n, c, h, w) tensor in ``layout``.

    Args:
        shape: the logical (n, c, h, w) shape.
        layout: NCHW or NHWC.

    Returns:
        (n, c, h, w) for NCHW, (n, h, w, c) for NHWC.
    """
    n, c, h, w = shape
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def logical_view(arr, layout: str):
    """A storage-order array viewed as logical (n, c, h, w).

    Args:
        arr: the array, in ``layout``'s order.
        layout: NCHW or NHWC.

    Returns:
        The view (no copy).
    """
    return arr if layout == "NCHW" else arr.transpose(0, 3, 1, 2)


def role_shapes(spec: ConvSpec, epilogue: str = "none") -> Dict[str, tuple]:
    """The logical shape of each tensor: ``x``, ``w``, ``y``, and ``b``, ``z`` for an epilogue.

    Args:
        spec: the convolution.
        epilogue: one of `EPILOGUES`.

    Returns:
        Role -> logical NCHW shape.
    """
    shapes = {"x": spec.x_shape, "w": spec.w_shape, "y": spec.y_shape}
    if epilogue != "none":
        shapes["b"] = (1, spec.K, 1, 1)
    if epilogue == "bias_relu_add":
        shapes["z"] = spec.y_shape
    return shapes


def role_dtype(spec: ConvSpec, role: str) -> str:
    """The labkit dtype of a role's tensor: the written tensor and b/z use the output dtype.

    Args:
        spec: the convolution.
        role: ``x``, ``w``, ``y``, ``b`` or ``z``.

    Returns:
        A labkit dtype name.
    """
    if role == OUTPUT_ROLE[spec.direction] or role in ("b", "z"):
        return spec.output_dtype
    return spec.dtype


def check_epilogue(spec: ConvSpec, epilogue: str) -> str:
    """An epilogue, checked against `EPILOGUES` and the convolution it follows.

    Args:
        spec: the convolution.
        epilogue: "none", "bias_relu" or "bias_relu_add" (fused ones apply to fprop only).

    Returns:
        The epilogue; `labkit.InvalidSpec` for one that is unknown or does not apply.
    """
    if epilogue not in EPILOGUES:
        raise InvalidSpec("epilogue", epilogue, f"must be one of {', '.join(EPILOGUES)}")
    if epilogue != "none" and spec.direction != "fprop":
        raise InvalidSpec("epilogue", epilogue, "fused epilogues apply to fprop only")
    return epilogue


def check_spec(spec) -> ConvSpec:
    """A convolution, checked to be a `labkit.ConvSpec`.

    Args:
        spec: the value passed as a convolution.

    Returns:
        It; `labkit.InvalidSpec` for anything else.
    """
    if not isinstance(spec, ConvSpec):
        raise InvalidSpec("spec", spec, "must be a labkit.ConvSpec")
    return spec


def check_cap(cap) -> Optional[int]:
    """A workspace cap, checked: None (no cap) or a whole number of bytes.

    Args:
        cap: the cap, bytes; None for none.

    Returns:
        The cap as an int, or None; `labkit.InvalidSpec` for a cap that is no size.
    """
    return None if cap is None else sizes.check_request(cap, "workspace cap")


# ---- handles --------------------------------------------------------------------------------
_handles: Dict[tuple, object] = {}
_handles_lock = threading.Lock()


def handle_for(stream=None):
    """The cuDNN handle bound to a stream, made once per stream.

    Args:
        stream: a CuPy stream; default CuPy's current stream.

    Returns:
        The handle; `OutOfMemory` when cuDNN cannot make one.
    """
    stream = stream if stream is not None else cupy.cuda.get_current_stream()
    key = (cupy.cuda.Device().id, int(stream.ptr))
    with _handles_lock:
        h = _handles.get(key)
        if h is None:
            try:
                h = cudnn.create_handle()
            except Exception as exc:  # cuDNN allocates streams and memory for a handle
                raise OutOfMemory(
                    f"a cuDNN handle ({str(exc).strip()[:120]})", 0, memory.free_bytes()
                ) from exc
            cudnn.set_stream(h, int(stream.ptr))
            _handles[key] = h
    return h


def release_handle(stream) -> None:
    """Destroy the cuDNN handle bound to a stream, if any.

    Call it when the stream is done with: each handle holds a few MiB of device memory and its own
    internal streams.

    Args:
        stream: the CuPy stream.
    """
    key = (cupy.cuda.Device().id, int(stream.ptr))
    with _handles_lock:
        h = _handles.pop(key, None)
    if h is not None:
        stream.synchronize()
        cudnn.destroy_handle(h)


#: seconds an all-plan build may take before the plans not yet built are left out ("cut"); the
#: frontend builds plans one at a time, so the budget is checked between plans
BUILD_BUDGET_S = 60.0


def build_every_plan(g, budget: Budget, indices: Optional[List[int]] = None) -> Dict[int, str]:
    """Build candidate plans of a frontend graph one at a time, checking a budget between plans.

    This is what ``build_plans(ALL)`` does inside the frontend. labkit runs plans by index, so which
    plan the frontend calls selected does not matter.

    Args:
        g: a planned frontend graph (`planned_graph`).
        budget: the build's time budget.
        indices: the plans to build; default every candidate.

    Returns:
        {plan index: why it was not built}: cuDNN's reason, or ``cut: ...`` for the plans the spent
        budget left out.
    """
    why_not = {}
    todo = list(range(g.get_execution_plan_count())) if indices is None else list(indices)
    for k, i in enumerate(todo):
        if budget.over:
            why = f"cut: the build budget ({budget.seconds:.0f} s) was spent after {budget.spent:.1f} s"
            why_not.update({j: why for j in todo[k:]})
            break
        try:
            g.build_plan_at_index(i)
        except Exception as exc:  # noqa: BLE001  (declined by cuDNN, or barred by a filter: the reason)
            why_not[i] = " ".join(str(exc).split())[:200] or type(exc).__name__
    return why_not


def define_graph(spec: ConvSpec, epilogue: str = "none"):
    """The frontend graph of a convolution, defined but not planned.

    Args:
        spec: the convolution.
        epilogue: one of `EPILOGUES` (fprop only).

    Returns:
        A ``cudnn.pygraph``.
    """
    s, io = spec, _CUDNN_DTYPE[spec.dtype]
    out = _CUDNN_DTYPE[s.output_dtype]
    f32 = cudnn.data_type.FLOAT
    g = cudnn.pygraph(
        io_data_type=io,
        intermediate_data_type=f32,
        compute_data_type=f32,
        handle=handle_for(),
    )
    shapes = role_shapes(s, epilogue)

    def t(role):
        return g.tensor(
            name=role.upper(),
            dim=list(shapes[role]),
            stride=list(strides(shapes[role], s.layout)),
            data_type=_CUDNN_DTYPE[role_dtype(s, role)],
            uid=UIDS[role],
        )

    conv_args = dict(
        padding=list(s.padding),
        stride=list(s.stride),
        dilation=list(s.dilation),
        compute_data_type=f32,
    )
    if s.direction == "fprop":
        result = g.conv_fprop(image=t("x"), weight=t("w"), name="conv", **conv_args)
        if epilogue != "none":
            result.set_data_type(f32)
            result = g.add(a=result, b=t("b"), name="bias", compute_data_type=f32)
            result.set_data_type(f32)
            if epilogue == "bias_relu_add":
                result = g.add(a=result, b=t("z"), name="residual", compute_data_type=f32)
                result.set_data_type(f32)
            result = g.relu(input=result, name="relu", compute_data_type=f32)
    elif s.direction == "dgrad":
        result = g.conv_dgrad(loss=t("y"), filter=t("w"), name="dgrad", **conv_args)
    else:
        result = g.conv_wgrad(image=t("x"), loss=t("y"), name="wgrad", **conv_args)
    role = OUTPUT_ROLE[s.direction]
    result.set_output(True).set_data_type(out).set_dim(list(shapes[role])).set_stride(
        list(strides(shapes[role], s.layout))
    )
    result.set_uid(UIDS[role])
    return g


def planned_graph(
    spec: ConvSpec,
    epilogue: str = "none",
    workspace_cap: Optional[int] = None,
    deterministic_only: bool = False,
):
    """The frontend graph of a convolution, planned and checked, no plan built yet.

    Planning is heuristics A then FALLBACK, with labkit's filters for the dtype, determinism and
    cap; a worker process that builds one of its plans (`labkit.gpu.cudnn.builds`) gets the same
    list, in the same order, as this process.

    Args:
        spec: the convolution.
        epilogue: one of `EPILOGUES`.
        workspace_cap: leave out plans that need more workspace, in bytes; None for no cap.
        deterministic_only: leave out plans cuDNN marks NONDETERMINISTIC.

    Returns:
        A ``cudnn.pygraph`` with its candidate plans created.
    """
    g = define_graph(spec, epilogue)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    if spec.dtype == "fp32":  # true fp32: no TF32 tensor cores, no down-conversion
        notes = cudnn.numerical_note
        g.deselect_numeric_notes([notes.TENSOR_CORE, notes.DOWN_CONVERT_INPUTS])
    elif spec.dtype == "tf32":
        g.select_numeric_notes([cudnn.numerical_note.TENSOR_CORE])
    if deterministic_only:
        g.deselect_numeric_notes([cudnn.numerical_note.NONDETERMINISTIC])
    if workspace_cap is not None:
        g.deselect_workspace_greater_than(workspace_cap)
    g.check_support()
    return g
