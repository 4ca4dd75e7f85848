"""Exercise self-checks. Each compares your answer with the numbers in an experiment's DataFrame
(live or recorded: the same results the notebook shows, through `labkit.lessons.data`) and prints
``correct`` with a one-line why, or a hint that does not give the answer away.

``None`` means "not answered yet" and prints the question's hint; an answer of the wrong type
raises `labkit.InvalidSpec` saying what is expected. Every check returns a `CheckResult`
(true when correct). Pass ``df=`` to check against a DataFrame of your own (same experiment).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional, Sequence

from . import lessons, plots
from .errors import InvalidSpec
from .plots import fmt_bytes, fmt_us
from .grid import strategies_repeats
from .spec import DTYPES


@dataclass(frozen=True)
class CheckResult:
    """``correct``; ``message``: what was printed. True in a boolean context when correct."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __repr__(self) -> str:
        return f"CheckResult(correct={self.correct})"

    def _ipython_display_(self) -> None:
        """The message was printed already; show nothing more in a notebook."""


def _say(correct: bool, text: str) -> CheckResult:
    msg = ("correct: " if correct else "not yet: ") + text
    print(msg)
    return CheckResult(correct, msg)


def _pending(question: str, hint: str) -> CheckResult:
    msg = f"no answer yet. {question} Hint: {hint}"
    print(msg)
    return CheckResult(False, msg)


# ---- answer types -----------------------------------------------------------------------------
def _word(answer, what: str, example: str) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidSpec("answer", answer, f"must be a str naming {what}, e.g. {example!r}")
    return answer.strip()


def _number(answer, what: str, example) -> float:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real) or math.isnan(float(answer)):
        raise InvalidSpec("answer", answer, f"must be a number ({what}), e.g. {example!r}")
    return float(answer)


def _flag(answer, what: str) -> bool:
    if not isinstance(answer, bool):
        raise InvalidSpec("answer", answer, f"must be True or False ({what})")
    return answer


def _close(answer: float, truth: float, rel: float) -> bool:
    return abs(answer - truth) <= rel * abs(truth)


def _df(df, name: str, **kwargs):
    return df if df is not None else lessons.data(name, **kwargs)


def _where(df) -> str:
    a = df.attrs
    return f"{a.get('mode')} on {a.get('gpu')}"


def _ok(df):
    return df[df["status"] == "ok"] if "status" in df.columns else df


# ---- 00 ---------------------------------------------------------------------------------------
def mode(answer: Optional[str] = None) -> CheckResult:
    """Which mode is labkit in: 'live' or 'recorded'?"""
    from . import env

    if answer is None:
        return _pending("Which mode is labkit in, 'live' or 'recorded'?", "the banner at the top says it.")
    a = _word(answer, "a mode", "recorded").lower()
    m = env.mode()
    if a == m.name:
        return _say(True, f"labkit is {m.name} ({m.reason}).")
    return _say(False, "read the banner again, or run labkit.env.mode().")


# ---- 01 ---------------------------------------------------------------------------------------
def _algo_df(df):
    return _df(df, "algorithms", spec=lessons.base(layout="NCHW"))


def _norm_algo(name: str) -> str:
    return name.upper().replace("CUDNN_CONVOLUTION_FWD_ALGO_", "").replace(" ", "_")


def fastest_algorithm(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 01: which classic algorithm is fastest (fp16 NCHW base)?"""
    df = _algo_df(df)
    ok = df[df["find_status"] == "ok"]
    if answer is None:
        return _pending("Which algorithm did cuDNN's Find rank fastest?", "the shortest time bar; unsupported rows have none.")
    a = _norm_algo(_word(answer, "an algorithm", "GEMM"))
    names = [_norm_algo(n) for n in df["algorithm"]]
    if a not in names:
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(df['algorithm'])}")
    fast = ok.loc[ok["time_us"].idxmin()]
    if a == _norm_algo(fast["algorithm"]):
        return _say(True, f"{fast['algorithm']} runs in {fmt_us(fast['time_us'])} ({_where(df)}), "
                          f"using {fmt_bytes(fast['query_workspace_bytes'])} of workspace.")
    row = df[[n == a for n in names]].iloc[0]
    if row["find_status"] != "ok":
        return _say(False, f"{row['algorithm']} is not supported here ({row['find_status']}); it cannot be the fastest.")
    return _say(False, f"{row['algorithm']} takes {fmt_us(row['time_us'])}; {int((ok['time_us'] < row['time_us']).sum())} "
                       "algorithms are faster. Look at the time column again.")


def workspace_bytes_for_plan(answer=None, df=None) -> CheckResult:
    """Lesson 01: how many bytes of workspace does the fastest algorithm ask for? (within 1%)"""
    df = _algo_df(df)
    ok = df[df["find_status"] == "ok"]
    fast = ok.loc[ok["time_us"].idxmin()]
    truth = float(fast["query_workspace_bytes"])
    if answer is None:
        return _pending("How many bytes of workspace does the fastest algorithm ask for?",
                        "the summary under the chart gives the fastest algorithm's workspace (so does hovering its "
                        "workspace bar); answer in bytes (1 MiB = 1,048,576 B).")
    a = _number(answer, "bytes", 1048576)
    if _close(a, truth, 0.01):
        return _say(True, f"{fast['algorithm']} asks for {truth:,.0f} B ({fmt_bytes(truth)}): "
                          "memory the caller must find for every call.")
    if truth and _close(a * 2**20, truth, 0.01):
        return _say(False, "that is the size in MiB; answer in bytes (1 MiB = 1,048,576 B).")
    if truth and _close(a * 1e6, truth, 0.01):
        return _say(False, "that looks like megabytes; answer in bytes.")
    return _say(False, f"{a:,.0f} B is {'more' if a > truth else 'less'} than the fastest algorithm asks for.")


def no_workspace_layout(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 01: for fp16 fprop at the base shape, which layout's heuristic plan needs the least workspace?"""
    df = _ok(_df(df, "workspace_sizes"))
    sub = df[(df["dtype"] == "fp16") & (df["direction"] == "fprop")].set_index("layout")
    if answer is None:
        return _pending("For fp16 fprop, which layout's heuristic plan needs the least workspace: NCHW or NHWC?",
                        "compare the two fp16 bars in the fprop panel.")
    a = _word(answer, "a layout", "NCHW").upper()
    if a not in sub.index:
        raise InvalidSpec("answer", answer, "must be 'NCHW' or 'NHWC'")
    best = sub["heuristic_workspace_bytes"].idxmin()
    other = [x for x in sub.index if x != best][0]
    if a == best:
        return _say(True, f"{best} needs {fmt_bytes(sub.loc[best, 'heuristic_workspace_bytes'])} against "
                          f"{fmt_bytes(sub.loc[other, 'heuristic_workspace_bytes'])} for {other}: the NCHW plan spends "
                          "its workspace on transposing the data for the tensor cores.")
    return _say(False, f"{a}'s heuristic plan needs {fmt_bytes(sub.loc[a, 'heuristic_workspace_bytes'])}; look at the other bar.")


# ---- 02 ---------------------------------------------------------------------------------------
def _match_strategy(df, answer: str):
    a = answer.strip().lower()
    names = list(df["strategy"])
    hit = [n for n in names if n.lower() == a or n.lower().split(" (")[0] == a]
    if not hit:
        raise InvalidSpec("answer", answer, f"must name a strategy: {', '.join(dict.fromkeys(n.split(' (')[0] for n in names))}")
    return hit


def fastest_strategy(answer: Optional[str] = None, workload: str = "random_shapes", df=None) -> CheckResult:
    """Lesson 02: which strategy has the lowest median host time per call on ``workload``? Any
    strategy within 5% of the lowest counts (differences that small are noise)."""
    df = _ok(_df(df, "strategies", workload=workload, repeats=strategies_repeats(workload)))
    if answer is None:
        return _pending(f"Which strategy has the lowest median time per call on '{workload}'?",
                        "the host-time panel: the shortest 'host median' bar.")
    hit = _match_strategy(df, _word(answer, "a strategy", "fixed_arena"))
    best = df["median_us"].min()
    rows = df[df["strategy"].isin(hit)]
    mine = rows["median_us"].min()
    near = df[df["median_us"] <= best * 1.05]["strategy"].tolist()
    if mine <= best * 1.05:
        r = rows.loc[rows["median_us"].idxmin()]
        return _say(True, f"{r['strategy']}: {fmt_us(mine)} per call ({_where(df)}), {int(r['alloc_calls'])} workspace allocations "
                          f"({plots.allocator_of(r['strategy'])}) in {int(r['calls'])} convolutions; within 5% of the lowest: {', '.join(near)}.")
    return _say(False, f"{hit[0]} takes {fmt_us(mine)} per call, {mine / best:.2f}x the lowest. Which strategies "
                       "never call the allocator once warm?")


def malloc_slowdown(answer=None, df=None) -> CheckResult:
    """Lesson 02: on 'one_conv', how many times slower per call (median) is malloc_per_call than
    the fixed arena? (within 10%)"""
    df = _ok(_df(df, "strategies", workload="one_conv", repeats=strategies_repeats("one_conv")))
    m = df[df["strategy"].str.startswith("malloc_per_call")].iloc[0]
    a_ = df[df["strategy"].str.startswith("fixed_arena")].iloc[0]
    truth = m["median_us"] / a_["median_us"]
    if answer is None:
        return _pending("How many times slower per call is malloc_per_call than fixed_arena on 'one_conv'?",
                        "divide the two medians (host time per call).")
    a = _number(answer, "a ratio", 2.5)
    if _close(a, truth, 0.10):
        return _say(True, f"{fmt_us(m['median_us'])} / {fmt_us(a_['median_us'])} = {truth:.1f}x: "
                          f"{int(m['alloc_calls'])} cudaMalloc+cudaFree pairs on the hot path, and cudaFree waits for the GPU.")
    if _close(1 / a, truth, 0.10):
        return _say(False, "that is the inverse ratio: malloc_per_call over fixed_arena.")
    return _say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}; use the median host time of each.")


def dims_only_shortfall(answer=None, df=None) -> CheckResult:
    """Lesson 02: a cache keyed by dims only first stores the workspace of fp16 NHWC fprop's
    heuristic plan; then fp32 NHWC fprop (same dims) arrives. How many bytes short is the buffer
    it hands back? (within 1%)"""
    df = _ok(_df(df, "workspace_sizes"))
    fp = df[df["direction"] == "fprop"].set_index(["dtype", "layout"])["heuristic_workspace_bytes"]
    first, second = float(fp[("fp16", "NHWC")]), float(fp[("fp32", "NHWC")])
    truth = max(second - first, 0.0)
    if answer is None:
        return _pending("How many bytes short is the buffer a dims-only key hands fp32 NHWC after fp16 NHWC?",
                        "both are in the fprop panel (NHWC bars); subtract, in bytes.")
    a = _number(answer, "bytes", 1000)
    if _close(a, truth, 0.01) or (truth == 0 and a == 0):
        return _say(True, f"fp32 NHWC needs {second:,.0f} B, the cached buffer holds {first:,.0f} B: {truth:,.0f} B "
                          f"({fmt_bytes(truth)}) short. The full key (dtype, layout, direction, plan) would have missed and "
                          "allocated the right size.")
    if _close(a * 2**20, truth, 0.01):
        return _say(False, "that is MiB; answer in bytes.")
    return _say(False, f"{a:,.0f} B is {'too much' if a > truth else 'too little'}: subtract the fp16 NHWC fprop workspace "
                       "from the fp32 NHWC fprop one.")


# ---- 03 ---------------------------------------------------------------------------------------
def precision_order(answer: Optional[Sequence[str]] = None, df=None) -> CheckResult:
    """Lesson 03: the dtypes ordered from most to least accurate by total error (vs float64 on the
    original data, ``rel_error_vs_fp64_inputs``) at the base spec."""
    df = _ok(_df(df, "precision"))
    truth = list(df.sort_values("rel_error_vs_fp64_inputs")["dtype"])
    if answer is None:
        return _pending(f"Order {', '.join(truth and sorted(truth))} from most to least accurate (total error).",
                        "the diamonds of the precision chart, bottom to top.")
    if isinstance(answer, str) or not isinstance(answer, (list, tuple)) or not all(isinstance(x, str) for x in answer):
        raise InvalidSpec("answer", answer, f"must be a list of dtype names, e.g. {list(DTYPES)!r}")
    a = [x.strip().lower() for x in answer]
    if sorted(a) != sorted(truth):
        raise InvalidSpec("answer", answer, f"must list each of {', '.join(sorted(truth))} once")
    if a == truth:
        e = df.set_index("dtype")["rel_error_vs_fp64_inputs"]
        return _say(True, f"{' < '.join(f'{d} ({e[d]:.1e})' for d in truth)}: the order follows how many bits the "
                          "inputs keep; fp8's inputs lose the most before any arithmetic happens.")
    right = sum(x == y for x, y in zip(a, truth))
    first_wrong = next(i for i, (x, y) in enumerate(zip(a, truth)) if x != y)
    return _say(False, f"{right} of {len(truth)} in the right place; position {first_wrong + 1} ({a[first_wrong]}) is "
                       "off. Compare the total-error diamonds, not the arithmetic-error circles.")


def nhwc_speedup(answer=None, df=None) -> CheckResult:
    """Lesson 03: how many times faster is the convolution itself in NHWC than in NCHW (base
    spec, conversion excluded)? (within 10%)"""
    df = _ok(_df(df, "layout")).set_index("layout")
    truth = df.loc["NCHW", "conv_gpu_us"] / df.loc["NHWC", "conv_gpu_us"]
    if answer is None:
        return _pending("How many times faster is the NHWC convolution than the NCHW one (conversion excluded)?",
                        "divide the two convolution (lower) bars.")
    a = _number(answer, "a ratio", 1.5)
    if _close(a, truth, 0.10):
        return _say(True, f"{fmt_us(df.loc['NCHW', 'conv_gpu_us'])} / {fmt_us(df.loc['NHWC', 'conv_gpu_us'])} = {truth:.2f}x: "
                          "tensor cores want channels innermost; NCHW plans transpose first (in their workspace).")
    if _close(1 / a, truth, 0.10):
        return _say(False, "inverted: NCHW time over NHWC time.")
    return _say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}; leave the conversion (upper bar) out.")


def nhwc_pays_off(answer: Optional[bool] = None, df=None) -> CheckResult:
    """Lesson 03: your tensors are NCHW. For this one convolution, is converting to NHWC, running
    there and converting back faster than running in NCHW? (True/False)"""
    df = _ok(_df(df, "layout")).set_index("layout")
    truth = bool(df.loc["NHWC", "end_to_end_us"] < df.loc["NCHW", "end_to_end_us"])
    if answer is None:
        return _pending("Does converting NCHW -> NHWC -> NCHW pay off for one convolution? (True/False)",
                        "compare the full height of the two stacked bars.")
    a = _flag(answer, "does it pay off?")
    why = (f"NHWC end to end {fmt_us(df.loc['NHWC', 'end_to_end_us'])} vs NCHW {fmt_us(df.loc['NCHW', 'end_to_end_us'])}")
    if a == truth:
        return _say(True, why + (": the conversion eats the gain; convert once per network, not per layer." if not truth
                                 else ": the faster convolution outweighs the conversion."))
    return _say(False, "compare the whole stacked bars, conversion included.")


# ---- 04 ---------------------------------------------------------------------------------------
def fusion_speedup(answer=None, df=None) -> CheckResult:
    """Lesson 04: how many times faster is the fused conv+bias+ReLU than the unfused sequence
    (base spec)? (within 10%)"""
    df = _ok(_df(df, "fusion"))
    sub = df[df["epilogue"] == "bias_relu"].set_index("path")
    truth = sub.loc["unfused", "gpu_us"] / sub.loc["fused", "gpu_us"]
    if answer is None:
        return _pending("How many times faster is fused bias_relu than unfused?", "the GPU-time panel, bias_relu bars.")
    a = _number(answer, "a ratio", 2.0)
    if _close(a, truth, 0.10):
        return _say(True, f"{fmt_us(sub.loc['unfused', 'gpu_us'])} / {fmt_us(sub.loc['fused', 'gpu_us'])} = {truth:.1f}x: "
                          f"the unfused path writes and re-reads {fmt_bytes(sub.loc['unfused', 'intermediate_bytes'])} "
                          "of intermediates.")
    if _close(1 / a, truth, 0.10):
        return _say(False, "inverted: unfused time over fused time.")
    return _say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}.")


def fusion_saved_bytes(answer=None, df=None) -> CheckResult:
    """Lesson 04: how many bytes of intermediate tensors does the unfused bias_relu path
    allocate (the fused graph: none)? (within 1%)"""
    df = _ok(_df(df, "fusion"))
    row = df[(df["epilogue"] == "bias_relu") & (df["path"] == "unfused")].iloc[0]
    truth = float(row["intermediate_bytes"])
    if answer is None:
        return _pending("How many bytes of intermediates does unfused bias_relu allocate?",
                        "the intermediate_bytes column of the table under the first fusion chart (bias_relu, unfused).")
    a = _number(answer, "bytes", 1000)
    if _close(a, truth, 0.01):
        return _say(True, f"{truth:,.0f} B ({fmt_bytes(truth)}): the conv output and the biased tensor, each the size of Y.")
    if _close(a * 2**20, truth, 0.01):
        return _say(False, "that is MiB; answer in bytes.")
    return _say(False, f"{a:,.0f} B is {'too much' if a > truth else 'too little'}; count the tensors the elementwise "
                       "kernels write besides the final output.")


def fusion_loses(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 04: in fp32 (base shape), for which epilogue is the fused graph SLOWER than the
    unfused sequence? Answer an epilogue name, or 'none'."""
    df = _ok(_df(df, "fusion", spec=lessons.base(dtype="fp32")))
    slower = []
    for epi, sub in df.groupby("epilogue", sort=False):
        s = sub.set_index("path")
        if {"fused", "unfused"} <= set(s.index) and s.loc["fused", "gpu_us"] > s.loc["unfused", "gpu_us"]:
            slower.append(epi)
    if answer is None:
        return _pending("In fp32, which epilogue is slower fused than unfused ('none' if no such one)?",
                        "the fp32 fusion chart's GPU-time panel.")
    a = _word(answer, "an epilogue or 'none'", "bias_relu").lower()
    valid = set(df["epilogue"]) | {"none"}
    if a not in valid:
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(sorted(valid))}")
    if (a == "none" and not slower) or a in slower:
        if not slower:
            return _say(True, "fusion won for every epilogue here.")
        s = df[df["epilogue"] == a].set_index("path")
        return _say(True, f"fused {fmt_us(s.loc['fused', 'gpu_us'])} (plan {s.loc['fused', 'plan_name']}) vs unfused "
                          f"{fmt_us(s.loc['unfused', 'gpu_us'])}: fusion saves memory traffic only if a fast plan supports "
                          "the fused graph; measure it before you trust it.")
    return _say(False, "compare fused and unfused GPU time per epilogue in the fp32 chart.")


# ---- 05 ---------------------------------------------------------------------------------------
def worst_vs_best(answer=None, df=None) -> CheckResult:
    """Lesson 05: for fp16 NCHW (base shape), how many times slower is the slowest plan than the
    fastest? (within 10%)"""
    df = _ok(_df(df, "plans", spec=lessons.base(layout="NCHW")))
    b, w = df.loc[df["gpu_us"].idxmin()], df.loc[df["gpu_us"].idxmax()]
    truth = w["gpu_us"] / b["gpu_us"]
    if answer is None:
        return _pending("How many times slower is the slowest plan than the fastest (fp16 NCHW)?",
                        "the red x and the green diamond; mind the log axis.")
    a = _number(answer, "a ratio", 10)
    if _close(a, truth, 0.10):
        return _say(True, f"{fmt_us(w['gpu_us'])} / {fmt_us(b['gpu_us'])} = {truth:.0f}x: picking a plan matters more than "
                          "anything else on this page.")
    return _say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}; read the two times from the hover labels.")


def cap_slowdown(answer=None, cap_mib: float = 1, df=None) -> CheckResult:
    """Lesson 05: fp16 NCHW, workspace capped at ``cap_mib`` MiB: how many times slower is the best
    plan that fits than the unlimited best? (within 10%)"""
    df = _ok(_df(df, "caps", spec=lessons.base(layout="NCHW")))
    row = df[df["cap_bytes"] == int(cap_mib * 2**20)]
    if row.empty:
        raise InvalidSpec("cap_mib", cap_mib, f"must be a recorded cap: {', '.join(plots.cap_label(c) for c in df['cap_bytes'])}")
    truth = float(row["slowdown_vs_unlimited"].iloc[0])
    if answer is None:
        return _pending(f"How many times slower is the best plan under a {cap_mib:g} MiB cap (fp16 NCHW)?",
                        "the red slowdown line.")
    a = _number(answer, "a ratio", 1.5)
    if _close(a, truth, 0.10):
        free = df[df["cap_bytes"] == -1]
        need = fmt_bytes(free["workspace_bytes"].iloc[0]) if len(free) else "more"
        return _say(True, f"{truth:.1f}x: only {int(row['plans_within_cap'].iloc[0])} plans fit in {cap_mib:g} MiB, while the "
                          f"unlimited best plan needs {need}.")
    return _say(False, f"{a:g}x is {'too high' if a > truth else 'too low'}.")


def autotune_payoff_calls(answer=None, df=None) -> CheckResult:
    """Lesson 05: fp32 NCHW (base shape): after how many calls has autotuning paid for itself?
    (within 10%)"""
    df = _df(df, "build_cost", spec=lessons.base(dtype="fp32", layout="NCHW"))
    truth = float(df["calls_to_pay_off_autotune"].iloc[0])
    tune = float(df.set_index("stage").loc["autotune (time every plan)", "seconds"])
    gain = float(df["heuristic_gpu_us"].iloc[0] - df["best_gpu_us"].iloc[0])
    if answer is None:
        return _pending("After how many calls does autotuning pay for itself (fp32 NCHW)?",
                        "autotune time (in us) divided by the time it saves per call.")
    if isinstance(answer, str) and answer.strip().lower() in ("never", "inf", "infinity"):
        answer = float("inf")
    a = _number(answer, "a number of calls (or 'never')", 1000)
    if math.isinf(truth):
        if math.isinf(a):
            return _say(True, "the heuristic pick was already the fastest: autotuning never pays for itself here.")
        return _say(False, "did autotuning find anything faster than the heuristic pick?")
    if _close(a, truth, 0.10):
        return _say(True, f"{tune * 1e6:,.0f} us of autotuning / {gain:.1f} us saved per call = {truth:,.0f} calls: "
                          "worth it for a training run, not for a one-off.")
    return _say(False, f"{a:,.0f} is {'too many' if a > truth else 'too few'}; seconds to microseconds is 1e6.")


# ---- 06 ---------------------------------------------------------------------------------------
def race_mismatches(answer=None, df=None) -> CheckResult:
    """Lesson 06: with one scratchpad shared by 2 streams and CUDA-graph launches, how many of the
    outputs were corrupted? (exact)"""
    df = _df(df, "race", launch="graph", streams=2, min_runs=1024)
    row = df[df["scratchpad"] == "shared"].iloc[0]
    truth = int(row["mismatches_bitwise"])
    if answer is None:
        return _pending("How many outputs did the shared scratchpad corrupt (graph launch, 2 streams)?",
                        "the red bar's label: corrupted / runs.")
    a = _number(answer, "a count", 10)
    if a == truth:
        return _say(True, f"{truth} of {int(row['runs'])} outputs differ from the solo run (worst relative error "
                          f"{row['worst_rel_error']:.2g}); the per-stream scratchpad: "
                          f"{int(df[df['scratchpad'] == 'per-stream']['mismatches_bitwise'].iloc[0])}.")
    return _say(False, f"{a:g} is {'too many' if a > truth else 'too few'}; the count is exact.")


def race_hidden_by(answer: Optional[str] = None, df=None) -> CheckResult:
    """Lesson 06: which launch method ('graph' or 'python') corrupted fewer outputs with a shared
    scratchpad (2 streams)?"""
    df = df if df is not None else lessons.race_all()
    sh = df[(df["scratchpad"] == "shared") & (df["streams"] == 2)].set_index("launch")["mismatches_bitwise"]
    if answer is None:
        return _pending("With a shared scratchpad, which launch method corrupted fewer outputs: 'graph' or 'python'?",
                        "compare the red bars of the two 2-stream cases.")
    a = _word(answer, "a launch method", "graph").lower()
    if a not in sh.index:
        raise InvalidSpec("answer", answer, f"must be one of {', '.join(sh.index)}")
    fewest = sh[sh == sh.min()].index.tolist()
    if a in fewest:
        return _say(True, f"{a}: {int(sh[a])} corrupted vs {int(sh.drop(a).iloc[0]) if len(sh) > 1 else '-'}. A Python "
                          "launch takes longer than this small convolution runs, so the streams rarely overlap: the bug "
                          "hides, it is not absent.")
    return _say(False, "which launch method lets the two streams' kernels actually run at the same time?")


def scratchpad_shared_flag(answer: Optional[bool] = None, df=None) -> CheckResult:
    """Lesson 06: oneDNN's user-scratchpad mode hands one buffer to every primitive; run those
    primitives on concurrent streams and you reproduce the race. Which
    ``labkit.gpu.workspace.Scratchpad(shared=...)`` is that? (True/False)"""
    df = df if df is not None else _df(None, "race", launch="graph", streams=2, min_runs=1024)
    s = df.set_index("scratchpad")["mismatches_bitwise"]
    if answer is None:
        return _pending("Scratchpad(shared=True) or Scratchpad(shared=False) for one buffer used by all streams?",
                        "'shared' is one buffer for every stream.")
    a = _flag(answer, "shared=?")
    if a:
        return _say(True, f"shared=True is one buffer for all streams: {int(s['shared'])} corrupted outputs here; "
                          f"shared=False (one per stream, what oneDNN asks of concurrent users): {int(s['per-stream'])}.")
    return _say(False, "shared=False gives each stream its own buffer; that is the safe mode, not the race.")


#: lesson -> its checks (for the notebooks' exercise lists and the tests)
EXERCISES = {
    "00": (mode,),
    "01": (fastest_algorithm, workspace_bytes_for_plan, no_workspace_layout),
    "02": (fastest_strategy, malloc_slowdown, dims_only_shortfall),
    "03": (precision_order, nhwc_speedup, nhwc_pays_off),
    "04": (fusion_speedup, fusion_saved_bytes, fusion_loses),
    "05": (worst_vs_best, cap_slowdown, autotune_payoff_calls),
    "06": (race_mismatches, race_hidden_by, scratchpad_shared_flag),
}
