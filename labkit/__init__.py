"""labkit: real cuDNN convolutions under each workspace strategy, measured honestly.

Live on a CUDA GPU with the cuDNN frontend; recorded (real GPU measurements shipped in data/)
everywhere else. ``labkit.env.mode()`` says which, and why.

Where things live (bottom to top; imports point down, docs/architecture.md): here, what a
convolution is (`spec`), errors, the machine (`env`), datasheet peaks (`ceilings`), the version
(`version`) and networks' conv layers (`networks/`); `signals/` what a running measurement says and
hears; `gpu/` the GPU core; `store/` recordings, this GPU's saved results and plans; `draw/` what
charts and text are drawn with; `experiments/` one module or folder per lesson topic; `session/`
answering a request in a notebook; `present/` panels, checks, comparisons, the network report;
`cli/` ``python -m labkit``. The modules a notebook names (``check``, ``lessons``, ``widgets``) are
imported on first use (`labkit.session.first_use`).
"""

import importlib

from .errors import (  # noqa: F401
    ArenaTooSmall,
    InvalidSpec,
    LabkitError,
    ModeError,
    NotCapturable,
    NotRecorded,
    OutOfMemory,
    RecordedDataError,
    TimedOut,
    Unsupported,
    WrongResult,
)
from .spec import ConvSpec  # noqa: F401
from .version import __version__  # noqa: F401


def __getattr__(name):
    """``labkit.report`` (`labkit.present.report_call`), ``labkit.Report``
    (`labkit.present.netreport`) and the public modules (`labkit.session.first_use.public`)."""
    if name == "report":
        return importlib.import_module("labkit.present.report_call").report
    if name == "Report":
        return importlib.import_module("labkit.present.netreport").Report
    # (``from .session import first_use`` would ask this function for ``session``)
    first_use = importlib.import_module("labkit.session.first_use")
    if name in first_use.PUBLIC:
        return first_use.public(name)
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
