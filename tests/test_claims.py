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


# -- lessons 00-02 --
def _fp32_base():
    return experiments.BASE.replace(dtype="fp32")


@claim("00", "NHWC, the faster layout in fp16, becomes the slower one.")
def _layout_swaps_in_fp32(rec):
    half = frame(rec, "layout").set_index("layout").conv_gpu_us
    full = frame(rec, "layout", spec=_fp32_base()).set_index("layout").conv_gpu_us
    return half["NHWC"] < half["NCHW"] and full["NHWC"] > full["NCHW"], (dict(half), dict(full))


@claim(
    "01",
    "In fp32 the layouts swap roles: the NCHW forward plan asks for no workspace at all and the NHWC one for the "
    "largest workspace of the whole chart",
)
def _fp32_workspaces(rec):
    ws = frame(rec, "workspace_sizes")
    ok = ws[ws.status == "ok"]
    fp = ok[(ok.dtype == "fp32") & (ok.direction == "fprop")].set_index("layout").heuristic_workspace_bytes
    return fp["NCHW"] == 0 and fp["NHWC"] == ok.heuristic_workspace_bytes.max(), dict(fp)


@claim("01", "in the algorithm table the best algorithm that needs none is slower than the fastest")
def _workspace_buys_time(rec):
    df = frame(rec, "algorithms", spec=experiments.BASE.replace(layout="NCHW"))
    ok = df[df.find_status == "ok"]
    none = ok[ok.query_workspace_bytes == 0].time_us.min()
    return none > ok.time_us.min(), (none, ok.time_us.min())


def _strategies(rec, workload):
    df = frame(rec, "strategies", workload=workload, repeats=20)
    return df.assign(name=df.strategy.str.split(" ").str[0])


@claim("02", "each call's free stalls the host until the convolution it just launched is done")
def _malloc_idles_the_gpu(rec):
    df = _strategies(rec, "one_conv").set_index("name")
    m, a = df.loc["malloc_per_call"], df.loc["fixed_arena"]
    holds = m.gpu_us > 1.5 * a.gpu_us and m.strategy_us_per_call > 50 * a.strategy_us_per_call
    return holds, (m.gpu_us, a.gpu_us, m.strategy_us_per_call, a.strategy_us_per_call)


@claim(
    "02",
    "A strategy that cannot get the workspace the heuristic plan wants falls back to a plan that needs less",
)
def _pressure_fallbacks(rec):
    df = _strategies(rec, "pressure")
    fell = set(df[df.fallbacks > 0].name)
    return fell == set(df.name) - {"fixed_arena"}, sorted(fell)


@claim("02", "Under memory pressure, `cupy_pool` takes far longer per call than every other strategy.")
def _pool_under_pressure(rec):
    df = _strategies(rec, "pressure").set_index("strategy")
    pool = df[df.name == "cupy_pool"].median_us.iloc[0]
    rest = df[df.name != "cupy_pool"].median_us.max()
    return pool > 10 * rest, (pool, rest)


@claim("02", "One strategy runs some of its calls with a smaller plan than the heuristic's.")
def _one_falls_back_on_growing_batch(rec):
    df = frame(rec, "strategies", workload="growing_batch", repeats=20)
    return int((df.fallbacks > 0).sum()) == 1, list(df[df.fallbacks > 0].strategy)




#: (lesson, sentence) pairs with comparative words that compare nothing measured
NOT_CLAIMS: set = {
    ('01', 'In the sweep panel above, keep *dtype · layout* at fp32 NCHW and set the swept field to N: what is the largest workspace along that sweep, in bytes?'),
    ('02', "**Learning goals** * read a strategy's code: `get` hands a call its workspace, `put` hears that the call was queued; * compare the ways to provide a workspace on real workloads: per-call host time (and its noise), GPU wall time, allocations, peak and held memory; * explain why allocating per call hurts, what caching pools change, and what PyTorch does; * explain why a cache key without dtype and layout is a bug, from measured workspace sizes; * see what each strategy does when memory runs out, and why; * write a strategy of your own and have it checked for correct outputs, memory, leaks and races. | strategy | what it does | | --- | --- | | `preallocated` | the baseline: one exact-size buffer per convolution and plan, made at the first call that needs it, never freed | | `fixed_arena` | one big buffer made when the strategy is made; a plan that needs more falls back to one that fits | | `malloc_per_call` | ask the size, `cudaMalloc` it, run, `cudaFree` it: every call | | `keyed_cache` | one buffer per key (the full spec + plan), kept and reused, LRU-evicted under a byte budget | | `scratchpad_per_stream` | oneDNN's user scratchpad: one grow-only buffer per stream | | `cupy_pool` / `async_pool` | CuPy's caching `MemoryPool` and the stream-ordered `cudaMallocAsync` pool | Each runs the same sequence of real convolutions on a fresh stream, after one warm-up pass (so one-time allocations are counted apart from the steady state)."),
    ('02', "**Exercise 1 (predict).** Before you run the chart's cell: on `one_conv`, how many times slower per call (median host time) will `malloc_per_call` be than `fixed_arena`?"),
    ('02', 'The price is memory held whether or not it is used (the *workspace memory held* column above), and a plan that needs more than the arena holds must fall back to another plan that fits (lesson 05 prices such a cap).'),
    ('01', "**Exercise 1 (predict).** Before you run the chart's cell: for fp16 fprop at the base shape, which layout's heuristic plan asks for less workspace, `'NCHW'` or `'NHWC'`?"),
    ('02', 'Strategies may pick a plan with a smaller workspace when they cannot get the one the heuristic wants (a *fallback*).'),
    ('01', "`planned_graph`, below, is how every graph in this workbook is planned: `validate` and `build_operation_graph` check the graph, `create_execution_plans` asks cuDNN's heuristics for candidate plans (best first), the `select`/`deselect` calls filter them, and `check_support` drops those this GPU cannot run."),
    ('01', 'Find times each algorithm once, so no spread is measured: close ranks can swap from one run to the next.'),
    ('01', "Dark bars: the plan cuDNN's heuristic picks; pale bars: the largest workspace any candidate plan asks."),
    ('02', '*GPU wall time* is the time between two CUDA events recorded on the stream before the first call and after the last, over the number of calls: the kernels **plus any time the GPU sat idle waiting for the host**.'),
    ('02', 'Before each convolution the `Runner` calls `get(req)`: `req` says how many bytes (`req.nbytes`), for which plan and on which stream (`req.stream_ptr`); `get` returns a device pointer and how many bytes are usable there (never fewer than asked: the Runner refuses to run otherwise).'),
    ('02', "When the allocation fails, PyTorch catches the out-of-memory error and tries the next plan (`try_configs`); when benchmarking (`torch.backends.cudnn.benchmark`) it halves the workspace it asks for until an allocation succeeds and drops the plans that need more (`generate_and_filter_plans`): a fallback, like the `Runner`'s below."),
    ('00', 'Ask for something that was not recorded (in recorded mode) and the panel says so, names the nearest recorded values and empties the chart: a chart never shows numbers measured for another convolution than the one on its controls.'),
    ('01', '**Exercise 2 (explore).** Does a larger batch make fp32 NCHW ask for a workspace?'),
    ('00', "Here: the lessons' base convolution (a ResNet-50 3x3 layer at batch 32) in both memory layouts."),
}

#: (lesson, sentence) pairs not yet reviewed: each must become a claim, a generated sentence or an
#: entry of NOT_CLAIMS (this set only shrinks)
UNREVIEWED: set = {
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
    (
        "08",
        "**Learning goals** * read two recordings of the same calls side by side, each with its provenance (GPU, cuDNN, date); * predict from arithmetic intensity which convolutions gain from more memory bandwidth, then check; * see whether cuDNN's heuristic and autotuned plans change between two GPUs of one architecture; * place the usual architecture advice (Ampere: TF32; Hopper: FP8; Ada: FP8 inference) next to what was measured.",
    ),
    (
        "08",
        "The H200 has HBM3e with more memory bandwidth, so its bandwidth roof sits higher and its ridge (where the two roofs meet) moves to a lower arithmetic intensity.",
    ),
    ("08", "Before you look at the H200's times: which shape should gain most?"),
    ("08", "**Exercise 1.** Which shape gains most (the smallest time ratio, H200 over H100)?"),
    ("08", "`'3x3 @28'`."),
    (
        "08",
        "Shapes past the ridge run at the same speed on both GPUs: more bandwidth does not help a convolution limited by its math (or, for these small layers, by how well it fills the GPU).",
    ),
    ("08", "A gain shows where a point runs close to the bandwidth roof."),
    (
        "08",
        "Left of the ridge is not enough: a shape far below both roofs (conv1, with its 3 input channels) is limited by something else, and more bandwidth leaves it where it was.",
    ),
    (
        "08",
        "The same base convolution (fp16 NHWC, a ResNet-50 stage-1 3x3 layer at batch 32) through fusion, precision and a batch-size sweep.",
    ),
    (
        "08",
        "**Exercise 2.** Is the fastest (autotuned) plan of the base convolution a different plan on the H200?",
    ),
    (
        "08",
        "What the base convolution measured on the two Hoppers, per dtype: Compare the rows yourself: does TF32 pay off against true fp32 on both GPUs, and is fp8 faster than fp16 for this small convolution?",
    ),
    (
        "08",
        "A datasheet peak is reached only by shapes large enough to fill the tensor cores; for a small layer the dtype changes the kernel cuDNN picks more than the peak.",
    ),
    (
        "08",
        "* Two GPUs of one architecture differ where their datasheets differ: here memory bandwidth, so the convolutions that run against the bandwidth roof gain, and compute-bound shapes run at the same speed.",
    ),
    (
        "08",
        "* Arithmetic intensity, from tensor sizes alone, says which layers a faster memory can help; where a point sits under its roof says whether it will.",
    ),
    (
        "08",
        "* The heuristic's pick is the same on both; the autotuned best can swap between plans a few percent apart: autotune on the GPU you deploy on, and read small margins from single runs with care.",
    ),
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
        "The chart: the top panel is the time of each call with the heuristic's plan and the fastest plan; the middle panel is the **memory timeline** (the workspace part of a memory snapshot): how much workspace each strategy holds while each call runs, starting from nothing; the bottom panel is the **budget curve**.",
    ),
    ("09", "**Exercise 1.** Which layer's fastest plan asks for the largest workspace?"),
    (
        "09",
        "`rep.strategies` runs the same 53 calls, each with its fastest plan, under every strategy of lesson 02: GPU time of a pass (two events around it: kernels plus any time the GPU waited for the host), host time, the peak workspace held, what is still held afterwards, and allocator calls in the first pass and in a later one.",
    ),
    (
        "09",
        "A fixed arena here is sized for the network's largest workspace; a keyed cache with a 32 MiB budget has to fall back to a plan with a smaller workspace where one needs more.",
    ),
    (
        "09",
        "`rep.budget`: for each workspace cap, the pass time if every call used its fastest plan within the cap.",
    ),
    (
        "09",
        'It is a sum of the plan times measured above (no new measurement), so it answers "I can spare 64 MiB" in milliseconds lost.',
    ),
    ("09", "`calls_changing_plan` counts the calls that must take a slower plan."),
    ("09", "Which cap of the budget curve (in MiB) loses the least time while keeping within it?"),
    (
        "09",
        "(Within 3% counts: passes differ that much from run to run.) The H200's recording holds the same report for every preset at batch 32, fp16, NHWC, so the panel opens on it (the H100's holds ResNet-50 and ResNeXt-50: pick it in the GPU list).",
    ),
    (
        "09",
        "The depthwise networks (MobileNetV2, ConvNeXt) and the DeepLabV3 head get their fastest plans with a few bytes or kilobytes of workspace; VGG16 and the ResNets ask for megabytes.",
    ),
    (
        "09",
        "* A network's workspace question is per layer and per pass: the fastest plan of each layer, and what a strategy holds over the whole pass.",
    ),
    ("09", "* A cap trades workspace for time; the budget curve says how much, from measured plan times."),
    (
        "10",
        "**Learning goals** * read a trace: kernels on their stream, CUDA API calls on the host, and the gaps between them; * tell a plan's main convolution kernel from the layout conversions, zeroing and transforms around it; * see malloc-per-call's idle GPU, not just its slower number; see the race's overlap; * read cuDNN's frontend log: which engines were proposed and which built.",
    ),
    ("10", "Every runnable plan of the base convolution, each run 3 times under the tracer."),
    ("10", "Lesson 04 measured that the fused graph is faster."),
    (
        "10",
        "**Exercise 2.** In the strategy timeline, under which strategy does the GPU sit idle the longest?",
    ),
    (
        "10",
        "* A strategy's cost is visible in a trace: malloc-per-call leaves the GPU idle between calls; arenas, caches and pools do not.",
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
