"""The convolution layers of a network, as `ConvSpec` s: shipped presets, a list of specs, or a
PyTorch model read with forward hooks.

One record per ``Conv2d`` call, in forward order: `Layer` (``name``, the torchvision module name
such as ``layer1.0.conv2``; ``spec``, the exact problem cuDNN is given: N, C, H, W at that
layer's input, K, R, S, stride, padding, dilation, groups, plus the dtype and layout asked for;
``bias``, whether the layer adds a bias; ``note``, how a spec was derived when it is not read
straight off the module). `unique` groups identical specs, so that a report measures each once.

Presets (no dependency; each checked layer by layer against torchvision's own model by
``scripts/check_networks_torchvision.py``): see `PRESETS`. Units: pixels for H, W and the image
size; elements for channel counts.
"""
from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

from .errors import InvalidSpec
from .spec import ConvSpec


@dataclass(frozen=True)
class Layer:
    """One convolution call of a network. ``name``: the module's name (torchvision's for the
    presets, ``conv0``.. for a list of specs); ``spec``: the problem, shapes at this call's input;
    ``bias``: the layer adds a per-channel bias (not part of the convolution cuDNN sizes a
    workspace for); ``note``: how the spec differs from the module's own arguments, if it does."""

    name: str
    spec: ConvSpec
    bias: bool = False
    note: str = ""


@dataclass(frozen=True)
class Skipped:
    """A convolution module that is not in `Network.layers`: ``kind`` is its class name
    (``Conv1d``, ``ConvTranspose2d``, ...), ``reason`` says why it was left out."""

    name: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Group:
    """Identical specs of a network (`unique`): the ``spec``, how many layers have it
    (``count``) and their ``names`` in forward order."""

    spec: ConvSpec
    count: int
    names: Tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """What `layers_of` returns: ``name`` (the preset's, or the model's class name),
    ``layers`` (tuple of `Layer`, forward order), ``skipped`` (tuple of `Skipped`: convolution
    modules not in ``layers``, with the reason) and ``source`` (where the layers came from, in
    words). Iterating, ``len`` and indexing go over ``layers``."""

    name: str
    layers: Tuple[Layer, ...]
    skipped: Tuple[Skipped, ...] = ()
    source: str = ""

    def __iter__(self):
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i):
        return self.layers[i]

    def layer(self, name: str) -> Layer:
        """The first layer called ``name`` (InvalidSpec if there is none)."""
        for lay in self.layers:
            if lay.name == name:
                return lay
        raise InvalidSpec("name", name, f"no layer of {self.name} has this name")


# ---- building presets -----------------------------------------------------------------------
@dataclass
class _Builder:
    """Appends `Layer` s while a preset walks its network; ``conv`` takes the input as
    (C, H, W) and returns the output (K, P, Q), so branches can reuse an input."""

    net: str
    batch: int
    dtype: str
    layout: str
    layers: List[Layer] = field(default_factory=list)

    def conv(self, name, x, k, r, stride=1, padding=0, dilation=1, groups=1, bias=False):
        c, h, w = x
        try:
            spec = ConvSpec(N=self.batch, C=c, H=h, W=w, K=k, R=r, S=r, stride=stride, padding=padding,
                            dilation=dilation, groups=groups, dtype=self.dtype, layout=self.layout)
        except InvalidSpec as err:
            raise InvalidSpec("image", (h, w), f"{self.net} cannot take this image size: at layer {name} "
                              f"({c}x{h}x{w} in): {err}") from err
        self.layers.append(Layer(name, spec, bias))
        return (k, spec.P, spec.Q)


def _pool(x, k: int, stride: int, padding: int = 0):
    """(C, H, W) after a max pool (floor mode, as torchvision's)."""
    c, h, w = x
    return (c, (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1)


def _start(net, batch, dtype, layout, image):
    """Validated builder and the (3, H, W) input of a preset."""
    batch = _whole("batch", batch)
    ConvSpec(N=batch, dtype=dtype, layout=layout)  # dtype and layout: InvalidSpec naming them
    h, w = _image(image)
    return _Builder(net, batch, dtype, layout), (3, h, w)


def _whole(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidSpec(name, value, f"must be a whole number >= {minimum}")
    return int(value)


def _image(image) -> Tuple[int, int]:
    """Image size in pixels: one int (square) or an (H, W) pair."""
    if isinstance(image, (tuple, list)):
        if len(image) != 2:
            raise InvalidSpec("image", image, "must be one int (square) or an (H, W) pair of pixels")
        return (_whole("image", image[0]), _whole("image", image[1]))
    v = _whole("image", image)
    return (v, v)


# ---- the presets ----------------------------------------------------------------------------
def _resnet(net, batch, dtype, layout, image, groups=1, width_per_group=64) -> List[Layer]:
    """torchvision's ResNet with Bottleneck blocks [3, 4, 6, 3] (ResNet v1.5: the stride is on
    the 3x3 conv2). Each block calls conv1, conv2, conv3 and then, in its first block,
    downsample.0 (a 1x1 with the block's stride, on the block's input)."""
    b, x = _start(net, batch, dtype, layout, image)
    x = b.conv("conv1", x, 64, 7, stride=2, padding=3)
    x = _pool(x, 3, 2, 1)
    for li, (planes, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)), 1):
        width = int(planes * (width_per_group / 64.0)) * groups
        for i in range(blocks):
            s, name = (stride if i == 0 else 1), f"layer{li}.{i}"
            y = b.conv(f"{name}.conv1", x, width, 1)
            y = b.conv(f"{name}.conv2", y, width, 3, stride=s, padding=1, groups=groups)
            y = b.conv(f"{name}.conv3", y, planes * 4, 1)
            if i == 0:
                b.conv(f"{name}.downsample.0", x, planes * 4, 1, stride=s)
            x = y
    return b.layers


def resnet50(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``resnet50``: 53 Conv2d layers (the 7x7 stem, 16 Bottleneck blocks of three,
    4 downsample 1x1s), none with a bias. ``image``: input pixels (int or (H, W))."""
    return _resnet("resnet50", batch, dtype, layout, image)


def resnext50_32x4d(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``resnext50_32x4d``: ResNet-50's 53 Conv2d layers with 32 groups of 4 channels
    per group at 64 planes (conv1/conv2 widths 128, 256, 512, 1024; conv2 has groups=32)."""
    return _resnet("resnext50_32x4d", batch, dtype, layout, image, groups=32, width_per_group=4)


def mobilenet_v2(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``mobilenet_v2`` (width 1.0): 52 Conv2d layers, none with a bias. features.0.0
    is the 3x3 s2 stem; features.1..17 are inverted residual blocks: an expanding 1x1
    (conv.0.0, absent in features.1 whose expansion is 1), a 3x3 depthwise (groups = channels),
    a projecting 1x1; features.18.0 is the 1x1 to 1280 channels."""
    b, x = _start("mobilenet_v2", batch, dtype, layout, image)
    x = b.conv("features.0.0", x, 32, 3, stride=2, padding=1)
    idx = 1
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            name, hidden, j = f"features.{idx}.conv", int(round(x[0] * t)), 0
            y = x
            if t != 1:
                y, j = b.conv(f"{name}.0.0", y, hidden, 1), 1
            y = b.conv(f"{name}.{j}.0", y, hidden, 3, stride=s if i == 0 else 1, padding=1, groups=hidden)
            x = b.conv(f"{name}.{j + 1}", y, c, 1)
            idx += 1
    b.conv(f"features.{idx}.0", x, 1280, 1)
    return b.layers


def convnext_tiny(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``convnext_tiny``: 22 Conv2d layers, all with a bias: the 4x4 s4 stem
    (features.0.0), a 7x7 depthwise conv with padding 3 in each of the 3+3+9+3 blocks
    (features.{1,3,5,7}.<i>.block.0) and the three 2x2 s2 downsamplers (features.{2,4,6}.1).
    Each block's two pointwise layers are ``nn.Linear`` in torchvision (run on channels-last
    tensors), not Conv2d, so they are not here."""
    b, x = _start("convnext_tiny", batch, dtype, layout, image)
    x = b.conv("features.0.0", x, 96, 4, stride=4, bias=True)
    stages = ((96, 3), (192, 3), (384, 9), (768, 3))
    for si, (dim, blocks) in enumerate(stages):
        for i in range(blocks):
            b.conv(f"features.{2 * si + 1}.{i}.block.0", x, dim, 7, padding=3, groups=dim, bias=True)
        if si + 1 < len(stages):
            x = b.conv(f"features.{2 * si + 2}.1", x, stages[si + 1][0], 2, stride=2, bias=True)
    return b.layers


def vgg16(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``vgg16`` (no batch norm): 13 Conv2d layers, 3x3 padding 1 with a bias, in
    five blocks each ended by a 2x2 s2 max pool (features.4, 9, 16, 23, 30)."""
    b, x = _start("vgg16", batch, dtype, layout, image)
    idx = 0
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            x, idx = _pool(x, 2, 2), idx + 1
        else:
            x, idx = b.conv(f"features.{idx}", x, v, 3, padding=1, bias=True), idx + 2  # conv, ReLU
    return b.layers


def deeplabv3_aspp(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """The ASPP module of torchvision ``deeplabv3_resnet50``'s head (``classifier.0``): its 6
    Conv2d layers, none with a bias, on the backbone's 2048-channel output-stride-8 feature map
    (ResNet-50 with layer3 and layer4 dilated instead of strided): 28x28 for a 224x224 image.
    ``image`` is the network's input size; the feature map is that after the stem conv, the max
    pool and layer2's stride 2 (each (h - 1) // 2 + 1).

    classifier.0.convs.0.0: 1x1 2048 -> 256; convs.1.0, convs.2.0, convs.3.0: 3x3 2048 -> 256 with
    dilation = padding = 12, 24, 36 (torchvision's atrous rates for DeepLabV3); convs.4.1: the
    image-pooling branch's 1x1 2048 -> 256 on the 1x1 average-pooled map; project.0: 1x1
    1280 -> 256 on the five branches concatenated. Not here: the head's two convolutions after
    ASPP (classifier.1, 3x3 256 -> 256, and classifier.4, 1x1 to the classes) and the backbone."""
    b, x = _start("deeplabv3_aspp", batch, dtype, layout, image)
    _, h, w = x
    for _ in range(3):  # conv1 (7x7 s2 p3), maxpool (3x3 s2 p1), layer2 (3x3 s2 p1)
        h, w = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    x, name = (2048, h, w), "classifier.0"
    b.conv(f"{name}.convs.0.0", x, 256, 1)
    for i, rate in enumerate((12, 24, 36), 1):
        b.conv(f"{name}.convs.{i}.0", x, 256, 3, padding=rate, dilation=rate)
    b.conv(f"{name}.convs.4.1", (2048, 1, 1), 256, 1)
    b.conv(f"{name}.project.0", (5 * 256, h, w), 256, 1)
    return b.layers


#: preset name -> function(batch, dtype, layout, image) returning the list of `Layer`
PRESETS: Dict[str, Callable[..., List[Layer]]] = {
    "resnet50": resnet50,
    "resnext50_32x4d": resnext50_32x4d,
    "mobilenet_v2": mobilenet_v2,
    "convnext_tiny": convnext_tiny,
    "vgg16": vgg16,
    "deeplabv3_aspp": deeplabv3_aspp,
}


# ---- layers_of and unique -------------------------------------------------------------------
def layers_of(net, batch: int | None = None, dtype: str | None = None, layout: str | None = None,
              image=224, input_shape=None) -> Network:
    """The convolution layers of ``net``, in forward order, as a `Network`.

    ``net`` is one of:

    * a preset name (`PRESETS`; case and ``-``/``_`` do not matter): its layers for ``batch``
      images (default 1) of ``image`` pixels (int or (H, W), default 224) in ``dtype`` (default
      fp16) and ``layout`` (default NHWC);
    * a list of `ConvSpec` (or of `Layer`): kept as given, named ``conv0``, ``conv1``, .. (a
      Layer keeps its name); ``batch``, ``dtype``, ``layout`` replace those fields where given;
    * a PyTorch ``nn.Module`` with ``input_shape`` (the example input's shape, e.g.
      (1, 3, 224, 224)): see `_from_module`. torch is imported only here.

    Raises `InvalidSpec` naming the offending argument and the rule it broke.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(net, torch.nn.Module):
        return _from_module(net, input_shape, batch, dtype, layout)
    if input_shape is not None:
        raise InvalidSpec("input_shape", input_shape, "is only for a torch.nn.Module; a preset takes image=")
    if isinstance(net, str):
        key = net.strip().lower().replace("-", "_")
        if key not in PRESETS:
            raise InvalidSpec("net", net, f"unknown network; known: {', '.join(PRESETS)}")
        layers = PRESETS[key](1 if batch is None else batch, "fp16" if dtype is None else dtype,
                              "NHWC" if layout is None else layout, image)
        h, w = _image(image)
        return Network(key, tuple(layers), (), f"preset {key}, {h}x{w} image")
    if isinstance(net, (ConvSpec, Layer)):
        net = [net]
    if isinstance(net, (list, tuple, Network)):
        return _from_specs(list(net), batch, dtype, layout)
    raise InvalidSpec("net", type(net).__name__, f"must be a preset name ({', '.join(PRESETS)}), a list of "
                      "ConvSpec, or a torch.nn.Module with input_shape=")


def _from_specs(items: list, batch, dtype, layout) -> Network:
    if not items:
        raise InvalidSpec("net", items, "an empty list has no layers; give at least one ConvSpec")
    changes = {k: v for k, v in (("N", batch), ("dtype", dtype), ("layout", layout)) if v is not None}
    layers = []
    for i, item in enumerate(items):
        if isinstance(item, ConvSpec):
            item = Layer(f"conv{i}", item)
        elif not isinstance(item, Layer):
            raise InvalidSpec(f"net[{i}]", type(item).__name__, "every item must be a ConvSpec (or a Layer)")
        if changes:
            try:
                item = Layer(item.name, item.spec.replace(**changes), item.bias, item.note)
            except InvalidSpec as err:
                field_ = "batch" if err.field == "N" else err.field
                raise InvalidSpec(field_, err.value, f"{err.rule} (layer {item.name})") from err
        layers.append(item)
    return Network("specs", tuple(layers), (), f"{len(layers)} ConvSpec(s)")


def unique(layers) -> List[Group]:
    """Identical specs grouped (same `ConvSpec.key`: every field, dtype, layout and direction
    included; a bias does not count), in the order each is first seen, with how many layers
    share it and their names. ``layers``: a `Network` or a list of `Layer` (or of ConvSpec,
    named ``conv0``..). A report measures each group once and weighs it by ``count``."""
    seen: Dict[tuple, list] = {}
    for i, lay in enumerate(layers):
        if isinstance(lay, ConvSpec):
            lay = Layer(f"conv{i}", lay)
        if not isinstance(lay, Layer):
            raise InvalidSpec(f"layers[{i}]", type(lay).__name__, "every item must be a Layer (or a ConvSpec)")
        seen.setdefault(lay.spec.key, [lay.spec, []])[1].append(lay.name)
    return [Group(spec, len(names), tuple(names)) for spec, names in seen.values()]


# ---- a PyTorch model ------------------------------------------------------------------------
def is_model_path(net) -> bool:
    """Whether ``net`` names a model as ``"module:callable"`` (a preset name has no colon)."""
    return isinstance(net, str) and ":" in net


def model_from_path(path: str):
    """The ``torch.nn.Module`` that ``"module:callable"`` returns when called with no arguments
    (e.g. ``"torchvision.models:mobilenet_v3_large"``, weights not loaded: only shapes matter).
    `InvalidSpec` naming ``net`` when the module does not import, has no such callable, the call
    fails, or it returns something else."""
    module, _, attr = path.partition(":")
    if not module.strip() or not attr.strip():
        raise InvalidSpec("net", path, 'a model is named "module:callable", e.g. torchvision.models:resnet18')
    import importlib

    try:
        obj = importlib.import_module(module.strip())
    except Exception as err:  # noqa: BLE001  (ImportError, or whatever the module raised on import)
        raise InvalidSpec("net", path, f"module {module.strip()!r} does not import: {type(err).__name__}: "
                          f"{_first_line(err)}") from None
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise InvalidSpec("net", path, f"{module.strip()} has no {attr.strip()!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvalidSpec("net", path, f"{attr.strip()} is a {type(obj).__name__}, not a function returning a model")
    try:
        model = obj()
    except Exception as err:  # noqa: BLE001
        raise InvalidSpec("net", path, f"calling {attr.strip()}() failed: {type(err).__name__}: {_first_line(err)}") from None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module):
        raise InvalidSpec("net", path, f"{attr.strip()}() returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""


def _from_module(model, input_shape, batch, dtype, layout) -> Network:
    """Run ``model`` once on zeros of ``input_shape`` (in eval mode, without gradients, on the
    CPU in float32: a model elsewhere is an `InvalidSpec` saying how to pass it; each module's
    train/eval flag is restored after) and
    read every ``Conv2d`` call with a forward pre-hook: its input's shape, and the module's
    kernel, stride, padding, dilation, groups and bias. Only calls of a module's forward are seen
    (a functional ``F.conv2d`` is not); a module called twice gives two layers of the same name.

    ``padding='same'`` and ``'valid'`` are resolved to numbers. ConvSpec holds non-square
    kernels, strides, paddings and dilations as (h, w) pairs, so those are kept. Where torch pads
    the input itself before the convolution, the spec is the convolution cuDNN runs, and
    ``Layer.note`` says so: ``padding='same'`` with an even (dilated) kernel pads one more
    row/column at the bottom/right first; ``padding_mode`` other than ``'zeros'`` pads the whole
    border first and convolves with padding 0. An unbatched (C, H, W) input runs as N=1.

    Returned as `Skipped` with the reason: Conv1d, Conv3d and ConvTranspose{1,2,3}d calls, a
    Conv2d that ConvSpec cannot hold (its error), a convolution module that forward never called.
    ``dtype`` and ``layout`` (default fp16, NHWC) are the ones asked for, not the example's.
    """
    import torch
    from torch import nn

    shape = _input_shape(input_shape)
    _check_model(model)
    if batch is not None and _whole("batch", batch) != shape[0]:
        raise InvalidSpec("batch", batch, f"the batch is the example input's first dimension ({shape[0]} in "
                          f"input_shape={shape}); leave batch out or make them agree")
    dtype, layout = ("fp16" if dtype is None else dtype), ("NHWC" if layout is None else layout)
    ConvSpec(dtype=dtype, layout=layout)  # InvalidSpec naming a bad dtype or layout
    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    convs = [(n or type(m).__name__, m) for n, m in model.named_modules() if isinstance(m, kinds)]
    model_name = type(model).__name__
    if not any(isinstance(m, nn.Conv2d) for _, m in convs):
        found = sorted({type(m).__name__ for _, m in convs})
        raise InvalidSpec("net", model_name, "has no Conv2d layer, so no convolution for this workbook"
                          + (f" (its convolutions: {', '.join(found)})" if found else ""))
    if len(shape) < 3:
        raise InvalidSpec("input_shape", shape, f"has {len(shape)} dimension(s); a network of Conv2d takes an image "
                          "batch (N, C, H, W), e.g. (1, 3, 224, 224)")
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
    skipped += [Skipped(n, type(m).__name__, f"forward never called it with input shape {shape}")
                for n, m in convs if id(m) not in called]
    if not layers:
        why = "; ".join(f"{s.name}: {s.reason}" for s in skipped)
        raise InvalidSpec("net", model_name, f"no Conv2d layer ran as a 2-D convolution with input shape {shape}: {why}")
    return Network(model_name, tuple(layers), tuple(skipped), f"torch {model_name}, input shape {shape}")


def _input_shape(input_shape) -> Tuple[int, ...]:
    if input_shape is None:
        raise InvalidSpec("input_shape", None, "a torch module needs its example input's shape, "
                          "e.g. input_shape=(1, 3, 224, 224)")
    if not isinstance(input_shape, (tuple, list)) or not input_shape:
        raise InvalidSpec("input_shape", input_shape, "must be a tuple of whole numbers, e.g. (1, 3, 224, 224)")
    return tuple(_whole("input_shape", d) for d in input_shape)


def _check_model(model) -> None:
    """The model's layers are read on the CPU in float32 (labkit measures on the GPU in the dtype
    asked for): a model on a GPU or in another float type is named with the one-line fix."""
    param = next(model.parameters(), None)
    if param is None:
        return
    if param.device.type != "cpu":
        raise InvalidSpec("net", type(model).__name__, f"its parameters are on {param.device}; labkit reads the layers "
                          "with one forward pass on the CPU: pass model.cpu() (the report measures on the GPU anyway)")
    if param.dtype.is_floating_point and str(param.dtype) != "torch.float32":
        raise InvalidSpec("net", type(model).__name__, f"its parameters are {param.dtype}; labkit reads the layers in "
                          "float32 on the CPU: pass model.float() (the report's precision is dtype=, e.g. 'fp16')")


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
    float_param = param is not None and param.dtype.is_floating_point
    try:
        model.eval()
        x = torch.zeros(shape, dtype=param.dtype if float_param else torch.float32,
                        device=param.device if param is not None else "cpu")
        with torch.no_grad():
            model(x)
    except Exception as err:  # noqa: BLE001 - whatever the model raised becomes a labkit error naming the shape
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise InvalidSpec("input_shape", shape, f"{type(model).__name__} rejected it: "
                          f"{type(err).__name__}: {msg[:500]}") from err
    finally:
        for h in handles:
            h.remove()
        for m, training in flags:
            m.training = training
    return calls


def _not_2d(m, shp) -> str:
    dims = len(m.kernel_size)
    if "Transpose" in type(m).__name__:
        return (f"a transposed {dims}-D convolution (input {shp}); ConvSpec holds forward convolutions "
                "(cuDNN runs this one as the dgrad of a convolution), so it is left out")
    return f"a {dims}-D convolution (input {shp}); ConvSpec holds 2-D convolutions only"


def _spec_of(m, shp, dtype: str, layout: str) -> Tuple[ConvSpec, str]:
    """The ConvSpec of one Conv2d call with input shape ``shp``, and a note where the spec is not
    the module's own arguments (see `_from_module`)."""
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
        notes.append(f"padding_mode={m.padding_mode!r}: torch pads the input itself first, so cuDNN runs "
                     f"this convolution on {size[0]}x{size[1]} with padding 0")
    elif (size[0], size[1]) != (h, w):
        notes.append(f"padding={m.padding!r} with an even (dilated) kernel: torch pads one more row/column "
                     f"at the bottom/right first, so cuDNN runs this convolution on {size[0]}x{size[1]} "
                     f"with padding {tuple(pads)}")
    elif isinstance(m.padding, str):
        notes.append(f"padding={m.padding!r} is {tuple(pads)}")
    spec = ConvSpec(N=n, C=c, H=size[0], W=size[1], K=m.out_channels, R=m.kernel_size[0], S=m.kernel_size[1],
                    stride=tuple(m.stride), padding=tuple(pads), dilation=tuple(m.dilation), groups=m.groups,
                    dtype=dtype, layout=layout)
    return spec, "; ".join(notes)
