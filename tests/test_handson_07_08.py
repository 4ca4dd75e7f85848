"""The hands-on cells of lessons 07 and 08 without a GPU, on the GPU simulated from each shipped
recording (`labkit.practice`, `labkit.simgpu`): the workspace knee (every plan under each of the caps
experiment's caps, the smallest cap within 5 % of no cap's time), and the same timing code run on
both GPUs (`lessons.gpus()`, each simulated from its own recording; for lesson 08 also a race and a
GPU left out). The reference passes its check on
both recordings; the learner's stub says what is missing in one line; a wrong solution (a timing of
one call, a leak, a workspace too small, a knee its own times do not give, times far from the caps
experiment's) fails with a hint that leads, the first hint the first time, the second after. The
same cell on a GPU: tests/test_handson_07_08_gpu.py."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from handson_helpers import RECORDINGS, assert_hinted, body, flat, run

from labkit import practice
from labkit.experiments import handson_check
from labkit.experiments.core import result
from labkit.experiments.lab import handson as lab
from labkit.experiments.lab import same_code as other_gpu
from labkit.session import handson, lessons
from labkit.store import recordings


@pytest.fixture(autouse=True)
def recorded(recorded_mode, monkeypatch):
    """Recorded mode from the default recording (the H100's); hints start over."""
    monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    handson_check.forget()
    handson.register_topics()


@pytest.fixture(params=sorted(RECORDINGS))
def recording(request, monkeypatch):
    """Each shipped recording in use in turn: (its name, its GPU as a label says it)."""
    monkeypatch.setenv("LABKIT_RECORDING", request.param)
    recordings._current = recordings._picked = None
    yield request.param, RECORDINGS[request.param]
    recordings._current = recordings._picked = None


# ---- lesson 07: the workspace knee -------------------------------------------------------------------
KNEE = lab.WORKSPACE_KNEE.replace("assert check.", "check.")


def test_knee_reference_passes_on_both_recordings(recording, capsys):
    name, gpu = recording
    ns, out = run("workspace_knee", lab.WORKSPACE_KNEE, capsys)
    said = flat(out)
    assert "correct: " in out and f"simulated from the {gpu} recording" in said, out
    assert set(ns["my_best"]) == set(lessons.CAPS) and not ns["gpu"].memory.allocations
    assert (gpu == "H100 SXM") == ("H200" not in out)
    if math.isfinite(ns["my_best"][None]):  # the recording holds every cost the events need
        assert ns["my_knee"] == 64 << 20 and "puts the knee at 64.0 MiB" in said and "not recorded" not in out
        assert "a right loop lands near the experiment's times" in said  # why they differ
        assert (
            ns["my_best"][16 << 20] > 5 * ns["my_best"][None]
        )  # the cap below the knee drops the fast plans
        # that drop by the learner's times and by lesson 05's caps chart, each said whose
        caps = result("caps", spec=lab.SPEC).set_index("cap_bytes")
        mine = ns["my_best"][16 << 20] / ns["my_best"][None]
        theirs = caps.loc[16 << 20, "slowdown_vs_unlimited"]
        assert f"drops it: {mine:.2f}x slower by your times ({theirs:.2f}x in the caps experiment)" in said
    else:  # it lacks one (the H200's: an event's host time): said, and the experiment's knee given instead
        assert all(math.isnan(v) for v in ns["my_best"].values()) and ns["my_knee"] is None
        assert "since the recording lacks the host time of cudaEventRecord" in said
        assert "By the caps experiment (recorded on the H200 SXM), the knee is 64.0 MiB" in said


def test_a_capped_convolution_keeps_the_plans_the_caps_experiment_counted(recording):
    """Simulated, a cap keeps the recorded plans that need at most its bytes: as many as cuDNN's
    deselection kept when the caps experiment ran on that GPU (caps.csv plans_within_cap)."""
    from labkit import practice
    from labkit.experiments.core import result

    gpu = practice.new()
    for r in result("caps", spec=lab.SPEC).itertuples():
        cap = None if r.cap_bytes < 0 else int(r.cap_bytes)
        conv = gpu.conv(lab.SPEC, workspace_cap=cap)
        assert len(conv.plans) == r.plans_within_cap, (cap, len(conv.plans), r.plans_within_cap)
        assert all(cap is None or p.workspace_bytes <= cap for p in conv.plans)
        assert r.best_plan in {p.name for p in conv.plans}


def test_a_plan_over_the_cap_is_refused_in_one_line():
    from labkit import practice
    from labkit.errors import InvalidSpec

    gpu = practice.new()
    conv = gpu.conv(lab.SPEC, workspace_cap=0)
    big = max(gpu.conv(lab.SPEC).plans, key=lambda p: p.workspace_bytes)
    with pytest.raises(InvalidSpec, match="over the workspace cap"):
        conv.run(0, stream=gpu.stream(), plan=big.index)
    with pytest.raises(InvalidSpec, match="workspace cap"):
        gpu.conv(lab.SPEC, workspace_cap=-1)
    assert "within 0 B" in repr(conv)


def test_knee_stub_asks_for_an_answer(capsys):
    _, out = run("workspace_knee", body("07", "workspace_knee"), capsys)
    assert "Traceback" not in out and out.splitlines()[-2].startswith("no answer yet"), out


def test_knee_names_a_timing_of_one_call_a_leak_and_a_workspace_too_small(capsys):
    assert "CALLS = 20" in KNEE
    _, out = run("workspace_knee", KNEE.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert "one call timed" in out
    assert_hinted(out, "one_call")
    _, out = run("workspace_knee", KNEE.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert_hinted(out, "one_call", first=False)
    _, out = run("workspace_knee", KNEE.replace("    gpu.free(workspace)\n", ""), capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    small = KNEE.replace(
        "max(p.workspace_bytes for p in conv.plans)", "min(p.workspace_bytes for p in conv.plans)"
    )
    _, out = run("workspace_knee", small, capsys)
    assert "workspace too small" in out
    assert_hinted(out, "too_small")


def test_knee_names_a_knee_its_own_times_do_not_give_and_times_far_off(capsys):
    largest = KNEE.replace(
        "my_knee = next((cap for cap in lessons.CAPS if",
        "my_knee = next((cap for cap in lessons.CAPS[::-1] if",
    )
    assert largest != KNEE
    _, out = run("workspace_knee", largest, capsys)
    assert (
        "knee: by your own times the smallest cap within 5% of no cap's is 64.0 MiB; you said no cap"
        in flat(out)
    ), out
    assert_hinted(out, "knee_off", own=lab.HINTS)
    slowest = KNEE.replace("my_best[cap] = min(", "my_best[cap] = max(")
    _, out = run("workspace_knee", slowest, capsys)
    assert "too far from the caps experiment" in out
    assert_hinted(out, "times_far", own=lab.HINTS)


# ---- lesson 08: the same code on both GPUs -----------------------------------------------------------
BOTH = other_gpu.OTHER_GPU.replace("assert check.", "check.")


def test_other_gpu_reference_passes_on_both_recordings(recording, capsys):
    ns, out = run("other_gpu", other_gpu.OTHER_GPU, capsys)
    said = flat(out)
    header = said[: said.index("correct: ")]  # the cell runs on both GPUs: its header names both
    assert header.startswith("Running on 2 GPUs: the H100 SXM simulated from the H100 SXM recording; ")
    assert "the H200 SXM simulated from the H200 SXM recording" in header and "a GPU simulated" not in header
    assert "correct: Your code on 2 GPUs" in said, out
    assert "the H100 SXM simulated from the H100 SXM recording" in said
    assert "the H200 SXM simulated from the H200 SXM recording" in said
    assert list(ns["my_gpus"]) == ["H100 SXM", "H200 SXM"]
    for name, us in ns["my_gpus"].items():
        theirs = other_gpu._theirs(practice.last_gpus()[name], other_gpu.SPEC)
        assert theirs <= us <= 1.15 * theirs, (name, us, theirs)
    ratio = ns["my_gpus"]["H200 SXM"] / ns["my_gpus"]["H100 SXM"]
    assert f"The H200 SXM takes {ratio:.2f}x the H100 SXM's time" in said
    assert "1.43x its memory bandwidth" in said and "is nearer its math" in said  # fp16: the same peak
    assert all(not g.memory.allocations for g in practice.last_gpus().values())


def test_gpus_gives_the_simulated_gpu_in_use_and_the_other_recordings():
    here = practice.new()
    gpus = practice.gpus()
    assert list(gpus) == ["H100 SXM", "H200 SXM"] and gpus["H100 SXM"] is here
    assert gpus["H200 SXM"].label == "simulated from the H200 SXM recording"
    assert practice.last_gpus() == gpus and gpus["H200 SXM"].ceiling.gpu == "H200 SXM"
    assert practice.gpu_labels() == {name: g.label for name, g in gpus.items()}


def test_other_gpu_stub_asks_for_an_answer(capsys):
    _, out = run("other_gpu", body("08", "other_gpu"), capsys)
    assert "no answer yet: my_gpus is {GPU name: GPU microseconds per call}" in flat(out), out


def test_other_gpu_names_a_race_a_leak_a_workspace_too_small_one_call_and_a_gpu_left_out(capsys):
    race = BOTH.replace(
        "    run = lambda",
        "    other = gpu.stream()\n"
        "    for _ in range(3):  # two streams, one workspace\n"
        "        conv.run(workspace, stream=stream)\n"
        "        conv.run(workspace, stream=other)\n"
        "    gpu.synchronize()\n"
        "    run = lambda",
    )
    assert race != BOTH
    _, out = run("other_gpu", race, capsys)
    assert "race: on the H100 SXM" in flat(out), out
    assert_hinted(out, "race")
    _, out = run("other_gpu", BOTH.replace("    gpu.free(workspace)\n", ""), capsys)
    assert "leak: on the H100 SXM" in flat(out)
    assert_hinted(out, "leak")
    small = BOTH.replace(
        "gpu.allocate(conv.plan.workspace_bytes)", "gpu.allocate(conv.plan.workspace_bytes // 2)"
    )
    _, out = run("other_gpu", small, capsys)
    assert "workspace too small" in out
    assert_hinted(out, "too_small")
    _, out = run("other_gpu", BOTH.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert "one call timed: on the H100 SXM" in flat(out)
    assert_hinted(out, "one_call")
    one = BOTH.replace(
        "for name, gpu in lessons.gpus().items()}", "for name, gpu in list(lessons.gpus().items())[:1]}"
    )
    assert one != BOTH
    _, out = run("other_gpu", one, capsys)
    assert "not every GPU: no time for the H200 SXM" in flat(out), out
    assert "not timed with events" not in flat(out), out  # the GPU left out is said so once
    assert_hinted(out, "not_every_gpu", own=other_gpu.HINTS)


def test_other_gpu_names_times_not_divided_by_the_calls(capsys):
    undivided = BOTH.replace("gpu.elapsed_us(start, end) / CALLS", "gpu.elapsed_us(start, end)")
    assert undivided != BOTH
    _, out = run("other_gpu", undivided, capsys)
    assert "not divided by the calls" in flat(out) and "20 calls ran between your events" in flat(out), out
    assert_hinted(out, "not_divided")


def test_the_knee_cell_names_the_calls_its_reference_makes():
    """Lesson 07's hands-on text names the calls a solution needs (a learner who skipped lesson 05
    reads them there), and each is one the reference solution makes."""
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "07_lab.ipynb").read_text())
    text = next(
        "".join(c["source"]) for c in nb["cells"] if "Your turn: cap the workspace" in "".join(c["source"])
    )
    named = set(re.findall(r"`(?:\w+\.)?(\w+)\(?", text))
    for call in ("plans", "run", "event", "capture", "launch", "wait", "elapsed_us"):
        assert call in named, f"lesson 07's hands-on text no longer names {call}"
        assert re.search(rf"\.{call}\b", lab.WORKSPACE_KNEE), f"the reference never calls {call}"
