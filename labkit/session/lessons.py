"""Small helpers the lesson notebooks call: the mode banner, the lesson list, experiment results
shared by a notebook's prose, charts and checks, and summaries whose every number is formatted
from those results at run time (no measured number is ever written into a notebook).

``data(name, **kwargs)`` runs (live) or looks up (recorded) an experiment once per session and
request; the panels (`labkit.present.widgets`) and the checks (`labkit.present.check`) use the same
results, so in live mode a notebook measures each request once and its text, charts and checks agree.
"""

from __future__ import annotations

import ast
import json
import textwrap
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Optional

from .. import experiments
from ..draw.prose import Text, table  # noqa: F401
from ..errors import InvalidSpec, LabkitError

# the summaries, by the names notebooks use
from ..experiments.epilogue_fusion import fusion_summary  # noqa: F401
from ..experiments.plans_autotune import (  # noqa: F401
    build_cost_summary,
    caps_summary,
    plans_summary,
    timing_noise_summary,
)
from ..experiments.precision_layout import (  # noqa: F401
    fp8_vs_fp16,
    layout_summary,
    nchw_kernels,
    precision_summary,
    roofline_summary,
)
from ..experiments.start_here import fp32_layout_note  # noqa: F401  (lesson 00)
from ..experiments.streams import race_all, race_summary  # noqa: F401
from ..experiments.workspace_basics import (  # noqa: F401
    algorithms_summary,
    sweep_summary,
    workspace_sizes_summary,
)
from ..experiments.workspace_strategies import (  # noqa: F401
    dims_only_summary,
    pressure_summary,
    strategies_summary,
)
from ..gpu.spread import given_text as class_gpu_text

LESSONS = (
    ("00_start_here", "What is on this machine, which mode am I in, how do the panels work?"),
    ("01_what_is_a_workspace", "What is a workspace, who asks for it, how big is it, what does it buy?"),
    ("02_workspace_strategies", "The workspace strategies side by side: time, peak memory, allocations."),
    (
        "03_precision_and_layout",
        "fp32 / tf32 / fp16 / bf16 / fp8 and NCHW / NHWC: error, speed, workspace, roofline.",
    ),
    ("04_fusion", "Convolution + bias + activation as one graph: what fusion saves."),
    (
        "05_plans_autotune_and_caching",
        "Many plans per problem: autotuning them, capping workspace, caching the build.",
    ),
    ("06_streams_and_scratchpads", "Several streams, one workspace: races, and a scratchpad per stream."),
    ("07_lab", "Open lab: your own convolution, every chart, every knob, CSV export."),
    (
        "08_same_conv_other_gpu",
        "The same convolutions on another GPU: what changes with more memory bandwidth, and why.",
    ),
    (
        "09_your_network",
        "Your network: every conv layer under every strategy, the memory timeline, a workspace budget.",
    ),
    (
        "10_under_the_hood",
        "Under the hood: the kernels each plan launches, each strategy's GPU timeline, cuDNN's own log.",
    ),
)

_CACHE: "OrderedDict[str, object]" = OrderedDict()
#: results kept per session (DataFrames of a few KiB; prefetching adds ~20 per panel move)
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


# ---- results ------------------------------------------------------------------------------------
def _experiment(name: str):
    """The experiment function called ``name``; `InvalidSpec` for an unknown name."""
    fns = experiments.registry()
    if name not in fns:
        raise InvalidSpec("experiment", name, f"must be one of {', '.join(sorted(fns))}")
    return fns[name]


def _key(name: str, kwargs: dict) -> str:
    """A result's key in this session: the request, and in recorded mode the recording in use
    (switching ``LABKIT_RECORDING`` in one process never answers from the other recording)."""
    from .. import env

    _experiment(name)
    key = f"{name}:{experiments.request_key(experiments.request_of(name, **kwargs))}"
    if not env.mode().live:
        from ..store import recordings

        key = f"{recordings.current().name}/{key}"
    return key


def _cached(key: str):
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    return None


def _has(key: str) -> bool:
    """Whether this session holds a settled result for ``key`` (not one measured under contention)."""
    with _CACHE_LOCK:
        return key in _CACHE and not contended(_CACHE[key])


def contended(df) -> bool:
    """Whether ``df`` was measured while another process used the GPU (`labkit.gpu.lock`: such a
    result is shown marked, never saved, and measured again once the GPU is free)."""
    turn = (getattr(df, "attrs", None) or {}).get("gpu_turn") or {}
    return bool(turn.get("contended_by"))


def _usable(hit) -> bool:
    """A session hit to answer with: any but a contended one while the GPU is free again."""
    if hit is None:
        return False
    if not contended(hit):
        return True
    from ..gpu import contention, lock

    return bool(contention.busy_now(members=lock.members))


def _store(key: str, df) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = df
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def is_cached(name: str, **kwargs) -> bool:
    """Whether `data(name, **kwargs)` would be answered without measuring: from this session's
    results or (live) from this GPU's own recording on disk (`labkit.store.localcache`)."""
    if _has(_key(name, kwargs)):
        return True
    from .. import env
    from ..store import localcache

    if not env.mode().live:
        return False
    request = experiments.request_of(name, **kwargs)
    return any(
        store is not None and store.has(name, request)
        for store in (localcache.current(), localcache.shared())
    )


def _live(name: str, kwargs: dict, force: bool = False, save: bool = True):
    """Live: this GPU's saved result for the call (unless ``force``): the learner's own cache,
    then the class's shared recording (``LABKIT_SHARED_CACHE``); else measure it now and
    (``save``) save it in the learner's own cache (`labkit.store.localcache`). The caller holds the
    prefetch lock (`labkit.session.prefetch`)."""
    import time

    from ..store import localcache

    request = experiments.request_of(name, **kwargs)
    if not force:
        for store in (localcache.current(), localcache.shared()):
            df = store.get(name, request) if store is not None else None
            if df is not None:
                return experiments.with_model(name, df)
    t0 = time.perf_counter()
    df = _experiment(name)(**kwargs)
    seconds = time.perf_counter() - t0
    df.attrs["measured_at"] = localcache.now()
    df.attrs["measure_seconds"] = seconds
    if save:
        _save(df)
    return df


def _save(df) -> None:
    """Save a live result measured now in this GPU's recording (no-op when it came from there,
    or when there is none)."""
    from ..store import localcache

    store = localcache.current()
    if store is None or "saved_in" in df.attrs or contended(df):
        return
    path = store.put(df.attrs["experiment"], df.attrs["request"], df, df.attrs.get("measure_seconds"))
    if path is not None:
        df.attrs["saved_in"] = str(path)


def _keep(key: str, df) -> None:
    """Keep a result the prefetch worker measured undisturbed: this session and disk."""
    _save(df)
    _store(key, df)


def data(name: str, force: bool = False, recording: Optional[str] = None, **kwargs):
    """The DataFrame of experiment ``name`` for ``kwargs``: looked up (recorded), or live: from
    this session's results, then this GPU's own recording on disk (`labkit.store.localcache`: saved
    by any earlier session on this machine identity), else measured now and saved. ``force=True``
    measures again (and replaces the saved result). Raises what the experiment raises
    (`RecordedDataError` for a request that was not recorded). ``recording``: answer from that
    shipped recording (a folder name under data/recordings, e.g. ``"h200"``), in any mode.

    Live, the measurement holds the GPU lock shared with the prefetch worker
    (`labkit.session.prefetch`): a prefetch job for another request stops; one for this request is
    waited for and its result used."""
    from .. import env

    key = _key(name, kwargs)
    if recording is not None:
        from ..store import recordings

        key = f"{recording}/{key}"
        hit = _cached(key)
        if hit is None:
            hit = experiments.core.from_recording(name, recordings.named(recording), **kwargs)
            _store(key, hit)
        return hit
    if not force:
        hit = _cached(key)
        if _usable(hit):
            return hit
    fn = _experiment(name)
    if not env.mode().live:
        df = fn(**kwargs)
    else:
        from .prefetch import PREFETCHER

        with PREFETCHER.foreground(key):
            hit = None if force else _cached(key)  # the worker may have just measured it
            if _usable(hit):
                return hit
            df = _live(name, kwargs, force)
        if contended(df):  # shown marked; measured again in the background once the kernel is idle
            PREFETCHER.want([(key, lambda: _live(name, dict(kwargs), force=True, save=False))], _keep, _has)
    _store(key, df)
    return df


def prefetch(name: str, requests) -> int:
    """Live: measure experiment ``name`` for each kwargs dict in ``requests`` (in that order) in
    the background while the kernel is idle, ahead of what was queued before (`labkit.session.prefetch`);
    a request saved in this GPU's recording is read from disk instead. Requests already
    answered, or invalid, are skipped. Returns how many were queued; 0 in recorded mode (a lookup
    is already fast) or with ``LABKIT_PREFETCH=0``."""
    from .. import env
    from .prefetch import PREFETCHER

    _experiment(name)
    if not env.mode().live:
        return 0
    jobs, seen = [], set()
    for kwargs in requests:
        try:
            key = _key(name, kwargs)
        except (LabkitError, TypeError, ValueError):
            continue
        if key not in seen:
            seen.add(key)
            jobs.append((key, lambda kw=dict(kwargs): _live(name, kw, save=False)))
    return PREFETCHER.want(jobs, _keep, _has)


def forget() -> None:
    """Drop every cached result (the next `data` call measures or looks up again) and any
    queued prefetch jobs."""
    from .prefetch import PREFETCHER

    PREFETCHER.clear()
    with _CACHE_LOCK:
        _CACHE.clear()


def base(**changes):
    """The lessons' base convolution (`experiments.BASE`), with ``changes`` applied."""
    return experiments.BASE.replace(**changes) if changes else experiments.BASE


# ---- display helpers ----------------------------------------------------------------------------
#: lesson -> the experiments its charts, panels and checks draw (the banner names where each was
#: measured; tests/test_provenance.py checks every notebook against this table)
DRAWS = {
    "00": ("layout", "kernels", "precision"),
    "01": ("algorithms", "workspace_sizes", "sweep", "kernels"),
    "02": ("strategies", "workspace_sizes"),
    "03": ("precision", "plans", "kernels", "layout", "roofline"),
    "04": ("fusion", "fusion_kernels"),
    "05": ("plans", "caps", "build_cost"),
    "06": ("race",),
    "07": (
        "plans",
        "precision",
        "layout",
        "fusion",
        "caps",
        "algorithms",
        "build_cost",
        "workspace_sizes",
        "strategies",
        "sweep",
        "roofline",
        "race",
    ),
    "08": ("roofline", "fusion", "sweep", "plans", "precision"),
    "09": ("network_report",),
    "10": ("kernels", "fusion_kernels", "strategy_timeline", "race_timeline", "build_log"),
}


def banner(lesson: Optional[str] = None) -> Text:
    """Which mode labkit is in and where this lesson's numbers come from.

    Args:
        lesson: the lesson's number (``"03"``); recorded, the banner then names the GPU, cuDNN
            and the date of every experiment the lesson draws (`DRAWS`), and any that another
            GPU's recording answers.

    Returns:
        Markdown text, e.g. "Mode: recorded. This lesson's numbers were measured on NVIDIA
        H100 80GB HBM3 with cuDNN 9.19.0 ...: precision on 2026-11-22 ...".
    """
    from .. import env
    from . import handson, warmup

    if lesson is not None and lesson not in DRAWS:
        raise InvalidSpec("lesson", lesson, f"must be one of {', '.join(DRAWS)}")
    warmup.start_imports()  # the first chart's imports while the learner reads: before the GPU question
    handson.register_magic()  # %%handson cells (labkit.session.handson)
    m = env.mode()  # (imports CuPy and the cuDNN frontend, initialises CUDA)
    warmup.start(m.live)  # live: CUDA's and cuDNN's set-up too
    if m.live:
        e = env.environment()
        workers = start_build_workers()
        helpers = (
            f" {workers} worker processes are starting in the background: they compile the plans cuDNN "
            "builds at run time, in parallel, while this kernel times on the GPU."
            if workers
            else ""
        )
        return Text(
            f"**Mode: live on {e.gpu_name}** (cuDNN {e.cudnn_backend}, frontend {e.cudnn_frontend}, "
            f"CuPy {e.cupy_version}). Every chart is measured on this GPU when it is drawn.{helpers}"
            + class_gpu_text()
        )
    return Text(
        f"**Mode: recorded.** {recorded_sources(lesson)} Why not live: {m.reason}." + class_gpu_text()
    )


def recorded_sources(lesson: Optional[str] = None) -> str:
    """Recorded mode: where a lesson's numbers come from, one sentence per recording (GPU, cuDNN,
    the date of each experiment); for no lesson, the recording in use.

    Args:
        lesson: the lesson's number, a key of `DRAWS`, or None.

    Returns:
        Markdown sentences.
    """
    from ..store import recordings

    rec = recordings.current()
    if lesson is None:
        md = rec.metadata
        return (
            f"Numbers come from the recording made on **{md.get('gpu')}** with cuDNN "
            f"{md.get('cudnn_backend')} (frontend {md.get('cudnn_frontend')}, CuPy {md.get('cupy')}), last "
            f"updated {md.get('date')}; each chart gives the date it was measured. Controls offer only "
            "recorded values."
        )
    if lesson == "08":
        shipped = recordings.shipped()
        return (
            f"This lesson compares {len(shipped)} recordings side by side ("
            + "; ".join(_dated(r, DRAWS[lesson]) for r in shipped)
            + "). Controls offer only recorded values."
        )
    own, other, absent = [], {}, []
    for name in DRAWS[lesson]:
        if name in rec.experiments():
            own.append(name)
        panel = recordings.for_experiment(name)
        if name not in panel.experiments():
            absent.append(name)
        elif panel.path != rec.path or name not in rec.experiments():
            other.setdefault(panel.path, (panel, []))[1].append(name)
    parts = []
    if own:
        parts.append(f"This lesson's numbers were measured on {_dated(rec, own)}.")
    for r, names in other.values():
        missing = [n for n in names if n not in rec.experiments()]
        if missing:
            parts.append(
                f"{_joined(missing)} come{'s' if len(missing) == 1 else ''} from another GPU's recording, "
                f"{_dated(r, names)}: the {_short(rec)} recording has none."
            )
        else:
            parts.append(
                f"The {_joined(names)} panel answers from {_dated(r, names)}, which holds more of its calls; "
                "its GPU list offers both."
            )
    if absent:
        parts.append(f"This recording has no {_joined(absent)}: pick another GPU's recording to see them.")
    return " ".join(parts) + " Controls offer only recorded values."


def _joined(names) -> str:
    """``a``, ``a and b``, ``a, b and c`` (names in code style)."""
    names = [f"`{n}`" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _short(rec) -> str:
    return str(rec.metadata.get("gpu")).replace("NVIDIA ", "", 1)


def _dated(rec, names) -> str:
    """``**GPU** with cuDNN x (frontend y, CuPy z): a and b on <date>, c on <date>``."""
    md = rec.metadata
    by_date: dict = {}
    for n in names:
        if n in rec.experiments():
            by_date.setdefault(rec.provenance(n)["date"], []).append(n)
    when = ", ".join(f"{_joined(ns)} on {d}" for d, ns in sorted(by_date.items()))
    return (
        f"**{md.get('gpu')}** with cuDNN {md.get('cudnn_backend')} (frontend {md.get('cudnn_frontend')}, "
        f"CuPy {md.get('cupy')}): {when}"
    )


def start_build_workers() -> int:
    """Live: start the worker processes that build runtime-compiled plans (`labkit.gpu.builds`)
    in the background, so they are ready when the first chart needs them; at once. Returns how
    many (0 in recorded mode, with ``LABKIT_BUILD_WORKERS=0``, or in a class: there the class's
    shared recording answers most panels, and the workers start with the first plan a learner's
    own measurement builds, `labkit.gpu.build_pool.in_class`)."""
    from .. import env

    if not env.mode().live:
        return 0
    from ..gpu import build_pool

    if build_pool.in_class():
        return 0
    pool = build_pool.start_workers()
    return pool.size if pool is not None else 0


def mode_note(full: bool = False) -> Text:
    """What recorded and live mode mean for the panels below.

    Args:
        full: the whole note (lesson 00, where a learner meets the panels); otherwise one line
            that points there.

    Returns:
        Markdown text.
    """
    if not full:
        return Text(
            "> **Panels**: recorded, a control offers only the values measured around the lesson's base, one "
            "factor at a time (*reset to base* to move another); live, every change measures on your GPU. "
            "[Lesson 00](00_start_here.ipynb) says more."
        )
    return Text(
        "> **Recorded or live?** The banner above says which. **Recorded**: every number comes from a real "
        "run on the GPU it names, and a control offers only the values recorded around the lesson's base "
        "(one factor at a time; *reset to base* to move another). **Live**: every chart is measured on your "
        "GPU when you move a control and saved in this GPU's own recording, so a value measured once (here, "
        "in another notebook or before a kernel restart) comes back at once, marked with when it was "
        "measured (*measure again* redoes it). A chart that needs many measurements fills in as they arrive, "
        "and moving a control again stops the one running. While you read, the panel measures the values one "
        "step away in the background (`LABKIT_PREFETCH=0` turns that off); `python -m labkit fill` measures "
        "every lesson's values ahead. The **GPU** picker of every panel switches to another GPU's recording "
        "(and back to this GPU, live)."
    )


def contents() -> Text:
    """The lesson list, with links."""
    rows = ["| notebook | question |", "| --- | --- |"]
    rows += [f"| [{n}]({n}.ipynb) | {q} |" for n, q in LESSONS]
    return Text("\n".join(rows))


def show_source(module: str, *names: str) -> Text:
    """The source of functions, classes or methods in a labkit module, read from its file (the
    module is not imported, so this works without CuPy), as a Python code block.

    Args:
        module: the module, e.g. ``"gpu.frontend"`` or ``"workspace"`` (a file in labkit/ or one
            of its folders).
        names: top-level names (``"time_plan"``) or ``"Class.method"``.

    Returns:
        Markdown text: one code block holding each definition, in the order asked.
    """
    here = Path(__file__).resolve().parents[1]  # labkit/
    rel = module.replace(".", "/")
    path = next((p for p in [here / f"{rel}.py", *sorted(here.glob(f"*/{rel}.py"))] if p.is_file()), None)
    if path is None:
        raise InvalidSpec(
            "module",
            module,
            "must name a file in labkit/ or one of its folders (e.g. 'workspace', 'gpu.workspace')",
        )
    src = path.read_text()
    tree = ast.parse(src)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    found = {}
    for node in tree.body:
        if isinstance(node, defs):
            found[node.name] = ast.get_source_segment(src, node, padded=True)
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, defs):
                        found[f"{node.name}.{sub.name}"] = textwrap.dedent(
                            ast.get_source_segment(src, sub, padded=True)
                        )
    missing = [n for n in names if n not in found]
    if missing:
        raise InvalidSpec("names", missing, f"not defined in {path.relative_to(here.parent)}")
    return Text("```python\n" + "\n\n".join(found[n] for n in names) + "\n```")


def request_text(df) -> str:
    """The request behind a DataFrame as JSON (for the curious)."""
    return json.dumps(df.attrs.get("request"), sort_keys=True)


def chart(df):
    """The chart for any experiment's DataFrame (by ``attrs['experiment']``): `labkit.experiments.chart`."""
    return experiments.chart(df)


def summary(df) -> Optional[Text]:
    """The summary for any experiment's DataFrame (by ``attrs['experiment']``); None for a
    DataFrame that names no experiment."""
    if (getattr(df, "attrs", {}) or {}).get("experiment") not in experiments.SUMMARIES:
        return None
    return experiments.summary(df)


def _session_result(name: str, at_hand_only: bool, **kwargs):
    """`experiments.core.result`'s source while lessons are in use: this session's results (and,
    live, this GPU's saved ones), so a summary or check never measures what a chart already has."""
    if at_hand_only and not is_cached(name, **kwargs):
        from .. import env

        if env.mode().live:
            return None
    return data(name, **kwargs)


experiments.core.set_result_source(_session_result)
