"""``python -m labkit record``: run every experiment over its lesson grid on the live GPU and write
a recording (`labkit.store.recordings`).

The grid: each lesson's base call plus one-factor-at-a-time sweeps around it, and small full
grids where a lesson compares categories (dtype x layout). Resumable: a request already in the
folder is skipped. Out-of-memory and unsupported calls are recorded as such, with the reason.
Ctrl-C keeps what was done. An existing complete recording is never overwritten without force.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd
from tqdm.auto import tqdm

from .. import env, experiments
from ..env import gpu_slug  # noqa: F401  (a name callers know)
from ..errors import LabkitError, OutOfMemory, RecordedDataError, Unsupported
from ..experiments import request_key, request_of

# the names callers know
from ..experiments.grid import SWEEP_VALUES, SWEEPS, Call, grid, strategies_repeats  # noqa: F401
from ..experiments.grid import calls as _calls
from ..gpu.host import conditions
from ..session import results
from ..signals import progress
from ..store import localcache, machine, plan_store
from ..store.recordings import SCHEMA_VERSION, data_dir, sha256
from ..version import __version__


def git_commit() -> Optional[str]:
    """The commit measured.

    Returns:
        ``LABKIT_GIT_COMMIT`` where it is set (a copied tree on a GPU host can carry a stale or no
        .git), else HEAD of this checkout; None when neither is a commit hash.
    """
    sha = os.environ.get("LABKIT_GIT_COMMIT", "")
    if not sha:
        try:
            sha = subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=Path(__file__).resolve().parents[2],
            ).stdout.strip()
        except Exception:  # noqa: BLE001
            sha = ""
    return sha if re.fullmatch(r"[0-9a-f]{7,40}", sha) else None


def _metadata(out: Path, wall: float, complete: bool, argv, conditions: Optional[dict] = None) -> dict:
    """metadata.json's content; ``commands`` keeps every command that wrote into this folder;
    ``conditions``: experiment -> the GPU conditions of this run's calls of it
    (`labkit.gpu.host.conditions.summary`)."""
    commands, old = [], {}
    if (out / "metadata.json").is_file():
        old = json.loads((out / "metadata.json").read_text())
        commands = old.get("commands") or [old.get("command")]
    commands = [c for c in commands if c] + [" ".join(argv)]

    e = env.environment()
    files = {}
    for csv in sorted(out.glob("*.csv")):
        digest = sha256(csv)
        before = (old.get("experiments") or {}).get(csv.stem) or {}
        same = before.get("sha256") == digest  # untouched by this run: keeps when and from which commit
        files[csv.stem] = {
            "file": csv.name,
            "rows": len(pd.read_csv(csv)),
            "sha256": digest,
            "date": before.get("date", old.get("date")) if same else datetime.date.today().isoformat(),
            "git_commit": before.get("git_commit", old.get("git_commit")) if same else git_commit(),
            "conditions": before.get("conditions") if same else (conditions or {}).get(csv.stem),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "gpu": e.gpu_name,
        "compute_capability": e.compute_capability,
        "gpu_memory_bytes": e.gpu_memory_bytes,
        "driver": e.driver_version,
        "cuda_runtime": e.cuda_runtime,
        "cudnn_backend": e.cudnn_backend,
        "cudnn_frontend": e.cudnn_frontend,
        "cupy": e.cupy_version,
        "python": platform.python_version(),
        "labkit": __version__,
        "git_commit": git_commit(),
        "date": datetime.date.today().isoformat(),
        "command": " ".join(argv),
        "commands": commands,
        "wall_seconds": round(wall, 1),
        "complete": complete,
        "experiments": files,
    }


def _done_requests(out: Path) -> set:
    done = set()
    for csv in out.glob("*.csv"):
        try:
            for r in pd.read_csv(csv, usecols=["request"])["request"]:
                done.add((csv.stem, r))
        except Exception as exc:
            raise RecordedDataError(f"cannot resume: {exc}", csv) from None
    return done


def _append(out: Path, name: str, df) -> None:
    path = out / f"{name}.csv"
    if path.exists():
        old = pd.read_csv(path)
        df = pd.concat([old, df], ignore_index=True)
    df.to_csv(path, index=False)


def saying_on(bar, name: str):
    """Show what the measurement of one call announces as the progress bar's note, inside the block.

    A call of minutes then shows where it is ("timing plan 6", "plan 3 ...: compiled at run time in a
    worker, 45 s so far": `labkit.signals.progress`).

    Args:
        bar: the tqdm bar.
        name: the call.

    Returns:
        A context manager.
    """
    return progress.announcing(lambda phase: bar.set_postfix_str(f"{name}: {phase}"[:100]))


def every_plan():
    """Inside the block, an autotune waits for every runtime-compiled plan.

    A recording and a fill hold complete autotunes: no interactive compile budget
    (`labkit.gpu.cudnn.builds.compile_budget_s`), unless ``LABKIT_COMPILE_BUDGET_S`` is set.

    Returns:
        A context manager.
    """
    return env.variables(
        {} if "LABKIT_COMPILE_BUDGET_S" in os.environ else {"LABKIT_COMPILE_BUDGET_S": "none"},
        exclusive=False,
    )


def record(
    out: Optional[Path] = None,
    *,
    quick: bool = False,
    only: Optional[Iterable[str]] = None,
    force: bool = False,
    argv=None,
) -> Path:
    """Record the lesson grid on the live GPU into a recording folder.

    Args:
        out: the folder; default ``data/recordings/<gpu-slug>``.
        quick: the quick grid only.
        only: the experiments to record; default all.
        force: overwrite a complete recording.
        argv: the command line kept in the metadata; default ``sys.argv``.

    Returns:
        ``out``.
    """
    env.require_live("recording")
    argv = argv or sys.argv
    only = list(only) if only else None
    calls = _calls(quick, only)
    out = Path(out) if out else data_dir() / gpu_slug(env.environment().gpu_name)
    meta_path = out / "metadata.json"
    if out.exists() and force:
        if only:  # re-record just these experiments
            for name in only:
                (out / f"{name}.csv").unlink(missing_ok=True)
        else:
            shutil.rmtree(out)
    if meta_path.exists() and json.loads(meta_path.read_text()).get("complete"):
        done = _done_requests(out)
        todo = [c for c in calls if (c[0], request_key(request_of(c[0], **c[1]))) not in done]
        if not todo:
            raise RecordedDataError(
                "a complete recording is already here; pass --force to record it again", out
            )
    out.mkdir(parents=True, exist_ok=True)
    done = _done_requests(out)
    t0 = time.perf_counter()
    prev_wall = 0.0
    if meta_path.exists():
        prev_wall = float(json.loads(meta_path.read_text()).get("wall_seconds", 0.0))
    fns = experiments.registry()
    seen = {}  # experiment -> the GPU conditions of its calls in this run (conditions.summary)
    try:
        with every_plan():
            _record_calls(out, calls, done, fns, seen)
    except KeyboardInterrupt:
        print(
            "\ninterrupted: keeping what was recorded; run the same command again to resume", file=sys.stderr
        )
    finally:
        complete = all((n, request_key(request_of(n, **kw))) in done for n, kw in grid(quick=False))
        meta = _metadata(out, prev_wall + time.perf_counter() - t0, complete, argv, seen)
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return out


def _record_calls(out: Path, calls, done: set, fns: dict, seen: dict) -> None:
    """`record`'s loop: each call not ``done`` measured and appended to its table in ``out``."""
    bar = tqdm(calls, desc="recording", unit="call")
    for name, kwargs in bar:
        key = request_key(request_of(name, **kwargs))
        if (name, key) in done:
            continue
        try:
            with saying_on(bar, name):
                df = fns[name](**kwargs)
            seen[name] = conditions.summary(seen.get(name), df.attrs.get("conditions"))
            df = df.copy()
            df.insert(0, "request", key)
        except (Unsupported, OutOfMemory, LabkitError) as exc:
            df = pd.DataFrame([{"request": key, "call_error": type(exc).__name__, "reason": str(exc)[:300]}])
        _append(out, name, df)
        done.add((name, key))


def size_on_disk(path: Path) -> int:
    """The bytes the files under a folder take.

    Args:
        path: the folder.

    Returns:
        Their total size, in bytes.
    """
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def main_record(args) -> int:
    """``python -m labkit record``: `record`, then a line saying what was written.

    Args:
        args: the parsed command line.

    Returns:
        The exit code: 0, or 130 when calls are missing (interrupted).
    """
    out = record(
        Path(args.out) if args.out else None,
        quick=args.quick,
        only=args.only,
        force=args.force,
        argv=[sys.executable, "-m", "labkit"] + sys.argv[1:],
    )
    meta = json.loads((out / "metadata.json").read_text())
    print(
        f"recorded {sum(e['rows'] for e in meta['experiments'].values())} rows in "
        f"{len(meta['experiments'])} tables to {out} ({size_on_disk(out) / 1024:.0f} KiB) in "
        f"{meta['wall_seconds']:.0f} s; complete={meta['complete']}"
    )
    missing = [c for c in grid(args.quick) if not args.only or c[0] in args.only]
    done = _done_requests(out)
    interrupted = any((n, request_key(request_of(n, **kw))) not in done for n, kw in missing)
    return 130 if interrupted else 0


# ---- this GPU's own recording, filled ahead ------------------------------------------------------
def fill(quick: bool = False, only: Optional[Iterable[str]] = None, *, into=None) -> dict:
    """Measure every lesson's grid (`grid`) on this GPU into this GPU's own recording.

    Live panels then answer those values at recorded speed from the first visit on
    (`labkit.store.localcache`). Resumable: a call already saved is skipped; Ctrl-C keeps what was
    saved (every file is written whole or not at all).

    Args:
        quick: the quick grid only.
        only: the experiments to fill; default all.
        into: a folder to fill instead, for a class (learners set ``LABKIT_SHARED_CACHE`` to it): its
            ``fill.json`` says ``running`` while it fills and ``complete`` (or ``stopped``) after, every
            file in it is made readable by every user, and plans saved while filling go there too.

    Returns:
        Counts: saved, skipped, failed (with the reasons), seconds, and the folder.
    """
    if into is not None:
        return _fill_shared(Path(into), quick, only)

    env.require_live("filling this GPU's recording")

    store = localcache.current()
    if store is None:
        raise LabkitError("this GPU's recording is turned off (LABKIT_LOCAL_RECORDING=0)")
    calls = _calls(quick, only)
    counts = {"saved": 0, "skipped": 0, "failed": 0, "reasons": [], "seconds": 0.0, "folder": str(store.path)}
    t0 = time.perf_counter()
    bar = tqdm(calls, desc="filling this GPU's recording", unit="call")
    try:
        with every_plan():
            _fill_calls(store, bar, counts)
    except KeyboardInterrupt:
        print(
            "\ninterrupted: what was measured is saved; run the same command again to go on", file=sys.stderr
        )
        counts["interrupted"] = True
    finally:
        bar.close()
        counts["seconds"] = time.perf_counter() - t0
    return counts


def _fill_calls(store, bar, counts: dict) -> None:
    """`fill`'s loop: each call of ``bar`` not in ``store`` measured (and saved there), counted."""
    for name, kwargs in bar:
        if store.has(name, request_of(name, **kwargs)):
            counts["skipped"] += 1
            continue
        bar.set_postfix_str(name)
        try:
            with saying_on(bar, name):
                results.live_result(name, kwargs)
            counts["saved"] += 1
        except LabkitError as exc:
            counts["failed"] += 1
            counts["reasons"].append(f"{name} {json.dumps(kwargs, default=str)[:80]}: {exc}"[:300])
        if not store.writable:
            raise LabkitError(f"cannot write to {store.root}; nothing more would be saved")


def _fill_shared(folder: Path, quick: bool, only) -> dict:
    """`fill` into ``folder`` (a class's shared recording; see `fill`)."""
    if folder.exists() and not folder.is_dir():  # bad input first, on any machine
        raise localcache.CacheError("--into must name a folder", folder)
    env.require_live("filling a class's shared recording")
    status = folder / localcache.FILL_STATUS
    body = {
        "status": "running",
        "started": localcache.now(),
        "pid": os.getpid(),
        "quick": bool(quick),
        "only": list(only or []),
        "identity": machine.this_identity(),
    }
    counts = {}
    # the fill's cache is the folder; never answered from another shared folder
    with env.variables({"LABKIT_CACHE": str(folder), "LABKIT_SHARED_CACHE": None}, exclusive=False):
        localcache.reset()
        plan_store.reset()
        try:
            localcache.write_atomic(status, (json.dumps(body, indent=2) + "\n").encode())
            counts = fill(quick, only)
        finally:
            body.update(
                status="stopped" if counts.get("interrupted") or not counts else "complete",
                ended=localcache.now(),
                **{k: counts.get(k) for k in ("saved", "skipped", "failed", "seconds")},
            )
            try:
                localcache.write_atomic(status, (json.dumps(body, indent=2, default=str) + "\n").encode())
                _readable_by_all(folder)
            finally:
                localcache.reset()
                plan_store.reset()
    return counts


def _readable_by_all(folder: Path) -> None:
    """Every file under ``folder`` readable, every folder enterable, by every user (the cache's
    files are written private, 0600)."""
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            p = Path(root) / d
            p.chmod(
                p.stat().st_mode
                | stat.S_IRUSR
                | stat.S_IXUSR
                | stat.S_IRGRP
                | stat.S_IXGRP
                | stat.S_IROTH
                | stat.S_IXOTH
            )
        for f in files:
            p = Path(root) / f
            p.chmod(p.stat().st_mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(folder.stat().st_mode | 0o755)


def main_fill(args) -> int:
    """``python -m labkit fill``: `fill`, then where it went and what it counted.

    Args:
        args: the parsed command line.

    Returns:
        The exit code: 0, or 130 when interrupted.
    """
    into = getattr(args, "into", None)
    counts = fill(args.quick, args.only, into=into)
    print(
        f"the class's shared recording: {into} (learners: LABKIT_SHARED_CACHE={into})"
        if into
        else f"this GPU's recording: {counts['folder']}"
    )
    print(
        f"  saved {counts['saved']} calls, {counts['skipped']} were there already, "
        f"{counts['failed']} failed, in {counts['seconds']:.0f} s"
    )
    for r in counts["reasons"]:
        print(f"  failed: {r}")
    return 130 if counts.get("interrupted") else 0
