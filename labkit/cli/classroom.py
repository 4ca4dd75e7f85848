"""A class on JupyterHub: the hub's configuration, the command each learner's server starts with,
and the teacher's view of who has which GPU.

``class/jupyterhub_config.py`` calls `configure`. It sets up one class folder (``LABKIT_CLASS_DIR``,
default ``/srv/labkit-class``) that holds:

    <folder>/                 the class's shared recording (`python -m labkit fill --into <folder>`)
    <folder>/hub/             the hub's database, cookie secret, passwords and GPU record (`HUB_DIR`)
    <folder>/gpu-locks/       one lock folder per GPU for every learner (`labkit.gpu.lock`)
    <folder>/learners/<name>  each learner's home, when learners share the hub's account
    <folder>/learners.txt     who may log in, one name a line (optional)

**Accounts.** Started as root, the hub logs learners in with their accounts on the host (PAM) and
starts each server as that account (JupyterHub's `LocalProcessSpawner`). Started as anyone else,
learners pick a password at their first login (`FirstUseAuthenticator`) and every server runs as
the user who started the hub, each in its own home under ``learners/``: learners are then not
isolated from each other or from that user's files (JupyterHub's `SimpleLocalProcessSpawner`).

**Each learner's server** gets one GPU (`labkit.gpu.spread`), the class's shared recording
(``LABKIT_SHARED_CACHE``) and the host's lock folder (``LABKIT_GPU_LOCK_DIR``), and starts with
`main_learner_server`: it copies the lessons it lacks into ``~/labkit-lessons``, runs
``python -m labkit warm-kernels`` once per environment, then becomes ``jupyterhub-singleuser``.
Its kernels talk to it over Unix sockets (`kernel_sockets`), not TCP ports: every learner's server
picks its kernels' ports on its own, and when a class starts at once two of them can pick the same
port, which the kernel then cannot bind on any restart: that learner's kernel is lost.

**Settings** come from the environment variables in `SETTINGS` (else the defaults there); a value
already set on the config object as ``c.LabkitClass.<name>`` when `configure` runs wins (a
configuration of one's own that sets them, then runs the shipped file; the hub test gives the
host's GPUs that way).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import InvalidSpec
from ..gpu import spread

#: the repository this labkit runs from (its notebooks/ are the lessons a learner gets)
ROOT = Path(__file__).resolve().parents[2]
#: the hub's own files, inside the class folder
HUB_DIR = "hub"
#: each learner's copy of the lessons, in their home
LESSONS_DIR = "labkit-lessons"
#: the lesson a learner's JupyterLab opens first
FIRST_LESSON = "00_start_here.ipynb"
#: setting -> (environment variable, default)
SETTINGS = {
    "folder": ("LABKIT_CLASS_DIR", "/srv/labkit-class"),
    "ip": ("LABKIT_CLASS_IP", ""),
    "port": ("LABKIT_CLASS_PORT", "8000"),
    "pins": ("LABKIT_CLASS_PINS", ""),
    "reserved": ("LABKIT_CLASS_RESERVED", ""),
    "admins": ("LABKIT_CLASS_ADMINS", ""),
}


@dataclass
class Settings:
    """What a teacher may set (`SETTINGS` names each one's environment variable).

    Attributes:
        folder: the class folder (see the module docstring).
        ip: the address the hub listens on ("" for every interface).
        port: the hub's port.
        pins: learner -> GPU index or UUID (``LABKIT_CLASS_PINS="ada=0,alan=GPU-..."``).
        reserved: GPUs given only to learners pinned to them (``LABKIT_CLASS_RESERVED="7"``).
        admins: hub administrators (``LABKIT_CLASS_ADMINS="teacher"``).
        gpus: the host's GPUs; None asks NVML (`labkit.gpu.spread.host_gpus`).
        as_root: whether learners have their own accounts (default: the hub runs as root).
    """

    folder: Path
    ip: str = ""
    port: int = 8000
    pins: Dict[str, str] = field(default_factory=dict)
    reserved: List[str] = field(default_factory=list)
    admins: List[str] = field(default_factory=list)
    gpus: Optional[list] = None
    as_root: bool = False


def _words(text: str) -> List[str]:
    return [w for w in text.replace(",", " ").split() if w]


def settings(section=None, environ=None) -> Settings:
    """The class's `Settings`.

    Each setting comes from ``section``, else the environment, else the defaults in `SETTINGS`.

    Args:
        section: ``c.LabkitClass``, a mapping; None for none.
        environ: the environment; default ``os.environ``.

    Returns:
        The `Settings`; `InvalidSpec` for pins or a port that do not parse.
    """
    section = dict(section or {})
    environ = os.environ if environ is None else environ

    def pick(name):
        if name in section:
            return section[name]
        var, default = SETTINGS[name]
        return environ.get(var, "").strip() or default

    pins = pick("pins")
    if isinstance(pins, str):
        pairs = [w.split("=", 1) for w in _words(pins)]
        if any(len(p) != 2 for p in pairs):
            raise InvalidSpec("LABKIT_CLASS_PINS", pins, "must be name=GPU pairs, e.g. 'ada=0,alan=3'")
        pins = dict(pairs)
    listed = {k: pick(k) for k in ("reserved", "admins")}
    listed = {k: _words(v) if isinstance(v, str) else [str(x) for x in v] for k, v in listed.items()}
    try:
        port = int(pick("port"))
    except ValueError:
        raise InvalidSpec("LABKIT_CLASS_PORT", pick("port"), "must be a port number") from None
    return Settings(
        folder=Path(str(pick("folder"))).expanduser().resolve(),
        ip=str(pick("ip")),
        port=port,
        pins={str(k): str(v) for k, v in pins.items()},
        reserved=listed["reserved"],
        admins=listed["admins"],
        gpus=section.get("gpus"),
        as_root=bool(section.get("as_root", os.geteuid() == 0)),
    )


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


def learners_file(folder: Path) -> Path:
    """The optional list of who may log in (one name a line, ``#`` starts a comment), in a class folder."""
    return folder / "learners.txt"


def allowed(folder: Path) -> Optional[set]:
    """Who may log in.

    Args:
        folder: the class folder.

    Returns:
        The names in `learners_file`; None when there is no such file (anyone may log in).
    """
    try:
        text = learners_file(folder).read_text()
    except FileNotFoundError:
        return None
    return {w for line in text.splitlines() for w in _words(line.split("#", 1)[0])}


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
    """The class's `labkit.gpu.spread.Spread`.

    Args:
        s: the class's settings.

    Returns:
        A `Spread` with its record in the hub folder, the host's GPUs (``s.gpus``, or NVML's), the
        teacher's pins and reserved GPUs.
    """
    gpus = spread.host_gpus() if s.gpus is None else s.gpus
    return spread.Spread(s.folder / HUB_DIR / "gpus.json", gpus=gpus, pins=s.pins, reserved=s.reserved)


def learner_environment(s: Settings, locks: Path) -> Dict[str, str]:
    """What every learner's server gets, whichever GPU it is given.

    Args:
        s: the class's settings.
        locks: the class's GPU lock folder.

    Returns:
        Environment variable -> value.
    """
    bin_dir = str(Path(sys.executable).parent)
    return {
        "LABKIT_SHARED_CACHE": str(s.folder),
        "LABKIT_GPU_LOCK_DIR": str(locks),
        "LABKIT_CLASS_LESSONS": f"~/{LESSONS_DIR}",
        "PATH": os.pathsep.join([bin_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
    }


def configure(c) -> Settings:
    """Configure JupyterHub for the class (see the module docstring).

    Args:
        c: JupyterHub's config object.

    Returns:
        The `Settings` used.
    """
    s = settings(c.get("LabkitClass"))
    where = _folders(s)
    gpus = gpu_spread(s)
    c.JupyterHub.bind_url = f"http://{s.ip}:{s.port}"
    c.JupyterHub.db_url = f"sqlite:///{where['hub'] / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(where["hub"] / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(where["hub"] / "jupyterhub.pid")
    c.ConfigurableHTTPProxy.command = [proxy_command()]
    c.ConfigurableHTTPProxy.pid_file = str(where["hub"] / "proxy.pid")
    if s.as_root:
        c.JupyterHub.authenticator_class = "pam"
        c.JupyterHub.spawner_class = "localprocess"
    else:
        c.JupyterHub.authenticator_class = "firstuseauthenticator"
        c.FirstUseAuthenticator.dbm_path = str(where["hub"] / "passwords.dbm")
        c.JupyterHub.spawner_class = "simple"
        c.SimpleLocalProcessSpawner.home_dir_template = str(where["learners"] / "{username}")
        if os.geteuid() == 0:  # told to share the hub's account, and that account is root
            c.Spawner.args = ["--ServerApp.allow_root=True"]
    names = allowed(s.folder)
    if names is None:
        c.Authenticator.allow_all = True
    else:
        c.Authenticator.allowed_users = names | set(s.admins)
    c.Authenticator.admin_users = set(s.admins)
    c.Spawner.cmd = [sys.executable, "-m", "labkit", "class", "server"]
    c.Spawner.notebook_dir = f"~/{LESSONS_DIR}"
    c.Spawner.default_url = f"/lab/tree/{FIRST_LESSON}"
    c.Spawner.environment = learner_environment(s, where["locks"])
    # a learner's first start compiles CuPy's kernels (warm-kernels) before the server answers
    c.Spawner.start_timeout = c.Spawner.http_timeout = 300
    c.Spawner.pre_spawn_hook = _give_gpu(gpus)
    c.Spawner.post_stop_hook = _take_gpu_back(gpus)
    print(start_text(s, gpus, names), flush=True)
    return s


def start_text(s: Settings, gpus: spread.Spread, names: Optional[set]) -> str:
    """What the hub says as it starts: the URL to hand out, who may log in, the GPUs.

    Args:
        s: the class's settings.
        gpus: the class's GPU spread.
        names: who may log in; None for anyone.

    Returns:
        One paragraph.
    """
    who = (
        "anyone who can reach it may make an account (list names in " + str(learners_file(s.folder)) + ")"
        if names is None
        else f"{len(names)} learners listed in {learners_file(s.folder)}"
    )
    accounts = (
        "each learner's server runs as their own account on this host"
        if s.as_root
        else "learners pick a password at their first login; every server runs as this account, "
        "so learners are not isolated from each other (start the hub as root for separate accounts)"
    )
    on = (
        ", ".join(f"{g.index}{' (reserved)' if g.uuid in gpus.reserved else ''}" for g in gpus.gpus)
        or "none seen by NVML (learners run in recorded mode)"
    )
    return (
        f"labkit class: learners open {url_text(s)}; {who}; {accounts}. GPUs: {on}. "
        f"Shared recording: {s.folder}"
    )


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
    """The address learners open, for the hub's first log line."""
    host = s.ip or _hostname()
    return f"http://{host}:{s.port}/"


def _hostname() -> str:
    import socket

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
    from .. import __version__

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
        from ..store.localcache import write_atomic

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
    from ..store import localcache

    said = warm_once(marker=localcache.cache_root() / "warm-kernels.json")
    print(f"labkit class: {said or 'warm-kernels ran before in this environment'}", flush=True)
    os.chdir(lessons)
    server = str(Path(sys.executable).parent / "jupyterhub-singleuser")
    os.execv(server, [server, *argv, *kernel_sockets(os.environ.get("JUPYTERHUB_USER", ""))])
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
    """``python -m labkit class gpus``: which learner has which GPU, from the class's record.

    Args:
        folder: the class folder; default the settings'.

    Returns:
        The exit status.
    """
    s = settings({"folder": folder} if folder else None)
    record = s.folder / HUB_DIR / "gpus.json"
    if not record.exists():
        print(f"labkit class: no GPU given out yet ({record} does not exist)")
        return 0
    table = json.loads(record.read_text()).get("learners", {})
    by_gpu: Dict[str, List[str]] = {}
    for name, e in sorted(table.items()):
        by_gpu.setdefault(e["gpu"], []).append(name + ("" if e.get("running") else " (stopped)"))
    for uuid, names in sorted(by_gpu.items()):
        print(f"{uuid}: {len(names)} learners: {', '.join(names)}")
    return 0
