"""labkit.networks: the presets' layer counts and spot-checked shapes, unique(), the list-of-specs
path, errors, and (where torch is installed) the torch path on a small model.

The true counts are the number of ``nn.Conv2d`` modules in torchvision 0.29.1's models built with
``weights=None`` (``sum(isinstance(m, nn.Conv2d) for m in model.modules())``), each also called
exactly once by forward; ``tests/test_presets_torchvision.py`` compares
every layer's name and spec with the preset (at 224x224, 199x199 and 160x256, batch 2). By
architecture:

* resnet50: stem 1 + 16 Bottleneck blocks x 3 + 4 downsample 1x1s = 53;
* resnext50_32x4d: the same 53 (only widths and groups differ);
* mobilenet_v2: stem 1 + features.1 (no expansion) 2 + 16 blocks x 3 + final 1x1 1 = 52;
* convnext_tiny: stem 1 + 3+3+9+3 depthwise 7x7 + 3 downsamplers = 22 (pointwise layers are Linear);
* vgg16: configuration "D", 2+2+3+3+3 = 13;
* deeplabv3_aspp: ASPP's 1x1 + three atrous 3x3 + pooling 1x1 + projection 1x1 = 6 (of the
  whole deeplabv3_resnet50's 61 Conv2d: 53 backbone, these 6, classifier.1 and classifier.4).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from labkit import ConvSpec, InvalidSpec, LabkitError
from labkit import networks as nw
from labkit.networks import Layer, layers_of, unique

COUNTS = {
    "resnet50": 53,
    "resnext50_32x4d": 53,
    "mobilenet_v2": 52,
    "convnext_tiny": 22,
    "vgg16": 13,
    "deeplabv3_aspp": 6,
}
#: distinct specs at 224x224 (resnet50 by hand: stem 1, layer1 4, layers 2-4 six each; vgg16:
#: 13 layers less features.14 = .12, .21 = .19, .26 = .28 = .24; convnext_tiny: one per stage
#: kind, 4 depthwise + stem + 3 downsamplers)
UNIQUE = {
    "resnet50": 23,
    "resnext50_32x4d": 24,
    "mobilenet_v2": 30,
    "convnext_tiny": 8,
    "vgg16": 9,
    "deeplabv3_aspp": 6,
}


def shape(spec: ConvSpec) -> tuple:
    return (
        spec.N,
        spec.C,
        spec.H,
        spec.W,
        spec.K,
        spec.R,
        spec.S,
        spec.stride,
        spec.padding,
        spec.dilation,
        spec.groups,
    )


# ---- presets ------------------------------------------------------------------------------------
def test_every_preset_has_a_count_here():
    assert set(COUNTS) == set(nw.PRESETS) == set(UNIQUE)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_preset_counts(name):
    net = layers_of(name)
    assert len(net) == COUNTS[name] == len(nw.PRESETS[name]())
    assert len(unique(net)) == UNIQUE[name]
    assert len({lay.name for lay in net}) == len(net), "names are unique"
    assert net.skipped == () and net.name == name
    assert all(lay.spec.dtype == "fp16" and lay.spec.layout == "NHWC" and lay.spec.N == 1 for lay in net)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_preset_arguments_reach_every_spec(name):
    net = layers_of(name, batch=8, dtype="bf16", layout="NCHW", image=(160, 256))
    assert len(net) == COUNTS[name]
    assert {(lay.spec.N, lay.spec.dtype, lay.spec.layout) for lay in net} == {(8, "bf16", "NCHW")}
    assert net.source == f"preset {name}, 160x256 image"


def test_resnet50_layers():
    net = layers_of("resnet50")
    # stem: 3 -> 64, 7x7 stride 2 padding 3 on 224x224
    assert net[0].name == "conv1"
    assert shape(net[0].spec) == (1, 3, 224, 224, 64, 7, 7, (2, 2), (3, 3), (1, 1), 1)
    # after the 3x3 s2 max pool: 56x56; forward order inside a first block: conv1-3, then downsample
    assert [lay.name for lay in net[1:6]] == [
        "layer1.0.conv1",
        "layer1.0.conv2",
        "layer1.0.conv3",
        "layer1.0.downsample.0",
        "layer1.1.conv1",
    ]
    assert shape(net.layer("layer1.0.conv2").spec) == (1, 64, 56, 56, 64, 3, 3, (1, 1), (1, 1), (1, 1), 1)
    # ResNet v1.5: the stride is on the 3x3 (14x14 in, 7x7 out), and on the downsample 1x1
    assert shape(net.layer("layer4.0.conv2").spec) == (1, 512, 14, 14, 512, 3, 3, (2, 2), (1, 1), (1, 1), 1)
    assert shape(net.layer("layer4.0.downsample.0").spec) == (
        1,
        1024,
        14,
        14,
        2048,
        1,
        1,
        (2, 2),
        (0, 0),
        (1, 1),
        1,
    )
    assert net.layer("layer4.0.downsample.0").spec.P == 7
    assert net[-1].name == "layer4.2.conv3" and shape(net[-1].spec)[:5] == (1, 512, 7, 7, 2048)
    assert not any(lay.bias for lay in net)


def test_resnext_grouped_conv2():
    net = layers_of("resnext50_32x4d")
    # width = int(planes * 4 / 64) * 32 = 2 * planes
    assert shape(net.layer("layer1.0.conv2").spec) == (1, 128, 56, 56, 128, 3, 3, (1, 1), (1, 1), (1, 1), 32)
    assert shape(net.layer("layer4.1.conv2").spec) == (1, 1024, 7, 7, 1024, 3, 3, (1, 1), (1, 1), (1, 1), 32)
    assert net.layer("layer4.1.conv3").spec.K == 2048


def test_mobilenet_v2_depthwise():
    net = layers_of("mobilenet_v2")
    assert shape(net[0].spec) == (1, 3, 224, 224, 32, 3, 3, (2, 2), (1, 1), (1, 1), 1)
    # features.1 has no expansion: depthwise then project
    assert [lay.name for lay in net[1:3]] == ["features.1.conv.0.0", "features.1.conv.1"]
    assert shape(net[1].spec) == (1, 32, 112, 112, 32, 3, 3, (1, 1), (1, 1), (1, 1), 32)
    # features.2: expand 16 -> 96, depthwise 96 with stride 2, project to 24
    assert shape(net.layer("features.2.conv.0.0").spec)[:5] == (1, 16, 112, 112, 96)
    assert shape(net.layer("features.2.conv.1.0").spec) == (
        1,
        96,
        112,
        112,
        96,
        3,
        3,
        (2, 2),
        (1, 1),
        (1, 1),
        96,
    )
    assert net.layer("features.2.conv.2").spec.K == 24
    assert shape(net.layer("features.17.conv.1.0").spec) == (
        1,
        960,
        7,
        7,
        960,
        3,
        3,
        (1, 1),
        (1, 1),
        (1, 1),
        960,
    )
    assert net[-1].name == "features.18.0" and shape(net[-1].spec)[:5] == (1, 320, 7, 7, 1280)
    assert sum(lay.spec.groups > 1 for lay in net) == 17


def test_convnext_tiny_depthwise_7x7():
    net = layers_of("convnext_tiny")
    assert shape(net[0].spec) == (1, 3, 224, 224, 96, 4, 4, (4, 4), (0, 0), (1, 1), 1)
    assert shape(net.layer("features.1.0.block.0").spec) == (
        1,
        96,
        56,
        56,
        96,
        7,
        7,
        (1, 1),
        (3, 3),
        (1, 1),
        96,
    )
    assert shape(net.layer("features.2.1").spec) == (1, 96, 56, 56, 192, 2, 2, (2, 2), (0, 0), (1, 1), 1)
    assert shape(net.layer("features.5.8.block.0").spec) == (
        1,
        384,
        14,
        14,
        384,
        7,
        7,
        (1, 1),
        (3, 3),
        (1, 1),
        384,
    )
    assert net[-1].name == "features.7.2.block.0" and net[-1].spec.H == 7
    assert all(lay.bias for lay in net)


def test_vgg16_names_and_pools():
    net = layers_of("vgg16")
    assert [lay.name for lay in net] == [
        f"features.{i}" for i in (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)
    ]
    assert [lay.spec.H for lay in net] == [224, 224, 112, 112, 56, 56, 56, 28, 28, 28, 14, 14, 14]
    assert all(lay.spec.padding == (1, 1) and lay.spec.R == 3 and lay.bias for lay in net)


def test_deeplabv3_aspp_rates():
    net = layers_of("deeplabv3_aspp")
    assert [lay.name for lay in net] == [
        "classifier.0.convs.0.0",
        "classifier.0.convs.1.0",
        "classifier.0.convs.2.0",
        "classifier.0.convs.3.0",
        "classifier.0.convs.4.1",
        "classifier.0.project.0",
    ]
    # torchvision DeepLabHead: ASPP(in_channels, atrous_rates=(12, 24, 36)); padding = dilation
    assert [net[i].spec.dilation for i in (1, 2, 3)] == [(12, 12), (24, 24), (36, 36)]
    assert [net[i].spec.padding for i in (1, 2, 3)] == [(12, 12), (24, 24), (36, 36)]
    # output stride 8: 28x28 for 224, 2048 channels in, 256 out, the same size out
    for lay in net[:4]:
        assert (lay.spec.C, lay.spec.H, lay.spec.W, lay.spec.K, lay.spec.P) == (2048, 28, 28, 256, 28)
    assert shape(net[4].spec)[:5] == (1, 2048, 1, 1, 256)
    assert shape(net[5].spec)[:5] == (1, 1280, 28, 28, 256)
    assert layers_of("deeplabv3_aspp", image=513)[0].spec.H == 65  # 513 -> 257 -> 129 -> 65


def test_image_too_small_names_the_layer():
    with pytest.raises(InvalidSpec) as e:
        layers_of("vgg16", image=8)
    assert e.value.field == "image" and "features.24" in str(e.value)


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(batch=0), "batch"),
        (dict(batch=2.0), "batch"),
        (dict(batch=True), "batch"),
        (dict(dtype="fp64"), "dtype"),
        (dict(layout="CHWN"), "layout"),
        (dict(image=0), "image"),
        (dict(image=(224,)), "image"),
        (dict(image="224"), "image"),
        (dict(input_shape=(1, 3, 224, 224)), "input_shape"),
    ],
)
def test_bad_preset_arguments(kw, field):
    with pytest.raises(InvalidSpec) as e:
        layers_of("resnet50", **kw)
    assert e.value.field == field


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(InvalidSpec) as e:
        layers_of("resnet51")
    assert e.value.field == "net" and e.value.value == "resnet51"
    for name in nw.PRESETS:
        assert name in str(e.value)
    assert len(layers_of("ResNet50")) == 53 and len(layers_of("mobilenet-v2")) == 52  # case, - or _


def test_not_a_network():
    with pytest.raises(InvalidSpec) as e:
        layers_of(42)
    assert e.value.field == "net" and "preset" in e.value.rule and isinstance(e.value, LabkitError)


# ---- a list of specs and unique() ---------------------------------------------------------------
def test_list_of_specs_is_kept_and_named():
    a, b = ConvSpec(C=3, K=64, R=7, S=7, stride=2, padding=3, H=224, W=224), ConvSpec(dtype="fp32")
    net = layers_of([a, b, a])
    assert [lay.name for lay in net] == ["conv0", "conv1", "conv2"]
    assert [lay.spec for lay in net] == [a, b, a]
    replaced = layers_of([a, b], batch=4, layout="NCHW")
    assert [(lay.spec.N, lay.spec.layout, lay.spec.dtype) for lay in replaced] == [
        (4, "NCHW", "fp16"),
        (4, "NCHW", "fp32"),
    ]
    assert layers_of(a)[0].spec == a
    assert layers_of([Layer("mine", a, True)])[0] == Layer("mine", a, True)


@pytest.mark.parametrize(
    "bad, field", [([], "net"), ([ConvSpec(), "3x3"], "net[1]"), ((ConvSpec(), None), "net[1]")]
)
def test_bad_lists(bad, field):
    with pytest.raises(InvalidSpec) as e:
        layers_of(bad)
    assert e.value.field == field


def test_list_replacement_is_validated():
    with pytest.raises(InvalidSpec) as e:
        layers_of([ConvSpec()], batch=0)
    assert e.value.field == "batch" and "conv0" in e.value.rule


def test_unique_groups_in_first_seen_order():
    a, b = ConvSpec(K=32), ConvSpec(K=16)
    groups = unique([a, b, a, a.replace(dtype="fp32"), b])
    assert [(g.spec, g.count, g.names) for g in groups] == [
        (a, 2, ("conv0", "conv2")),
        (b, 2, ("conv1", "conv4")),
        (a.replace(dtype="fp32"), 1, ("conv3",)),
    ]
    groups = unique(layers_of("resnet50"))
    assert sum(g.count for g in groups) == 53
    # layer1.0's downsample is the same problem as its conv3 (64 -> 256 1x1 at 56x56)
    g = next(g for g in groups if "layer1.0.conv3" in g.names)
    assert g.names == ("layer1.0.conv3", "layer1.0.downsample.0", "layer1.1.conv3", "layer1.2.conv3")
    assert groups[0].names == ("conv1",)
    vgg = unique(layers_of("vgg16"))
    assert [g.count for g in vgg] == [1, 1, 1, 1, 1, 2, 1, 2, 3]


def test_unique_rejects_other_items():
    with pytest.raises(InvalidSpec) as e:
        unique([ConvSpec(), "conv"])
    assert e.value.field == "layers[1]"


def test_presets_do_not_import_torch():
    code = (
        "import sys, labkit.networks as n; [n.layers_of(k) for k in n.PRESETS]; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the torch path (torch is optional: skipped, visibly, without it) ----------------------------
@pytest.fixture
def torch():
    return pytest.importorskip(
        "torch", reason="the torch path of layers_of needs torch (not a labkit dependency)"
    )


def small_model(torch):
    nn = torch.nn

    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, stride=(1, 2), padding=1, bias=True)
            self.grouped = nn.Conv2d(16, 32, (1, 5), padding=(0, 2), dilation=(1, 2), groups=4, bias=False)
            self.same = nn.Conv2d(32, 8, 4, padding="same")
            self.valid = nn.Conv2d(8, 8, 3, padding="valid")
            self.reflect = nn.Conv2d(8, 8, 3, padding=2, padding_mode="reflect")
            self.seq = nn.Conv1d(8, 4, 3)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.unused = nn.Conv2d(4, 4, 1)

        def forward(self, x):
            x = self.reflect(self.valid(self.same(self.grouped(self.stem(x)))))
            n, c, h, w = x.shape
            self.seq(x.reshape(n, c, h * w))
            return self.up(x)

    return Small()


def test_torch_path_reads_every_field(torch):
    model = small_model(torch)
    model.train()
    net = layers_of(model, input_shape=(2, 3, 32, 64), dtype="bf16")
    assert model.training and all(m.training for m in model.modules()), "train/eval flags restored"
    assert [lay.name for lay in net] == ["stem", "grouped", "same", "valid", "reflect"]
    assert net.name == "Small" and net.source == "torch Small, input shape (2, 3, 32, 64)"
    stem, grouped, same, valid, reflect = net
    assert shape(stem.spec) == (2, 3, 32, 64, 16, 3, 3, (1, 2), (1, 1), (1, 1), 1) and stem.bias
    assert stem.spec.dtype == "bf16" and stem.spec.layout == "NHWC" and stem.note == ""
    # non-square kernel, padding and dilation kept as (h, w) pairs; groups read
    assert shape(grouped.spec) == (2, 16, 32, 32, 32, 1, 5, (1, 1), (0, 2), (1, 2), 4) and not grouped.bias
    assert (grouped.spec.P, grouped.spec.Q) == (32, 28)
    # 'same' with a 4x4 kernel: total padding 3, torch pads 1 extra at the bottom/right first
    assert shape(same.spec) == (2, 32, 33, 29, 8, 4, 4, (1, 1), (1, 1), (1, 1), 1)
    assert (same.spec.P, same.spec.Q) == (32, 28) and "bottom/right" in same.note
    assert valid.spec.padding == (0, 0) and "'valid'" in valid.note
    # reflect: the image is padded by torch (28+4 by 26+4), the convolution has padding 0
    assert (
        shape(reflect.spec)[2:4] == (34, 30) and reflect.spec.padding == (0, 0) and "reflect" in reflect.note
    )
    skipped = {s.name: s for s in net.skipped}
    assert set(skipped) == {"seq", "up", "unused"}
    assert skipped["seq"].kind == "Conv1d" and "2-D convolutions only" in skipped["seq"].reason
    assert skipped["up"].kind == "ConvTranspose2d" and "transposed" in skipped["up"].reason
    assert "never called" in skipped["unused"].reason


def test_torch_path_errors(torch):
    nn = torch.nn
    model = small_model(torch)
    with pytest.raises(InvalidSpec) as e:
        layers_of(model, input_shape=(1, 4, 32, 32))
    assert e.value.field == "input_shape" and e.value.value == (1, 4, 32, 32)
    assert "Small rejected it" in e.value.rule and "channels" in e.value.rule
    with pytest.raises(InvalidSpec) as e:
        layers_of(model)
    assert e.value.field == "input_shape" and "(1, 3, 224, 224)" in e.value.rule
    with pytest.raises(InvalidSpec) as e:
        layers_of(model, batch=4, input_shape=(2, 3, 32, 32))
    assert e.value.field == "batch"
    with pytest.raises(InvalidSpec) as e:
        layers_of(nn.Sequential(nn.Conv1d(3, 4, 3), nn.ReLU()), input_shape=(1, 3, 16))
    assert e.value.field == "net" and "no Conv2d" in e.value.rule and "Conv1d" in e.value.rule
    with pytest.raises(InvalidSpec) as e:
        layers_of(nn.Linear(3, 4), input_shape=(1, 3))
    assert "no Conv2d" in str(e.value)


def test_torch_path_unbatched_input(torch):
    conv = torch.nn.Conv2d(3, 8, 3)
    net = layers_of(conv, input_shape=(3, 10, 12))
    assert shape(net[0].spec)[:4] == (1, 3, 10, 12) and "unbatched" in net[0].note
    assert net[0].name == "Conv2d"


def test_a_model_runs_on_the_meta_device_and_gives_the_cpus_layers(torch, monkeypatch):
    """A model's layers are read from a run on PyTorch's meta device (shapes only): the model sees
    meta tensors, its own parameters are left as they were, and the layers are those a CPU run gives."""
    from labkit.networks import torch_models

    model = small_model(torch)
    seen = []
    model.register_forward_pre_hook(lambda m, args: seen.append(args[0].device.type))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    meta = layers_of(model, input_shape=(2, 3, 20, 24))
    assert seen == ["meta"]
    assert all(v.device.type == "cpu" and torch.equal(v, before[k]) for k, v in model.state_dict().items())
    monkeypatch.setattr(torch_models, "_run_on_meta", lambda *a: False)
    cpu = layers_of(model, input_shape=(2, 3, 20, 24))
    assert seen == ["meta", "cpu"]
    assert meta.layers == cpu.layers and meta.skipped == cpu.skipped and len(meta.layers) == 5


def test_a_model_that_reads_a_value_is_read_on_the_cpu(torch):
    """A forward pass that needs a value (here ``.item()``) cannot run on the meta device: the
    layers come from the CPU run, without a layer twice from the meta run that stopped."""
    nn = torch.nn

    class Reads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 1)

        def forward(self, x):
            y = self.a(x)
            scale = float(y.abs().max().item()) + 1.0  # a value: no meta tensor has one
            return self.b(y / scale)

    net = layers_of(Reads(), input_shape=(1, 3, 16, 16))
    assert [lay.name for lay in net.layers] == ["a", "b"]
    assert [lay.spec.H for lay in net.layers] == [16, 14]
