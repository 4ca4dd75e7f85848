"""Check labkit.networks' presets layer by layer against torchvision's own models (not run by CI).

Each torchvision model is built with ``weights=None`` (nothing is downloaded), read through
``labkit.networks.layers_of(model, input_shape=...)`` (the torch path: forward hooks), and every
layer is compared with the preset: the name, the bias flag and every ConvSpec field (N, C, H, W,
K, R, S, stride, padding, dilation, groups, dtype, layout, direction). The counts must match too,
and the torch path must skip nothing. Sizes: 224x224 (what the presets are documented at), an
odd square size and a non-square one; batch 2.

Needs torch and torchvision, e.g. in a scratch venv outside the repo:

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch torchvision
    PYTHONPATH=. /tmp/tv/bin/python scripts/check_networks_torchvision.py

Exit status 0 when every preset matches at every size, 1 otherwise.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import torch
import torchvision
from torchvision import models

from labkit import networks

SIZES = (224, 199, (160, 256))
BATCH = 2


def deeplab_aspp():
    """torchvision's DeepLabV3-ResNet50; only its ASPP module (classifier.0.*) is the preset."""
    return models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, aux_loss=False)


MODELS = {
    "resnet50": (lambda: models.resnet50(weights=None), None),
    "resnext50_32x4d": (lambda: models.resnext50_32x4d(weights=None), None),
    "mobilenet_v2": (lambda: models.mobilenet_v2(weights=None), None),
    "convnext_tiny": (lambda: models.convnext_tiny(weights=None), None),
    "vgg16": (lambda: models.vgg16(weights=None), None),
    "deeplabv3_aspp": (deeplab_aspp, "classifier.0."),
}


def compare(preset, got) -> list:
    """Differences between two lists of Layer, as lines."""
    diffs = []
    if len(preset) != len(got):
        diffs.append(f"count: preset {len(preset)}, torchvision {len(got)}")
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


def main() -> int:
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}; batch {BATCH}")
    failed = 0
    for name, (build, prefix) in MODELS.items():
        model = build()
        torch_convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
        for size in SIZES:
            h, w = (size, size) if isinstance(size, int) else size
            t0 = time.perf_counter()
            net = networks.layers_of(model, input_shape=(BATCH, 3, h, w))
            got = [lay for lay in net.layers if prefix is None or lay.name.startswith(prefix)]
            preset = networks.layers_of(name, batch=BATCH, image=size).layers
            diffs = compare(preset, got)
            if net.skipped:
                diffs.append(f"torch path skipped {len(net.skipped)}: {net.skipped[:3]}")
            if any(lay.note for lay in got):
                diffs.append(f"unexpected notes: {[lay.note for lay in got if lay.note][:3]}")
            status = "OK  " if not diffs else "FAIL"
            failed += bool(diffs)
            print(
                f"{status} {name:16s} {h}x{w}: {len(preset)} preset layers, {len(got)} from torchvision "
                f"(model has {torch_convs} Conv2d modules), {len(networks.unique(preset))} unique; "
                f"{time.perf_counter() - t0:.1f} s"
            )
            for d in diffs[:20]:
                print("     ", d)
    print("all presets match torchvision" if not failed else f"{failed} mismatching preset/size pair(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
