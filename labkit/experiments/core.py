"""One function per lesson question. Each returns a tidy pandas DataFrame (units in column names:
``_us`` microseconds, ``_bytes`` bytes, ``tflops_of``, ``_gb_s`` GB/s) with provenance in
``df.attrs`` (mode, GPU, cuDNN, frontend, CuPy, date, source).

The same call works live and recorded: live on a GPU it measures now; in recorded mode it
answers with the rows measured for exactly these arguments on a real GPU (`labkit.store.recordings`),
or raises `RecordedDataError` naming the nearest recorded values. Nothing is interpolated.

GPU times are CUDA-graph replay medians (the kernels' own time) unless a column says otherwise.
"""

from __future__ import annotations

import datetime
import functools
import inspect

import pandas as pd

from .. import env
from ..errors import InvalidSpec, LabkitError, status_row
from ..gpu.host import conditions, lock
from ..gpu.timing import ranges
from ..signals.cancel import Budget
from ..spec import ConvSpec
from ..store import recordings

# experiments.request_key: one definition, in the data layer
from ..store.recordings import request_key  # noqa: F401

#: the lessons' base convolution: a ResNet-50 stage-1 3x3 layer at batch 32
BASE = ConvSpec(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, dtype="fp16", layout="NHWC")
MIB = 1 << 20
#: the recorded grid's one-factor-at-a-time sweeps around BASE (N=32, C=K=64, 56x56, 3x3)
SWEEPS = {"N": [1, 8, 32, 64], "C=K": [32, 64, 128, 256], "H=W": [14, 28, 56, 112]}

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
    """The canonical request of one call of an experiment, defaults filled in.

    Args:
        name: the experiment.
        *args: its positional arguments.
        **kwargs: its keyword arguments.

    Returns:
        Argument name -> plain value (a `ConvSpec` as a dict, tuples as lists).
    """
    bound = _SIGNATURES[name].bind(*args, **kwargs)
    bound.apply_defaults()
    return {k: _plain(v) for k, v in bound.arguments.items()}


def _request(name: str, args: tuple, kwargs: dict) -> dict:
    """`request_of`, with arguments the experiment does not take as an `InvalidSpec`."""
    try:
        return request_of(name, *args, **kwargs)
    except TypeError as exc:
        raise InvalidSpec("arguments", (args, kwargs), f"{name}: {exc}") from None


def experiment(fn):
    """Register ``fn`` as an experiment: live it runs; recorded it is looked up.

    Live, it runs on this process's turn on the GPU, with the GPU's conditions watched, and its
    result carries its provenance, conditions, turn, name and request in ``attrs``.

    Args:
        fn: the run function; it returns a DataFrame.

    Returns:
        The wrapped function, with the same signature.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        request = _request(fn.__name__, args, kwargs)
        m = env.mode()
        if not m.live:
            return with_model(fn.__name__, recordings.lookup(fn.__name__, request))

        # this process's turn on the GPU (other processes queue; let go while plans build); the
        # GPU's clocks, power, temperature while it runs; an NVTX range for Nsight Systems
        with (
            lock.hold() as turn,
            conditions.Watch() as watch,
            ranges.annotate(f"labkit {fn.__name__}", "experiment"),
        ):
            df = fn(*args, **kwargs)
        df.attrs.update(provenance(live=True))
        df.attrs["conditions"] = watch.result
        df.attrs["gpu_turn"] = turn.summary()
        df.attrs["experiment"] = fn.__name__
        df.attrs["request"] = request
        return df

    _REGISTRY[fn.__name__] = wrapper
    _SIGNATURES[fn.__name__] = inspect.signature(fn)
    return wrapper


def from_recording(name: str, recording, *args, **kwargs):
    """An experiment's call answered from one recording, in any mode.

    It is what a panel shows when the learner picks another GPU's recording.

    Args:
        name: the experiment.
        recording: a `labkit.store.recordings.Recording`.
        *args: the call's positional arguments.
        **kwargs: its keyword arguments.

    Returns:
        The recorded DataFrame, with its model columns (`with_model`).
    """
    return with_model(name, recording.lookup(name, _request(name, args, kwargs)))


def model(name: str):
    """Decorator: ``fn(df, **request)`` is experiment ``name``'s model (see `_MODELS`).

    Args:
        name: the experiment.

    Returns:
        The decorator; it registers ``fn`` and returns it unchanged.
    """

    def register(fn):
        _MODELS[name] = fn
        return fn

    return register


def with_model(name: str, df):
    """A result read back from a recording or saved results, with its model columns recomputed.

    Model columns are bytes from tensor sizes, not measurements: this labkit's model computes them.

    Args:
        name: the experiment.
        df: the result; its ``attrs['request']`` holds the call's arguments.

    Returns:
        A new DataFrame with ``df``'s ``attrs``; ``df`` itself when the experiment has no model.
    """
    model = _MODELS.get(name)
    if model is None:
        return df
    out = model(df, **df.attrs.get("request", {}))
    out.attrs = dict(df.attrs)
    return out


def provenance(live: bool) -> dict:
    """Where a result's numbers come from: this machine's GPU and libraries, and today.

    Args:
        live: measured now (True) or looked up.

    Returns:
        ``mode``, ``gpu``, ``compute_capability``, ``cudnn_backend``, ``cudnn_frontend``, ``cupy``,
        ``date``.
    """
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
    """Every registered experiment.

    Returns:
        Name -> experiment function.
    """
    return dict(_REGISTRY)


# ---- shared measuring helpers -----------------------------------------------------------------
def as_spec(value, name="spec") -> ConvSpec:
    """An argument that must be a `ConvSpec`.

    Args:
        value: the argument.
        name: its name, in the error.

    Returns:
        ``value``; `InvalidSpec` for anything else.
    """
    if not isinstance(value, ConvSpec):
        raise InvalidSpec(name, value, "must be a labkit.ConvSpec")
    return value


def timed_plan(cg, plan_index=None, ops=None, calls: int = 10):
    """One plan timed by CUDA-graph replay, with its own workspace.

    The time allowed is the first plan's budget of `labkit.gpu.timing.autotune` (`labkit.TimedOut` past it).

    Args:
        cg: the built graph (`labkit.gpu.cudnn.graph_cache.get_graph`).
        plan_index: the plan; None for the default plan.
        ops: the operands; None makes them here.
        calls: calls per replay.

    Returns:
        (the plan, its `Timing`).
    """
    from ..gpu.cudnn import operands  # heavy: CuPy, live only
    from ..gpu.timing import autotune  # heavy: CuPy, live only

    plan = cg.plan(plan_index)
    ops = ops if ops is not None else operands.Operands(cg.spec, cg.epilogue)
    budget = Budget(autotune.FIRST_PLAN_BUDGET_S, f"plan {plan.index} ({plan.name}) of {cg.spec.label}")
    return plan, autotune.time_plan(cg, plan.index, ops, calls=calls, budget=budget)


def heuristic_row(spec: ConvSpec) -> dict:
    """The heuristic plan of a convolution, timed.

    When the heuristic's first choice computes wrong results, its next correct plan is timed and
    ``reason`` says so. A labkit error becomes the row's status instead of ending the experiment.

    Args:
        spec: the convolution.

    Returns:
        ``plan_name``, ``workspace_bytes``, ``gpu_us``, ``tflops``, ``status`` and ``reason``; only the
        last two after an error (`status_row`).
    """
    from ..gpu.cudnn import graph_cache  # heavy: CuPy, live only

    try:
        cg = graph_cache.get_graph(spec, all_plans=False)
        plan, t = timed_plan(cg)
    except LabkitError as exc:
        return status_row(exc)
    return dict(
        plan_name=plan.name,
        workspace_bytes=plan.workspace_bytes,
        gpu_us=t.median_us,
        tflops=tflops_of(spec, t.median_us),
        status="ok",
        reason=cg.fell_through,
    )


def tflops_of(spec: ConvSpec, us: float) -> float:
    """A convolution's throughput at a given time per call.

    Args:
        spec: the convolution.
        us: its time per call, in microseconds.

    Returns:
        TFLOP/s.
    """
    return spec.flops / (us * 1e-6) / 1e12


def to_frame(rows):
    """Rows as a DataFrame.

    Args:
        rows: dicts, one per row.

    Returns:
        The ``pandas.DataFrame``.
    """
    return pd.DataFrame(rows)


# ---- results for summaries and checks ----------------------------------------------------------
class ResultSource:
    """Where `result` gets a summary's or a check's results: by running the experiment.

    Live that measures; recorded it looks the rows up. A notebook's session puts its own source in
    this one's place (`use_results`: `labkit.session.results.SessionResults`), so a lesson's text,
    charts and checks share one measurement per request.
    """

    def result(self, name: str, at_hand_only: bool = False, **kwargs):
        """The result of experiment ``name(**kwargs)``.

        Args:
            name: the experiment.
            at_hand_only: None instead of measuring live.
            **kwargs: its arguments.

        Returns:
            Its DataFrame, or None (``at_hand_only``, live).
        """
        if at_hand_only and env.mode().live:
            return None
        return registry()[name](**kwargs)


_results = ResultSource()


def use_results(source: ResultSource) -> ResultSource:
    """Make ``source`` the one `result` reads from (`labkit.session.results.install`).

    Args:
        source: a `ResultSource`.

    Returns:
        The source it replaces.
    """
    global _results
    before, _results = _results, source
    return before


def result(name: str, at_hand_only: bool = False, **kwargs):
    """The result of experiment ``name(**kwargs)`` for a summary or check.

    It comes from the source in use (`use_results`; by default the experiment itself: live,
    measured; recorded, looked up).

    Args:
        name: the experiment.
        at_hand_only: None instead of measuring live.
        **kwargs: its arguments.

    Returns:
        Its DataFrame, or None (``at_hand_only``, live, not at hand).
    """
    return _results.result(name, at_hand_only, **kwargs)


def beside(df, name: str, **kwargs):
    """Experiment ``name(**kwargs)`` from where ``df`` came from, never measured.

    Args:
        df: a result; its ``attrs`` say its mode and, recorded, its recording's folder.
        name: the experiment to look up.
        **kwargs: its arguments.

    Returns:
        The DataFrame from ``df``'s recording (recorded) or this session's results (live); None when
        it is not at hand there.
    """
    a = getattr(df, "attrs", {}) or {}
    try:
        if a.get("mode") == "recorded" and a.get("source"):
            rec = next((r for r in recordings.shipped() if str(r.path) == str(a["source"])), None)
            rec = rec if rec is not None else recordings.load(a["source"])
            if name not in rec.experiments():
                return None
            return from_recording(name, rec, **kwargs)
        return result(name, at_hand_only=True, **kwargs)
    except (LabkitError, KeyError, ValueError, OSError):
        return None


def variants(base: ConvSpec = BASE) -> list:
    """A convolution and its one-factor variants along `SWEEPS`, each once.

    They are the shapes the lessons' shape controls offer in recorded mode.

    Args:
        base: the convolution varied.

    Returns:
        The `ConvSpec`s, ``base`` first.
    """
    out = [base]
    for field, values in SWEEPS.items():
        for v in values:
            change = {"N": dict(N=v), "C=K": dict(C=v, K=v), "H=W": dict(H=v, W=v)}[field]
            s = base.replace(**change)
            if s not in out:
                out.append(s)
    return out
