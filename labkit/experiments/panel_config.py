"""What a lesson panel's configuration is written with: each topic module lists its panels as data
(``PANELS = {experiment: PanelConfig(...)}`` beside its ``CHARTS``), and `labkit.present.widgets`
builds a panel from that entry. A panel configuration names the experiment, the controls it shows
(names of `labkit.present.panel.controls.CONTROLS`), its base state and how a state becomes the
experiment's arguments. It holds no widget: it is read by the presentation layer, never the other
way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Optional, Tuple

from ..draw.plots import shape_label
from ..spec import ConvSpec

#: a convolution's fields as panel state keys
SPEC_FIELDS = (
    "N",
    "C",
    "K",
    "H",
    "W",
    "R",
    "S",
    "stride",
    "padding",
    "dilation",
    "groups",
    "dtype",
    "layout",
    "direction",
)
#: the shape controls every convolution panel shows
SHAPE = ("N", "C", "K", "H", "W", "R", "stride", "padding", "dilation", "groups")


def unpack(v):
    """A spec field as a control value: a square pair (1, 1) -> 1.

    Args:
        v: the field's value.

    Returns:
        One value for a square pair, a tuple for another list, else ``v``.
    """
    if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == v[1]:
        return v[0]
    return tuple(v) if isinstance(v, list) else v


def spec_of(state: dict) -> ConvSpec:
    """The convolution a panel state describes.

    Args:
        state: a panel state with every key of `SPEC_FIELDS`.

    Returns:
        The `ConvSpec`; `InvalidSpec` for an impossible one.
    """
    return ConvSpec(**{k: state[k] for k in SPEC_FIELDS})


def state_of(spec: ConvSpec, **extra) -> dict:
    """A panel state holding a convolution's fields.

    Args:
        spec: the convolution.
        **extra: other keys of the state.

    Returns:
        Control name -> value.
    """
    d = {f: unpack(getattr(spec, f)) for f in SPEC_FIELDS}
    d.update(extra)
    return d


@dataclass(frozen=True)
class PanelConfig:
    """What a panel runs: an experiment, its controls, its base state and how a state becomes arguments.

    Attributes:
        experiment: the experiment's name.
        title: the panel's title.
        controls: the controls it shows (names of `labkit.present.panel.controls.CONTROLS`).
        base: the state it opens at, and goes back to on *reset to base*.
        kwargs: ``kwargs(state)``: the experiment's arguments for a state.
        prefix: where control fields live in the request (``"spec."``: a convolution's fields).
        csv_name: the file its *save CSV* writes; empty: ``results_<experiment>.csv``.
        base_text: the base state in words, in the panel's header.
        recorded_controls: controls in recorded mode where they differ (e.g. dtype and layout as one,
            when the recording varied them together).
        live_options: live, the values a choice control offers where the experiment takes fewer than
            the control's.
        describe: a base state in words, for `rebased` (None: ``base_text`` stays as it is).
        own_base: the configuration's own base, kept by `rebased` (None: ``base`` is it).
    """

    experiment: str
    title: str
    controls: Tuple[str, ...]
    base: dict
    kwargs: Callable[[dict], dict]
    prefix: str = "spec."
    csv_name: str = ""
    base_text: str = ""
    recorded_controls: Optional[Tuple[str, ...]] = None
    live_options: Dict[str, Tuple] = field(default_factory=dict)
    describe: Optional[Callable[[dict], str]] = None
    own_base: Optional[dict] = None

    def field(self, name: str) -> str:
        """The request field a control sets.

        Args:
            name: the control.

        Returns:
            The dotted field, e.g. ``spec.N``.
        """
        return self.prefix + name if name in SPEC_FIELDS else name

    def rebased(self, state: dict) -> "PanelConfig":
        """This configuration with ``state`` as its base (a lesson that opens the panel elsewhere).

        Args:
            state: the panel state to go back to on *reset to base*.

        Returns:
            A new `PanelConfig`; ``base_text`` says ``state`` when ``describe`` is set.
        """
        text = self.describe(state) if self.describe is not None else self.base_text
        return replace(self, base=dict(state), base_text=text, own_base=self.own_base or dict(self.base))


def spec_panel(
    experiment: str,
    title: str,
    controls: Tuple[str, ...],
    base: ConvSpec,
    recorded_controls: Optional[Tuple[str, ...]] = None,
    live_options: Optional[Dict[str, Tuple]] = None,
) -> PanelConfig:
    """A panel for an experiment that takes one convolution (``spec=``), around ``base``.

    Args:
        experiment: the experiment's name.
        title: the panel's title.
        controls: the controls it shows.
        base: the convolution it opens at.
        recorded_controls: controls in recorded mode where they differ.
        live_options: live, the values a choice control offers (control -> values).

    Returns:
        The `PanelConfig`.
    """
    return PanelConfig(
        experiment,
        title,
        tuple(controls),
        state_of(base),
        lambda s: dict(spec=spec_of(s)),
        "spec.",
        base_text=spec_text(base),
        recorded_controls=recorded_controls,
        live_options=dict(live_options or {}),
        describe=lambda s: spec_text(spec_of(s)),
    )


def spec_text(spec: ConvSpec) -> str:
    """A convolution as a panel's header names its base: dtype, layout, direction and shape.

    Args:
        spec: the convolution.

    Returns:
        The words.
    """
    return f"{spec.dtype} {spec.layout} {spec.direction} {shape_label(spec)}"


def plain_panel(
    experiment: str,
    title: str,
    base: dict,
    base_text: str,
    arguments: Optional[Callable[[dict], dict]] = None,
    **extra,
) -> PanelConfig:
    """A panel whose controls are the experiment's own arguments (the keys of ``base``, in order).

    Args:
        experiment: the experiment's name.
        title: the panel's title.
        base: the arguments it opens at.
        base_text: ``base`` in words.
        arguments: the call's arguments for a state, when they are more than the state itself.
        **extra: other `PanelConfig` fields.

    Returns:
        The `PanelConfig`.
    """
    keys = tuple(base)
    return PanelConfig(
        experiment,
        title,
        keys,
        dict(base),
        arguments or (lambda s: {k: s[k] for k in keys}),
        "",
        base_text=base_text,
        **extra,
    )
