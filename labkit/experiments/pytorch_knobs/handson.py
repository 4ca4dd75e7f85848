"""Lesson 11's hands-on cell, ``%%handson unchanged_knobs``: the learner reads the knobs' table and
finds the settings that changed nothing measurable against PyTorch's defaults; the check compares
them with labkit's reading of the same rows (`summaries.unchanged`)."""

from __future__ import annotations

from ... import env
from ...practice.findings import Problem
from ..checking import CheckResult, emit
from ..handson_check import verdict
from .runs import knobs_result
from .summaries import DEFAULTS, row_of, same_time, unchanged

#: the reference solution of the hands-on cell ``%%handson unchanged_knobs`` (`labkit.session.handson`)
UNCHANGED_KNOBS = '''\
knobs = lessons.knobs()  # the table the chart draws


def unchanged(knobs):
    """The PyTorch settings whose median and the defaults' each lie in the other's p10-p90, and whose two
    peaks are within 1 MiB of the defaults'."""
    pt = knobs[(knobs.source == "pytorch") & (knobs.status == "ok")]
    base = pt[pt.setting == "PyTorch's defaults"].iloc[0]
    mine_in = (base.gpu_us_p10 <= pt.gpu_us) & (pt.gpu_us <= base.gpu_us_p90)
    overlap = mine_in & (pt.gpu_us_p10 <= base.gpu_us) & (base.gpu_us <= pt.gpu_us_p90)
    peaks = [(pt[c] - base[c]).abs() < 2**20 for c in ("first_peak_bytes", "steady_peak_bytes")]
    return list(pt[overlap & peaks[0] & peaks[1] & (pt.setting != base.setting)].setting)


my_unchanged = unchanged(knobs)
assert check.unchanged_knobs(my_unchanged)
'''
#: hands-on cells: name -> (reference solution source, whether it starts on a fresh GPU)
HANDS_ON = {"unchanged_knobs": (UNCHANGED_KNOBS, False)}
NAMES = {"missing": "left out", "extra": "not unchanged"}
HINTS = {
    "missing": (
        "a timing is a range, not one number: two settings are alike when each one's median (gpu_us) lies "
        "in the other's p10-p90 range.",
        "keep a setting when its gpu_us is within the defaults' gpu_us_p10 to gpu_us_p90 and the defaults' "
        "gpu_us within its own, and both peaks are within 1 MiB (2**20 bytes) of the defaults'.",
    ),
    "extra": (
        "both peaks count: the first call's and the steady calls'.",
        "leave out PyTorch's defaults itself, and any setting one of whose peaks differs by 1 MiB or more.",
    ),
}


def _why_not(row, base) -> str:
    """Why one setting is not unchanged (never the list itself)."""
    if not same_time(row, base):
        return "its median and the defaults' are not each within the other's p10-p90"
    return "a peak differs from the defaults' by 1 MiB or more"


def unchanged_knobs(answer=None) -> CheckResult:
    """Lesson 11 hands-on: the settings that changed neither the time per call nor the peaks.

    Args:
        answer: the settings' names, as ``my_unchanged`` holds them.

    Returns:
        A `CheckResult`: right when the names are labkit's (`summaries.unchanged`), in any order.
    """
    if not isinstance(answer, (list, tuple, set)) or not all(isinstance(a, str) for a in answer):
        return emit(
            False, "my_unchanged must be a list of settings' names (the column 'setting').", "no answer yet"
        )
    df = knobs_result()
    truth, base = unchanged(df), row_of(df, DEFAULTS)
    how = "recorded on the" if df.attrs.get("mode") == "recorded" else "measured on this"
    ran = f"Your {len(set(answer))} settings, against the knobs {how} {env.gpu_label(df.attrs.get('gpu'))}."
    missing = [s for s in truth if s not in answer]
    problems = (
        [Problem("missing", f"{len(missing)} setting(s) whose time and both peaks match the defaults'")]
        if missing
        else []
    )
    for s in sorted(set(answer) - set(truth)):
        row = row_of(df, s)
        why = (
            "it is the defaults themselves"
            if s == DEFAULTS
            else "no such setting ran"
            if row is None
            else _why_not(row, base)
        )
        problems.append(Problem("extra", f"{s}: {why}"))
    if problems:
        return verdict("unchanged_knobs", ran, problems, right="", hints=HINTS, names=NAMES)
    n = len(df[df.source == "pytorch"]) - 1
    return verdict(
        "unchanged_knobs",
        ran,
        [],
        right=f"They are labkit's reading of the same rows: {len(truth)} of the {n} settings changed "
        "nothing measurable here for one shape (the plan cache's limit still counts when shapes change: "
        "its two-batch row). A knob that changes nothing on one PyTorch and cuDNN may on another: "
        "measure it again after an upgrade.",
    )
