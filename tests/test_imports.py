"""Importing labkit starts nothing: ``import labkit`` and the import of every one of its modules
leave one thread (no probe of the machine, no worker) and install nothing (the session's results
are installed where a notebook first uses its modules, `labkit.session.first_use`). Fresh
interpreters, real threads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "labkit"


def modules() -> list:
    """Every labkit module's dotted name, in file order."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (recorded mode); the JSON it prints last."""
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**__import__("os").environ, "LABKIT_MODE": "recorded"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_labkit_starts_no_thread():
    got = fresh(
        "import json, threading\n"
        "import labkit\n"
        "from labkit import env\n"
        "print(json.dumps([t.name for t in threading.enumerate()]))\n"
    )
    assert got == ["MainThread"]


def test_importing_every_module_starts_no_thread_and_installs_no_result_source():
    """Each module imported in turn in one interpreter, the threads counted after each, and no labkit
    exit handler registered by any (one is registered where what it stops is started); a module that
    needs a GPU library this machine lacks (CuPy on a CPU machine) is passed over."""
    code = (
        "import atexit, importlib, json, threading\n"
        "at_exit = []\n"
        "_register = atexit.register\n"
        "def register(fn, *a, **k):\n"
        "    owner = getattr(getattr(fn, '__self__', None), '__module__', None) or fn.__module__\n"
        "    at_exit.append(f'{owner}.{getattr(fn, \"__qualname__\", fn)}')\n"
        "    return _register(fn, *a, **k)\n"
        "atexit.register = register\n"
        f"names = {modules()!r}\n"
        "started, skipped = {}, []\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        skipped.append(exc.name)\n"
        "    extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]\n"
        "    if extra:\n"
        "        started[name] = extra\n"
        "        break\n"
        "from labkit.experiments import core\n"
        "labkit_exit = [f for f in at_exit if f.startswith('labkit')]\n"
        "print(json.dumps(dict(started=started, skipped=sorted(set(skipped)), at_exit=labkit_exit,\n"
        "                      source=type(core._results).__name__)))\n"
    )
    got = fresh(code)
    assert got["started"] == {}, f"an import started a thread: {got['started']}"
    assert got["at_exit"] == [], f"an import registered an exit handler: {got['at_exit']}"
    assert set(got["skipped"]) <= {"cupy", "cupyx", "torch", "cupti", "pynvml", "nvtx"}, got["skipped"]
    assert got["source"] == "ResultSource", "an import installed a result source"
