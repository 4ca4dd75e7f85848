"""A measuring worker process made ready before its first step (`labkit.gpu.host.isolated`); above
every room of ``labkit/gpu/``, as it uses several.

The network report's worker spends its first seconds on things every step needs: its build workers'
start (each a process with CUDA and cuDNN), CUDA's context, cuDNN's handle, the graphs its layers
will build, and the kernels its checks run. `warm` does them in the order that lets them overlap.
This module's import pulls in neither pandas nor the lessons. CUDA's context is made in a thread
while CuPy and cuDNN import (`labkit.gpu.host.context`), and the module of the steps to come is
imported in another while this one makes cuDNN's handle and plans. The build workers start once
that context is made: nine processes making theirs at once held each other back (traced on H200 hosts, this
process's context and the imports before it took 1.9 s with eight build workers starting beside it,
0.56 s before they start: docs/findings.md), while the compiles they run are needed only by the
layers the report measures last. Seconds; bytes.
"""

from __future__ import annotations

import importlib
import threading
from typing import Optional, Sequence

from ..spec import ConvSpec
from .host import context

#: the dtype and layout `warm` checks in: those the network report opens on
WARM_DTYPE, WARM_LAYOUT = "fp16", "NHWC"


#: what every measuring step imports when it first runs (autotune brings pandas): imported with the
#: steps' module, so the first step does not wait for it
STEPS_IMPORT = ("labkit.gpu.timing.autotune",)


def _import_soon(module: Optional[str]) -> Optional[threading.Thread]:
    """Import ``module``, then `STEPS_IMPORT`, in a daemon thread (a failure is left for the step
    that needs the module: it imports it again and says why)."""
    if not module:
        return None

    def load() -> None:
        for name in (module, *STEPS_IMPORT):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001  (the step that needs it imports it again and says why)
                pass

    t = threading.Thread(target=load, daemon=True, name="labkit-warm-import")
    t.start()
    return t


def warm(specs: Sequence[ConvSpec] = (), steps_module: Optional[str] = None) -> None:
    """In the worker process, before its first step: make the cuDNN handle of this thread's timing
    stream (CUDA's context, started in a thread before CuPy's import: `labkit.gpu.host.context`;
    cuDNN's libraries), start the build workers (at most
    `labkit.gpu.cudnn.build_pool.MEASURING_WORKERS` by default), plan the graphs of ``specs``
    and queue their runtime-compiled plans, then check a small convolution's made-up output against
    its float64 reference in `WARM_DTYPE` and `WARM_LAYOUT` (CuPy's kernels and cuBLAS, loaded as the
    first step's checks use them). ``steps_module`` is imported meanwhile, in a thread. Lesson 09's
    banner sends it (`labkit.session.texts.start_report_worker`), and so does ``labkit.report``
    with its network's convolutions (`labkit.session.texts.warm_report_worker`).

    Args:
        specs: the convolutions of the report to come, whose plan builds are queued now; none for
            a report not known yet.
        steps_module: the module whose steps the worker runs next (``"package.module"``), or None.
    """
    context.make_soon()  # CUDA's context, made by the driver while CuPy and cuDNN import
    from .cudnn import build_pool, frontend, graph_cache, reference_runs  # heavy: CuPy, live only
    from .cudnn.operands import Operands  # heavy: CuPy, live only
    from .timing import measure  # heavy: CuPy, live only

    importing = _import_soon(steps_module)  # the steps and pandas, while CUDA's context is made
    frontend.handle_for(measure.timing_stream())
    build_pool.capped_by_default()  # this process measures while they start
    build_pool.start_workers()  # a report not known yet (lesson 09's banner) compiles in them too
    if specs:
        graph_cache.build_ahead([(s, "none", None) for s in specs])
    spec = ConvSpec(N=1, C=8, H=8, W=8, K=8, dtype=WARM_DTYPE, layout=WARM_LAYOUT)
    reference_runs.warm_check(Operands(spec))
    if importing is not None:
        importing.join()
