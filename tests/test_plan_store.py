"""Saved plans on disk (`labkit.store.plan_store`): the file handling, on any machine.

The store is opened with the shipped H100 recording's identity, as a live H100 would. The plan
bytes here are opaque to the store (it checks, writes and reads them; cuDNN never sees them);
what cuDNN does with real serialized plans, a second process loading them with zero builds, is
in tests/test_saved_plans_gpu.py.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_localcache import h100_identity  # noqa: E402  (tests/ is on sys.path under pytest)

from labkit.errors import InvalidSpec
from labkit.store import localcache, plan_store
from labkit.store.localcache import CacheError, CacheWarning
from labkit.store.plan_store import PlanStore

ROOT = Path(__file__).resolve().parent.parent
KEY = ((("N", 32), ("C", 64), ("dtype", "fp16")), "none", None, False)
BLOB = bytes(range(256)) * 11  # 2,816 bytes: the size of a plain conv's serialized plan


@pytest.fixture(autouse=True)
def fresh_warnings():
    localcache._warned.clear()


@pytest.fixture
def store(tmp_path):
    return PlanStore(tmp_path / "cache", h100_identity())


def put(store, kind="autotuned", data=BLOB, key=KEY):
    return store.put(
        key, kind, data, "eng0_k2=1", 1 << 20, "RUNTIME_COMPILATION", dict(plans_timed=44, gpu_us=24.8)
    )


def test_round_trip_keeps_bytes_plan_and_what_finding_it_cost(store):
    path = put(store)
    assert path.is_file() and path.parent == store.path and path.name.endswith(".autotuned.json")
    got = store.get(KEY, "autotuned")
    assert got.data == BLOB and got.plan_name == "eng0_k2=1" and got.workspace_bytes == 1 << 20
    assert got.notes == "RUNTIME_COMPILATION" and got.info == dict(plans_timed=44, gpu_us=24.8)
    assert got.path == path and got.saved_at[:4].isdigit() and got.read_seconds >= 0
    assert store.get(KEY, "heuristic") is None  # the other kind is another file
    assert [e["kind"] for e in store.entries()] == ["autotuned"]
    assert plan_store.key_text(KEY) == got.graph_key


def test_kinds_are_checked(store):
    with pytest.raises(InvalidSpec, match="kind"):
        put(store, kind="fastest")


def test_the_folder_names_the_identity_and_every_version_moves_it(tmp_path):
    a = PlanStore(tmp_path, h100_identity())
    for field, value in [
        ("cudnn_backend", "9.20.0"),
        ("cudnn_frontend", "1.29.0"),
        ("nvidia_driver", "590.1"),
        ("gpu", "NVIDIA H200"),
    ]:
        assert PlanStore(tmp_path, h100_identity(**{field: value})).path != a.path, field


def test_a_plan_saved_under_another_cudnn_is_set_aside_never_returned(store):
    path = put(store)
    body = json.loads(path.read_text())
    body["cudnn_backend"] = "9.0.0"  # as if cuDNN had been upgraded under the same folder
    path.write_text(json.dumps(body))
    with pytest.warns(CacheWarning, match="never loaded into another cuDNN"):
        assert store.get(KEY, "autotuned") is None
    assert not path.exists() and any((store.root / "set-aside").iterdir())


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda b: b[: len(b) // 2], "truncated or corrupt"),
        (lambda b: b.replace(b'"schema_version": 1', b'"schema_version": 99'), "schema version 99"),
        (lambda b: b.replace(b'"data": "AAEC', b'"data": "AQEC'), "do not match their sha256"),
        (lambda b: b"\xff\xfe", "truncated or corrupt"),
        (lambda b: b.replace(b'"workspace_bytes": 1048576', b'"workspace_bytes": "a lot"'), "wrong type"),
    ],
)
def test_corrupt_truncated_or_other_schema_file_is_named_and_set_aside(store, damage, why):
    path = put(store)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.warns(CacheWarning, match=why) as caught:
        assert store.get(KEY, "autotuned") is None
    assert str(path) in str(caught[0].message)
    assert not path.exists() and any((store.root / "set-aside").iterdir())
    assert put(store) is not None and store.get(KEY, "autotuned").data == BLOB  # saved again


def test_interrupted_write_leaves_the_previous_plan_whole(store, monkeypatch):
    path = put(store)
    before = path.read_bytes()

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(localcache.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        put(store, data=b"new")
    monkeypatch.undo()
    assert path.read_bytes() == before and not list(store.path.glob("*.tmp"))


def test_unwritable_folder_warns_once_and_goes_on(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    store = PlanStore(blocker / "cache", h100_identity())
    with pytest.warns(CacheWarning, match="cannot save plans") as caught:
        assert put(store) is None
        assert put(store) is None
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not store.writable and store.get(KEY, "autotuned") is None


def test_labkit_cache_naming_a_file_is_a_clear_error(tmp_path, monkeypatch):
    f = tmp_path / "cache.txt"
    f.write_text("x")
    monkeypatch.setenv("LABKIT_CACHE", str(f))
    plan_store.reset()
    with pytest.raises(CacheError, match="must name a folder") as err:
        plan_store.current()
    assert str(f) in str(err.value) and "error" in plan_store.describe()
    plan_store.reset()


def test_saving_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("LABKIT_SAVED_PLANS", "0")
    assert plan_store.current() is None and "off" in plan_store.describe()


WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from labkit.store.plan_store import PlanStore
    from test_localcache import h100_identity
    from test_plan_store import KEY
    store = PlanStore({root!r}, h100_identity())
    for i in range(40):
        data = bytes([int(sys.argv[1])]) * (3000 + i)
        assert store.put(KEY, "autotuned", data, "eng" + sys.argv[1], 0) is not None
        got = store.get(KEY, "autotuned")
        assert got is not None and len(set(got.data)) == 1, "a torn plan file"
""")


def test_two_writers_of_the_same_plan_leave_a_whole_file(tmp_path):
    code = WRITER.format(tests=str(ROOT / "tests"), root=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(n)],
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        for n in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    store = PlanStore(tmp_path, h100_identity())
    got = store.get(KEY, "autotuned")
    assert got.plan_name in ("eng1", "eng2") and set(got.data) == {int(got.plan_name[-1])}
    assert not list(store.path.glob("*.tmp")) and not (tmp_path / "set-aside").exists()


def test_compiled_plans_are_one_file_per_graph_and_plan_name(store):
    """A runtime-compiled plan (`plan_store.COMPILED`) is kept per graph and plan name, beside the
    chosen plans; `has` sees its file without reading it."""
    from labkit.gpu.cudnn.compiled_plans import plan_key

    spec_key = KEY[0]
    a, b = plan_key(spec_key, "none", None, "eng7_k24=29"), plan_key(spec_key, "none", None, "eng7_k24=30")
    assert not store.has(a, plan_store.COMPILED)
    pa = store.put(a, plan_store.COMPILED, BLOB, "eng7_k24=29", 0, "RUNTIME_COMPILATION")
    pb = store.put(b, plan_store.COMPILED, BLOB[::-1], "eng7_k24=30", 512)
    assert pa != pb and pa.name.endswith(".compiled.json")
    assert store.has(a, plan_store.COMPILED) and store.has(b, plan_store.COMPILED)
    assert not store.has(plan_key(spec_key, "bias_relu", None, "eng7_k24=29"), plan_store.COMPILED)
    got = store.get(b, plan_store.COMPILED)
    assert got.data == BLOB[::-1] and got.plan_name == "eng7_k24=30" and got.workspace_bytes == 512
    assert store.get(a, "autotuned") is None  # the chosen kinds are files of their own
    with pytest.raises(InvalidSpec, match="kind"):
        plan_store.check_kind(plan_store.COMPILED)  # not a kind `load_plan` takes


def test_trim_keeps_the_newest_compiled_plans_and_leaves_other_kinds(store):
    import os

    from labkit.gpu.cudnn.compiled_plans import plan_key

    put(store)
    paths = []
    for i in range(5):
        paths.append(
            store.put(plan_key(KEY[0], "none", None, f"eng{i}"), plan_store.COMPILED, BLOB, f"eng{i}", 0)
        )
        os.utime(paths[-1], (1000 + i, 1000 + i))
    assert store.trim(plan_store.COMPILED, 2) == 3
    assert [p.exists() for p in paths] == [False, False, False, True, True]
    assert store.get(KEY, "autotuned") is not None
    assert store.trim(plan_store.COMPILED, 2) == 0
