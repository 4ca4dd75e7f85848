"""A lesson's first chart without the kernel's first-use costs: `start` (called by the mode banner,
a lesson's first cell) runs, in a background thread while the learner reads the lesson's opening,
what the first panel of a fresh kernel would otherwise wait for: importing pandas, plotly's
figure classes and template, and its FigureWidget class (plotly's renderers, nbformat and
jsonschema: 2.2 s of a 2.4 s first panel on a 2-core CPU machine; 1.6 s and 0.7 s for plotly and
pandas on the GPU host); and live, in a second thread beside it, the CUDA context and the cuDNN
handle (loading cuDNN's engine libraries) and cupyx (which CuPy's reductions import: 0.8 s on
the GPU host, with SciPy). Not CuPy's kernels: compiled in a background thread they made a first
panel slower, not faster (NVRTC compiles one kernel at a time per process, so the panel's own
compiles waited behind the warm-up's: docs/findings.md); labkit instead runs
few of them (`labkit.gpu.numerics`' fused kernels, no CUB reductions). A step that fails is
skipped: the panel that needs it does it (and reports any error) itself. `seconds` says how long
each step took.

One import is left out while the warm-up runs: `IRI_GRAMMAR`. Every JupyterLab install has it
(jupyter-events needs ``jsonschema[format-nongpl]``), and jsonschema imports it, when plotly's
renderers import nbformat, only to check the "iri" string formats, which no schema in a notebook
kernel uses; importing it builds 39 Earley parsers (python-jsonschema/jsonschema#1428): 0.7 s of
plotly's 0.9 s first import on a 2-core CPU machine, and the GPU host's first panel went from 1 s
to 6 s with it. While the warm-up runs, ``sys.modules`` marks it absent, so jsonschema, imported
then, has no "iri" checkers in this kernel; the mark is taken away when the figures step ends, so
an import of it afterwards works. ``LABKIT_SKIP_IRI_GRAMMAR=0`` leaves jsonschema as it is.

The imports start first, before labkit asks whether a GPU is there (`start_imports`, called by
the banner): that question imports CuPy and the cuDNN frontend and initialises CUDA (about 0.6 s
of a 0.8-1 s first cell on the GPU host), and a panel built at once after the first cell waited
for imports that had started only at the cell's end (a class's first panel, answered from the
shared recording: 1.0 s; with the imports first, 0.42-0.51 s, the first cell 0.2-0.3 s longer).
Each chart's subplot grid (step "grids", `labkit.draw.plots.grid`: about 0.1 s on the GPU host)
comes after the chart's imports (step "imports done"), so the first cells after the banner (a
lesson's first data and summary cells) leave it done for the first panel. cupyx (step "cupyx", in
the GPU's thread: 0.4 s of imports on the GPU host), which no chart needs, comes after them and
only once the kernel is idle as the prefetch worker counts it (step "imports done, idle": no cell
and no measurement for 0.3 s, `labkit.session.prefetch.Prefetcher.wait_for_idle_kernel`, from
IPython's cell events). Before, it competed for the GIL with the next cells of a "Run all" (a
second panel built at once after the first took 0.33-0.49 s on the GPU host, answered from a
shared class recording). All of it is GIL-bound Python work: with no time to read, a learner waits
for it somewhere; this order puts it where nobody waits, or at a panel's first change.

Then, once every import is done (the GPU's too), ``gc.freeze()`` (step "gc frozen"; also as soon
as the GPU question is answered and the chart's imports are done, so a panel built at once meets no
full collection either): the objects
of the imported libraries (plotly's, pandas', CuPy's: about 230,000) go to the collector's permanent
generation, so its full collections, which otherwise run now and then in the middle of a chart's
update and walk every one of them, no longer do: 110-120 ms each on a 2-core CPU machine (a
network-report change there: 40 ms), 2-3 ms after the freeze. What is frozen is still freed by
reference counting; only reference cycles among those objects are never collected, as in a server
that freezes before it forks. ``LABKIT_GC_FREEZE=0`` leaves the collector as it is.

After that, in a Jupyter kernel, the imports' thread's last step (step "plotly front end, idle",
once the kernel is idle as above) sends plotly's FigureWidget front end to the page in an empty figure
(`labkit.draw.figure_widget`: 5 MB, once per kernel): a lesson's first panel then opens no
larger a comm than the others (on the GPU host the first panel's cell took 160 ms after 3 s of
reading, against 54-90 ms for the next three, before this step).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

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
    import pandas  # noqa: F401


def _figures() -> None:
    import numpy as np
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..draw import plots

    fig = make_subplots(rows=1, cols=2)  # not plots.new_figure: it swaps plotly's default template
    # numpy columns, as the charts pass them: plotly asks narwhals whether an array is a dataframe,
    # and narwhals' first question scans every installed package's entry points (32 ms)
    fig.add_trace(go.Bar(x=np.arange(1), y=np.ones(1)), row=1, col=1)
    fig.add_trace(go.Scatter(x=np.arange(1), y=np.ones(1)), row=1, col=2)
    fig.update_layout(template=plots.TEMPLATE)
    # importing the class: plotly's renderers, nbformat, jsonschema (2 s); no widget is made
    go.FigureWidget  # noqa: B018


def _grids() -> None:
    """Every chart's subplot grid laid out (`labkit.draw.plots.grid`): after the imports, so a
    panel built at once after the first cell does not wait for it."""
    from ..draw import plots

    plots.lay_out_grids()


def _imports_done_and_idle() -> None:
    """Wait for the chart's imports, then for an idle kernel (see the module doc)."""
    from .prefetch import PREFETCHER

    _imports_done.wait()
    PREFETCHER.wait_for_idle_kernel()


def _plotly_front_end() -> None:
    """Once the kernel is idle: plotly's FigureWidget front end to the page
    (`labkit.draw.figure_widget.send_front_end`; see the module doc)."""
    from ..draw import figure_widget
    from .prefetch import PREFETCHER

    PREFETCHER.wait_for_idle_kernel()
    figure_widget.send_front_end()


def _skip_iri_grammar() -> bool:
    """Mark `IRI_GRAMMAR` absent for the imports to come (not when jsonschema or it is already
    imported, or ``LABKIT_SKIP_IRI_GRAMMAR=0``). True when it did."""
    from .. import env

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
    from ..gpu import cudnn_library, frontend

    frontend.handle_for()  # the CUDA context, and cuDNN's libraries loaded for a handle
    cudnn_library.cudnn_version()  # the classic API's binding (lesson 01's first panel)


def _cupyx() -> None:
    """After the chart's imports, once the kernel is idle (see the module doc)."""
    import cupyx  # noqa: F401  (CuPy's reductions import it: cupyx.linalg, cupyx.scipy, scipy.sparse: 0.8 s)


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
    """Start the chart's imports in a daemon thread (once per process), before anything asks for
    the GPU. True when this call started them."""
    with _lock:
        if _threads:
            return False
        global iri_grammar_skipped, _t0
        _t0 = time.perf_counter()
        from .prefetch import PREFETCHER

        PREFETCHER.watch_cells()  # from the banner's cell: the cupyx step waits for an idle kernel
        imports = [("tables", _tables), ("figures", _figures)]
        iri_grammar_skipped = _skip_iri_grammar()
        if iri_grammar_skipped:
            imports.append(
                ("iri grammar unmarked", _unskip_iri_grammar)
            )  # after the figures step, failed or not
        imports.append(("imports done", _imports_done.set))
        from .. import env

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
    """Start the warm-up (once per process): the chart's imports (`start_imports`, if not yet),
    and live, beside them, the GPU's set-up (CUDA's and cuDNN's mostly wait outside the GIL), then
    cupyx. True when this call started any of it."""
    started = start_imports()
    with _lock:
        if _gpu_decided.is_set():
            return started
        from .. import env

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
    """Block until the warm-up has finished (True), at most ``timeout`` seconds."""
    end = None if timeout is None else time.monotonic() + timeout
    for t in _threads:
        t.join(None if end is None else max(0.0, end - time.monotonic()))
    return not any(t.is_alive() for t in _threads)
