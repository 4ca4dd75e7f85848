"""The class's JupyterHub configuration (`labkit.cli.classroom`), piece by piece: settings, what
`configure` sets for either kind of account, the lessons each learner gets and the once-per-
environment warm-up. tests/test_class_hub.py runs the whole of it in a real hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from labkit.cli import classroom
from labkit.errors import InvalidSpec

traitlets = pytest.importorskip("traitlets.config")
ROOT = Path(__file__).resolve().parents[1]
GPUS = [dict(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3") for i in range(2)]


def test_settings_from_the_environment_and_from_the_config():
    env = {
        "LABKIT_CLASS_DIR": "/tmp/a-class",
        "LABKIT_CLASS_PINS": "ada=0, alan=GPU-1",
        "LABKIT_CLASS_RESERVED": "7",
        "LABKIT_CLASS_PORT": "8123",
    }
    s = classroom.settings(None, env)
    assert s.folder == Path("/tmp/a-class") and s.port == 8123 and s.ip == ""
    assert s.pins == {"ada": "0", "alan": "GPU-1"} and s.reserved == ["7"] and s.admins == []
    s = classroom.settings({"pins": {"ada": 1}, "reserved": [], "gpus": GPUS}, env)
    assert s.pins == {"ada": "1"} and s.reserved == [] and s.gpus == GPUS and s.port == 8123
    with pytest.raises(InvalidSpec, match="name=GPU pairs"):
        classroom.settings(None, {"LABKIT_CLASS_PINS": "ada"})
    with pytest.raises(InvalidSpec, match="port number"):
        classroom.settings(None, {"LABKIT_CLASS_PORT": "eighty"})


@pytest.mark.parametrize("as_root", [False, True])
def test_configure_sets_up_the_hub(tmp_path, monkeypatch, as_root, capsys):
    monkeypatch.setattr(classroom, "proxy_command", lambda: "/opt/proxy")
    c = traitlets.Config()
    c.LabkitClass.folder = str(tmp_path / "class")
    c.LabkitClass.gpus = GPUS
    c.LabkitClass.as_root = as_root
    c.LabkitClass.admins = ["teacher"]
    s = classroom.configure(c)
    hub = tmp_path / "class" / "hub"
    assert (hub.stat().st_mode & 0o777) == 0o700
    assert (tmp_path / "class" / "gpu-locks").stat().st_mode & 0o777 == 0o777
    assert c.JupyterHub.db_url == f"sqlite:///{hub / 'jupyterhub.sqlite'}"
    assert c.ConfigurableHTTPProxy.command == ["/opt/proxy"]
    assert c.Spawner.cmd == [sys.executable, "-m", "labkit", "class", "server"]
    assert (
        c.Spawner.http_timeout == c.Spawner.start_timeout == 300
    )  # warm-kernels runs before the server answers
    env = c.Spawner.environment
    assert env["LABKIT_SHARED_CACHE"] == str(s.folder) and env["LABKIT_GPU_LOCK_DIR"] == str(
        s.folder / "gpu-locks"
    )
    assert c.Authenticator.allow_all is True and c.Authenticator.admin_users == {"teacher"}
    kinds = {
        "authenticators": c.JupyterHub.authenticator_class,
        "spawners": c.JupyterHub.spawner_class,
    }
    assert kinds == (
        {"authenticators": "pam", "spawners": "localprocess"}
        if as_root
        else {"authenticators": "firstuseauthenticator", "spawners": "simple"}
    )
    for group, name in kinds.items():  # each names a class JupyterHub can load
        assert [e for e in entry_points(group=f"jupyterhub.{group}") if e.name == name], (group, name)
    said = capsys.readouterr().out
    assert "learners open http://" in said and "GPUs: 0, 1" in said and "anyone who can reach it" in said


def test_learners_txt_lists_who_may_log_in(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(classroom, "proxy_command", lambda: "/opt/proxy")
    (tmp_path / "learners.txt").write_text("ada grace  # the first two\n\nalan\n")
    c = traitlets.Config()
    c.LabkitClass.folder = str(tmp_path)
    c.LabkitClass.gpus = GPUS
    c.LabkitClass.admins = ["teacher"]
    classroom.configure(c)
    assert c.Authenticator.allowed_users == {"ada", "grace", "alan", "teacher"}
    assert "3 learners listed" in capsys.readouterr().out


def test_the_spawn_hooks_give_a_gpu_and_take_it_back(tmp_path, monkeypatch):
    monkeypatch.setattr(classroom, "proxy_command", lambda: "/opt/proxy")
    c = traitlets.Config()
    c.LabkitClass.folder = str(tmp_path)
    c.LabkitClass.gpus = GPUS
    c.LabkitClass.pins = {"ada": "1"}
    classroom.configure(c)

    class Log:
        def info(self, *args):
            pass

    class Spawner:  # the two attributes the hooks use, as JupyterHub's Spawner has them
        def __init__(self, name):
            self.user, self.log, self.environment = (
                type("U", (), {"name": name}),
                Log(),
                dict(c.Spawner.environment),
            )

    ada, bob = Spawner("ada"), Spawner("bob")
    c.Spawner.pre_spawn_hook(ada)
    c.Spawner.pre_spawn_hook(bob)
    assert (
        ada.environment["CUDA_VISIBLE_DEVICES"] == "GPU-1"
        and bob.environment["CUDA_VISIBLE_DEVICES"] == "GPU-0"
    )
    assert json.loads(ada.environment["LABKIT_CLASS_GPU"])["of"] == 2
    c.Spawner.post_stop_hook(ada)
    record = json.loads((tmp_path / "hub" / "gpus.json").read_text())["learners"]
    assert record["ada"]["running"] is False and record["bob"]["running"] is True
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "class", "gpus", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert "GPU-1: 1 learners: ada (stopped)" in out.stdout, out


def test_a_missing_proxy_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(classroom.sys, "prefix", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(InvalidSpec, match="make proxy"):
        classroom.proxy_command()


def test_lessons_are_copied_once_and_a_learners_edits_kept(tmp_path):
    into = tmp_path / "labkit-lessons"
    first = classroom.copy_lessons(into)
    assert "00_start_here.ipynb" in first and len(first) == len(list((ROOT / "notebooks").glob("*.ipynb")))
    (into / "00_start_here.ipynb").write_text("{}")  # the learner's own edit
    (into / "03_precision_and_layout.ipynb").unlink()
    assert classroom.copy_lessons(into) == ["03_precision_and_layout.ipynb"]
    assert (into / "00_start_here.ipynb").read_text() == "{}"


def test_warm_kernels_runs_until_it_ran_live(tmp_path, monkeypatch):
    """On this machine (recorded mode) warm-kernels has nothing to do: it runs on each start, says
    so, and leaves no mark; a mark of this environment skips it."""
    monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
    marker = tmp_path / "warm-kernels.json"
    said = classroom.warm_once(marker=marker)
    assert "nothing to compile (recorded mode" in said and not marker.exists()
    from labkit import __version__

    key = json.dumps([sys.executable, __version__, "~/.cupy/kernel_cache"])
    marker.write_text(json.dumps({"environment": key}))
    assert classroom.warm_once(marker=marker) is None


def test_a_learners_kernels_get_a_short_private_socket_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", "-")  # restored after the test, whatever it sets
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR")
    assert classroom.kernel_sockets("learner1", str(tmp_path)) == ["--KernelManager.transport=ipc"]
    folder = classroom.kernel_socket_folder("learner1", str(tmp_path))
    assert os.environ["JUPYTER_RUNTIME_DIR"] == str(folder) and folder.is_dir()
    assert folder.stat().st_mode & 0o777 == 0o700
    assert classroom.kernel_socket_folder("learner2", str(tmp_path)) != folder
    # a socket path there stays under the ~107 bytes a Unix socket allows, for any name
    longest = classroom.kernel_socket_folder("x" * 64, "/tmp") / f"kernel-{'0' * 36}-ipc-65535"
    assert len(str(longest)) < 100
    # a folder open to others is not used: the kernels keep TCP
    folder.chmod(0o755)
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR")
    assert classroom.kernel_sockets("learner1", str(tmp_path)) == []
    assert "JUPYTER_RUNTIME_DIR" not in os.environ
