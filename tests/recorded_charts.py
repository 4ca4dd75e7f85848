"""Charts of the shipped recordings' rows, drawn once per test process and shared by the tests that
read them: a chart builder gives the same figure for the same rows (it reads only its table), and
several test files hold every recorded request's chart to a different rule, so drawing each one
once leaves every rule checked on the same figures.
"""

from __future__ import annotations

import json

from labkit import experiments
from labkit.errors import LabkitError

#: (recording's folder, experiment, request, model) -> what `drawn` returns for it
_DRAWN: dict = {}


def drawn(recording, name: str, request: dict, model: bool = True):
    """The rows ``recording`` holds for ``request`` of experiment ``name`` and their chart.

    The table and the figure are the same objects for every caller: read them, never change them.

    Args:
        recording: a `labkit.store.recordings.Recording`.
        name: the experiment.
        request: one of ``recording.requests(name)``.
        model: the rows as a lesson reads them, with the model's columns
            (`labkit.experiments.with_model`); False: as the recording holds them.

    Returns:
        ``(DataFrame, figure)``, or None where the recording answers the request with no rows
        (`labkit.LabkitError`).
    """
    # keyed by the recording's folder, not its object: a recording read again (a test that resets
    # the current one) answers from the same files
    key = (str(recording.path), name, json.dumps(request, sort_keys=True), model)
    if key not in _DRAWN:
        _DRAWN[key] = _draw(recording, name, request, model)
    return _DRAWN[key]


def every_request(recording, name: str, model: bool = True) -> list:
    """`drawn` for every request of experiment ``name`` in ``recording`` that answers with rows.

    Args:
        recording: a `labkit.store.recordings.Recording`.
        name: the experiment.
        model: as for `drawn`.

    Returns:
        ``(request, DataFrame, figure)`` per request.
    """
    out = []
    for req in recording.requests(name):
        found = drawn(recording, name, req, model)
        if found is not None:
            out.append((req, *found))
    return out


def _draw(recording, name: str, request: dict, model: bool):
    try:
        df = recording.lookup(name, request)
        if model:
            df = experiments.with_model(name, df)
    except LabkitError:
        return None
    return df, experiments.CHARTS[name](df)
