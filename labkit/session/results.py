"""A notebook session's experiment results: each request answered once (live: measured, or read
from this GPU's own recording; recorded: looked up) and kept, so a lesson's text, charts and checks
show the same numbers.

``data(name, **kwargs)`` answers a request; ``prefetch`` measures requests in the background
(`labkit.session.prefetch`); ``forget`` drops them. `install` makes these results the source of
`labkit.experiments.core.result` (what summaries and checks read).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Optional

from .. import env, experiments
from ..errors import InvalidSpec, LabkitError
from ..gpu.host import contention, lock
from ..store import localcache, recordings
from .prefetch import PREFETCHER

_CACHE: "OrderedDict[str, object]" = OrderedDict()
#: results kept per session (DataFrames of a few KiB; prefetching adds ~20 per panel move)
_CACHE_SIZE = 512
_CACHE_LOCK = threading.Lock()


# ---- results ------------------------------------------------------------------------------------
def _experiment(name: str):
    """The experiment function called ``name``; `InvalidSpec` for an unknown name."""
    fns = experiments.registry()
    if name not in fns:
        raise InvalidSpec("experiment", name, f"must be one of {', '.join(sorted(fns))}")
    return fns[name]


def _key(name: str, kwargs: dict) -> str:
    """A result's key in this session: the request, and in recorded mode the recording in use
    (switching ``LABKIT_RECORDING`` in one process never answers from the other recording)."""
    _experiment(name)
    key = f"{name}:{experiments.request_key(experiments.request_of(name, **kwargs))}"
    if not env.mode().live:
        key = f"{recordings.current().name}/{key}"
    return key


def _cached(key: str):
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    return None


def _has(key: str) -> bool:
    """Whether this session holds a settled result for ``key`` (not one measured under contention)."""
    with _CACHE_LOCK:
        return key in _CACHE and not contended(_CACHE[key])


def contended(df) -> bool:
    """Whether a result was measured while another process used the GPU (`labkit.gpu.host.lock`).

    Such a result is shown marked, never saved, and measured again once the GPU is free.

    Args:
        df: an experiment's result.

    Returns:
        True when its ``attrs['gpu_turn']`` names another process.
    """
    turn = (getattr(df, "attrs", None) or {}).get("gpu_turn") or {}
    return bool(turn.get("contended_by"))


def _usable(hit) -> bool:
    """A session hit to answer with: any but a contended one while the GPU is free again."""
    if hit is None:
        return False
    if not contended(hit):
        return True

    return bool(contention.busy_now(members=lock.members))


def _store(key: str, df) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = df
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def is_cached(name: str, **kwargs) -> bool:
    """Whether `data` would answer a call without measuring.

    It would from this session's results or, live, from this GPU's own recording on disk
    (`labkit.store.localcache`).

    Args:
        name: the experiment.
        **kwargs: its arguments.

    Returns:
        True when the answer is at hand.
    """
    if _has(_key(name, kwargs)):
        return True

    if not env.mode().live:
        return False
    request = experiments.request_of(name, **kwargs)
    return any(
        store is not None and store.has(name, request)
        for store in (localcache.current(), localcache.shared())
    )


def live_result(name: str, kwargs: dict, *, force: bool = False, save: bool = True):
    """Live: a call's result from this GPU's saved ones, else measured now.

    The learner's own cache is read first, then the class's shared recording
    (``LABKIT_SHARED_CACHE``). The caller holds the prefetch lock (`labkit.session.prefetch`).

    Args:
        name: the experiment.
        kwargs: its arguments.
        force: measure again, whatever is saved.
        save: save a new measurement in the learner's own cache (`labkit.store.localcache`).

    Returns:
        The result's DataFrame.
    """
    request = experiments.request_of(name, **kwargs)
    if not force:
        for store in (localcache.current(), localcache.shared()):
            df = store.get(name, request) if store is not None else None
            if df is not None:
                return experiments.with_model(name, df)
    t0 = time.perf_counter()
    df = _experiment(name)(**kwargs)
    seconds = time.perf_counter() - t0
    df.attrs["measured_at"] = localcache.now()
    df.attrs["measure_seconds"] = seconds
    if save:
        _save(df)
    return df


def _save(df) -> None:
    """Save a live result measured now in this GPU's recording (no-op when it came from there,
    or when there is none)."""
    store = localcache.current()
    if store is None or "saved_in" in df.attrs or contended(df):
        return
    path = store.put(df.attrs["experiment"], df.attrs["request"], df, df.attrs.get("measure_seconds"))
    if path is not None:
        df.attrs["saved_in"] = str(path)


def _keep(key: str, df) -> None:
    """Keep a result the prefetch worker measured undisturbed: this session and disk."""
    _save(df)
    _store(key, df)


def data(name: str, force: bool = False, recording: Optional[str] = None, **kwargs):
    """An experiment's result for one call: looked up (recorded), or live, measured at most once.

    Live, it comes from this session's results, then this GPU's own recording on disk
    (`labkit.store.localcache`: saved by any earlier session on this machine identity), else it is
    measured now and saved. The measurement holds the GPU lock shared with the prefetch worker
    (`labkit.session.prefetch`): a prefetch job for another request stops; one for this request is
    waited for and its result used.

    Args:
        name: the experiment.
        force: measure again (and replace the saved result).
        recording: answer from that shipped recording (a folder name under data/recordings, e.g.
            ``"h200"``), in any mode.
        **kwargs: its arguments.

    Returns:
        The DataFrame. It raises what the experiment raises (`RecordedDataError` for a request that
        was not recorded).
    """
    key = _key(name, kwargs)
    if recording is not None:
        key = f"{recording}/{key}"
        hit = _cached(key)
        if hit is None:
            hit = experiments.core.from_recording(name, recordings.named(recording), **kwargs)
            _store(key, hit)
        return hit
    if not force:
        hit = _cached(key)
        if _usable(hit):
            return hit
    fn = _experiment(name)
    if not env.mode().live:
        df = fn(**kwargs)
    else:
        with PREFETCHER.foreground(key):
            hit = None if force else _cached(key)  # the worker may have just measured it
            if _usable(hit):
                return hit
            df = live_result(name, kwargs, force=force)
        if contended(df):  # shown marked; measured again in the background once the kernel is idle
            PREFETCHER.want(
                [(key, lambda: live_result(name, dict(kwargs), force=True, save=False))], _keep, _has
            )
    _store(key, df)
    return df


def prefetch(name: str, requests) -> int:
    """Live: measure an experiment for several requests in the background while the kernel is idle.

    They go ahead of what was queued before (`labkit.session.prefetch`). A request saved in this
    GPU's recording is read from disk instead; requests already answered, or invalid, are skipped.

    Args:
        name: the experiment.
        requests: kwargs dicts, in the order they are measured.

    Returns:
        How many were queued; 0 in recorded mode (a lookup is already fast) or with
        ``LABKIT_PREFETCH=0``.
    """
    _experiment(name)
    if not env.mode().live:
        return 0
    jobs, seen = [], set()
    for kwargs in requests:
        try:
            key = _key(name, kwargs)
        except (LabkitError, TypeError, ValueError):
            continue
        if key not in seen:
            seen.add(key)
            jobs.append((key, lambda kw=dict(kwargs): live_result(name, kw, save=False)))
    return PREFETCHER.want(jobs, _keep, _has)


def forget() -> None:
    """Drop every cached result (the next `data` call measures or looks up again) and any
    queued prefetch jobs."""
    PREFETCHER.clear()
    with _CACHE_LOCK:
        _CACHE.clear()


def base(**changes):
    """The lessons' base convolution (`experiments.BASE`), with changes applied.

    Args:
        **changes: field name -> new value.

    Returns:
        The `ConvSpec`.
    """
    return experiments.BASE.replace(**changes) if changes else experiments.BASE


# ---- display helpers ----------------------------------------------------------------------------


class SessionResults(experiments.core.ResultSource):
    """This session's results as the source summaries and checks read (`install`).

    They are what the lesson's charts drew (and, live, this GPU's saved results), so a summary or
    a check never measures a request again.
    """

    def result(self, name: str, at_hand_only: bool = False, **kwargs):
        """The result of experiment ``name(**kwargs)`` from this session (`data`).

        Args:
            name: the experiment.
            at_hand_only: live, None unless this session or this GPU's recording has it.
            **kwargs: its arguments.

        Returns:
            Its DataFrame, or None (``at_hand_only``, live, not at hand).
        """
        if at_hand_only and not is_cached(name, **kwargs):
            if env.mode().live:
                return None
        return data(name, **kwargs)


#: this process's session: its results live in this module (`data`)
SESSION = SessionResults()


def install() -> None:
    """Make this session's results (`SESSION`) the source of `labkit.experiments.core.result`.

    A summary or a check then reads what the lesson's charts drew, and never measures it again. A
    notebook's first use of ``lessons``, ``check`` or ``widgets`` calls it
    (`labkit.session.first_use.import_public`).
    """
    experiments.core.use_results(SESSION)
