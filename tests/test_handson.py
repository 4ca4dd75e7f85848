"""Hands-on cells (`labkit.session.handson`) without a GPU: every ``%%handson`` cell of a lesson runs
on the GPU simulated from the recording (`labkit.practice`, `labkit.simgpu`); its reference solution
passes its check, the learner's stub says what is missing in one line, and a wrong solution (a race,
a leak, a workspace too small, a timing of one call) fails its check with a hint that leads: the
first hint the first time, the second after. Every simulated verdict says it is simulated from
which recording. The same cells on a GPU: tests/test_handson_gpu.py, tests/test_handson_05_06_gpu.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit import experiments, practice
from labkit.errors import InvalidSpec
from labkit.experiments import handson_check, plans_autotune, streams, under_the_hood, your_network
from labkit.experiments.workspace_basics import handson as basics
from labkit.experiments.workspace_strategies import handson as strategies
from labkit.present import check
from labkit.session import handson, lessons

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = "simulated from the H100 SXM recording"


@pytest.fixture(autouse=True)
def recorded(recorded_mode, monkeypatch):
    """Recorded mode from the default shipped recording (the H100's); hints start over."""
    monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    handson_check.forget()
    handson.register_topics()


def handson_cells():
    """(notebook name, hands-on name, the cell's body) for every %%handson cell of every lesson."""
    out = []
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            src = "".join(cell["source"])
            m = re.match(r"%%handson\s+(\w+)\s*\n", src)
            if cell["cell_type"] == "code" and m:
                out.append((nb.name, m.group(1), src[m.end() :]))
    return out


def flat(text: str) -> str:
    """``text`` on one line (a verdict wraps at 100 characters)."""
    return " ".join(text.split())


def namespace(**given) -> dict:
    return {"lessons": lessons, "check": check, **given}


def run(name: str, source: str, ns: dict, capsys) -> str:
    """Run ``source`` as hands-on cell ``name``; what it printed."""
    handson.run(name, source, ns)
    return capsys.readouterr().out


def reference(name: str, ns: dict, capsys) -> str:
    return run(name, handson.HANDS_ON[name].source, ns, capsys)


# ---- the cells and their references ---------------------------------------------------------------
def test_every_handson_cell_names_a_registered_reference():
    cells = handson_cells()
    names = {name for _, name, _ in cells}
    assert names >= {
        "conv_setup",
        "own_workspace",
        "own_strategy",
        "check_own_strategy",
        "time_every_plan",
        "scratchpad_race",
        "network_pass",
        "idle_time",
    }
    for nb, name, body in cells:
        assert name in handson.HANDS_ON, f"{nb}: %%handson {name} has no reference solution"
        assert nb.startswith(handson.HANDS_ON[name].lesson), (nb, name, handson.HANDS_ON[name].lesson)
        assert len(body.splitlines()) <= 9, f"{nb}: %%handson {name} is longer than a lesson cell may be"


def test_cells_run_as_they_are_match_their_references():
    """The setup cell and the check cell are not the learner's to change: their reference is the cell."""
    bodies = {name: body for _, name, body in handson_cells()}
    assert bodies["conv_setup"].strip() == handson.HANDS_ON["conv_setup"].source.strip()
    assert bodies["check_own_strategy"].strip() in handson.HANDS_ON["check_own_strategy"].source


def test_every_reference_compiles():
    for name, (lesson, source, fresh, _) in experiments.hands_on().items():
        compile(source, f"<reference {name}>", "exec")
        assert list((ROOT / "notebooks").glob(f"{lesson}_*.ipynb")) and isinstance(fresh, bool), (
            name,
            lesson,
        )


def test_a_labkit_error_in_a_cell_is_one_line_that_says_where_it_ran(capsys):
    ns = namespace()
    out = run("conv_setup", "gpu = lessons.device()\ngpu.free(12345)\n", ns, capsys)
    said = flat(out[out.index("stopped") :])
    assert said.startswith(f"stopped ({SIMULATED}): ") and "gpu.allocate" in said and "Traceback" not in out


def test_an_unknown_handson_name_is_one_clear_error():
    with pytest.raises(InvalidSpec, match="hands-on"):
        handson.run("no_such_cell", "", {})


# ---- every reference passes its check on the simulated GPU ------------------------------------------
def run_lesson(nb_prefix: str, capsys, *, given=None, replace=None) -> tuple:
    """Run a lesson's hands-on cells in order with their references (``replace``: name -> source
    instead), then the check cells that follow them; (namespace, everything printed)."""
    ns, out = namespace(**(given or {})), ""
    for nb, name, _ in handson_cells():
        if nb.startswith(nb_prefix):
            out += run(name, (replace or {}).get(name, handson.HANDS_ON[name].source), ns, capsys)
    return ns, out


def test_lesson_01_reference_passes_on_the_simulated_gpu(capsys):
    ns, out = run_lesson("01", capsys)
    assert out.count("correct: ") == 1 and SIMULATED in flat(out) and "not yet" not in out
    assert "malloc_per_call" in out and "you" in out  # beside the shipped strategies
    assert not ns["gpu"].memory.allocations


def test_lesson_02_reference_passes_beside_the_builtins(capsys):
    _, out = run_lesson("02", capsys)
    assert out.startswith("correct: ") and SIMULATED in flat(out)
    assert "fixed_arena" in out and "scratchpad_per_stream" in out and "race" not in out.split("\n", 2)[-1]


def test_lesson_05_reference_times_every_plan(capsys):
    ns, out = run_lesson("05", capsys, given={"my_times": {}})
    res = check.plan_times(ns["my_times"])
    out += capsys.readouterr().out
    assert res.correct, res.message
    assert SIMULATED in flat(res.message) and len(ns["my_times"]) == len(ns["conv"].plans) > 1
    timings = ns["gpu"].timings
    assert timings and min(t.calls for t in timings) > 1


def test_lesson_06_reference_reproduces_the_race(capsys):
    ns, _ = run_lesson("06", capsys, given={"my_race": {}})
    res = check.race_reproduced(ns["my_race"])
    assert res.correct, res.message
    bad, runs = ns["my_race"]["shared"]
    assert 0 < bad <= runs and ns["my_race"]["per_stream"][0] == 0 and SIMULATED in flat(res.message)


def test_lesson_09_reference_reports_three_layers(capsys):
    ns, out = run_lesson("09", capsys)
    assert out.count("correct: ") == 1 and SIMULATED in flat(out), out
    layers = ns["my_pass"]["layers"]
    assert [row[0] for row in layers] == [s.label for s in lessons.three_layers()]
    assert ns["my_pass"]["peak_bytes"] == max(row[2] for row in layers) > 0
    assert "preallocated" in out and "async_pool" in out


def test_lesson_10_reference_finds_the_idle_time(capsys):
    ns, out = run_lesson("10", capsys)
    assert out.startswith("correct: ") and "recorded on the H100 SXM" in flat(out), out
    assert len(ns["my_idle"]) == 8 and all(v > 0 for v in ns["my_idle"].values())


def test_references_pass_on_the_other_recording(capsys, monkeypatch):
    """The H200's recording: every hands-on cell that runs on the simulated GPU passes there too."""
    from labkit.store import recordings

    monkeypatch.setenv("LABKIT_RECORDING", "h200")
    recordings._current = recordings._picked = None
    for lesson, given in (("01", {}), ("02", {}), ("06", {"my_race": {}}), ("09", {})):
        ns, out = run_lesson(lesson, capsys, given=given)
        if lesson == "06":
            out = check.race_reproduced(ns["my_race"]).message
        assert "correct: " in out and "simulated from the H200 SXM recording" in flat(out), (lesson, out)
        assert "H100" not in out, (lesson, out)


# ---- the learner's stubs: one line, never a traceback ------------------------------------------------
def test_every_stub_runs_without_a_traceback(capsys):
    """Each lesson's cells as the learner finds them: a stub that raises NotImplementedError says so in
    one line, a stub left at ``...`` gets its check's "no answer yet" or "not yet", and nothing raises."""
    given = {"my_times": {}, "my_race": {}}
    for nb, name, body in handson_cells():
        ns = namespace(**given)
        if name in ("own_workspace", "check_own_strategy"):  # they go on from the cell above
            before = {"own_workspace": "conv_setup", "check_own_strategy": "own_strategy"}[name]
            stub = next(b for n_, nm, b in handson_cells() if nm == before and n_ == nb)
            handson.run(before, stub, ns)
        capsys.readouterr()
        handson.run(name, body, ns)
        out = capsys.readouterr().out
        lines = [line for line in out.splitlines() if not line.startswith(("  ", "Running on a GPU"))]
        assert "Traceback" not in out, (name, out)
        if name in ("time_every_plan", "scratchpad_race"):  # the check is the next cell
            fn = {"time_every_plan": lambda: check.plan_times(ns["my_times"])}.get(
                name, lambda: check.race_reproduced(ns["my_race"])
            )
            out = fn().message
            lines = [out]
        if name not in ("conv_setup", "own_strategy"):
            assert lines and lines[-1].startswith(("not yet", "no answer yet")) or "not yet" in out, (
                name,
                out,
            )


# ---- wrong solutions fail, with a hint that leads -----------------------------------------------------
def hints_of(kind: str, own=None) -> tuple:
    return (own or {}).get(kind) or handson_check.HINTS[kind]


def assert_hinted(message: str, kind: str, first: bool = True, own=None):
    message = message[message.index("not yet") :] if "not yet" in message else message
    assert message.startswith("not yet") and SIMULATED in flat(message), message
    expected = hints_of(kind, own)[0 if first else 1]
    assert " ".join(expected.split())[:60] in " ".join(message.split()), message


def own_workspace(body: str, capsys) -> str:
    ns = namespace()
    run("conv_setup", handson.HANDS_ON["conv_setup"].source, ns, capsys)
    return run("own_workspace", body, ns, capsys)


def test_lesson_01_a_workspace_too_small_a_leak_and_a_use_after_free(capsys):
    ref = basics.OWN_WORKSPACE_SOURCE.replace("assert check.", "check.")
    out = own_workspace(
        ref.replace("size = plan.workspace_bytes", "size = plan.workspace_bytes // 2"), capsys
    )
    assert "workspace too small" in out
    assert_hinted(out, "too_small")
    out = own_workspace(ref.replace("size = plan.workspace_bytes", "size = 0"), capsys)
    assert_hinted(out, "too_small", first=False)  # the second time: the second hint
    out = own_workspace(ref.replace("gpu.free(workspace)", "pass"), capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    freed_first = ref.replace("conv.run(workspace, stream=stream)", "gpu.free(workspace)", 1)
    freed_first = freed_first.replace(
        "gpu.free(workspace)                  #", "conv.run(workspace, stream=stream)  #"
    )
    out = own_workspace(freed_first, capsys)
    assert "use after free" in out, out


def test_lesson_01_an_oversized_workspace_runs_and_its_reply_says_what_sat_unused(capsys):
    ref = basics.OWN_WORKSPACE_SOURCE.replace("assert check.", "check.")
    out = own_workspace(ref.replace("size = plan.workspace_bytes", "size = 4 * plan.workspace_bytes"), capsys)
    assert out.startswith("correct: ") and "4.0x the 24.6 MiB the plan asks" in out, out
    assert "was what the plan asks" not in out
    assert "was what the plan asks" in own_workspace(ref, capsys)


class Leaky:
    source = """from labkit.gpu.workspaces.workspace import Strategy
class MyStrategy(Strategy):
    name = "leaky"
    def _get(self, req):
        return (self._malloc(req.nbytes, "leaky workspace") if req.nbytes else 0), req.nbytes
"""


FREE_LIST = '''from labkit.gpu.workspaces.workspace import Strategy
class MyStrategy(Strategy):
    """Gives a buffer back to a free list at put, for any stream to take: it races."""
    name = "free_list"
    def __init__(self):
        super().__init__()
        self.free, self.made = [], []
    def _get(self, req):
        if not req.nbytes:
            return 0, 0
        for i, (ptr, n) in enumerate(self.free):
            if n >= req.nbytes:
                return self.free.pop(i)
        ptr = self._malloc(req.nbytes, "free-list workspace")
        self.made.append((ptr, req.nbytes))
        return ptr, req.nbytes
    def _put(self, req, ptr):
        if ptr:
            self.free.append(next(b for b in self.made if b[0] == ptr))
    def _close(self):
        for ptr, n in self.made:
            self._free(ptr, n)
'''


def own_strategy(source: str, capsys) -> str:
    ns = namespace()
    run("own_strategy", source, ns, capsys)
    return run("check_own_strategy", "check.own_strategy(MyStrategy)", ns, capsys)


def test_lesson_02_a_leak_a_race_a_workspace_too_small_and_an_error(capsys):
    out = own_strategy(Leaky.source, capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    out = own_strategy(FREE_LIST, capsys)
    assert "race: " in out and "leak" not in out
    assert_hinted(out, "race")
    res = check.own_strategy(
        lambda: __import__("labkit").gpu.workspaces.workspace.KeyedCache(1 << 30, key="dims_only")
    )
    assert "workspace too small" in res.message and "needs" in res.message
    assert_hinted(res.message, "too_small", own=strategies.STRATEGY_HINTS)  # a buffer kept too small
    stub = next(b for _, n, b in handson_cells() if n == "own_strategy")
    out = own_strategy(stub, capsys)
    assert "error: your strategy raised NotImplementedError" in out
    assert_hinted(out, "error", own=strategies.STRATEGY_HINTS)


def time_every_plan(source: str, capsys):
    ns = namespace(my_times={})
    run("time_every_plan", source, ns, capsys)
    return check.plan_times(ns["my_times"]).message


def test_lesson_05_a_timing_of_one_call_a_leak_and_a_workspace_too_small(capsys):
    ref = plans_autotune.TIME_EVERY_PLAN
    assert "CALLS = 20" in ref
    msg = time_every_plan(ref.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert "one call timed" in msg
    assert_hinted(msg, "one_call")
    msg = time_every_plan(ref.replace("CALLS = 20", "CALLS = 1"), capsys)
    assert_hinted(msg, "one_call", first=False)
    msg = time_every_plan(ref.replace("    gpu.free(workspace)\n", ""), capsys)
    assert "leak: " in msg
    assert_hinted(msg, "leak")
    msg = time_every_plan(
        ref.replace("gpu.allocate(plan.workspace_bytes)", "gpu.allocate(plan.workspace_bytes // 2)"), capsys
    )
    assert "workspace too small" in msg
    assert_hinted(msg, "too_small")
    made_up = ref.replace("samples.append(gpu.elapsed_us(start, end) / CALLS)", "samples.append(1.0)")
    msg = time_every_plan(made_up, capsys)
    assert "not timed with events" in msg  # events recorded, but no time taken between them
    assert_hinted(msg, "no_timing")


def test_lesson_05_times_not_divided_by_the_calls_of_the_graph_are_named_so(capsys):
    ref = plans_autotune.TIME_EVERY_PLAN
    undivided = ref.replace(
        "samples.append(gpu.elapsed_us(start, end) / CALLS)", "samples.append(gpu.elapsed_us(start, end))"
    )
    assert undivided != ref
    msg = time_every_plan(undivided, capsys)
    assert "not divided by the calls" in msg and "20 calls ran between your events" in " ".join(
        msg.split()
    ), msg
    assert_hinted(msg, "not_divided")


def test_lesson_05_calls_launched_one_by_one_between_the_events_are_named_so(capsys):
    """The lesson asks for CUDA-graph replays: timing the same calls launched one by one from Python
    fails, though its times come close to the simulated GPU's; the verdict says what it saw."""
    ref = plans_autotune.TIME_EVERY_PLAN
    capture = "    graph = gpu.capture(lambda: [run() for _ in range(CALLS)], stream)\n"
    eager = ref.replace(capture, "").replace(
        "        graph.launch(stream)\n", "        for _ in range(CALLS):\n            run()\n"
    )
    assert capture in ref and "graph" not in eager.replace("CUDA graph", "")
    msg = time_every_plan(eager, capsys)
    assert msg.startswith("not yet") and "timed without a CUDA graph" in msg, msg
    assert "20 calls between your events were launched one by one" in flat(msg)
    assert_hinted(msg, "eager", own=plans_autotune.handson.COMPARE_HINTS)
    assert "Events around CUDA-graph replays leave out" in flat(time_every_plan(ref, capsys))


def test_lesson_05_an_eager_call_beside_the_replay_is_counted_not_called_all(capsys):
    """A call launched from Python between the events beside the graph's replay fails the check, and
    the verdict counts it among the calls instead of saying every call was launched one by one."""
    ref = plans_autotune.TIME_EVERY_PLAN
    replay = "        graph.launch(stream)\n"
    mixed = ref.replace(replay, replay + "        run()\n")
    assert replay in ref
    msg = flat(time_every_plan(mixed, capsys))
    assert msg.startswith("not yet") and "timed without a CUDA graph" in msg, msg
    assert "1 of the 21 calls between your events were launched one by one, not replayed" in msg, msg


def test_lesson_05_plans_whose_time_reads_nan_are_named_as_left_out(capsys):
    ns, _ = run_lesson("05", capsys, given={"my_times": {}})
    times = {**ns["my_times"], 3: float("nan"), 7: float("nan")}
    res = check.plan_times(times)
    assert res.correct, res.message
    assert "Left out of this comparison: plans 3 and 7, whose times read NaN." in flat(res.message)
    assert f"median over {len(times) - 2} plans" in flat(res.message)
    res = check.plan_times({**ns["my_times"], 5: float("nan")})
    assert "Left out of this comparison: plan 5, whose time reads NaN." in flat(res.message)


def race(source: str, capsys):
    ns = namespace(my_race={})
    run("scratchpad_race", source, ns, capsys)
    return ns["my_race"], check.race_reproduced(ns["my_race"]).message


def test_lesson_06_a_hidden_race_a_leak_and_a_shared_per_stream_run(capsys):
    ref = streams.SCRATCHPAD_RACE
    launch = "            graph.launch(stream)\n"
    assert launch in ref
    counts, msg = race(ref.replace(launch, launch + "            stream.synchronize()\n"), capsys)
    assert counts["shared"][0] == 0 and "race not reproduced" in msg
    assert_hinted(msg, "not_reproduced", own=streams.RACE_HINTS)
    _, msg = race(ref.replace("    for ws in workspaces:\n        gpu.free(ws)\n", ""), capsys)
    assert "leak: " in msg
    assert_hinted(msg, "leak")
    counts, msg = race(ref.replace("ws = workspaces[0 if shared else i]", "ws = workspaces[0]"), capsys)
    assert counts["per_stream"][0] > 0 and "should never happen" in msg
    assert_hinted(msg, "per_stream_wrong", own=streams.RACE_HINTS)


def test_lesson_06_outputs_counted_that_no_call_wrote_and_a_shared_run_on_one_stream(capsys):
    """The race's check counts what ran: outputs said to be checked that no call of the cell wrote are
    named so, and a shared run whose workspace no two streams used (a workspace each, or both graphs
    on one stream) is told from one whose streams did not overlap."""
    ref = streams.SCRATCHPAD_RACE
    one_call = ref.replace("for j in range(calls)", "for j in range(1)")
    assert one_call != ref
    _, msg = race(one_call, capsys)
    assert "more outputs checked than calls ran" in msg and "32 calls ran in this cell" in " ".join(
        msg.split()
    )
    assert_hinted(msg, "more_checked_than_ran", own=streams.RACE_HINTS)
    own = ref.replace("range(1 if shared else 2)", "range(2)").replace(
        "ws = workspaces[0 if shared else i]", "ws = workspaces[i]"
    )
    one_stream = ref.replace(
        "streams = [gpu.stream() for _ in range(2)]", "s = gpu.stream()\n    streams = [s, s]"
    )
    for source in (own, one_stream):
        assert source != ref
        counts, msg = race(source, capsys)
        assert counts["shared"][0] == 0 and "no workspace was used by calls on two streams" in " ".join(
            msg.split()
        )
        assert_hinted(msg, "not_shared", first=source is own, own=streams.RACE_HINTS)  # then the second hint


def network_pass(source: str, capsys) -> str:
    return run("network_pass", source, namespace(), capsys)


def test_lesson_09_a_timing_of_one_call_a_leak_a_race_and_a_workspace_too_small(capsys):
    ref = your_network.NETWORK_PASS.replace("assert check.", "check.")
    out = network_pass(
        ref.replace("    start = gpu.event(runner.stream)\n", "").replace(
            "        call = runner.run(spec)",
            "        start = gpu.event(runner.stream)\n        call = runner.run(spec)",
        ),
        capsys,
    )
    assert "one call timed" in out
    assert_hinted(out, "one_call")
    out = network_pass(ref.replace("    runner.close()  # frees what the strategy holds\n", ""), capsys)
    assert "leak: " in out
    assert_hinted(out, "leak")
    shared = ref.replace("Scratchpad()", "Scratchpad(shared=True)").replace(
        "        call = runner.run(spec)",
        "        gpu.runner(strategy).run(spec)  # another stream\n        call = runner.run(spec)",
    )
    out = network_pass(shared, capsys)
    assert "race: " in out, out
    assert_hinted(out, "race")
    short = """from labkit.gpu.workspaces.workspace import Strategy
class Short(Strategy):
    def _get(self, req):
        self.ptr = getattr(self, "ptr", None) or self._malloc(1 << 20, "short")
        return self.ptr, 1 << 20
"""
    out = network_pass(short + ref.replace("Scratchpad()", "Short()"), capsys)
    assert "labkit refused to run it" in out and SIMULATED in flat(out), out
    assert "Hint: " + hints_of("too_small")[0][:40] in " ".join(out.split())


def test_lesson_09_labels_of_its_own_get_the_label_hint_and_the_cell_says_what_to_return(capsys):
    ref = your_network.NETWORK_PASS.replace("assert check.", "check.")
    out = network_pass(ref.replace("rows.append((spec.label,", "rows.append((f'layer {len(rows)}',"), capsys)
    assert "labels: you listed" in out and "layers: you listed" not in out, out
    assert_hinted(out, "labels_off", own=your_network.handson.HINTS)
    out = network_pass(ref.replace("call.plan_index, call.workspace_bytes", "0, 0"), capsys)
    assert "layers: you listed" in out, out
    out = network_pass(
        ref.replace("    end.wait()\n", "    gpu.elapsed_us(start, end)\n"), capsys
    )  # the time asked before the GPU ran it
    assert "cudaErrorNotReady): wait for the later event first" in flat(out), out
    # what the check reads, the stub's docstring says: the keys and each layer's tuple
    nb = json.loads((ROOT / "notebooks" / "09_your_network.ipynb").read_text())
    stub = next(
        "".join(c["source"]) for c in nb["cells"] if "".join(c["source"]).startswith("%%handson network_pass")
    )
    for said in ("dict(layers=[(spec.label, plan index, workspace", "peak_bytes=", "pass_us="):
        assert said in stub and said in ref


def test_lesson_10_an_idle_time_that_leaves_out_the_memsets_or_gives_a_share(capsys):
    ref = under_the_hood.IDLE_TIME.replace("assert check.", "check.")
    out = run("idle_time", ref.replace('["kernel", "memset"]', '["kernel"]'), namespace(), capsys)
    assert out.startswith("not yet") and "memsets ran on the GPU too" in out
    assert under_the_hood.handson.HINTS["idle_off"][0][:40] in out
    share = ref.replace(
        "    return rows.end_us.max() - rows.start_us.min() - busy\n",
        "    return 1 - busy / (rows.end_us.max() - rows.start_us.min())\n",
    )
    out = run("idle_time", share, namespace(), capsys)
    assert "a share of the pass" in out
    assert " ".join(under_the_hood.handson.HINTS["idle_off"][1].split())[:40] in " ".join(out.split())


def test_once_the_event_calls_are_calibrated_the_times_read_numbers(capsys, monkeypatch):
    """The lesson recordings hold no event's host time (``bench sim-fidelity --calibrate`` on a GPU
    records it): with a calibration table (made up here, a test's numbers only), lesson 05's
    reference times every plan within the check's agreement of the simulated GPU's own calls, and
    lesson 09's pass has a time."""
    import math

    import pandas as pd

    from labkit.simgpu import SimDevice
    from labkit.simgpu.recorded import Recorded

    made_up = pd.DataFrame(
        [
            dict(call=c, spec_label="", plan_index=math.nan, nbytes=n, host_us=us, gpu_us=math.nan)
            for c, n, us in [
                ("cudaEventRecord", 0, 2.0),
                ("cudaEventSynchronize", 0, 3.0),
                ("cudaDeviceSynchronize", 0, 5.0),
                ("cudaMalloc", 512, 5.0),
                ("cudaFree", 512, 5.0),
            ]
        ]
    )
    calibrated = Recorded("h100-sxm", calibration=made_up)

    def new(recording=None):
        practice._current = practice.Practice(SimDevice(calibrated))
        return practice._current

    monkeypatch.setattr(practice, "new", new)
    ns, _ = run_lesson("05", capsys, given={"my_times": {}})
    res = check.plan_times(ns["my_times"])
    known = [t for t in ns["my_times"].values() if math.isfinite(t)]
    assert res.correct and "x the simulated GPU's" in res.message, res.message
    assert len(known) > len(ns["my_times"]) // 2
    ns, out = run_lesson("09", capsys)
    assert "correct: " in out and math.isfinite(ns["my_pass"]["pass_us"]), out


# ---- the hands-on GPU's own calls ------------------------------------------------------------------
def test_the_practice_gpu_refuses_what_it_never_gave_in_one_line():
    gpu = practice.new()
    ptr = gpu.allocate(1024)
    gpu.free(ptr)
    with pytest.raises(InvalidSpec, match="freed already"):
        gpu.free(ptr)
    with pytest.raises(InvalidSpec, match="gpu.allocate"):
        gpu.free(12345)
    conv = gpu.conv(lessons.base(layout="NCHW"))
    with pytest.raises(InvalidSpec, match="gpu.allocate"):
        conv.run(12345, stream=gpu.stream())
    assert repr(gpu) == f"<Practice GPU: {SIMULATED}>"


def test_a_time_across_a_restarted_simulated_clock_reads_nan():
    """The simulated clock stops where the recording lacks a number; once every stream is idle it
    starts again, and a time between events on either side of that restart is not a number."""
    import math

    from labkit.simgpu.recorded import Recorded
    from labkit.store import recordings

    # the recording alone, without the calibration measured on its GPU: an event's host time is missing
    gpu = practice.new(Recorded(recordings.current(), calibration=False))
    conv = gpu.conv(lessons.base(layout="NCHW"))
    s = gpu.stream()
    w = gpu.allocate(conv.plan.workspace_bytes)
    start = gpu.event(s)
    conv.run(w, stream=s)
    s.synchronize()  # every stream idle: the clock starts again
    end = gpu.event(s)
    assert start.epoch != end.epoch and math.isnan(gpu.elapsed_us(start, end))
    assert gpu.timings[-1].calls == 1
    gpu.free(w)


def test_a_time_after_the_clock_stopped_stays_nan_once_the_host_has_waited():
    """A number the recording lacks (an event's host time, in the recording without its calibration)
    stops the clock at the first event; the wait for the second starts it again, and the time between
    the two, read after that wait, rests on the missing number all the same: not a number."""
    import math

    from labkit.simgpu.recorded import Recorded
    from labkit.store import recordings

    gpu = practice.new(Recorded(recordings.current(), calibration=False))
    conv = gpu.conv(lessons.base(layout="NCHW"))
    s = gpu.stream()
    w = gpu.allocate(conv.plan.workspace_bytes)
    start = gpu.event(s)
    for _ in range(5):
        conv.run(w, stream=s)
    end = gpu.event(s)
    end.wait()
    assert start.epoch == end.epoch and gpu.epoch == end.epoch + 1  # the wait started the clock again
    assert math.isnan(gpu.elapsed_us(start, end)) and gpu.timings[-1].calls == 5
    gpu.free(w)
