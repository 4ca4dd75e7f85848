"""A PyTorch model's convolution layers, read with forward pre-hooks (`from_module`), and a model
named as ``"module:callable"`` (`is_model_path`, `model_from_path`). torch is imported only
inside these functions: the rest of `labkit.networks` needs no torch.

One `Layer` per ``Conv2d`` call, in forward order, with the input's shape at that call (N, C, H,
W: pixels for H, W; elements for channels); every other convolution module is a `Skipped` with the
reason.
"""

from __future__ import annotations

import importlib
import sys
from typing import Tuple

from ..errors import InvalidSpec
from ..spec import ConvSpec
from .arguments import whole_number
from .records import Layer, Network, Skipped

#: the packages the ``torch`` extra installs (``pip install -e '.[torch]'``)
TORCH = ("torch", "torchvision")


def is_model_path(net) -> bool:
    """Whether ``net`` names a model as ``"module:callable"``.

    Args:
        net: a network argument.

    Returns:
        True for a string with a colon (a preset name has none).
    """
    return isinstance(net, str) and ":" in net


def model_from_path(path: str):
    """The model that ``"module:callable"`` returns when called with no arguments.

    Weights are not loaded: only shapes matter.

    Args:
        path: e.g. ``"torchvision.models:mobilenet_v3_large"``.

    Returns:
        The ``torch.nn.Module``.

    Raises:
        InvalidSpec: naming ``net``, when the module does not import, has no such callable, the call
            fails, or it returns something else.
    """
    module, _, attr = path.partition(":")
    if not module.strip() or not attr.strip():
        raise InvalidSpec("net", path, 'a model is named "module:callable", e.g. torchvision.models:resnet18')

    try:
        obj = importlib.import_module(module.strip())
    except Exception as err:  # noqa: BLE001  (ImportError, or whatever the module raised on import)
        missing = getattr(err, "name", None) or ""
        hint = "; install PyTorch: pip install -e '.[torch]'" if missing.split(".")[0] in TORCH else ""
        raise InvalidSpec(
            "net",
            path,
            f"module {module.strip()!r} does not import: {type(err).__name__}: {_first_line(err)}{hint}",
        ) from None
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise InvalidSpec("net", path, f"{module.strip()} has no {attr.strip()!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvalidSpec(
            "net", path, f"{attr.strip()} is a {type(obj).__name__}, not a function returning a model"
        )
    try:
        model = obj()
    except Exception as err:  # noqa: BLE001
        raise InvalidSpec(
            "net", path, f"calling {attr.strip()}() failed: {type(err).__name__}: {_first_line(err)}"
        ) from None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module):
        raise InvalidSpec(
            "net", path, f"{attr.strip()}() returned a {type(model).__name__}, not a torch.nn.Module"
        )
    return model


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""


def from_module(model, input_shape, batch, dtype, layout) -> Network:
    """A PyTorch model's convolution layers, read while it runs once on zeros.

    The model runs in eval mode, without gradients, on the CPU in float32 (a model elsewhere is an
    `InvalidSpec` saying how to pass it); each module's train/eval flag is restored after. It runs
    first on PyTorch's ``meta`` device (`_run_on_meta`: shapes only, no arithmetic, so a large batch
    costs nothing); a model that cannot run there (it reads a value, or makes a CPU tensor itself)
    runs on the CPU. A forward
    pre-hook reads every ``Conv2d`` call: its input's shape, and the module's kernel, stride, padding,
    dilation, groups and bias. Only calls of a module's forward are seen (a functional ``F.conv2d`` is
    not); a module called twice gives two layers of the same name.

    ``padding='same'`` and ``'valid'`` are resolved to numbers; non-square kernels, strides, paddings
    and dilations are kept as (h, w) pairs. Where torch pads the input itself before the convolution,
    the spec is the convolution cuDNN runs, and ``Layer.note`` says so: ``padding='same'`` with an
    even (dilated) kernel pads one more row/column at the bottom/right first; a ``padding_mode`` other
    than ``'zeros'`` pads the whole border first and convolves with padding 0. An unbatched (C, H, W)
    input runs as N=1.

    Args:
        model: a ``torch.nn.Module``.
        input_shape: the example input's shape, e.g. (1, 3, 224, 224).
        batch: None, or the example's first dimension (anything else is refused).
        dtype: the dtype asked for, not the example's; default fp16.
        layout: the layout asked for; default NHWC.

    Returns:
        A `Network`. Its ``skipped`` holds Conv1d, Conv3d and ConvTranspose{1,2,3}d calls, a Conv2d
        that ConvSpec cannot hold (with its error) and a convolution module forward never called.
    """
    import torch  # heavy: torch, an optional extra
    from torch import nn  # heavy: torch, an optional extra

    shape = _input_shape(input_shape)
    _check_model(model)
    if batch is not None and whole_number("batch", batch) != shape[0]:
        raise InvalidSpec(
            "batch",
            batch,
            f"the batch is the example input's first dimension ({shape[0]} in "
            f"input_shape={shape}); leave batch out or make them agree",
        )
    dtype, layout = ("fp16" if dtype is None else dtype), ("NHWC" if layout is None else layout)
    ConvSpec(dtype=dtype, layout=layout)  # InvalidSpec naming a bad dtype or layout
    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    convs = [(n or type(m).__name__, m) for n, m in model.named_modules() if isinstance(m, kinds)]
    model_name = type(model).__name__
    if not any(isinstance(m, nn.Conv2d) for _, m in convs):
        found = sorted({type(m).__name__ for _, m in convs})
        kinds = f" (its convolutions: {', '.join(found)})" if found else ""
        raise InvalidSpec(
            "net", model_name, f"has no Conv2d layer, so no convolution for this workbook{kinds}"
        )
    if len(shape) < 3:
        raise InvalidSpec(
            "input_shape",
            shape,
            (
                "has 1 dimension; a network of Conv2d takes an image batch (N, C, H, W), "
                "e.g. (1, 3, 224, 224)"
                if len(shape) == 1
                else f"has {len(shape)} dimensions; a network of Conv2d takes an image batch (N, C, H, W), "
                "e.g. (1, 3, 224, 224)"
            ),
        )
    calls = _run_hooked(model, convs, shape, torch)
    layers, skipped, called = [], [], set()
    for name, m, shp in calls:
        called.add(id(m))
        if not isinstance(m, nn.Conv2d):
            skipped.append(Skipped(name, type(m).__name__, _not_2d(m, shp)))
            continue
        try:
            spec, note = _spec_of(m, shp, dtype, layout)
        except InvalidSpec as err:
            skipped.append(Skipped(name, type(m).__name__, f"ConvSpec cannot hold it (input {shp}): {err}"))
            continue
        layers.append(Layer(name, spec, m.bias is not None, note))
    skipped += [
        Skipped(n, type(m).__name__, f"forward never called it with input shape {shape}")
        for n, m in convs
        if id(m) not in called
    ]
    if not layers:
        why = "; ".join(f"{s.name}: {s.reason}" for s in skipped)
        raise InvalidSpec(
            "net", model_name, f"no Conv2d layer ran as a 2-D convolution with input shape {shape}: {why}"
        )
    return Network(model_name, tuple(layers), tuple(skipped), f"torch {model_name}, input shape {shape}")


def _input_shape(input_shape) -> Tuple[int, ...]:
    if input_shape is None:
        raise InvalidSpec(
            "input_shape",
            None,
            "a torch module needs its example input's shape, e.g. input_shape=(1, 3, 224, 224)",
        )
    if not isinstance(input_shape, (tuple, list)) or not input_shape:
        raise InvalidSpec(
            "input_shape", input_shape, "must be a tuple of whole numbers, e.g. (1, 3, 224, 224)"
        )
    return tuple(whole_number("input_shape", d) for d in input_shape)


def _check_model(model) -> None:
    """The model's layers are read on the CPU in float32 (labkit measures on the GPU in the dtype
    asked for): a model on a GPU or in another float type is named with the one-line fix."""
    param = next(model.parameters(), None)
    if param is None:
        return
    if param.device.type != "cpu":
        raise InvalidSpec(
            "net",
            type(model).__name__,
            f"its parameters are on {param.device}; labkit reads the layers "
            "with one forward pass on the CPU: pass model.cpu() (the report measures on the GPU anyway)",
        )
    if param.dtype.is_floating_point and str(param.dtype) != "torch.float32":
        raise InvalidSpec(
            "net",
            type(model).__name__,
            f"its parameters are {param.dtype}; labkit reads the layers in "
            "float32 on the CPU: pass model.float() (the report's precision is dtype=, e.g. 'fp16')",
        )


def _run_hooked(model, convs, shape, torch) -> list:
    """(name, module, input shape) of every hooked call, in the order forward made them."""
    calls = []

    def hook_for(name):
        def hook(module, args):
            x = args[0] if args else None
            calls.append((name, module, tuple(x.shape) if isinstance(x, torch.Tensor) else None))

        return hook

    flags = [(m, m.training) for m in model.modules()]
    handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in convs]
    param = next(model.parameters(), None)
    dtype = param.dtype if param is not None and param.dtype.is_floating_point else torch.float32
    try:
        model.eval()
        if _run_on_meta(model, torch.zeros(shape, dtype=dtype, device="meta"), torch):
            return calls
        calls.clear()  # what the meta run saw before it stopped
        x = torch.zeros(shape, dtype=dtype, device=param.device if param is not None else "cpu")
        with torch.no_grad():
            model(x)
    except Exception as err:  # noqa: BLE001 - what the model raised: a labkit error naming the shape
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise InvalidSpec(
            "input_shape", shape, f"{type(model).__name__} rejected it: {type(err).__name__}: {msg[:500]}"
        ) from err
    finally:
        for h in handles:
            h.remove()
        for m, training in flags:
            m.training = training
    return calls


def _run_on_meta(model, x, torch) -> bool:
    """Run ``model`` (in eval mode, hooked) once on a meta input, on PyTorch's ``meta`` device, its
    parameters and buffers replaced by meta tensors of the same shapes and dtypes for the call
    (``torch.func.functional_call``; the model itself is not changed). Every operation computes
    only its output's shape.

    Args:
        model: the ``nn.Module``.
        x: the example input, a tensor on the meta device.
        torch: the torch module.

    Returns:
        Whether the forward pass ran to the end there.
    """
    on_meta = {
        name: torch.empty_like(t, device="meta")
        for name, t in [*model.named_parameters(), *model.named_buffers()]
    }
    try:
        with torch.no_grad():
            torch.func.functional_call(model, on_meta, (x,))
    except Exception:  # noqa: BLE001  (anything a meta tensor cannot do: the CPU run decides)
        return False
    return True


def _not_2d(m, shp) -> str:
    dims = len(m.kernel_size)
    if "Transpose" in type(m).__name__:
        return (
            f"a transposed {dims}-D convolution (input {shp}); ConvSpec holds forward convolutions "
            "(cuDNN runs this one as the dgrad of a convolution), so it is left out"
        )
    return f"a {dims}-D convolution (input {shp}); ConvSpec holds 2-D convolutions only"


def _spec_of(m, shp, dtype: str, layout: str) -> Tuple[ConvSpec, str]:
    """The ConvSpec of one Conv2d call with input shape ``shp``, and a note where the spec is not
    the module's own arguments (see `from_module`)."""
    notes = []
    if shp is not None and len(shp) == 3:
        shp = (1,) + tuple(shp)
        notes.append("unbatched (C, H, W) input: torch runs it as N=1")
    if shp is None or len(shp) != 4:
        raise InvalidSpec("input", shp, "a Conv2d input must be (N, C, H, W) or (C, H, W)")
    n, c, h, w = shp
    size, pads = [h, w], []
    for i in range(2):
        if m.padding == "same":
            total = m.dilation[i] * (m.kernel_size[i] - 1)
            lo, hi = total // 2, total - total // 2
        elif m.padding == "valid":
            lo = hi = 0
        else:
            lo = hi = m.padding[i]
        zeros = m.padding_mode == "zeros"
        size[i] += (hi - lo) if zeros else (lo + hi)
        pads.append(lo if zeros else 0)
    if m.padding_mode != "zeros":
        notes.append(
            f"padding_mode={m.padding_mode!r}: torch pads the input itself first, so cuDNN runs "
            f"this convolution on {size[0]}x{size[1]} with padding 0"
        )
    elif (size[0], size[1]) != (h, w):
        notes.append(
            f"padding={m.padding!r} with an even (dilated) kernel: torch pads one more row/column "
            f"at the bottom/right first, so cuDNN runs this convolution on {size[0]}x{size[1]} "
            f"with padding {tuple(pads)}"
        )
    elif isinstance(m.padding, str):
        notes.append(f"padding={m.padding!r} is {tuple(pads)}")
    spec = ConvSpec(
        N=n,
        C=c,
        H=size[0],
        W=size[1],
        K=m.out_channels,
        R=m.kernel_size[0],
        S=m.kernel_size[1],
        stride=tuple(m.stride),
        padding=tuple(pads),
        dilation=tuple(m.dilation),
        groups=m.groups,
        dtype=dtype,
        layout=layout,
    )
    return spec, "; ".join(notes)
