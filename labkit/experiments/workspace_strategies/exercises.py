"""Lesson 02's exercises: predict malloc_per_call's slowdown, work out how long its GPU idles, explain
cupy_pool under memory pressure, explore which strategy falls back on a growing batch. Answers come
from the results in use."""

from __future__ import annotations

import re
from typing import Optional

from ...draw.plots import (
    ok_rows,
)
from ...draw.prose import where
from ...draw.units import size_text, us_text
from ...errors import InvalidSpec
from ...gpu.workspaces import labels
from ..core import result
from ..exercise import Exercise, equal, explain, number
from ..worked import slips, worked
from .runs import strategies_repeats
from .summaries import _strategy

# ---- exercises -------------------------------------------------------------------------------------


def _frame(workload: str):
    return ok_rows(result("strategies", workload=workload, repeats=strategies_repeats(workload)))


def _slowdown() -> float:
    df = _frame("one_conv")
    return round(
        float(_strategy(df, "malloc_per_call").median_us / _strategy(df, "fixed_arena").median_us), 2
    )


def _slowdown_why(truth: float) -> str:
    df = _frame("one_conv")
    m, a = _strategy(df, "malloc_per_call"), _strategy(df, "fixed_arena")
    return (
        f"measured {us_text(m.median_us)} against {us_text(a.median_us)} per call: {truth:.1f}x "
        f"({where(df)}). "
        f"Inside the strategy alone malloc_per_call spends {us_text(m.strategy_us_per_call)} per call "
        f"(cudaMalloc, then a cudaFree that waits for the convolution just launched), the arena "
        f"{us_text(a.strategy_us_per_call)}. Noise: the arena's calls reach {us_text(a.p95_us)} at their "
        "p95, "
        "far below malloc_per_call's median."
    )


def _slowdown_hint() -> str:
    """The first hint, with the convolution's GPU time per call as the chart writes it."""
    arena = _strategy(_frame("one_conv"), "fixed_arena")
    return (
        "Per call, the arena only hands out a pointer; malloc_per_call adds a cudaMalloc and a cudaFree. The "
        f"convolution itself takes {us_text(arena.gpu_us)} per call on the GPU (fixed_arena's GPU wall time, "
        "the chart's square): how long might a driver call that waits for it take?"
    )


def _slowdown_wrong(answer: float, truth: float) -> Optional[str]:
    if answer <= 0:
        return "a slowdown is a ratio above zero (malloc_per_call's time over fixed_arena's)."
    if answer > 2 * truth:
        return f"{answer:g}x is more than twice what was measured: each call still runs the same convolution."
    return f"{answer:g}x is less than half of what was measured."


MALLOC_SLOWDOWN = Exercise(
    name="malloc_slowdown",
    lesson="02",
    kind="predict",
    question=(
        "Before the chart: on one_conv, how many times slower per call (median host time) will "
        "malloc_per_call be than fixed_arena? A rough number: within a factor of two of the "
        "measurement counts."
    ),
    truth=_slowdown,
    parse=number("a ratio"),
    judge=lambda answer, truth: truth / 2 <= answer <= truth * 2,
    why=_slowdown_why,
    hints=(
        _slowdown_hint,
        "cudaFree returns only once the GPU has finished the convolution just launched, so the host "
        "waits for every call; count the convolution's time once more, plus the allocation.",
    ),
    wrong=_slowdown_wrong,
    example=1.5,
)


def _parse_strategy(answer) -> str:
    """A strategy's label as the chart shows it (`labels.match`: any case; its name alone will do
    where one label has it)."""
    names = list(_frame("growing_batch")["strategy"])
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidSpec(
            "answer", answer, "must be a strategy's name as the chart shows it, e.g. 'cupy_pool'"
        )
    hit = labels.match(answer, names)
    if hit is None:
        shown = ", ".join(repr(n) for n in names)
        raise InvalidSpec("answer", answer, f"must name one strategy as the chart shows it: {shown}")
    return hit


def _falls_back() -> str:
    df = _frame("growing_batch")
    return str(df.loc[df["fallbacks"].idxmax(), "strategy"])


def _falls_back_why(truth: str) -> str:
    df = _frame("growing_batch")
    r = df[df["strategy"] == truth].iloc[0]
    biggest = _strategy(df, "malloc_per_call").peak_bytes  # malloc_per_call holds one workspace at a time
    rest = df[df["strategy"] != truth]
    budget = re.search(r"\((\d+) MiB", truth)
    ran = f"{truth} ran {int(r.fallbacks)} of {int(r.calls)} calls with a smaller plan ({where(df)})."
    evicted = (
        f"It also evicted {int(r.evictions)} buffers to make room. Its GPU wall time per call: "
        f"{us_text(r.gpu_us)}, against {us_text(rest['gpu_us'].median())} for the median of the others."
    )
    if budget and int(budget.group(1)) * 2**20 < biggest:
        too_small = (
            f"Its budget ({budget.group(1)} MiB) is smaller than the largest workspace this batch reaches "
            f"({size_text(biggest)}): a request larger than the whole budget cannot be kept, so the Runner "
            "falls back to a plan that fits."
        )
        return f"{ran} {too_small} {evicted}"
    return f"{ran} {evicted}"


FALLS_BACK = Exercise(
    name="fallback_strategy",
    lesson="02",
    kind="explore",
    question=(
        "Move the strategies panel to the growing_batch workload (batch 1, 2, 4, ... 64 of one convolution). "
        "One strategy runs some of its calls with a smaller plan than the heuristic's. Which one? "
        "(its name as the chart shows it)"
    ),
    truth=_falls_back,
    parse=_parse_strategy,
    judge=equal,
    why=_falls_back_why,
    hints=(
        "The panel's bottom right plot, fallbacks to a smaller plan, counts each strategy's fallbacks.",
        "A strategy with a byte budget cannot keep a workspace larger than its whole budget.",
    ),
    wrong=lambda answer, truth: f"{answer} ran every call with the plan it asked for first.",
    leaks=lambda truth: (r"on 'growing_batch'", r"Workload growing_batch"),
    wrong_answers=lambda truth: [n for n in ("fixed_arena (1024 MiB)", "malloc_per_call") if n != truth],
)

#: the reasons offered for cupy_pool's time under memory pressure
POOL_REASONS = {
    "garbage_collector": "on each failed cudaMalloc, CuPy's pool frees its cached blocks, runs Python's "
    "garbage collector and tries again",
    "slow_plan": "the smaller plan it falls back to is that much slower on the GPU",
    "cudafree_wait": "each call's cudaFree waits for the GPU to finish",
    "full_memory": "a GPU with almost no free memory runs every kernel more slowly",
}


def _pool_reason() -> str:
    pool = _strategy(_frame("pressure"), "cupy_pool")
    return "garbage_collector" if pool.strategy_us_per_call >= 0.5 * pool.median_us else "slow_plan"


def _pool_numbers():
    df = _frame("pressure")
    pool = _strategy(df, "cupy_pool")
    fell = df[(df["fallbacks"] > 0) & (df["strategy"] != pool.strategy)]
    return df, pool, fell


def _pool_why(truth: str) -> str:
    df, pool, _ = _pool_numbers()
    return (
        f"cupy_pool spends on average {us_text(pool.strategy_us_per_call)} per call inside its get/put, on "
        f"the host (its median call took {us_text(pool.median_us)} in all, {where(df)}). CuPy's "
        "SingleDeviceMemoryPool._try_malloc answers a failed cudaMalloc by freeing its cached blocks and "
        "retrying, then by running gc.collect() (a pass over every Python object of the process) and "
        "retrying once more; only then does it raise, and the Runner falls back. Under pressure every call "
        "goes through that."
    )


def _pool_wrong(answer: str, truth: str) -> Optional[str]:
    df, pool, fell = _pool_numbers()
    arena = _strategy(df, "fixed_arena")
    malloc = _strategy(df, "malloc_per_call")
    return {
        "slow_plan": (
            f"the other strategies that fell back took {us_text(fell['median_us'].min())} to "
            f"{us_text(fell['median_us'].max())} per call, and cupy_pool spent "
            f"{us_text(pool.strategy_us_per_call)} of each call on the host, inside its get/put, "
            "not on the GPU."
        ),
        "cudafree_wait": (
            f"that is malloc_per_call's cost ({us_text(malloc.median_us)} per call here); "
            "cupy_pool's put hands the block back to its pool and calls no cudaFree."
        ),
        "full_memory": f"fixed_arena ran under the same pressure at {us_text(arena.median_us)} per call.",
    }.get(answer)


POOL_UNDER_PRESSURE = explain(
    name="pool_under_pressure",
    lesson="02",
    question="Under memory pressure, cupy_pool takes far longer per call than every other strategy. Why?",
    truth=_pool_reason,
    why=_pool_why,
    hints=(
        "Compare cupy_pool's diamond (inside the strategy's get/put) with its dot (host time per call) "
        "and its square (GPU wall time): is the time spent on the GPU, or in Python on the host?",
        "What does CuPy's MemoryPool do when cudaMalloc fails, before it gives up?",
    ),
    wrong=_pool_wrong,
    choices=POOL_REASONS,
)


# ---- explain, worked out: how long the GPU idles under malloc_per_call -----------------------------
def _idle_inputs() -> dict:
    df = _frame("one_conv")
    return dict(
        malloc_wall_us=float(_strategy(df, "malloc_per_call").gpu_us),
        arena_wall_us=float(_strategy(df, "fixed_arena").gpu_us),
    )


def _idle_model(malloc_wall_us, arena_wall_us) -> float:
    """Percent of malloc_per_call's GPU wall time per call that the kernels (the arena's wall) leave idle."""
    return 100 * (1 - arena_wall_us / malloc_wall_us)


def _idle_why(truth: float) -> str:
    df = _frame("one_conv")
    m, a = _strategy(df, "malloc_per_call"), _strategy(df, "fixed_arena")
    idle = (
        f"1 - {a.gpu_us:.1f} us / {m.gpu_us:.1f} us = {truth:.0f}%: the GPU sat idle "
        f"{m.gpu_us - a.gpu_us:.1f} us of every call ({where(df)})."
    )
    if a.median_us < a.gpu_us:
        arena = (
            f"The model holds because fixed_arena's host needs {a.median_us:.1f} us per call, less than the "
            f"{a.gpu_us:.1f} us its GPU needs: its GPU did not wait for the host, and its wall time is "
            "taken as the kernels' time (any gaps between its kernels counted as busy: the share is a lower "
            "bound)."
        )
    else:
        arena = (
            f"Here fixed_arena's host needs {a.median_us:.1f} us per call, as long as its GPU: its wall time "
            "holds some idle time too, and the share above is a lower bound."
        )
    malloc = (
        f"malloc_per_call's host needs {m.median_us:.1f} us per call, {m.strategy_us_per_call:.1f} us of it "
        "inside cudaMalloc and cudaFree, and the free waits for the GPU: the host can never queue the next "
        "call ahead, so the GPU waits for it."
    )
    return f"{idle} {arena} {malloc}"


def _idle_slips() -> list:
    x = _idle_inputs()
    t = _idle_model(**x)
    df = _frame("one_conv")
    m, a = _strategy(df, "malloc_per_call"), _strategy(df, "fixed_arena")
    return [
        (
            100 * (1 - a.median_us / m.median_us),
            "that compares the two host times per call (the medians, the summary's first line); the GPU "
            "sat idle for a share of malloc_per_call's GPU wall time: compare the GPU wall times per call.",
        ),
        (
            100 * (1 - a.median_us / m.gpu_us),
            "that takes fixed_arena's host time per call for the kernels' time; its GPU wall time per "
            "call is the kernels' own.",
        ),
        (100 - t, "that is the share the GPU was busy; the question asks the rest."),
        (x["malloc_wall_us"] / x["arena_wall_us"], "that is the ratio of the two wall times, not a share."),
        (
            100 * (x["malloc_wall_us"] / x["arena_wall_us"] - 1),
            "that divides by the arena's wall time; the share is of malloc_per_call's.",
        ),
    ]


MALLOC_IDLE = worked(
    name="malloc_idle_share",
    lesson="02",
    question=(
        "From the GPU wall times per call in the summary: both strategies run the same kernels, and "
        "fixed_arena's host launches a call faster than its GPU runs it, so its wall time is taken as the "
        "kernels' own (a lower bound on the idle share follows). What share of malloc_per_call's GPU wall "
        "time did the GPU sit idle, in percent?"
    ),
    inputs=_idle_inputs,
    model=_idle_model,
    rel=0.05,
    unit="percent",
    why=_idle_why,
    hints=(
        "Wall time = busy time + idle time. Which of the two strategies' wall times is only busy time, "
        "and what is the rest of the other's?",
        "Idle share = (malloc_per_call's wall - the kernels' time) / malloc_per_call's wall, x 100.",
    ),
    wrong=slips(
        _idle_slips,
        rel=0.05,
        unit="percent",
        high="more than the model gives: the kernels' time is the arena's GPU wall time per call.",
        low="less than the model gives: take fixed_arena's GPU wall time per call (the kernels') from "
        "malloc_per_call's, then divide by malloc_per_call's.",
    ),
    wrong_answers=lambda truth: [100 - truth, truth / 100, truth / 2],
)
