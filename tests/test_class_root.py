"""A class started as root, as a teacher does with ``sudo``: the checkout and its venv belong to
another account, in that account's private home, so no learner's account can run that venv's
Python. ``python -m labkit class start`` builds the learner environment in a shared folder, the hub
makes a Unix account for each learner at their first start, learners log in through the hub's
login page (first-use passwords, learners.txt), their servers start and run lesson 00, and one
learner cannot read another's files. A second test: an interpreter learners cannot run, named in
``LABKIT_CLASS_PYTHON``, is refused in one line before anything starts.

Needs root (it makes and removes Unix accounts with useradd/userdel): skipped, with the reason,
elsewhere. Every account, process and folder it makes carries this run's random tag and is removed
at the end, whether the test passed or not.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

# a hub as root that makes Unix accounts: the full tier only (`make check`), never a contributor's `make test`
pytestmark = pytest.mark.slow

if os.geteuid() != 0 or not shutil.which("useradd"):
    pytest.skip("needs root and useradd: it makes Unix accounts for learners", allow_module_level=True)
pytest.importorskip("jupyterhub", reason="JupyterHub is not installed (the test extra has it: make setup)")
psutil = pytest.importorskip("psutil")
requests = pytest.importorskip("requests")

from hub_kernels import RemoteKernel, text_of  # noqa: E402

from labkit.cli import class_env, classroom  # noqa: E402
from labkit.errors import InvalidSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TAG = f"lk{secrets.token_hex(2)}"
PREFIX = f"{TAG}-"
LEARNERS = ["ada", "bob"]
PASSWORD = "a-long-enough-password"
#: hub start (with the learner environment), 2 logins and first starts, lesson 00, stop
BUDGET_S = 200


def say(msg: str) -> None:
    print(f"[root hub {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ports() -> int:
    """A port whose next two are free too (the hub's API and its proxy's)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000 and class_env.ports_free("127.0.0.1", port) is None:
            return port
    pytest.fail("no three free ports in a row")


def ours() -> list:
    """This run's accounts (the teacher's and the learners')."""
    return [e for e in pwd.getpwall() if e.pw_name.startswith(TAG)]


def remove_everything(base: Path) -> None:
    """Every process, account, socket folder and file of this run."""
    uids = {e.pw_uid for e in ours()}
    for p in psutil.process_iter(["uids", "environ"]):
        try:
            if p.info["uids"].real in uids or (p.info["environ"] or {}).get(
                "LABKIT_SHARED_CACHE", ""
            ).startswith(str(base)):
                p.kill()
        except (psutil.Error, AttributeError):
            continue
    time.sleep(0.5)
    for e in ours():
        subprocess.run(["userdel", "--remove", e.pw_name], capture_output=True)
        for folder in Path(tempfile.gettempdir()).glob(f"labkit-{e.pw_uid}-*"):
            shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def teacher():
    """The teacher's checkout and venv, in a home no other account can enter."""
    base = Path(tempfile.mkdtemp(prefix="labkit-class-root-", dir="/tmp"))
    base.chmod(0o755)
    try:
        home = base / "teacher"
        subprocess.run(["useradd", "--create-home", "--home-dir", str(home), f"{TAG}teacher"], check=True)
        home.chmod(0o700)
        checkout = home / "workbook"
        for part in (*class_env.WORKBOOK_PARTS, "class"):
            src = ROOT / part
            if src.is_dir():
                shutil.copytree(src, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, checkout / part)
        venv = checkout / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        # the packages: this test run's (JupyterHub, labkit's dependencies); labkit: the checkout's
        (Path(site) / "workbook.pth").write_text(
            f"{checkout}\nimport site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
        )
        (venv / "node").symlink_to(Path(classroom.proxy_command()).parents[2])  # `make proxy`'s
        subprocess.run(["chown", "-R", f"{TAG}teacher:", str(home)], check=True)
        yield dict(base=base, home=home, checkout=checkout, python=python)
    except InvalidSpec as exc:
        pytest.skip(str(exc))  # no proxy: tests/test_class_hub.py fails for it in CI
    finally:
        remove_everything(base)


def leftovers(uids: set, folder: str) -> list:
    """Processes of the learners' accounts or of the class that still run (a zombie runs nothing)."""
    out = []
    for p in psutil.process_iter(["uids", "environ", "status"]):
        try:
            ours = (
                p.info["uids"].real in uids or (p.info["environ"] or {}).get("LABKIT_SHARED_CACHE") == folder
            )
            if ours and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, AttributeError):
            continue
    return out


def class_env_vars(base: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABKIT_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(
        LABKIT_CLASS_DIR=str(base / "class"),
        LABKIT_CLASS_ENV=str(base / "env"),
        LABKIT_CLASS_HOMES=str(base / "homes"),
        LABKIT_CLASS_ACCOUNT_PREFIX=PREFIX,
        LABKIT_CLASS_IP="127.0.0.1",
        LABKIT_CLASS_PORT=str(port),
        LABKIT_CLASS_IDLE_SECONDS="0",
    )
    return env


def labkit_class(teacher, command: str, env: dict, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(teacher["python"]), "-m", "labkit", "class", command],
        cwd=teacher["checkout"], env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def log_in(url: str, name: str, deadline: float) -> tuple:
    """Log in on the hub's login page as a learner would (a first login sets the password),
    wait for the server it starts, and make an API token for the test.

    Returns:
        (the browser session, the token).
    """
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=30).raise_for_status()
    xsrf = s.cookies.get("_xsrf")
    r = s.post(
        f"{url}/hub/login",
        data=dict(username=name, password=PASSWORD, _xsrf=xsrf),
        timeout=60,
        allow_redirects=False,
    )
    assert r.status_code == 302, (name, r.status_code, r.text[-500:])
    s.get(f"{url}/hub/spawn", timeout=60)
    headers = {"X-XSRFToken": xsrf}
    while time.monotonic() < deadline:
        model = s.get(f"{url}/hub/api/users/{name}", headers=headers, timeout=30).json()
        if model.get("servers", {}).get("", {}).get("ready"):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"{name}'s server did not start in time")
    # a token for the test, asked with the learner's name and password (JupyterHub's token API)
    auth = dict(username=name, password=PASSWORD)
    r = requests.post(
        f"{url}/hub/api/users/{name}/tokens", json={"auth": auth, "note": "root test"}, timeout=30
    )
    r.raise_for_status()
    return s, r.json()["token"]


WHO = textwrap.dedent("""
    import json, os, pwd, sys, labkit
    home = os.path.expanduser("~")
    open(os.path.join(home, "secret.txt"), "w").write("mine")
    print("LABKIT-WHO " + json.dumps(dict(account=pwd.getpwuid(os.getuid()).pw_name, home=home,
        mode=oct(os.stat(home).st_mode & 0o777), python=sys.executable, labkit=labkit.__file__)))
""")
PEEK = textwrap.dedent("""
    import json, os
    tried = {}
    for path in PATHS:
        try:
            tried[path] = "read: " + (open(path).read() if os.path.isfile(path) else str(os.listdir(path)))
        except OSError as exc:
            tried[path] = type(exc).__name__
    print("LABKIT-PEEK " + json.dumps(tried))
""")


def run(kernel: RemoteKernel, code: str, tag: str) -> dict:
    out = kernel.execute(code)
    text = text_of(out["outputs"])
    assert out["status"] == "ok" and tag in text, text[-800:]
    return json.loads(text.split(tag + " ", 1)[1])


def test_a_class_as_root_with_the_checkout_in_a_private_home(teacher):
    t0 = time.monotonic()
    deadline = t0 + BUDGET_S
    base = teacher["base"]
    port = ports()
    url = f"http://127.0.0.1:{port}"
    env = class_env_vars(base, port)
    (base / "class").mkdir()
    (base / "class" / "learners.txt").write_text("\n".join(LEARNERS) + "\n")
    assert class_env.probe(teacher["python"]) is not None  # learners cannot run the teacher's venv
    started = labkit_class(teacher, "start", env)
    say(f"class start: exit {started.returncode} in {time.monotonic() - t0:.1f} s")
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        assert f"learners open {url}/" in started.stdout, started.stdout
        assert (
            f"account of their own ({PREFIX}<name>" in started.stdout
            and "2 learners listed" in started.stdout
        )
        made = json.loads((base / "env" / "labkit-env.json").read_text())
        assert str(teacher["checkout"]) in made["copied"], made  # the workbook, copied where learners read it

        # someone not on the list cannot log in, even with a first-use password
        s = requests.Session()
        s.get(f"{url}/hub/login", timeout=30)
        form = dict(username="mallory", password=PASSWORD, _xsrf=s.cookies.get("_xsrf"))
        r = s.post(f"{url}/hub/login", data=form, allow_redirects=False, timeout=30)
        assert r.status_code == 403, r.status_code

        tokens = {name: log_in(url, name, deadline)[1] for name in LEARNERS}
        say(f"{len(LEARNERS)} learners logged in, servers ready at {time.monotonic() - t0:.1f} s")
        kernels = {n: RemoteKernel(f"{url}/user/{n}/", tokens[n], timeout_s=120) for n in LEARNERS}
        try:
            who = {n: run(kernels[n], WHO, "LABKIT-WHO") for n in LEARNERS}
            for n, w in who.items():
                assert w["account"] == PREFIX + n and w["home"] == str(base / "homes" / (PREFIX + n)), w
                assert w["mode"] == "0o700", w
                assert w["python"].startswith(str(base / "env")) and w["labkit"].startswith(
                    str(base / "env")
                ), w
            ada_home = who["ada"]["home"]
            peek = run(
                kernels["bob"],
                PEEK.replace(
                    "PATHS", repr([ada_home, f"{ada_home}/secret.txt", f"{ada_home}/labkit-lessons"])
                ),
                "LABKIT-PEEK",
            )
            assert set(peek.values()) == {"PermissionError"}, peek
            # lesson 00, cell by cell, in ada's own copy
            r = requests.get(
                f"{url}/user/ada/api/contents/00_start_here.ipynb",
                headers={"Authorization": f"token {tokens['ada']}"}, timeout=30,
            )  # fmt: skip
            r.raise_for_status()
            cells = [c["source"] for c in r.json()["content"]["cells"] if c["cell_type"] == "code"]
            failed = [(code[:60], text_of(o["outputs"])[-300:]) for code in cells
                      if (o := kernels["ada"].execute(code))["status"] != "ok"]  # fmt: skip
            assert failed == [], failed
            say(f"lesson 00 ran in ada's server; bob cannot read ada's files; {time.monotonic() - t0:.1f} s")
        finally:
            for k in kernels.values():
                k.close(delete=False)  # left running: stopping the class must end it

        uids = {pwd.getpwnam(PREFIX + n).pw_uid for n in LEARNERS}
        running = [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real in uids]
        assert len(running) >= 2 * len(LEARNERS), running  # a server and a kernel each
        t_stop = time.monotonic()
        stopped = labkit_class(teacher, "stop", env)
        say(f"class stop: exit {stopped.returncode} in {time.monotonic() - t_stop:.1f} s")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
        gone_by = time.monotonic() + 10
        while time.monotonic() < gone_by and (left := leftovers(uids, env["LABKIT_CLASS_DIR"])):
            time.sleep(0.2)
        assert left == [], left
        say(f"class stopped, nothing left running; {time.monotonic() - t0:.1f} s in all")
    except BaseException:
        log = base / "class" / "hub" / "jupyterhub.log"
        print("\n".join(log.read_text().splitlines()[-60:]) if log.exists() else "(no hub log)")
        raise


def test_an_interpreter_learners_cannot_run_is_refused_in_one_line(teacher):
    t0 = time.monotonic()
    base = teacher["base"]
    env = class_env_vars(base, ports())
    env.update(LABKIT_CLASS_PYTHON=str(teacher["python"]), LABKIT_CLASS_DIR=str(base / "refused"))
    done = labkit_class(teacher, "start", env)
    lines = done.stderr.strip().splitlines()
    say(f"refused in {time.monotonic() - t0:.1f} s: {lines}")
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"LABKIT_CLASS_PYTHON='{teacher['python']}'" in lines[0]
    assert f"cannot run {teacher['python']} ({teacher['home']} is private to its owner)" in lines[0]
    assert "set LABKIT_CLASS_PYTHON to one every account can run" in lines[0]
    assert not (base / "refused" / "hub" / "jupyterhub.pid").exists()
