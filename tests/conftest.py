"""Test-suite wiring. The markers themselves are declared in pyproject.toml ([tool.pytest.ini_options]).

* ``@pytest.mark.gpu`` tests run only when labkit is in live mode (a CUDA GPU with cuDNN); otherwise
  they are skipped with the reason labkit gives, e.g.
  ``needs a CUDA GPU (labkit mode is recorded: no CUDA device)``. ``-rs`` lists every skip.
* Live, tests run side by side (``pytest -n``, `make test`) take turns on the GPU: a ``gpu`` test
  or a notebook runs while no other one does (`pytest_runtest_protocol`), and ``-n auto`` starts
  at most `LIVE_WORKERS` workers. The tests that need no GPU run beside them.
* ``@pytest.mark.browser`` tests are not touched here: they run by default.
* ``LABKIT_CACHE`` points at a fresh temporary folder unless set: tests never read or write the
  user's own saved measurements.
* Python's bytecode cache is on for the run and the processes it starts, whatever the host's
  ``PYTHONDONTWRITEBYTECODE`` says (`pytest_configure`).
"""

from __future__ import annotations

import os
import sys
import tempfile

import pytest
from filelock import FileLock


def pytest_configure(config):
    # Python's bytecode cache on, in this process and every one it starts (pytest-xdist's workers,
    # the notebooks' kernels, the commands tests run), as a learner's Python has it: on a host that
    # sets PYTHONDONTWRITEBYTECODE every worker would rewrite every test module's asserts and compile
    # labkit from source again on every run (collection alone: 10-14 s a worker instead of 5)
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # Live measurements made by tests (and by notebooks they run) are saved in a throw-away
    # cache folder, never in the user's (labkit.store.localcache); LABKIT_CACHE set by hand wins.
    if not os.environ.get("LABKIT_CACHE"):
        os.environ["LABKIT_CACHE"] = tempfile.mkdtemp(prefix="labkit-test-cache-")


def gpu_skip_reason() -> str | None:
    """Why gpu tests cannot run on this machine, or None when labkit is live.

    Never raises: a broken or missing ``labkit.env`` turns into a skip reason that says so.
    """
    try:
        from labkit.env import mode
    except Exception as err:  # noqa: BLE001 - any import failure must become a visible skip
        return f"labkit.env not importable: {type(err).__name__}: {err}"
    try:
        m = mode()
        name, reason = str(m.name), str(m.reason)
    except Exception as err:  # noqa: BLE001 - e.g. LABKIT_MODE=live on a machine without a GPU
        return f"needs a CUDA GPU (labkit.env.mode() failed: {type(err).__name__}: {err})"
    if name == "live":
        return None
    return f"needs a CUDA GPU (labkit mode is {name}: {reason})"


def pytest_report_header(config):
    reason = gpu_skip_reason()
    return f"labkit: {'live (gpu tests run)' if reason is None else reason + ' -> gpu tests skip'}"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_skip_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in gpu_items:
        item.add_marker(skip)


#: ``-n auto`` on a live GPU starts at most this many workers: each worker's labkit keeps processes
#: with CUDA contexts (a report's worker, its build workers) and CuPy's memory pool; with sixteen
#: on an H200, tests ran out of device memory (PYTEST_XDIST_AUTO_NUM_WORKERS set by hand wins)
LIVE_WORKERS = 4


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # pytest-xdist's hook, when it is there
def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or gpu_skip_reason() is not None:
        return None  # pytest-xdist's own count: every core
    return min(LIVE_WORKERS, os.cpu_count() or 1)


def gpu_turn_file() -> str:
    """The lock file of a GPU test's turn: ``LABKIT_TEST_GPU_TURN``, else one per user in the temp folder."""
    return os.environ.get("LABKIT_TEST_GPU_TURN") or os.path.join(
        tempfile.gettempdir(), f"labkit-test-gpu-turn-{os.getuid()}.lock"
    )


def uses_gpu(item) -> bool:
    """Whether a collected test uses the GPU when live: a ``gpu`` test or a notebook of nbmake's."""
    return item.get_closest_marker("gpu") is not None or str(getattr(item, "path", "")).endswith(".ipynb")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """One GPU test at a time (set-up and tear-down included), as labkit takes one measurement at a
    time: labkit marks a measurement another process's GPU work overlapped, and saves none of them;
    tests read the device's free memory, time a plan against another, or need two streams' kernels
    to overlap. Recorded, the GPU tests are skipped and the notebooks replay the recording."""
    if uses_gpu(item) and _live(item.config):
        with FileLock(gpu_turn_file()):
            yield
    else:
        yield


def _live(config) -> bool:
    key = "_labkit_live"
    if not hasattr(config, key):
        setattr(config, key, gpu_skip_reason() is None)
    return getattr(config, key)


@pytest.fixture
def recorded_mode(monkeypatch):
    """Recorded mode from the shipped recording (the default one), whatever this machine has, and a
    hands-on GPU made from it at first use: a `labkit.practice` GPU another test made (simulated
    from another recording, or calibrated) is not carried into this one."""
    from labkit import practice
    from labkit.store import recordings

    monkeypatch.setenv("LABKIT_MODE", "recorded")
    monkeypatch.delenv("LABKIT_RECORDING", raising=False)
    recordings._current = recordings._picked = None
    practice._current, practice._gpus = None, {}
    yield
    recordings._current = recordings._picked = None
    practice._current, practice._gpus = None, {}


@pytest.fixture
def fresh_progress(tmp_path, monkeypatch):
    """No exercise answered yet, in a cache folder of this test's own (`labkit.store.progress`):
    tests run side by side (``pytest -n``) never meet each other's answers."""
    from labkit.experiments import exercise

    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "labkit-cache"))
    monkeypatch.setattr(exercise, "_on_disk", True)
    monkeypatch.setattr(exercise, "_MEMORY", {})
    yield tmp_path / "labkit-cache"
