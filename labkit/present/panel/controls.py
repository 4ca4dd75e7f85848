"""A panel's controls and state, without any widget: which controls exist, which values each
offers (live: free choices; recorded: exactly the values recorded around the request on screen),
what moving one means (linked and compound controls), and which request a state asks for.

Testable alone: ``Controls(config, live=False, recording=recordings.current())``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ...errors import InvalidSpec, LabkitError
from ...experiments import SWEEP_VALUES, request_key, request_of
from ...experiments.panel_config import PanelConfig, unpack
from ...gpu.workspaces.workloads import WORKLOADS
from ...networks import PRESETS
from ...spec import DIRECTIONS, DTYPES, LAYOUTS
from ...store.recordings import Recording, flatten

#: live mode: the values an int control's neighbours are taken from (the nearest below and above)
LADDERS = {
    "N": (1, 2, 4, 8, 16, 32, 64, 128, 256),
    "C": (3, 16, 32, 64, 128, 256, 512, 1024),
    "H": (7, 14, 28, 56, 112, 224),
}
LADDERS.update(K=LADDERS["C"], W=LADDERS["H"])
#: live mode: the order in which neighbouring values are prefetched, and how many at most
PREFETCH_ORDER = (
    "dtype",
    "layout",
    "direction",
    "N",
    "C",
    "H",
    "workload",
    "launch",
    "streams",
    "field",
    "R",
    "stride",
    "padding",
    "dilation",
    "K",
    "W",
)
MAX_PREFETCH = 24


@dataclass(frozen=True)
class ControlDef:
    """One control.

    Attributes:
        name: the state key it sets.
        label: its label on screen.
        kind: "int" (a free integer live) or "choice".
        live_options: a choice control's values live.
        lo: an int control's smallest value.
        hi: its largest.
        links: state keys that take the same value in recorded mode (K follows C there, as recorded).
        always_links: the same in both modes (S follows R: square filters).
        derived: request fields computed from it (left out when asking which values exist).
        recorded_label: its label in recorded mode, when the links change what it means.
        parts: for a compound control, the state keys its value joins with " ".
    """

    name: str
    label: str
    kind: str = "choice"  # "int" (free integer live) or "choice"
    live_options: Tuple = ()
    lo: int = 1
    hi: int = 4096
    links: Tuple[str, ...] = ()
    always_links: Tuple[str, ...] = ()
    derived: Tuple[str, ...] = ()
    recorded_label: str = ""
    parts: Tuple[str, ...] = ()  # a compound control: its value is these state keys joined by " "


CONTROLS: Dict[str, ControlDef] = {
    c.name: c
    for c in (
        ControlDef("N", "N (batch)", "int", hi=4096),
        ControlDef("C", "C (channels in)", "int", hi=8192, links=("K",), recorded_label="C = K (channels)"),
        ControlDef("K", "K (channels out)", "int", hi=8192),
        ControlDef("H", "H (height)", "int", hi=4096, links=("W",), recorded_label="H = W (pixels)"),
        ControlDef("W", "W (width)", "int", hi=4096),
        ControlDef("R", "R = S (filter)", "choice", (1, 3, 5, 7), always_links=("S",)),
        ControlDef("stride", "stride", "choice", (1, 2, 3, 4)),
        ControlDef("padding", "padding", "choice", (0, 1, 2, 3)),
        ControlDef("dilation", "dilation", "choice", (1, 2, 3)),
        ControlDef("groups", "groups", "int", hi=8192),
        ControlDef("dtype", "dtype", "choice", DTYPES),
        ControlDef("layout", "layout", "choice", LAYOUTS),
        ControlDef("direction", "direction", "choice", DIRECTIONS),
        ControlDef("workload", "workload", "choice", WORKLOADS, derived=("repeats",)),
        ControlDef("launch", "launch", "choice", ("graph", "python")),
        ControlDef("streams", "streams", "choice", (2, 3, 4, 8)),
        ControlDef("field", "swept field", "choice", tuple(SWEEP_VALUES), derived=("values",)),
        ControlDef("dtype_layout", "dtype · layout", "choice", parts=("dtype", "layout")),
        ControlDef("launch_streams", "launch · streams", "choice", parts=("launch", "streams")),
        ControlDef("net", "network", "choice", tuple(PRESETS)),
        ControlDef("batch", "batch", "int", hi=4096),
    )
}
#: controls that recorded mode folds into another (K moves with C, W with H)
FOLLOWERS = ("K", "W")


def label(v) -> str:
    """A control value as text: (1, 1) -> "1", None -> "unlimited".

    Args:
        v: the value.

    Returns:
        The text.
    """
    if isinstance(v, (tuple, list)):
        return str(v[0]) if len(set(v)) == 1 else ",".join(map(str, v))
    return "unlimited" if v is None else str(v)


class Controls:
    """The state of one panel: its configuration, the values on screen, the controls shown and fixed.

    ``state`` holds the values on screen, ``shown`` the controls shown and ``fixed`` those a
    recording fixes (one recorded value).

    Args:
        cfg: the panel's configuration.
        live: measure live; False offers only recorded requests.
        recording: the recording that answers in recorded mode.
    """

    def __init__(self, cfg: PanelConfig, live: bool, recording: Optional[Recording]):
        self.state: dict = {}
        self.use(cfg, live, recording)

    def use(self, cfg: PanelConfig, live: bool, recording: Optional[Recording]) -> None:
        """Show a configuration, keeping the values on screen that it has.

        Args:
            cfg: the panel's configuration.
            live: measure live.
            recording: the recording that answers in recorded mode.
        """
        self.cfg, self.live, self.recording = cfg, live, recording
        self.state = {**cfg.base, **self.state}
        shown = [c for c in cfg.controls if live or c not in FOLLOWERS]
        self.fixed: Dict[str, object] = {}
        self.recorded_keys = set()
        if not live:
            self.recorded_keys = {
                json.dumps(r, sort_keys=True, separators=(",", ":"))
                for r in recording.requests(cfg.experiment)
            }
            shown = [c for c in (cfg.recorded_controls or shown) if c not in FOLLOWERS]
            for c in list(shown):
                vals = self.candidates(c, {})
                if len(vals) <= 1:
                    self.fixed[c] = vals[0] if vals else self.value(c, cfg.base)
                    shown.remove(c)
        self.shown: List[str] = shown

    # ---- values ---------------------------------------------------------------------------------
    def options(self, name: str) -> list:
        """The values a control offers now.

        Args:
            name: the control.

        Returns:
            Live, its free choices; recorded, exactly the values recorded for the request on screen with
            that control changed.
        """
        c = CONTROLS[name]
        if self.live:
            return list(self.live_options(name))
        flat = flatten(self.request(self.state) or {})
        moved = {self.cfg.field(n) for n in (c.parts or (name,)) + c.links + c.always_links} | set(c.derived)
        where = {k: v for k, v in flat.items() if k not in moved}
        return [v for v in self.candidates(name, where) if self.recorded(self.moved(self.state, name, v))]

    def live_options(self, name: str) -> Tuple:
        """Live: the values a choice control offers for this panel's experiment.

        Args:
            name: the control.

        Returns:
            The values.
        """
        return self.cfg.live_options.get(name, CONTROLS[name].live_options)

    def candidates(self, name: str, where: dict) -> list:
        """Distinct recorded values of a control among the recorded requests matching ``where``.

        Args:
            name: the control.
            where: dotted request field -> value.

        Returns:
            The values, in the control's live order.
        """
        c, cfg = CONTROLS[name], self.cfg
        if c.parts:
            keys = [cfg.field(p) for p in c.parts]
            seen = []
            for req in self.recording.requests(cfg.experiment):
                f = flatten(req)
                if all(f.get(k) == v for k, v in where.items()):
                    v = " ".join(str(f.get(k)) for k in keys)
                    if v not in seen:
                        seen.append(v)
            return sorted(seen)
        out = []
        for v in self.recording.values(cfg.experiment, cfg.field(name), where=where):
            v = unpack(v)
            if v not in out:
                out.append(v)
        order = list(c.live_options)
        return sorted(out, key=lambda v: (order.index(v) if v in order else len(order), out.index(v)))

    def value(self, name: str, state: Optional[dict] = None):
        """A control's value in a state; a compound control joins its parts.

        Args:
            name: the control.
            state: default the values on screen.

        Returns:
            The value.
        """
        state = self.state if state is None else state
        c = CONTROLS[name]
        return " ".join(str(state[p]) for p in c.parts) if c.parts else state[name]

    def moved(self, state: dict, name: str, value) -> dict:
        """A state with one control moved, and what moves with it.

        Args:
            state: the state.
            name: the control.
            value: its new value.

        Returns:
            A new state dict.
        """
        c = CONTROLS[name]
        s = dict(state)
        if c.parts:
            vals = str(value).split(" ")
            if len(vals) != len(c.parts):
                raise InvalidSpec(
                    name, value, f"must be {len(c.parts)} words: {' '.join(c.parts)}, e.g. 'fp16 NHWC'"
                )
            s.update(zip(c.parts, vals))
            return s
        s[name] = value
        for k in c.always_links + (() if self.live else c.links):
            s[k] = value
        return s

    # ---- requests -------------------------------------------------------------------------------
    def kwargs(self, state: dict) -> Optional[dict]:
        """The experiment's arguments for a state.

        Args:
            state: control name -> value.

        Returns:
            The arguments; None when the state is not a valid request.
        """
        try:
            return self.cfg.kwargs(state)
        except (LabkitError, TypeError, ValueError, KeyError):
            return None

    def request(self, state: dict) -> Optional[dict]:
        """The request, as recorded, a state asks for.

        Args:
            state: control name -> value.

        Returns:
            The request (`request_of`); None when the state is not a valid one.
        """
        try:
            return request_of(self.cfg.experiment, **self.cfg.kwargs(state))
        except (LabkitError, TypeError, ValueError, KeyError):
            return None

    def recorded(self, state: dict) -> bool:
        """Whether the recording holds a state's request.

        Args:
            state: control name -> value.

        Returns:
            True when it does.
        """
        req = self.request(state)
        return req is not None and request_key(req) in self.recorded_keys

    def neighbours(self) -> List[dict]:
        """Live: the states one control move away from the one on screen, most likely first.

        These are every other option of a choice control, and the nearest `LADDERS` values below and
        above an int control's value.

        Returns:
            At most `MAX_PREFETCH` states.
        """
        out = []
        for name in PREFETCH_ORDER:
            if name not in self.shown:
                continue
            now = self.value(name)
            if name in LADDERS:
                ladder = LADDERS[name]
                vals = [
                    max((v for v in ladder if v < now), default=None),
                    min((v for v in ladder if v > now), default=None),
                ]
            else:
                vals = list(self.live_options(name))
            out += [self.moved(self.state, name, v) for v in vals if v is not None and v != now]
        return out[:MAX_PREFETCH]

    def check_names(self, names) -> None:
        """Raise `InvalidSpec` for a name that is not a control on screen, saying why.

        In recorded mode a control may move with another control, be part of a compound one, or have one
        recorded value.

        Args:
            names: control names.
        """
        for name in names:
            if name in self.shown:
                continue
            hint = ""
            links = [c for c in self.shown if name in CONTROLS[c].links]
            parts = [c for c in self.shown if name in CONTROLS[c].parts]
            if not self.live and links:
                hint = f"; in recorded mode {name} moves with {links[0]} (as recorded): set {links[0]}"
            elif not self.live and parts:
                hint = (
                    f"; in recorded mode {name} is part of {parts[0]} (recorded together): "
                    f"set {parts[0]}='{self.value(parts[0])}' with another value from options('{parts[0]}')"
                )
            elif name in self.fixed:
                hint = f"; the recording has only {name}={label(self.fixed[name])}"
            raise InvalidSpec("control", name, f"this panel's controls are {', '.join(self.shown)}{hint}")
