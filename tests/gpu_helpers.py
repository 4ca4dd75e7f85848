"""Shared bits of the gpu-marked tests (imported only by them, after CuPy imported)."""

import itertools
import random

from labkit import ConvSpec
from labkit.experiments import core as experiment_core
from labkit.present import check
from labkit.session import handson, lessons, results
from labkit.store import localcache

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3")


def small_grid():
    """Both layouts x all dtypes x three directions, plus groups (4, depthwise) and dilation 2."""
    base = dict(N=2, C=32, H=12, W=12, K=32, R=3, S=3, padding=1)
    for dtype, layout, direction in itertools.product(DTYPES, ("NCHW", "NHWC"), ("fprop", "dgrad", "wgrad")):
        yield ConvSpec(**base, dtype=dtype, layout=layout, direction=direction)
    for layout, direction in itertools.product(("NCHW", "NHWC"), ("fprop", "dgrad", "wgrad")):
        yield ConvSpec(**base, groups=4, dtype="fp16", layout=layout, direction=direction)
        yield ConvSpec(**{**base, "padding": 2}, dilation=2, dtype="fp32", layout=layout, direction=direction)
    yield ConvSpec(**base, groups=32, dtype="fp16", layout="NHWC")  # depthwise
    yield ConvSpec(**{**base, "K": 64}, groups=32, dtype="fp32", layout="NCHW", stride=2)  # depthwise x2
    for layout in ("NCHW", "NHWC"):  # padding past the filter's reach (PyTorch accepts it)
        yield ConvSpec(**{**base, "R": 1, "S": 1, "padding": 3}, stride=2, dtype="fp16", layout=layout)


def random_specs(direction, n, seed):
    """``n`` seeded random small valid specs (fp8 left out: it has its own alignment rules)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        g = rng.choice([1, 1, 1, 2, 4])
        C = g * rng.choice([4, 8, 16])
        K = g * rng.choice([4, 8, 16])
        R, S = rng.choice([1, 3, 3, 5]), rng.choice([1, 3, 3])
        d = rng.choice([1, 1, 2])
        try:
            out.append(
                ConvSpec(
                    N=rng.choice([1, 2, 3]),
                    C=C,
                    H=rng.randint(6, 20),
                    W=rng.randint(6, 20),
                    K=K,
                    R=R,
                    S=S,
                    stride=(rng.choice([1, 2]), rng.choice([1, 2])),
                    padding=(rng.randint(0, d * (R - 1)), rng.randint(0, d * (S - 1))),
                    dilation=d,
                    groups=g,
                    dtype=rng.choice(["fp32", "tf32", "fp16", "bf16"]),
                    layout=rng.choice(["NCHW", "NHWC"]),
                    direction=direction,
                )
            )
        except Exception:  # noqa: BLE001  (an invalid draw, e.g. the filter larger than the image)
            continue
    return out


def live_process_env(cache, **extra):
    """The environment of a new live labkit process for a test: its own cache folder, nothing
    measured ahead, this checkout first on ``PYTHONPATH``; ``extra`` variables on top."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    path = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(
        os.environ,
        LABKIT_CACHE=str(cache),
        LABKIT_MODE="live",
        LABKIT_PREFETCH="0",
        PYTHONPATH=os.pathsep.join(path),
        **extra,
    )


def live_session(monkeypatch, *, handson_mode=None):
    """A live hands-on test's session, set up as a lesson's kernel has it: live mode, no prefetch,
    the hands-on topics registered, and the session's results installed (a check reads what the
    cell read); afterwards the previous result source comes back and the session forgets its
    answers. A generator for a fixture to ``yield from``.

    Args:
        monkeypatch: the test's monkeypatch.
        handson_mode: ``LABKIT_HANDSON`` (``"reference"`` runs each hands-on cell's reference in its
            place, as the live notebook test does); None: the learner's cell runs.

    Yields:
        Once, while the test runs.
    """
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    if handson_mode is None:
        monkeypatch.delenv("LABKIT_HANDSON", raising=False)
    else:
        monkeypatch.setenv("LABKIT_HANDSON", handson_mode)
    handson.register_topics()
    before = experiment_core.use_results(results.SESSION)
    yield
    experiment_core.use_results(before)
    lessons.forget()


def run_cell(name: str, source: str) -> dict:
    """Run ``source`` as hands-on cell ``name``, as a notebook runs it, in a namespace of its own.

    Args:
        name: the hands-on cell (`labkit.session.handson.HANDS_ON`).
        source: the cell's code (a reference solution or a learner's).

    Returns:
        The namespace after the run (``lessons`` and ``check`` in it, as in a lesson).
    """
    ns = {"lessons": lessons, "check": check}
    handson.run(name, source, ns)
    return ns


def own_cache(tmp_path, monkeypatch):
    """A test's own empty cache folder (``LABKIT_CACHE``), with labkit's cache index and the
    session's answers forgotten before and after. A generator for a fixture to ``yield from``.

    Args:
        tmp_path: the test's folder.
        monkeypatch: the test's monkeypatch.

    Yields:
        Once, while the test runs.
    """
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    localcache.reset()
    lessons.forget()
    yield
    localcache.reset()
    lessons.forget()
