"""labkit.networks' presets, layer by layer, against torchvision's own models (skipped without
torchvision: ``pip install -e '.[torch]'``).

Each torchvision model is built with ``weights=None`` (nothing is downloaded), read through
``labkit.networks.layers_of(model, input_shape=...)`` (forward hooks), and every layer is compared
with the preset: the name, the bias flag and every ConvSpec field. The counts must match, and the
torch path must skip nothing. Sizes: 224x224 (what the presets are documented at), an odd square
size and a non-square one; batch 2.
"""

from __future__ import annotations

import dataclasses

import pytest

from labkit import networks

models = pytest.importorskip("torchvision.models", reason="needs torchvision: pip install -e '.[torch]'")

SIZES = (224, 199, (160, 256))
BATCH = 2
MODELS = {
    "resnet50": (lambda: models.resnet50(weights=None), None),
    "resnext50_32x4d": (lambda: models.resnext50_32x4d(weights=None), None),
    "mobilenet_v2": (lambda: models.mobilenet_v2(weights=None), None),
    "convnext_tiny": (lambda: models.convnext_tiny(weights=None), None),
    "vgg16": (lambda: models.vgg16(weights=None), None),
    # only DeepLabV3's ASPP module (classifier.0.*) is the preset
    "deeplabv3_aspp": (
        lambda: models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, aux_loss=False),
        "classifier.0.",
    ),
}


def differences(preset, got) -> list:
    """Differences between two lists of Layer, as lines."""
    diffs = [f"count: preset {len(preset)}, torchvision {len(got)}"] if len(preset) != len(got) else []
    for i, (a, b) in enumerate(zip(preset, got)):
        if a.name != b.name:
            diffs.append(f"#{i}: name preset {a.name!r}, torchvision {b.name!r}")
        if a.bias != b.bias:
            diffs.append(f"#{i} {a.name}: bias preset {a.bias}, torchvision {b.bias}")
        for f in dataclasses.fields(a.spec):
            va, vb = getattr(a.spec, f.name), getattr(b.spec, f.name)
            if va != vb:
                diffs.append(f"#{i} {a.name}: {f.name} preset {va}, torchvision {vb}")
    return diffs


@pytest.mark.parametrize("name", MODELS)
def test_a_preset_is_torchvisions_model(name):
    build, prefix = MODELS[name]
    model = build()
    for size in SIZES:
        h, w = (size, size) if isinstance(size, int) else size
        net = networks.layers_of(model, input_shape=(BATCH, 3, h, w))
        got = [lay for lay in net.layers if prefix is None or lay.name.startswith(prefix)]
        preset = networks.layers_of(name, batch=BATCH, image=size).layers
        assert differences(preset, got) == [], f"{name} at {h}x{w}"
        assert not net.skipped and not any(lay.note for lay in got)
