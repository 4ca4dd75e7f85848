"""The modules a notebook imports by their short names (``from labkit import check, lessons,
widgets``), each imported on its first use, so that a lesson's first cell waits only for the
question whether a GPU is there (`labkit.session.warmup` imports them while the learner reads).

Two things start here, where a notebook asks for them, and nowhere at import: the machine's probe
(`labkit.env.probe_soon`), when the first cell reads ``lessons.banner``; and this session's results
as what summaries and checks read (`labkit.session.results.install`), when the lesson modules are
imported (`import_public`)."""

from __future__ import annotations

import importlib
import sys
import threading
import types

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
#: the public modules that answer from this session's results: importing one installs them
#: (`labkit.session.results.install`)
SESSION_MODULES = ("lessons", "widgets", "check", "compare", "compare_check")


class OnFirstUse(types.ModuleType):
    """A public module (`PUBLIC`) not imported yet: reading, setting or deleting an attribute imports it.

    A `LIGHT` attribute imports only its own module; anything else imports the module and goes to it.

    A lesson's first cell imports ``check``, ``lessons`` and ``widgets`` and shows the mode banner. The
    modules themselves (plotly, ipywidgets and every lesson's experiments: about 1 s of imports on a
    GPU host) are imported by the warm-up thread the banner starts (`labkit.session.warmup`), while
    the learner reads, or by the first cell that uses them, whichever comes first: `import_public`'s
    lock makes the other wait for it.

    Args:
        name: the short name, a key of `PUBLIC`.
    """

    def __init__(self, name: str):
        super().__init__(PUBLIC[name], f"labkit.{name}, imported on first use: see {PUBLIC[name]}")
        object.__setattr__(self, "_public_name", name)

    def _target(self):
        return import_public(self._public_name)

    def __getattr__(self, attr):
        light = LIGHT.get((self._public_name, attr))
        if light and PUBLIC[self._public_name] not in sys.modules:
            # the banner asks whether a GPU is there: the probe runs while its module is imported
            importlib.import_module("labkit.env").probe_soon()
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
        module = importlib.import_module(PUBLIC[name])
        if name in SESSION_MODULES:
            importlib.import_module("labkit.session.results").install()
        return module


def public(name: str) -> types.ModuleType:
    """The public module ``name``: the module itself once it is imported, an `OnFirstUse` until then
    (``env``: at once).

    Args:
        name: a key of `PUBLIC`.

    Returns:
        The module, or its `OnFirstUse`.
    """
    if name == "env":
        return importlib.import_module(PUBLIC[name])  # light: it need not wait for the warm-up's imports
    if PUBLIC[name] in sys.modules:
        return import_public(name)
    return _on_first_use.setdefault(name, OnFirstUse(name))


def named() -> list:
    """The public modules handed out as an `OnFirstUse` (what this kernel's cells named before they
    were imported): the ones the warm-up imports.

    Returns:
        Their names, keys of `PUBLIC`.
    """
    return list(_on_first_use)
