"""What a network's convolution layers are recorded as: `Layer` (one ``Conv2d`` call), `Skipped`
(a convolution module left out, with the reason), `Network` (what `labkit.networks.layers_of`
returns) and `Group` (identical specs, from `unique`, so that a report measures each once).
Units: pixels for H, W; elements for channel counts (the `ConvSpec` fields).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

from ..errors import InvalidSpec
from ..spec import ConvSpec


@dataclass(frozen=True)
class Layer:
    """One convolution call of a network.

    Attributes:
        name: the module's name (torchvision's for the presets, ``conv0``, ... for a list of specs).
        spec: the problem, with the shapes at this call's input.
        bias: whether the layer adds a per-channel bias (not part of the convolution cuDNN sizes a
            workspace for).
        note: how the spec differs from the module's own arguments, if it does.
    """

    name: str
    spec: ConvSpec
    bias: bool = False
    note: str = ""


@dataclass(frozen=True)
class Skipped:
    """A convolution module that is not in `Network.layers`.

    Attributes:
        name: the module's name.
        kind: its class name (``Conv1d``, ``ConvTranspose2d``, ...).
        reason: why it was left out.
    """

    name: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Group:
    """Identical specs of a network (`unique`).

    Attributes:
        spec: the shared `ConvSpec`.
        count: how many layers have it.
        names: their names, in forward order.
    """

    spec: ConvSpec
    count: int
    names: Tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """What `layers_of` returns. Iterating, ``len`` and indexing go over ``layers``.

    Attributes:
        name: the preset's name, or the model's class name.
        layers: the `Layer` s, in forward order.
        skipped: the `Skipped` convolution modules, with the reason.
        source: where the layers came from, in words.
    """

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
        """The first layer called ``name``.

        Args:
            name: a layer's name.

        Returns:
            The `Layer`; `InvalidSpec` when there is none.
        """
        for lay in self.layers:
            if lay.name == name:
                return lay
        raise InvalidSpec("name", name, f"no layer of {self.name} has this name")


def unique(layers) -> List[Group]:
    """Identical specs grouped, in the order each is first seen. A report measures each group once.

    Specs are identical when their `ConvSpec.key` is (every field, dtype, layout and direction
    included); a bias does not count.

    Args:
        layers: a `Network`, or a list of `Layer` (or of ConvSpec, named ``conv0``, ...).

    Returns:
        One `Group` per distinct spec, with how many layers share it and their names.
    """
    seen: Dict[tuple, list] = {}
    for i, lay in enumerate(layers):
        if isinstance(lay, ConvSpec):
            lay = Layer(f"conv{i}", lay)
        if not isinstance(lay, Layer):
            raise InvalidSpec(
                f"layers[{i}]", type(lay).__name__, "every item must be a Layer (or a ConvSpec)"
            )
        seen.setdefault(lay.spec.key, [lay.spec, []])[1].append(lay.name)
    return [Group(spec, len(names), tuple(names)) for spec, names in seen.values()]
