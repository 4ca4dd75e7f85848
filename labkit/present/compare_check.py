"""Lesson 08's exercises (the same convolution on another GPU), as `labkit.experiments.exercise.Exercise`
objects that `labkit.present.check` serves as ``check.<name>(answer, reveal=False)``.

Every answer is computed from the shipped recordings through `labkit.present.compare` (the same
frames the lesson's charts draw): the first recording is the baseline, the second the other GPU.
"""

from __future__ import annotations

from .. import ceilings
from ..draw import plots
from ..errors import InvalidSpec
from ..experiments.exercise import Exercise, equal, explain, flag, number_leaks, one_of
from ..experiments.worked import slips, worked
from . import compare

#: a shape "gains" in the explore exercise when the other GPU takes less than this share of the time
GAIN_BELOW = 0.95
#: the dtypes of the base convolution whose gain the explain exercise asks about
WIDE = ("fp32", "tf32")
NARROW = ("fp16", "bf16")


def _gpu(df, rec: str) -> str:
    return compare.short_gpu(df.attrs["provenance"][rec]["gpu"])


def _pair(df):
    recs = df.attrs["recordings"]
    if len(recs) < 2:
        raise InvalidSpec("recordings", recs, "must be at least two recordings to compare")
    return recs[0], recs[1]


# ---- 1. predict: which shape gains most -------------------------------------------------------
def _roof():
    df = compare.frames("roofline")
    table = compare.ratios(df)
    return df, table, compare.ratio_column(table)


def _shapes() -> list:
    return list(_roof()[1]["shape"])


def _biggest_gain() -> str:
    _, table, col = _roof()
    ok = table[table[col].notna()]
    return str(ok.loc[ok[col].idxmin(), "shape"])


def _gain_why(truth: str) -> str:
    df, table, col = _roof()
    base, other = _pair(df)
    row = table.set_index("shape").loc[truth]
    mine = df[(df["recording"] == base) & (df["shape"] == truth)].iloc[0]

    c = ceilings.for_gpu(df.attrs["provenance"][base]["gpu"])
    roof = (
        f", {mine['achieved_gb_s'] / (c.bandwidth_bytes_per_s / 1e9):.0%} of its memory bandwidth"
        if c
        else ""
    )
    return (
        f"{truth} takes {row[col]:.2f}x the time on the {_gpu(df, other)} "
        f"({plots.fmt_us(row[f'gpu_us {base}'])} -> {plots.fmt_us(row[f'gpu_us {other}'])}). "
        "It has the lowest arithmetic intensity of these shapes "
        f"({mine['intensity_flops_per_byte']:.0f} FLOP/B, left of both ridges), and on the {_gpu(df, base)} "
        f"it moved {mine['achieved_gb_s']:.0f} GB/s{roof}: a kernel held back by memory traffic, which is "
        "what more bandwidth speeds up."
    )


def _gain_wrong(answer: str, truth: str):
    df, table, col = _roof()
    row = table.set_index("shape").loc[answer]
    return f"{answer} takes {row[col]:.2f}x the time on the {_gpu(df, _pair(df)[1])}."


def _gain_leaks(truth: str):
    _, table, col = _roof()
    return tuple(number_leaks(float(table.set_index("shape").loc[truth, col])))


biggest_gain = Exercise(
    name="biggest_gain",
    lesson="08",
    kind="predict",
    question="Before you see the second GPU's times: which ResNet-50 shape of the roofline gains most on "
    "the GPU with more memory bandwidth (the smallest time ratio)? Name it as in the shape column.",
    truth=_biggest_gain,
    parse=lambda answer: one_of(_shapes(), "a shape of the roofline")(answer),
    judge=equal,
    why=_gain_why,
    hints=(
        "the two GPUs share their compute roof and differ in memory bandwidth: which shape is held "
        "down by memory traffic rather than by its math?",
        "arithmetic intensity is FLOPs per byte moved: the fewer FLOPs a shape does per byte, the more "
        "its time depends on bandwidth. Compare the intensity column with the ridge of the ceilings table.",
    ),
    wrong=_gain_wrong,
    example="3x3 @28",
    leaks=_gain_leaks,
    wrong_answers=lambda truth: [s for s in _shapes() if s != truth][:2],
)


# ---- 2. predict: does the fastest plan change -------------------------------------------------
def _bests(df):
    base, other = _pair(df)
    return {r: df[(df["recording"] == r) & df["best"].astype(bool)].iloc[0] for r in (base, other)}


def _best_changes() -> bool:
    df = compare.frames("plans")
    best = _bests(df)
    base, other = _pair(df)
    return bool(best[base]["plan_name"] != best[other]["plan_name"])


def _best_why(truth: bool) -> str:
    df = compare.frames("plans")
    base, other = _pair(df)
    best = _bests(df)
    a, b = best[base], best[other]

    def spread(row):
        return f"{plots.fmt_us(row['gpu_us'])}, p10-p90 {row['gpu_us_p10']:.1f}-{row['gpu_us_p90']:.1f} us"

    fastest = (
        f"{_gpu(df, base)}'s fastest: {a['plan_name']} ({spread(a)}); {_gpu(df, other)}'s: {b['plan_name']} "
        f"({spread(b)})"
    )
    if not truth:
        return f"{fastest}: the same plan wins on both."
    on_other = df[(df["recording"] == other) & (df["plan_name"] == a["plan_name"])].iloc[0]
    if on_other["gpu_us_p10"] <= b["gpu_us_p90"]:
        gap = (
            "the two plans' spreads overlap, so they are equally fast within noise and either may win a run."
        )
    else:
        gap = f"{on_other['gpu_us'] / b['gpu_us'] - 1:.1%} slower, beyond the spread of repeated timings."
    return (
        f"{fastest}. On the {_gpu(df, other)}, {_gpu(df, base)}'s winner takes {spread(on_other)}: {gap} The "
        "heuristic, which does not measure, picks the same plan on both."
    )


def _best_wrong(answer: bool, truth: bool) -> str:
    """What the plans show against a wrong answer: where the first GPU's fastest plan ranks on the
    second (its time and spread, how many of the second GPU's plans ran faster), without naming the
    second GPU's fastest plan."""
    df = compare.frames("plans")
    base, other = _pair(df)
    winner = _bests(df)[base]
    timed = df[(df["recording"] == other) & df["gpu_us"].notna()]
    same = timed[timed["plan_name"] == winner["plan_name"]]
    a, b, plan = _gpu(df, base), _gpu(df, other), winner["plan_name"]
    if same.empty:
        return f"The {a}'s fastest plan, {plan}, was not timed on the {b}."
    row = same.iloc[0]
    us, p10, p90 = plots.fmt_us(row["gpu_us"]), row["gpu_us_p10"], row["gpu_us_p90"]
    faster = int((timed["gpu_us"] < row["gpu_us"]).sum())
    if faster:
        return (
            f"On the {b}, the {a}'s fastest plan ({plan}) takes {us} (p10-p90 {p10:.1f}-{p90:.1f} us), "
            f"and {faster} of the {b}'s plans ran faster."
        )
    return (
        f"On the {b}, the {a}'s fastest plan ({plan}) takes {us} (p10-p90 {p10:.1f}-{p90:.1f} us), and none "
        f"of the {b}'s other plans ran faster."
    )


best_plan_changes = Exercise(
    name="best_plan_changes",
    lesson="08",
    kind="predict",
    question="Before the plans chart: autotuning times every plan of the base convolution on each GPU. "
    "Is the fastest plan on the second GPU a different plan from the first's? (True / False)",
    truth=_best_changes,
    parse=flag("True or False"),
    judge=equal,
    why=_best_why,
    hints=(
        "both GPUs are Hopper with the same cuDNN, so the heuristic ranks plans alike; autotuning "
        "measures, and several plans of this convolution lie within a few percent of each other.",
        "two plans whose times differ by less than the spread of repeated timings can swap places "
        "from one run, or one GPU, to the next.",
    ),
    wrong=_best_wrong,
    example=True,
)


# ---- 3. explain: why fp32 and tf32 gain ------------------------------------------------------
def _precision():
    df = compare.frames("precision")
    table = compare.ratios(df).set_index("dtype")
    return df, table, compare.ratio_column(table.reset_index())


def _wide_reason() -> str:
    df, table, col = _precision()
    base, other = _pair(df)
    plan = df.set_index(["recording", "dtype"])["plan_name"]
    if any(plan[(base, d)] != plan[(other, d)] for d in WIDE):
        return "plan"
    low, high = (table[col.replace("ratio ", f"ratio {w} ", 1)] for w in ("low", "high"))
    if any(low[d] <= 1 <= high[d] for d in WIDE):
        return "noise"
    if all(high[d] < 1 for d in NARROW):
        return "clock"
    return "memory"


def _wide_why(truth: str) -> str:
    df, table, col = _precision()
    base, other = _pair(df)
    rng = {d: compare.ratio_text(table.loc[d, col], *_range(table, col, d)) for d in WIDE + NARROW}
    mine = df[df["recording"] == base].set_index("dtype")
    fp32 = mine.loc["fp32"]
    reasons = {
        "memory": "The two GPUs share their SMs and tensor cores, with the same compute roof on paper; what "
        "differs is memory bandwidth. A kernel that gains is one whose time depends on memory traffic: fp32 "
        "and tf32 read and write 4-byte values, twice the bytes of fp16 for the same FLOPs, and the fp32 "
        f"plan ({fp32['plan_name']}) also streams a {plots.fmt_bytes(fp32['workspace_bytes'])} workspace "
        "every call.",
        "plan": "Here the plans differ between the GPUs, so the gain comes from another kernel.",
        "noise": "Here the ranges under the timing spread include 1: no measured difference.",
        "clock": "Here fp16 and bf16 gain as well: every dtype runs faster on the second GPU.",
    }
    ratios = ", ".join(f"{d} {rng[d]}" for d in WIDE + NARROW)
    return (
        f"On the {_gpu(df, other)}: {ratios} (time ratio [its range under the p10-p90 spreads]); each dtype "
        f"ran the same plan on both GPUs. {reasons[truth]}{_fp8_too(table, col, mine)}"
    )


def _fp8_too(table, col, mine) -> str:
    """A sentence on fp8, when it gains beyond its spread though its values are 1 byte and its plan
    runs slower than fp16's: its time too depends on memory traffic."""
    d = "fp8_e4m3"
    if d not in table.index or d not in mine.index or not _range(table, col, d)[1] < 1:
        return ""
    if not mine.loc[d, "gpu_us"] > mine.loc["fp16", "gpu_us"]:
        return ""
    return (
        f" fp8_e4m3 gains too ({compare.ratio_text(table.loc[d, col], *_range(table, col, d))}), with 1-byte "
        f"values: its plan takes longer than fp16's ({plots.fmt_us(mine.loc[d, 'gpu_us'])} against "
        f"{plots.fmt_us(mine.loc['fp16', 'gpu_us'])}) though fp8's tensor cores do twice fp16's work per "
        "cycle: its arithmetic is not what bounds it, and on two GPUs that differ in memory alone its time "
        "too depends on memory traffic."
    )


def _range(table, col, d):
    return tuple(table.loc[d, col.replace("ratio ", f"ratio {w} ", 1)] for w in ("low", "high"))


wide_dtypes_gain = explain(
    name="wide_dtypes_gain",
    lesson="08",
    question="The base convolution in fp32 and tf32 runs faster on the second GPU, while fp16 and bf16 "
    "run at the same speed. Why?",
    truth=_wide_reason,
    why=_wide_why,
    hints=(
        "list what differs between the two GPUs on paper (the ceilings table), then ask which of the "
        "dtypes that would help.",
        "fp16 runs on the same tensor cores as tf32: if the second GPU computed faster, would fp16 stay "
        "where it was?",
    ),
    wrong=lambda answer, truth: {
        "clock": "if the second GPU computed faster, fp16 and bf16 would gain too; their ratios stay at 1 "
        "within the spread of repeated timings.",
        "plan": "each dtype ran the same plan on both GPUs (the plan_name column of the precision frame).",
        "noise": "the ratio's range under both GPUs' p10-p90 spreads stays below 1 for fp32 and tf32.",
        "memory": "look at what differs between the GPUs in this recording again.",
    }.get(answer),
    choices={
        "memory": "their kernels' time depends on memory traffic, and the second GPU has more bandwidth",
        "clock": "the second GPU runs its tensor cores at a higher clock",
        "plan": "the second GPU picked faster plans for fp32 and tf32",
        "noise": "one run is not a measurement: the difference is noise",
    },
)


# ---- 4. explore: tf32 shapes that gain ---------------------------------------------------------
def _tf32():
    df = compare.frames("roofline", dtype="tf32")
    table = compare.ratios(df)
    return df, table, compare.ratio_column(table)


def _gainers(table, col) -> list:
    """The shapes at least 5 % faster on the second GPU (time ratio below `GAIN_BELOW`), fastest first."""
    return list(table[table[col] < GAIN_BELOW].sort_values(col)["shape"])


def _tf32_only() -> list:
    """The shapes that gain in tf32 and not in fp16."""
    _, table, col = _tf32()
    _, t16, c16 = _roof()
    fp16 = set(_gainers(t16, c16))
    return [s for s in _gainers(table, col) if s not in fp16]


def _tf32_why(truth: str) -> str:
    df, table, col = _tf32()
    base, other = _pair(df)
    _, t16, c16 = _roof()
    r32, r16 = table.set_index("shape")[col], t16.set_index("shape")[c16]
    tf32_only = _tf32_only()
    only = ", ".join(f"{s} ({r16[s]:.2f}x in fp16, {r32[s]:.2f}x in tf32)" for s in tf32_only)
    both = ", ".join(s for s in _gainers(table, col) if s not in tf32_only)
    return (
        f"Time ratios {_gpu(df, other)}/{_gpu(df, base)}: gaining in tf32 only, {only}; in both dtypes, "
        f"{both}. tf32 reads and writes 4-byte values: each shape's arithmetic intensity is half its fp16 "
        "one, so a shape that sat where the tensor cores bound it in fp16 can move to where bandwidth counts."
    )


tf32_gaining_shapes = Exercise(
    name="tf32_gaining_shapes",
    lesson="08",
    kind="explore",
    question="Compare the ResNet-50 shapes in tf32 on both GPUs (compare.frames('roofline', dtype='tf32')) "
    f"with the fp16 ones above: which shape runs at least {1 - GAIN_BELOW:.0%} faster on the second GPU "
    f"(time ratio below {GAIN_BELOW:g}) in tf32, but not in fp16?",
    truth=lambda: _tf32_only()[0],
    parse=lambda answer: one_of(_shapes(), "a shape as the table names it")(answer),
    judge=lambda answer, truth: answer in _tf32_only(),
    why=_tf32_why,
    hints=(
        "compare.ratios(compare.frames('roofline', dtype='tf32')) puts both GPUs' times and their ratio side "
        "by side; do the same for fp16 and compare the rows below the threshold.",
        "the ratio column is the second GPU's time over the first's: below 1 means faster.",
    ),
    wrong=lambda answer, truth: (
        f"{answer} gains in fp16 already."
        if answer in _gainers(*_roof()[1:])
        else f"{answer} does not gain in tf32."
    ),
    example="conv1 7x7/2",
    leaks=lambda truth: (),  # every shape is named in the tables above: the answer is which one
    wrong_answers=lambda truth: [s for s in _shapes() if s not in _tf32_only()][:2],
)


# ---- explain, worked out: how much of a shape's time is bandwidth ------------------------------
#: the shape the worked exercise splits (the roofline's low-intensity 1x1 convolution)
SPLIT_SHAPE = "1x1 @56"


def _split_rows():
    df = compare.frames("roofline")
    base, other = _pair(df)
    rows = {r: df[(df["recording"] == r) & (df["shape"] == SPLIT_SHAPE)] for r in (base, other)}
    if any(v.empty for v in rows.values()):
        raise InvalidSpec("shape", SPLIT_SHAPE, "is not a shape of both recordings' roofline")
    return df, base, other, {r: v.iloc[0] for r, v in rows.items()}


def _split_inputs() -> dict:
    _, base, other, rows = _split_rows()
    return dict(
        first_us=float(rows[base]["gpu_us"]),
        second_us=float(rows[other]["gpu_us"]),
        first_gb_s=float(rows[base]["bandwidth_gb_s"]),
        second_gb_s=float(rows[other]["bandwidth_gb_s"]),
    )


def _split_model(first_us, second_us, first_gb_s, second_gb_s) -> float:
    """The part of ``first_us`` that scales with 1 / bandwidth, if t = F + M / bandwidth on both GPUs."""
    return (first_us - second_us) / (1 - first_gb_s / second_gb_s)


def _split_why(truth: float) -> str:
    df, base, other, rows = _split_rows()
    x = _split_inputs()
    a, b = _gpu(df, base), _gpu(df, other)
    floor = float(rows[base]["min_bytes"]) / (x["first_gb_s"] * 1e9) * 1e6
    d, bracket = x["first_us"] - x["second_us"], 1 - x["first_gb_s"] / x["second_gb_s"]
    return (
        f"F cancels in the difference: {x['first_us']:.2f} - {x['second_us']:.2f} = {d:.2f} us = (M / "
        f"{x['first_gb_s']:,.0f} GB/s) x (1 - {x['first_gb_s']:,.0f} / {x['second_gb_s']:,.0f}), so M / "
        f"{x['first_gb_s']:,.0f} GB/s = {d:.2f} / {bracket:.3f} = {truth:.1f} us of the {a}'s "
        f"{x['first_us']:.2f} us, and F = {x['first_us'] - truth:.1f} us (the times unrounded; the summary "
        "shows them to 0.1 us). Its bytes (the min-bytes model, "
        f"{rows[base]['min_bytes']:,.0f} B) take {floor:.1f} us at the {a}'s datasheet bandwidth: the "
        f"bandwidth part is {truth / floor:.2f}x that. F is time that the {b}'s bandwidth does not shorten."
    )


def _split_slips() -> list:
    x = _split_inputs()
    return [
        (x["first_us"] - x["second_us"], "that is how much the bandwidth part shrank, not how large it is."),
        (
            x["first_us"] * x["first_gb_s"] / x["second_gb_s"],
            "that is the whole time scaled by the bandwidths: only the bandwidth part scales.",
        ),
        (x["first_us"] - _split_model(**x), "that is the fixed part F; the question asks the other one."),
    ]


bandwidth_part = worked(
    name="bandwidth_part",
    lesson="08",
    question=(
        f"Model the {SPLIT_SHAPE} convolution's time on each GPU as a fixed part plus a part that moves "
        "bytes at the GPU's bandwidth: t = F + M / bandwidth, with the same F and M on both. From its two "
        "measured times (the chart above) and the two datasheet bandwidths (the ceilings table), how many "
        "microseconds of its time on the first GPU (the H100) is the bandwidth part, M / bandwidth?"
    ),
    inputs=_split_inputs,
    model=_split_model,
    rel=0.1,
    unit="microseconds",
    why=_split_why,
    hints=(
        "Subtract the two times: F cancels, and what is left is the bandwidth part on the H100 minus the "
        "same bytes at the H200's bandwidth.",
        "t_H100 - t_H200 = (M / bw_H100) x (1 - bw_H100 / bw_H200): divide by the bracket.",
    ),
    wrong=slips(
        _split_slips,
        rel=0.1,
        unit="microseconds",
        high="more than the model gives: the bandwidth part cannot exceed the whole time.",
        low="less than the model gives: the difference of the times is only the part that shrank.",
    ),
    wrong_answers=lambda truth: [truth / 3, truth * 3, truth * 1e3],
)


#: lesson 08's exercises, in the order the lesson asks them
EXERCISES = (biggest_gain, bandwidth_part, best_plan_changes, wide_dtypes_gain, tf32_gaining_shapes)
