"""labkit: real cuDNN convolutions under each workspace strategy, measured honestly.

Live on a CUDA GPU with the cuDNN frontend; recorded (real GPU measurements shipped in data/)
everywhere else. ``labkit.mode()`` says which, and why.
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
)
from .spec import ConvSpec  # noqa: F401

__version__ = "0.1.0"


def __getattr__(name):
    """``labkit.report`` and ``labkit.Report`` (`labkit.netreport`), imported on first use so that
    ``import labkit`` stays light."""
    if name in ("report", "Report"):
        from . import netreport

        return getattr(netreport, name)
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")
