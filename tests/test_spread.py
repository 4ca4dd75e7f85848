"""Learners spread over the host's GPUs (`labkit.gpu.host.spread`): least-loaded with the teacher's
pins and reserved GPUs, a record two writers share without losing an entry, and the sentence the
banner shows. The GPUs are lists given to `Spread` (no NVML here)."""

from __future__ import annotations

import json
import multiprocessing
import warnings

import pytest

from labkit.errors import InvalidSpec
from labkit.gpu.host import spread


def gpus(n: int):
    return [
        dict(index=i, uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000", name="NVIDIA H100 80GB HBM3")
        for i in range(n)
    ]


def counts(s: spread.Spread):
    return [len(v) for v in s.running().values()]


def test_learners_are_balanced_and_a_stopped_server_frees_its_place(tmp_path):
    s = spread.Spread(tmp_path / "gpus.json", gpus=gpus(2))
    got = [s.assign(f"l{i}").index for i in range(8)]
    assert counts(s) == [4, 4] and got == [0, 1] * 4
    s.release("l0")
    s.release("l2")
    assert counts(s) == [2, 4]
    assert s.assign("new").index == 0  # the least loaded
    assert s.assign("l0").index == 0
    assert counts(s) == [4, 4]


def test_a_returning_learner_gets_the_gpu_it_had_when_loads_tie(tmp_path):
    s = spread.Spread(tmp_path / "gpus.json", gpus=gpus(2))
    assert [s.assign(n).index for n in ("a", "b")] == [0, 1]
    s.release("b")
    s.release("a")
    assert s.assign("b").index == 1  # both empty: b's own GPU
    assert s.assign("b").index == 1  # a second start of a running server keeps its place


def test_pins_and_reserved_gpus(tmp_path):
    g = gpus(4)
    s = spread.Spread(
        tmp_path / "gpus.json", gpus=g, pins={"teacher": 3, "ada": g[0]["uuid"]}, reserved=["3"]
    )
    assert s.assign("teacher").index == 3 and s.assign("ada").index == 0
    for i in range(9):
        s.assign(f"l{i}")
    run = s.running()
    assert run[g[3]["uuid"]] == ["teacher"]  # reserved: only the pinned learner
    assert sorted(len(run[x["uuid"]]) for x in g[:3]) == [3, 3, 4]
    assert "ada" in run[g[0]["uuid"]]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(pins={"ada": 5}), "pins['ada']=5: must name a GPU of this host"),
        (dict(reserved=["GPU-nope"]), "reserved='GPU-nope': must name a GPU"),
        (dict(reserved=[0, 1]), "leaves no GPU for learners who are not pinned"),
    ],
)
def test_a_pin_or_reservation_naming_no_gpu_is_a_clear_error(tmp_path, kwargs, words):
    with pytest.raises(InvalidSpec, match=words.replace("[", r"\[").replace("]", r"\]")):
        spread.Spread(tmp_path / "gpus.json", gpus=gpus(2), **kwargs)


def test_repeated_gpus_are_refused(tmp_path):
    with pytest.raises(InvalidSpec, match="each GPU's uuid must appear once"):
        spread.Spread(tmp_path / "g.json", gpus=[dict(g, index=i) for i, g in enumerate(gpus(1) * 2)])


def test_a_host_without_gpus_gives_none(tmp_path):
    s = spread.Spread(tmp_path / "gpus.json", gpus=[])
    assert s.assign("ada") is None and spread.environment(None, of=0) == {}


def _assign_many(path, names):
    s = spread.Spread(path, gpus=gpus(2))
    for n in names:
        s.assign(n)


def test_two_writers_lose_no_assignment_and_stay_balanced(tmp_path):
    """Four processes give out 40 places at once: every learner is in the record, 20 per GPU."""
    path = tmp_path / "gpus.json"
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_assign_many, args=(path, [f"p{k}-{i}" for i in range(10)])) for k in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    s = spread.Spread(path, gpus=gpus(2))
    assert len(s.table()) == 40 and counts(s) == [20, 20]
    assert not list(tmp_path.glob(".gpus.json.*"))  # no temporary file left


def test_an_unreadable_record_is_set_aside_with_one_warning(tmp_path):
    path = tmp_path / "gpus.json"
    path.write_text('{"learners": {"ada": ')  # cut short
    s = spread.Spread(path, gpus=gpus(2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert s.assign("ada").index == 0
    assert len(seen) == 1 and "cannot be read" in str(seen[0].message)
    assert json.loads(path.read_text())["learners"]["ada"]["running"] is True
    assert len(list(tmp_path.glob("gpus.json.unreadable-*"))) == 1


def test_the_learners_server_sees_its_gpu_and_the_banner_names_it(tmp_path, monkeypatch):
    s = spread.Spread(tmp_path / "gpus.json", gpus=gpus(8))
    s.assign("a")
    gpu = s.assign("b")
    env = spread.environment(gpu, of=8)
    assert env["CUDA_VISIBLE_DEVICES"] == gpu.uuid
    monkeypatch.delenv(spread.GIVEN_VAR, raising=False)
    assert spread.given() is None and spread.given_text() == ""
    monkeypatch.setenv(spread.GIVEN_VAR, env[spread.GIVEN_VAR])
    assert spread.given() == dict(index=1, uuid=gpu.uuid, name=gpu.name, of=8)
    assert "number 1 of the host's 8" in spread.given_text() and gpu.uuid in spread.given_text()
    from labkit.session import lessons

    assert "number 1 of the host's 8" in lessons.banner()
    monkeypatch.setenv(spread.GIVEN_VAR, "{not json")
    assert spread.given_text() == ""


def test_host_gpus_without_nvml_is_empty():
    try:
        import pynvml  # noqa: F401
    except ImportError:
        assert spread.host_gpus() == []
        return
    assert all(g.uuid.startswith(("GPU-", "MIG-")) for g in spread.host_gpus())
