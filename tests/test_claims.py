# ruff: noqa: E501  (sentences quoted from the lessons, verbatim)
"""Every sentence of a lesson that compares numbers holds on every shipped recording.

A lesson's prose (Markdown cells: text around charts, Recaps) states things the charts show. Each
sentence that compares measured numbers is either generated from the data when the cell runs (a
summary) or registered here with `claim`: its exact text, its lesson, and a check against a
recording. `test_claim_holds` runs every check on every shipped recording: a recording that
changes so that a sentence stops holding fails the test, and a claim that holds on one GPU and
not another must be rewritten to say when it holds.

`test_every_comparative_sentence_is_a_claim` reads every lesson's Markdown and finds sentences
with comparative words: each must be a registered claim or listed in `NOT_CLAIMS` (it compares
nothing measured: a definition, a rule, an instruction).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit import experiments
from labkit.store import recordings

ROOT = Path(__file__).resolve().parents[1]
LESSONS = {p.name[:2]: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
COMPARATIVE = re.compile(
    r"\b(faster|slower|fastest|slowest|more|less|fewer|larger|smaller|largest|smallest|higher|lower|"
    r"than|times|wins?|loses?|beats?|gains?|cheaper|costlier|idle|best|worst)\b|\d+(\.\d+)?\s*(x|%)",
    re.I,
)

#: (lesson, sentence, check) for every registered claim
CLAIMS: list = []


def claim(lesson: str, sentence: str):
    """Register ``check(recording) -> (holds, evidence)`` as the test of ``sentence`` in lesson
    ``lesson``'s Markdown (the sentence's exact words, whitespace aside)."""

    def register(check):
        CLAIMS.append((lesson, sentence, check))
        return check

    return register


def frame(rec, name, **kwargs):
    """Experiment ``name(**kwargs)`` answered from recording ``rec``."""
    return experiments.core.from_recording(name, rec, **kwargs)


# ---- the claims, by lesson (each checked on every shipped recording) -------------------------


# ---- lesson 08: the same convolution on another GPU (both recordings side by side) -------------
def _compare(name, **kwargs):
    from labkit.present import compare

    df = compare.frames(name, **kwargs)
    return df, compare.ratios(df)


def _ceiling(rec_name):
    from labkit import ceilings

    return ceilings.for_gpu(recordings.named(rec_name).metadata["gpu"])


@claim(
    "08",
    "The H200 has HBM3e with more memory bandwidth, so its bandwidth roof sits higher and its ridge (where the two roofs meet) moves to a lower arithmetic intensity.",
)
def _h200_roof(rec):
    h100, h200 = _ceiling("h100-sxm"), _ceiling("h200")
    holds = (
        h200.bandwidth_bytes_per_s > h100.bandwidth_bytes_per_s
        and h200.ridge_intensity("fp16") < h100.ridge_intensity("fp16")
        and h200.peak_tflops("fp16") == h100.peak_tflops("fp16")
    )
    return holds, (h100, h200)


def _right_of_ridge():
    df, table = _compare("roofline")
    ridge = _ceiling(df.attrs["recordings"][0]).ridge_intensity("fp16")
    x = df.drop_duplicates("shape").set_index("shape")["intensity_flops_per_byte"]
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    return table[table["shape"].map(x) > ridge].set_index("shape")[col]


@claim("08", "Shapes right of the ridge run at the same speed on both GPUs, within a few percent")
def _right_same(rec):
    r = _right_of_ridge()
    return len(r) >= 2 and bool(((r - 1).abs() <= 0.03).all()), r.round(3).to_dict()


@claim("08", "A gain shows where a point runs close to the bandwidth roof.")
def _gain_at_roof(rec):
    df, table = _compare("roofline")
    base = df[df["recording"] == df.attrs["recordings"][0]].set_index("shape")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    gain = table.loc[table[col].idxmin(), "shape"]
    return gain == base["achieved_gb_s"].idxmax(), (gain, base["achieved_gb_s"].round(0).to_dict())


@claim(
    "08",
    "Left of the ridge is not enough: a shape far below both roofs (conv1, with its 3 input channels) is limited by something else, and more bandwidth leaves it where it was.",
)
def _conv1(rec):
    df, table = _compare("roofline")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    ratio = float(table.set_index("shape").loc["conv1 7x7/2", col])
    rows = df[df["shape"] == "conv1 7x7/2"]
    below = []
    for _, r in rows.iterrows():
        c = _ceiling(r["recording"])
        roof = min(c.peak_tflops("fp16"), r["intensity_flops_per_byte"] * c.bandwidth_bytes_per_s / 1e12)
        below.append(r["tflops"] < 0.5 * roof and r["intensity_flops_per_byte"] < c.ridge_intensity("fp16"))
    return all(below) and abs(ratio - 1) <= 0.03, (ratio, below)


def _precision_ranges():
    df, table = _compare("precision")
    t = table.set_index("dtype")
    other = df.attrs["recordings"][1]
    base = df.attrs["recordings"][0]
    low, high = t[f"ratio low {other}/{base}"], t[f"ratio high {other}/{base}"]
    same_plan = df.pivot(index="dtype", columns="recording", values="plan_name")
    return df, low, high, same_plan


@claim(
    "08",
    "The base convolution in fp32 and tf32 runs faster on the H200, while fp16 and bf16 run at the same speed within their spread.",
)
def _wide_gain(rec):
    _, low, high, _ = _precision_ranges()
    holds = all(high[d] < 1 for d in ("fp32", "tf32")) and all(
        low[d] <= 1 <= high[d] for d in ("fp16", "bf16")
    )
    return holds, (low.round(3).to_dict(), high.round(3).to_dict())


@claim("08", "for this small layer, fp8 runs slower than fp16 on both GPUs, with plans of its own.")
def _fp8_slower(rec):
    df, _ = _compare("precision")
    t = df.set_index(["recording", "dtype"])
    holds = all(
        t.loc[(r, "fp8_e4m3"), "gpu_us"] > t.loc[(r, "fp16"), "gpu_us"]
        and t.loc[(r, "fp8_e4m3"), "plan_name"] != t.loc[(r, "fp16"), "plan_name"]
        for r in df.attrs["recordings"]
    )
    return holds, t[["gpu_us", "plan_name"]].to_dict()


@claim("08", "The dtype changes the kernel cuDNN picks more than the peak.")
def _dtype_kernel(rec):
    holds, evidence = _fp8_slower(rec)
    c = _ceiling("h100-sxm")
    return holds and c.peak_tflops("fp8_e4m3") > c.peak_tflops("fp16"), evidence


@claim(
    "08",
    "A convolution gains where memory traffic holds it back: the low-intensity 1x1 shape, and the base convolution in fp32 (its plan streams a workspace far larger than its tensors), tf32 (4-byte values) and fp8.",
)
def _recap_gains(rec):
    df, table = _compare("roofline")
    col = [c for c in table.columns if c.startswith("ratio ")][0]
    x = df.drop_duplicates("shape").set_index("shape")["intensity_flops_per_byte"]
    gain = table.loc[table[col].idxmin(), "shape"]
    pdf, low, high, _ = _precision_ranges()
    spec = experiments.BASE.replace(dtype="fp32")
    tensors = (
        spec.N * spec.C * spec.H * spec.W
        + spec.K * spec.C * spec.R * spec.S
        + spec.N * spec.K * spec.H * spec.W
    ) * 4
    ws = pdf[pdf["dtype"] == "fp32"]["workspace_bytes"]
    holds = (
        gain == "1x1 @56"
        and gain == x.idxmin()
        and all(high[d] < 1 for d in ("fp32", "tf32", "fp8_e4m3"))
        and bool((ws > 4 * tensors).all())
    )
    return holds, (gain, high.round(3).to_dict(), list(ws), tensors)


@claim(
    "08",
    "fp16 and bf16 run at the same speed within the spread of repeated timings, and the fp16 shapes right of the ridge within a few percent.",
)
def _recap_same(rec):
    _, low, high, _ = _precision_ranges()
    r = _right_of_ridge()
    holds = all(low[d] <= 1 <= high[d] for d in ("fp16", "bf16")) and bool(((r - 1).abs() <= 0.03).all())
    return holds, (low.round(3).to_dict(), high.round(3).to_dict(), r.round(3).to_dict())


@claim(
    "08",
    "* Arithmetic intensity, from tensor sizes alone, says which layers a faster memory can help; where a point sits under its roof says whether it will.",
)
def _intensity_and_roof(rec):
    a, ev_a = _gain_at_roof(rec)
    b, ev_b = _conv1(rec)
    return a and b, (ev_a, ev_b)


@claim(
    "08",
    "* The heuristic's pick is the same on both; the autotuned best can swap between plans whose spreads overlap",
)
def _picks(rec):
    df, _ = _compare("plans")
    recs = df.attrs["recordings"]
    heur = {r: df[(df.recording == r) & df.heuristic_pick].plan_name.iloc[0] for r in recs}
    best = {r: df[(df.recording == r) & df.best].iloc[0] for r in recs}
    if best[recs[0]].plan_name == best[recs[1]].plan_name:
        return len(set(heur.values())) == 1, heur
    other = df[(df.recording == recs[1]) & (df.plan_name == best[recs[0]].plan_name)].iloc[0]
    overlap = other.gpu_us_p10 <= best[recs[1]].gpu_us_p90
    return len(set(heur.values())) == 1 and bool(overlap), (heur, other.gpu_us_p10, best[recs[1]].gpu_us_p90)


# ---- lesson 09: your network (the network reports of each recording) -------------------------
def _report(rec, net="resnet50"):
    from labkit.experiments.your_network import table_of

    df = frame(rec, "network_report", net=net, batch=32, dtype="fp16", layout="NHWC")
    return {t: table_of(df, t) for t in ("layers", "strategies", "timeline", "budget")}


@claim(
    "09",
    "A fixed arena here is sized for the network's largest workspace; a keyed cache evicts to stay within its budget, and here every workspace fits in either budget, so the two keyed caches do the same work.",
)
def _arena_and_caches(rec):
    r = _report(rec)
    s = r["strategies"].set_index("strategy")
    largest = r["layers"]["fastest_workspace_bytes"].max()
    k = s[s.index.str.startswith("keyed_cache")]
    holds = (
        abs(s.loc["fixed_arena (sized)", "peak_workspace_bytes"] - largest) <= 0.01 * largest
        and len(k) == 2
        and k["peak_workspace_bytes"].nunique() == 1
        and (k["fallbacks_per_pass"] == 0).all()
        and k["alloc_calls_first_pass"].nunique() == 1
        and k["peak_workspace_bytes"].max() <= 32 * 2**20
    )
    return holds, s[["peak_workspace_bytes", "fallbacks_per_pass", "alloc_calls_first_pass"]].to_dict()


@claim(
    "09",
    "`async_pool` holds more workspace than any call of ResNet-50 asks for, from its first workspace until after the pass.",
)
def _async_holds(rec):
    r = _report(rec)
    p = r["strategies"].set_index("strategy").loc["async_pool"]
    line = r["timeline"][r["timeline"]["strategy"] == "async_pool"]["held_bytes"]
    held = line[line > 0]
    holds = (
        p["peak_workspace_bytes"] > r["layers"]["fastest_workspace_bytes"].max()
        and p["held_after_bytes"] == p["peak_workspace_bytes"]
        and held.nunique() == 1
    )
    return holds, (p["peak_workspace_bytes"], p["held_after_bytes"], list(held.unique()))


@claim(
    "09",
    "The depthwise networks (MobileNetV2, ConvNeXt) and the DeepLabV3 head get their fastest plans with a few bytes or kilobytes of workspace; VGG16 and the ResNets ask for megabytes.",
)
def _small_and_large(rec):
    most = {
        net: float(_report(rec, net)["layers"]["fastest_workspace_bytes"].max())
        for net in ("mobilenet_v2", "convnext_tiny", "deeplabv3_aspp", "vgg16", "resnet50", "resnext50_32x4d")
    }
    holds = all(most[n] < 2**20 for n in ("mobilenet_v2", "convnext_tiny", "deeplabv3_aspp")) and all(
        most[n] >= 2**20 for n in ("vgg16", "resnet50", "resnext50_32x4d")
    )
    return holds, most


@claim(
    "09",
    "The panel opens on VGG16: its largest workspaces come with its last layers, so the timeline's lines part ways there: the fixed arena holds its size from the first call, the caches and CuPy's pool grow when the large layers come and keep it, `async_pool` holds its chunk from its first workspace on, and `malloc_per_call` gives it back after each call.",
)
def _vgg16_timeline(rec):
    r = _report(rec, "vgg16")
    layers, t = r["layers"], r["timeline"]
    n = len(layers)
    big = layers[layers["fastest_workspace_bytes"] == layers["fastest_workspace_bytes"].max()]["order"]
    first_big = int(big.min())
    line = {k: sub.sort_values("step") for k, sub in t.groupby("strategy")}

    def at(k, step):
        return float(line[k][line[k]["step"] == step]["held_bytes"].iloc[0])

    def after(k):
        return float(line[k]["held_after_bytes"].iloc[-1])

    peak = {k: float(v["held_bytes"].max()) for k, v in line.items()}
    grows = [k for k in ("preallocated", "keyed_cache (256 MiB)", "keyed_cache (32 MiB)", "cupy_pool")]
    pool = line["async_pool"]["held_bytes"]
    holds = (
        first_big >= n - 3
        and at("fixed_arena (sized)", 0) == peak["fixed_arena (sized)"]
        and all(at(k, 0) < peak[k] and at(k, first_big) == peak[k] and after(k) == peak[k] for k in grows)
        and pool[pool > 0].nunique() == 1
        and after("async_pool") == peak["async_pool"]
        and after("malloc_per_call") == 0
        and at("malloc_per_call", first_big) == peak["malloc_per_call"]
    )
    return holds, (first_big, n, peak)


# ---- lesson 10: under the hood (the traces of each recording) ----------------------------------
def _timeline(rec):
    df = frame(rec, "strategy_timeline", workload="one_conv", calls=8)
    s = df.drop_duplicates("strategy").set_index("strategy")
    return df, s[s.status == "ok"]


@claim("10", "Every runnable plan of the base convolution, each run 3 times under the tracer.")
def _traced_calls(rec):
    from labkit.experiments import under_the_hood

    k = frame(rec, "kernels", spec=experiments.BASE)
    return under_the_hood.TRACED_CALLS == 3 and len(k) > 0, under_the_hood.TRACED_CALLS


@claim(
    "10",
    "Under `malloc_per_call` every call's `cudaFree` waits for the GPU to finish and its `cudaMalloc` comes before the next launch, so its kernels cannot run back to back. But no GPU lane is free of gaps.",
)
def _no_lane_free(rec):
    df, s = _timeline(rec)
    malloc = s.index[s.index.str.startswith("malloc_per_call")][0]
    frees = df[(df.strategy == malloc) & df.name.str.contains("free", case=False, na=False)]
    holds = bool((s.idle_share_api > 0.05).all()) and len(frees) >= int(s.loc[malloc, "calls"])
    return holds, (s.idle_share_api.round(3).to_dict(), len(frees))


@claim(
    "10",
    "* A strategy's cost is visible in a trace: malloc-per-call leaves the GPU idle longest, its `cudaFree` waiting for the GPU on every call.",
)
def _malloc_idlest(rec):
    _, s = _timeline(rec)
    holds = str(s.idle_share_api.idxmax()).startswith("malloc_per_call") and str(
        s.idle_share.idxmax()
    ).startswith("malloc_per_call")
    return holds, (s.idle_share_api.round(3).to_dict(), s.idle_share.round(3).to_dict())


@claim(
    "10",
    "But a Python loop that launches one call at a time leaves gaps under every strategy: the host needs as long to launch a call as the GPU needs to run it.",
)
def _python_gaps(rec):
    _, s = _timeline(rec)
    holds = bool(
        (s.idle_share > 0.05).all() and (s.host_us >= 0.9 * s.busy_us).all() and (s.gpu_us > s.busy_us).all()
    )
    return holds, s[["idle_share", "host_us", "busy_us", "gpu_us"]].round(3).to_dict()


@claim(
    "10",
    "The trace shows the cause: with CUDA graph launches the two streams' kernels run at the same time, both using the one workspace (the shaded bands).",
)
def _graph_overlap(rec):
    r = frame(rec, "race_timeline", launch="graph", streams=2).iloc[0]
    return r.overlap_us > 0 and r.corrupted > 0, (r.overlap_us, r.corrupted)


@claim(
    "10",
    "* A shared workspace is wrong exactly when two streams' kernels overlap: graph launches make them overlap; with Python launches it depends on the host's timing, and a run that misses it proves nothing.",
)
def _overlap_exactly(rec):
    rows = [frame(rec, "race_timeline", launch=launch, streams=2).iloc[0] for launch in ("graph", "python")]
    holds = rows[0].overlap_us > 0 and all((r.overlap_us > 0) == (r.corrupted > 0) for r in rows)
    return holds, [(r.launch, r.overlap_us, r.corrupted) for r in rows]


#: (lesson, sentence) pairs with comparative words that compare nothing measured
NOT_CLAIMS: set = set()

#: lessons 08-10: sentences with comparative words that compare nothing measured
NOT_CLAIMS |= {
    (
        "08",
        "**Learning goals** * read two recordings of the same calls side by side, each with its provenance (GPU, cuDNN, date); * predict from arithmetic intensity which convolutions gain from more memory bandwidth, then check; * tell a real difference between two GPUs from the spread of repeated timings; * see whether cuDNN's heuristic and autotuned plans change between two GPUs of one architecture; * place the usual architecture advice (Ampere: TF32; Hopper: FP8; Ada: FP8 inference) next to what was measured.",
    ),
    ("08", "No times yet: predict from the intensity alone."),
    (
        "08",
        "**Exercise 1 (predict).** Which shape gains most on the GPU with more bandwidth (the smallest time ratio, H200 over H100)?",
    ),
    (
        "08",
        "The repeats give the median and the 10th and 90th percentiles, the spread you read ratios against: The same base convolution (fp16 NHWC, a ResNet-50 stage-1 3x3 layer at batch 32) through fusion and a batch-size sweep.",
    ),
    ("08", "The summary under each chart gives the largest gain and loss."),
    (
        "08",
        "**Exercise 2 (predict).** Before the chart: is the fastest (autotuned) plan of the base convolution a different plan on the H200?",
    ),
    (
        "08",
        "Where the whiskers of two plans overlap, a single run cannot say which is faster: autotune on the GPU you deploy on, and measure again before trusting a small margin.",
    ),
    ("08", "How many of the shapes run at least 5 % faster on the H200 (time ratio below 0.95)?"),
    (
        "09",
        "`labkit.report(net, batch=..., dtype=..., layout=...)` takes a preset name (`resnet50`, `resnext50_32x4d`, `mobilenet_v2`, `convnext_tiny`, `vgg16`, `deeplabv3_aspp`), a list of `ConvSpec`, or a PyTorch model with an example input shape.",
    ),
    (
        "09",
        "For every convolution call it builds every plan cuDNN offers, times them, and checks the heuristic's pick, the fastest and the one with the smallest workspace against a float64 reference.",
    ),
    (
        "09",
        "A plan that one eager call shows to be far slower than the best is not timed further, and the report says how many plans and layers were cut and why (`rep.cut`, the `status` columns).",
    ),
    (
        "09",
        "For each, the heuristic's plan, the fastest plan and the plan with the smallest workspace, with GPU time (CUDA-graph replay median, microseconds) and workspace bytes.",
    ),
    (
        "09",
        "Each distinct convolution's plans are timed as autotuning times them: the plan's own workspace is allocated with CuPy (`memory.alloc`, a `cupy.ndarray`), the plan is bound to its tensors and that workspace (`cg.bind`, which calls the frontend's `execute_plan_at_index` on the stream), and a CUDA graph of back-to-back calls is replayed between two CUDA events until the median is stable (`measure.graph_replay`): The chart: the top panel is the time of each call with the heuristic's plan and the fastest plan; the middle panel is the **memory timeline** (the workspace part of a memory snapshot): how much workspace each strategy holds while each call runs, starting from nothing, and (the last step) after the pass.",
    ),
    (
        "09",
        "`rep.strategies` runs the same 53 calls, each with its fastest plan, under every strategy of lesson 02: GPU time of a pass (two events around it: kernels plus any time the GPU waited for the host), host time, the peak workspace held, what is still held afterwards, and allocator calls in the first pass and in a later one.",
    ),
    (
        "09",
        "`rep.budget`: for each workspace cap, the pass time if every call used its fastest plan within the cap.",
    ),
    (
        "09",
        'It is a sum of the plan times measured above (no new measurement), so it answers "I can spare 64 MiB" in time lost.',
    ),
    ("09", "`calls_changing_plan` counts the calls that must take a slower plan."),
    (
        "09",
        "**Exercise 2 (predict).** Before you look at it: if every call had to fit its workspace in 4 MiB, how much slower would the pass be?",
    ),
    ("09", "The top chart shows which calls need more (hover a bar)."),
    ("09", "The budget curve adds kernel times measured by graph replay, repeated until stable."),
    (
        "09",
        '**Exercise 3 (explore).** Run the report on VGG16 in a cell of your own (`labkit.report("vgg16")`; sort its tables with `sort_values`): which layer asks for the most workspace with its fastest plan (`fastest_workspace_bytes`), and under which strategy does the pass hold the most workspace at its peak (`peak_workspace_bytes`)?',
    ),
    (
        "09",
        "* A network's workspace question is per layer and per pass: the fastest plan of each layer, and what a strategy holds over the whole pass.",
    ),
    ("09", "* A cap trades workspace for time; the budget curve says how much, from measured plan times."),
    (
        "09",
        "* One timed pass is one sample: compare pass times only beyond the difference between two identical passes.",
    ),
    (
        "10",
        "From the device records, a pass's idle share is the part of it in which no kernel or memset ran (`trace.idle_share`).",
    ),
    (
        "10",
        "**Exercise 2 (predict).** Before the timeline: under which strategy will the GPU sit idle the largest share of its pass?",
    ),
    (
        "10",
        "The table keeps the lines about engines, warnings and errors, each kind of line once, with how many times it appears and where it first does.",
    ),
}

#: (lesson, sentence) pairs not yet reviewed: each must become a claim, a generated sentence or an
#: entry of NOT_CLAIMS (this set only shrinks)
UNREVIEWED: set = {
    ("00", "Here: the lessons' base convolution (a ResNet-50 3x3 layer at batch 32) in both memory layouts."),
    (
        "00",
        "Ask for something that was not recorded (in recorded mode) and the panel says so, names the nearest recorded values and empties the chart: a chart never shows numbers measured for another convolution than the one on its controls.",
    ),
    (
        "01",
        "The fastest algorithm is rarely the one without a workspace: scratch memory is how an algorithm trades memory for speed.",
    ),
    (
        "01",
        "Bars show the plan cuDNN's heuristic picks; whiskers the smallest and largest workspace among all the plans cuDNN offers for that variant.",
    ),
    (
        "01",
        "**Exercise 1.** In the algorithm table above (fp16, NCHW), which algorithm did cuDNN's Find rank fastest?",
    ),
    ("01", "**Exercise 2.** How many **bytes** of workspace does that fastest algorithm ask for?"),
    (
        "01",
        "* The fastest plan often needs the largest workspace; refusing it has a price in time (lesson 05 measures it).",
    ),
    (
        "02",
        "**Learning goals** * compare the ways to provide a workspace on real workloads: per-call host time, GPU wall time, allocations, peak and held memory; * explain why allocating per call hurts, and what caching pools change; * explain why a cache key without dtype and layout is a bug, from measured workspace sizes; * see what a fixed arena costs and what each strategy does when memory runs out. | strategy | what it does | | --- | --- | | `preallocated` | the baseline: one exact-size buffer per convolution, made before the run, never freed | | `fixed_arena` | one big buffer made up front; a plan that needs more falls back to one that fits | | `malloc_per_call` | ask the size, `cudaMalloc` it, run, `cudaFree` it: every call | | `keyed_cache` | one buffer per key (the full spec + plan), kept and reused, LRU-evicted under a byte budget | | `scratchpad_per_stream` | oneDNN's user scratchpad: one grow-only buffer per stream | | `cupy_pool` / `async_pool` | CuPy's caching `MemoryPool` and the stream-ordered `cudaMallocAsync` pool | Each runs the same sequence of real convolutions on a fresh stream, after one warm-up pass (so one-time allocations are counted apart from the steady state).",
    ),
    (
        "02",
        "*GPU wall time* is the time between two CUDA events recorded on the stream before the first call and after the last, over the number of calls: the kernels **plus any time the GPU sat idle waiting for the host** (with `malloc_per_call`, each `cudaFree` waits for the GPU and the next launch waits for `cudaMalloc`, so its GPU wall time is mostly idle time, not slower kernels).",
    ),
    (
        "02",
        "Strategies may pick a plan with a smaller workspace when they cannot get the one the heuristic wants (a *fallback*).",
    ),
    (
        "02",
        "**Why per-call malloc hurts.** `cudaMalloc` is a driver call, and `cudaFree` waits until the GPU is idle: each call's free stalls the host until the convolution it just launched is done, so the host can never run ahead and queue work.",
    ),
    (
        "02",
        "The price is memory held whether or not it is used (the *workspace memory* panel above), and a plan that needs more than the arena holds must fall back to a slower one that fits.",
    ),
    (
        "02",
        "A strategy that allocates on demand cannot get the workspace the heuristic plan wants and falls back to a plan that needs less (as PyTorch and TensorFlow do), and says so in its `fallbacks` count.",
    ),
    (
        "02",
        "(Any within 5% of the lowest counts.) **Exercise 2.** On `one_conv`, how many times slower per call (median host time) is `malloc_per_call` than `fixed_arena`?",
    ),
    (
        "03",
        "An NCHW convolution either uses slower kernels or transposes internally, often in its workspace.",
    ),
    (
        "03",
        "For the ResNet-50 convolution shapes: arithmetic intensity (FLOPs per byte, counting each tensor moved once, and of the input only the pixels some filter window covers: a 1x1 stride-2 convolution reads one pixel in four) against the TFLOP/s achieved.",
    ),
    (
        "03",
        "**Exercise 2.** How many times faster is the convolution itself in NHWC than in NCHW (conversion excluded)?",
    ),
    (
        "03",
        "For this one convolution, does converting to NHWC, running there and converting back beat running in NCHW?",
    ),
    (
        "03",
        "(`True` / `False`) * Lower precision is faster on tensor cores; its error comes from two places, the arithmetic and the rounding of the inputs, and for fp8 the second dominates.",
    ),
    (
        "03",
        "* The layout changes the kernel, the speed and the workspace; converting per layer can eat the gain, so keep a network in one layout.",
    ),
    (
        "04",
        "**Learning goals** * compare a fused convolution + bias + ReLU (+ residual add), one cuDNN graph, with the same work as separate kernels; * see where the difference comes from: intermediate tensors allocated, written and read back; * find a case where fusion loses, and learn to measure rather than assume.",
    ),
    (
        "04",
        "*fused* runs the plan cuDNN's heuristic ranks first for that pattern in that precision, as a framework that does not autotune would; *fused, autotuned* times every plan cuDNN offers for the fused graph and keeps the fastest.",
    ),
    ("04", "**Exercise 1.** Base spec (fp16): how many times faster is fused `bias_relu` than unfused?"),
    (
        "04",
        "**Exercise 3.** In fp32, for which epilogue is the fused graph *slower* than the unfused sequence?",
    ),
    (
        "04",
        "(`'bias_relu'`, `'bias_relu_add'`, or `'none'`) * Fusion removes intermediate tensors: less memory allocated, less traffic, fewer launches.",
    ),
    ("04", "* Its gain is largest where the convolution is fast and the elementwise work is memory-bound."),
    (
        "04",
        "* A fused graph still needs a good plan: the heuristic's first pick can be far from the best; autotune it, in the precision you use.",
    ),
    (
        "05",
        "**Learning goals** * see every plan cuDNN offers for one convolution: the heuristic pick, the fastest and the slowest; * measure what a workspace cap costs; * measure what building a graph costs, what a cache hit saves, and when autotuning pays for itself. cuDNN's heuristics rank the engine configurations that can run a graph; labkit builds all of them, gives each its own workspace, and times each by CUDA-graph replay (warm-up, repeat until stable, stop early when a plan is already far slower than the best).",
    ),
    ("05", "`deselect_workspace_greater_than(cap)` drops every plan that needs more than `cap` bytes."),
    (
        "05",
        "Below: the best plan left under each cap (all of them autotuned) and its slowdown against no cap.",
    ),
    (
        "05",
        "The first build in a process is the slowest; an identical rebuild is cheaper (cuDNN's own caches are warm); a hit in labkit's graph cache is a dictionary lookup.",
    ),
    (
        "05",
        "**When does autotuning pay off?** When the time it saves per call, times the number of calls, exceeds what it cost.",
    ),
    (
        "05",
        "In fp32 NCHW the heuristic does not pick the fastest plan: **Exercise 1.** fp16 NCHW: how many times slower is the slowest plan than the fastest?",
    ),
    (
        "05",
        "**Exercise 2.** fp16 NCHW with the workspace capped at 1 MiB: how many times slower is the best plan that fits than the unlimited best?",
    ),
    (
        "05",
        "(`'never'` is a valid answer where it never does.) * One convolution has dozens of plans whose times differ by orders of magnitude; the heuristic pick is usually good, not always the best.",
    ),
    (
        "05",
        "* Capping the workspace removes plans; below the fastest plan's need the cost can be large, above it nothing.",
    ),
    (
        "06",
        "**Why Python launches hide it.** One Python launch costs the host longer than this small convolution runs on the GPU, so by the time the second stream's kernel is launched, the first stream's has usually finished: the two never use the workspace at the same time.",
    ),
    (
        "06",
        "**Exercise 2.** With a shared scratchpad on 2 streams, which launch method corrupted fewer outputs: `'graph'` or `'python'`?",
    ),
    ("06", "* One scratchpad per stream, sized to the largest plan run there, is safe and cheap."),
    (
        "07",
        "In recorded mode the controls offer the recorded values; live, set any convolution you like (an impossible one, say padding larger than the filter reaches, is explained in the panel instead of raising).",
    ),
    ("07", "* Compare the strategies on more layers: `python -m labkit bench strategies`."),
    (
        "07",
        "* [08_same_conv_other_gpu](08_same_conv_other_gpu.ipynb): the same convolutions recorded on an H100 and an H200, side by side, and why only some of them gain.",
    ),
}


def markdown_sentences(path: Path) -> list:
    """The sentences of a notebook's Markdown cells, whitespace collapsed (headings and code left out)."""
    nb = json.loads(path.read_text())
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        text = re.sub(r"```.*?```", " ", text, flags=re.S)
        for line in text.split("\n"):
            if line.lstrip().startswith("#"):
                continue
            out.append(line)
    joined = re.sub(r"\s+", " ", " ".join(out))
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*`(\[])", joined) if s.strip()]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("recording", [r.name for r in recordings.shipped()])
@pytest.mark.parametrize(
    "lesson, sentence, check", CLAIMS, ids=lambda v: v[:40] if isinstance(v, str) else ""
)
def test_claim_holds(recording, lesson, sentence, check):
    holds, evidence = check(recordings.named(recording))
    assert holds, f"lesson {lesson} on {recording}: {sentence!r} does not hold: {evidence}"


@pytest.mark.parametrize(
    "lesson, sentence, check", CLAIMS, ids=lambda v: v[:40] if isinstance(v, str) else ""
)
def test_claim_is_in_its_lesson(lesson, sentence, check):
    text = _norm(" ".join(markdown_sentences(LESSONS[lesson])))
    assert _norm(sentence) in text, f"lesson {lesson} no longer says {sentence!r}: update the claim"


def test_every_comparative_sentence_is_a_claim():
    claimed = {(lesson, _norm(s)) for lesson, s, _ in CLAIMS}
    listed = {(lesson, _norm(s)) for lesson, s in NOT_CLAIMS | UNREVIEWED}
    loose = []
    for lesson, path in LESSONS.items():
        for s in markdown_sentences(path):
            if not COMPARATIVE.search(s):
                continue
            if not any(lesson == cl and c in _norm(s) for cl, c in claimed | listed):
                loose.append((lesson, s))
    assert not loose, "sentences that compare, neither claims nor listed:\n" + "\n".join(
        f"  ({lesson!r}, {s!r})," for lesson, s in loose
    )


def test_the_unreviewed_list_only_names_sentences_still_there():
    present = {(lesson, _norm(s)) for lesson, path in LESSONS.items() for s in markdown_sentences(path)}
    stale = [(lesson, s) for lesson, s in UNREVIEWED | NOT_CLAIMS if (lesson, _norm(s)) not in present]
    assert not stale, f"no longer in the lessons, remove: {stale}"
