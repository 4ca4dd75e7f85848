"""Lesson 01's hands-on cells: one convolution run with a workspace the learner allocates, on this
GPU or on one simulated from the recording (`labkit.practice`); the reference solution
(`labkit.session.handson`) and the check: the output is right, the workspace is as large as the
plan asks and given back, and the learner's memory and host time stand beside the shipped
strategies' on the same call."""

from __future__ import annotations

from ...draw.plots import fmt_bytes
from ...errors import InvalidSpec
from ...practice import Practice, findings, passes
from ...practice.findings import Problem
from ..checking import CheckResult, emit
from ..handson_check import beside, verdict

# ---- hands-on: one convolution with a workspace you allocate ---------------------------------------
#: the setup cell, run as it is (the learner reads it)
CONV_SETUP_SOURCE = """\
gpu = lessons.device()              # this GPU; in recorded mode, a GPU simulated from the recording
spec = lessons.base(layout="NCHW")  # fp16 NCHW: its heuristic plan needs a workspace
conv = gpu.conv(spec)               # every plan cuDNN offers (built, each checked), seeded inputs
plan = conv.plan                    # the heuristic's pick
stream = gpu.stream()
"""
#: the reference solution of the cell the learner completes
OWN_WORKSPACE_SOURCE = """\
size = plan.workspace_bytes          # what the plan asks for (the frontend's get_workspace_size)
workspace = gpu.allocate(size)       # cudaMalloc: an address on the GPU
conv.run(workspace, stream=stream)   # queued: the kernels run later, on the stream
gpu.free(workspace)                  # cudaFree waits for the GPU: the call has run before it frees
assert check.own_workspace(gpu)
"""


def _strategies_beside(gpu: Practice, spec) -> list:
    """Each shipped strategy on two calls of ``spec`` (a first and a steady one), on a fresh GPU of
    the same kind: (name, peak bytes, cudaMallocs in the steady call, host microseconds per call)."""
    rows = [
        (r.strategy, r.peak_bytes, r.timed_alloc_calls, r.host_us_per_call)
        for r in passes.shipped_passes([spec], gpu.fresh)
    ]
    return rows


def own_workspace(gpu=None) -> CheckResult:
    """Lesson 01 hands-on: the convolution you ran with the workspace you allocated.

    Args:
        gpu: the `labkit.practice.Practice` you ran it on (``lessons.device()``).

    Returns:
        A `CheckResult`: correct when a call ran with at least the bytes its plan asks for, its
        output is right (live: against float64; simulated: not marked corrupt by the sanitizer),
        and nothing you allocated is still held.
    """
    if gpu is None:
        return emit(False, "pass the GPU you ran on: check.own_workspace(gpu)", lead="no answer yet")
    if not isinstance(gpu, Practice):
        raise InvalidSpec("gpu", gpu, "must be the GPU of the cells above (gpu = lessons.device())")
    mark = gpu.cell_mark
    mine = gpu.launches[mark.launches :]
    if not mine:
        return emit(False, "no call ran yet: conv.run(workspace, stream=stream) queues one.", "no answer yet")
    problems = findings.collect(gpu, mark)
    wrong = sum(c.wrong_outputs() for c in gpu.convs)
    if wrong and not problems:
        problems.append(Problem("wrong_output", f"{wrong} of {len(mine)} outputs are wrong"))
    last = mine[-1]
    ran = f"{len(mine)} call{'s' * (len(mine) > 1)} of plan {last.plan_index} of {last.conv} ({gpu.label})."
    if problems:
        return verdict("own_workspace", ran, problems, right="")
    errors = [e for c in gpu.convs for e in c.errors]
    checked = (
        "no call marked corrupt by the simulated sanitizer"
        if gpu.simulated
        else f"relative error {max(errors, default=float('nan')):.1e} against the float64 reference"
    )
    host = gpu.memory.cell_alloc_us + sum(c.host_us for c in mine)
    mine_row = ("you", gpu.memory.cell_peak_bytes, gpu.memory.cell_alloc_calls, host / len(mine))
    rows = _strategies_beside(gpu, gpu.convs[-1].spec)
    held, asked = gpu.memory.cell_peak_bytes, last.workspace_bytes
    size = (
        f"Your {fmt_bytes(asked)} workspace was what the plan asks"
        if held <= asked
        else f"You held {fmt_bytes(held)}, {held / asked:.1f}x the {fmt_bytes(asked)} the plan asks: it "
        f"runs, but {fmt_bytes(held - asked)} sat unused"
        if asked
        else f"You held {fmt_bytes(held)} for a plan that asks for none: it runs, but all of it sat unused"
    )
    return verdict(
        "own_workspace",
        ran,
        [],
        right=(
            f"{size}; {checked}; nothing left allocated. conv.run returned as soon as the kernels were "
            "queued, and gpu.free (cudaFree) waited for them. Beside the shipped strategies on the same "
            "call, each on a fresh GPU of this kind "
            "(allocations in a call once warm; host time of a call, allocation and launch included):\n"
            + beside(rows, mine=mine_row, time="host time per call")
        ),
    )
