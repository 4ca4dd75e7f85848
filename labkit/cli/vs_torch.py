"""``python -m labkit bench vs-torch``: labkit's autotuned plan against PyTorch's pick, explained.

For each convolution of `CONVOLUTIONS` (layers of real networks, chosen to cover every shape
class where a pick is hard: depthwise and large-kernel depthwise, odd and unaligned channel counts,
asymmetric kernels, 3-channel stems, grouped and dilated, every dtype, both layouts, all three
directions), in one process on one GPU:

- **labkit's pick**: `labkit.gpu.timing.autotune.autotune` as a learner's panel runs it (pruning and
  short captures included), every plan checked against float64 first;
- **labkit's exhaustive best**: every correct plan timed to convergence, none cut;
- **PyTorch's pick**: ``torch.backends.cudnn.benchmark=True`` (channels_last for NHWC;
  ``convolution_backward`` for dgrad and wgrad);
- the pick, the exhaustive best and PyTorch each as a CUDA graph of the same number of calls,
  replayed in turns for `ROUNDS` rounds; a side's noise is the spread of its round medians;
- **the kernels each side launched**: CUPTI for every labkit plan (`labkit.gpu.timing.trace`),
  ``torch.profiler`` for PyTorch, after labkit's tracing is detached;
- **why**, for every convolution where labkit is slower: the same kernels within the noise, a
  plan autotune cut early, another plan of labkit's with PyTorch's kernels, or a kernel labkit's
  plans do not have.

PyTorch has no fp8 convolution: those rows compare labkit's pick with its exhaustive best only.
Writes data/bench/<name>.csv (one row per convolution, rewritten after each) and a .json beside it
with the run's provenance, the labkit commit and the summary. Not a timed test: a measurement to
read (``python -m labkit bench summary`` puts it in docs/benchmarks.md).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable, Dict, List, Optional, Tuple

import pandas as pd

from ..gpu.timing import trace
from ..gpu.timing.kernel_keys import kernel_key
from ..gpu.timing.trace import kernel_name
from ..spec import ConvSpec
from .bench import _write, require_torch

#: alternating rounds of replays per side (pick, exhaustive best, PyTorch)
ROUNDS = 7
#: replays per round
REPLAYS = 10
#: the most calls in a timing graph (fewer for long calls: about 2 ms of calls)
CALLS = 20
#: "within the noise": a ratio within this fraction of 1 is equal whatever the spread
FLOOR = 0.01


#: (network, layer, convolution): 48 convolutions, 45 of them in a dtype PyTorch runs (not fp8)
CONVOLUTIONS: List[Tuple[str, str, ConvSpec]] = [
    (net, layer, ConvSpec.from_label(label))
    for net, layer, label in [
        ("resnet50", "conv1 7x7/2, 3 channels", "fp32 NCHW fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "conv1 7x7/2, 3 channels", "tf32 NCHW fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "conv1 7x7/2, 3 channels", "fp16 NCHW fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "conv1 7x7/2, 3 channels", "fp16 NHWC fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "conv1 7x7/2, 3 channels", "bf16 NCHW fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "conv1 7x7/2, 3 channels", "bf16 NHWC fprop 32x3x224x224 -> 64 7x7 s2 p3"),
        ("resnet50", "layer3 3x3", "fp32 NCHW fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "tf32 NHWC fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "fp16 NHWC fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "bf16 NHWC fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "fp8_e4m3 NHWC fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "fp8_e4m3 NCHW fprop 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "fp16 NHWC dgrad 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "fp16 NHWC wgrad 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "bf16 NHWC wgrad 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer3 3x3", "tf32 NCHW dgrad 32x256x14x14 -> 256 3x3 s1 p1"),
        ("resnet50", "layer1 1x1 expand", "fp16 NHWC fprop 32x64x56x56 -> 256 1x1 s1 p0"),
        ("resnet50", "layer1 1x1 expand", "fp16 NHWC wgrad 32x64x56x56 -> 256 1x1 s1 p0"),
        ("resnet50", "layer1 1x1 expand", "fp32 NCHW fprop 32x64x56x56 -> 256 1x1 s1 p0"),
        ("resnet50", "layer1 1x1 expand", "fp8_e4m3 NHWC fprop 32x64x56x56 -> 256 1x1 s1 p0"),
        ("mobilenet_v2", "depthwise 3x3", "fp16 NHWC fprop 32x144x56x56 -> 144 3x3 s1 p1 g144"),
        ("mobilenet_v2", "depthwise 3x3", "bf16 NHWC fprop 32x144x56x56 -> 144 3x3 s1 p1 g144"),
        ("mobilenet_v2", "depthwise 3x3", "fp32 NCHW fprop 32x144x56x56 -> 144 3x3 s1 p1 g144"),
        ("mobilenet_v2", "depthwise 3x3", "fp16 NHWC dgrad 32x144x56x56 -> 144 3x3 s1 p1 g144"),
        ("mobilenet_v2", "depthwise 3x3", "fp16 NHWC wgrad 32x144x56x56 -> 144 3x3 s1 p1 g144"),
        ("mobilenet_v2", "depthwise 3x3/2", "fp16 NHWC fprop 32x96x112x112 -> 96 3x3 s2 p1 g96"),
        ("convnext_tiny", "depthwise 7x7", "fp32 NCHW fprop 32x96x56x56 -> 96 7x7 s1 p3 g96"),
        ("convnext_tiny", "depthwise 7x7", "fp16 NHWC fprop 32x96x56x56 -> 96 7x7 s1 p3 g96"),
        ("convnext_tiny", "depthwise 7x7", "bf16 NHWC fprop 32x96x56x56 -> 96 7x7 s1 p3 g96"),
        ("efficientnet_b0", "depthwise 5x5", "fp16 NHWC fprop 32x240x28x28 -> 240 5x5 s1 p2 g240"),
        ("efficientnet_b0", "depthwise 5x5", "fp32 NCHW fprop 32x240x28x28 -> 240 5x5 s1 p2 g240"),
        ("efficientnet_b0", "project 1x1 240->40", "fp16 NHWC fprop 32x240x28x28 -> 40 1x1 s1 p0"),
        ("efficientnet_b0", "project 1x1 240->40", "bf16 NHWC wgrad 32x240x28x28 -> 40 1x1 s1 p0"),
        ("hrnet_w32 (pose)", "head 1x1 -> 17 keypoints", "fp16 NHWC fprop 32x32x64x48 -> 17 1x1 s1 p0"),
        ("hrnet_w32 (pose)", "head 1x1 -> 17 keypoints", "fp32 NCHW fprop 32x32x64x48 -> 17 1x1 s1 p0"),
        ("inception_v3", "1x7", "bf16 NHWC fprop 32x128x17x17 -> 128 1x7 s1 p0,3"),
        ("inception_v3", "1x7", "fp16 NHWC fprop 32x128x17x17 -> 128 1x7 s1 p0,3"),
        ("inception_v3", "7x1", "bf16 NHWC fprop 32x128x17x17 -> 128 7x1 s1 p3,0"),
        ("inception_v3", "1x3", "fp16 NHWC fprop 32x384x8x8 -> 384 1x3 s1 p0,1"),
        ("shufflenet_v2_x1_0", "1x1, 58 channels", "fp16 NHWC fprop 32x58x28x28 -> 58 1x1 s1 p0"),
        ("shufflenet_v2_x1_0", "1x1, 58 channels", "fp32 NCHW fprop 32x58x28x28 -> 58 1x1 s1 p0"),
        (
            "shufflenet_v2_x1_0",
            "depthwise 3x3, 116 channels",
            "fp16 NHWC fprop 32x116x14x14 -> 116 3x3 s1 p1 g116",
        ),
        ("resnext50_32x4d", "grouped 3x3, 32 groups", "fp16 NHWC fprop 32x128x56x56 -> 128 3x3 s1 p1 g32"),
        ("resnext50_32x4d", "grouped 3x3, 32 groups", "fp32 NCHW fprop 32x128x56x56 -> 128 3x3 s1 p1 g32"),
        ("deeplabv3_resnet50", "ASPP 3x3 dilation 12", "fp16 NHWC fprop 8x2048x28x28 -> 256 3x3 s1 p12 d12"),
        ("deeplabv3_resnet50", "ASPP 3x3 dilation 12", "tf32 NCHW fprop 8x2048x28x28 -> 256 3x3 s1 p12 d12"),
        ("vgg16", "conv1_2 3x3", "fp16 NHWC fprop 32x64x224x224 -> 64 3x3 s1 p1"),
        ("squeezenet1_1", "fire squeeze 1x1 -> 16", "fp16 NHWC fprop 32x128x55x55 -> 16 1x1 s1 p0"),
    ]
]

COLUMNS = [
    "network",
    "layer",
    "conv",
    "ratio",
    "pick_vs_best",
    "noise",
    "same_kernels",
    "why",
    "labkit_us",
    "torch_us",
    "best_us",
    "labkit_plan",
    "best_plan",
    "labkit_kernels",
    "torch_kernels",
]


def _short(keys) -> str:
    names = (kernel_name(k, 80) if k not in ("memset", "memcpy") else k for k in keys)
    return " + ".join(n.replace("::::", "::") for n in names)  # "(anonymous namespace)" dropped


def _spread(xs: List[float]) -> float:
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m else float("inf")


def _torch_call(spec: ConvSpec) -> Callable[[], object]:
    """One PyTorch call of ``spec`` (cudnn.benchmark on; channels_last for NHWC)."""
    import torch  # heavy: torch, an optional extra
    import torch.nn.functional as F  # heavy: torch, an optional extra

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = spec.dtype == "tf32"
    dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
        spec.dtype
    ]
    fmt = torch.channels_last if spec.layout == "NHWC" else torch.contiguous_format

    def t(shape):
        return torch.randn(shape, device="cuda", dtype=dt).to(memory_format=fmt)

    x, w = t(spec.x_shape), t(spec.w_shape)
    stride, padding, dilation = list(spec.stride), list(spec.padding), list(spec.dilation)
    if spec.direction == "fprop":
        return lambda: F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=spec.groups)
    dy = t(spec.y_shape)
    mask = [True, False, False] if spec.direction == "dgrad" else [False, True, False]
    return lambda: torch.ops.aten.convolution_backward(
        dy, x, w, None, stride, padding, dilation, False, [0, 0], spec.groups, mask
    )


def _torch_graph(call, calls: int):
    """PyTorch's call warmed (its benchmark runs then) and captured ``calls`` times in a graph."""
    import torch  # heavy: torch, an optional extra

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            call()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def median_us() -> float:
        xs = []
        for _ in range(REPLAYS):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            xs.append(start.elapsed_time(end) * 1000 / calls)
        return statistics.median(xs)

    return g, median_us


def _torch_host_us(call) -> float:
    import torch  # heavy: torch, an optional extra

    xs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(50):
            call()
        xs.append((time.perf_counter() - t0) * 1e6 / 50)
        torch.cuda.synchronize()
    return statistics.median(xs)


class _Labkit:
    """labkit's side of one convolution: the graph, its operands, a bound call per plan."""

    def __init__(self, spec: ConvSpec):
        from ..gpu.cudnn import graph_cache, operands  # heavy: CuPy, live only
        from ..gpu.timing import measure  # heavy: CuPy, live only

        self.cg = graph_cache.get_graph(spec)
        self.ops = operands.Operands(spec)
        self.stream = measure.timing_stream()

    def bound(self, index: int):
        return self.cg.bind_with_workspace(self.ops.arrays, index, self.stream)

    def exhaustive(self, calls: int) -> Dict[int, object]:
        """Every correct plan timed to convergence (no early stop, no eager stop)."""
        from ..gpu.timing import measure  # heavy: CuPy, live only

        out = {}
        for p in self.cg.runnable:
            try:
                b = self.bound(p.index)
                out[p.index] = measure.graph_replay(
                    b.run,
                    self.stream,
                    calls=calls,
                    repeats=40,
                    min_repeats=8,
                    rel_tol=0.005,
                    eager_stop=False,
                )
                del b
            except Exception as exc:  # noqa: BLE001  (a plan that will not run is left out, named)
                out[p.index] = exc
        return out

    def replayer(self, index: int, calls: int):
        from ..gpu.timing import measure  # heavy: CuPy, live only

        b = self.bound(index)
        graph = measure.capture(b.run, self.stream, calls)
        return (b, graph), measure.replay_timer(graph, self.stream, calls, REPLAYS)

    def kernels(self) -> Dict[int, Tuple[str, ...]]:
        """The kernels (and memsets) one call of each correct plan launches, from CUPTI."""
        bounds = []
        with trace.Tracer("vs-torch", api=False) as t:
            for p in self.cg.runnable:
                try:
                    b = self.bound(p.index)
                    b.run()
                    self.stream.synchronize()
                    bounds.append((p.index, b))
                except Exception:  # noqa: BLE001
                    continue
            t.keep_from_now()
            for _, b in bounds:
                t.mark()
                b.run()
                self.stream.synchronize()
            t.mark()
        marks = t.marks
        out = {}
        for (index, _), a, z in zip(bounds, marks, marks[1:]):
            rows = sorted((r for r in t.rows if a <= r["start_ns"] < z), key=lambda r: r["start_ns"])
            out[index] = tuple(kernel_key(r.get("raw_name", "")) for r in rows if r["kind"] != "sync")
        return out


def why(row: dict, plan_kernels: Dict[int, Tuple[str, ...]], tune_table) -> str:
    """Why labkit's pick is slower than PyTorch's on one convolution ("" when it is not).

    Args:
        row: the convolution's row (``ratio``, ``noise``, ``labkit_plan_index``, ``torch_keys``,
            ``exhaustive``: plan index -> GPU us).
        plan_kernels: plan index -> the kernels one call of it launches.
        tune_table: the autotune's table (``plan_index``, ``status``).

    Returns:
        The reason in words.
    """
    ratio, noise = row.get("ratio"), row.get("noise", 0.0)
    if ratio is None or not ratio > 1.0:
        return ""
    theirs = row.get("torch_keys") or ()
    pick = row["labkit_plan_index"]
    margin = max(FLOOR, noise)
    if plan_kernels.get(pick) == theirs:
        if ratio - 1 <= margin:
            return f"the same kernels; timing noise (slower by {ratio - 1:.1%}, noise {noise:.1%})"
        return f"the same kernels, slower by {ratio - 1:.1%} beyond the noise ({noise:.1%})"
    same = [i for i, k in plan_kernels.items() if k == theirs]
    if not same and any(k.startswith("at::") for k in theirs):
        return f"PyTorch ran its own kernel, not cuDNN's (labkit runs cuDNN only): {_short(theirs)}"
    if not same:
        return f"another kernel, which no labkit plan launches: {_short(theirs)}"
    i = same[0]
    status = tune_table.set_index("plan_index").status.get(i, "")
    t_pick, t_theirs = row["exhaustive"].get(pick), row["exhaustive"].get(i)
    if isinstance(status, str) and status != "ok":
        return f"a plan autotune left out: plan {i} launches PyTorch's kernels ({status[:80]})"
    if t_pick and t_theirs and t_theirs < t_pick * (1 - margin):
        return (
            f"autotune picked another plan: plan {i} launches PyTorch's kernels and times "
            f"{1 - t_theirs / t_pick:.1%} faster exhaustively"
        )
    if ratio - 1 <= margin:
        return f"another plan, equal in labkit's own timing; timing noise ({noise:.1%})"
    return f"plan {i} launches PyTorch's kernels; labkit times it no faster than its pick"


def summary(df) -> dict:
    """The run's summary: the goals' figures.

    Args:
        df: the table (`COLUMNS` and the rest).

    Returns:
        Counts and medians, ``None`` where no row qualifies.
    """

    def col(frame, name, fill=float("nan")):
        return frame[name] if name in frame else pd.Series([fill] * len(frame), index=frame.index)

    ok = df[df.status == "ok"]
    vs = ok[col(ok, "torch_us").notna()]

    def med(s):
        s = pd.to_numeric(s, errors="coerce").dropna()
        return float(s.median()) if len(s) else None

    def top(s):
        s = pd.to_numeric(s, errors="coerce").dropna()
        return float(s.max()) if len(s) else None

    def true(frame, name) -> int:
        return int(sum(v is True or v == True for v in col(frame, name, False)))  # noqa: E712  (numpy bools)

    ratio, why_ = col(vs, "ratio"), col(vs, "why", "").fillna("")
    return {
        "convolutions": int(len(df)),
        "measured": int(len(ok)),
        "against_torch": int(len(vs)),
        "median_ratio": med(ratio),
        "max_ratio": top(ratio),
        "above_1.02": int((ratio > 1.02).sum()),
        "above_1.00": int((ratio > 1.0).sum()),
        "above_1.00_explained": int(((ratio > 1.0) & (why_ != "")).sum()),
        "same_kernels": true(vs, "same_kernels"),
        "pick_within_noise_of_best": true(ok, "pick_within_noise"),
        "pick_vs_best_max": top(col(ok, "pick_vs_best")),
        "labkit_host_us_median": med(col(vs, "labkit_host_us")),
        "torch_host_us_median": med(col(vs, "torch_host_us")),
        "host_ratio_median": med(
            pd.to_numeric(col(vs, "labkit_host_us")) / pd.to_numeric(col(vs, "torch_host_us"))
        ),
    }


def run(name: str, *, seconds: float = 520.0, only: Optional[int] = None):
    """Measure every convolution of `CONVOLUTIONS` (see the module doc) within ``seconds``.

    Args:
        name: the CSV's name under data/bench.
        seconds: the run's budget; convolutions not reached get a ``cut: ...`` status.
        only: measure only the first this many (a quick look).

    Returns:
        The table, one row per convolution.
    """
    import cupy  # heavy: CuPy, live only
    import torch  # heavy: torch, an optional extra

    from ..experiments.pytorch_knobs import torch_child  # heavy: plotly, through labkit.experiments
    from ..gpu.cudnn import graph_cache  # heavy: CuPy, live only
    from ..gpu.timing import autotune, measure, trace  # heavy: CuPy, live only
    from .record import git_commit  # heavy: plotly, where a chart is drawn

    require_torch()
    torch.cuda.init()
    t0 = time.perf_counter()
    convs = CONVOLUTIONS[:only] if only else CONVOLUTIONS
    rows: List[dict] = []
    torch_calls: Dict[int, Callable] = {}
    kept: Dict[int, tuple] = {}

    def write(final: bool):
        df = pd.DataFrame(rows)
        cols = [c for c in COLUMNS if c in df] + [
            c for c in df.columns if c not in COLUMNS and c not in ("torch_keys", "exhaustive")
        ]
        meta = {
            **summary(df),
            "torch": torch.__version__,
            "torch_cudnn": torch.backends.cudnn.version(),
            "labkit_commit": git_commit(),
            "rounds": ROUNDS,
            "replays_per_round": REPLAYS,
            "complete": final,
            "wall_seconds": round(time.perf_counter() - t0, 1),
        }
        return _write(df[cols], name, meta), meta

    for n, (net, layer, spec) in enumerate(convs):
        row: Dict[str, object] = dict(network=net, layer=layer, conv=spec.label, status="ok")
        rows.append(row)
        if time.perf_counter() - t0 > seconds:
            row["status"] = f"cut: the run's {seconds:.0f} s budget was spent before this convolution"
            continue
        started = time.perf_counter()
        try:
            lab = _Labkit(spec)
            tune = autotune.autotune(lab.cg, lab.ops, save=False)
            pick = tune.best_index
            ok = tune.table[tune.table.status == "ok"]
            first_pass = ok.first_pass_us.fillna(ok.gpu_us)  # what the pick was before the final rounds
            eager = tune.table[tune.table.plan_index == pick].eager_us.iloc[0]
            calls = measure.calls_for(float(eager), CALLS)
            ex = lab.exhaustive(calls)
            times = {i: t.median_us for i, t in ex.items() if isinstance(t, measure.Timing)}
            best = min(times, key=times.get)
            sides = {"pick": lab.replayer(pick, calls)}
            if best != pick:
                sides["best"] = lab.replayer(best, calls)
            tcall = None
            if spec.dtype != "fp8_e4m3":
                tcall = _torch_call(spec)
                tgraph, tmed = _torch_graph(tcall, calls)
                sides["torch"] = (tgraph, tmed)
                torch_calls[n] = tcall
            rounds: Dict[str, List[float]] = {k: [] for k in sides}
            for _ in range(ROUNDS):  # in turns: clock and thermal drift hit every side alike
                for k, (_, timer) in sides.items():
                    rounds[k].append(timer())
            med = {k: statistics.median(v) for k, v in rounds.items()}
            best_us = med.get("best", med["pick"])
            noise_best = _spread(rounds.get("best", rounds["pick"]))
            pick_vs_best = med["pick"] / best_us
            b = lab.bound(pick)
            host = measure.host_dispatch(b.run, lab.stream)
            del b
            kernels = lab.kernels()
            plan = lab.cg.plan(pick)
            row.update(
                labkit_us=med["pick"],
                best_us=best_us,
                pick_vs_best=pick_vs_best,
                pick_noise=_spread(rounds["pick"]),
                best_noise=noise_best,
                pick_within_noise=pick_vs_best - 1 <= max(FLOOR, noise_best, _spread(rounds["pick"])),
                labkit_plan=plan.name,
                labkit_plan_index=pick,
                best_plan=lab.cg.plan(best).name,
                best_plan_index=best,
                heuristic_plan=lab.cg.default_plan.name,
                autotune_first_pass_plan=lab.cg.plan(int(ok.plan_index[first_pass.idxmin()])).name,
                autotune_seconds=tune.seconds,
                plans=len(lab.cg.plans),
                plans_correct=len(lab.cg.runnable),
                plans_wrong=tune.wrong,
                plans_left_out=tune.slower + tune.cut,
                calls_per_graph=calls,
                labkit_host_us=host.median_us,
                labkit_kernels=_short(kernels.get(pick, ())),
                exhaustive={i: round(t, 3) for i, t in times.items()},
                workspace_bytes=plan.workspace_bytes,
            )
            if "torch" in med:
                row.update(
                    torch_us=med["torch"],
                    ratio=med["pick"] / med["torch"],
                    torch_noise=_spread(rounds["torch"]),
                    noise=max(_spread(rounds["torch"]), _spread(rounds["pick"])),
                    torch_host_us=_torch_host_us(tcall),
                )
            else:
                row.update(why="PyTorch has no fp8 convolution: compared with labkit's exhaustive best only")
            kept[n] = (kernels, tune.table)
            del sides, lab
        except Exception as exc:  # noqa: BLE001  (reported in the table, the run goes on)
            row["status"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        row["seconds"] = round(time.perf_counter() - started, 2)
        print(
            f"[{n + 1}/{len(convs)}] {spec.label}: "
            + ", ".join(
                f"{k} {row[k]:.3f}" if isinstance(row.get(k), float) else f"{k} {row.get(k)}"
                for k in ("ratio", "pick_vs_best", "noise", "status")
            ),
            flush=True,
        )
        write(False)
        graph_cache.graphs.clear()
        cupy.get_default_memory_pool().free_all_blocks()
    trace.detach()  # torch.profiler attaches its own CUPTI client
    for n, call in torch_calls.items():
        row = rows[n]
        try:
            keys = tuple(kernel_key(name) for name in torch_child.kernels(torch, call))
        except Exception as exc:  # noqa: BLE001
            row["torch_kernels"] = f"not traced: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        kernels, table = kept.get(n, ({}, None))
        row.update(
            torch_keys=keys,
            torch_kernels=_short(keys),
            same_kernels=kernels.get(row["labkit_plan_index"]) == keys,
            torch_kernels_in_labkit=any(k == keys for k in kernels.values()),
        )
        if table is not None:
            row["why"] = why(row, kernels, table)
    path, meta = write(True)
    df = pd.read_csv(path)
    show = ["layer", "conv", "ratio", "pick_vs_best", "noise", "same_kernels", "why"]
    with pd.option_context("display.width", 250, "display.max_colwidth", 70):
        print(df[[c for c in show if c in df]].to_string(index=False))
    print(json.dumps(meta, indent=2, default=str))
    print(f"wrote {path}")
    return df
