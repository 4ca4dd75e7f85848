"""The class's JupyterHub configuration (`labkit.cli.classroom`), piece by piece: settings, what
`configure` sets for either kind of account, the lessons each learner gets and the once-per-
environment warm-up. tests/test_class_hub.py runs the whole of it in a real hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.cli import class_env, classroom
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
    assert s.open is False and s.idle_seconds == 1800 and s.prefix == "jupyter-" and s.tls_cert is None
    s = classroom.settings({"pins": {"ada": 1}, "reserved": [], "gpus": GPUS}, env)
    assert s.pins == {"ada": "1"} and s.reserved == [] and s.gpus == GPUS and s.port == 8123
    assert classroom.settings(None, {"LABKIT_CLASS_OPEN": "anyone"}).open is True


#: one wrong value per setting that has a rule, and the words its line must hold
MISTAKES = {
    "LABKIT_CLASS_PINS": ("ada", "name=GPU pairs"),
    "LABKIT_CLASS_PORT": ("eighty", "port number"),
    "LABKIT_CLASS_IP": ("my-host", "IP address"),
    "LABKIT_CLASS_OPEN": ("yes", "'no'"),
    "LABKIT_CLASS_RESERVED": ("seven", "not a GPU"),
    "LABKIT_CLASS_ADMINS": ("teacher,ada!", "'ada!': not a name"),
    "LABKIT_CLASS_IDLE_SECONDS": ("2", "at least 5"),
    "LABKIT_CLASS_ACCOUNT_PREFIX": ("Jupyter ", "account name"),
    "LABKIT_CLASS_TLS_CERT": ("/nonexistent/cert.pem", "give both"),
    "LABKIT_CLASS_PORTT": ("8001", "did you mean LABKIT_CLASS_PORT?"),
}


def test_every_mistake_is_one_line_naming_it():
    with pytest.raises(classroom.BadSettings) as got:
        classroom.settings(None, {k: v for k, (v, _) in MISTAKES.items()})
    lines = got.value.lines
    assert len(lines) == len(MISTAKES), lines
    for (var, (_, words)), line in zip(sorted(MISTAKES.items()), sorted(lines)):
        assert line.startswith(var) and words in line and "\n" not in line, (var, line)
    with pytest.raises(classroom.BadSettings, match="no such file"):
        classroom.settings(
            None, {"LABKIT_CLASS_TLS_CERT": "/nonexistent/c", "LABKIT_CLASS_TLS_KEY": "/nonexistent/k"}
        )


def test_a_bad_setting_is_one_line_and_exit_2_from_every_class_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABKIT_CLASS_")}
    env.update(PYTHONPATH=str(ROOT), LABKIT_CLASS_PINS="ada", LABKIT_CLASS_IDLE_SECONDS="soon")
    for command in ("check", "start", "stop", "gpus"):
        done = subprocess.run(
            [sys.executable, "-m", "labkit", "class", command, "--dir", str(tmp_path)],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 2, (command, done.stderr)
        assert "LABKIT_CLASS_PINS='ada'" in done.stderr and "LABKIT_CLASS_IDLE_SECONDS='soon'" in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == "", done
    assert not (tmp_path / "hub").exists()  # nothing started


def configured(tmp_path, monkeypatch, **section):
    """JupyterHub's config after `classroom.configure`, with this interpreter for the learners."""
    monkeypatch.setattr(classroom, "proxy_command", lambda: "/opt/proxy")
    monkeypatch.setattr(
        class_env, "probe", lambda python: None
    )  # as root it runs `nobody`: see test_class_root
    c = traitlets.Config()
    c.LabkitClass.folder = str(tmp_path / "class")
    c.LabkitClass.gpus = GPUS
    c.LabkitClass.python = sys.executable
    for k, v in section.items():
        c.LabkitClass[k] = v
    classroom.configure(c)
    return c


@pytest.mark.parametrize("as_root", [False, True])
def test_configure_sets_up_the_hub(tmp_path, monkeypatch, as_root, capsys):
    c = configured(tmp_path, monkeypatch, as_root=as_root, admins=["teacher"], prefix="lab-")
    folder = tmp_path / "class"
    hub = folder / "hub"
    assert (hub.stat().st_mode & 0o777) == 0o700
    assert (folder / "gpu-locks").stat().st_mode & 0o777 == 0o777
    assert c.JupyterHub.db_url == f"sqlite:///{hub / 'jupyterhub.sqlite'}"
    assert c.ConfigurableHTTPProxy.command == ["/opt/proxy"]
    assert c.Spawner.cmd == [sys.executable, "-m", "labkit", "class", "server"]
    assert (
        c.Spawner.http_timeout == c.Spawner.start_timeout == 300
    )  # warm-kernels runs before the server answers
    env = c.Spawner.environment
    assert env["LABKIT_SHARED_CACHE"] == str(folder) and env["LABKIT_GPU_LOCK_DIR"] == str(
        folder / "gpu-locks"
    )
    # nobody but the admins until learners.txt names someone; a name off the list is let in no more
    assert c.Authenticator.allow_all is False and c.Authenticator.allow_existing_users is False
    assert c.Authenticator.allowed_users == {"teacher"} and c.Authenticator.admin_users == {"teacher"}
    # the culler: a hub service with the least privileges it needs
    (culler,) = c.JupyterHub.services
    assert culler["command"][1:] == ["-m", "jupyterhub_idle_culler", "--timeout=1800", "--cull-every=300"]
    assert c.JupyterHub.load_roles[0]["scopes"] == classroom.CULLER_SCOPES
    spawner = c.JupyterHub.spawner_class
    assert spawner == ("labkit.cli.class_spawner.LearnerSpawner" if as_root else "simple")
    if as_root:
        assert c.LearnerSpawner.account_prefix == "lab-" and c.LearnerSpawner.homes == "/home"
    from jupyterhub.app import JupyterHub

    hub_app = JupyterHub(config=c)  # each class JupyterHub is told to load, loaded as JupyterHub does
    assert hub_app.authenticator_class.__name__ == "LearnerAuthenticator"
    assert hub_app.spawner_class.__name__ == ("LearnerSpawner" if as_root else "SimpleLocalProcessSpawner")
    said = capsys.readouterr().out
    assert "nobody can log in yet" in said and "GPUs: 0, 1" in said
    assert ("NOT ISOLATED" in said) != as_root and ("lab-<name>" in said) == as_root


def test_with_no_list_nobody_logs_in_and_a_listed_name_does(tmp_path, monkeypatch):
    """The hub's own login code (JupyterHub's Authenticator.get_authenticated_user with the
    class's authenticator): no one without learners.txt; its names (read at each login) and the
    admins with it; anyone once the teacher opens the hub."""
    import asyncio

    c = configured(tmp_path, monkeypatch, admins=["teacher"])
    from labkit.cli.class_spawner import LearnerAuthenticator

    def login(name, config=c):
        auth = LearnerAuthenticator(config=config)
        return asyncio.run(auth.get_authenticated_user(None, {"username": name, "password": "a-password"}))

    assert login("ada") is None and login("bob") is None
    assert login("teacher")["name"] == "teacher"
    (tmp_path / "class" / "learners.txt").write_text("ada  # the first\n")
    assert login("ada")["name"] == "ada" and login("bob") is None
    (tmp_path / "class" / "learners.txt").write_text("bob\n")  # ada is taken off the list
    assert login("ada") is None and login("bob")["name"] == "bob"
    opened = configured(tmp_path, monkeypatch, open=True)
    assert opened.Authenticator.allow_all is True and login("carl", opened)["name"] == "carl"


def test_learners_txt_lists_who_may_log_in(tmp_path, monkeypatch, capsys):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "learners.txt").write_text("ada grace  # the first two\n\nAlan\n")
    c = configured(tmp_path, monkeypatch, admins=["teacher"])
    assert c.Authenticator.allowed_users == {"ada", "grace", "alan", "teacher"}
    assert "3 learners listed" in capsys.readouterr().out
    (tmp_path / "class" / "learners.txt").write_text("ada\nbob o'neil\n")
    with pytest.raises(classroom.BadSettings, match=r"learners.txt:2: \"o'neil\" is not a name"):
        classroom.allowed(tmp_path / "class")


def test_https_and_the_address_to_hand_out(tmp_path, monkeypatch, capsys):
    cert, key = tmp_path / "hub.crt", tmp_path / "hub.key"
    cert.write_text("-"), key.write_text("-")
    c = configured(tmp_path, monkeypatch, tls_cert=str(cert), tls_key=str(key), idle_seconds=0)
    assert c.JupyterHub.bind_url == "https://:8000" and c.JupyterHub.ssl_cert == str(cert)
    said = capsys.readouterr().out
    assert f"learners open https://{classroom.reachable_address()}:8000/" in said
    assert "localhost" not in said and "never stopped" in said
    assert not isinstance(c.JupyterHub.services, list)  # no culler
    s = classroom.settings({"ip": "10.1.2.3", "port": 8443})
    assert classroom.url_text(s) == "http://10.1.2.3:8443/"


def test_check_names_each_problem_and_its_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(classroom.sys, "prefix", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    (tmp_path / "a-file").write_text("")
    s = classroom.settings(
        {"folder": str(tmp_path / "a-file" / "class"), "gpus": GPUS, "pins": {"ada": "5"}, "as_root": False}
    )
    lines = class_env.check(s, python=Path(sys.executable), proxy=classroom.proxy_command)
    assert len(lines) == 3, lines
    assert "cannot write the class folder" in lines[0] and "make hub CLASS_DIR=" in lines[0]
    assert "make proxy" in lines[1]
    assert lines[2].startswith("LABKIT_CLASS_PINS") and "0 (GPU-0), 1 (GPU-1)" in lines[2]


def test_the_spawn_hooks_give_a_gpu_and_take_it_back(tmp_path, monkeypatch):
    c = configured(tmp_path, monkeypatch, pins={"ada": "1"})
    folder = tmp_path / "class"

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
    record = json.loads((folder / "hub" / "gpus.json").read_text())["learners"]
    assert record["ada"]["running"] is False and record["bob"]["running"] is True
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "class", "gpus", "--dir", str(folder)],
        capture_output=True,
        text=True,
    )
    lines = out.stdout.splitlines()
    assert lines[0] == f"GPU-0: bob since {record['bob']['given_at']}", out
    assert lines[1:] == ["GPU-1: free", "stopped (GPU given back): ada"], out
    table = {"ada": dict(gpu="GPU-1", running=True, given_at="10:00")}
    gpus = classroom.spread.as_gpus(GPUS)
    assert classroom.gpu_lines(table, gpus) == ["GPU 0 (GPU-0): free", "GPU 1 (GPU-1): ada since 10:00"]


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
