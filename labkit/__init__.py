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
#: and where each lives; imported on first use so that ``import labkit`` stays light
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


def __getattr__(name):
    """``labkit.report`` / ``labkit.Report`` (`labkit.present.netreport`) and the modules in `PUBLIC`."""
    import importlib

    if name in ("report", "Report"):
        return getattr(importlib.import_module("labkit.present.netreport"), name)
    if name in PUBLIC:
        # a notebook's first cell: the machine is probed while the modules import
        importlib.import_module("labkit.env").probe_soon()
        return importlib.import_module(PUBLIC[name])
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
