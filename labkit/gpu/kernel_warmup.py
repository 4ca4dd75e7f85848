"""The kernels a first visit would compile, compiled at set-up instead (``python -m labkit
warm-kernels``, run by ``make setup`` on a machine with a GPU): CuPy's own, and cuDNN's run-time
compiled plans.

CuPy compiles each elementwise and reduction kernel with NVRTC the first time a process runs it
(0.1-0.2 s each on the H200's host) and keeps the binary in its kernel cache on disk
(``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``): on a machine that never ran labkit, the
precision and race panels would compile 18 and 11 kernels before their first paint
(docs/findings.md). `TASKS` runs, on tiny tensors, what the panels run: for
each dtype, layout and direction the CuPy parts of a checked convolution (seeded inputs, the
float64 reference from the rounded and the unrounded inputs, the output decoded, the error norms,
the plans' error kernel, a guarded workspace; `exercise`), the unfused epilogue, and the
scratchpad race with both launches. Kernels are specialised by dtype and by the number of
dimensions left after CuPy merges contiguous ones, not by size, so tiny tensors (every dimension
>= 2) compile the lessons' kernels.

cuDNN compiles some engines (their notes say ``RUNTIME_COMPILATION``) when a plan of them is
built: about half a second each on the H100's host, one or two per graph and ten for an fp8
graph. The CUDA driver keeps what it compiled in its JIT cache on disk (``CUDA_CACHE_PATH``,
default ``~/.nv/ComputeCache``), and most of these kernels serve other shapes too: a build in a
later process at another batch size or channel count takes about 30 ms instead. `cudnn_tasks`
builds every such plan of the graphs it is given (the CLI gives the lessons' base convolution and
each shape one move of a shape control reaches, in every dtype, layout, direction and epilogue, and
lesson 09's reports) in the build workers (`labkit.gpu.cudnn.build_pool`), and keeps each on disk
(`labkit.gpu.cudnn.compiled_plans`): the slowest compiles (up to 2 s a plan) are NVRTC's, which CUDA's
JIT cache does not keep, so a first visit loads those plans instead of compiling them. No
measurement is made or saved.

Not in a background thread of the notebook: NVRTC compiles one kernel at a time per process, so a
panel's own compiles would wait behind the warm-up's (race 25 s instead of 9 s on the H200).
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Sequence, Tuple

from tqdm.auto import tqdm

from ..spec import ConvSpec
from .checks import reference
from .cudnn import unfused

#: every dimension >= 2 (a dimension of 1 would be merged away and give other kernels)
_TINY = dict(N=2, C=8, H=6, W=6, K=8, R=3, S=3, padding=1)
_DTYPES = ("fp16", "fp32", "bf16", "tf32", "fp8_e4m3")


def exercise(spec: ConvSpec, epilogue: str = "none") -> None:
    """Run the CuPy kernels of one checked run of a convolution, without cuDNN.

    These are `reference_runs.check_plans`' steps on an output the convolution did not write (zeros) and,
    for an epilogue, the unfused path's elementwise kernels (`unfused.epilogue`).

    Args:
        spec: a tiny convolution of the dtype, layout and direction to warm.
        epilogue: one of `labkit.gpu.cudnn.frontend.EPILOGUES`.
    """
    import cupy  # heavy: CuPy, live only

    from .buffers import memory, numerics  # heavy: CuPy, live only
    from .cudnn import reference_runs  # heavy: CuPy, live only
    from .cudnn.operands import Operands  # heavy: CuPy, live only

    ops = Operands(spec, epilogue)
    ref = reference_runs.expected(spec, ops)
    reference_runs.expected(spec, ops, unrounded=True)
    ops.arrays[ops.output_role][...] = 0  # finite: the error norms run to the end
    got = ops.output()
    reference.errors(got, ref)  # the reference's norms, then the errors (a workspace strategy's check)
    reference_runs.warm_check(ops)  # a plan's check: the reference in storage order, the error kernel
    ws = memory.GuardedBuffer(4096, "kernel warm-up workspace")
    ws.check()
    ws.free()
    if epilogue != "none" and spec.dtype in unfused.DTYPES:
        y = ops.arrays[ops.output_role]
        unfused.epilogue(
            y,
            unfused.bias_view(spec, ops.arrays["b"]),
            ops.arrays.get("z"),
            cupy.empty_like(y),
            cupy.empty_like(y),
            out=y,
        )
        numerics.decode(y, spec.dtype)
    cupy.cuda.get_current_stream().synchronize()


def _race(launch: str) -> None:
    from .workspaces import concurrency  # heavy: CuPy, live only

    concurrency.scratchpad_race(shared=True, launch=launch, min_runs=1)


def tasks() -> List[Tuple[str, Callable[[], None]]]:
    """Every warm-up task, the lessons' base first.

    Returns:
        (label, call) pairs; each call runs its task.
    """
    out: List[Tuple[str, Callable[[], None]]] = []
    for d in _DTYPES:
        for lay in ("NHWC", "NCHW"):
            for direction in ("fprop", "dgrad", "wgrad"):
                spec = ConvSpec(**_TINY, dtype=d, layout=lay, direction=direction)
                out.append((f"{d} {lay} {direction}", lambda s=spec: exercise(s)))
    for d in ("fp16", "fp32"):
        for lay in ("NHWC", "NCHW"):
            for ep in ("bias_relu", "bias_relu_add"):
                spec = ConvSpec(**_TINY, dtype=d, layout=lay)
                out.append((f"{d} {lay} fprop +{ep}", lambda s=spec, e=ep: exercise(s, e)))
    out += [(f"scratchpad race, {la} launch", lambda la=la: _race(la)) for la in ("graph", "python")]
    return out


def build_compiled_plans(graphs: Sequence[Tuple[ConvSpec, str]]) -> int:
    """Build every run-time compiled plan of ``graphs`` not kept on disk yet, and keep it there.

    Each graph is planned here as labkit plans it (`labkit.gpu.cudnn.frontend.planned_graph`); its plans
    are built in the build workers when there are any (which keep what they build:
    `labkit.gpu.cudnn.compiled_plans`), else here. A graph cuDNN cannot plan, or a plan that does not
    build, is left out: a panel meets it itself.

    Args:
        graphs: (convolution, epilogue) pairs.

    Returns:
        How many plans were built (those already kept are not built again).
    """
    from .cudnn import build_pool, builds, compiled_plans, frontend  # heavy: CuPy, live only

    pool = build_pool.pool()
    jobs, built = [], 0
    for spec, epilogue in graphs:
        try:
            g = frontend.planned_graph(spec, epilogue, None)
            compiled = builds.runtime_compiled(g, g.get_execution_plan_count())
        except Exception:  # noqa: BLE001  (a graph cuDNN cannot plan has nothing to compile)
            continue
        for i, name in compiled_plans.names_of(g, compiled).items():
            if compiled_plans.kept(spec.key, epilogue, None, name):
                continue
            if pool is not None:
                jobs.append(pool.submit(build_pool.Job(spec.to_dict(), epilogue, None, i, name)))
                continue
            try:
                g.build_plan_at_index(i)
            except Exception:  # noqa: BLE001  (declined by cuDNN)
                continue
            compiled_plans.keep_built(spec.key, epilogue, None, g, i)
            built += 1
    for job in jobs:
        try:
            job.future.result(timeout=build_pool.PLAN_BUDGET_S)
            built += 1
        except Exception:  # noqa: BLE001  (declined by cuDNN, or the worker's fault: said by the panel)
            pass
    return built


def cudnn_tasks(groups: Sequence[Tuple[str, Sequence[Tuple[ConvSpec, str]]]]) -> List[Tuple[str, Callable]]:
    """(label, call) building each group's run-time compiled plans (`build_compiled_plans`).

    Args:
        groups: (label, [(convolution, epilogue), ...]) pairs.

    Returns:
        One task per group.
    """
    return [(label, lambda g=list(graphs): build_compiled_plans(g)) for label, graphs in groups]


def compile_ahead(
    progress: bool = True, cudnn_groups: Sequence[Tuple[str, Sequence[Tuple[ConvSpec, str]]]] = ()
) -> Dict[str, object]:
    """Run every task (`tasks`, then `cudnn_tasks` of ``cudnn_groups``), one after another.

    A task that fails is reported, not raised: the panel that needs its kernels compiles them itself
    and reports any error.

    Args:
        progress: show a tqdm bar on stderr.
        cudnn_groups: the graphs whose run-time compiled plans are built, in labelled groups.

    Returns:
        Label -> seconds, or the error of a task that failed.
    """
    done: Dict[str, object] = {}
    todo = tasks() + cudnn_tasks(cudnn_groups)
    bar = tqdm(
        todo,
        desc="compiling the kernels a first visit needs (CuPy's, cuDNN's)",
        unit="task",
        disable=not progress,
    )
    for label, call in bar:
        bar.set_postfix_str(label)
        t0 = time.perf_counter()
        try:
            call()
            done[label] = round(time.perf_counter() - t0, 3)
        except Exception as exc:  # noqa: BLE001  (an optimisation: said, not raised)
            done[label] = f"{type(exc).__name__}: {str(exc)[:160]}"
    return done
