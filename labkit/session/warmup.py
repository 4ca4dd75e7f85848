"""A lesson's first chart without the kernel's first-use costs: `start` (called by the mode banner,
a lesson's first cell) runs, in a background thread while the learner reads the lesson's opening,
what the first panel of a fresh kernel would otherwise wait for: importing pandas, plotly's
figure classes and template, and its FigureWidget class (plotly's renderers, nbformat and
jsonschema: 2.2 s of a 2.4 s first panel on a 2-core CPU machine; 1.6 s and 0.7 s for plotly and
pandas on the GPU host), and live, the CUDA context and the
cuDNN handle (loading cuDNN's engine libraries), and cupyx (which CuPy imports at the first
random array a panel makes: 0.8 s on the GPU host, with scipy). A step that fails is skipped: the panel that
needs it does it (and reports any error) itself. `seconds` says how long each step took.
"""
from __future__ import annotations

import threading
import time
from typing import Dict, Optional

#: step -> seconds it took in the warm-up thread (a failed step: its error instead)
seconds: Dict[str, object] = {}
_thread: Optional[threading.Thread] = None
_lock = threading.Lock()


def _tables() -> None:
    import pandas  # noqa: F401


def _figures() -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..draw import plots

    fig = make_subplots(rows=1, cols=2)  # not plots.new_figure: it swaps plotly's default template
    fig.add_trace(go.Bar(x=[1], y=[1]), row=1, col=1)
    fig.add_trace(go.Scatter(x=[1], y=[1]), row=1, col=2)
    fig.update_layout(template=plots.TEMPLATE)
    go.FigureWidget  # noqa: B018  (importing the class: plotly's renderers, nbformat, jsonschema: 2 s; no widget made)


def _gpu() -> None:
    from ..gpu import cudnn_library, frontend

    frontend.handle_for()  # the CUDA context, and cuDNN's libraries loaded for a handle
    cudnn_library.cudnn_version()  # the classic API's binding (lesson 01's first panel)
    import cupyx  # noqa: F401  (CuPy imports it at a first random array: cupyx.linalg, cupyx.scipy, scipy.sparse: 0.8 s)


def _run(live: bool) -> None:
    steps = [("tables", _tables), ("figures", _figures)] + ([("gpu", _gpu)] if live else [])
    for name, step in steps:
        t0 = time.perf_counter()
        try:
            step()
            seconds[name] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001  (an optimisation: the panel meets the error itself)
            seconds[name] = f"{type(exc).__name__}: {str(exc)[:120]}"


def start(live: bool) -> bool:
    """Start the warm-up in a daemon thread (once per process); True when this call started it."""
    global _thread
    with _lock:
        if _thread is not None:
            return False
        _thread = threading.Thread(target=_run, args=(bool(live),), daemon=True, name="labkit-warm-up")
        _thread.start()
        return True


def wait(timeout: Optional[float] = None) -> bool:
    """Block until the warm-up has finished (True), at most ``timeout`` seconds."""
    t = _thread
    if t is None:
        return True
    t.join(timeout)
    return not t.is_alive()
