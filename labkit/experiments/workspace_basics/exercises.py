"""Lesson 01's exercises: predict the layout that asks for less workspace, explore the batch sweep in
fp32 NCHW, explain what the fp16 NCHW plan keeps in its workspace and work out what moving it takes.
Answers come from the results in use."""

from __future__ import annotations

from typing import Optional

from ...draw.plots import (
    ok_rows,
)
from ...draw.prose import listed, where
from ...draw.units import as_written, size_text, us_text
from ...errors import LabkitError
from ..core import BASE, result
from ..exercise import Exercise, equal, explain, number, one_of
from ..worked import bandwidth, bandwidth_given, gpu_of, rate, slips, worked
from .runs import SWEEP_BASE, SWEEP_VALUES

# ---- exercises -------------------------------------------------------------------------------------


def _fprop_sizes(dtype: str):
    """layout -> the heuristic plan's workspace (bytes) of ``dtype`` fprop at the base shape."""
    df = ok_rows(result("workspace_sizes"))
    sub = df[(df["dtype"] == dtype) & (df["direction"] == "fprop")]
    return sub.set_index("layout")["heuristic_workspace_bytes"]


#: the dtype Exercise 1 asks about: fp32 values in memory, multiplied on tensor cores
PREDICT_DTYPE = "tf32"


def _less_workspace_why(truth: str) -> str:
    sizes = _fprop_sizes(PREDICT_DTYPE)
    other = "NCHW" if truth == "NHWC" else "NHWC"
    text = (
        f"{PREDICT_DTYPE} fprop: {truth}'s heuristic plan asks {size_text(sizes[truth])}, {other}'s "
        f"{size_text(sizes[other])} ({where(result('workspace_sizes'))})."
    )
    if truth != "NHWC":
        return text
    return (
        f"{text} tf32 multiplies on tensor cores, as fp16 does, and those kernels read channels-last data: "
        "the NCHW plan first copies its tensors into that order, in its workspace. The kernels decide, not "
        "the 4-byte storage: true fp32, whose kernels work on NCHW data, is the other way round."
    )


LESS_WORKSPACE = Exercise(
    name="less_workspace_layout",
    lesson="01",
    kind="predict",
    question=(
        "Before the chart below: tf32 keeps fp32 values in memory and multiplies them on tensor cores. For "
        "tf32 fprop at the base shape, which layout's heuristic plan asks for less workspace, 'NCHW' or "
        "'NHWC'?"
    ),
    truth=lambda: str(_fprop_sizes(PREDICT_DTYPE).idxmin()),
    parse=one_of(("NCHW", "NHWC"), "a layout"),
    judge=equal,
    why=_less_workspace_why,
    wrong_answers=lambda truth: ["NCHW" if truth == "NHWC" else "NHWC"],
    # the answer is a layout every sentence names: what gives it away is the reason, said before
    # the question is answered (the kernel, not the storage, decides; fp32's layouts swap roles)
    leaks=lambda truth: (r"kernels\s+(decide|work\s+on\s+(NCHW|NHWC))", r"layouts\s+swap\s+roles"),
    hints=(
        "Lesson 00 showed both sides: in true fp32 the NHWC plan converts into NCHW, in fp16 the NCHW plan "
        "converts into NHWC. Is it the storage or the kernel that decides?",
        "Tensor cores read a pixel's channels side by side: which layout stores them so, and where does a "
        "plan put a rearranged copy?",
    ),
)


def _batch_sweep():
    return ok_rows(result("sweep", field="N", values=SWEEP_VALUES["N"], base=SWEEP_BASE))


def _batch_workspace() -> int:
    return int(_batch_sweep()["workspace_bytes"].max())


def _batch_workspace_why(truth: int) -> str:
    sweep = _batch_sweep()
    plans = list(dict.fromkeys(sweep["plan_name"]))
    largest = (
        f"the largest workspace along N is {size_text(truth)} ({where(sweep)}): "
        f"from N={sweep['value'].min()} to N={sweep['value'].max()} the heuristic picks {listed(plans)}"
    )
    text = f"{largest}, plans that need no workspace at all." if truth == 0 else f"{largest}."
    try:
        channels = ok_rows(result("sweep", field="C=K", values=SWEEP_VALUES["C=K"], base=SWEEP_BASE))
    except LabkitError:
        return text
    big = channels.loc[channels["workspace_bytes"].idxmax()]
    return (
        f"{text} Channels are another matter: at C=K={big.value} the heuristic picks {big.plan_name}, which "
        f"asks {size_text(big.workspace_bytes)}. The workspace is the plan's, and the plan changes with the "
        "shape."
    )


def _other_sweeps():
    """(swept field, dtype · layout, workspaces in bytes) of every other sweep the panel offers that
    is at hand without measuring (recorded, or measured before on this GPU)."""
    out = []
    for base in (SWEEP_BASE, BASE):
        for field in SWEEP_VALUES:
            if (field, base) == ("N", SWEEP_BASE):
                continue
            try:
                df = result("sweep", at_hand_only=True, field=field, values=SWEEP_VALUES[field], base=base)
            except LabkitError:
                continue
            if df is not None:
                out.append(
                    (field, f"{base.dtype} {base.layout}", [int(b) for b in ok_rows(df)["workspace_bytes"]])
                )
    return out


def _batch_wrong(answer: float, truth: int) -> Optional[str]:
    if answer < 0:
        return "a number of bytes is never negative."
    for field, variant, sizes in _other_sweeps():
        for size in sizes:
            near = [abs(answer - v) <= 0.01 * v for v in (size, size / 2**20) if v >= 1 and v != truth]
            if any(near):
                return (
                    f"that is a workspace along {field} in {variant} ({size_text(size)}), another sweep than "
                    "this one: set the panel's dtype · layout to fp32 NCHW and its swept field to N."
                )
    return None


BATCH_WORKSPACE = Exercise(
    name="batch_workspace",
    lesson="01",
    kind="explore",
    question=(
        "Does a larger batch make fp32 NCHW ask for a workspace? In the sweep panel, keep dtype · layout at "
        "fp32 NCHW and sweep N: what is the largest workspace along that sweep, in bytes?"
    ),
    truth=_batch_workspace,
    parse=number("bytes"),
    judge=lambda answer, truth: abs(answer - truth) <= max(0.01 * truth, 0.5),
    why=_batch_workspace_why,
    hints=(
        "Set the panel's swept field to N; the lower chart labels every point with its workspace.",
        "Give the largest of those labels in bytes (1 KiB = 1,024 B, 1 MiB = 1,048,576 B).",
    ),
    wrong=_batch_wrong,
    leaks=lambda truth: (r"Sweep of N: GPU time and workspace.{0,80}fp32 NCHW", r"all along N\b"),
    wrong_answers=lambda truth: [truth + 25_763_987, truth + 131, truth + 9_421_455_360],
)

#: what the fp16 NCHW plan might keep in its workspace
NCHW_REASONS = {
    "layout_copies": "copies of its input, filter and output in channels-last (NHWC) order, for kernels "
    "that read that order",
    "unfolded_input": "the input unfolded into a matrix (im2col): one column per filter tap",
    "frequency_domain": "the input and filter transformed into the frequency domain (FFT)",
    "partial_sums": "partial sums of the output, added up by a second kernel (split-K)",
}


def _nchw_sizes():
    """(the fp16 NCHW spec, its heuristic plan's workspace, what each reason would take in bytes)."""
    spec = BASE.replace(layout="NCHW")
    ws = int(_fprop_sizes("fp16")["NCHW"])
    t = spec.tensor_bytes
    sizes = {
        "layout_copies": t["x"] + t["w"] + t["y"],
        "unfolded_input": spec.R * spec.S * t["x"],
        "partial_sums": 4 * spec.N * spec.K * spec.P * spec.Q,  # the output's sums in fp32
    }
    fft = _fft_bytes()
    if fft:
        sizes["frequency_domain"] = fft
    return spec, ws, sizes


def _fft_bytes() -> Optional[int]:
    """What the classic FFT algorithm asks for the fp16 NCHW base convolution (None: not at hand)."""
    try:
        algos = result("algorithms", spec=BASE.replace(layout="NCHW"))
        fft = algos[(algos["algorithm"] == "FFT") & (algos["query_status"] == "ok")]
        return int(fft["query_workspace_bytes"].iloc[0])
    except (LabkitError, IndexError, KeyError):
        return None


def _kernels_at_hand():
    """The heuristic plan's traced kernels (lesson 10's `kernels`), when at hand without tracing
    live (recorded, or traced before on this GPU); else None."""
    try:
        trace = result("kernels", at_hand_only=True, spec=BASE.replace(layout="NCHW"))
    except LabkitError:
        return None
    if trace is None:
        return None
    trace = ok_rows(trace)
    return trace[trace["plan_index"] == trace["plan_index"].min()]


def _nchw_reason() -> str:
    _, ws, sizes = _nchw_sizes()
    return min(sizes, key=lambda k: abs(sizes[k] - ws))


def _nchw_why(truth: str) -> str:
    spec, ws, sizes = _nchw_sizes()
    t = spec.tensor_bytes
    text = (
        f"the workspace it asks, {ws:,} B, is the input, filter and output in fp16 ({t['x']:,} + {t['w']:,} "
        f"+ {t['y']:,} = {sizes['layout_copies']:,} B) and {ws - sizes['layout_copies']:,} B more: copies in "
        "channels-last order, made before the NHWC kernel runs, the output converted back after."
    )
    kernels = _kernels_at_hand()
    if kernels is not None and len(kernels):
        short = [k.split("::")[-1][:40] for k in kernels["kernel"]]
        names = [f"{s} x{int(n)}" if n > 1 else s for s, n in zip(short, kernels["launches_per_call"])]
        text += f" Its traced kernels (lesson 10), in order: {', '.join(names)}."
    return text


def _nchw_wrong(answer: str, truth: str) -> Optional[str]:
    spec, ws, sizes = _nchw_sizes()
    if answer not in sizes:
        return None
    off = sizes[answer] - ws
    return (
        f"that would take {size_text(sizes[answer])} ({sizes[answer]:,} B); the plan asks {ws:,} B, "
        f"{abs(off):,} B {'less' if off > 0 else 'more'}. Which tensors add up to exactly that?"
    )


NCHW_WORKSPACE = explain(
    name="nchw_workspace_reason",
    lesson="01",
    question=(
        "The fp16 NCHW heuristic plan asks for megabytes of workspace, the fp16 NHWC one for a few bytes. "
        "What does the NCHW plan keep in its workspace?"
    ),
    truth=_nchw_reason,
    why=_nchw_why,
    hints=(
        "Divide its workspace by the size of one fp16 tensor of this convolution (32x64x56x56 x 2 bytes).",
        "The input and the output are the same size here; add the small filter (64x64x3x3 x 2 bytes). What "
        "would need exactly that much room?",
    ),
    wrong=_nchw_wrong,
    choices=NCHW_REASONS,
)


# ---- explain, worked out: what moving the NCHW plan's copies takes ---------------------------------
def _copy_inputs() -> dict:
    sizes = result("workspace_sizes")
    return dict(workspace_bytes=int(_fprop_sizes("fp16")["NCHW"]), bandwidth=bandwidth(gpu_of(sizes)))


def _copy_model(workspace_bytes, bandwidth) -> float:
    """Microseconds to write every workspace byte once and read it back once at ``bandwidth`` (B/s)."""
    return 2 * workspace_bytes / bandwidth * 1e6


def _copy_why(truth: float) -> str:
    x = _copy_inputs()
    text = (
        f"2 x {x['workspace_bytes']:,} B / {rate(x['bandwidth'])} = {truth:.1f} us: the least time the "
        "copies' traffic can take."
    )
    lay = result("layout", at_hand_only=True)
    if lay is None:
        return text
    t = ok_rows(lay).set_index("layout")["conv_gpu_us"].map(lambda us: as_written(us, us_text))  # adds up
    gap = float(t["NCHW"] - t["NHWC"])
    if gap <= 0:
        return text + f" Measured, the NCHW plan is no slower than the NHWC one ({where(lay)})."
    return text + (
        f" Measured ({where(lay)}, the table of lesson 00), the NCHW plan takes {t['NCHW']:.1f} us and the "
        f"NHWC plan {t['NHWC']:.1f} us: {gap:.1f} us more, {gap / truth:.1f}x the bound. If all of it is "
        f"that traffic, its conversion kernels move it at {truth / gap:.0%} of the datasheet bandwidth. A "
        "workspace costs time as well as memory: these bytes are traffic the NHWC plan never moves."
    )


COPY_TIME = worked(
    name="layout_copy_time",
    lesson="01",
    question=(
        "Every byte of the fp16 NCHW plan's workspace is written once and read back once. At this GPU's "
        "datasheet memory bandwidth, how many microseconds does that traffic take, at least?"
    ),
    inputs=_copy_inputs,
    model=_copy_model,
    rel=0.1,
    unit="microseconds",
    given=bandwidth_given("workspace_sizes"),
    why=_copy_why,
    hints=(
        "time = bytes moved / bandwidth. Which bytes (the chart above gives the fp16 NCHW plan's workspace), "
        "and how many times does each one cross the memory bus?",
        "Written once and read once: twice the workspace, in bytes (1 MiB = 1,048,576 B), over the bandwidth "
        "in bytes per second, gives seconds; x 1e6 for microseconds.",
    ),
    wrong=slips(
        lambda: [
            (_copy_model(**_copy_inputs()) / 2, "that counts each byte once: the copy is written, then read.")
        ],
        rel=0.1,
        unit="microseconds",
        high="more than the model gives: count the workspace's bytes twice, no more.",
        low="less than the model gives: count every byte of the workspace, written and read.",
    ),
    wrong_answers=lambda truth: [truth / 2, truth * 1e3, truth * 4],
)
