"""Lesson 09's exercises (`labkit.experiments.exercise.Exercise`): predict what a small workspace
cap costs a ResNet-50 pass, find VGG16's largest workspace and the strategy it costs most under,
and explain what async_pool holds. Answers come from the network reports in use (batch 32, fp16
NHWC: `core.result`, the same reports the lesson draws).
"""

from __future__ import annotations

import re

from ...draw.plots import fmt_bytes, fmt_us, ok_rows
from ...errors import InvalidSpec
from ...gpu.workspaces import labels
from ..core import MIB, result
from ..exercise import Exercise, equal, explain, one_of
from ..worked import slips, worked
from .summary import calls_changing_plan
from .tables import table_of

#: the cap the predict exercise asks about (bytes)
SMALL_CAP = 4 * MIB
#: the slowdown classes a learner predicts among, with their upper bounds (x the uncapped pass)
SLOWDOWNS = {"under 2%": 1.02, "2-20%": 1.20, "over 20%": float("inf")}
#: the network the explore exercise sends the learner to
EXPLORE_NET = "vgg16"
#: how close (a fraction) an answer to the 0 B cap's pass must be
ZERO_REL = 0.01


def report_frame(net: str = "resnet50"):
    """The network report the lesson draws for a network (batch 32, fp16 NHWC).

    Args:
        net: a preset name.

    Returns:
        `network_report`'s result, from the results in use.
    """
    return result("network_report", net=net, batch=32, dtype="fp16", layout="NHWC")


# ---- predict: what a 4 MiB cap costs ----------------------------------------------------------
def _capped():
    budget = table_of(report_frame(), "budget")
    row = budget[budget["cap_bytes"] == SMALL_CAP]
    if row.empty:
        raise InvalidSpec("cap", fmt_bytes(SMALL_CAP), "is not a cap of this report's budget curve")
    return row.iloc[0]


def _slowdown_class() -> str:
    slow = float(_capped()["slowdown"])
    return next(k for k, top in SLOWDOWNS.items() if slow < top)


def _cap_why(truth: str) -> str:
    row = _capped()
    budget = table_of(report_frame(), "budget")
    uncapped = float(budget[budget["cap_bytes"] < 0]["pass_gpu_us"].iloc[0])
    layers = ok_rows(table_of(report_frame(), "layers"))
    big = list(dict.fromkeys(layers[layers["fastest_workspace_bytes"] > SMALL_CAP]["layer"]))
    if not big:
        return (
            f"{row['slowdown']:.3f}x the uncapped pass: {calls_changing_plan(row['calls_changing_plan'])}. "
            f"No call asks for more than {fmt_bytes(SMALL_CAP)} with its fastest plan."
        )
    who = (
        f"Only {big[0]} asks for more with its fastest plan; within the cap it must run"
        if len(big) == 1
        else f"{', '.join(big)} ask for more with their fastest plans; within the cap they must run"
    )
    return (
        f"{row['slowdown']:.3f}x the uncapped pass: {calls_changing_plan(row['calls_changing_plan'])}. "
        f"{who} a slower plan that fits in {fmt_bytes(SMALL_CAP)}, which adds "
        f"{fmt_us(float(row['pass_gpu_us']) - uncapped)} to a pass of {fmt_us(uncapped)} (kernel times)."
    )


def _cap_wrong(answer: str, truth: str) -> str:
    costs = "more" if list(SLOWDOWNS).index(answer) < list(SLOWDOWNS).index(truth) else "less"
    return f"the cap costs {costs} than that."


small_cap_cost = Exercise(
    name="small_cap_cost",
    lesson="09",
    kind="predict",
    question=f"Before the budget curve: if every call of the ResNet-50 pass had to fit its workspace in "
    f"{fmt_bytes(SMALL_CAP)}, how much slower would the pass be? ('under 2%', '2-20%' or 'over 20%')",
    truth=_slowdown_class,
    parse=one_of(tuple(SLOWDOWNS), "a slowdown class"),
    judge=equal,
    why=_cap_why,
    hints=(
        "rep.over_cap(4 * 2**20) lists the calls whose fastest plan needs more than the cap, each with "
        "its fastest plan that fits (within_cap_gpu_us); the whole pass is rep.layers.fastest_gpu_us.sum(), "
        "the summary's total of the fastest plans.",
        "each of those calls adds within_cap_gpu_us - fastest_gpu_us to the pass; the slowdown is the "
        "sum of what they add over the whole pass time.",
    ),
    wrong=_cap_wrong,
    example="over 20%",
    wrong_answers=lambda truth: [k for k in SLOWDOWNS if k != truth],
)


# ---- explore: VGG16's largest workspace, and the strategy it costs most under -------------------
def _vgg():
    df = report_frame(EXPLORE_NET)
    layers = ok_rows(table_of(df, "layers"))
    strategies = ok_rows(table_of(df, "strategies"))
    return layers, strategies


def _vgg_truth() -> tuple:
    layers, strategies = _vgg()
    big = layers.loc[layers["fastest_workspace_bytes"].idxmax()]
    worst = strategies.loc[strategies["peak_workspace_bytes"].idxmax()]
    return (str(big["layer"]), str(worst["strategy"]))


def _vgg_parse(answer):
    if (
        not isinstance(answer, (tuple, list))
        or len(answer) != 2
        or not all(isinstance(a, str) and a.strip() for a in answer)
    ):
        raise InvalidSpec(
            "answer", answer, "must be a pair (layer, strategy), e.g. ('features.0', 'cupy_pool')"
        )
    layers, strategies = _vgg()
    layer, strategy = (a.strip() for a in answer)
    if layer not in set(layers["layer"]):
        raise InvalidSpec(
            "answer", answer, f"must name a layer of {EXPLORE_NET} first (its report's layers.layer)"
        )
    named = labels.match(strategy, list(strategies["strategy"]))
    if named is None:
        raise InvalidSpec(
            "answer", answer, f"must name a strategy second: one of {', '.join(strategies['strategy'])}"
        )
    return (layer, named)


def _vgg_parts(answer) -> tuple:
    layers, strategies = _vgg()
    need = layers.groupby("layer")["fastest_workspace_bytes"].max()
    peak = strategies.set_index("strategy")["peak_workspace_bytes"]
    return need[answer[0]] >= need.max(), peak[answer[1]] >= peak.max()


def _vgg_why(truth: tuple) -> str:
    layers, strategies = _vgg()
    need = layers.groupby("layer", sort=False)["fastest_workspace_bytes"].max()
    tied = [name for name, b in need.items() if b == need.max()]
    peak = strategies.set_index("strategy")["peak_workspace_bytes"]
    others = peak.drop(truth[1])
    return (
        f"{', '.join(tied)} ({'each ' if len(tied) > 1 else ''}{fmt_bytes(need.max())} for the fastest "
        "plan); "
        f"{truth[1]} holds {fmt_bytes(peak[truth[1]])} at its peak, the others at most "
        f"{fmt_bytes(others.max())}."
    )


def _vgg_wrong(answer, truth):
    layer_ok, strategy_ok = _vgg_parts(answer)
    if layer_ok:
        return "the layer is right; another strategy holds more at its peak."
    if strategy_ok:
        return "the strategy is right; another layer asks for more workspace."
    return "neither part is right yet."


def _vgg_leaks(truth: tuple):
    layers, _ = _vgg()
    need = layers.groupby("layer")["fastest_workspace_bytes"].max()
    return tuple(rf"(?<![\w.]){re.escape(name)}(?![\w.])" for name, b in need.items() if b == need.max())


def _vgg_wrong_answers(truth: tuple):
    layers, strategies = _vgg()
    small = layers.loc[layers["fastest_workspace_bytes"].idxmin(), "layer"]
    low = strategies.loc[strategies["peak_workspace_bytes"].idxmin(), "strategy"]
    return [(small, truth[1]), (truth[0], low)]


vgg16_workspace = Exercise(
    name="vgg16_workspace",
    lesson="09",
    kind="explore",
    question=f"Run the report on {EXPLORE_NET} yourself: which of its layers asks for the most workspace "
    "with its fastest plan, and under which strategy does the pass hold the most workspace at its peak? "
    "Answer a pair (layer, strategy).",
    truth=_vgg_truth,
    parse=_vgg_parse,
    judge=lambda answer, truth: all(_vgg_parts(answer)),
    why=_vgg_why,
    hints=(
        f"labkit.report('{EXPLORE_NET}') gives the report; its layers table has fastest_workspace_bytes per "
        "layer and its strategies table peak_workspace_bytes per strategy.",
        "sort each table by that column (sort_values(..., ascending=False)); several layers may tie.",
    ),
    wrong=_vgg_wrong,
    example=("features.0", "cupy_pool"),
    leaks=_vgg_leaks,
    wrong_answers=_vgg_wrong_answers,
)


# ---- explain: what async_pool holds -------------------------------------------------------------
def _pool():
    df = report_frame()
    strategies = ok_rows(table_of(df, "strategies")).set_index("strategy")
    layers = ok_rows(table_of(df, "layers"))
    timeline = table_of(df, "timeline")
    return strategies, layers, timeline[timeline["strategy"] == "async_pool"]


def _pool_reason() -> str:
    strategies, layers, line = _pool()
    p = strategies.loc["async_pool"]
    largest = float(layers["fastest_workspace_bytes"].max())
    held = line["held_bytes"][line["held_bytes"] > 0]
    if held.nunique() > 1 and held.is_monotonic_increasing:
        return "leak"
    if p["held_after_bytes"] < p["peak_workspace_bytes"]:
        return "pending"
    if p["peak_workspace_bytes"] == largest:
        return "arena"
    return "chunks"


def _pool_why(truth: str) -> str:
    strategies, layers, line = _pool()
    p = strategies.loc["async_pool"]
    largest = float(layers["fastest_workspace_bytes"].max())
    held = line["held_bytes"][line["held_bytes"] > 0]
    holding = (
        "stayed the same from its first workspace on" if held.nunique() <= 1 else "changed along the pass"
    )
    facts = (
        f"async_pool held {fmt_bytes(p['peak_workspace_bytes'])} at its peak and "
        f"{fmt_bytes(p['held_after_bytes'])} after the pass, where the largest workspace a call asks for is "
        f"{fmt_bytes(largest)}; it made {int(p['alloc_calls_per_pass'])} allocations a pass, and its holding "
        f"{holding}."
    )
    reason = {
        "chunks": "What it reports is the memory its stream-ordered pool (cudaMallocAsync) reserved "
        "from the driver (CuPy's total_bytes reads cudaMemPoolAttrReservedMemCurrent). The driver "
        "reserves pool memory in whole chunks, so a request of a few bytes reserves a chunk, and CuPy's "
        "MemoryAsyncPool sets the pool's release threshold to the maximum, so the chunk is not handed "
        "back at synchronisations: every call after the first is served from it.",
        "leak": "Here its holding grew call by call: a leak.",
        "pending": "Here it held less after the pass than at its peak: frees still in flight.",
        "arena": "Here it held exactly the largest request: an arena sized for it.",
    }[truth]
    return f"{facts} {reason}"


async_pool_holds = explain(
    name="async_pool_holds",
    lesson="09",
    question="In the ResNet-50 report, async_pool holds more workspace than any call asks for, from its "
    "first workspace until after the pass. Why?",
    truth=_pool_reason,
    why=_pool_why,
    hints=(
        "compare, in rep.strategies, async_pool's peak_workspace_bytes with held_after_bytes and with "
        "the largest fastest_workspace_bytes of rep.layers; then look at its line in the timeline.",
        "the pool asks the driver for memory and hands out pieces of it: what does a pool report, what "
        "it handed out or what it got?",
    ),
    wrong=lambda answer, truth: {
        "leak": "a leak grows call by call; its line is flat from its first workspace on, though it "
        "allocates on every call that needs one.",
        "arena": "an arena sized for the network would hold the largest request; it holds more than that.",
        "pending": "frees still in flight would be gone after the pass; it holds as much after the pass "
        "as at its peak.",
        "chunks": "look at its line in the timeline again.",
    }.get(answer),
    choices={
        "chunks": "its pool reserves device memory from the driver in whole chunks and keeps them",
        "leak": "it never frees a workspace, so its memory grows with every call",
        "arena": "it sizes one buffer for the network's largest layer up front",
        "pending": "its cudaFreeAsync calls have not run yet when the bytes are counted",
    },
)


# ---- explain, worked out: the pass with no workspace at all ------------------------------------------
def _zero_calls():
    """rep.layers with the time each call takes under a 0 B cap (``zero_us``) and whether it changes plan."""
    layers = ok_rows(table_of(report_frame(), "layers"))
    needs = layers["fastest_workspace_bytes"] > 0
    return layers.assign(
        needs=needs, zero_us=layers["fastest_gpu_us"].where(~needs, layers["smallest_gpu_us"])
    )


def _zero_inputs() -> dict:
    return dict(call_us=[float(v) for v in _zero_calls()["zero_us"]])


def _zero_model(call_us) -> float:
    """One pass's GPU time: the sum of its calls' times."""
    return sum(call_us)


def zero_cap_split(keep: int, change: int, *, keep_us: float) -> str:
    """Which calls keep their fastest plan with no workspace and which change, in words that agree.

    Args:
        keep: how many calls keep their fastest plan (it needs no workspace).
        change: how many calls run their smallest-workspace plan instead.
        keep_us: the kept calls' time, us.

    Returns:
        The clause, up to the changed calls' time (which the caller gives).
    """
    kept = (
        f"1 call keeps its fastest plan ({keep_us:.1f} us)"
        if keep == 1
        else f"{keep} calls keep their fastest plan ({keep_us:.1f} us)"
    )
    if change == 1:
        return f"{kept}; the 1 whose fastest plan needs a workspace runs its smallest-workspace plan"
    return f"{kept}; the {change} whose fastest plan needs a workspace run their smallest-workspace plan"


def _zero_why(truth: float) -> str:
    calls = _zero_calls()
    keep, change = calls[~calls["needs"]], calls[calls["needs"]]
    fast = float(calls["fastest_gpu_us"].sum())
    budget = table_of(report_frame(), "budget")
    drawn = budget[budget["cap_bytes"] == 0]["pass_gpu_us"]
    split = zero_cap_split(len(keep), len(change), keep_us=float(keep["zero_us"].sum()))
    text = (
        f"{split} ({change['zero_us'].sum():.1f} us, "
        f"against {change['fastest_gpu_us'].sum():.1f} us): {keep['zero_us'].sum():.1f} + "
        f"{change['zero_us'].sum():.1f} = {truth:.1f} us, against {fast:.1f} us with no cap, "
        f"{truth / fast:.3f}x."
    )
    if abs(float(calls["smallest_gpu_us"].sum()) - truth) <= 1e-6 * truth:
        text += (
            " That is rep.layers.smallest_gpu_us.sum(): where a call's fastest plan needs no workspace, "
            "it is also the fastest of the plans that need the least, its smallest-workspace plan."
        )
    if len(drawn) and abs(float(drawn.iloc[0]) - truth) <= 1e-6 * truth:
        text += " The budget curve draws the same sum at its 0 B point."
    elif len(drawn):
        text += (
            f" The budget curve's 0 B point reads {fmt_us(float(drawn.iloc[0]))}: it takes each call's "
            "fastest plan that needs no workspace, which is not always its smallest-workspace plan."
        )
    return text


def _capped_slips(truth: float, uncapped: float, rel: float) -> list:
    """(pass time, what went wrong) for the budget curve's caps above 0 B whose pass time is neither
    the 0 B pass nor the uncapped one (1 MiB and 4 MiB for ResNet-50), caps of one time together."""
    budget = table_of(report_frame(), "budget")
    capped = budget[(budget["cap_bytes"] > 0) & budget["pass_gpu_us"].notna()]
    out = []
    for us, rows in capped.groupby("pass_gpu_us", sort=True):
        if abs(us - truth) <= rel * truth or abs(us - uncapped) <= rel * uncapped:
            continue
        caps = " or a ".join(fmt_bytes(int(b)) for b in rows["cap_bytes"])
        said = (
            f"that is the pass under a {caps} cap (the budget curve's): there only the calls whose fastest "
            "plan needs more than the cap change plan; with a 0 B cap, every call whose fastest plan needs "
            "any workspace at all does."
        )
        out.append((float(us), said))
    return out


def _zero_slips() -> list:
    calls = _zero_calls()
    change = calls[calls["needs"]]
    truth = _zero_model(**_zero_inputs())
    capped = _capped_slips(truth, float(calls["fastest_gpu_us"].sum()), ZERO_REL)
    return capped + [
        (
            float(calls["fastest_gpu_us"].sum()),
            "that is the pass with no cap: the cap changes every call whose fastest plan needs a workspace.",
        ),
        (float(change["zero_us"].sum()), "that is only the calls that change plan; the pass has every call."),
        (
            float((calls["zero_us"] * calls["count"]).sum()),
            "each row of rep.layers is one call already (count "
            "says how many calls share its spec): sum the rows, not rows x count.",
        ),
    ]


zero_cap_pass = worked(
    name="zero_cap_pass",
    lesson="09",
    question=(
        "Now exactly, for the tightest cap: with no workspace at all (a 0 B cap), every call whose fastest "
        "plan needs a workspace runs its smallest-workspace plan instead (smallest_gpu_us; each of those "
        "needs none here), and the others keep their fastest. From rep.layers, how many microseconds does "
        "one pass of all the calls take on the GPU?"
    ),
    inputs=_zero_inputs,
    model=_zero_model,
    rel=ZERO_REL,
    unit="microseconds",
    why=_zero_why,
    hints=(
        "A pass's GPU time is the sum of its calls' times: which time does each call take under the cap?",
        "Each call takes fastest_gpu_us or smallest_gpu_us under the cap. For a call whose fastest plan "
        "needs no workspace, which plan is its smallest-workspace plan (the fastest of those that need "
        "the least)?",
    ),
    wrong=slips(
        _zero_slips,
        rel=ZERO_REL,
        unit="microseconds",
        high="more than the model gives: only the calls whose fastest plan needs a workspace change plan.",
        low="less than the model gives: sum every call of the pass, each once (one row per call).",
    ),
    wrong_answers=lambda truth: [truth * 0.9, truth * 1.2, truth / 1e3],
)
