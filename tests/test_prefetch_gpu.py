"""Prefetching live (labkit.session.prefetch through lessons and widgets): a panel measures its
neighbouring values in the background, the next move is served from them, and a foreground
request stops a running prefetch job instead of waiting for it."""

import time

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import sense  # noqa: E402

from labkit import experiments  # noqa: E402
from labkit.present import widgets  # noqa: E402
from labkit.session import lessons  # noqa: E402
from labkit.session.prefetch import PREFETCHER  # noqa: E402

SMALL = experiments.BASE.replace(N=8, H=28, W=28)


@pytest.fixture(autouse=True)
def _own_recording(tmp_path, monkeypatch):
    """This GPU's recording in a folder of each test's own: a neighbour an earlier test measured
    (its panel prefetched it and saved it) would be read from disk here, not measured ahead.
    Prefetching is on whatever ``LABKIT_PREFETCH`` the shell has: these tests are of it."""
    from labkit.store import localcache

    lessons.forget()  # an earlier test's queued neighbours go; the one running saves where it started
    PREFETCHER.wait_idle(120)
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LABKIT_PREFETCH", "1")
    localcache.reset()
    yield
    lessons.forget()
    PREFETCHER.wait_idle(120)
    localcache.reset()


def test_a_panel_prefetches_its_neighbours_and_the_next_move_is_served_from_them():
    lessons.forget()
    p = widgets.PrecisionPanel(N=8, H=28, W=28)
    assert p.wait(300), "the first request did not finish in 5 min"
    assert p.live and p.prefetching > 0, p.status.value
    done0 = PREFETCHER.stats.done
    assert PREFETCHER.wait_idle(300), "prefetching did not finish in 5 min"
    assert PREFETCHER.stats.done > done0, PREFETCHER.stats
    assert lessons.is_cached("precision", spec=SMALL.replace(layout="NCHW"))
    p.set(layout="NCHW")
    assert "ahead of this change" in p.status.value, p.status.value
    assert p.last_update_ms < 1000, p.last_update_ms  # a lookup and a redraw, not a measurement
    sense.precision(p.df)  # a prefetched table passes the same checks as a foreground one
    fresh = experiments.precision(SMALL.replace(layout="NCHW"))
    assert list(fresh["dtype"]) == list(p.df["dtype"]) and list(fresh["plan_name"]) == list(p.df["plan_name"])


def test_the_foreground_stops_a_running_prefetch_job():
    lessons.forget()
    big = experiments.BASE.replace(N=16, C=96, K=96)
    # a slow job: every plan of three new convolutions built and autotuned
    n = lessons.prefetch("plans", [dict(spec=big.replace(dtype=d)) for d in ("fp32", "bf16", "tf32")])
    assert n == 3
    deadline = time.monotonic() + 30
    while PREFETCHER._running is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert PREFETCHER._running is not None, "the prefetch job did not start"
    sup0 = PREFETCHER.stats.superseded
    df = lessons.data("precision", spec=SMALL)  # the foreground: runs now, not after three autotunes
    sense.precision(df)
    assert PREFETCHER.stats.superseded == sup0 + 1, PREFETCHER.stats
    lessons.forget()  # drop the queue
    assert PREFETCHER.wait_idle(120)
