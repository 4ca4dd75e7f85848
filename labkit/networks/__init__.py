"""The convolution layers of a network, as `ConvSpec` s: shipped presets, a list of specs, or a
PyTorch model read with forward hooks.

One record per ``Conv2d`` call, in forward order: `Layer` (``name``, the torchvision module name
such as ``layer1.0.conv2``; ``spec``, the exact problem cuDNN is given: N, C, H, W at that
layer's input, K, R, S, stride, padding, dilation, groups, plus the dtype and layout asked for;
``bias``, whether the layer adds a bias; ``note``, how a spec was derived when it is not read
straight off the module). `unique` groups identical specs, so that a report measures each once.

Presets (no dependency; each checked layer by layer against torchvision's own model by
``tests/test_presets_torchvision.py``): see `PRESETS`. Units: pixels for H, W and the image
size; elements for channel counts.

Where things live: `layers_of` (here: any of the three kinds of network, as a `Network`);
`records` (`Layer`, `Skipped`, `Group`, `Network`, `unique`); `presets` (the shipped networks,
`PRESETS`); `torch_models` (a PyTorch model's layers, and a model named ``"module:callable"``);
`arguments` (the checks on a batch and an image size).
"""

from __future__ import annotations

import sys

from ..errors import InvalidSpec
from ..spec import ConvSpec
from .arguments import image_pixels
from .presets import PRESETS, convnext_tiny, deeplabv3_aspp, mobilenet_v2, resnet50, resnext50_32x4d, vgg16
from .records import Group, Layer, Network, Skipped, unique
from .torch_models import from_module, is_model_path, model_from_path

__all__ = [
    "Layer",
    "Skipped",
    "Group",
    "Network",
    "unique",
    "layers_of",
    "PRESETS",
    "resnet50",
    "resnext50_32x4d",
    "mobilenet_v2",
    "convnext_tiny",
    "vgg16",
    "deeplabv3_aspp",
    "is_model_path",
    "model_from_path",
]


def layers_of(
    net,
    batch: int | None = None,
    *,
    dtype: str | None = None,
    layout: str | None = None,
    image=224,
    input_shape=None,
) -> Network:
    """The convolution layers of a network, in forward order.

    ``net`` is one of:

    * a preset name (`PRESETS`; case and ``-``/``_`` do not matter);
    * a list of `ConvSpec` (or of `Layer`): kept as given, named ``conv0``, ``conv1``, ... (a
      Layer keeps its name); ``batch``, ``dtype`` and ``layout`` replace those fields where given;
    * a PyTorch ``nn.Module`` with ``input_shape``: see `torch_models.from_module`. torch is
      imported only there.

    Args:
        net: the network, as above.
        batch: images per call; a preset's default is 1.
        dtype: a labkit dtype name; a preset's default is fp16.
        layout: NCHW or NHWC; a preset's default is NHWC.
        image: a preset's input size in pixels: one int (square) or an (H, W) pair.
        input_shape: a model's example input shape, e.g. (1, 3, 224, 224).

    Returns:
        A `Network`.

    Raises:
        InvalidSpec: naming the offending argument and the rule it broke.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(net, torch.nn.Module):
        return from_module(net, input_shape, batch, dtype, layout)
    if input_shape is not None:
        raise InvalidSpec("input_shape", input_shape, "is only for a torch.nn.Module; a preset takes image=")
    if isinstance(net, str):
        key = net.strip().lower().replace("-", "_")
        if key not in PRESETS:
            raise InvalidSpec("net", net, f"unknown network; known: {', '.join(PRESETS)}")
        layers = PRESETS[key](
            1 if batch is None else batch,
            "fp16" if dtype is None else dtype,
            "NHWC" if layout is None else layout,
            image,
        )
        h, w = image_pixels(image)
        return Network(key, tuple(layers), (), f"preset {key}, {h}x{w} image")
    if isinstance(net, (ConvSpec, Layer)):
        net = [net]
    if isinstance(net, (list, tuple, Network)):
        return _from_specs(list(net), batch, dtype, layout)
    raise InvalidSpec(
        "net",
        type(net).__name__,
        f"must be a preset name ({', '.join(PRESETS)}), a list of "
        "ConvSpec, or a torch.nn.Module with input_shape=",
    )


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
    said = "1 ConvSpec" if len(layers) == 1 else f"{len(layers)} ConvSpecs"
    return Network("specs", tuple(layers), (), said)
