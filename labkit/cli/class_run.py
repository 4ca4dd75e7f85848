"""``python -m labkit class check | start | stop``: the teacher's commands (`make hub` runs start).

`main_start` checks everything first (`labkit.cli.classroom.checked`: one line per problem, exit
2), starts JupyterHub with ``class/jupyterhub_config.py`` in the background (its log in
``<class folder>/hub/jupyterhub.log``), waits until it answers, and prints the address to hand
out. `main_stop` stops the hub, which stops every learner's server and its proxy first.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from . import class_env, classroom
from .class_settings import BadSettings

#: seconds `main_start` waits for the hub to answer
START_S = 90
#: seconds `main_stop` waits for the hub to stop every server and itself
STOP_S = 120


def _environ(folder: Optional[str]) -> dict:
    return dict(os.environ, **({"LABKIT_CLASS_DIR": folder} if folder else {}))


def main_check(folder: Optional[str] = None) -> int:
    """``class check``: everything the class needs, checked, nothing started.

    Args:
        folder: the class folder; default ``LABKIT_CLASS_DIR``.

    Returns:
        0 when the class can start (`BadSettings` otherwise: one line per problem, exit 2).
    """
    s, python = classroom.checked(None, _environ(folder))
    gpus = classroom.gpu_spread(s)
    print(classroom.start_text(s, gpus, classroom.allowed(s.folder)))
    print(f"labkit class: learners' servers run {python}; the class can start")
    return 0


def _hub_pid(hub: Path) -> Optional[int]:
    try:
        pid = int((hub / "jupyterhub.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def main_start(folder: Optional[str] = None, *, foreground: bool = False) -> int:
    """``class start``: check, then start the hub in the background and say where learners go.

    Args:
        folder: the class folder; default ``LABKIT_CLASS_DIR``.
        foreground: run the hub in this terminal instead (Ctrl-C stops it).

    Returns:
        0 once the hub answers; 2 when a check fails or the hub exits while starting.
    """
    environ = _environ(folder)
    s, python = classroom.checked(None, environ)
    hub = s.folder / classroom.HUB_DIR
    running = _hub_pid(hub)
    if running:
        raise BadSettings(
            [f"a hub of this class runs already (pid {running}): `python -m labkit class stop`"]
        )
    busy = class_env.ports_free(s.ip, s.port)
    if busy:
        raise BadSettings([busy])
    environ["LABKIT_CLASS_PYTHON"] = str(python)  # the hub's configuration checks it once more
    argv = [sys.executable, "-m", "jupyterhub", "-f", str(classroom.ROOT / "class" / "jupyterhub_config.py")]
    hub.mkdir(parents=True, exist_ok=True)
    if foreground:
        os.chdir(hub)
        os.execve(sys.executable, argv, environ)
    log = hub / "jupyterhub.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, cwd=hub, env=environ, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    local = f"{'https' if s.tls_cert else 'http'}://{s.ip if s.ip not in ('', '0.0.0.0') else '127.0.0.1'}"
    deadline = time.monotonic() + START_S
    while not _answers(f"{local}:{s.port}/hub/api/"):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.terminate()
            last = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
            raise BadSettings([f"the hub did not start (its log, {log}, ends: {' | '.join(last)})"])
        time.sleep(0.3)
    gpus = classroom.gpu_spread(s)
    print(classroom.start_text(s, gpus, classroom.allowed(s.folder)))
    print(f"labkit class: the hub runs in the background (pid {proc.pid}, log {log}); ", end="")
    print(f"`python -m labkit class stop --dir {s.folder}` stops it and every learner's server")
    return 0


def _answers(url: str) -> bool:
    context = ssl._create_unverified_context()  # its own certificate may name another host
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return r.status == 200 and "version" in json.loads(r.read() or b"{}")
    except (OSError, ValueError, urllib.error.URLError):
        return False


def main_stop(folder: Optional[str] = None) -> int:
    """``class stop``: stop the hub, which first stops every learner's server and its proxy.

    Args:
        folder: the class folder; default ``LABKIT_CLASS_DIR``.

    Returns:
        0 once it has stopped (or none ran); 2 when it is still running after `STOP_S`.
    """
    s = classroom.settings(None, _environ(folder))
    hub = s.folder / classroom.HUB_DIR
    pid = _hub_pid(hub)
    if pid is None:
        print(f"labkit class: no hub of {s.folder} is running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while _hub_pid(hub) == pid and time.monotonic() < deadline:
        time.sleep(0.2)
    if _hub_pid(hub) == pid:
        raise BadSettings(
            [f"the hub (pid {pid}) still runs after {STOP_S} s: its log is {hub / 'jupyterhub.log'}"]
        )
    print(f"labkit class: the hub (pid {pid}), its proxy and every learner's server stopped")
    return 0
