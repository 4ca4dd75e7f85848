"""The worker process that network report steps run in (`labkit.gpu.host.isolated`): a step's value
comes back; a step past its deadline is killed with its process and named by the phase it last
announced, and the next step gets a fresh worker; labkit's errors come back as themselves, other
errors named; a worker that dies is a `WorkerDied`; the caller's LABKIT_* settings reach the
worker; ``LABKIT_ISOLATE=0`` runs steps in the caller's process. Phases reach the shared phase
board each time and the pipe at most once an interval: a step stopped after many quick phases is
named by its very last, whole, and a listener hears the first, then the newest once an interval.
Real processes, no GPU."""

import importlib.util
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit import InvalidSpec, OutOfMemory, TimedOut
from labkit.gpu.host import isolated
from labkit.signals.progress import announce, announcing

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def worker():
    w = isolated.Worker()
    yield w
    w.stop()


def test_a_step_runs_in_another_process_and_its_value_comes_back(worker):
    assert worker.call("isolated_steps:add", (2, 3)) == 5
    assert worker.call("isolated_steps:pid") != os.getpid()
    assert worker.starts == 1  # kept for the next step


def test_a_step_past_its_deadline_is_killed_and_named_by_its_phase(worker):
    first = worker.call("isolated_steps:pid")
    heard = []
    t0 = time.monotonic()
    with pytest.raises(TimedOut) as err:
        worker.call(
            "isolated_steps:sleep_in",
            ("capture of plan 6 (eng1)", 60),
            budget_s=1.0,
            what="measuring a spec",
            on_phase=heard.append,
        )
    assert time.monotonic() - t0 < 10
    assert err.value.phase == "capture of plan 6 (eng1)" and err.value.what == "measuring a spec"
    assert "timed out after 1.0 s in capture of plan 6 (eng1)" in str(err.value)
    assert heard == ["capture of plan 6 (eng1)"]
    assert not worker.alive
    assert worker.call("isolated_steps:pid") != first and worker.starts == 2  # a fresh worker goes on


def test_labkit_errors_come_back_as_themselves_and_others_are_named(worker):
    with pytest.raises(InvalidSpec) as err:
        worker.call("isolated_steps:refuse", (7,))
    assert err.value.field == "value" and err.value.value == 7 and "is refused by this step" in str(err.value)
    with pytest.raises(OutOfMemory) as oom:  # a MemoryError too: rebuilt without MemoryError.__new__
        worker.call("isolated_steps:run_out_of_memory", (1 << 30,))
    assert (
        oom.value.requested_bytes == 1 << 30
        and oom.value.free_bytes == 1024
        and "out of device memory" in str(oom.value)
    )
    with pytest.raises(isolated.StepFailed, match="ZeroDivisionError: a plain bug"):
        worker.call("isolated_steps:fail_plainly")
    assert worker.starts == 1  # an error in a step does not cost the worker


def test_a_worker_that_dies_is_reported_and_replaced(worker):
    with pytest.raises(isolated.WorkerDied) as err:
        worker.call("isolated_steps:die", (3,), what="a crashing step")
    assert err.value.exitcode == 3 and err.value.phase == "about to die"
    assert worker.call("isolated_steps:add", (1, 1)) == 2


@pytest.mark.parametrize("end, exitcode", [("exit", 3), ("segfault", -signal.SIGSEGV)])
def test_a_step_that_dies_after_many_phases_is_named_by_its_last(worker, end, exitcode):
    """Phases announced faster than the pipe carries them reach the board: a worker that dies
    (exits, or crashes in native code) is named by the very last one."""
    with pytest.raises(isolated.WorkerDied) as err:
        worker.call("isolated_steps:announce_many", (20_000, end), what="a crashing step")
    assert err.value.exitcode == exitcode
    assert err.value.phase == "plan 19999 of 20000" and worker.phase == "plan 19999 of 20000"


def test_a_step_past_its_deadline_after_many_phases_is_named_by_its_last(worker):
    with pytest.raises(TimedOut) as err:
        worker.call("isolated_steps:announce_many", (20_000, "return", 60), budget_s=1.0)
    assert err.value.phase == "plan 19999 of 20000"
    assert "timed out after" in str(err.value) and "in plan 19999 of 20000" in str(err.value)


def test_a_step_that_dies_before_announcing_is_not_named_by_the_step_before(worker):
    """The board is cleared for each step: the last step's phase does not name this one's death."""
    worker.call("isolated_steps:sleep_in", ("the step before", 0))
    with pytest.raises(isolated.WorkerDied) as err:
        worker.call("os:_exit", (4,))
    assert err.value.phase == "start of the step" and err.value.exitcode == 4


def test_a_listener_hears_the_first_phase_then_at_most_one_an_interval_and_the_last(worker):
    """``on_phase`` hears a step's first phase, then the newest at most once every `PHASE_SEND_S`,
    and, while the step goes on quietly, the phase it announced last (from the board: the pipe
    did not carry it, coming within the interval after the one before)."""
    heard = []
    worker.call("isolated_steps:pid")  # started: the step's phases are paced, not the start-up
    worker.call(
        "isolated_steps:announce_paced",
        (60, 0.01, 0.5),
        on_phase=lambda phase: heard.append((time.monotonic(), phase)),
    )
    phases = [phase for _, phase in heard]
    announced = [f"plan {i}" for i in range(60)] + ["almost", "last"]
    assert phases[0] == "plan 0" and phases[-1] == "last" and len(phases) >= 3
    assert sorted(phases, key=announced.index) == phases  # in the order announced, none twice
    gaps = [b - a for (a, _), (b, _) in zip(heard, heard[1:])]
    assert min(gaps) >= isolated.PHASE_SEND_S - 0.02, gaps


def test_a_long_phase_is_cut_on_the_board_at_a_characters_edge():
    """The board holds `PHASE_BOARD_BYTES` of UTF-8: a longer phase is cut before the character
    that would not fit whole."""
    board = isolated.PhaseBoard(multiprocessing.get_context("spawn"))
    assert board.read() == ""
    size = isolated.PHASE_BOARD_BYTES
    board.write("x" * (size - 1) + "é")  # é is two bytes: one would fit
    assert board.read() == "x" * (size - 1)
    board.write("€" * size)  # three bytes each
    assert board.read() == "€" * (size // 3)
    board.write("")
    assert board.read() == ""


class _Killed(BaseException):
    pass


def _write_killed_after(board, phase, lines):
    """``board.write(phase)`` stopped after its first ``lines`` lines (in isolated.py), as a worker
    killed there; returns whether it finished first."""
    seen = 0

    def trace(frame, event, arg):
        nonlocal seen
        if frame.f_code.co_filename != isolated.__file__:
            return None
        if event == "line":
            seen += 1
            if seen > lines:
                raise _Killed
        return trace

    sys.settrace(trace)
    try:
        board.write(phase)
        return True
    except _Killed:
        return False
    finally:
        sys.settrace(None)


def test_a_write_killed_at_any_line_leaves_a_whole_phase_on_the_board():
    """A reader after the writer's death sees the phase before or the new one, never a mix,
    wherever the write was stopped."""
    ctx = multiprocessing.get_context("spawn")
    for lines in range(100):
        board = isolated.PhaseBoard(ctx)
        board.write("timing plan 6 (eng1)")
        finished = _write_killed_after(board, "capture", lines)
        assert board.read() in ("timing plan 6 (eng1)", "capture"), lines
        if finished:
            break
    assert finished and lines > 2 and board.read() == "capture"


def test_a_long_phase_names_a_dead_step_cut_at_a_characters_edge(worker):
    with pytest.raises(isolated.WorkerDied) as err:
        worker.call("isolated_steps:announce_many", (3, "exit", 0, "x" + "ü" * 1000))
    assert err.value.phase == "x" + "ü" * ((isolated.PHASE_BOARD_BYTES - 1) // 2)


def test_the_worker_sends_a_steps_first_phase_then_at_most_one_an_interval():
    """In the worker, every phase goes to the board; the pipe gets the first, then none until
    `PHASE_SEND_S` has passed since the last it got."""
    sent = []
    board = isolated.PhaseBoard(multiprocessing.get_context("spawn"))
    tell = isolated._teller(type("Conn", (), {"send": staticmethod(sent.append)})(), board)
    for i in range(1000):
        tell(f"plan {i}")
    assert sent == [("phase", "plan 0")] and board.read() == "plan 999"
    time.sleep(isolated.PHASE_SEND_S)
    tell("plan 1000")
    tell("plan 1001")
    assert sent[1:] == [("phase", "plan 1000")] and board.read() == "plan 1001"


def test_the_callers_labkit_settings_reach_the_worker(worker, monkeypatch):
    monkeypatch.setenv("LABKIT_SOMETHING", "one")
    assert worker.call("isolated_steps:env", ("LABKIT_SOMETHING",)) == "one"
    monkeypatch.setenv("LABKIT_SOMETHING", "two")
    assert worker.call("isolated_steps:env", ("LABKIT_SOMETHING",)) == "two"
    monkeypatch.delenv("LABKIT_SOMETHING")
    assert worker.call("isolated_steps:env", ("LABKIT_SOMETHING",)) is None


def test_isolation_off_runs_the_step_here(monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATE", "0")
    assert isolated.run_step("isolated_steps:pid") == os.getpid()
    heard = []
    assert isolated.run_step("isolated_steps:sleep_in", ("a phase", 0), on_phase=heard.append) == "woke"
    assert heard == ["a phase"]
    outer = []
    with announcing(outer.append):  # what the report does: the step's phases go on to the caller's listener
        isolated.run_step("isolated_steps:sleep_in", ("another phase", 0), on_phase=announce)
    assert outer == ["another phase"]


def test_the_workers_phases_reach_the_callers_listener(worker):
    outer = []
    with announcing(outer.append):
        worker.call("isolated_steps:sleep_in", ("in the worker", 0), on_phase=announce)
    assert outer == ["in the worker"]


def test_a_bad_target_is_refused(worker):
    with pytest.raises(InvalidSpec, match="module:function"):
        worker.call("no_colon_here")


def test_a_process_that_used_the_worker_exits():
    """The worker is not daemonic (it may start build workers): multiprocessing's exit handler
    would join it forever unless labkit stops it first. A script that ran a report must end."""
    code = "from labkit.gpu.host import isolated; print(isolated.worker().call('os:getpid') > 0)"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=45, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr[-2000:]
    assert time.monotonic() - t0 < 30


def test_a_worker_started_soon_is_warmed_once_and_serves_the_next_step(worker):
    """`Worker.start_soon` returns at once; its warm step runs in the worker before the first step,
    which finds the same process (started once)."""
    t0 = time.monotonic()
    thread = worker.start_soon("isolated_steps:warm")
    assert time.monotonic() - t0 < 0.5
    thread.join(60)
    pid = worker.call("isolated_steps:pid")
    assert worker.call("isolated_steps:warmed") == [pid]
    assert worker.starts == 1


def test_a_warm_step_that_fails_is_left_for_the_first_step(worker):
    """A warm-up that fails is an optimisation lost, not an error: the next step still runs."""
    worker.start_soon("isolated_steps:no_such_step").join(60)
    assert worker.call("isolated_steps:add", (1, 1)) == 2


@pytest.mark.parametrize(
    "lesson, shared, isolate, started",
    [
        ("09", "", "1", True),
        ("01", "", "1", False),
        (None, "", "1", False),
        ("09", "/srv/class", "1", False),
        ("09", "", "0", False),
    ],
)
def test_lesson_09s_banner_starts_the_report_worker_warmed(monkeypatch, lesson, shared, isolate, started):
    """Live, the banner of the lesson that draws the network report starts its worker with the
    report's warm step (a real function of the worker steps); not in another lesson, in a class,
    or with isolation off."""
    from labkit.session import texts

    monkeypatch.setenv("LABKIT_SHARED_CACHE", shared)
    monkeypatch.setenv("LABKIT_ISOLATE", isolate)
    sent = []
    start_soon = staticmethod(lambda step, args=(): sent.append((step, args)))
    monkeypatch.setattr(isolated, "worker", lambda: type("W", (), {"start_soon": start_soon})())
    assert texts.start_report_worker(lesson) is started
    assert sent == ([(texts.REPORT_WARM_STEP, ((), texts.REPORT_STEPS))] if started else [])
    assert callable(isolated._resolve(texts.REPORT_WARM_STEP))


def test_the_report_workers_warm_step_checks_in_the_reports_default_dtype_and_layout():
    """The report worker's warm-up loads the kernels of the checks the first report runs: its dtype
    and layout are `network_report`'s defaults."""
    import inspect

    from labkit.experiments.your_network import runs
    from labkit.gpu import worker_warmup

    defaults = {k: p.default for k, p in inspect.signature(runs.network_report).parameters.items()}
    assert (worker_warmup.WARM_DTYPE, worker_warmup.WARM_LAYOUT) == (defaults["dtype"], defaults["layout"])


def test_the_report_workers_warm_up_imports_neither_pandas_nor_the_lessons():
    """The warm-up starts the build workers before anything heavy loads: its own module, imported
    in a fresh interpreter, pulls in neither pandas nor any lesson (the steps' module is imported
    in a thread later, while CUDA's context is made)."""
    from labkit.session import texts

    module = texts.REPORT_WARM_STEP.split(":")[0]
    code = (
        f"import sys, {module}; print(sorted(m for m in sys.modules"
        " if m.split('.')[0] == 'pandas' or m.startswith('labkit.experiments')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert callable(isolated._resolve(texts.REPORT_WARM_STEP))
    assert importlib.util.find_spec(texts.REPORT_STEPS) is not None


def test_meanwhile_runs_while_the_worker_runs_the_step(worker):
    """``meanwhile`` is called once the step is sent, and overlaps it: a step of 0.6 s and a
    meanwhile of 0.4 s take well under their sum."""
    worker.call("isolated_steps:pid")  # started: only the step and meanwhile are timed
    ran = []
    t0 = time.monotonic()
    assert (
        worker.call(
            "isolated_steps:sleep_in", ("sleeping", 0.6), meanwhile=lambda: ran.append(time.sleep(0.4))
        )
        == "woke"
    )
    assert ran == [None] and time.monotonic() - t0 < 0.95  # not 1.0: the two overlapped


def test_meanwhile_runs_before_the_step_with_isolation_off(monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATE", "0")
    order = []
    isolated.run_step("isolated_steps:add", (1, 2), meanwhile=lambda: order.append("meanwhile"))
    assert order == ["meanwhile"]


@pytest.mark.parametrize(
    "mode, shared, isolate, alive, started",
    [
        ("live", "", "1", False, True),
        ("live", "", "1", True, True),
        ("recorded", "", "1", False, False),
        ("live", "/srv/class", "1", False, False),
        ("live", "", "0", False, False),
    ],
)
def test_a_report_call_starts_the_report_worker_before_the_report_loads(
    monkeypatch, mode, shared, isolate, alive, started
):
    """``labkit.report`` asks the mode, then starts the worker (warmed) in the background, so that the
    worker's start overlaps the report's imports: live only, not in a class, not with isolation
    off. A worker running already gets the step too: it plans the report's graphs meanwhile."""
    import threading

    import labkit
    from labkit import env
    from labkit.session import texts

    monkeypatch.setenv("LABKIT_SHARED_CACHE", shared)
    monkeypatch.setenv("LABKIT_ISOLATE", isolate)
    monkeypatch.setenv("LABKIT_MODE", "recorded" if mode == "recorded" else "")
    monkeypatch.setattr(env, "mode", lambda: env.Mode(mode, "test"))
    sent, done = [], threading.Event()

    def start_soon(step, args=()):
        sent.append((step, args))
        done.set()

    monkeypatch.setattr(
        isolated, "worker", lambda: type("W", (), {"start_soon": staticmethod(start_soon), "alive": alive})()
    )
    specs = (labkit.ConvSpec(N=2, C=8, H=8, W=8, K=8),)
    assert texts.warm_report_worker(specs) is (mode == "live" and not shared and isolate == "1")
    done.wait(5 if started else 0.5)
    assert sent == ([(texts.REPORT_WARM_STEP, (specs, texts.REPORT_STEPS))] if started else [])


def test_a_warm_report_worker_with_no_convolutions_to_plan_gets_no_step(monkeypatch):
    """A report whose convolutions are not known before it loads (a model, or arguments the report
    will turn down) sends a running worker nothing: it is warm already, and has nothing to plan."""
    from labkit import env
    from labkit.session import texts

    for name in ("LABKIT_SHARED_CACHE", "LABKIT_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LABKIT_ISOLATE", "1")
    monkeypatch.setattr(env, "mode", lambda: env.Mode("live", "test"))
    sent = []
    monkeypatch.setattr(
        isolated,
        "worker",
        lambda: type("W", (), {"start_soon": staticmethod(lambda *a: sent.append(a)), "alive": True})(),
    )
    assert texts.warm_report_worker(()) is True
    assert sent == []


def test_labkit_report_takes_the_reports_own_arguments():
    """The entry point `labkit.report` (which starts the worker first) has the signature of the
    report it hands over to."""
    import inspect

    import labkit
    from labkit import networks
    from labkit.present import netreport, report_call

    assert labkit.report is report_call.report
    assert inspect.signature(report_call.report).parameters == inspect.signature(netreport.report).parameters
    assert labkit.Report is netreport.Report
    queued = report_call._preset_specs("resnet50", None, "fp16", "NHWC", None)
    assert len(queued) == len(networks.unique(list(networks.layers_of("resnet50", 32).layers))) == 23
    assert report_call._preset_specs("no_such_net", None, "fp16", "NHWC", None) == ()


@pytest.mark.parametrize("fails", [False, True])
def test_a_model_path_report_queues_its_layers_before_the_report_loads(monkeypatch, fails):
    """``labkit.report("module:callable", input_shape=...)`` builds the model and reads its layers in
    a thread, which starts the worker with their distinct convolutions; the report gets that model.
    When building fails, the report gets the path again (and names the error itself)."""
    from labkit import networks
    from labkit.present import netreport, report_call
    from labkit.spec import ConvSpec

    model = object()
    specs = [ConvSpec(N=4, C=8, H=8, W=8, K=8), ConvSpec(N=4, C=8, H=8, W=8, K=16)]

    def from_path(path):
        if fails:
            raise InvalidSpec("net", path, "does not import")
        return model

    def layers_of(net, batch=None, **kw):
        assert net is model and kw["input_shape"] == (4, 8, 8, 8) and batch is None
        return networks.Network("M", tuple(networks.Layer(f"c{i}", s) for i, s in enumerate(specs + specs)))

    warmed, got = [], []
    monkeypatch.setattr(networks, "model_from_path", from_path)
    monkeypatch.setattr(networks, "layers_of", layers_of)
    monkeypatch.setattr(report_call, "warm_report_worker", lambda s: warmed.append(s))
    monkeypatch.setattr(netreport, "report", lambda net, **kw: got.append((net, kw["input_shape"])) or "rep")
    assert report_call.report("pkg.models:m", input_shape=(4, 8, 8, 8)) == "rep"
    assert got == [("pkg.models:m" if fails else model, (4, 8, 8, 8))]
    assert warmed == ([] if fails else [tuple(specs)])
