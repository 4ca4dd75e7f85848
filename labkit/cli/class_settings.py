"""What a teacher may set for a class on JupyterHub, each value checked before the hub starts.

Every setting is an environment variable ``LABKIT_CLASS_<NAME>`` (`SETTINGS`), or
``c.LabkitClass.<name>`` in a configuration of one's own that loads the shipped one. `settings`
reads them all and checks every value; it reports every mistake at once (`BadSettings`: one line
per mistake, ``python -m labkit class`` prints them and exits 2), including a ``LABKIT_CLASS_*``
variable that is no setting (a typo would otherwise be ignored).
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import LabkitError

#: variables a learner's server is given (not a teacher's settings)
INTERNAL = ("LABKIT_CLASS_GPU", "LABKIT_CLASS_LESSONS")
#: a learner's name as a Unix account name takes it (JupyterHub lower-cases names at login)
NAME = re.compile(r"^[a-z_][a-z0-9_.-]*$")
#: what `LABKIT_CLASS_OPEN` may say
OPEN_VALUES = {"no": False, "anyone": True}


class BadSettings(LabkitError):
    """One or more settings are wrong; ``lines`` says each mistake in one line.

    Args:
        lines: one line per mistake, each naming the variable, its value and the rule.
    """

    def __init__(self, lines: List[str]):
        self.lines = list(lines)
        super().__init__("; ".join(self.lines))


def _text(value) -> str:
    return str(value).strip()


def _words(value) -> List[str]:
    if isinstance(value, str):
        return [w for w in value.replace(",", " ").split() if w]
    return [str(v) for v in value]


def _path(value) -> Path:
    text = _text(value)
    if not text:
        raise ValueError("must be a folder's path")
    return Path(text).expanduser().absolute()


def _optional_path(value) -> Optional[Path]:
    return _path(value) if _text(value) else None


def _ip(value) -> str:
    text = _text(value)
    if text:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            raise ValueError(
                "must be an IP address of this host, e.g. 0.0.0.0 or 10.1.2.3 (empty: every one)"
            )
    return text


def _port(value) -> int:
    try:
        port = int(_text(value))
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise ValueError("must be a port number (1-65535)")
    return port


def _pins(value) -> Dict[str, str]:
    if isinstance(value, dict):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = [tuple(w.split("=", 1)) for w in _words(value)]
        if any(len(p) != 2 or not all(p) for p in pairs):
            raise ValueError("must be name=GPU pairs, e.g. 'ada=0,alan=3'")
    for _, ref in pairs:
        _gpu_ref(ref)
    return dict(pairs)


def _gpu_ref(ref: str) -> str:
    if not (ref.isdigit() or ref.startswith(("GPU-", "MIG-"))):
        raise ValueError(f"{ref!r} is not a GPU: give its index (0, 1, ...) or its UUID (GPU-...)")
    return ref


def _gpus(value) -> List[str]:
    return [_gpu_ref(w) for w in _words(value)]


def _names(value) -> List[str]:
    names = [w.lower() for w in _words(value)]
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise ValueError(f"{', '.join(map(repr, bad))}: not a name (letters, digits, '_', '-', '.')")
    return names


def _open(value) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(value).lower()
    if text not in OPEN_VALUES:
        raise ValueError(
            "must be 'no' (only the learners in learners.txt log in) or 'anyone' "
            "(whoever reaches the hub makes an account)"
        )
    return OPEN_VALUES[text]


def _seconds(value) -> int:
    try:
        n = int(_text(value))
    except ValueError:
        n = -1
    if n != 0 and n < 5:
        raise ValueError("must be seconds: 0 (never stop idle servers) or at least 5")
    return n


def _prefix(value) -> str:
    text = _text(value)
    if not re.match(r"^[a-z_][a-z0-9_-]{0,15}$", text):
        raise ValueError("must start an account name: lower-case letters, digits, '_', '-', at most 16")
    return text


#: setting -> (environment variable, default, parser: text or a configured value -> the value)
SETTINGS: Dict[str, Tuple[str, str, Callable]] = {
    "folder": ("LABKIT_CLASS_DIR", "/srv/labkit-class", _path),
    "ip": ("LABKIT_CLASS_IP", "", _ip),
    "port": ("LABKIT_CLASS_PORT", "8000", _port),
    "open": ("LABKIT_CLASS_OPEN", "no", _open),
    "admins": ("LABKIT_CLASS_ADMINS", "", _names),
    "pins": ("LABKIT_CLASS_PINS", "", _pins),
    "reserved": ("LABKIT_CLASS_RESERVED", "", _gpus),
    "idle_seconds": ("LABKIT_CLASS_IDLE_SECONDS", "1800", _seconds),
    "tls_cert": ("LABKIT_CLASS_TLS_CERT", "", _optional_path),
    "tls_key": ("LABKIT_CLASS_TLS_KEY", "", _optional_path),
    "prefix": ("LABKIT_CLASS_ACCOUNT_PREFIX", "jupyter-", _prefix),
    "homes": ("LABKIT_CLASS_HOMES", "/home", _path),
    "env": ("LABKIT_CLASS_ENV", "/opt/labkit-class", _path),
    "python": ("LABKIT_CLASS_PYTHON", "", _optional_path),
}


@dataclass
class Settings:
    """A class's settings (`SETTINGS` names each one's environment variable).

    Attributes:
        folder: the class folder (the shared recording, the hub's files, learners.txt).
        ip: the address the hub listens on ("" for every interface).
        port: the hub's port.
        open: True when anyone who reaches the hub may make an account (``LABKIT_CLASS_OPEN=anyone``);
            False (the default) lets in only the names in learners.txt and the admins.
        admins: hub administrators.
        pins: learner -> GPU index or UUID that learner always gets.
        reserved: GPUs given only to learners pinned to them.
        idle_seconds: a server idle this long, in seconds, is stopped (its GPU given back); 0: never.
        tls_cert: the hub's TLS certificate (PEM); None for plain HTTP.
        tls_key: its private key.
        prefix: as root, learner ``ada`` runs as the Unix account ``<prefix>ada``, which the hub makes.
        homes: as root, where those accounts' homes go.
        env: as root, where ``python -m labkit class start`` builds the learner environment when
            learners cannot run this one.
        python: the interpreter learners' servers run; None: this one.
        gpus: the host's GPUs; None asks NVML (`labkit.gpu.host.spread.host_gpus`).
        as_root: whether each learner has their own account (default: the hub runs as root).
    """

    folder: Path
    ip: str = ""
    port: int = 8000
    open: bool = False
    admins: List[str] = field(default_factory=list)
    pins: Dict[str, str] = field(default_factory=dict)
    reserved: List[str] = field(default_factory=list)
    idle_seconds: int = 1800
    tls_cert: Optional[Path] = None
    tls_key: Optional[Path] = None
    prefix: str = "jupyter-"
    homes: Path = Path("/home")
    env: Path = Path("/opt/labkit-class")
    python: Optional[Path] = None
    gpus: Optional[list] = None
    as_root: bool = False


def settings(section=None, environ=None) -> Settings:
    """The class's `Settings`, every value checked.

    Each setting comes from ``section``, else the environment, else the default in `SETTINGS`.

    Args:
        section: ``c.LabkitClass``, a mapping; None for none.
        environ: the environment; default ``os.environ``.

    Returns:
        The `Settings`; `BadSettings` naming every mistake, one line each.
    """
    section = dict(section or {})
    environ = os.environ if environ is None else environ
    values, mistakes = {}, []
    for name, (var, default, parse) in SETTINGS.items():
        if name in section:
            raw, where = section[name], f"c.LabkitClass.{name}"
        else:
            raw, where = environ.get(var, "").strip() or default, var
        try:
            values[name] = parse(raw)
        except ValueError as exc:
            mistakes.append(f"{where}={_text(raw)!r}: {exc}")
    known = {var for var, _, _ in SETTINGS.values()} | set(INTERNAL)
    for var in sorted(v for v in environ if v.startswith("LABKIT_CLASS_") and v not in known):
        near = difflib.get_close_matches(var, sorted(known), n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        mistakes.append(f"{var}: no such setting{hint}; the settings are listed in class/README.md")
    tls = [values.get("tls_cert", 0), values.get("tls_key", 0)]
    if 0 not in tls and tls.count(None) == 1:
        mistakes.append("LABKIT_CLASS_TLS_CERT and LABKIT_CLASS_TLS_KEY: give both (HTTPS) or neither")
    elif 0 not in tls and None not in tls:
        for name, path in zip(("tls_cert", "tls_key"), tls):
            if not os.access(path, os.R_OK):
                mistakes.append(
                    f"{SETTINGS[name][0]}={str(path)!r}: no such file, or this account cannot read it"
                )
    if mistakes:
        raise BadSettings(mistakes)
    return Settings(
        **values,
        gpus=section.get("gpus"),
        as_root=bool(section.get("as_root", os.geteuid() == 0)),
    )


def learners_file(folder: Path) -> Path:
    """The list of who may log in (one name a line, ``#`` starts a comment), in a class folder.

    Args:
        folder: the class folder.

    Returns:
        The path of ``learners.txt`` there.
    """
    return folder / "learners.txt"


def allowed(folder: Path) -> Optional[List[str]]:
    """Who learners.txt lets in.

    Args:
        folder: the class folder.

    Returns:
        The names, lower-cased; None when there is no such file. `BadSettings` for a name that
        is not one (a space inside it, say), one line per name with its line number.
    """
    try:
        text = learners_file(folder).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    names, mistakes = [], []
    for n, line in enumerate(text.splitlines(), 1):
        for word in _words(line.split("#", 1)[0]):
            if NAME.match(word.lower()):
                names.append(word.lower())
            else:
                mistakes.append(
                    f"{learners_file(folder)}:{n}: {word!r} is not a name (letters, digits, '_', '-', '.')"
                )
    if mistakes:
        raise BadSettings(mistakes)
    return names
