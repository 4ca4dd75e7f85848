"""What this machine has (GPU, driver, CUDA, CuPy, cuDNN) and which mode labkit runs in.

``mode()`` is ``live`` when a CUDA GPU, CuPy and the cuDNN frontend with a loadable cuDNN backend
are all usable, else ``recorded`` (answers come from real GPU recordings in data/). The
environment variable ``LABKIT_MODE=live|recorded`` forces it; forcing live where it cannot run
raises `ModeError`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import re
import subprocess
import sys
import textwrap
import threading
from dataclasses import asdict, dataclass
from typing import Optional

from . import ceilings
from .errors import InvalidSpec, ModeError

MODES = ("live", "recorded")


@dataclass(frozen=True)
class Environment:
    """Facts about this machine. Missing pieces are None.

    Attributes:
        python: the Python version, e.g. "3.11.7".
        platform: the system and machine, e.g. "Linux x86_64".
        gpu_name: the first CUDA device's name.
        compute_capability: e.g. "9.0".
        gpu_memory_bytes: the device's memory, in bytes.
        driver_version: the newest CUDA version the driver supports, e.g. "12.8".
        cuda_runtime: the CUDA runtime's version.
        cupy_version: CuPy's version.
        cudnn_backend: the cuDNN library's version.
        cudnn_frontend: the cuDNN frontend's version.
        problem: why live mode is out; None when it works.
    """

    python: str
    platform: str
    gpu_name: Optional[str] = None
    compute_capability: Optional[str] = None
    gpu_memory_bytes: Optional[int] = None
    driver_version: Optional[str] = None
    cuda_runtime: Optional[str] = None
    cupy_version: Optional[str] = None
    cudnn_backend: Optional[str] = None
    cudnn_frontend: Optional[str] = None
    problem: Optional[str] = None

    def as_dict(self) -> dict:
        """The facts as a plain dict.

        Returns:
            Field name -> value.
        """
        return asdict(self)


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def gpu_label(name: Optional[str]) -> str:
    """The one name a GPU goes by on every chart, text and control.

    Its board in `labkit.ceilings` where the table knows the device (``NVIDIA H100 80GB HBM3`` ->
    ``H100 SXM``, ``NVIDIA H200`` -> ``H200 SXM``), else the device name without the vendor's
    (``NVIDIA GeForce RTX 3090`` -> ``GeForce RTX 3090``, ``Tesla T4`` -> ``T4``).

    Args:
        name: the CUDA device name (``cudaGetDeviceProperties``); None or empty for none.

    Returns:
        The name; "unknown GPU" without one.
    """
    if not name:
        return "unknown GPU"
    known = ceilings.for_gpu(name)
    return known.gpu if known else re.sub(r"^(NVIDIA|Tesla)\s+", "", str(name).strip()) or str(name)


def gpu_slug(name: Optional[str]) -> str:
    """A GPU's name as a file or folder name.

    ``NVIDIA H100 80GB HBM3`` -> ``h100-80gb-hbm3``, ``NVIDIA A100 80GB PCIe`` -> ``a100-80gb-pcie``,
    ``Tesla T4`` -> ``tesla-t4``.

    Args:
        name: the device name; None or empty for none.

    Returns:
        Lower-case words joined by hyphens, without the "nvidia-" prefix; ``gpu`` without a name.
    """
    s = re.sub(r"[^a-z0-9]+", "-", (name or "").lower()).strip("-")
    return re.sub(r"^nvidia-", "", s) or "gpu"


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver.

    Returns:
        True when its kernel module (``/proc/driver/nvidia``) or its user-space library
        (``libcuda.so.1``) is there.
    """
    if os.path.exists("/proc/driver/nvidia/version"):
        return True
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


#: one probe at a time: a caller waits for the one in flight (`probe_soon`) instead of starting another
_probe_lock = threading.RLock()
#: whether `probe_soon` has started its thread (once per process)
_probe_started = False
_probe_start_lock = threading.Lock()


def environment() -> Environment:
    """What this machine has, probed once (cached). Never raises.

    Returns:
        An `Environment`; its ``problem`` is the first reason found that live mode cannot run.
    """
    with _probe_lock:
        found = _probe()
        if found.problem and "Deadlock" in found.problem:  # an import raced another thread's: ask again
            _probe.cache_clear()
            found = _probe()
        return found


def probe_soon() -> None:
    """Start `environment`'s probe in a daemon thread, once per process, and return at once.

    The probe imports CuPy and the cuDNN frontend and initialises CUDA's driver (about 0.6 s on a
    GPU host, some of it outside the GIL). A lesson's first cell starts it as it reads
    ``lessons.banner`` (`labkit.session.first_use`), so the probe and the import of the banner's
    module overlap, and the banner, which needs the answer, waits for what is left of it. Nothing
    starts it at an import.
    """
    global _probe_started
    with _probe_start_lock:
        if _probe_started:
            return
        _probe_started = True
    threading.Thread(target=environment, daemon=True, name="labkit-environment").start()


@functools.lru_cache(maxsize=1)
def _probe() -> Environment:
    facts = dict(python=sys.version.split()[0], platform=f"{platform.system()} {platform.machine()}")
    problem = None
    try:
        import cudnn  # noqa: F401  # heavy: the cuDNN frontend loads cuDNN (works without a GPU)

        facts["cudnn_frontend"] = getattr(cudnn, "__version__", "unknown")
    except Exception as exc:  # ImportError, or a broken install
        problem = f"cudnn frontend not installed ({type(exc).__name__}: {exc})"
    try:
        import cupy  # heavy: CuPy, live only

        facts["cupy_version"] = cupy.__version__
        rt = cupy.cuda.runtime
        try:
            count = rt.getDeviceCount()
        except Exception as exc:
            count, problem = 0, problem or f"no CUDA device ({exc})"
        if count > 0:
            props = rt.getDeviceProperties(0)
            facts["gpu_name"] = (
                props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            )
            facts["compute_capability"] = f"{props['major']}.{props['minor']}"
            facts["gpu_memory_bytes"] = int(props["totalGlobalMem"])
            facts["driver_version"] = _cuda_version(rt.driverGetVersion())
            facts["cuda_runtime"] = _cuda_version(rt.runtimeGetVersion())
        elif problem is None:
            problem = "no CUDA device"
    except Exception as exc:
        problem = problem or f"CuPy not installed ({type(exc).__name__})"
    if facts.get("gpu_name") is None and not nvidia_driver_present():
        problem = "no NVIDIA GPU driver on this machine"  # the first cause: nothing else would help
    if "cudnn_frontend" in facts:
        try:
            import cudnn  # heavy: the cuDNN frontend loads cuDNN

            facts["cudnn_backend"] = cudnn.backend_version_string()
        except Exception as exc:
            problem = problem or f"cuDNN backend library not loadable ({exc})"
    if problem is None and facts.get("gpu_name") is None:
        problem = "no CUDA device"
    return Environment(problem=problem, **facts)


@dataclass(frozen=True)
class Mode:
    """The mode labkit runs in, and why.

    Attributes:
        name: "live" or "recorded".
        reason: why, e.g. the GPU and cuDNN, or what is missing for live mode.
        forced: whether LABKIT_MODE chose it.
    """

    name: str
    reason: str
    forced: bool = False

    @property
    def live(self) -> bool:
        """Whether this is live mode."""
        return self.name == "live"

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def mode() -> Mode:
    """The mode labkit runs in now; LABKIT_MODE is read on every call.

    Returns:
        A `Mode`: live when the GPU, CuPy and cuDNN all work (or LABKIT_MODE=live), else recorded.

    Raises:
        ModeError: LABKIT_MODE is not a mode, or forces live where it cannot run.
    """
    env = environment()
    want = os.environ.get("LABKIT_MODE", "").strip().lower()
    if want and want not in MODES:
        raise ModeError(f"LABKIT_MODE={want!r}: must be one of {', '.join(MODES)} (or unset)")
    if want == "recorded":
        return Mode("recorded", "forced by LABKIT_MODE=recorded", forced=True)
    if env.problem is None:
        return Mode("live", f"{env.gpu_name}, cuDNN {env.cudnn_backend}", forced=want == "live")
    if want == "live":
        raise ModeError(f"LABKIT_MODE=live but this machine cannot run live: {env.problem}")
    return Mode("recorded", env.problem)


def require_live(what: str = "this call") -> None:
    """Raise `ModeError` unless live mode is available.

    Args:
        what: the call that needs it, named in the error.
    """
    m = mode()
    if not m.live:
        raise ModeError(f"{what} needs a live GPU; labkit is in recorded mode: {m.reason}")


def doctor() -> str:
    """A readable report of this machine and the mode.

    ``python -m labkit doctor`` adds the recordings and this GPU's saved measurements.

    Returns:
        One "name: value" line per fact, the mode and what live mode still needs.
    """
    env = environment()
    gib = lambda b: f"{b / 2**30:.1f} GiB" if b else None  # noqa: E731
    rows = [
        ("python", env.python),
        ("platform", env.platform),
        ("GPU", f"{gpu_label(env.gpu_name)} (CUDA name: {env.gpu_name})" if env.gpu_name else None),
        ("compute capability", env.compute_capability),
        ("GPU memory", gib(env.gpu_memory_bytes)),
        ("CUDA driver", env.driver_version),
        ("CUDA runtime", env.cuda_runtime),
        ("CuPy", env.cupy_version),
        ("cuDNN backend", env.cudnn_backend),
        ("cuDNN frontend", env.cudnn_frontend),
    ]
    try:
        m = str(mode())
    except ModeError as exc:
        m = f"error: {exc}"
    rows.append(("mode", m))
    rows.append(("to go live", to_go_live()))

    lines = [
        textwrap.fill(
            f"{k:>20}: {v if v is not None else '-'}", 100, subsequent_indent=" " * 22, break_long_words=False
        )
        for k, v in rows
    ]
    return "\n".join(lines)


def driver_cuda_major() -> Optional[int]:
    """The newest CUDA major version the NVIDIA driver supports (``nvidia-smi``'s header).

    Returns:
        The major version, e.g. 12; None without a working ``nvidia-smi``.
    """
    try:
        text = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*(\d+)", text)
    return int(found.group(1)) if found else None


def to_go_live() -> str:
    """What this machine lacks for live mode, as the command that installs it.

    Returns:
        One line: what to install or set, or "nothing: live mode works here".
    """
    env = environment()
    if env.problem is None:
        if os.environ.get("LABKIT_MODE", "").strip().lower() == "recorded":
            return "unset LABKIT_MODE (it forces recorded mode)"
        return "nothing: live mode works here"
    major = driver_cuda_major()
    if major is None:
        return (
            "a CUDA GPU with its NVIDIA driver (nvidia-smi must work), then `make setup`, "
            "which installs the matching extra (cuda12 or cuda13)"
        )
    extra = "cuda13" if major >= 13 else "cuda12"
    if env.cupy_version is None or env.cudnn_backend is None or env.cudnn_frontend is None:
        return (
            f"the {extra} extra for this driver (CUDA {major}): `make setup`, or "
            f"pip install -e '.[{extra},trace-{extra}]'"
        )
    return f"a CUDA device visible to this process ({env.problem}); check CUDA_VISIBLE_DEVICES and the driver"


_VARS_LOCK = threading.Lock()


@contextlib.contextmanager
def variables(changes: dict, exclusive: bool = True):
    """Environment variables set (a value) or unset (None) inside the block, as they were after it.

    Args:
        changes: name -> the value inside the block; None unsets it.
        exclusive: one such block at a time in the process (a short one: a worker process spawned
            inside copies the variables); a long block, such as a whole fill, passes False.
    """
    if not changes:
        yield
        return
    with _VARS_LOCK if exclusive else contextlib.nullcontext():
        saved = {k: os.environ.get(k) for k in changes}
        _apply(changes)
        try:
            yield
        finally:
            _apply(saved)


#: the values of an on/off environment variable that turn it off
OFF_WORDS = ("0", "off", "no", "false")


def switched_on(name: str) -> bool:
    """Whether an on/off environment variable is on. The switches labkit reads are on by default.

    Args:
        name: the variable.

    Returns:
        False when it is one of `OFF_WORDS` (any case); True when it is unset or anything else.
    """
    return os.environ.get(name, "").strip().lower() not in OFF_WORDS


def seconds_setting(name: str, default: Optional[float], unlimited=()) -> Optional[float]:
    """A number of seconds from an environment variable.

    Args:
        name: the variable.
        default: the seconds when it is unset or empty.
        unlimited: the words that mean no limit.

    Returns:
        ``default`` when unset; None for one of the words ``unlimited``; else a number > 0.

    Raises:
        InvalidSpec: the value is neither, naming the variable.
    """
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in unlimited:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        rule = (
            f"must be a number of seconds > 0, or {unlimited[0]} (no limit)"
            if unlimited
            else "must be a number of seconds > 0"
        )
        raise InvalidSpec(name, raw, rule)
    return value


def _apply(values: dict) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
