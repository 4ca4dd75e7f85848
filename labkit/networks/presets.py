"""The shipped preset networks, each a function (batch, dtype, layout, image) returning its
``Conv2d`` calls as a list of `Layer` in forward order, with torchvision's module names: `PRESETS`.

No dependency: each preset walks its network's shapes itself (checked layer by layer against
torchvision's own model by ``tests/test_presets_torchvision.py``). Units: pixels for H, W and
the image size; elements for channel counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List

from ..errors import InvalidSpec
from ..spec import ConvSpec
from .arguments import image_pixels, whole_number
from .records import Layer


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

    def conv(self, name, x, k, r, *, stride=1, padding=0, dilation=1, groups=1, bias=False):
        c, h, w = x
        try:
            spec = ConvSpec(
                N=self.batch,
                C=c,
                H=h,
                W=w,
                K=k,
                R=r,
                S=r,
                stride=stride,
                padding=padding,
                dilation=dilation,
                groups=groups,
                dtype=self.dtype,
                layout=self.layout,
            )
        except InvalidSpec as err:
            raise InvalidSpec(
                "image",
                (h, w),
                f"{self.net} cannot take this image size: at layer {name} ({c}x{h}x{w} in): {err}",
            ) from err
        self.layers.append(Layer(name, spec, bias))
        return (k, spec.P, spec.Q)


def _pool(x, k: int, stride: int, padding: int = 0):
    """(C, H, W) after a max pool (floor mode, as torchvision's)."""
    c, h, w = x
    return (c, (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1)


def _start(net, batch, dtype, layout, image):
    """Validated builder and the (3, H, W) input of a preset."""
    batch = whole_number("batch", batch)
    ConvSpec(N=batch, dtype=dtype, layout=layout)  # dtype and layout: InvalidSpec naming them
    h, w = image_pixels(image)
    return _Builder(net, batch, dtype, layout), (3, h, w)


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
    """torchvision ``resnet50``: 53 Conv2d layers, none with a bias.

    They are the 7x7 stem, 16 Bottleneck blocks of three and 4 downsample 1x1s.

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
    return _resnet("resnet50", batch, dtype, layout, image)


def resnext50_32x4d(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``resnext50_32x4d``: ResNet-50's 53 Conv2d layers, with 32 groups.

    Each has 4 channels per group at 64 planes (conv1/conv2 widths 128, 256, 512, 1024; conv2 has
    groups=32).

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
    return _resnet("resnext50_32x4d", batch, dtype, layout, image, groups=32, width_per_group=4)


def mobilenet_v2(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """torchvision ``mobilenet_v2`` (width 1.0): 52 Conv2d layers, none with a bias.

    features.0.0 is the 3x3 s2 stem; features.1..17 are inverted residual blocks: an expanding 1x1
    (conv.0.0, absent in features.1 whose expansion is 1), a 3x3 depthwise (groups = channels) and a
    projecting 1x1; features.18.0 is the 1x1 to 1280 channels.

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
    b, x = _start("mobilenet_v2", batch, dtype, layout, image)
    x = b.conv("features.0.0", x, 32, 3, stride=2, padding=1)
    idx = 1
    for t, c, n, s in (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ):
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
    """torchvision ``convnext_tiny``: 22 Conv2d layers, all with a bias.

    They are the 4x4 s4 stem (features.0.0), a 7x7 depthwise conv with padding 3 in each of the
    3+3+9+3 blocks (features.{1,3,5,7}.<i>.block.0) and the three 2x2 s2 downsamplers
    (features.{2,4,6}.1). Each block's two pointwise layers are ``nn.Linear`` in torchvision (run on
    channels-last tensors), not Conv2d, so they are not here.

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
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
    """torchvision ``vgg16`` (no batch norm): 13 Conv2d layers, 3x3 padding 1 with a bias.

    They come in five blocks, each ended by a 2x2 s2 max pool (features.4, 9, 16, 23, 30).

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
    b, x = _start("vgg16", batch, dtype, layout, image)
    idx = 0
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            x, idx = _pool(x, 2, 2), idx + 1
        else:
            x, idx = b.conv(f"features.{idx}", x, v, 3, padding=1, bias=True), idx + 2  # conv, ReLU
    return b.layers


def deeplabv3_aspp(batch: int = 1, dtype: str = "fp16", layout: str = "NHWC", image=224) -> List[Layer]:
    """The ASPP module of torchvision ``deeplabv3_resnet50``'s head (``classifier.0``): 6 Conv2d layers.

    None has a bias. They run on the backbone's 2048-channel output-stride-8 feature map (ResNet-50
    with layer3 and layer4 dilated instead of strided): 28x28 for a 224x224 image. The feature map is
    the input's size after the stem conv, the max pool and layer2's stride 2 (each (h - 1) // 2 + 1).

    classifier.0.convs.0.0: 1x1 2048 -> 256; convs.1.0, convs.2.0, convs.3.0: 3x3 2048 -> 256 with
    dilation = padding = 12, 24, 36 (torchvision's atrous rates for DeepLabV3); convs.4.1: the
    image-pooling branch's 1x1 2048 -> 256 on the 1x1 average-pooled map; project.0: 1x1
    1280 -> 256 on the five branches concatenated. Not here: the head's two convolutions after ASPP
    (classifier.1, 3x3 256 -> 256, and classifier.4, 1x1 to the classes) and the backbone.

    Args:
        batch: images per call (N).
        dtype: a labkit dtype name.
        layout: NCHW or NHWC.
        image: the input's size in pixels: one int (square) or an (H, W) pair.

    Returns:
        The network's Conv2d calls as `Layer` s, in forward order.
    """
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
