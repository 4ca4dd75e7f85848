"""Before a class hub starts: everything a learner's server needs, checked, and (as root) a
learner environment that learners' accounts can run.

`check` says, one line per problem and each naming its fix, what would stop learners: the class
folder not writable, JupyterHub's proxy missing, a pin or reservation naming no GPU of the host,
an account name too long, and (as root) an interpreter, packages or lessons a learner's account
cannot run or read. It tries the last for real: it runs the interpreter as the account
``nobody``, imports what a learner's server imports and reads the first lesson.

**The learner environment** (`learner_python`). As root, when ``nobody`` cannot run this
interpreter (a venv whose Python lies in a private home, say), the environment is built in the
shared place ``LABKIT_CLASS_ENV`` (``/opt/labkit-class``), as The Littlest JupyterHub builds its
user environment under /opt: a venv made from a Python of the same version that every account can
run (the system's ``python3.X``), which reads the packages and the workbook where learners can
read them and from copies beside it where they cannot (``copies/``, synchronised at each start:
only changed files are copied). The teacher's checkout and home stay as they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

from ..errors import InvalidSpec
from ..gpu.host import spread
from ..store.localcache import write_atomic
from .class_settings import BadSettings, Settings, allowed

#: the account a learner's access is tried as
PROBE_ACCOUNT = "nobody"
#: what a learner's server imports (`labkit.cli.classroom.main_learner_server`, its kernels)
PROBE_CODE = (
    "import json, pathlib, jupyterhub.singleuser, ipykernel, labkit.cli.classroom as c; "
    "lesson = sorted((c.ROOT / 'notebooks').glob('*.ipynb'))[0]; lesson.read_bytes(); "
    "print(json.dumps(str(c.ROOT)))"
)
#: the parts of the checkout a learner's server reads
WORKBOOK_PARTS = ("labkit", "notebooks", "data", "docs", "pyproject.toml")
#: Unix account names are at most this long
ACCOUNT_MAX = 32


def _private_folder(path: Path) -> Optional[Path]:
    """The first folder on ``path``'s way that other accounts cannot enter (by its mode bits)."""
    for folder in [*reversed(Path(path).parents)]:
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return folder
        except OSError:
            return folder
    return None


def _others_can_read(path: Path) -> bool:
    """Whether other accounts can enter every folder up to ``path`` and read it (mode bits)."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return False
    return _private_folder(path) is None and bool(mode & stat.S_IROTH) and bool(mode & stat.S_IXOTH)


def _as_probe(argv: List[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        user=PROBE_ACCOUNT,
        group=pwd_group(PROBE_ACCOUNT),
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pwd_group(account: str) -> int:
    """The primary group id of an account.

    Args:
        account: the account's name.

    Returns:
        The group id.
    """
    return pwd.getpwnam(account).pw_gid


def probe(python: Path) -> Optional[str]:
    """Whether a learner's account can run ``python`` for a learner's server.

    Args:
        python: the interpreter.

    Returns:
        None when it can; else why not, in one clause.
    """
    try:
        done = _as_probe([str(python), "-c", PROBE_CODE])
    except PermissionError:
        where = _private_folder(Path(python)) or _private_folder(Path(python).resolve())
        why = f"{where} is private to its owner" if where else "it is not executable by others"
        return f"a learner's account cannot run {python} ({why})"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a learner's account cannot run {python} ({type(exc).__name__}: {exc})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python}, run by a learner's account, cannot import or read what a server needs ({last})"
    return None


def _same_version_pythons() -> List[Path]:
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = [Path(d) / name for d in ("/usr/bin", "/usr/local/bin", "/bin")]
    return [p for p in found if p.is_file() and _others_can_read(p.parent)]


def _sync(src: Path, dst: Path) -> int:
    """Make ``dst`` a copy of ``src`` that every account can read; only changed files are copied.

    Returns:
        How many files were copied.
    """
    copied, seen = 0, set()
    if src.is_file():
        pairs = [(src, dst)]
    else:
        pairs = []
        for folder, dirs, files in os.walk(src):
            rel = Path(folder).relative_to(src)
            (dst / rel).mkdir(parents=True, exist_ok=True)
            os.chmod(dst / rel, 0o755)
            seen.add(dst / rel)
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            pairs += [(Path(folder) / f, dst / rel / f) for f in files]
    for a, b in pairs:
        seen.add(b)
        sa = a.lstat()
        if stat.S_ISLNK(sa.st_mode):
            with contextlib.suppress(FileNotFoundError):
                if os.readlink(b) == os.readlink(a):
                    continue
                b.unlink()
            os.symlink(os.readlink(a), b)
            continue
        with contextlib.suppress(FileNotFoundError):
            sb = b.stat()
            if sb.st_size == sa.st_size and int(sb.st_mtime) == int(sa.st_mtime):
                continue
        b.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(a, b)
        os.chmod(b, 0o755 if sa.st_mode & stat.S_IXUSR else 0o644)
        copied += 1
    if src.is_dir():
        for folder, dirs, files in os.walk(dst, topdown=False):
            for p in [Path(folder) / n for n in files + dirs]:
                if p not in seen and "__pycache__" not in p.parts:
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return copied


def _entries(root: Path) -> List[Path]:
    """What this interpreter imports from beyond its standard library: the workbook first."""
    base = {Path(sys.base_prefix).resolve(), Path(sys.base_exec_prefix).resolve()}
    out = [root]
    for p in sys.path:
        path = Path(p or ".").resolve()
        if p and path.is_dir() and not any(b in (path, *path.parents) for b in base) and path not in out:
            out.append(path)
    return out


def build(env: Path, *, root: Path) -> Path:
    """The learner environment in ``env`` (see the module docstring), made or brought up to date.

    Args:
        env: the shared folder (``LABKIT_CLASS_ENV``).
        root: the workbook's checkout.

    Returns:
        Its interpreter; `InvalidSpec` when this host has no Python of this version that every
        account can run.
    """
    bases = _same_version_pythons()
    if not bases:
        v = f"{sys.version_info.major}.{sys.version_info.minor}"
        raise InvalidSpec(
            "LABKIT_CLASS_PYTHON",
            sys.executable,
            f"learners cannot run this interpreter and the host has no python{v} they can: "
            f"install one (Debian, Ubuntu: apt-get install python{v}-venv), or set LABKIT_CLASS_PYTHON "
            "to a Python with labkit installed that every account can run",
        )
    env.mkdir(parents=True, exist_ok=True)
    os.chmod(env, 0o755)
    fd = os.open(env / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # two starts at once build it one after the other
        venv = env / "venv"
        python = venv / "bin" / "python3"
        if not python.exists():
            subprocess.run([str(bases[0]), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = Path(
            subprocess.run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True, capture_output=True, text=True,
            ).stdout.strip()
        )  # fmt: skip
        lines, copies = [], []
        for i, entry in enumerate(_entries(root)):
            where = entry
            if not _others_can_read(entry):
                where = env / "copies" / f"{i}-{entry.name}"
                parts = [entry / p for p in WORKBOOK_PARTS] if entry == root else [entry]
                for part in parts:
                    if part.exists():
                        _sync(part, where / part.name if entry == root else where)
                copies.append(str(entry))
            is_site = entry.name in ("site-packages", "dist-packages")
            lines.append(f"import site; site.addsitedir({str(where)!r})" if is_site else str(where))
        write_atomic(site / "00-labkit-class.pth", ("\n".join(lines) + "\n").encode())
        os.chmod(site / "00-labkit-class.pth", 0o644)
        made = dict(python=str(bases[0]), teacher=sys.executable, entries=lines, copied=copies)
        write_atomic(env / "labkit-env.json", (json.dumps(made, indent=1) + "\n").encode())
        os.chmod(env / "labkit-env.json", 0o644)
    finally:
        os.close(fd)
    return python


def learner_python(s: Settings, *, root: Path, make: bool = True) -> Path:
    """The interpreter learners' servers run.

    Args:
        s: the class's settings.
        root: the workbook's checkout.
        make: as root, build the learner environment when learners cannot run this interpreter.

    Returns:
        ``LABKIT_CLASS_PYTHON`` if set; else this interpreter when learners share the hub's account
        or can run it; else the learner environment's (`build`).
    """
    if s.python is not None:
        return s.python
    if not s.as_root or os.geteuid() != 0 or not make or probe(Path(sys.executable)) is None:
        return Path(sys.executable)
    return build(s.env, root=root)


def check(s: Settings, *, python: Path, proxy) -> List[str]:
    """What would stop a learner's server, one line per problem, each naming its fix.

    Args:
        s: the class's settings.
        python: the interpreter learners' servers run.
        proxy: a callable that returns JupyterHub's proxy command (`InvalidSpec` when missing).

    Returns:
        The lines; empty when the class can start.
    """
    lines = []
    try:
        s.folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=s.folder, prefix=".labkit-check-"):
            pass
    except OSError as exc:
        lines.append(
            f"LABKIT_CLASS_DIR={str(s.folder)!r}: this account cannot write the class folder "
            f"({exc.strerror}): choose one it can, e.g. `make hub CLASS_DIR=~/labkit-class`"
        )
    try:
        proxy()
    except InvalidSpec as exc:
        lines.append(exc.rule)
    try:
        gpus = spread.host_gpus() if s.gpus is None else s.gpus
        spread.Spread(s.folder / "hub" / "gpus.json", gpus=gpus, pins=s.pins, reserved=s.reserved)
    except InvalidSpec as exc:
        lines.append(
            f"{'LABKIT_CLASS_PINS' if exc.field.startswith('pins') else 'LABKIT_CLASS_RESERVED'}: {exc}"
        )
    try:
        names = (allowed(s.folder) or []) + s.admins
    except BadSettings as exc:
        lines += exc.lines
        names = s.admins
    if s.as_root:
        long = [n for n in names if len(s.prefix + n) > ACCOUNT_MAX]
        if long:
            lines.append(
                f"learners {', '.join(long)}: with the prefix {s.prefix!r} their account names exceed "
                f"{ACCOUNT_MAX} characters: shorten the names or LABKIT_CLASS_ACCOUNT_PREFIX"
            )
        if not shutil.which("useradd"):
            lines.append(
                "useradd is missing: the hub makes each learner's account with it (apt-get install passwd)"
            )
        if os.geteuid() == 0:
            why = probe(python)
            if why:
                fix = (
                    "set LABKIT_CLASS_PYTHON to one every account can run, or leave it unset: "
                    "`python -m labkit class start` then builds one in LABKIT_CLASS_ENV"
                    if s.python is not None
                    else "see class/README.md, 'Before class'"
                )
                lines.append(f"LABKIT_CLASS_PYTHON={str(python)!r}: {why}: {fix}")
    if s.tls_cert is not None and not s.tls_cert.is_file():
        lines.append(f"LABKIT_CLASS_TLS_CERT={str(s.tls_cert)!r}: not a file")
    return lines


def ports_free(ip: str, port: int) -> Optional[str]:
    """Whether the hub can listen on its port, and 127.0.0.1 on the next two (its own API and its proxy's).

    Args:
        ip: the address the hub listens on.
        port: its port.

    Returns:
        None when it can; else one line naming the fix.
    """
    for host, each in ((ip, port), ("127.0.0.1", port + 1), ("127.0.0.1", port + 2)):
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host or "", each))
            except OSError as exc:
                return (
                    f"LABKIT_CLASS_PORT={port}: the hub needs ports {port}-{port + 2} and cannot listen on "
                    f"{each} ({exc.strerror}): another hub? `python -m labkit class stop`, or another port"
                )
    return None
