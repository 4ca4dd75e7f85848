"""Small helpers the lesson notebooks call: the mode banner, the lesson list, experiment results
shared by a notebook's prose, charts and checks, and summaries whose every number is formatted
from those results at run time (no measured number is ever written into a notebook).

``data(name, **kwargs)`` runs (live) or looks up (recorded) an experiment once per session and
request; the panels (`labkit.widgets`) and the checks (`labkit.check`) use the same results, so
in live mode a notebook measures each request once and its text, charts and checks agree.
"""
from __future__ import annotations

import ast
import html
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Optional

from . import plots
from .errors import InvalidSpec, LabkitError
from .plots import fmt_bytes, fmt_us

LESSONS = (
    ("00_start_here", "What is on this machine, which mode am I in, how do the panels work?"),
    ("01_what_is_a_workspace", "What is a workspace, who asks for it, how big is it, what does it buy?"),
    ("02_workspace_strategies", "The workspace strategies side by side: time, peak memory, allocations."),
    ("03_precision_and_layout", "fp32 / tf32 / fp16 / bf16 / fp8 and NCHW / NHWC: error, speed, workspace, roofline."),
    ("04_fusion", "Convolution + bias + activation as one graph: what fusion saves."),
    ("05_plans_autotune_and_caching", "Many plans per problem: autotuning them, capping workspace, caching the build."),
    ("06_streams_and_scratchpads", "Several streams, one workspace: races, and a scratchpad per stream."),
    ("07_lab", "Open lab: your own convolution, every chart, every knob, CSV export."),
)

_CACHE: "OrderedDict[str, object]" = OrderedDict()
#: results kept per session (DataFrames of a few KiB; prefetching adds ~20 per panel move)
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


# ---- results ------------------------------------------------------------------------------------
def _experiment(name: str):
    """The experiment function called ``name``; `InvalidSpec` for an unknown name."""
    from . import experiments

    fns = experiments.registry()
    if name not in fns:
        raise InvalidSpec("experiment", name, f"must be one of {', '.join(sorted(fns))}")
    return fns[name]


def _key(name: str, kwargs: dict) -> str:
    from . import experiments

    _experiment(name)
    return f"{name}:{experiments.request_key(experiments.request_of(name, **kwargs))}"


def _cached(key: str):
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    return None


def _has(key: str) -> bool:
    with _CACHE_LOCK:
        return key in _CACHE


def _store(key: str, df) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = df
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def is_cached(name: str, **kwargs) -> bool:
    """Whether `data(name, **kwargs)` would be answered without measuring: from this session's
    results or (live) from this GPU's own recording on disk (`labkit.localcache`)."""
    if _has(_key(name, kwargs)):
        return True
    from . import env, experiments, localcache

    if not env.mode().live:
        return False
    store = localcache.current()
    return store is not None and store.has(name, experiments.request_of(name, **kwargs))


def _live(name: str, kwargs: dict, force: bool = False, save: bool = True):
    """Live: this GPU's saved result for the call (unless ``force``), else measure it now and
    (``save``) save it (`labkit.localcache`). The caller holds the GPU lock."""
    import time

    from . import experiments, localcache

    store = localcache.current()
    request = experiments.request_of(name, **kwargs)
    if store is not None and not force:
        df = store.get(name, request)
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
    from . import localcache

    store = localcache.current()
    if store is None or "saved_in" in df.attrs:
        return
    path = store.put(df.attrs["experiment"], df.attrs["request"], df, df.attrs.get("measure_seconds"))
    if path is not None:
        df.attrs["saved_in"] = str(path)


def _keep(key: str, df) -> None:
    """Keep a result the prefetch worker measured undisturbed: this session and disk."""
    _save(df)
    _store(key, df)


def data(name: str, force: bool = False, **kwargs):
    """The DataFrame of experiment ``name`` for ``kwargs``: looked up (recorded), or live: from
    this session's results, then this GPU's own recording on disk (`labkit.localcache`: saved
    by any earlier session on this machine identity), else measured now and saved. ``force=True``
    measures again (and replaces the saved result). Raises what the experiment raises
    (`RecordedDataError` for a request that was not recorded).

    Live, the measurement holds the GPU lock shared with the prefetch worker
    (`labkit.prefetch`): a prefetch job for another request stops; one for this request is
    waited for and its result used."""
    from . import env

    key = _key(name, kwargs)
    if not force:
        hit = _cached(key)
        if hit is not None:
            return hit
    fn = _experiment(name)
    if not env.mode().live:
        df = fn(**kwargs)
    else:
        from .prefetch import PREFETCHER

        with PREFETCHER.foreground(key):
            hit = None if force else _cached(key)  # the worker may have just measured it
            if hit is not None:
                return hit
            df = _live(name, kwargs, force)
    _store(key, df)
    return df


def prefetch(name: str, requests) -> int:
    """Live: measure experiment ``name`` for each kwargs dict in ``requests`` (in that order) in
    the background while the kernel is idle, ahead of what was queued before (`labkit.prefetch`);
    a request saved in this GPU's recording is read from disk instead. Requests already
    answered, or invalid, are skipped. Returns how many were queued; 0 in recorded mode (a lookup
    is already fast) or with ``LABKIT_PREFETCH=0``."""
    from . import env
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
    from .experiments import BASE

    return BASE.replace(**changes) if changes else BASE


def race_all():
    """Every race the lessons use (graph and Python launch on 2 streams, graph on 4) as one DataFrame."""
    frames = [data("race", launch=la, streams=st, min_runs=1024) for la, st in (("graph", 2), ("python", 2), ("graph", 4))]
    return plots.concat(frames)


# ---- display helpers ----------------------------------------------------------------------------
class Text(str):
    """A string shown as Markdown in a notebook (and as itself anywhere else)."""

    def _repr_markdown_(self) -> str:
        return str(self)


def banner() -> Text:
    """Which mode labkit is in and where the numbers come from, e.g. "recorded on NVIDIA H100
    80GB HBM3 with cuDNN 9.19.0 on 2026-11-22", or "live on <GPU>"."""
    from . import env

    m = env.mode()
    if m.live:
        e = env.environment()
        return Text(f"**Mode: live on {e.gpu_name}** (cuDNN {e.cudnn_backend}, frontend {e.cudnn_frontend}, "
                    f"CuPy {e.cupy_version}). Every chart is measured on this GPU when it is drawn.")
    from . import recordings

    md = recordings.current().metadata
    return Text(f"**Mode: recorded on {md.get('gpu')} with cuDNN {md.get('cudnn_backend')} on {md.get('date')}** "
                f"(frontend {md.get('cudnn_frontend')}, CuPy {md.get('cupy')}). Why not live: {m.reason}. "
                "Every number below was measured on that GPU; controls offer only recorded values.")


def mode_note() -> Text:
    """What recorded and live mode mean for the panels below (shown under a lesson's first
    panel; one text for every lesson)."""
    return Text(
        "> **Recorded or live?** The banner above says which. **Recorded**: every number comes from a real run "
        "on the GPU it names, and a control offers only the values recorded around the lesson's base (one factor "
        "at a time; *reset to base* to move another). **Live**: every chart is measured on your GPU when you move "
        "a control and saved in this GPU's own recording, so a value measured once (here, in another notebook or "
        "before a kernel restart) comes back at once, marked with when it was measured (*measure again* redoes "
        "it). A chart that needs many measurements fills in as they arrive, and moving a control again stops the "
        "one running. While you read, the panel measures the values one step away in the background "
        "(`LABKIT_PREFETCH=0` turns that off); `python -m labkit fill` measures every lesson's values ahead.")


def contents() -> Text:
    """The lesson list, with links."""
    rows = ["| notebook | question |", "| --- | --- |"]
    rows += [f"| [{n}]({n}.ipynb) | {q} |" for n, q in LESSONS]
    return Text("\n".join(rows))


def show_source(module: str, *names: str) -> Text:
    """The source of functions in a labkit module, read from its file (the module is not
    imported, so this works without CuPy)."""
    here = Path(__file__).resolve().parent
    path = next((p for p in (here / f"{module}.py", here / "gpu" / f"{module}.py") if p.is_file()), None)
    if path is None:
        raise InvalidSpec("module", module, "must name a file in labkit/ or labkit/gpu/")
    src = path.read_text()
    tree = ast.parse(src)
    found = {n.name: ast.get_source_segment(src, n) for n in tree.body
             if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names}
    missing = [n for n in names if n not in found]
    if missing:
        raise InvalidSpec("names", missing, f"not defined at the top level of {path.relative_to(here.parent)}")
    return Text("```python\n" + "\n\n".join(found[n] for n in names) + "\n```")


def table(df, columns, names=None) -> Text:
    """A few columns of a DataFrame as a Markdown table, sizes and times formatted."""
    names = names or columns
    rows = ["| " + " | ".join(names) + " |", "|" + " --- |" * len(columns)]
    for _, r in df.iterrows():
        cells = []
        for c in columns:
            v = r.get(c)
            if c.endswith("_bytes"):
                cells.append(fmt_bytes(v))
            elif c.endswith("_us"):
                cells.append(fmt_us(v))
            elif isinstance(v, float):
                cells.append(f"{v:.3g}")
            else:
                cells.append(html.escape(str(v)))
        rows.append("| " + " | ".join(cells) + " |")
    return Text("\n".join(rows))


def _ok(df):
    return df[df["status"] == "ok"] if "status" in df.columns else df


def _where(df) -> str:
    a = df.attrs
    return f"{a.get('mode')} on {a.get('gpu')}"


# ---- lesson 01 ---------------------------------------------------------------------------------
def algorithms_summary(df) -> Text:
    ok = df[df["find_status"] == "ok"]
    fast = ok.loc[ok["time_us"].idxmin()]
    zero = ok[ok["query_workspace_bytes"] == 0]
    bad = df[df["find_status"] != "ok"]
    spec = plots.request_spec(df)
    text = (f"For {spec.label} ({_where(df)}), cuDNN's Find ranks **{fast.algorithm}** first: "
            f"{fmt_us(fast.time_us)} with a workspace of {fmt_bytes(fast.query_workspace_bytes)}.")
    if not zero.empty:
        z = zero.loc[zero["time_us"].idxmin()]
        text += (f" The best algorithm that needs no workspace, {z.algorithm}, takes {fmt_us(z.time_us)}: "
                 f"{z.time_us / fast.time_us:.1f}x slower. That ratio is what the workspace buys here.")
    if len(bad):
        text += f" {len(bad)} of {len(df)} algorithms are not supported for this dtype and layout."
    text += (" These times are Find's own: one run of each algorithm through the legacy API, as a ranking, not the "
             "steady-state time of a kernel.")
    frontend = _frontend_time(spec)
    if frontend is not None:
        text += (f" The same convolution through the cuDNN frontend (its heuristic plan), timed as the median of CUDA-graph "
                 f"replays (how "
                 f"every other chart times, e.g. lesson 00's layout table), takes {fmt_us(frontend)} "
                 f"({_where(df)}).")
    return Text(text)


def _frontend_time(spec) -> Optional[float]:
    """The heuristic frontend plan's CUDA-graph median for ``spec`` from the layout experiment,
    when it is at hand without measuring (recorded, or already measured this session); else None."""
    from . import env

    if spec is None:
        return None
    for s in (spec, spec.replace(layout="NHWC" if spec.layout == "NCHW" else "NCHW")):  # it runs both layouts
        try:
            if env.mode().live and not is_cached("layout", spec=s):
                continue
            lay = _ok(data("layout", spec=s))
            row = lay[lay["layout"] == spec.layout]
            if len(row):
                return float(row["conv_gpu_us"].iloc[0])
        except (LabkitError, KeyError, IndexError):
            continue
    return None


def workspace_sizes_summary(df) -> Text:
    ok = _ok(df)
    hi = ok.loc[ok["heuristic_workspace_bytes"].idxmax()]
    lo = ok.loc[ok["heuristic_workspace_bytes"].idxmin()]
    spread = ok["max_workspace_bytes"].max()
    spec = plots.request_spec(df)
    return Text(
        f"One shape ({plots.shape_label(spec)}), {len(ok)} variants of dtype x layout x direction ({_where(df)}). "
        f"The heuristic plan asks for anything from **{fmt_bytes(lo.heuristic_workspace_bytes)}** "
        f"({lo['dtype']} {lo['layout']} {lo['direction']}) to **{fmt_bytes(hi.heuristic_workspace_bytes)}** "
        f"({hi['dtype']} {hi['layout']} {hi['direction']}); the hungriest candidate plan of any variant wants "
        f"{fmt_bytes(spread)}. Same dims, very different workspaces.")


def sweep_summary(df) -> Text:
    ok = _ok(df)
    f = str(df["field"].iloc[0])
    first, last = ok.iloc[0], ok.iloc[-1]
    ws_max = ok.loc[ok["workspace_bytes"].idxmax()]
    return Text(
        f"From {f}={first.value} to {f}={last.value} the GPU time goes from {fmt_us(first.gpu_us)} to "
        f"{fmt_us(last.gpu_us)} ({last.gpu_us / first.gpu_us:.0f}x) and the FLOPs {last.flops / first.flops:.0f}x; "
        f"throughput goes from {first.tflops:.0f} to {last.tflops:.0f} TFLOP/s. The largest workspace, "
        f"{fmt_bytes(ws_max.workspace_bytes)}, is at {f}={ws_max.value} ({ws_max.plan_name}); the heuristic changes "
        f"plan {ok['plan_name'].nunique() - 1} time(s) along the way.")


# ---- lesson 02 ---------------------------------------------------------------------------------
def _strategy(df, name):
    rows = df[df["strategy"].str.split(" ").str[0] == name]
    return rows.iloc[0] if len(rows) else None


def strategies_summary(df) -> Text:
    ok = _ok(df)
    m = _strategy(ok, "malloc_per_call")
    a = _strategy(ok, "fixed_arena")
    fast = ok.loc[ok["median_us"].idxmin()]
    wl = df["workload"].iloc[0]
    parts = [f"Workload **{wl}** ({int(df['calls'].iloc[0])} calls per strategy after a warm-up pass, {_where(df)})."]
    if m is not None and a is not None:
        parts.append(f"Host time per call: {m.median_us:.0f} us for malloc per call vs {a.median_us:.0f} us for the fixed arena "
                     f"({m.median_us / a.median_us:.1f}x).")
        if "strategy_us_per_call" in ok.columns:
            parts.append(f"Inside the strategy alone (its get and put): {m.strategy_us_per_call:.1f} us vs "
                         f"{a.strategy_us_per_call:.1f} us per call.")
        parts.append(f"malloc_per_call made {int(m.alloc_calls)} cudaMalloc calls in the timed pass "
                     f"({m.alloc_us_total / 1000:.1f} ms inside cudaMalloc/cudaFree); the arena made {int(a.alloc_calls)}"
                     + (" (its one allocation happened in the warm-up pass)" if "warmup_alloc_calls" in ok.columns
                        and a.warmup_alloc_calls > 0 and a.alloc_calls == 0 else "") + ".")
        pools = [r for _, r in ok.iterrows() if plots.allocator_of(r.strategy) != "cudaMalloc" and r.alloc_calls]
        if pools:
            parts.append(", ".join(f"{r.strategy} {int(r.alloc_calls)}" for r in pools)
                         + ": those count requests to the pool, not cudaMalloc calls (the pool serves most from blocks "
                           "it keeps; how many reached the driver was not counted).")
        if "gpu_us" in ok.columns:
            parts.append(f"GPU wall time per call (two events around the run, over the calls): {m.gpu_us:.0f} us for "
                         f"malloc per call vs {a.gpu_us:.0f} us for the arena; the difference is not kernel time but the "
                         "GPU idling while the host frees and allocates (each cudaFree waits for the GPU).")
        parts.append(f"The arena pays in memory instead: it holds {fmt_bytes(a.peak_bytes)} for a workload whose "
                     f"largest workspace is {fmt_bytes(m.peak_bytes)}.")
    parts.append(f"Lowest median per call: {fast.strategy} ({fast.median_us:.0f} us).")
    return Text(" ".join(parts))


def pressure_summary(df) -> Text:
    ok = _ok(df)
    calls = int(df["calls"].iloc[0])
    fell = ok[ok["fallbacks"] > 0]
    held = ok[ok["fallbacks"] == 0]
    parts = [f"Workload **{df['workload'].iloc[0]}** ({_where(df)}): {calls} calls with almost no device memory free."]
    if len(fell):
        parts.append(f"{len(fell)} of {len(ok)} strategies could not get the workspace the best plan wants and fell back "
                     f"to a plan needing less ({', '.join(f'{r.strategy}: {int(r.fallbacks)}' for _, r in fell.iterrows())} "
                     "fallbacks).")
    for _, r in held.iterrows():
        parts.append(f"{r.strategy} never fell back (its memory was taken before the pressure began): "
                     f"{fmt_us(r.median_us)} per call, holding {fmt_bytes(r.peak_bytes)}.")
    bad = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    if len(bad):
        parts.append(f"{len(bad)} failed: " + "; ".join(f"{r.strategy}: {r.reason}" for _, r in bad.iterrows()))
    slow = ok.loc[ok["median_us"].idxmax()]
    fast = ok.loc[ok["median_us"].idxmin()]
    parts.append(f"Per call: from {fmt_us(fast.median_us)} ({fast.strategy}) to {fmt_us(slow.median_us)} "
                 f"({slow.strategy}, {slow.median_us / fast.median_us:.0f}x).")
    return Text(" ".join(parts))


def dims_only_summary(df) -> Text:
    """What a dims-only key would hand out: same dims, different workspaces (from workspace_sizes)."""
    ok = _ok(df)
    fp = ok[ok["direction"] == "fprop"].sort_values("heuristic_workspace_bytes")
    lo, hi = fp.iloc[0], fp.iloc[-1]
    return Text(
        f"All {len(ok)} variants below have the **same dims-only key**, yet their heuristic plans ask for "
        f"{fmt_bytes(ok['heuristic_workspace_bytes'].min())} to {fmt_bytes(ok['heuristic_workspace_bytes'].max())}. "
        f"Among forward convolutions alone: if {lo['dtype']} {lo['layout']} runs first, a dims-only cache stores "
        f"{fmt_bytes(lo.heuristic_workspace_bytes)}; when {hi['dtype']} {hi['layout']} arrives with the same dims it gets "
        f"that buffer back and needs {fmt_bytes(hi.heuristic_workspace_bytes)}: "
        f"{fmt_bytes(hi.heuristic_workspace_bytes - lo.heuristic_workspace_bytes)} short. Handed to cuDNN, that buffer "
        "would be written past its end (labkit's Runner checks the size and refuses; a real cache that trusts its key "
        "does not).")


# ---- lesson 03 ---------------------------------------------------------------------------------
def precision_summary(df) -> Text:
    ok = _ok(df).set_index("dtype")
    parts = [f"{_where(df)}:"]
    for d, r in ok.iterrows():
        parts.append(f"**{d}** {fmt_us(r.gpu_us)} ({r.tflops:.0f} TFLOP/s), error {r.rel_error:.1e} from the arithmetic, "
                     f"{r.rel_error_vs_fp64_inputs:.1e} in total;")
    if "fp32" in ok.index and "fp16" in ok.index:
        parts.append(f"fp16 is {ok.loc['fp32', 'gpu_us'] / ok.loc['fp16', 'gpu_us']:.1f}x faster than true fp32 here.")
    if "fp8_e4m3" in ok.index:
        r = ok.loc["fp8_e4m3"]
        fp16 = f" (fp16: {ok.loc['fp16', 'rel_error']:.1e})" if "fp16" in ok.index else ""
        parts.append(f"fp8's arithmetic error is {r.rel_error:.1e}{fp16}, but rounding the inputs to fp8 makes its total "
                     f"error {r.rel_error_vs_fp64_inputs / r.rel_error:.0f}x its arithmetic error.")
    return Text(" ".join(parts))


def layout_summary(df) -> Text:
    ok = _ok(df).set_index("layout")
    n, h = ok.loc["NCHW"], ok.loc["NHWC"]
    verdict = ("converting pays off even for one convolution" if h.end_to_end_us < n.end_to_end_us
               else "for a user whose tensors are NCHW, converting for one convolution does not pay off")
    return Text(
        f"{_where(df)}: the convolution takes {fmt_us(n.conv_gpu_us)} in NCHW (workspace {fmt_bytes(n.workspace_bytes)}) "
        f"and {fmt_us(h.conv_gpu_us)} in NHWC (workspace {fmt_bytes(h.workspace_bytes)}): "
        f"{n.conv_gpu_us / h.conv_gpu_us:.1f}x faster. Converting NCHW tensors to NHWC and back costs "
        f"{fmt_us(h.convert_gpu_us)}: NHWC end to end is {fmt_us(h.end_to_end_us)}, and {verdict}. "
        "Keep the whole network in NHWC and the conversion disappears.")


def roofline_summary(df) -> Text:
    ok = _ok(df)
    best = ok.loc[ok["tflops"].idxmax()]
    worst = ok.loc[ok["tflops"].idxmin()]
    peak = plots._first(df, "peak_tflops")
    text = (f"{_where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}: the best shape, {best['shape']}, reaches "
            f"{best.tflops:.0f} TFLOP/s; the worst, {worst['shape']}, {worst.tflops:.0f} TFLOP/s.")
    if peak:
        text += (f" Against the datasheet peak of {peak:.0f} TFLOP/s that is {best.tflops / peak:.0%} at best, even for "
                 "shapes whose intensity is past the ridge: these are small GEMMs that do not fill the tensor cores, "
                 "and the roof is a bound, not a promise.")
    else:
        gpu = (getattr(df, "attrs", {}) or {}).get("gpu") or "this GPU"
        text += f" No roof is drawn: no ceilings known for {gpu} ({df['dtype'].iloc[0]}) in labkit.ceilings."
    return Text(text)


# ---- lesson 04 ---------------------------------------------------------------------------------
def fusion_summary(df) -> Text:
    ok = _ok(df)
    parts = [f"{_where(df)}, {df['dtype'].iloc[0]} {df['layout'].iloc[0]}:"]
    for epi in dict.fromkeys(ok["epilogue"]):
        sub = ok[ok["epilogue"] == epi].set_index("path")
        if {"fused", "unfused"} <= set(sub.index):
            f, u = sub.loc["fused"], sub.loc["unfused"]
            word = "faster" if f.gpu_us < u.gpu_us else "SLOWER"
            parts.append(f"**{epi}** fused {fmt_us(f.gpu_us)} vs unfused {fmt_us(u.gpu_us)} "
                         f"({max(u.gpu_us, f.gpu_us) / min(u.gpu_us, f.gpu_us):.1f}x {word}); the unfused path allocates "
                         f"{fmt_bytes(u.intermediate_bytes)} of intermediates and moves {fmt_bytes(u.modelled_hbm_bytes)} "
                         f"through HBM against {fmt_bytes(f.modelled_hbm_bytes)} fused.")
            if "fused, autotuned" in sub.index:
                a = sub.loc["fused, autotuned"]
                n = a.get("plans_timed")
                every = ("every fused plan" if n is None or n != n else
                         "the only fused plan cuDNN built here" if int(n) == 1 else f"all {int(n)} fused plans")
                if a.plan_name == f.plan_name:
                    parts.append(f"Timing {every} confirms the heuristic's pick ({fmt_us(a.gpu_us)})"
                                 + (": no fused plan cuDNN offers here beats the unfused sequence." if a.gpu_us > u.gpu_us
                                    else "."))
                else:
                    word = "faster" if a.gpu_us < u.gpu_us else "still SLOWER"
                    parts.append(f"Timing {every} finds {a.plan_name} at {fmt_us(a.gpu_us)}: "
                                 f"{f.gpu_us / a.gpu_us:.1f}x faster than the heuristic's pick and "
                                 f"{max(u.gpu_us, a.gpu_us) / min(u.gpu_us, a.gpu_us):.1f}x {word} than unfused.")
    return Text(" ".join(parts))


# ---- lesson 05 ---------------------------------------------------------------------------------
def plans_summary(df) -> Text:
    ok = _ok(df)
    h = ok[ok["heuristic_pick"]].iloc[0]
    b = ok[ok["best"]].iloc[0]
    w = ok[ok["worst"]].iloc[0]
    spec = plots.request_spec(df)
    text = (f"{spec.label} ({_where(df)}): {len(ok)} plans timed. Heuristic pick: plan {int(h.plan_index)}, "
            f"{fmt_us(h.gpu_us)}, workspace {fmt_bytes(h.workspace_bytes)}. Fastest: plan {int(b.plan_index)}, "
            f"{fmt_us(b.gpu_us)}, workspace {fmt_bytes(b.workspace_bytes)}. Slowest: plan {int(w.plan_index)}, "
            f"{fmt_us(w.gpu_us)} ({w.gpu_us / b.gpu_us:.0f}x the fastest).")
    if h.plan_index == b.plan_index:
        text += " The heuristic got it right here: autotuning would only confirm it."
    else:
        text += f" Autotuning gains {h.gpu_us / b.gpu_us:.2f}x over the heuristic here."
    return Text(text)


def caps_summary(df) -> Text:
    ok = _ok(df)
    worst = ok.loc[ok["slowdown_vs_unlimited"].idxmax()]
    free = ok[ok["slowdown_vs_unlimited"] <= 1.05]
    cheapest = free.loc[free["cap_bytes"].replace(-1, float("inf")).idxmin()] if len(free) else None
    if worst.slowdown_vs_unlimited > 1.05:
        text = (f"{_where(df)}: the tightest caps leave {int(ok['plans_within_cap'].min())} plans and cost up to "
                f"{worst.slowdown_vs_unlimited:.1f}x (cap {plots.cap_label(worst.cap_bytes)}).")
    else:
        text = (f"{_where(df)}: even the tightest cap ({plots.cap_label(ok['cap_bytes'].replace(-1, float('inf')).min())}, "
                f"{int(ok['plans_within_cap'].min())} plans left) costs at most {worst.slowdown_vs_unlimited:.2f}x: "
                "within 5% of unlimited, timing noise included.")
    if cheapest is not None and worst.slowdown_vs_unlimited > 1.05:
        caps = sorted(c for c in ok["cap_bytes"] if c >= 0)
        below = [c for c in caps if cheapest.cap_bytes < 0 or c < cheapest.cap_bytes]
        text += (f" The best plan under a cap of {plots.cap_label(cheapest.cap_bytes)} is within 5% of unlimited, and "
                 f"it needs {fmt_bytes(cheapest.workspace_bytes)}: any cap of at least that much keeps the speed. "
                 f"{plots.cap_label(cheapest.cap_bytes)} is only the first recorded cap above it"
                 + (f" (the one below, {plots.cap_label(below[-1])}, is too small; caps in between were not measured)."
                    if below else "."))
    return Text(text)


def build_cost_summary(df) -> Text:
    s = df.set_index("stage")["seconds"]
    first = s.get("build (heuristic plan)")
    hit = s.get("labkit cache hit")
    tune = s.get("autotune (time every plan)")
    pay = plots._first(df, "calls_to_pay_off_autotune")
    spec = plots.request_spec(df)
    text = (f"{spec.label} ({_where(df)}): the first build took {plots.fmt_seconds(first)}, a cache hit "
            f"{plots.fmt_seconds(hit)} ({first / hit:,.0f}x less); autotuning every plan took {plots.fmt_seconds(tune)}.")
    if pay is None or pay == float("inf"):
        text += " The heuristic pick was already the fastest plan, so autotuning never pays for itself for this convolution."
    else:
        text += (f" It makes each call {df['heuristic_gpu_us'].iloc[0] - df['best_gpu_us'].iloc[0]:.1f} us faster, "
                 f"so it pays for itself after {pay:,.0f} calls.")
    return Text(text)


# ---- lesson 06 ---------------------------------------------------------------------------------
def _tolerance_of(label: str) -> Optional[float]:
    """`reference.tolerance_for` the spec a `ConvSpec.label` names (None if it cannot be read)."""
    import re

    from .gpu import reference
    from .spec import ConvSpec

    m = re.match(r"(\S+) (NCHW|NHWC) (\w+) (\d+)x(\d+)x(\d+)x(\d+) -> (\d+) (\d+)x(\d+) s(\d+) p(\d+)$", str(label))
    if not m:
        return None
    d, lay, di, n, c, h, w, k, r, s, st, p = m.groups()
    try:
        return reference.tolerance_for(ConvSpec(N=int(n), C=int(c), H=int(h), W=int(w), K=int(k), R=int(r), S=int(s),
                                                stride=int(st), padding=int(p), dtype=d, layout=lay, direction=di))
    except LabkitError:
        return None


def race_summary(df) -> Text:
    label = df["spec_label"].iloc[0]
    tol = _tolerance_of(label)
    dtype = str(label).split(" ")[0]
    parts = [f"{_where(df)}, {label}, workspace {fmt_bytes(df['workspace_bytes'].iloc[0])}."]
    for (la, st), sub in df.groupby(["launch", "streams"], sort=False):
        s = sub.set_index("scratchpad")
        bad, runs = int(s.loc["shared", "mismatches_bitwise"]), int(s.loc["shared", "runs"])
        err = float(s.loc["shared", "worst_rel_error"])
        if bad:
            how = (f"worst relative error {err:.2g}" + (f", {err / tol:,.0f}x the {dtype} tolerance of {tol:.0e}" if tol else ""))
        else:
            how = (f"worst relative error {err:.2g} against float64" + (f", within the {dtype} tolerance of {tol:.0e}: "
                                                                          f"{dtype} rounding, not corruption" if tol and err <= tol else ""))
        parts.append(f"**{la} launch, {st} streams**: a shared scratchpad corrupted {bad} of {runs} outputs ({how}); "
                     f"one scratchpad per stream corrupted {int(s.loc['per-stream', 'mismatches_bitwise'])}.")
    return Text(" ".join(parts))


def request_text(df) -> str:
    """The request behind a DataFrame as JSON (for the curious)."""
    return json.dumps(df.attrs.get("request"), sort_keys=True)


def summary(df) -> Optional[Text]:
    """The summary for any experiment's DataFrame (by ``attrs['experiment']``)."""
    fn = {"algorithms": algorithms_summary, "workspace_sizes": workspace_sizes_summary, "sweep": sweep_summary,
          "strategies": strategies_summary, "precision": precision_summary, "layout": layout_summary,
          "roofline": roofline_summary, "fusion": fusion_summary, "plans": plans_summary, "caps": caps_summary,
          "build_cost": build_cost_summary, "race": race_summary}.get(df.attrs.get("experiment"))
    return fn(df) if fn else None
