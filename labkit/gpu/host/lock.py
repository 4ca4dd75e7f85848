"""One labkit measurement at a time per GPU, across processes and users (a class on one server).

Inside one process the prefetch worker and the foreground already take turns (`labkit.session.prefetch`).
Across processes nothing did: two learners moving a control at once timed each other's kernels.
`hold()` is taken around every live experiment's GPU work (`labkit.experiments.core`: operands,
checks, timing) and around each network-report step in its worker process; it is let go while
plans are built (`released()`: `labkit.gpu.cudnn.conv_graph.ConvGraph`), while a process waits for its
report worker, and between steps. Reading recordings and drawing never take it.

**The lock** is a folder per physical GPU, named by its UUID (not its index: CUDA_VISIBLE_DEVICES
renumbers GPUs), under ``LABKIT_GPU_LOCK_DIR`` or ``<tmp>/labkit-gpu-locks`` (made writable for
every user of the machine). It uses ``flock``, which the operating system lets go when a process
dies, even by ``kill -9``: a dead holder's place is taken at the next poll (`POLL_S`).

* **Fair queueing.** A process that wants the GPU puts a ticket in ``queue/`` (named by the time
  it asked, locked by it while it waits and holds); it takes the GPU once every earlier ticket is
  gone or dead (a ticket whose lock can be taken belongs to a dead process and is removed). The
  number of earlier live tickets is how many are ahead; a wait is announced as
  ``"waiting for the GPU (2 ahead)"`` through `labkit.signals.progress.announce` (a panel's status line
  shows it), at once and again when the number changes.
* **Mutual exclusion** on top: the head of the queue also takes ``gpu.lock``.
* **Releasing** waits for the GPU to finish this process's work first, so no kernel of a holder
  runs after its turn. A process with no CUDA context (a report's parent, whose worker process
  measures) has no work to wait for, and is not made to create one (about half a second).
* **Members.** A process that uses the lock registers ``members/<pid>`` (locked while it lives):
  the contention check (`labkit.gpu.host.contention`) counts only the GPU use of processes that are
  not labkit members (nor their children), since members do their GPU work under the lock.
* ``LABKIT_GPU_LOCK=0`` turns it off. A lock folder that cannot be made or written gives one
  warning and measuring goes on without the lock (never a hang).
* ``LABKIT_GPU_LOCK_LOG=FILE`` appends one JSON line per acquire and release (pid, GPU, times):
  the classroom benchmark checks from it that no two holds overlapped.

The queue logic (`FileLock`) is plain files and works without a GPU (the CPU tests run it across
processes); `hold` adds the GPU: its UUID, the synchronisation and the contention check.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import secrets
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, List, Optional

from ... import env
from ...signals.cancel import checkpoint
from ...signals.progress import announce
from . import contention
from .context import has_context

#: seconds between looks at the queue while waiting
POLL_S = 0.02


class LockWarning(UserWarning):
    """The GPU lock cannot be used (its folder cannot be made or written): measuring goes on without it."""


def enabled() -> bool:
    """Whether the per-GPU lock is on.

    Returns:
        False when ``LABKIT_GPU_LOCK`` is ``0``/``off``/``no``/``false``.
    """
    return env.switched_on("LABKIT_GPU_LOCK")


def lock_root() -> Path:
    """The folder of the GPU locks, one per machine: every user's kernels must find the same folder.

    Returns:
        ``LABKIT_GPU_LOCK_DIR``, else ``labkit-gpu-locks`` in the system's temporary folder.
    """
    env = os.environ.get("LABKIT_GPU_LOCK_DIR", "").strip()
    return Path(env).expanduser() if env else Path(tempfile.gettempdir()) / "labkit-gpu-locks"


def _shared_dir(path: Path) -> None:
    """Make ``path`` (and its parents) a folder every user can write in."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o777)
    except OSError:
        pass  # another user's folder: it was made writable by them


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


def _alive(path: Path) -> Optional[bool]:
    """Whether the process that locked ``path`` still holds it: True (alive), False (dead: the
    file is removed), None (the file is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # cannot look: count it as alive (never take a turn that may not be ours)
    try:
        if _try_flock(fd):
            with contextlib.suppress(OSError):
                path.unlink()
            return False
        return True
    finally:
        os.close(fd)


class FileLock:
    """The fair, crash-safe lock of one folder (see the module docstring).

    One holder per object at a time: `hold` keeps one object per GPU per process and serialises this
    process's threads.

    Args:
        folder: the lock's folder (made writable for every user).
        name: its name in logs; default the folder's name.
    """

    def __init__(self, folder: Path, name: str = ""):
        self.folder = Path(folder)
        self.name = name or self.folder.name
        self.queue = self.folder / "queue"
        self._ticket_fd: Optional[int] = None
        self._ticket: Optional[Path] = None
        self._lock_fd: Optional[int] = None
        self._member_fd: Optional[int] = None
        self.acquired_at = 0.0

    # -- setup --
    def _prepare(self) -> None:
        _shared_dir(self.queue)
        _shared_dir(self.folder / "members")
        if self._member_fd is None:  # this process is a labkit member while it lives
            path = self.folder / "members" / str(os.getpid())
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if _try_flock(fd):
                self._member_fd = fd
            else:
                os.close(fd)

    def _take_ticket(self) -> None:
        tmp = self.queue / f".new-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # locked before it has a name others read: never seen unlocked
        ticket = self.queue / f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(tmp, ticket)
        self._ticket_fd, self._ticket = fd, ticket

    def _drop_ticket(self) -> None:
        if self._ticket is not None:
            with contextlib.suppress(OSError):
                self._ticket.unlink()
        if self._ticket_fd is not None:
            os.close(self._ticket_fd)
        self._ticket_fd = self._ticket = None

    def ahead(self) -> int:
        """How many live tickets are before this one (the holder counts); dead ones are removed.

        Returns:
            The count.
        """
        mine = self._ticket.name
        n = 0
        for name in sorted(os.listdir(self.queue)):
            if name.startswith(".") or name >= mine:
                continue
            if _alive(self.queue / name):
                n += 1
        return n

    def members(self) -> List[int]:
        """The live labkit processes that took this lock (dead ones' files are removed).

        Returns:
            Their pids.
        """
        out = []
        folder = self.folder / "members"
        try:
            names = os.listdir(folder)
        except OSError:
            return out
        for name in names:
            if not name.isdigit():
                continue
            if int(name) == os.getpid() or _alive(folder / name):
                out.append(int(name))
        return out

    # -- use --
    def acquire(
        self, on_wait: Optional[Callable[[int], None]] = None, check: Optional[Callable[[], None]] = None
    ) -> float:
        """Wait for this lock's turn (see the module docstring) and take it.

        Args:
            on_wait: hears ``on_wait(ahead)``, the number ahead, when waiting starts and whenever it
                changes.
            check: called at each poll (a `labkit.signals.cancel.checkpoint`: a superseded request stops
                waiting, and its ticket is withdrawn).

        Returns:
            The seconds waited.
        """
        t0 = time.monotonic()
        self._prepare()
        self._take_ticket()
        told = None
        try:
            fd = os.open(self.folder / "gpu.lock", os.O_RDWR | os.O_CREAT, 0o666)
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)
            try:
                while True:
                    n = self.ahead()
                    if n == 0 and _try_flock(fd):
                        break
                    n = max(n, 1)
                    if n != told and on_wait is not None:
                        on_wait(n)
                    told = n
                    if check is not None:
                        check()
                    time.sleep(POLL_S)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            self._drop_ticket()
            raise
        self._lock_fd = fd
        self.acquired_at = time.time()
        return time.monotonic() - t0

    def release(self) -> None:
        """Let go: the lock first, then the ticket (the next in the queue takes it at its next poll)."""
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
        self._drop_ticket()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._lock_fd is not None


# ---- the GPU ----------------------------------------------------------------------------------
def gpu_uuid(device: Optional[int] = None) -> str:
    """The UUID of a CUDA device as NVML writes it, ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``.

    Args:
        device: the CUDA device index; default the current one.

    Returns:
        The UUID.
    """
    import cupy  # heavy: CuPy, live only

    return _uuid_of(cupy.cuda.Device(device).id if device is not None else cupy.cuda.Device().id)


@functools.lru_cache(maxsize=None)
def _uuid_of(dev: int) -> str:
    """Device ``dev``'s UUID, asked of CUDA once per process (every `hold` needs it)."""
    import cupy  # heavy: CuPy, live only

    h = bytes(cupy.cuda.runtime.getDeviceProperties(dev)["uuid"]).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _log(event: str, lock: FileLock, **fields) -> None:
    path = os.environ.get("LABKIT_GPU_LOCK_LOG", "").strip()
    if not path:
        return
    line = json.dumps(dict(event=event, pid=os.getpid(), gpu=lock.name, t=time.time(), **fields)) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line.encode())  # one write of a short line with O_APPEND: whole, never interleaved
        finally:
            os.close(fd)
    except OSError:
        pass


class Hold:
    """What one outermost `hold` saw: ``waited_s`` (seconds waited for the GPU, summed over
    re-takes after builds), ``contended_by`` (pids of other processes that used the GPU while this
    process held it: `labkit.gpu.host.contention`), ``holds`` (turns taken), ``locked`` (False when
    the lock was off or unusable).

    Args:
        watch: whether each release of the turn asks the contention check; False when nobody reads
            ``contended_by`` (a hold nested in it that watches turns it on).
    """

    def __init__(self, watch: bool = True):
        self.watch = watch
        self.waited_s = 0.0
        self.contended_by: set = set()
        self.holds = 0
        self.locked = False

    def summary(self) -> dict:
        """What a result keeps of this turn (``attrs["gpu_turn"]``, the local cache).

        Returns:
            ``locked``, ``waited_s`` (seconds) and ``contended_by`` (sorted pids; empty: nobody else used
            the GPU during the measurement).
        """
        return dict(
            locked=self.locked, waited_s=round(self.waited_s, 4), contended_by=sorted(self.contended_by)
        )


class _ProcessGPU:
    """This process's turn on one GPU: re-entrant per thread, one thread at a time, one
    `FileLock` turn while any thread of it holds."""

    def __init__(self, uuid: str):
        self.uuid = uuid
        self.file = FileLock(lock_root() / uuid, uuid)
        self.cv = threading.Condition()
        self.owner: Optional[int] = None
        self.depth = 0
        self.record: Optional[Hold] = None
        self.broken = False
        try:  # a member from now on: other processes' contention checks leave this one out
            self.file._prepare()
        except OSError:
            pass  # reported, once, by the first turn

    def take(self, record: Hold) -> None:
        me = threading.get_ident()
        with self.cv:
            while self.owner not in (None, me):
                self.cv.wait(0.1)
            self.owner = me
            self.depth += 1
            if self.depth > 1:
                if record.watch and self.record is not None:  # a nested hold that reads the turn
                    self.record.watch = True
                return
            self.record = record
        try:
            self._take_file(record)
        except BaseException:
            with self.cv:
                self.depth, self.owner, self.record = 0, None, None
                self.cv.notify_all()
            raise

    def _take_file(self, record: Hold) -> None:
        if self.broken:
            return

        def waiting(n: int) -> None:
            announce(f"waiting for the GPU ({n} ahead)")

        try:
            waited = self.file.acquire(on_wait=waiting, check=checkpoint)
        except OSError as exc:
            self.broken = True
            warnings.warn(
                f"labkit: the GPU lock in {self.file.folder} cannot be used ({type(exc).__name__}: {exc}); "
                "measuring without it (other notebooks on this GPU may overlap; set LABKIT_GPU_LOCK_DIR "
                "to a folder every user can write)",
                LockWarning,
                stacklevel=4,
            )
            return
        if waited > POLL_S:
            announce("got the GPU")
        record.waited_s += waited
        record.holds += 1
        record.locked = True
        self._since_us = int(time.time() * 1e6)
        _log("acquire", self.file, waited_s=round(waited, 4))

    def _let_file_go(self) -> None:
        if not self.file.held:
            return
        try:
            import cupy  # heavy: CuPy, live only

            device = cupy.cuda.Device()
            if has_context(device.id):  # without a context there is no work, and making one costs 0.5 s
                device.synchronize()  # this process's kernels end inside its turn
        except Exception:  # noqa: BLE001  (a broken context: the lock must still be let go)
            pass

        unread = self.record is not None and not self.record.watch
        try:
            others = [] if unread else contention.others_since(self._since_us, self.file.members)
        except Exception:  # noqa: BLE001  (information, never a reason to fail)
            others = []
        if self.record is not None:
            self.record.contended_by.update(others)
        self.file.release()
        _log("release", self.file, since=self._since_us / 1e6, contended_by=others)

    def give(self) -> None:
        with self.cv:
            self.depth -= 1
            if self.depth > 0:
                return
            try:
                self._let_file_go()
            finally:
                self.owner, self.record = None, None
                self.cv.notify_all()

    @contextlib.contextmanager
    def let_go(self):
        """Inside: this thread's turn is given back (all depths); after: taken again."""
        me = threading.get_ident()
        with self.cv:
            if self.owner != me:
                depth = 0
            else:
                depth, record = self.depth, self.record
                try:
                    self._let_file_go()
                finally:
                    self.depth, self.owner, self.record = 0, None, None
                    self.cv.notify_all()
        try:
            yield
        finally:
            if depth:
                self.take(record)
                with self.cv:
                    self.depth = depth


_gpus: dict = {}
_gpus_lock = threading.Lock()


def _this_gpu() -> Optional[_ProcessGPU]:
    if not enabled():
        return None
    try:
        uuid = gpu_uuid()
    except Exception:  # noqa: BLE001  (no GPU: nothing to lock)
        return None
    root = lock_root()
    with _gpus_lock:
        got = _gpus.get(uuid)
        if got is None or got.file.folder.parent != root:
            got = _gpus[uuid] = _ProcessGPU(uuid)
        return got


def members() -> List[int]:
    """The live labkit processes that took the current GPU's lock.

    Returns:
        Their pids; empty when the lock is off or there is no GPU.
    """
    gpu = _this_gpu()
    if gpu is None:
        return []
    try:
        return gpu.file.members()
    except OSError:
        return []


@contextlib.contextmanager
def hold(*, watch: bool = True):
    """This process's turn on the current GPU for the block.

    It is re-entrant: other threads of this process wait, other processes queue (see the module
    docstring).

    Args:
        watch: ask, each time the turn is let go, which other processes used the GPU during it
            (``contended_by``: an NVML query); False for a turn whose `Hold` nobody reads (a worker
            process's step: `labkit.gpu.host.isolated` sends back the step's value, not its turn),
            unless a hold nested in it watches.

    Yields:
        A `Hold`, filled in by the block's end; a no-op one when the lock is off or there is no GPU.
    """
    record = Hold(watch)
    gpu = _this_gpu()
    if gpu is None:
        yield record
        return
    gpu.take(record)
    try:
        yield gpu.record if gpu.record is not None else record
    finally:
        gpu.give()


@contextlib.contextmanager
def released():
    """Give this thread's turn back for the block (building plans, waiting for a worker process)
    and take it again after; nothing when it holds none."""
    gpu = None
    with _gpus_lock:
        me = threading.get_ident()
        gpu = next((g for g in _gpus.values() if g.owner == me), None)
    if gpu is None:
        yield
        return
    with gpu.let_go():
        yield
