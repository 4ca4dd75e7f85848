"""One function per lesson question. Each returns a tidy pandas DataFrame (units in column names:
``_us`` microseconds, ``_bytes`` bytes, ``_tflops``, ``_gb_s`` GB/s) with provenance in
``df.attrs`` (mode, GPU, cuDNN, frontend, CuPy, date, source).

The same call works live and recorded: live on a GPU it measures now; in recorded mode it
answers with the rows measured for exactly these arguments on a real GPU (`labkit.recordings`),
or raises `RecordedDataError` naming the nearest recorded values. Nothing is interpolated.

GPU times are CUDA-graph replay medians (the kernels' own time) unless a column says otherwise.
"""
from __future__ import annotations

import datetime
import functools
import inspect
import time
from typing import Optional, Sequence

from .errors import InvalidSpec, LabkitError, OutOfMemory, Unsupported
from .cancel import checkpoint
from .progress import report
from .recordings import request_key  # noqa: F401  (experiments.request_key: one definition, in the data layer)
from .spec import DTYPES, LAYOUTS, ConvSpec

#: the lessons' base convolution: a ResNet-50 stage-1 3x3 layer at batch 32
BASE = ConvSpec(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
MIB = 1 << 20
CAPS = (0, 1 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, None)
#: the dtypes `fusion` compares (its unfused path needs CuPy elementwise kernels: no bf16 or fp8)
FUSION_DTYPES = ("fp32", "fp16")

_REGISTRY = {}  # name -> the wrapped experiment (what callers and the recorder call)
#: name -> fn(df, **request) that (re)computes an experiment's model columns (quantities derived
#: from tensor sizes, not measured) from its rows: applied to recorded rows too, so a corrected
#: model shows without measuring again. Measured columns are never touched.
_MODELS = {}
_SIGNATURES = {}  # name -> the experiment's own signature (what requests are made of)


# ---- requests: canonical, comparable arguments ------------------------------------------------
def _plain(value):
    if isinstance(value, ConvSpec):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in value.to_dict().items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def request_of(name: str, *args, **kwargs) -> dict:
    """The canonical request dict for a call of experiment ``name`` (defaults filled in)."""
    bound = _SIGNATURES[name].bind(*args, **kwargs)
    bound.apply_defaults()
    return {k: _plain(v) for k, v in bound.arguments.items()}


def experiment(fn):
    """Register ``fn`` as an experiment: live it runs; recorded it is looked up."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from . import env

        try:
            request = request_of(fn.__name__, *args, **kwargs)
        except TypeError as exc:
            raise InvalidSpec("arguments", (args, kwargs), f"{fn.__name__}: {exc}") from None
        m = env.mode()
        if not m.live:
            from . import recordings

            return with_model(fn.__name__, recordings.lookup(fn.__name__, request))
        df = fn(*args, **kwargs)
        df.attrs.update(provenance(live=True))
        df.attrs["experiment"] = fn.__name__
        df.attrs["request"] = request
        return df

    _REGISTRY[fn.__name__] = wrapper
    _SIGNATURES[fn.__name__] = inspect.signature(fn)
    return wrapper


def with_model(name: str, df):
    """``df`` (read back from a recording or this GPU's saved results) with its model columns
    (bytes from tensor sizes, not measurements) computed by this labkit's model."""
    model = _MODELS.get(name)
    if model is None:
        return df
    out = model(df, **df.attrs.get("request", {}))
    out.attrs = dict(df.attrs)
    return out


def provenance(live: bool) -> dict:
    from . import env

    e = env.environment()
    return {
        "mode": "live" if live else "recorded",
        "gpu": e.gpu_name,
        "compute_capability": e.compute_capability,
        "cudnn_backend": e.cudnn_backend,
        "cudnn_frontend": e.cudnn_frontend,
        "cupy": e.cupy_version,
        "date": datetime.date.today().isoformat(),
    }


def registry() -> dict:
    """name -> experiment function."""
    return dict(_REGISTRY)


# ---- shared measuring helpers -----------------------------------------------------------------
def _spec(value, name="spec") -> ConvSpec:
    if not isinstance(value, ConvSpec):
        raise InvalidSpec(name, value, "must be a labkit.ConvSpec")
    return value


def _timed_plan(cg, plan_index=None, ops=None, calls: int = 10):
    """(plan, Timing) of one plan by CUDA-graph replay, with its own workspace."""
    import cupy

    from .gpu import engine, measure, memory

    plan = cg.plan(plan_index)
    ops = ops if ops is not None else engine.Operands(cg.spec, cg.epilogue)
    ws = memory.alloc(plan.workspace_bytes, "workspace")
    stream = cupy.cuda.Stream(non_blocking=True)
    bound = cg.bind(ops.arrays, int(ws.data.ptr), plan.index, stream)
    return plan, measure.graph_replay(bound.run, stream, calls=calls)


def _heuristic_row(spec: ConvSpec) -> dict:
    """The heuristic plan of ``spec`` timed: plan, workspace, GPU time, TFLOP/s and status
    (a labkit error becomes the row's status instead of ending the experiment)."""
    from .gpu import engine

    try:
        plan, t = _timed_plan(engine.get_graph(spec, all_plans=False))
    except LabkitError as exc:
        return _status_row(exc)
    return dict(plan_name=plan.name, workspace_bytes=plan.workspace_bytes, gpu_us=t.median_us,
                tflops=_tflops(spec, t.median_us), status="ok", reason="")


def _status_row(exc: Exception) -> dict:
    kind = "unsupported" if isinstance(exc, Unsupported) else "out_of_memory" if isinstance(exc, OutOfMemory) else "error"
    return {"status": kind, "reason": str(exc)[:300]}


def _tflops(spec: ConvSpec, us: float) -> float:
    return spec.flops / (us * 1e-6) / 1e12


def _frame(rows):
    import pandas as pd

    return pd.DataFrame(rows)


# ---- the experiments ------------------------------------------------------------------------
@experiment
def precision(spec: ConvSpec = BASE, dtypes: Sequence[str] = DTYPES):
    """Error vs float64, GPU time, TFLOP/s, workspace and plan per dtype (heuristic plan each).

    Two errors, both relative L2 on the same seeded data: ``rel_error`` against the float64
    convolution of the inputs as cuDNN read them (rounded to the dtype: the arithmetic alone), and
    ``rel_error_vs_fp64_inputs`` against the float64 convolution of the data before rounding
    (what choosing the dtype costs in total).
    """
    from .gpu import engine, verify

    spec, rows = _spec(spec), []
    for d in dtypes:
        s = spec.replace(dtype=d)
        row = dict(dtype=d, layout=s.layout, direction=s.direction, flops=s.flops)
        try:
            cg = engine.get_graph(s, all_plans=False)
            check = verify.check_plan(s, graph=cg, vs_unrounded=True)
            plan, t = _timed_plan(cg)
            row.update(plan_index=plan.index, plan_name=plan.name, workspace_bytes=plan.workspace_bytes,
                       gpu_us=t.median_us, gpu_us_p10=t.p10_us, gpu_us_p90=t.p90_us, tflops=_tflops(s, t.median_us),
                       rel_error=check.rel_error, max_abs_error=check.max_abs_error, tolerance=check.tolerance,
                       rel_error_vs_fp64_inputs=check.rel_error_vs_unrounded,
                       status="ok", reason="")
        except LabkitError as exc:
            row.update(_status_row(exc))
        rows.append(row)
        report(lambda: _frame(rows), len(rows), len(dtypes), "dtypes")
    return _frame(rows)


@experiment
def layout(spec: ConvSpec = BASE):
    """NCHW vs NHWC for one spec, plus converting a user's NCHW input to NHWC (and the output
    back) with a CuPy transpose-copy, so ``end_to_end_us`` shows when NHWC pays off."""
    import cupy

    from .gpu import engine, measure

    spec, rows = _spec(spec), []
    for lay in LAYOUTS:
        s = spec.replace(layout=lay)
        row = dict(layout=lay, dtype=s.dtype, direction=s.direction)
        try:
            cg = engine.get_graph(s, all_plans=False)
            ops = engine.Operands(s)  # timed, then reused as the conversion's buffers
            plan, t = _timed_plan(cg, ops=ops)
            convert = 0.0
            if lay == "NHWC":
                stream = cupy.cuda.Stream(non_blocking=True)
                ins = [r for r in engine.INPUT_ROLES[s.direction] if r != "w"]
                out = engine.OUTPUT_ROLE[s.direction]
                nchw = {r: cupy.ascontiguousarray(engine.logical_view(ops.arrays[r], "NHWC")) for r in ins + [out]}

                def to_nhwc_and_back():
                    for r in ins:  # user's NCHW input -> NHWC for cuDNN
                        ops.arrays[r][...] = nchw[r].transpose(0, 2, 3, 1)
                    nchw[out][...] = ops.arrays[out].transpose(0, 3, 1, 2)  # result back to NCHW

                convert = measure.graph_replay(to_nhwc_and_back, stream, calls=5).median_us
            row.update(plan_name=plan.name, workspace_bytes=plan.workspace_bytes, conv_gpu_us=t.median_us,
                       convert_gpu_us=convert, end_to_end_us=t.median_us + convert, status="ok", reason="")
        except LabkitError as exc:
            row.update(_status_row(exc))
        rows.append(row)
        report(lambda: _frame(rows), len(rows), len(LAYOUTS), "layouts")
    return _frame(rows)


def _bytes_model(spec: ConvSpec, epilogue: str, fused: bool) -> int:
    """Bytes a path must move through HBM, from tensor sizes (a model, not a counter reading)."""
    tb = spec.touched_bytes  # the conv reads the input pixels its windows cover
    y, b = tb["y"], spec.K * (2 if spec.output_dtype != "fp32" else 4)
    z = y if epilogue == "bias_relu_add" else 0
    if fused:
        return tb["x"] + tb["w"] + b + z + y
    moved = tb["x"] + tb["w"] + y  # conv
    moved += y + b + y             # + bias: read y and b, write t
    if z:
        moved += y + z + y         # + residual: read t and z, write t2
    moved += y + y                 # relu: read, write
    return moved


@experiment
def fusion(spec: ConvSpec = BASE, epilogues: Sequence[str] = ("bias_relu", "bias_relu_add")):
    """Fused conv+bias+relu(+add) (one cuDNN graph, virtual intermediates) vs the unfused sequence
    (cuDNN conv, then CuPy kernels for bias, add and relu, each writing a real tensor).

    ``path``: ``fused`` runs the heuristic's first plan for the fused graph (what a framework that
    does not autotune gets); ``fused, autotuned`` the fastest of every plan cuDNN offers for it
    (`labkit.gpu.autotune`); ``unfused`` the heuristic conv plan and three (or two) CuPy kernels.

    ``allocated_bytes``: bytes of the tensors and workspace each path allocates (real allocations);
    ``modelled_hbm_bytes``: bytes each path must move through HBM (a model from tensor sizes);
    ``achieved_gb_s``: that model over the measured time.
    """
    import cupy

    from .gpu import autotune, engine, measure, memory, numerics, reference, verify

    spec = _spec(spec)
    if spec.direction != "fprop" or spec.dtype not in FUSION_DTYPES:
        raise InvalidSpec("spec", spec.label, "fusion compares fprop in fp16 or fp32 (CuPy has no bf16/fp8 kernels)")
    paths = ("fused", "fused, autotuned", "unfused")
    done = {}  # (epilogue index, path index) -> row
    cases = {}  # epilogue -> (operands, float64 reference)

    def table():
        df = _frame([done[k] for k in sorted(done)])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    def case(epi):
        if epi not in cases:
            ops = engine.Operands(spec, epi)
            cases[epi] = (ops, verify.expected(spec, ops))
        return cases[epi]

    def fused_row(epi, cg, plan, us, **extra):
        """Run ``plan`` once more on a poisoned output, check it against the reference, make its row."""
        ops, want = case(epi)
        ops.poison_output()
        ws = memory.alloc(plan.workspace_bytes, "workspace")
        cg.execute(ops.arrays, int(ws.data.ptr), plan.index)
        cupy.cuda.get_current_stream().synchronize()
        moved = _bytes_model(spec, epi, True)
        return dict(gpu_us=us, allocated_bytes=ops.nbytes + plan.workspace_bytes, intermediate_bytes=0,
                    modelled_hbm_bytes=moved, achieved_gb_s=moved / (us * 1e-6) / 1e9,
                    rel_error=reference.relative_error(ops.output(), want), kernels_per_call="1 graph",
                    plan_name=plan.name, **extra, status="ok", reason="")

    def fused(epi):  # the heuristic's fused plan: what a framework that does not autotune gets
        cg = engine.get_graph(spec, epi, all_plans=False)
        plan, t = _timed_plan(cg, ops=case(epi)[0])
        return fused_row(epi, cg, plan, t.median_us)

    def autotuned(epi):  # every plan of the fused graph timed; the fastest, checked like the heuristic's
        full = engine.get_graph(spec, epi)
        tuned = autotune.autotune(full, case(epi)[0])
        best = full.plan(tuned.best_index)
        return fused_row(epi, full, best, tuned.gpu_us(best.index), plans_timed=int((tuned.table.status == "ok").sum()))

    def unfused(epi):  # conv alone, then elementwise kernels on real tensors
        ops, want = case(epi)
        out_role = ops.output_role
        stream = cupy.cuda.Stream(non_blocking=True)
        plain = engine.get_graph(spec, all_plans=False)
        pplan = plain.default_plan
        ws2 = memory.alloc(pplan.workspace_bytes, "workspace")
        y = ops.arrays[out_role]
        t1, t2 = cupy.empty_like(y), cupy.empty_like(y)
        bias = ops.arrays["b"].reshape((1, spec.K, 1, 1) if spec.layout == "NCHW" else (1, 1, 1, spec.K))
        z = ops.arrays.get("z")
        conv_y = memory.empty(y.shape, y.dtype, "conv output")
        bound = plain.bind({**ops.arrays, out_role: conv_y}, int(ws2.data.ptr), pplan.index, stream)

        def sequence():
            bound.run()
            cupy.add(conv_y, bias, out=t1)
            src = t1
            if z is not None:
                cupy.add(t1, z, out=t2)
                src = t2
            cupy.maximum(src, 0, out=y)

        tu = measure.graph_replay(sequence, stream, calls=5)
        ops.poison_output()
        with stream:
            sequence()
        stream.synchronize()
        got = engine.logical_view(numerics.decode(y, spec.output_dtype), spec.layout)
        inter = conv_y.nbytes + t1.nbytes + (t2.nbytes if z is not None else 0)
        moved = _bytes_model(spec, epi, False)
        return dict(gpu_us=tu.median_us, allocated_bytes=ops.nbytes + inter + pplan.workspace_bytes,
                    intermediate_bytes=inter, modelled_hbm_bytes=moved, achieved_gb_s=moved / (tu.median_us * 1e-6) / 1e9,
                    rel_error=reference.relative_error(got, want),
                    kernels_per_call=f"conv + {3 if z is not None else 2} elementwise",
                    plan_name=pplan.name, status="ok", reason="")

    # cheapest and most telling first: the heuristic's fused plan and the unfused sequence for
    # every epilogue, then the autotuned fused plans (every plan of a fused graph: seconds)
    order = [(e, p) for p in (0, 2) for e in range(len(epilogues))] + [(e, 1) for e in range(len(epilogues))]
    make = {0: fused, 1: autotuned, 2: unfused}
    for e, p in order:
        epi = epilogues[e]
        try:
            row = make[p](epi)
        except LabkitError as exc:
            if p == 2:
                raise
            row = _status_row(exc)
        done[(e, p)] = dict(epilogue=epi, path=paths[p], **row)
        report(table, len(done), len(order), "paths measured")
    return table()


@experiment
def plans(spec: ConvSpec = BASE):
    """Every plan's GPU time and workspace (autotuned), marking the heuristic pick, best and worst,
    and whether cuDNN marks the plan deterministic."""
    from .gpu import autotune, engine

    spec = _spec(spec)
    cg = engine.get_graph(spec)
    heuristic = cg.default_plan.index

    def table(rows, deterministic=None):
        df = _frame(rows)
        ok = df[df.status == "ok"]
        df["heuristic_pick"] = df.plan_index == heuristic
        df["best"] = df.plan_index == int(ok.loc[ok.gpu_us.idxmin(), "plan_index"]) if not ok.empty else False
        df["worst"] = df.plan_index == int(ok.loc[ok.gpu_us.idxmax(), "plan_index"]) if not ok.empty else False
        df["candidates"] = len(cg.plans)
        df["deterministic"] = df.plan_name.isin(deterministic if deterministic is not None else ())
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        df.insert(2, "direction", spec.direction)
        return df

    tuned = autotune.autotune(cg, on_row=lambda rows, total: report(lambda: table(list(rows)), len(rows), total,
                                                                     "plans timed"))
    df = table(tuned.table.to_dict("records"), cg.deterministic_names())
    assert int(df[df.best].plan_index.iloc[0]) == tuned.best_index
    return df


@experiment
def caps(spec: ConvSpec = BASE, caps: Sequence[Optional[int]] = CAPS):
    """The best plan under each workspace cap (``deselect_workspace_greater_than``) and what the
    cap costs against the uncapped best. ``cap_bytes`` -1 = unlimited."""
    from .gpu import autotune, engine

    spec = _spec(spec)
    order = sorted(range(len(caps)), key=lambda i: caps[i] is not None)  # unlimited first: the yardstick
    done = {}

    def table():
        df = _frame([done[i] for i in sorted(done)])
        unlimited = df[(df.cap_bytes == -1) & (df.status == "ok")] if "status" in df.columns else df.iloc[0:0]
        if not unlimited.empty:
            df["slowdown_vs_unlimited"] = df.gpu_us / float(unlimited.gpu_us.iloc[0])
        df.insert(0, "dtype", spec.dtype)
        df.insert(1, "layout", spec.layout)
        return df

    for i in order:
        cap = caps[i]
        try:
            cg = engine.get_graph(spec, workspace_cap=cap)
            tuned = autotune.autotune(cg)
            best = tuned.table[tuned.table.plan_index == tuned.best_index].iloc[0]
            done[i] = dict(cap_bytes=-1 if cap is None else cap, plans_within_cap=len(cg.runnable), best_plan=best.plan_name,
                           workspace_bytes=int(best.workspace_bytes), gpu_us=float(best.gpu_us), status="ok", reason="")
        except LabkitError as exc:
            done[i] = dict(cap_bytes=-1 if cap is None else cap, plans_within_cap=0, **_status_row(exc))
        report(table, len(done), len(caps), "caps autotuned")
    return table()


@experiment
def algorithms(spec: ConvSpec = BASE.replace(layout="NCHW"), workspace_limit_bytes: int = 1 << 30):
    """The classic algorithm table (IMPLICIT_GEMM ... WINOGRAD_NONFUSED): status, workspace and
    time as cuDNN's legacy ``cudnnFindConvolutionForwardAlgorithmEx`` reports them."""
    from .gpu import legacy

    df = legacy.algorithm_table(_spec(spec), workspace_limit_bytes=workspace_limit_bytes)
    df.insert(0, "dtype", spec.dtype)
    df.insert(1, "layout", spec.layout)
    return df


@experiment
def build_cost(spec: ConvSpec = BASE):
    """What building costs: first build (heuristic plan), identical rebuild (cuDNN's own caches
    warm), labkit cache hit, build of every plan, serialize/deserialize, autotune; and how many
    calls autotuning needs to pay for itself. ``seconds`` is wall time."""
    import cudnn

    from .gpu import autotune, engine

    spec = _spec(spec)
    rows = []

    def timed(stage, fn):
        checkpoint()  # between stages: a prefetch job gives the GPU back here (labkit.prefetch)
        t0 = time.perf_counter()
        out = fn()
        rows.append(dict(stage=stage, seconds=time.perf_counter() - t0))
        report(lambda: _frame(rows), len(rows), 7, "build stages")
        return out

    cache = engine.GraphCache(4)
    timed("build (heuristic plan)", lambda: cache.get(spec, all_plans=False))
    timed("rebuild (same graph, new object)", lambda: engine.ConvGraph(spec, all_plans=False))
    timed("labkit cache hit", lambda: cache.get(spec, all_plans=False))
    full = timed("build every plan", lambda: engine.ConvGraph(spec))
    data = timed("serialize", lambda: full.graph.serialize())

    def deserialize():
        g = cudnn.pygraph(handle=engine.handle_for())
        g.deserialize(engine.handle_for(), data) if _takes_handle(g.deserialize) else g.deserialize(data)
        return g

    try:
        timed("deserialize", deserialize)
    except Exception as exc:  # noqa: BLE001  (reported, not hidden)
        rows.append(dict(stage="deserialize", seconds=float("nan"), reason=f"{type(exc).__name__}: {str(exc)[:200]}"))
    tuned = timed("autotune (time every plan)", lambda: autotune.autotune(full))
    gain = tuned.gpu_us(tuned.heuristic_index) - tuned.gpu_us(tuned.best_index)
    df = _frame(rows)
    df["heuristic_gpu_us"] = tuned.gpu_us(tuned.heuristic_index)
    df["best_gpu_us"] = tuned.gpu_us(tuned.best_index)
    df["calls_to_pay_off_autotune"] = (tuned.seconds * 1e6 / gain) if gain > 0 else float("inf")
    df["serialized_bytes"] = len(data) if hasattr(data, "__len__") else None
    return df


def _takes_handle(fn) -> bool:
    try:
        return len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):
        return False


def resnet50_shapes(N: int = 32):
    """The ResNet-50 forward convolution shapes the benchmarks and roofline use (name, spec)."""
    return [
        ("conv1 7x7/2", ConvSpec(N=N, C=3, H=224, W=224, K=64, R=7, S=7, stride=2, padding=3)),
        ("3x3 @56", ConvSpec(N=N, C=64, H=56, W=56, K=64)),
        ("1x1 @56", ConvSpec(N=N, C=64, H=56, W=56, K=256, R=1, S=1, padding=0)),
        ("3x3 @28", ConvSpec(N=N, C=128, H=28, W=28, K=128)),
        ("3x3 @14", ConvSpec(N=N, C=256, H=14, W=14, K=256)),
        ("3x3 @7", ConvSpec(N=N, C=512, H=7, W=7, K=512)),
        ("1x1/2 ds @28", ConvSpec(N=N, C=256, H=56, W=56, K=512, R=1, S=1, stride=2, padding=0)),
        ("batch-1 3x3 @56", ConvSpec(N=1, C=64, H=56, W=56, K=64)),
    ]


@experiment
def roofline(dtype: str = "fp16", layout: str = "NHWC", N: int = 32):
    """Arithmetic intensity and achieved TFLOP/s of the ResNet-50 shapes against this GPU's
    ceilings (`labkit.ceilings`); a GPU not in the table gets empty ceiling columns."""
    from . import ceilings, env

    ceiling = ceilings.for_gpu(env.environment().gpu_name)
    rows, shapes = [], resnet50_shapes(N)
    for name, s in shapes:
        s = s.replace(dtype=dtype, layout=layout)
        row = dict(shape=name, dtype=dtype, layout=layout, flops=s.flops,
                   peak_tflops=ceiling.peak_tflops(dtype) if ceiling else None,
                   bandwidth_gb_s=ceiling.bandwidth_bytes_per_s / 1e9 if ceiling else None,
                   ceiling_gpu=ceiling.gpu if ceiling else None)
        row.update(_heuristic_row(s))
        rows.append(row)
        report(lambda: _roofline_model(_frame(rows), dtype=dtype, layout=layout, N=N), len(rows), len(shapes), "shapes")
    return _roofline_model(_frame(rows), dtype=dtype, layout=layout, N=N)


def _roofline_model(df, dtype: str = "fp16", layout: str = "NHWC", N: int = 32):
    """The roofline's model columns from each row's shape: ``min_bytes`` (`ConvSpec.min_bytes`:
    the input pixels some window covers, the filter and the output, each moved once),
    ``intensity_flops_per_byte`` and ``achieved_gb_s`` (that model over the measured time)."""
    df = df.copy()
    shapes = dict(resnet50_shapes(N))
    specs = [shapes[name].replace(dtype=dtype, layout=layout) if name in shapes else None for name in df["shape"]]
    df["min_bytes"] = [s.min_bytes if s else None for s in specs]
    df["intensity_flops_per_byte"] = [s.arithmetic_intensity if s else None for s in specs]
    if "gpu_us" in df.columns:
        df["achieved_gb_s"] = [s.min_bytes / (us * 1e-6) / 1e9 if s and us == us and us else None
                               for s, us in zip(specs, df["gpu_us"])]
    return df


_MODELS["roofline"] = _roofline_model


SWEEP_FIELDS = ("N", "C=K", "H=W", "R=S")


@experiment
def sweep(field: str = "N", values: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), base: ConvSpec = BASE):
    """GPU time, workspace and TFLOP/s of the heuristic plan as one dimension varies (``C=K``
    moves both channel counts, ``H=W`` both spatial sizes, ``R=S`` the filter with 'same' padding)."""

    base = _spec(base, "base")
    if field not in SWEEP_FIELDS:
        raise InvalidSpec("field", field, f"must be one of {', '.join(SWEEP_FIELDS)}")
    rows = []
    for v in values:
        change = {"N": dict(N=v), "C=K": dict(C=v, K=v), "H=W": dict(H=v, W=v),
                  "R=S": dict(R=v, S=v, padding=(v - 1) // 2 * base.dilation[0])}[field]
        s = base.replace(**change)
        rows.append(dict(field=field, value=v, dtype=s.dtype, layout=s.layout, direction=s.direction, flops=s.flops,
                         **_heuristic_row(s)))
        report(lambda: _frame(rows), len(rows), len(values), f"{field} values")
    return _frame(rows)


@experiment
def workspace_sizes(spec: ConvSpec = BASE):
    """Workspace of every candidate plan for each dtype x layout x direction of ``spec``'s shape:
    how workspace depends on dtype, layout and direction (min / heuristic pick / max per variant)."""
    import itertools

    from .gpu import engine

    spec, rows = _spec(spec), []
    variants = list(itertools.product(DTYPES, LAYOUTS, ("fprop", "dgrad", "wgrad")))
    for d, lay, direction in variants:
        s = spec.replace(dtype=d, layout=lay, direction=direction)
        row = dict(dtype=d, layout=lay, direction=direction)
        try:
            cg = engine.get_graph(s)
            ws = [p.workspace_bytes for p in cg.runnable]
            row.update(plans=len(ws), heuristic_workspace_bytes=cg.default_plan.workspace_bytes,
                       min_workspace_bytes=min(ws), max_workspace_bytes=max(ws), status="ok", reason="")
        except LabkitError as exc:
            row.update(_status_row(exc))
        rows.append(row)
        report(lambda: _frame(rows), len(rows), len(variants), "variants (each builds every plan)")
    return _frame(rows)


@experiment
def strategies(workload: str = "one_conv", repeats: int = 20):
    """Every workspace strategy on one workload (`labkit.gpu.workloads`): per-call host time, GPU time,
    allocations, peak and held workspace bytes."""
    from .gpu import workloads

    return workloads.run_all(workload, repeats)


@experiment
def race(launch: str = "graph", streams: int = 2, min_runs: int = 1024):
    """Shared vs per-stream scratchpads on concurrent streams: corrupted outputs out of ``runs``."""
    from .gpu import concurrency

    rows = [concurrency.scratchpad_race(shared=sh, launch=launch, streams=streams, min_runs=min_runs).as_dict()
            for sh in (True, False)]
    df = _frame(rows)
    df.insert(0, "scratchpad", ["shared" if s else "per-stream" for s in df.shared])
    return df
