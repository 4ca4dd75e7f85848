"""The hands-on cells of lessons 03 and 04 without a GPU, on the GPU simulated from each shipped
recording (`labkit.practice`, `labkit.simgpu`): the layout decision (the convolution in NCHW and in NHWC
and the copies between them, timed; does converting pay, and after how many calls), and the fused graph
(conv + bias + ReLU built as one cuDNN graph, timed against the unfused path). The reference passes its
check on both recordings; the learner's stub says what is missing in one line; a wrong solution (a
timing of one call, a leak, a workspace too small, a wrong verdict, a time the recording cannot give,
times far from the layout experiment's; for lesson 04 also a race and the plain convolution timed as the
fused graph) fails with a hint that leads, the first hint the first time,
the second after. The same cell on a GPU: tests/test_handson_03_04_gpu.py."""

from __future__ import annotations

import math
import re

import pytest
from handson_helpers import RECORDINGS, assert_hinted, body, flat, run

from labkit import practice
from labkit.errors import InvalidSpec
from labkit.experiments import handson_check
from labkit.experiments.core import result
from labkit.experiments.epilogue_fusion import handson as fusion
from labkit.experiments.precision_layout import handson as layout
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


# ---- lesson 03: does converting to NHWC pay ----------------------------------------------------------
PAYS = layout.NHWC_PAYS.replace("assert check.", "check.")


def test_layout_reference_passes_on_both_recordings(recording, capsys):
    _, gpu = recording
    ns, out = run("nhwc_pays", layout.NHWC_PAYS, capsys)
    said = flat(out)
    assert "correct: " in out and f"simulated from the {gpu} recording" in said, out
    assert "does not pay" in said and "after 3 calls in a row" in said and "(lesson 10's trace)" in said
    assert not ns["gpu"].memory.allocations and (gpu == "H100 SXM") == ("H200" not in out)
    rows = result("layout", spec=layout.SPEC).set_index("layout")
    theirs = layout.calls_to_pay(
        rows.loc["NCHW", "conv_gpu_us"], rows.loc["NHWC", "conv_gpu_us"], rows.loc["NHWC", "convert_gpu_us"]
    )
    assert theirs == 3
    times = ns["my_layout"]
    if math.isfinite(times["nchw_us"]):  # the recording holds every cost the events need
        assert times["nhwc_us"] < times["nchw_us"] < times["nhwc_us"] + times["convert_us"]  # faster, no gain
        assert not ns["pays"] and ns["layers"] == theirs and "Beside the layout experiment" in said
        assert "a right loop lands near the experiment's times" in said  # why they differ
    else:  # it lacks one (the H200's: an event's host time): said, and the experiment's times used
        assert all(math.isnan(v) for v in times.values())
        assert "since the recording lacks the host time of cudaEventRecord" in said
        assert "By the layout experiment's times (recorded on the H200 SXM)" in said


def test_a_simulated_conversion_takes_the_recorded_time():
    """Replayed in a CUDA graph, a conversion takes the layout experiment's time of the same copies;
    launched from Python its host time is not recorded, and the simulated clock says so (NaN), also
    once the host has waited and the clock started again (the H100's recording: its events' host
    times are calibrated)."""
    gpu = practice.new()
    nhwc = gpu.conv(lessons.base())
    copies, stream = gpu.conversion(nhwc), gpu.stream()
    recorded = result("layout", spec=layout.SPEC).set_index("layout").loc["NHWC", "convert_gpu_us"]
    start = gpu.event(stream)
    copies.run(stream=stream)
    end = gpu.event(stream)
    end.wait()
    assert math.isnan(gpu.elapsed_us(start, end)) and "CuPy transpose-copies" in " ".join(
        gpu.device.missing.values()
    )
    graph = gpu.capture(lambda: [copies.run(stream=stream) for _ in range(20)], stream)
    graph.launch(stream)
    stream.synchronize()
    start = gpu.event(stream)
    graph.launch(stream)
    end = gpu.event(stream)
    end.wait()
    per_call = gpu.elapsed_us(start, end) / 20
    assert recorded <= per_call <= 1.1 * recorded, (per_call, recorded)
    assert gpu.timings[-1].calls == 20 and gpu.timings[-1].convs == (copies.spec.label,)


def test_a_conversion_of_an_nchw_convolution_is_refused_in_one_line():
    gpu = practice.new()
    with pytest.raises(InvalidSpec, match="NHWC convolution"):
        gpu.conversion(gpu.conv(lessons.base(layout="NCHW")))
    with pytest.raises(InvalidSpec, match="made on this GPU"):
        gpu.conversion(practice.new().conv(lessons.base()))


def test_layout_stub_asks_for_an_answer(capsys):
    _, out = run("nhwc_pays", body("03", "nhwc_pays"), capsys)
    assert "Traceback" not in out and "no answer yet: my_layout is dict(" in out, out


def test_layout_names_a_timing_of_one_call_a_leak_and_a_workspace_too_small(capsys):
    assert "CALLS = 20" in PAYS
    _, out = run("nhwc_pays", PAYS.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert "one call timed" in out
    assert_hinted(out, "one_call")
    _, out = run("nhwc_pays", PAYS.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert_hinted(out, "one_call", first=False)
    _, out = run("nhwc_pays", PAYS.replace("    gpu.free(workspace)\n", ""), capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    small = PAYS.replace(
        "gpu.allocate(conv.plan.workspace_bytes)", "gpu.allocate(conv.plan.workspace_bytes // 2)"
    )
    _, out = run("nhwc_pays", small, capsys)
    assert "workspace too small" in out
    assert_hinted(out, "too_small")


def test_layout_names_wrong_verdicts_a_time_the_recording_cannot_give_and_times_far_off(capsys):
    _, out = run("nhwc_pays", PAYS.replace("pays = my_layout", "pays = not my_layout"), capsys)
    assert "does it pay: by your times NHWC with the conversion takes" in flat(out)
    assert_hinted(out, "pays_off", own=layout.HINTS)
    _, out = run("nhwc_pays", PAYS.replace("layers = int(", "layers = 1 + int("), capsys)
    assert "calls to pay: " in out
    assert_hinted(out, "layers_off", own=layout.HINTS)
    python = "        [run_one() for _ in range(CALLS)]\n        end = gpu.event(stream)"
    untimed = PAYS.replace("        graph.launch(stream)\n        end = gpu.event(stream)", python)
    untimed = untimed.replace("layers = int(", "layers = None and int(")
    assert untimed != PAYS
    _, out = run("nhwc_pays", untimed, capsys)
    assert (
        "no time: the conversion (x to NHWC, y back): no time, since the recording lacks the host time"
        in flat(out)
    ), out
    assert_hinted(out, "no_time", own=layout.HINTS)
    halved = PAYS.replace("/ CALLS)", "/ (CALLS / 2))")
    _, out = run("nhwc_pays", halved, capsys)
    assert re.search(r"too far from the layout experiment: your times are 2\.\d+x", flat(out)), out
    assert_hinted(out, "times_far", own=layout.HINTS)


def test_layout_arithmetic_on_a_nan_time_stops_in_one_line_with_a_hint(capsys):
    python = "        [run_one() for _ in range(CALLS)]\n        end = gpu.event(stream)"
    untimed = PAYS.replace("        graph.launch(stream)\n        end = gpu.event(stream)", python)
    assert "layers = int(" in untimed  # the copies timed from Python read NaN; int() refuses it
    _, out = run("nhwc_pays", untimed, capsys)
    said = flat(out)
    assert (
        "Traceback" not in out and "stopped (simulated from the H100 SXM recording): cannot convert" in said
    )
    assert "from a time that is NaN: gpu.elapsed_us: no time, since the recording lacks the host time" in said
    assert "Hint: NaN is the simulated GPU's 'no time'" in said, out


def test_layout_takes_the_break_even_as_a_fraction_as_exercise_5_does(capsys):
    even = 'layers = my_layout["convert_us"] / saved if saved > 0 else None'
    fraction = PAYS.replace('layers = int(my_layout["convert_us"] // saved) + 1 if saved > 0 else None', even)
    assert fraction != PAYS
    ns, out = run("nhwc_pays", fraction, capsys)
    assert "correct: " in out and ns["layers"] != int(ns["layers"]), out
    _, out = run("nhwc_pays", fraction.replace("/ saved if", "/ saved * 1.5 if"), capsys)
    assert "calls to pay: " in out
    _, out = run("nhwc_pays", PAYS.replace("layers = int(", 'layers = "3" or int('), capsys)
    assert "layers a number of calls (a fraction is fine) or None" in flat(out), out


# ---- lesson 04: build the fused graph --------------------------------------------------------------
FUSED = fusion.FUSED_GRAPH.replace("assert check.", "check.")


def test_fusion_reference_passes_on_both_recordings(recording, capsys):
    _, gpu = recording
    ns, out = run("fused_graph", fusion.FUSED_GRAPH, capsys)
    said = flat(out)
    assert "correct: " in out and f"simulated from the {gpu} recording" in said, out
    assert not ns["gpu"].memory.allocations and (gpu == "H100 SXM") == ("H200" not in out)
    rows = result("fusion", spec=fusion.SPEC)
    rows = rows[(rows.epilogue == "bias_relu") & (rows.status == "ok")].set_index("path")
    times = ns["my_fusion"]
    assert times["fused_us"] < times["unfused_us"]  # fusing pays at this shape, as the experiment says
    for key, path in (("fused_us", "fused"), ("unfused_us", "unfused")):
        assert rows.loc[path, "gpu_us"] <= times[key] <= 1.1 * rows.loc[path, "gpu_us"], (key, times)
    speedup = times["unfused_us"] / times["fused_us"]
    assert f"fusing makes it {speedup:.1f}x faster" in said and "Beside the fusion experiment" in said
    assert "a right loop lands near the experiment's times, not on them" in said  # why they differ
    labels = {t.convs for t in ns["gpu"].timings}
    assert (fusion.Fused(fusion.SPEC, "bias_relu").label,) in labels and (
        fusion.Unfused(fusion.SPEC).label,
    ) in labels


def test_fusion_times_swapped_are_named_so(capsys):
    """Each time is far from its own path's, in opposite directions: the check says the two keys
    are swapped, not that the events measured more than the calls."""
    swapped = FUSED.replace(
        "my_fusion = dict(fused_us=path_us(fused), unfused_us=path_us(unfused))",
        "my_fusion = dict(fused_us=path_us(unfused), unfused_us=path_us(fused))",
    )
    assert swapped != FUSED
    _, out = run("fused_graph", swapped, capsys)
    assert "the two times swapped: your fused_us is the experiment's unfused time" in flat(out), out
    assert_hinted(out, "swapped", own=fusion.HINTS)


def test_the_learners_fusion_stub_says_what_is_missing(capsys):
    _, out = run("fused_graph", body("04", "fused_graph"), capsys)
    assert "no answer yet: my_fusion is dict(fused_us=..., unfused_us=...)" in flat(out), out


def test_a_simulated_fused_plan_is_named_never_given_a_made_up_index(recording):
    gpu = practice.new()
    spec = lessons.base()
    fused, unfused, stream = gpu.conv(spec, epilogue="bias_relu"), gpu.unfused(spec), gpu.stream()
    recorded = (
        result("fusion", spec=spec).set_index(["epilogue", "path"]).loc[("bias_relu", "fused"), "plan_name"]
    )
    for shown in (repr(fused), repr(fused.plan)):
        assert not re.search(r"-\d", shown) and ("index not recorded" in shown or "not its index" in shown), (
            shown
        )
    assert f"heuristic's pick {recorded} (the recording keeps its name, not its index)" in repr(fused)
    assert "1 plan," in repr(fused)
    for path in (fused, unfused):
        workspace = gpu.allocate(path.plan.workspace_bytes)
        path.run(workspace, stream=stream)
        gpu.free(workspace)
    labels = [c.label for c in gpu.device.calls]
    assert len(labels) == 2 and not any(re.search(r"plan -\d", lab) for lab in labels), labels
    assert labels[1].endswith(f"plan {unfused.plan.index}, then CuPy's add and maximum"), labels


def test_a_simulated_fused_call_runs_the_traced_kernels_at_the_recorded_time():
    """A fused call queues lesson 10's kernels of the fused path (a memset and the convolution with
    its epilogue), scaled to the fusion experiment's time; its workspace is the recorded plan's."""
    gpu = practice.new()
    fused = gpu.conv(lessons.base(), epilogue="bias_relu")
    row = result("fusion", spec=fusion.SPEC)
    row = row[(row.epilogue == "bias_relu") & (row.path == "fused")].iloc[0]
    assert fused.plan.name == row.plan_name and len(fused.plans) == 1
    tensors = sum(fusion.SPEC.tensor_bytes.values()) + 2 * fusion.SPEC.K
    assert fused.plan.workspace_bytes == row.allocated_bytes - tensors
    timing = fused.graph.timing
    assert [k.role for k in timing.kernels] == ["zeroing (memset)", "main convolution"]
    assert sum(k.us for k in timing.kernels) == pytest.approx(row.gpu_us)
    with pytest.raises(InvalidSpec, match="epilogue"):
        gpu.conv(lessons.base(), epilogue="relu")


def test_fusion_names_a_race_a_leak_a_workspace_too_small_and_one_call(capsys):
    race = FUSED.replace(
        "my_fusion = dict(",
        "shared, other = gpu.allocate(fused.plan.workspace_bytes), gpu.stream()\n"
        "for _ in range(3):  # both paths at once, on two streams, in one workspace\n"
        "    fused.run(shared, stream=stream)\n"
        "    unfused.run(shared, stream=other)\n"
        "stream.synchronize()\nother.synchronize()\ngpu.free(shared)\n"
        "my_fusion = dict(",
    )
    assert race != FUSED
    _, out = run("fused_graph", race, capsys)
    assert "race: " in out
    assert_hinted(out, "race")
    _, out = run("fused_graph", FUSED.replace("    gpu.free(workspace)\n", ""), capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    small = FUSED.replace(
        "gpu.allocate(path.plan.workspace_bytes)", "gpu.allocate(path.plan.workspace_bytes // 2)"
    )
    _, out = run("fused_graph", small, capsys)
    assert "workspace too small" in out
    assert_hinted(out, "too_small")
    _, out = run("fused_graph", FUSED.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert "one call timed" in out
    assert_hinted(out, "one_call")


def test_fusion_names_the_plain_convolution_a_time_the_recording_cannot_give_and_times_far_off(capsys):
    plain = FUSED.replace('gpu.conv(spec, epilogue="bias_relu")', "gpu.conv(spec)")
    _, out = run("fused_graph", plain, capsys)
    assert "not the fused graph: you timed the plain convolution" in flat(out), out
    assert_hinted(out, "not_fused", own=fusion.HINTS)
    python = "        [run_one() for _ in range(CALLS)]\n        end = gpu.event(stream)"
    untimed = FUSED.replace("        graph.launch(stream)\n        end = gpu.event(stream)", python)
    assert untimed != FUSED
    _, out = run("fused_graph", untimed, capsys)
    assert "no time: the fused graph: no time, since the recording lacks the host time of launching" in flat(
        out
    )
    assert_hinted(out, "no_time", own=fusion.HINTS)
    halved = FUSED.replace("/ CALLS)", "/ (CALLS / 2))")
    _, out = run("fused_graph", halved, capsys)
    assert re.search(r"too far from the fusion experiment: your times are 2\.\d+x", flat(out)), out
    assert_hinted(out, "times_far", own=fusion.HINTS)
