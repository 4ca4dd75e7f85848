"""A fresh kernel's first-use costs, paid in background threads while the learner reads.

A lesson's first panel would otherwise wait for them: pandas, plotly's figure classes and
template, and its FigureWidget class (plotly's renderers, nbformat and jsonschema) take 2.2 s of a
2.4 s first panel on a 2-core CPU machine. The mode banner (a lesson's first cell) starts them once
it has the answer to whether a GPU is there: that question imports CuPy and the cuDNN frontend and
initialises CUDA (about 0.6 s on the GPU host), `labkit.env.probe_soon` asks it in a thread of its
own from the cell's first read of ``lessons.banner``, and nothing else runs beside it, so the cell
takes no longer than it. The steps, in order (`timeline`: when each ran; `seconds`: how long it
took, or its error):

* "tables", "figures": pandas, then plotly's imports and a figure laid out with numpy columns.
* "lesson modules": the modules the first cell named (``check``, ``lessons``, ``widgets``, ...),
  with every topic's experiments and charts; the cell left them to be imported on first use
  (`labkit.session.first_use.OnFirstUse`). A cell that uses one of them meanwhile waits for this
  step's import of it.
* "gc frozen, imports": ``gc.freeze()`` as soon as the imports are done, so a panel built at once
  meets no full collection; "gc frozen" again once the GPU's thread is done. The libraries'
  objects (about 230,000) go to the collector's permanent generation, and its full collections,
  which otherwise run in the middle of a chart's update, take 2-3 ms instead of 110-120 ms on a
  2-core CPU machine. What is frozen is still freed by reference counting; only reference cycles
  among those objects are never collected, as in a server that freezes before it forks.
  ``LABKIT_GC_FREEZE=0`` leaves the collector as it is.
* "grids": every chart's subplot grid (`labkit.draw.plots.grid`, about 0.1 s on the GPU host),
  after the imports, so a lesson's first data and summary cells leave it done for the first panel.
* "plotly front end, idle": once the kernel is idle, plotly's FigureWidget front end
  (`labkit.draw.figure_widget`, 5 MB, once per kernel) goes to the page in an empty figure, so a
  lesson's first panel opens no larger a comm than the others.
* live, in the second thread: "gpu" (the CUDA context, and the cuDNN handle, which loads cuDNN's
  engine libraries), then "cupyx" (0.4 s of imports on the GPU host, which CuPy's reductions
  need and no chart does) once the imports are done and the kernel is idle ("imports done, idle":
  no cell and no measurement for 0.3 s, `labkit.session.prefetch.Prefetcher.wait_for_idle_kernel`),
  so that it does not compete for the GIL with the next cells of a "Run all".

All of it is GIL-bound Python work: with no time to read, a learner waits for it somewhere; this
order puts it where nobody waits, or at a panel's first change. A step that fails is skipped: the
panel that needs it does it, and reports any error, itself. CuPy's kernels are not compiled here:
NVRTC compiles one kernel at a time per process, so a panel's own compiles would wait behind the
warm-up's (docs/findings.md); labkit runs few of them instead (`labkit.gpu.buffers.numerics`' fused
kernels, no CUB reductions).

One import is left out while the warm-up runs: `IRI_GRAMMAR`. jsonschema imports it, when plotly's
renderers import nbformat, only to check "iri" string formats, which no schema in a notebook
kernel uses; importing it builds 39 Earley parsers (python-jsonschema/jsonschema#1428): 0.7 s of
plotly's 0.9 s first import on a 2-core CPU machine. Every JupyterLab install has it (jupyter-events
needs ``jsonschema[format-nongpl]``). While the figures step runs, ``sys.modules`` marks it absent,
so jsonschema has no "iri" checkers in this kernel; the mark is taken away after that step, so a
later import of it works. ``LABKIT_SKIP_IRI_GRAMMAR=0`` leaves jsonschema as it is.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import env
from ..draw import figure_widget
from ..gpu.classic import cudnn_library
from . import first_use
from .prefetch import PREFETCHER

#: the module jsonschema imports for its optional "iri" format checkers (rfc3987-syntax)
IRI_GRAMMAR = "rfc3987_syntax"

#: step -> seconds it took in the warm-up thread (a failed step: its error instead)
seconds: Dict[str, object] = {}
#: step -> (started, ended): seconds since `start_imports` was called
timeline: Dict[str, Tuple[float, float]] = {}
_threads: List[threading.Thread] = []
_t0 = 0.0
#: set once `start` has decided whether the GPU is warmed up too (the gc step waits for it)
_gpu_decided = threading.Event()
#: set when the chart's imports are done, failed or not (the cupyx step waits for it)
_imports_done = threading.Event()
#: whether `start` marked `IRI_GRAMMAR` absent for the warm-up's imports
iri_grammar_skipped = False
_lock = threading.Lock()


def _tables() -> None:
    import pandas  # noqa: F401  # heavy: pandas, off the light path


def _figures() -> None:
    import plotly.graph_objects as go  # heavy: plotly, where a chart is drawn
    from plotly.subplots import make_subplots  # heavy: plotly, where a chart is drawn

    from ..draw import plots  # heavy: plotly, where a chart is drawn

    fig = make_subplots(rows=1, cols=2)  # not plots.new_figure: it swaps plotly's default template
    # numpy columns, as the charts pass them: plotly asks narwhals whether an array is a dataframe,
    # and narwhals' first question scans every installed package's entry points (32 ms)
    fig.add_trace(go.Bar(x=np.arange(1), y=np.ones(1)), row=1, col=1)
    fig.add_trace(go.Scatter(x=np.arange(1), y=np.ones(1)), row=1, col=2)
    fig.update_layout(template=plots.TEMPLATE)
    # importing the class: plotly's renderers, nbformat, jsonschema (2 s); no widget is made
    go.FigureWidget  # noqa: B018


def _lesson_modules() -> None:
    """The public modules a lesson's first cell names and leaves to be imported on first use
    (`labkit.session.first_use.OnFirstUse`): its panels, checks and helpers, with every topic's
    experiments and charts."""
    for name in first_use.named():
        first_use.import_public(name)


def _grids() -> None:
    """Every chart's subplot grid laid out (`labkit.draw.plots.grid`): after the imports, so a
    panel built at once after the first cell does not wait for it."""
    from ..draw import plots  # heavy: plotly, where a chart is drawn

    plots.lay_out_grids()


def _imports_done_and_idle() -> None:
    """Wait for the chart's imports, then for an idle kernel (see the module doc)."""
    _imports_done.wait()
    PREFETCHER.wait_for_idle_kernel()


def _plotly_front_end() -> None:
    """Once the kernel is idle: plotly's FigureWidget front end to the page
    (`labkit.draw.figure_widget.send_front_end`; see the module doc)."""
    PREFETCHER.wait_for_idle_kernel()
    figure_widget.send_front_end()


def _skip_iri_grammar() -> bool:
    """Mark `IRI_GRAMMAR` absent for the imports to come (not when jsonschema or it is already
    imported, or ``LABKIT_SKIP_IRI_GRAMMAR=0``). True when it did."""
    if (
        not env.switched_on("LABKIT_SKIP_IRI_GRAMMAR")
        or "jsonschema" in sys.modules
        or IRI_GRAMMAR in sys.modules
    ):
        return False
    sys.modules[IRI_GRAMMAR] = None  # the import system's "not installed"
    return True


def _unskip_iri_grammar() -> None:
    """Take `_skip_iri_grammar`'s mark away (leaving a real import of it alone)."""
    if IRI_GRAMMAR in sys.modules and sys.modules[IRI_GRAMMAR] is None:
        del sys.modules[IRI_GRAMMAR]


def _gpu() -> None:
    from ..gpu.cudnn import frontend  # heavy: CuPy, live only

    frontend.handle_for()  # the CUDA context, and cuDNN's libraries loaded for a handle
    cudnn_library.cudnn_version()  # the classic API's binding (lesson 01's first panel)


def _cupyx() -> None:
    """After the chart's imports, once the kernel is idle (see the module doc)."""
    # CuPy's reductions import it: cupyx.linalg, cupyx.scipy, scipy.sparse: 0.8 s
    import cupyx  # noqa: F401  # heavy: CuPy, live only


def _freeze_gc() -> None:
    """Once `start` has decided on the GPU's thread and that thread is done: the collector's
    permanent generation gets every object there is now (see the module doc)."""
    _gpu_decided.wait(GPU_DECISION_S)
    with _lock:
        others = [t for t in _threads if t is not threading.current_thread()]
    for t in others:
        t.join()
    gc.freeze()


#: at most this long the gc step waits for `start` (called by the banner just after `start_imports`)
GPU_DECISION_S = 60.0


def _run(steps) -> None:
    """Run ``steps`` in order, each timed (a failed one too: the next still runs)."""
    for name, step in steps:
        t0 = time.perf_counter()
        try:
            step()
            seconds[name] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001  (an optimisation: the panel meets the error itself)
            seconds[name] = f"{type(exc).__name__}: {str(exc)[:120]}"
        timeline[name] = (round(t0 - _t0, 3), round(time.perf_counter() - _t0, 3))


def start_imports() -> bool:
    """Start the chart's imports in a daemon thread, once per process (the banner: once the GPU
    question is answered).

    Returns:
        True when this call started them.
    """
    with _lock:
        if _threads:
            return False
        global iri_grammar_skipped, _t0
        _t0 = time.perf_counter()

        PREFETCHER.watch_cells()  # from the banner's cell: the cupyx step waits for an idle kernel
        imports = [("tables", _tables), ("figures", _figures), ("lesson modules", _lesson_modules)]
        iri_grammar_skipped = _skip_iri_grammar()
        if iri_grammar_skipped:
            imports.append(
                ("iri grammar unmarked", _unskip_iri_grammar)
            )  # after the figures step, failed or not
        imports.append(("imports done", _imports_done.set))

        freeze = env.switched_on("LABKIT_GC_FREEZE")
        if freeze:
            gc.freeze()  # labkit's own imports: the imports' full collections walk only what is new
            imports.append(
                ("gc frozen, imports", gc.freeze)
            )  # at once: a panel built now meets no full collection
        imports.append(("grids", _grids))
        if freeze:
            imports.append(("gc frozen", _freeze_gc))
        imports.append(("plotly front end, idle", _plotly_front_end))
        _threads.append(threading.Thread(target=_run, args=(imports,), daemon=True, name="labkit-warm-up"))
        _threads[-1].start()
        return True


def start(live: bool) -> bool:
    """Start the warm-up, once per process.

    That is the chart's imports (`start_imports`, if not yet) and, live, beside them, the GPU's
    set-up (CUDA's and cuDNN's mostly wait outside the GIL), then cupyx.

    Args:
        live: whether the GPU's set-up runs too.

    Returns:
        True when this call started any of it.
    """
    started = start_imports()
    with _lock:
        if _gpu_decided.is_set():
            return started

        if env.switched_on("LABKIT_GC_FREEZE"):
            gc.freeze()  # what the GPU question imported (CuPy, the cuDNN frontend), at once
        if live:
            steps = [("gpu", _gpu), ("imports done, idle", _imports_done_and_idle), ("cupyx", _cupyx)]
            _threads.append(
                threading.Thread(target=_run, args=(steps,), daemon=True, name="labkit-warm-up-gpu")
            )
            _threads[-1].start()
        _gpu_decided.set()
        return True


def wait(timeout: Optional[float] = None) -> bool:
    """Block until the warm-up has finished.

    Args:
        timeout: the most seconds to wait; None for no limit.

    Returns:
        True when it has.
    """
    end = None if timeout is None else time.monotonic() + timeout
    for t in _threads:
        t.join(None if end is None else max(0.0, end - time.monotonic()))
    return not any(t.is_alive() for t in _threads)
