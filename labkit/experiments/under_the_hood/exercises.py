"""Lesson 10's exercises (`labkit.experiments.exercise.Exercise`): work out how much host work fits
before a loop of calls leaves the GPU waiting, predict how many kernels the NCHW heuristic plan
launches and which strategy leaves the GPU idle longest, explain why the GPU idles under every
strategy of a Python-launched loop, and find how long the race's streams overlap with Python
launches. Answers come from the traces in use (`core.result`, the same the lesson draws).
"""

from __future__ import annotations

from ...draw.plots import ok_rows
from ...draw.units import us_text
from ...errors import InvalidSpec
from ...gpu.workspaces import labels
from ..core import BASE, result
from ..exercise import Exercise, count, equal, explain, number
from ..worked import slips, worked
from .race_trace import overlap_total, why_they_met
from .runs import heuristic_plan

#: the layout the predict exercise asks about (the base convolution's other layout)
NCHW = BASE.replace(layout="NCHW")


# ---- predict: kernels of the NCHW heuristic plan ----------------------------------------------
def _nchw():
    df = ok_rows(result("kernels", spec=NCHW))
    name = heuristic_plan(df)
    return df, name, df[df.plan_name == name]


def _nchw_kernels() -> int:
    _, _, mine = _nchw()
    return int(round(float(mine.kernels_per_call.iloc[0])))


def _nchw_why(truth: int) -> str:
    df, name, mine = _nchw()
    nhwc = ok_rows(result("kernels", spec=BASE))
    base = nhwc[nhwc.plan_name == heuristic_plan(nhwc)]
    roles = ", ".join(f"{r.role} x{r.launches_per_call:g}" for r in mine.itertuples())
    conv = mine[mine.role == "layout conversion"]
    spent = float((conv.kernel_us * conv.launches_per_call).sum())
    return (
        f"{name} launches {truth} per call in NCHW ({roles}), against "
        f"{int(round(float(base.kernels_per_call.iloc[0])))} in NHWC. Its tensor-core kernel wants NHWC: the "
        f"layout conversions before and after it take {us_text(spent)} of GPU time per call, each reading "
        "and writing a whole tensor."
    )


def _nchw_leaks(truth: int):
    return (rf"NCHW[^\n]{{0,200}}(?<!\d){truth} kernels",)


nchw_kernels = Exercise(
    name="nchw_kernels",
    lesson="10",
    kind="predict",
    question="Before its trace: how many kernels (memsets count) will one call of the heuristic's plan "
    "launch for the same convolution in NCHW?",
    truth=_nchw_kernels,
    parse=count("a count of kernels"),
    judge=equal,
    why=_nchw_why,
    hints=(
        "count the NHWC plan's kernels in the chart above, then add what NCHW needs around them: the "
        "tensor cores read NHWC.",
        "a layout conversion is a kernel of its own; which tensors would need one, before and after?",
    ),
    wrong=lambda answer, truth: f"{answer:g} is {'too many' if answer > truth else 'too few'}.",
    leaks=_nchw_leaks,
)


# ---- explain, worked out: how much host work fits before the GPU waits ----------------------------
def _pick():
    df = ok_rows(result("kernels", spec=BASE))
    return df[df.plan_name == heuristic_plan(df)].iloc[0]


def _headroom_inputs() -> dict:
    row = _pick()
    return dict(gpu_us=float(row.plan_kernel_us), host_us=float(row.host_us))


def _headroom_model(gpu_us, host_us) -> float:
    """Microseconds of extra host work per call before a loop of calls leaves the GPU waiting."""
    return gpu_us - host_us


def _headroom_why(truth: float) -> str:
    x = _headroom_inputs()
    text = (
        f"{x['gpu_us']:.1f} - {x['host_us']:.1f} = {truth:.1f} us. In a loop the host launches the next call "
        f"while the GPU runs this one: as long as the host needs less per call than the GPU's "
        f"{x['gpu_us']:.1f} us, the GPU always has work queued."
        if truth > 0
        else f"{x['gpu_us']:.1f} - {x['host_us']:.1f} = {truth:.1f} us: the host already needs longer per "
        "call than the GPU, so a loop of these calls leaves the GPU waiting."
    )
    strat = result("strategies", at_hand_only=True, workload="one_conv", repeats=20)
    if strat is None or not truth > 0:
        return text
    per = ok_rows(strat).set_index("strategy")["strategy_us_per_call"]
    over = [f"{str(n).split(' (')[0]} ({v:.1f} us)" for n, v in per.items() if v > truth]
    fits = (
        f"{', '.join(over)} add more than that, so under them the GPU would wait for the host; "
        "the others fit."
        if over
        else "every strategy fits."
    )
    return f"{text} Lesson 02 measured what each strategy's get and put add per call (one_conv): {fits}"


def _headroom_slips() -> list:
    x = _headroom_inputs()
    return [
        (x["host_us"] - x["gpu_us"], "that is the host's time minus the GPU's: the other way round."),
        (x["gpu_us"] / x["host_us"], "that is a ratio; the question asks microseconds."),
        (x["gpu_us"], "that is the GPU's whole time per call; the host's launch takes part of it already."),
    ]


launch_headroom = worked(
    name="launch_headroom",
    lesson="10",
    question=(
        "In the kernels chart, the heuristic's plan (marked on its plan axis) keeps the GPU busy for its GPU "
        "time per call, and the host needs its host time to launch one call. In a loop of such calls, how "
        "many microseconds of extra host work per call (a workspace strategy's get and put, your Python) fit "
        "before the GPU starts waiting for the host? (Negative if it waits already.)"
    ),
    inputs=_headroom_inputs,
    model=_headroom_model,
    rel=0.05,
    unit="microseconds",
    why=_headroom_why,
    hints=(
        "The GPU waits when the host needs longer to launch a call than the GPU needs to run one: compare "
        "the two panels' numbers for the heuristic's plan.",
        "Headroom = the plan's GPU time per call - the host time to launch it, both in microseconds.",
    ),
    wrong=slips(
        _headroom_slips,
        rel=0.05,
        unit="microseconds",
        high="more than the model gives: the host's own launch time already uses part of the GPU's time.",
        low="less than the model gives: take the heuristic's plan's GPU time and its host time.",
    ),
    wrong_answers=lambda truth: [-truth, truth * 3, truth * 1e3],
)


# ---- predict: the strategy that idles longest ---------------------------------------------------
def _timeline():
    df = result("strategy_timeline", workload="one_conv", calls=8)
    s = df.drop_duplicates("strategy").set_index("strategy")
    s = s[s.status == "ok"]
    if "idle_share_api" in s.columns:  # the pass the chart draws
        s = s.assign(idle_drawn=s.idle_share_api)
    else:
        s = s.assign(idle_drawn=s.idle_share)
    return df, s


def _names() -> list:
    return [str(i).split(" (")[0] for i in _timeline()[1].index]


def _parse_strategy(answer) -> str:
    """A strategy's name, from any spelling of its label a learner may copy (`labels.match`)."""
    full, names = [str(i) for i in _timeline()[1].index], list(dict.fromkeys(_names()))
    hit = (labels.match(answer, full) or labels.match(answer, names)) if isinstance(answer, str) else None
    if hit is None:
        raise InvalidSpec("answer", answer, f"must be a strategy: one of {', '.join(map(repr, names))}")
    return hit.split(" (")[0]


def _idlest() -> str:
    _, s = _timeline()
    return str(s.idle_drawn.idxmax()).split(" (")[0]


def _idle_why(truth: str) -> str:
    df, s = _timeline()
    full = next(i for i in s.index if str(i).split(" (")[0] == truth)
    allocs = df[(df.strategy == full) & df.name.str.contains("alloc|free", case=False, na=False)]
    return (
        f"{full}: the GPU waited {s.loc[full, 'idle_drawn']:.0%} of its traced pass ({len(allocs)} allocate "
        "and free calls in it). Every call's cudaFree waits for the GPU to finish (it synchronises), and "
        "the next call's cudaMalloc comes before its launch, so the kernels cannot run back to back."
    )


idle_strategy = Exercise(
    name="idle_strategy",
    lesson="10",
    kind="predict",
    question="Before the timeline: under which strategy will the GPU sit idle the largest share of its "
    "pass? Name it as lesson 02 does, e.g. 'fixed_arena'.",
    truth=_idlest,
    parse=_parse_strategy,
    judge=equal,
    why=_idle_why,
    hints=(
        "which strategy calls into the driver on every call, and which of those calls has to wait for "
        "the GPU?",
        "lesson 02: one strategy's GPU wall time was mostly idle time, not slower kernels.",
    ),
    wrong=lambda answer, truth: f"{answer} leaves the GPU idle less than another strategy does.",
    example="fixed_arena",
    wrong_answers=lambda truth: [n for n in _names() if n != truth][:2],
)


# ---- explain: why the GPU idles under every strategy ------------------------------------------
def _idle_reason() -> str:
    df, s = _timeline()
    syncs = df[df.kind == "sync"].groupby("strategy").size()
    if (syncs.reindex(s.index).fillna(0) >= s.calls).all():
        return "sync"
    if (s.idle_share < 0.05).all() and (s.gpu_us <= 1.05 * s.busy_us).all():
        return "tracing"
    return "python_loop"


def _idle_everywhere_why(truth: str) -> str:
    df, s = _timeline()
    rest = s.drop(s.idle_drawn.idxmax())
    calls = int(s.calls.iloc[0])
    per_gpu = float(s.busy_us.median()) / calls
    per_host = float(rest.host_us.median()) / calls
    untraced = 1 - rest.busy_us / rest.gpu_us
    syncs = df[df.kind == "sync"].groupby("strategy").size()
    facts = (
        f"Without the idlest strategy, the GPU still waited {rest.idle_drawn.min():.0%} to "
        f"{rest.idle_drawn.max():.0%} of each traced pass, and untraced each pass took longer than its "
        f"kernels ({untraced.min():.0%} to {untraced.max():.0%} of it idle). Each call keeps the GPU busy "
        f"{us_text(per_gpu)}; the host needs a median {us_text(per_host)} per call to launch it "
        f"({int(syncs.max()) if len(syncs) else 0} synchronisation per pass). "
    )
    return (
        facts
        + {
            "python_loop": "One Python loop launches each call after the previous: when the host needs as "
            "long to launch a call as the GPU needs to run it, the GPU finishes and waits. A CUDA graph "
            "(lesson 06) queues the calls at once; a workspace strategy cannot remove these gaps.",
            "sync": "Here every call synchronised.",
            "tracing": "Here the gaps come from tracing alone.",
        }[truth]
    )


gpu_idles = explain(
    name="gpu_idles",
    lesson="10",
    question="Even the strategies that never allocate in steady state leave gaps in the GPU lane. Why?",
    truth=_idle_reason,
    why=_idle_everywhere_why,
    hints=(
        "compare how long the GPU runs one call with how long the host takes to launch one "
        "(the summary and the kernels chart's host time).",
        "the gaps are where the GPU has nothing queued: who queues the next call, and when?",
    ),
    wrong=lambda answer, truth: {
        "sync": "each pass synchronises once, at its end, not after every call (count the synchronise "
        "bars in a host lane).",
        "tracing": "the pass traced without API calls, and the same pass untraced (its GPU time against "
        "its kernels' busy time), have gaps too.",
        "memsets": "a memset is device work: the timeline counts it busy, not idle.",
        "python_loop": "look at the host lanes again.",
    }.get(answer),
    choices={
        "python_loop": "the host launches one call at a time from Python, no faster than the GPU runs them",
        "sync": "every strategy synchronises with the GPU after each call",
        "tracing": "CUPTI's tracing makes the gaps; untraced there are none",
        "memsets": "the memsets between the kernels are idle time",
    },
)


# ---- explore: the race's overlap with Python launches -------------------------------------------
def _python_round():
    return result("race_timeline", launch="python", streams=2)


def _python_overlap() -> float:
    return round(overlap_total(_python_round()), 1)


def _overlap_why(truth: float) -> str:
    df = _python_round()
    graph = result("race_timeline", launch="graph", streams=2)
    r, g = df.iloc[0], graph.iloc[0]
    overlap = overlap_total(df)
    share = overlap / r.busy_us if r.busy_us else 0.0
    verdict = (
        "they never ran at the same time in this round, so nothing was corrupted"
        if not overlap
        else f"both streams wrote the one workspace at once, and {int(r.corrupted)} of {int(r.runs)} outputs "
        "were corrupted"
    )
    why = why_they_met(df)
    return (
        f"{us_text(overlap)} ({share:.0%} of the {us_text(r.busy_us)} the GPU was busy): {verdict}."
        + (f" Why they met: {why}." if why else "")
        + f" With graph launches: {us_text(overlap_total(graph))}, {int(g.corrupted)} corrupted. With Python "
        "launches each stream's kernels are queued one launch at a time, so whether they meet depends on the "
        "host's timing: a race that a run can miss is still a race."
    )


def _overlap_wrong(answer: float, truth: float) -> str:
    if answer == 0 and truth:
        return (
            "0 us is what lesson 06's untraced Python rounds, with few or no corrupted outputs, suggest; but "
            "this round ran under the tracer, another timing, and its streams did meet. Read the overlap on "
            "the chart's detail line."
        )
    return f"{answer:g} us is {'too much' if answer > truth else 'too little'}."


python_overlap = Exercise(
    name="python_overlap",
    lesson="10",
    kind="explore",
    question="Switch the race panel to Python launches: for how many microseconds did the two streams' "
    "kernels run at the same time in that traced round? (within 10 %, or 0)",
    truth=_python_overlap,
    parse=number("microseconds"),
    judge=lambda answer, truth: abs(answer - truth) <= 0.1 * abs(truth) if truth else answer == 0,
    why=_overlap_why,
    hints=(
        "the panel's launch control picks Python launches; the chart's detail line gives the overlap.",
        "the shaded bands are the stretches where both streams ran: their total is the overlap.",
    ),
    wrong=_overlap_wrong,
    wrong_answers=lambda truth: [
        truth * 3 + 50,
        truth / 2 + 40 if truth else 25.0,
        *([0.0] if truth else []),
    ],
)
