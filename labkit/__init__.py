"""labkit: real cuDNN convolutions under each workspace strategy, measured honestly.

Live on a CUDA GPU with the cuDNN frontend; recorded (real GPU measurements shipped in data/)
everywhere else. ``labkit.env.mode()`` says which, and why.

Where things live (bottom to top; imports point down, docs/architecture.md): here, what a
convolution is (`spec`), errors, the machine (`env`), datasheet peaks (`ceilings`) and networks'
conv layers (`networks/`); `signals/` what a running measurement says and hears; `gpu/` the GPU
core; `store/` recordings, this GPU's saved results and plans; `draw/` what charts and text are
drawn with; `experiments/` one module or folder per lesson topic; `session/` answering a request
in a notebook; `present/` panels, checks, comparisons, the network report; `cli/` ``python -m
labkit``.
"""

import importlib
import sys
import threading
import types

from .errors import (  # noqa: F401
    ArenaTooSmall,
    InvalidSpec,
    LabkitError,
    ModeError,
    OutOfMemory,
    RecordedDataError,
    TimedOut,
    Unsupported,
    WrongResult,
)
from .spec import ConvSpec  # noqa: F401

__version__ = "0.1.0"


#: what the notebooks import by their short names (``from labkit import widgets, check, lessons``),
#: and where each lives; each is imported on its first use (`OnFirstUse`), so that a lesson's first
#: cell waits only for the question whether a GPU is there
PUBLIC = {
    "lessons": "labkit.session.lessons",
    "widgets": "labkit.present.widgets",
    "check": "labkit.present.check",
    "compare": "labkit.present.compare",
    "compare_check": "labkit.present.compare_check",
    "plots": "labkit.draw.plots",
    "recordings": "labkit.store.recordings",
    "env": "labkit.env",
}
#: (public name, attribute) -> the light module that attribute lives in: a lesson's first cell calls
#: ``lessons.banner()``, which needs none of the lessons' experiments and charts
LIGHT = {("lessons", "banner"): "labkit.session.texts"}


class OnFirstUse(types.ModuleType):
    """A public module (`PUBLIC`) not imported yet: reading, setting or deleting any of its
    attributes imports it (a `LIGHT` attribute imports only its own module) and goes to it.

    A lesson's first cell imports ``check``, ``lessons`` and ``widgets`` and shows the mode banner; the
    modules themselves (plotly, ipywidgets and every lesson's experiments: about 1 s of imports on a
    GPU host) are imported by the warm-up thread the banner starts (`labkit.session.warmup`), while
    the learner reads, or by the first cell that uses them, whichever comes first: the import
    system's lock per module makes the other wait for it.
    """

    def __init__(self, name: str):
        super().__init__(PUBLIC[name], f"labkit.{name}, imported on first use: see {PUBLIC[name]}")
        object.__setattr__(self, "_public_name", name)

    def _target(self):
        return import_public(self._public_name)

    def __getattr__(self, attr):
        light = LIGHT.get((self._public_name, attr))
        if light and PUBLIC[self._public_name] not in sys.modules:
            return getattr(importlib.import_module(light), attr)
        return getattr(self._target(), attr)

    def __setattr__(self, attr, value):
        setattr(self._target(), attr, value)

    def __delattr__(self, attr):
        delattr(self._target(), attr)

    def __dir__(self):
        return dir(self._target())


_on_first_use: dict = {}
#: one import of the public modules at a time: the warm-up's and a cell's would otherwise meet in
#: their imports' cycles, where Python hands one of them a module not yet initialised
_public_import = threading.RLock()


def import_public(name: str) -> types.ModuleType:
    """The public module ``name`` (a key of `PUBLIC`), imported if it is not yet.

    Args:
        name: e.g. ``"widgets"``.

    Returns:
        The module.
    """
    with _public_import:
        return importlib.import_module(PUBLIC[name])


def __getattr__(name):
    """``labkit.report`` / ``labkit.Report`` (`labkit.present.netreport`) and the modules in `PUBLIC`:
    the module itself once it is imported, an `OnFirstUse` until then (``env``: at once)."""
    if name in ("report", "Report"):
        return getattr(importlib.import_module("labkit.present.netreport"), name)
    if name in PUBLIC:
        # a notebook's first cell: the machine is probed from its first import of a public module
        importlib.import_module("labkit.env").probe_soon()
        if name == "env" or PUBLIC[name] in sys.modules:
            return import_public(name)
        return _on_first_use.setdefault(name, OnFirstUse(name))
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
