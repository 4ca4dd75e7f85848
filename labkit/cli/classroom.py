"""A class on JupyterHub: the hub's configuration, the command each learner's server starts with,
and the teacher's view of who has which GPU.

``class/jupyterhub_config.py`` calls `configure`; ``python -m labkit class start`` (`make hub`)
checks everything first, then starts the hub in the background (`labkit.cli.class_run`). One class
folder (``LABKIT_CLASS_DIR``, default ``/srv/labkit-class``) holds:

    <folder>/                 the class's shared recording (`python -m labkit fill --into <folder>`)
    <folder>/hub/             the hub's database, cookie secret, passwords, GPU record and log (`HUB_DIR`)
    <folder>/gpu-locks/       one lock folder per GPU for every learner (`labkit.gpu.host.lock`)
    <folder>/learners/<name>  each learner's home, when learners share the hub's account
    <folder>/learners.txt     who may log in, one name a line (nobody else, unless LABKIT_CLASS_OPEN=anyone)

**Settings** (`labkit.cli.class_settings`) come from ``LABKIT_CLASS_*`` environment variables, or
``c.LabkitClass.<name>`` set before the shipped file runs (the hub test gives the host's GPUs that
way); every value is checked, and so is everything a learner's server needs
(`labkit.cli.class_env.check`): a mistake stops the hub with one line each, exit status 2.

**Accounts.** Learners pick a password at their first login (`class_spawner.LearnerAuthenticator`).
Started as root, the hub makes a Unix account for each learner (``jupyter-<name>``, a private home)
and starts their server as it (`class_spawner.LearnerSpawner`), from an interpreter every account
can run (`class_env.learner_python`). Started as anyone else, every server runs as the user who
started the hub, each in its own home under ``learners/``: learners are then not isolated from each
other (JupyterHub's `SimpleLocalProcessSpawner`), and the hub says so as it starts.

**Each learner's server** gets one GPU (`labkit.gpu.host.spread`), the class's shared recording
(``LABKIT_SHARED_CACHE``) and the host's lock folder (``LABKIT_GPU_LOCK_DIR``), and starts with
`main_learner_server`: it copies the lessons it lacks into ``~/labkit-lessons``, runs
``python -m labkit warm-kernels`` once per environment, then becomes ``jupyterhub-singleuser``.
Its kernels talk to it over Unix sockets (`kernel_sockets`), not TCP ports: every learner's server
picks its kernels' ports on its own, and when a class starts at once two of them can pick the same
port, which the kernel then cannot bind on any restart: that learner's kernel is lost. A server
idle for ``LABKIT_CLASS_IDLE_SECONDS`` is stopped by jupyterhub-idle-culler, and its GPU goes back
to the spread (`main_gpus` shows who holds which GPU, since when).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import InvalidSpec
from ..gpu.host import spread
from ..store import localcache
from ..store.localcache import write_atomic
from ..version import __version__
from . import class_env
from .class_settings import NAME, BadSettings, Settings, allowed, learners_file, settings

__all__ = ["BadSettings", "Settings", "allowed", "configure", "learners_file", "settings"]

#: the repository this labkit runs from (its notebooks/ are the lessons a learner gets)
ROOT = Path(__file__).resolve().parents[2]
#: the hub's own files, inside the class folder
HUB_DIR = "hub"
#: each learner's copy of the lessons, in their home
LESSONS_DIR = "labkit-lessons"
#: the lesson a learner's JupyterLab opens first
FIRST_LESSON = "00_start_here.ipynb"
#: what jupyterhub-idle-culler may do (its documented least privileges)
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]


# ---- the hub ------------------------------------------------------------------------------------
def proxy_command() -> str:
    """The ``configurable-http-proxy`` JupyterHub starts.

    Returns:
        The one ``make proxy`` installs beside this Python (``<venv>/node``), else the one on PATH;
        `InvalidSpec` when there is none.
    """
    local = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return str(local)
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    raise InvalidSpec(
        "configurable-http-proxy",
        None,
        "JupyterHub's proxy is not installed: run `make proxy` (npm installs it beside the venv)",
    )


def _folders(s: Settings) -> Dict[str, Path]:
    hub = s.folder / HUB_DIR
    locks = s.folder / "gpu-locks"
    # the hub's own files private; a lock folder every learner's kernel can write in (and remove a
    # dead learner's ticket from: no sticky bit)
    for path, mode in ((s.folder, 0o755), (hub, 0o700), (locks, 0o777)):
        path.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(path, mode)
        except PermissionError:
            pass  # another account's folder: it set the mode
    return dict(hub=hub, locks=locks, learners=s.folder / "learners")


def gpu_spread(s: Settings) -> spread.Spread:
    """The class's `labkit.gpu.host.spread.Spread`.

    Args:
        s: the class's settings.

    Returns:
        A `Spread` with its record in the hub folder, the host's GPUs (``s.gpus``, or NVML's), the
        teacher's pins and reserved GPUs.
    """
    gpus = spread.host_gpus() if s.gpus is None else s.gpus
    return spread.Spread(s.folder / HUB_DIR / "gpus.json", gpus=gpus, pins=s.pins, reserved=s.reserved)


def learner_environment(s: Settings, locks: Path, python: Optional[Path] = None) -> Dict[str, str]:
    """What every learner's server gets, whichever GPU it is given.

    Args:
        s: the class's settings.
        locks: the class's GPU lock folder.
        python: the interpreter learners' servers run; default this one.

    Returns:
        Environment variable -> value.
    """
    bin_dir = str(Path(python or sys.executable).parent)
    return {
        "LABKIT_SHARED_CACHE": str(s.folder),
        "LABKIT_GPU_LOCK_DIR": str(locks),
        "LABKIT_CLASS_LESSONS": f"~/{LESSONS_DIR}",
        "PATH": os.pathsep.join([bin_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
    }


def checked(section=None, environ=None) -> tuple:
    """The class's settings and the interpreter learners run, with everything checked.

    Args:
        section: ``c.LabkitClass``; None for none.
        environ: the environment; default ``os.environ``.

    Returns:
        (`Settings`, the learners' interpreter); `BadSettings` with one line per problem.
    """
    s = settings(section, environ)
    try:
        python = class_env.learner_python(s, root=ROOT)
    except InvalidSpec as exc:
        raise BadSettings([str(exc)]) from None
    problems = class_env.check(s, python=python, proxy=proxy_command)
    if problems:
        raise BadSettings(problems)
    return s, python


def configure(c) -> Settings:
    """Configure JupyterHub for the class (see the module docstring).

    A mistake in the settings, or anything a learner's server would lack, ends the hub's start
    here: one line each on stderr, exit status 2.

    Args:
        c: JupyterHub's config object.

    Returns:
        The `Settings` used.
    """
    try:
        s, python = checked(c.get("LabkitClass"))
    except BadSettings as exc:
        for line in exc.lines:
            print(f"labkit class: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    where = _folders(s)
    gpus = gpu_spread(s)
    scheme = "https" if s.tls_cert else "http"
    c.JupyterHub.bind_url = f"{scheme}://{s.ip}:{s.port}"
    if s.tls_cert:
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = str(s.tls_cert), str(s.tls_key)
    c.JupyterHub.db_url = f"sqlite:///{where['hub'] / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(where["hub"] / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(where["hub"] / "jupyterhub.pid")
    # its own API and its proxy's on the next two ports, so that two classes on one host can run
    c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{s.port + 1}"
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.port + 2}"
    c.ConfigurableHTTPProxy.command = [proxy_command()]
    c.ConfigurableHTTPProxy.pid_file = str(where["hub"] / "proxy.pid")
    _who_may_log_in(c, s, where["hub"])
    if s.as_root:
        c.JupyterHub.spawner_class = "labkit.cli.class_spawner.LearnerSpawner"
        c.LearnerSpawner.account_prefix = s.prefix
        c.LearnerSpawner.homes = str(s.homes)
    else:
        c.JupyterHub.spawner_class = "simple"
        c.SimpleLocalProcessSpawner.home_dir_template = str(where["learners"] / "{username}")
        if os.geteuid() == 0:  # told to share the hub's account, and that account is root
            c.Spawner.args = ["--ServerApp.allow_root=True"]
    c.Spawner.cmd = [str(python), "-m", "labkit", "class", "server"]
    c.Spawner.notebook_dir = f"~/{LESSONS_DIR}"
    c.Spawner.default_url = f"/lab/tree/{FIRST_LESSON}"
    c.Spawner.environment = learner_environment(s, where["locks"], python)
    # a learner's first start compiles CuPy's kernels (warm-kernels) before the server answers
    c.Spawner.start_timeout = c.Spawner.http_timeout = 300
    c.Spawner.pre_spawn_hook = _give_gpu(gpus)
    c.Spawner.post_stop_hook = _take_gpu_back(gpus)
    if s.idle_seconds:
        c.JupyterHub.services = [
            dict(name="idle-culler", command=culler_command(s.idle_seconds)),
        ]
        c.JupyterHub.load_roles = [dict(name="idle-culler", services=["idle-culler"], scopes=CULLER_SCOPES)]
    print(start_text(s, gpus, allowed(s.folder)), flush=True)
    return s


def _who_may_log_in(c, s: Settings, hub: Path) -> None:
    """Learners pick a password at their first login; only learners.txt's names and the admins
    may log in (learners.txt is read again at each login), unless the hub is open to anyone."""
    c.JupyterHub.authenticator_class = "labkit.cli.class_spawner.LearnerAuthenticator"
    c.LearnerAuthenticator.class_folder = str(s.folder)
    c.FirstUseAuthenticator.dbm_path = str(hub / "passwords.dbm")
    c.Authenticator.allow_all = s.open
    c.Authenticator.allow_existing_users = False  # a name taken off the list is let in no more
    c.Authenticator.allowed_users = set(allowed(s.folder) or []) | set(s.admins)
    c.Authenticator.admin_users = set(s.admins)
    c.Authenticator.username_pattern = NAME.pattern  # names a Unix account can take


def culler_command(idle_seconds: int) -> List[str]:
    """jupyterhub-idle-culler, as a service the hub runs: stops servers idle ``idle_seconds``.

    Args:
        idle_seconds: how long a server may be idle, in seconds.

    Returns:
        The command (it looks every half of that, at most every 5 minutes).
    """
    every = max(1, min(300, idle_seconds // 2))
    return [
        sys.executable,
        "-m",
        "jupyterhub_idle_culler",
        f"--timeout={idle_seconds}",
        f"--cull-every={every}",
    ]


def start_text(s: Settings, gpus: spread.Spread, names: Optional[list]) -> str:
    """What the hub says as it starts: the URL to hand out, who may log in, accounts, GPUs.

    Args:
        s: the class's settings.
        gpus: the class's GPU spread.
        names: the names in learners.txt; None when there is none.

    Returns:
        One line per fact.
    """
    listed = learners_file(s.folder)
    if s.open:
        who = "anyone who reaches it can make an account and run code on this host (LABKIT_CLASS_OPEN=anyone)"
    elif names:
        who = f"{len(names)} learners listed in {listed} may log in (the file is read at every login)"
    else:
        who = f"nobody can log in yet: list the learners in {listed}, one name a line (read at every login)"
    if s.as_root:
        accounts = (
            f"each learner's server runs as a Unix account of their own ({s.prefix}<name>, "
            f"private home in {s.homes}), made at their first start"
        )
    else:
        accounts = (
            f"LEARNERS ARE NOT ISOLATED: every server runs as this account ({_user()}), so learners "
            "can read each other's work; start the hub as root for an account each"
        )
    idle = (
        f"a server idle for {s.idle_seconds} s is stopped and its GPU given back (LABKIT_CLASS_IDLE_SECONDS)"
        if s.idle_seconds
        else "idle servers are never stopped (LABKIT_CLASS_IDLE_SECONDS=0)"
    )
    on = (
        ", ".join(f"{g.index}{' (reserved)' if g.uuid in gpus.reserved else ''}" for g in gpus.gpus)
        or "none seen by NVML (learners read the shipped recordings: recorded mode)"
    )
    return "\n".join(
        f"labkit class: {line}"
        for line in (
            f"learners open {url_text(s)}",
            who,
            accounts,
            idle,
            f"GPUs: {on}; shared recording: {s.folder}",
        )
    )


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _give_gpu(gpus: spread.Spread):
    def pre_spawn_hook(spawner) -> None:
        gpu = gpus.assign(spawner.user.name)
        spawner.environment = {**spawner.environment, **spread.environment(gpu, of=len(gpus.gpus))}
        where = "no GPU (NVML sees none)" if gpu is None else f"GPU {gpu.index} ({gpu.uuid})"
        spawner.log.info("labkit class: %s gets %s", spawner.user.name, where)

    return pre_spawn_hook


def _take_gpu_back(gpus: spread.Spread):
    def post_stop_hook(spawner) -> None:
        gpus.release(spawner.user.name)

    return post_stop_hook


def url_text(s: Settings) -> str:
    """The address learners open: the hub's address, or this host's reachable one.

    Args:
        s: the class's `Settings`.

    Returns:
        The URL.
    """
    host = s.ip if s.ip not in ("", "0.0.0.0", "::") else reachable_address()
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if s.tls_cert else 'http'}://{host}:{s.port}/"


def reachable_address() -> str:
    """This host's address on the interface its default route leaves by; else its name.

    Returns:
        An IPv4 address (read from the kernel's routing table, no packet sent), or the host name.
    """
    try:
        with open("/proc/net/route") as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
        iface = next(r[0] for r in rows if len(r) > 2 and r[1] == "00000000")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(
                sock.fileno(), 0x8915, struct.pack("256s", iface[:15].encode())
            )  # SIOCGIFADDR
        return socket.inet_ntoa(packed[20:24])
    except (OSError, StopIteration):
        return socket.getfqdn() or "localhost"


# ---- each learner's server ------------------------------------------------------------------------
def copy_lessons(into: Path, *, source: Path = ROOT / "notebooks") -> List[str]:
    """Copy every lesson a learner's folder lacks; a learner's edits are kept.

    Args:
        into: the learner's lessons folder.
        source: where the lessons come from.

    Returns:
        The names copied.
    """
    into.mkdir(parents=True, exist_ok=True)
    copied = []
    for nb in sorted(source.glob("*.ipynb")):
        target = into / nb.name
        if not target.exists():
            shutil.copyfile(nb, target)
            copied.append(nb.name)
    return copied


def warm_once(*, marker: Path) -> Optional[str]:
    """Run ``python -m labkit warm-kernels`` unless it ran already in this environment with a live GPU.

    Args:
        marker: the file that says it ran for this Python, labkit version and CuPy kernel cache.

    Returns:
        Its last line; None when it had run.
    """
    key = json.dumps([sys.executable, __version__, os.environ.get("CUPY_CACHE_DIR", "~/.cupy/kernel_cache")])
    try:
        if json.loads(marker.read_text()).get("environment") == key:
            return None
    except (OSError, ValueError, AttributeError):
        pass
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "warm-kernels"], capture_output=True, text=True, check=False
    )
    last = (done.stdout.strip().splitlines() or [done.stderr.strip()])[-1:] or [""]
    if done.returncode == 0 and "recorded mode" not in done.stdout:
        write_atomic(marker, json.dumps({"environment": key}).encode())
    return last[0]


def main_learner_server(argv: List[str]) -> int:
    """``python -m labkit class server [ARGS]``: what JupyterHub starts for each learner.

    It copies the lessons the learner lacks, warms CuPy's kernels once, then runs
    ``jupyterhub-singleuser ARGS`` in this process.

    Args:
        argv: the arguments for ``jupyterhub-singleuser``.

    Returns:
        Nothing: the process becomes the server.
    """
    lessons = Path(os.environ.get("LABKIT_CLASS_LESSONS", f"~/{LESSONS_DIR}")).expanduser()
    copied = copy_lessons(lessons)
    print(f"labkit class: {len(copied)} lessons copied into {lessons}", flush=True)

    said = warm_once(marker=localcache.cache_root() / "warm-kernels.json")
    print(f"labkit class: {said or 'warm-kernels ran before in this environment'}", flush=True)
    os.chdir(lessons)
    sockets = kernel_sockets(os.environ.get("JUPYTERHUB_USER", ""))
    # by module, not by the jupyterhub-singleuser script: a learner environment has no scripts
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub.singleuser", *argv, *sockets])
    return 0  # not reached


def kernel_socket_folder(user: str, root: Optional[str] = None) -> Path:
    """The runtime folder `kernel_sockets` gives a learner's kernels.

    Args:
        user: the learner's name.
        root: where it goes; default the system's temporary folder.

    Returns:
        ``<root>/labkit-<uid>-<first 8 hex digits of the name's SHA-1>``.
    """
    tag = hashlib.sha1(user.encode()).hexdigest()[:8]
    return Path(root or tempfile.gettempdir()) / f"labkit-{os.getuid()}-{tag}"


def kernel_sockets(user: str, root: Optional[str] = None) -> List[str]:
    """Have this learner's kernels use Unix sockets in a short private folder of their own.

    A socket's path must fit in about 107 bytes, and a kernel's lies in Jupyter's runtime folder
    (``~/.local/share/jupyter/runtime`` by default, deep in a learner's home), so the runtime
    folder becomes ``<temp>/labkit-<uid>-<8 hex digits of the user>`` (``JUPYTER_RUNTIME_DIR``),
    made with mode 0700.

    Args:
        user: the learner's name (``JUPYTERHUB_USER``).
        root: where the folder goes; default the system's temporary folder.

    Returns:
        The server's extra arguments (``--KernelManager.transport=ipc``); none, and TCP as before,
        when that folder exists and is not this account's own, private folder.
    """
    folder = kernel_socket_folder(user, root)
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return []
    os.environ["JUPYTER_RUNTIME_DIR"] = str(folder)
    return ["--KernelManager.transport=ipc"]


def main_gpus(folder: Optional[str] = None) -> int:
    """``python -m labkit class gpus``: who holds which GPU of the host, and since when.

    Args:
        folder: the class folder; default the settings'.

    Returns:
        The exit status.
    """
    environ = dict(os.environ, **({"LABKIT_CLASS_DIR": folder} if folder else {}))
    s = settings(None, environ)
    record = s.folder / HUB_DIR / "gpus.json"
    if not record.exists():
        print(f"labkit class: no GPU given out yet ({record} does not exist)")
        return 0
    table = json.loads(record.read_text()).get("learners", {})
    for line in gpu_lines(table, spread.host_gpus() if s.gpus is None else spread.as_gpus(s.gpus)):
        print(line)
    return 0


def gpu_lines(table: Dict[str, dict], gpus: list) -> List[str]:
    """Who holds which GPU, one line per GPU (the host's first, then any only the record names).

    Args:
        table: the spread's record, learner -> ``gpu`` (UUID), ``running``, ``given_at``.
        gpus: the host's `labkit.gpu.host.spread.HostGPU` s.

    Returns:
        ``GPU 0 (GPU-...): ada since 2026-...; bob since ...`` or ``GPU 1 (GPU-...): free``, then
        the learners whose servers stopped (their GPU given back).
    """
    names = {g.uuid: f"GPU {g.index} ({g.uuid})" for g in gpus}
    for uuid in sorted({e["gpu"] for e in table.values()} - set(names)):
        names[uuid] = uuid  # a GPU the record names that NVML does not list (now)
    lines = []
    for uuid, label in names.items():
        holders = sorted(
            (e["given_at"], n) for n, e in table.items() if e["gpu"] == uuid and e.get("running")
        )
        held = "; ".join(f"{n} since {at}" for at, n in holders)
        lines.append(f"{label}: {held or 'free'}")
    stopped = sorted(n for n, e in table.items() if not e.get("running"))
    if stopped:
        lines.append(f"stopped (GPU given back): {', '.join(stopped)}")
    return lines
