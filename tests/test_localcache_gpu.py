"""This GPU's own recording, live (`labkit.store.localcache` through `labkit.session.lessons`): a second
process is answered from disk with zero graph builds, a corrupted file is set aside and measured
again, two processes writing at once lose nothing, and a changed cuDNN version sees nothing;
charts fill in (`labkit.signals.progress`) and end as a one-shot call does."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy", reason="needs a CUDA GPU (CuPy not installed: recorded mode)")

import sense  # noqa: E402

from labkit import experiments  # noqa: E402
from labkit.present import widgets  # noqa: E402
from labkit.session import lessons  # noqa: E402
from labkit.signals import progress  # noqa: E402
from labkit.store import localcache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMALL = experiments.BASE.replace(N=8, H=28, W=28)

MEASURE = textwrap.dedent("""
    import json, sys
    from labkit import experiments
    from labkit.session import lessons
    from labkit.gpu.cudnn import graph_cache
    spec = experiments.BASE.replace(**json.loads(sys.argv[1]))
    df = lessons.data("precision", spec=spec)
    print(json.dumps({
        "gpu_us": [None if v != v else v for v in df["gpu_us"]], "plans": list(map(str, df["plan_name"])),
        "builds": graph_cache.graphs.stats.misses, "loads": graph_cache.graphs.stats.loads,
        "from_disk": bool(df.attrs.get("loaded_from_disk")),
        "saved_in": df.attrs.get("saved_in"), "gpu_turn": df.attrs.get("gpu_turn"),
    }))
""")


def measure(cache: Path, **changes):
    """Start a fresh Python process that asks for precision(SMALL + changes); its JSON answer."""
    return start(cache, **changes).result()


class start:
    def __init__(self, cache: Path, **changes):
        env = dict(
            os.environ,
            LABKIT_CACHE=str(cache),
            LABKIT_MODE="live",
            LABKIT_PREFETCH="0",
            PYTHONPATH=os.pathsep.join(
                [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
        )
        arg = json.dumps({"N": 8, "H": 28, "W": 28, **changes})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEASURE, arg],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def result(self):
        out, err = self.proc.communicate(timeout=600)
        assert self.proc.returncode == 0, err[-3000:]
        ans = json.loads(out.strip().splitlines()[-1])
        ans["stderr"] = err
        return ans


def test_a_second_process_is_answered_from_disk_with_zero_graph_builds(tmp_path):
    first = measure(tmp_path)
    assert first["builds"] > 0 and not first["from_disk"] and first["saved_in"], first
    second = measure(tmp_path)
    assert second["builds"] == 0 and second["from_disk"], second
    assert second["gpu_us"] == first["gpu_us"] and second["plans"] == first["plans"]


def test_a_corrupted_file_is_named_set_aside_and_measured_again(tmp_path):
    first = measure(tmp_path)
    path = Path(first["saved_in"])
    path.write_bytes(path.read_bytes()[:100])  # truncated
    second = measure(tmp_path)
    assert str(path) in second["stderr"] and "set aside" in second["stderr"]
    assert (
        second["builds"] + second["loads"] > 0 and not second["from_disk"]
    )  # measured again (its plans saved on disk)
    assert any((tmp_path / "set-aside").iterdir())
    third = measure(tmp_path)
    assert third["from_disk"] and third["builds"] == 0 and third["gpu_us"] == second["gpu_us"]


def test_two_processes_measuring_at_once_lose_nothing(tmp_path):
    a, b, c = start(tmp_path), start(tmp_path, layout="NCHW"), start(tmp_path)
    ra, rb, rc = a.result(), b.result(), c.result()
    assert not (ra["from_disk"] and rc["from_disk"])  # at least one of the same request measured
    again_a, again_b = measure(tmp_path), measure(tmp_path, layout="NCHW")
    # a result timed while another process used the GPU is not saved: it is measured again
    kept_a, kept_b = _uncontended(ra) or _uncontended(rc), _uncontended(rb)
    turns = [r.get("gpu_turn") for r in (ra, rb, rc)]
    assert again_a["from_disk"] == kept_a and again_b["from_disk"] == kept_b, turns
    if kept_a:
        assert again_a["builds"] == 0 and again_a["gpu_us"] in (ra["gpu_us"], rc["gpu_us"])
    if kept_b:
        assert again_b["builds"] == 0 and again_b["gpu_us"] == rb["gpu_us"]
    assert not list(tmp_path.rglob("*.tmp")) and not (tmp_path / "set-aside").exists()


def _uncontended(answer: dict) -> bool:
    """Whether a process's measurement was saved: nobody else used the GPU while it was timed."""
    return not (answer.get("gpu_turn") or {}).get("contended_by")


def test_a_changed_cudnn_version_sees_nothing_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    localcache.reset()
    lessons.forget()
    df = lessons.data("precision", spec=SMALL)
    store = localcache.current()
    request = experiments.request_of("precision", spec=SMALL)
    assert store.get("precision", request) is not None
    other = localcache.LocalRecording(tmp_path, {**store.identity, "cudnn_backend": "0.0.0"})
    assert other.path != store.path and other.get("precision", request) is None
    sense.precision(df)
    localcache.reset()


def test_charts_fill_in_and_end_as_a_one_shot_call(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    localcache.reset()
    lessons.forget()
    seen = []
    spec = SMALL.replace(C=48, K=48)
    with progress.listening(lambda make, done, total, unit: seen.append((make(), done, total))):
        df = lessons.data("plans", spec=spec)
    # one draw per plan, and one more when the plans closest to the best were timed again in turns
    retimed = set(df.plan_index[df.final_rounds > 0])
    assert len(seen) == len(df) + bool(retimed) and seen[-1][1] == seen[-1][2] == len(df)
    first = seen[0][0]
    assert bool(first["heuristic_pick"].iloc[0])  # the heuristic's plan is timed first
    for part, done, _ in seen:
        assert len(part) == done and list(part.columns) == list(df.columns)
        merged = part.merge(df, on="plan_index", suffixes=("", "_final"))
        same = merged["gpu_us"].fillna(-1) == merged["gpu_us_final"].fillna(-1)
        first_pass = merged.plan_index.isin(retimed) & (merged["gpu_us"] == merged["first_pass_us_final"])
        assert (same | first_pass).all()
    assert (seen[-1][0]["gpu_us"].fillna(-1).values == df["gpu_us"].fillna(-1).values).all()
    lessons.forget()
    p = widgets.PlansPanel(N=8, H=28, W=28, C=64)
    assert p.wait(300), "the first request did not finish in 5 min"
    assert p.error is None and p.first_paint_ms is not None and p.first_paint_ms <= p.last_update_ms
    assert p.partial_draws >= 1, p.status.value
    one_shot = lessons.data("plans", spec=p.cfg.kwargs(p.state)["spec"])
    assert list(one_shot["plan_index"]) == list(p.df["plan_index"])
    localcache.reset()


@pytest.mark.parametrize("name,kwargs", [("caps", dict(spec=SMALL)), ("fusion", dict(spec=SMALL))])
def test_reordered_experiments_keep_their_table_order(name, kwargs):
    """caps measures the unlimited cap first and fusion the autotuned rows last; the finished
    tables are in the order the recording (and the charts) use."""
    from labkit.session import prefetch

    seen = []
    with (
        prefetch.PREFETCHER.foreground(f"{name} test"),
        progress.listening(lambda make, done, total, unit: seen.append(make())),
    ):
        df = experiments.registry()[name](**kwargs)  # the GPU held: no background measurement beside it
    assert len(seen) >= 2
    if name == "caps":
        assert list(df["cap_bytes"]) == [0, 1 << 20, 16 << 20, 64 << 20, 256 << 20, -1]
        assert list(seen[0]["cap_bytes"]) == [-1] and "slowdown_vs_unlimited" in seen[1].columns
    else:
        assert list(df["path"]) == ["fused", "fused, autotuned", "unfused"] * 2
        assert "fused, autotuned" not in set(seen[1]["path"])
    getattr(sense, name)(df)


def test_a_second_click_stops_the_first_measurement(tmp_path, monkeypatch):
    """Live, a click measures in a thread; a second click stops it at its next checkpoint
    (nothing of it is drawn or saved) and the second request is drawn."""
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    monkeypatch.setenv("LABKIT_PREFETCH", "0")
    localcache.reset()
    lessons.forget()
    p = widgets.PlansPanel(N=64, C=40, K=72, H=60, W=60)  # a shape no other test builds
    assert p.wait(300), "the first request did not finish in 5 min"
    assert p.background
    p.widgets[
        "dtype"
    ].value = "fp32"  # build and time every plan of a new fp32 graph (~1 ms a call): well over 0.1 s
    time.sleep(0.1)
    p.widgets["dtype"].value = "bf16"
    assert p.wait(300)
    assert p.error is None and p.df.attrs["request"]["spec"]["dtype"] == "bf16"
    assert p.stopped == 1, p.status.value
    store = localcache.current()
    stopped = experiments.request_of("plans", spec=p.cfg.kwargs({**p.state, "dtype": "fp32"})["spec"])
    assert not store.has("plans", stopped)  # the stopped measurement left nothing behind
    sense.plans(p.df)
    localcache.reset()


def test_the_gpu_picker_switches_a_live_panel_to_a_recording_and_back(tmp_path, monkeypatch):
    """Live, the picker lists this GPU first; a recording makes the panel answer from it (recorded
    values, no measuring), and "this GPU" measures again."""
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    localcache.reset()
    lessons.forget()
    p = widgets.PrecisionPanel(N=8, H=28, W=28)
    assert p.wait(300), "the first request did not finish in 5 min"
    assert p.live and p.gpu_picker.value == "" and p.gpu_picker.options[0][1] == ""
    here = p.df.attrs["gpu"]
    p.set(gpu="h200")
    assert (
        not p.live
        and p.error is None
        and p.df.attrs["gpu"] == "NVIDIA H200"
        and p.df.attrs["mode"] == "recorded"
    )
    assert p.state["N"] == 32  # the N=8 shape is not in the quick H200 recording: back to the base
    p.set(gpu=None)
    assert p.live and p.df.attrs["gpu"] == here and p.df.attrs["mode"] == "live"
    p.set(N=8)
    assert p.df.attrs["request"]["spec"]["N"] == 8
    localcache.reset()
