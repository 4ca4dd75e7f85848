"""Generate notebooks/*.ipynb (no outputs, kernel python3, stable cell ids).

The notebooks are written by this script: edit the lesson here, then run
``.venv/bin/python scripts/make_notebooks.py`` and commit both.
"""
import sys
from pathlib import Path

import nbformat

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "notebooks")
IMPORTS = "import labkit\nfrom labkit import check, lessons, plots, widgets\n\nlessons.banner()"


def md(s):
    return nbformat.v4.new_markdown_cell(s.strip("\n"))


def code(s):
    return nbformat.v4.new_code_cell(s.strip("\n"))


def write(name, cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = cells
    for i, c in enumerate(nb.cells):
        c.id = f"c{i:02d}"  # stable ids: regenerating changes nothing that did not change
        c.metadata = {}
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    nbformat.validate(nb)
    p = OUT / f"{name}.ipynb"
    nbformat.write(nb, p)
    # stable ids make diffs small
    return p


def exercise(n, question, call, answer_hint):
    return [md(f"**Exercise {n}.** {question}"),
            code(f"answer = None  # {answer_hint}\ncheck.{call}(answer)")]


RECORDED_NOTE = """
> **Recorded or live?** The banner above says which. Recorded: every number comes from a real run on the
> GPU it names, and a control offers only the values recorded around the lesson's base (one factor at a
> time; "reset to base" to move another). Live: every chart is measured on your GPU as you move a control;
> while you read, the panel measures the values one step away from each control in the background (one GPU
> job at a time, stopped the moment you ask for something else), so the next move is often instant.
> `LABKIT_PREFETCH=0` turns that off.
"""

# ---------------------------------------------------------------------------------------------------
write("00_start_here", [
    md("""
# 00 · Start here

A hands-on workbook about **cuDNN workspaces**: the scratch memory a convolution asks for, what it buys,
and the ways a framework can hand it over. Every number you will see comes from a real cuDNN convolution
(through NVIDIA's cuDNN frontend, fed CuPy arrays), measured on your GPU, or recorded on one when you have none.

**In this notebook**
* which mode labkit runs in (live or recorded) and what this machine has;
* how a lesson is built: an experiment returns a table, a chart draws it, a panel lets you move the knobs;
* how the exercises check your answers;
* the list of lessons.
"""),
    code(IMPORTS),
    md("""
## What this machine has

`labkit.env.doctor()` probes the GPU, driver, CUDA runtime, CuPy and cuDNN, says which mode labkit picked
and why, and lists the recordings shipped with the workbook. Set `LABKIT_MODE=live` or `LABKIT_MODE=recorded`
before starting Jupyter to force a mode.
"""),
    code("print(labkit.env.doctor())"),
    md("""
## One experiment, one table

Each lesson question is one function in `labkit.experiments`. It takes a convolution (`labkit.ConvSpec`,
shapes in logical NCHW order plus dtype, memory layout and direction) and returns a tidy pandas DataFrame,
units in the column names (`_us` microseconds, `_bytes` bytes). The call is identical live and recorded;
the mode decides where the numbers come from. `lessons.data(...)` calls an experiment once per session and
reuses the result, so a lesson's text, charts and checks all show the same numbers.

Here: the lessons' base convolution (a ResNet-50 3x3 layer at batch 32) in both memory layouts.
"""),
    code('df = lessons.data("layout")\ndf'),
    md("Every result carries its provenance in `df.attrs`: mode, GPU, cuDNN version, date, and the exact request."),
    code("df.attrs"),
    md("""
## A chart from the table

`labkit.plots` turns a DataFrame into a plotly figure. It never measures and never invents a number. The
subtitle of every chart says where its numbers come from.
"""),
    code("plots.layout(df)"),
    md("""
The prose in the lessons is made the same way: a helper formats it from the DataFrame when the cell runs, so
it always matches the numbers above it.
"""),
    code("lessons.layout_summary(df)"),
    md(f"""
## A panel: controls and a chart that updates in place

A panel calls the experiment with the values on its controls and updates the chart in place. Try the
controls below.
{RECORDED_NOTE}
"""),
    code("panel = widgets.LayoutPanel()\npanel"),
    md("""
Panels can also be driven from code, which is how the tests (and you, in a script) use them. `set` changes
a control exactly as a click would and returns once the chart shows the new numbers; `panel.df` is the table
on screen.
"""),
    code('panel.set(N=8)\npanel.df[["layout", "conv_gpu_us", "convert_gpu_us", "workspace_bytes"]]'),
    md("""
Ask for something that was not recorded (in recorded mode) and the panel says so, names the nearest recorded
values and empties the chart: a chart never shows numbers measured for another convolution than the one on
its controls. In live mode the same call simply measures batch 7.
"""),
    code("panel.set(N=7)\npanel.error"),
    code("panel.reset()"),
    md("""
## Exercises

Each lesson ends with two or three questions. Put your answer in place of `None` and run the cell: the check
compares it with the numbers in the experiment's table (live or recorded) and says *correct* with a one-line
why, or gives a hint. `None` prints the question's hint.
"""),
    *exercise(1, "Which mode is labkit in on this machine: `'live'` or `'recorded'`?", "mode", "'live' or 'recorded'"),
    md("## The lessons"),
    code("lessons.contents()"),
    md("""
## Recap

* labkit runs **live** on a CUDA GPU with cuDNN, **recorded** anywhere else; the banner and every chart say which.
* An experiment returns a DataFrame with provenance; a plot draws it; a panel moves its knobs and redraws in place.
* Text with numbers is formatted from the data when the cell runs; exercises are checked against the same data.

Next: [01 · What is a workspace?](01_what_is_a_workspace.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("01_what_is_a_workspace", [
    md("""
# 01 · What is a workspace?

**Learning goals**
* say what a cuDNN workspace is, who decides its size and who must provide it;
* read the classic algorithm table: time against workspace for each algorithm;
* see how the workspace of the *same* shape changes with dtype, layout and direction;
* see how time and workspace scale as one dimension of the problem grows.
"""),
    code(IMPORTS),
    md("""
## Scratch memory, asked for by the plan

A convolution can be computed many ways: directly, as an implicit GEMM, as an explicit GEMM over an unfolded
(im2col) copy of the input, through FFTs, through Winograd transforms, with split-K partial sums, after
transposing NCHW data into the channels-last order tensor cores like. Many of those need a block of device
memory besides the input, filter and output: the **workspace**.

cuDNN does not allocate it. Each execution plan (in the old API: each *algorithm*) states how many bytes it
needs (`get_workspace_size`), and the caller passes a pointer to at least that much memory on every call.
How the caller finds that memory, every call, on every stream, is the subject of the next lesson. First: how
much is asked for, and what it buys.

## The classic algorithm table

cuDNN's legacy API names eight forward algorithms. `cudnnFindConvolutionForwardAlgorithmEx` runs each one and
reports its time and workspace; labkit calls it through a small ctypes binding. Here for the base convolution
in fp16, NCHW layout.
"""),
    code('algos = lessons.data("algorithms", spec=lessons.base(layout="NCHW"))\nplots.algorithms(algos)'),
    code("lessons.algorithms_summary(algos)"),
    md(f"""
The fastest algorithm is rarely the one without a workspace: scratch memory is how an algorithm trades
memory for speed. Change dtype and layout below and watch which algorithms survive and what they ask for.
{RECORDED_NOTE}
"""),
    code("algo_panel = widgets.AlgorithmsPanel()\nalgo_panel"),
    md("""
## Same dims, different workspaces

A workspace depends on everything about the convolution, not just its shape. Below: the same shape in every
dtype, both layouts and all three directions (fprop: the forward pass; dgrad: the gradient of the input;
wgrad: the gradient of the filter). Bars show the plan cuDNN's heuristic picks; whiskers the smallest and
largest workspace among all the plans cuDNN offers for that variant.
"""),
    code('sizes = lessons.data("workspace_sizes")\nplots.workspace_sizes(sizes)'),
    code("lessons.workspace_sizes_summary(sizes)"),
    md("""
Keep this chart in mind for lesson 02: a cache that keys workspaces by shape alone would hand all of these
variants the same buffer.

## How workspace scales with the problem

Grow one dimension at a time (batch N, channels C = K, image size H = W, filter R = S) and watch the time of
the heuristic plan and its workspace. The heuristic may switch plans along the way, and with it the workspace.
"""),
    code("sweep_panel = widgets.SweepPanel()\nsweep_panel"),
    code('sweep_panel.set(field="C=K")\nlessons.sweep_summary(sweep_panel.df)'),
    md("## Exercises"),
    *exercise(1, "In the algorithm table above (fp16, NCHW), which algorithm did cuDNN's Find rank fastest? "
                 "Answer with its name, e.g. `'FFT'`.", "fastest_algorithm", "an algorithm name, e.g. 'FFT'"),
    *exercise(2, "How many **bytes** of workspace does that fastest algorithm ask for?", "workspace_bytes_for_plan",
              "a number of bytes"),
    *exercise(3, "For fp16 fprop at the base shape, which layout's heuristic plan needs the least workspace: "
                 "`'NCHW'` or `'NHWC'`?", "no_workspace_layout", "'NCHW' or 'NHWC'"),
    md("""
## Recap

* A workspace is device scratch memory a plan asks for and the **caller provides** on every call.
* Its size is set by the plan, and the plan depends on algorithm, dtype, layout, direction and shape: the same
  dims can need nothing or hundreds of MiB.
* The fastest plan often needs the largest workspace; refusing it has a price in time (lesson 05 measures it).

Next: [02 · Workspace strategies](02_workspace_strategies.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("02_workspace_strategies", [
    md("""
# 02 · Workspace strategies

**Learning goals**
* compare the ways to provide a workspace on real workloads: per-call host time, GPU wall time, allocations,
  peak and held memory;
* explain why allocating per call hurts, and what caching pools change;
* explain why a cache key without dtype and layout is a bug, from measured workspace sizes;
* see what a fixed arena costs and what each strategy does when memory runs out.
"""),
    code(IMPORTS),
    md("""
## The strategies (`labkit.workspace`)

| strategy | what it does |
| --- | --- |
| `preallocated` | the baseline: one exact-size buffer per convolution, made before the run, never freed |
| `fixed_arena` | one big buffer made up front; a plan that needs more falls back to one that fits |
| `malloc_per_call` | ask the size, `cudaMalloc` it, run, `cudaFree` it: every call |
| `keyed_cache` | one buffer per key (the full spec + plan), kept and reused, LRU-evicted under a byte budget |
| `scratchpad_per_stream` | oneDNN's user scratchpad: one grow-only buffer per stream |
| `cupy_pool` / `async_pool` | CuPy's caching `MemoryPool` and the stream-ordered `cudaMallocAsync` pool |

Each runs the same sequence of real convolutions on a fresh stream, after one warm-up pass (so one-time
allocations are counted apart from the steady state). *Host time per call* is the strategy plus the launch,
*inside the strategy* only its get and put. *GPU wall time* is the time between two CUDA events recorded on the
stream before the first call and after the last, over the number of calls: the kernels **plus any time the GPU sat
idle waiting for the host** (with `malloc_per_call`, each `cudaFree` waits for the GPU and the next launch waits
for `cudaMalloc`, so its GPU wall time is mostly idle time, not slower kernels). *Allocations* are `cudaMalloc`
calls for the strategies that own their memory, and requests to the pool for `cupy_pool` / `async_pool`: a pool
serves most requests from blocks it keeps, without calling `cudaMalloc`. Strategies may pick a plan with a
smaller workspace when they cannot get the one the heuristic wants (a *fallback*).

## One convolution, repeated
"""),
    code('one = lessons.data("strategies", workload="one_conv", repeats=20)\nplots.strategies(one)'),
    code("lessons.strategies_summary(one)"),
    md("""
**Why per-call malloc hurts.** `cudaMalloc` is a driver call, and `cudaFree` waits until the GPU is idle:
each call's free stalls the host until the convolution it just launched is done, so the host can never run
ahead and queue work. The allocator sits on the hot path, on every call. The caching pools keep freed blocks
and hand them out again, which makes "allocate per call" cheap without a cache of your own; the other
strategies simply stop allocating once they are warm.

Choose another workload: ResNet-50 forward passes (53 different convolutions), a seeded stream of random
shapes, a batch that keeps growing, or memory pressure.
"""),
    code("strat = widgets.StrategiesPanel()\nstrat"),
    code('strat.set(workload="random_shapes")\nlessons.strategies_summary(strat.df)'),
    md("""
## A cache key that forgets dtype and layout

A well-known sketch of a workspace cache keys buffers by shape and convolution parameters only. Here are the
two keys `labkit.workspace` defines (read from its source):
"""),
    code('lessons.show_source("keys", "full_key", "dims_only_key")'),
    md("""
Every variant in the chart below has the same dims, so the same dims-only key. The chart shows what each
actually needs.
"""),
    code('sizes = lessons.data("workspace_sizes")\nlessons.dims_only_summary(sizes)'),
    code("plots.workspace_sizes(sizes)"),
    md("""
A dims-only key is fine only while every convolution of a given shape has the same dtype, layout, direction
and plan, which no training loop guarantees (mixed precision, the backward pass, autotuning). The full key
costs nothing extra: it is a tuple of fields the caller already has.

## The fixed arena

One allocation before the first call, none after: no allocator on the hot path, and the memory is there even
when the rest of the GPU fills up. The price is memory held whether or not it is used (the *workspace memory*
panel above), and a plan that needs more than the arena holds must fall back to a slower one that fits.

## Memory pressure and fallback

The `pressure` workload leaves only a few MiB of device memory free while the convolution runs. A strategy
that allocates on demand cannot get the workspace the heuristic plan wants and falls back to a plan that needs
less (as PyTorch and TensorFlow do), and says so in its `fallbacks` count.
"""),
    code('pressure = lessons.data("strategies", workload="pressure", repeats=20)\nplots.strategies(pressure)'),
    code("lessons.pressure_summary(pressure)"),
    md("## Exercises"),
    *exercise(1, "On the `random_shapes` workload, which strategy has the lowest median host time per call? "
                 "(Any within 5% of the lowest counts.)", "fastest_strategy", "a strategy name, e.g. 'cupy_pool'"),
    *exercise(2, "On `one_conv`, how many times slower per call (median host time) is `malloc_per_call` than "
                 "`fixed_arena`?", "malloc_slowdown", "a ratio, e.g. 2.5"),
    *exercise(3, "A dims-only cache first stores the workspace of the fp16 NHWC fprop heuristic plan. Then fp32 "
                 "NHWC fprop (same dims) arrives and gets that buffer back. How many **bytes** short is it?",
              "dims_only_shortfall", "a number of bytes"),
    md("""
## Recap

* Allocating per call puts `cudaMalloc`/`cudaFree` (and the device synchronisation of the free) on every call;
  caching pools or persistent buffers take it off the hot path.
* Persistent buffers cost held memory: a fixed arena holds its whole size; a keyed cache holds what its keys
  needed, within a budget, and evicts least recently used.
* A cache key must contain everything the workspace depends on: dtype, layout, direction and plan, not just dims.
* Under memory pressure, a good strategy falls back to a plan that fits, and says so.

Next: [03 · Precision and layout](03_precision_and_layout.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("03_precision_and_layout", [
    md("""
# 03 · Precision and layout

**Learning goals**
* compare fp32, tf32, fp16, bf16 and fp8 on speed and on error, telling apart the error of the arithmetic and
  the error of rounding the inputs;
* compare NCHW and NHWC, including what converting a user's NCHW tensors costs;
* place real convolutions on a roofline and read how far they are from the GPU's ceilings.
"""),
    code(IMPORTS),
    md("""
## Error vs speed

Each dtype runs the same seeded convolution (heuristic plan) and is compared with a float64 reference in two
ways: **arithmetic error** against float64 on the inputs exactly as cuDNN read them (rounded to the dtype), and
**total error** against float64 on the original data (what choosing the dtype costs end to end). The dotted
segment between them is what rounding the inputs adds. tf32 keeps fp32 storage and rounds only inside the
tensor cores; fp8 (e4m3) inputs write an fp16 output.
"""),
    code('prec = lessons.data("precision")\nplots.precision(prec)'),
    code("lessons.precision_summary(prec)"),
    md(f"Move the shape or the layout (the panel runs every dtype for the convolution on its controls).\n{RECORDED_NOTE}"),
    code("prec_panel = widgets.PrecisionPanel()\nprec_panel"),
    md("""
## NCHW vs NHWC, conversion included

Tensor cores want channels innermost (NHWC). An NCHW convolution either uses slower kernels or transposes
internally, often in its workspace. If your tensors are NCHW, running in NHWC means converting them: the upper
bars are that conversion, measured as CuPy transpose-copies of the inputs there and the output back.
"""),
    code('lay = lessons.data("layout")\nplots.layout(lay)'),
    code("lessons.layout_summary(lay)"),
    code("layout_panel = widgets.LayoutPanel()\nlayout_panel"),
    md("""
## The roofline

For the ResNet-50 convolution shapes: arithmetic intensity (FLOPs per byte, counting each tensor moved once, and
of the input only the pixels some filter window covers: a 1x1 stride-2 convolution reads one pixel in four)
against the TFLOP/s achieved. The roof is the GPU's datasheet peak for the dtype (flat) and its memory
bandwidth (diagonal), from `labkit.ceilings`; a GPU missing from that table gets no roof, and the chart says so.
"""),
    code('roof = lessons.data("roofline")\nplots.roofline(roof)'),
    code("lessons.roofline_summary(roof)"),
    code("roof_panel = widgets.RooflinePanel()\nroof_panel"),
    md("## Exercises"),
    *exercise(1, "Order the five dtypes from most to least accurate by **total** error (the diamonds), e.g. "
                 "`['fp32', 'fp16', ...]`.", "precision_order", "a list of the five dtype names"),
    *exercise(2, "How many times faster is the convolution itself in NHWC than in NCHW (conversion excluded)?",
              "nhwc_speedup", "a ratio, e.g. 1.5"),
    *exercise(3, "Your tensors are NCHW. For this one convolution, does converting to NHWC, running there and "
                 "converting back beat running in NCHW? (`True` / `False`)", "nhwc_pays_off", "True or False"),
    md("""
## Recap

* Lower precision is faster on tensor cores; its error comes from two places, the arithmetic and the rounding
  of the inputs, and for fp8 the second dominates.
* The layout changes the kernel, the speed and the workspace; converting per layer can eat the gain, so keep a
  network in one layout.
* Real convolutions sit well below the roof; the roofline tells you which ceiling is even relevant.

Next: [04 · Fusion](04_fusion.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("04_fusion", [
    md("""
# 04 · Fusion

**Learning goals**
* compare a fused convolution + bias + ReLU (+ residual add), one cuDNN graph, with the same work as separate
  kernels;
* see where the difference comes from: intermediate tensors allocated, written and read back;
* find a case where fusion loses, and learn to measure rather than assume.
"""),
    code(IMPORTS),
    md("""
## Fused vs unfused

*Fused*: one cuDNN graph (convolution, bias add, optional residual add, ReLU) with virtual intermediates: they
never reach device memory. *Unfused*: cuDNN's convolution, then CuPy kernels for the bias, the add and the ReLU,
each writing a real tensor. *Allocated* counts real allocations (tensors and workspaces); *HBM traffic* is a
model from tensor sizes (each tensor written once and read once per kernel), not a hardware counter.
"""),
    code('fused = lessons.data("fusion")\nplots.fusion(fused)'),
    code("lessons.fusion_summary(fused)"),
    md("The numbers behind the chart, in bytes (*intermediate* = tensors the unfused path writes besides the output):"),
    code('fused[["epilogue", "path", "gpu_us", "allocated_bytes", "intermediate_bytes", "modelled_hbm_bytes"]]'),
    md("""
## Does fusion always win?

The same comparison in fp32 (true fp32 math). *fused* runs the plan cuDNN's heuristic ranks first for that
pattern in that precision, as a framework that does not autotune would; *fused, autotuned* times every plan cuDNN
offers for the fused graph and keeps the fastest.
"""),
    code('fused32 = lessons.data("fusion", spec=lessons.base(dtype="fp32"))\nplots.fusion(fused32)'),
    code("lessons.fusion_summary(fused32)"),
    md(f"Try other shapes and dtypes.\n{RECORDED_NOTE}"),
    code("fusion_panel = widgets.FusionPanel()\nfusion_panel"),
    md("## Exercises"),
    *exercise(1, "Base spec (fp16): how many times faster is fused `bias_relu` than unfused?", "fusion_speedup",
              "a ratio, e.g. 2.0"),
    *exercise(2, "How many **bytes** of intermediate tensors does the unfused `bias_relu` path allocate?",
              "fusion_saved_bytes", "a number of bytes"),
    *exercise(3, "In fp32, for which epilogue is the fused graph *slower* than the unfused sequence? "
                 "(`'bias_relu'`, `'bias_relu_add'`, or `'none'`)", "fusion_loses", "an epilogue name or 'none'"),
    md("""
## Recap

* Fusion removes intermediate tensors: less memory allocated, less traffic, fewer launches.
* Its gain is largest where the convolution is fast and the elementwise work is memory-bound.
* A fused graph still needs a good plan: the heuristic's first pick can be far from the best; autotune it, in the
  precision you use.

Next: [05 · Plans, autotuning and caching](05_plans_autotune_and_caching.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("05_plans_autotune_and_caching", [
    md("""
# 05 · Plans, autotuning and caching

**Learning goals**
* see every plan cuDNN offers for one convolution: the heuristic pick, the fastest and the slowest;
* measure what a workspace cap costs;
* measure what building a graph costs, what a cache hit saves, and when autotuning pays for itself.
"""),
    code(IMPORTS),
    md("""
## Every plan

cuDNN's heuristics rank the engine configurations that can run a graph; labkit builds all of them, gives each
its own workspace, and times each by CUDA-graph replay (warm-up, repeat until stable, stop early when a plan is
already far slower than the best). Here for fp16 NCHW.
"""),
    code('pl = lessons.data("plans", spec=lessons.base(layout="NCHW"))\nplots.plans(pl)'),
    code("lessons.plans_summary(pl)"),
    md(RECORDED_NOTE),
    code('plans_panel = widgets.PlansPanel(layout="NCHW")\nplans_panel'),
    md("""
## What a workspace cap costs

`deselect_workspace_greater_than(cap)` drops every plan that needs more than `cap` bytes. Below: the best plan
left under each cap (all of them autotuned) and its slowdown against no cap.
"""),
    code('cp = lessons.data("caps", spec=lessons.base(layout="NCHW"))\nplots.caps(cp)'),
    code("lessons.caps_summary(cp)"),
    code("caps_panel = widgets.CapsPanel()\ncaps_panel"),
    md("""
## Build once, reuse: what building costs

Building a graph (heuristics, plan compilation) takes host time. The first build in a process is the slowest;
an identical rebuild is cheaper (cuDNN's own caches are warm); a hit in labkit's graph cache is a dictionary
lookup. A built graph can also be serialized and deserialized (how a framework persists its choices).
Autotuning adds the time of running every plan.
"""),
    code('bc = lessons.data("build_cost")\nplots.build_cost(bc)'),
    code("lessons.build_cost_summary(bc)"),
    md("""
**When does autotuning pay off?** When the time it saves per call, times the number of calls, exceeds what it
cost. In fp32 NCHW the heuristic does not pick the fastest plan:
"""),
    code('bc32 = lessons.data("build_cost", spec=lessons.base(dtype="fp32", layout="NCHW"))\nplots.build_cost(bc32)'),
    code("lessons.build_cost_summary(bc32)"),
    md("## Exercises"),
    *exercise(1, "fp16 NCHW: how many times slower is the slowest plan than the fastest?", "worst_vs_best",
              "a ratio, e.g. 10"),
    *exercise(2, "fp16 NCHW with the workspace capped at 1 MiB: how many times slower is the best plan that fits "
                 "than the unlimited best?", "cap_slowdown", "a ratio, e.g. 1.5"),
    *exercise(3, "fp32 NCHW: after how many calls has autotuning paid for itself? (`'never'` is a valid answer "
                 "where it never does.)", "autotune_payoff_calls", "a number of calls, or 'never'"),
    md("""
## Recap

* One convolution has dozens of plans whose times differ by orders of magnitude; the heuristic pick is usually
  good, not always the best.
* Capping the workspace removes plans; below the fastest plan's need the cost can be large, above it nothing.
* Build once and cache the graph; autotune when the calls to come outweigh its cost, and persist the choice.

Next: [06 · Streams and scratchpads](06_streams_and_scratchpads.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("06_streams_and_scratchpads", [
    md("""
# 06 · Streams and scratchpads

**Learning goals**
* see, measured, what happens when convolutions on concurrent streams share one workspace;
* understand why plain Python launches hide the race and CUDA graphs expose it;
* map oneDNN's scratchpad modes onto `labkit.workspace.Scratchpad(shared=...)`.
"""),
    code(IMPORTS),
    md("""
## The experiment

Two (or four) CUDA streams each run a batch of the same small convolution, whose plan uses a workspace. Either
all streams share **one** workspace, or each stream has its own. Every output is compared bit for bit with the
same convolution run alone, and with the float64 reference. Launches are either plain Python calls, one per
convolution, or one CUDA graph per stream holding the whole batch, both graphs launched together.
"""),
    code("races = lessons.race_all()\nplots.race(races)"),
    code("lessons.race_summary(races)"),
    md("""
**Why Python launches hide it.** One Python launch costs the host longer than this small convolution runs on
the GPU, so by the time the second stream's kernel is launched, the first stream's has usually finished: the
two never use the workspace at the same time. A CUDA graph takes the host out of the loop; the streams' kernels
then really overlap, and each overwrites the other's scratch data. The bug was there all along; the timing hid
it. A test that never overlaps streams cannot find it.

## oneDNN's scratchpad modes

oneDNN lets a primitive manage its scratchpad itself (*library* mode, the default) or have the user pass one in
(*user* mode: `scratchpad_mode::user`), and warns that primitives running concurrently must not share one user
scratchpad. labkit's `Scratchpad` strategy models the user mode:
"""),
    code('lessons.show_source("workspace", "Scratchpad")'),
    md("""
`Scratchpad(shared=False)` keeps one grow-only buffer per stream: the safe way to use a user scratchpad.
`Scratchpad(shared=True)` hands every stream the same buffer: the hazard measured above.
"""),
    md(f"Pick the launch method and the number of streams.\n{RECORDED_NOTE}"),
    code("race_panel = widgets.RacePanel()\nrace_panel"),
    md("## Exercises"),
    *exercise(1, "Graph launch, 2 streams, shared scratchpad: how many outputs were corrupted?", "race_mismatches",
              "a count"),
    *exercise(2, "With a shared scratchpad on 2 streams, which launch method corrupted fewer outputs: `'graph'` or "
                 "`'python'`?", "race_hidden_by", "'graph' or 'python'"),
    *exercise(3, "oneDNN user mode with one scratchpad given to primitives on concurrent streams: is that "
                 "`Scratchpad(shared=True)` or `Scratchpad(shared=False)`? Answer the value of `shared`.",
              "scratchpad_shared_flag", "True or False"),
    md("""
## Recap

* A workspace is private to one call in flight: two kernels that may overlap need two workspaces.
* Slow launches hide the race, graphs expose it: test with the launch method you ship.
* One scratchpad per stream, sized to the largest plan run there, is safe and cheap.

Next: [07 · Lab](07_lab.ipynb)
"""),
])

# ---------------------------------------------------------------------------------------------------
write("07_lab", [
    md("""
# 07 · Lab

A free dashboard. Pick a convolution and a chart; every panel has **reset to base** and **save CSV** (the
numbers on screen with their provenance). In recorded mode the controls offer the recorded values; live, set
any convolution you like (an impossible one, say padding larger than the filter reaches, is explained in the
panel instead of raising).
"""),
    code(IMPORTS),
    md("""
## Your convolution, any chart

`chart` picks the experiment: precision, layout, fusion, plans, caps, algorithms, build cost, workspace sizes.
"""),
    code("lab = widgets.LabPanel()\nlab"),
    md("""
The numbers on screen, as a DataFrame: `lab.results()` has every row, with the provenance (mode, GPU, cuDNN,
date, request) in front of each; the **save results.csv** button writes it, and so does `lab.to_csv("results.csv")`.
Here, its size, once what is the same on every row (the provenance among it), and the first rows of the columns
that change:
"""),
    code('''res = lab.results()
same = [c for c in res.columns if res[c].astype(str).nunique() == 1]
print(f"{len(res)} rows x {len(res.columns)} columns; the same on every row:",
      ", ".join(f"{c}={res[c].iloc[0]}" for c in same if c != "request"))
res.drop(columns=same).head(8)'''),
    md("## Strategies on any workload"),
    code("widgets.StrategiesPanel()"),
    md("## Sweeps"),
    code("widgets.SweepPanel()"),
    md("## Roofline"),
    code("widgets.RooflinePanel()"),
    md("## Scratchpad race"),
    code("widgets.RacePanel()"),
    md("""
## Where next

* Record your own GPU: `python -m labkit record` (then recorded mode can show it too).
* Compare the strategies on more layers: `python -m labkit bench strategies`.
* Read the code behind each chart: `labkit/experiments.py` (what is measured) and `labkit/plots.py` (how it is drawn).
"""),
])
print("written to", OUT)
