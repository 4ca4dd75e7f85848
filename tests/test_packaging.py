"""pyproject.toml and environment.yml list the same packages with the same pins; the installed
environment honours them; the README's quick start is two commands; the gpu-skip hook works."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: jupyterlab itself depends on tomli there
    tomllib = pytest.importorskip("tomli", reason="Python 3.10 needs tomli to read pyproject.toml")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
ENVIRONMENT = ROOT / "environment.yml"


# ---- parsing ------------------------------------------------------------------------------------
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*?)\s*$")


def normalise_name(name: str) -> str:
    """PEP 503: case-insensitive, runs of '-', '_', '.' are the same."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(text: str) -> tuple[str, str]:
    """``'Plotly >= 6'`` -> ``('plotly', '>=6')``: normalised name and whitespace-free specifier,
    its comma-separated clauses sorted. Environment markers (``; ...``) are not allowed here."""
    text = text.split(" #", 1)[0]
    assert ";" not in text, f"environment markers are not mirrored in environment.yml: {text!r}"
    m = _REQ.match(text)
    assert m, f"cannot parse requirement {text!r}"
    name, spec = m.groups()
    spec = ",".join(sorted(c for c in re.sub(r"\s+", "", spec).split(",") if c))
    return normalise_name(name), spec


def as_pins(reqs) -> dict[str, str]:
    pins: dict[str, str] = {}
    for r in reqs:
        name, spec = parse_requirement(r)
        assert name not in pins, f"{name} listed twice"
        pins[name] = spec
    return pins


def load_pyproject(text: str | None = None) -> dict:
    return tomllib.loads(PYPROJECT.read_text() if text is None else text)


def parse_env_lines(text: str) -> dict:
    """A tiny parser for the subset of YAML environment.yml uses (scalars and block lists, one
    level of ``- pip:`` nesting), for machines without PyYAML. Returns what yaml.safe_load does."""
    doc: dict = {}
    key = None
    pip_indent = None  # indentation of the "- pip:" item while inside its sub-list
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if indent == 0:
            k, _, v = body.partition(":")
            key, pip_indent = k.strip(), None
            doc[key] = v.strip() if v.strip() else []
            continue
        assert body.startswith("- "), f"unsupported line in environment.yml: {raw!r}"
        item = body[2:].strip()
        if pip_indent is not None and indent > pip_indent:
            doc[key][-1]["pip"].append(item)
            continue
        pip_indent = None
        if item.endswith(":"):
            doc[key].append({item[:-1]: []})
            pip_indent = indent
        else:
            doc[key].append(item)
    return doc


def load_env(text: str | None = None) -> dict:
    text = ENVIRONMENT.read_text() if text is None else text
    try:
        import yaml  # pulled in by jupyterlab (jupyter-server -> jupyter-events); not a dependency of ours
    except ModuleNotFoundError:
        return parse_env_lines(text)
    return yaml.safe_load(text)


def env_pins(env: dict) -> tuple[dict[str, str], str]:
    """(package -> specifier for everything the environment installs except python, pip and the
    editable labkit; python's specifier)."""
    reqs, python = [], None
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            assert set(dep) == {"pip"}, f"unexpected nested section {dep}"
            reqs += [d for d in dep["pip"] if not d.startswith(("-e ", "--editable"))]
            continue
        name, spec = parse_requirement(dep)
        if name == "python":
            python = spec
        elif name != "pip":
            reqs.append(dep)
    assert python is not None, "environment.yml must pin python"
    return as_pins(reqs), python


def env_comment_extras(text: str) -> dict[str, dict[str, str]]:
    """The ``# extra NAME: req req ...`` comment lines of environment.yml."""
    out = {}
    for m in re.finditer(r"^#\s*extra\s+([\w-]+):\s*(.+)$", text, re.M):
        out[m.group(1)] = as_pins(m.group(2).split())
    return out


def mismatches(pyproject: dict, env: dict, env_text: str) -> list[str]:
    """Every way the two files disagree, as readable lines (empty when they agree)."""
    project = pyproject["project"]
    extras = project["optional-dependencies"]
    want = as_pins(project["dependencies"] + extras["test"])
    got, python = env_pins(env)
    problems = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            problems.append(f"{name}: in pyproject.toml (core/test), missing from environment.yml")
        elif name not in want:
            problems.append(f"{name}: in environment.yml, missing from pyproject.toml (core/test)")
        elif want[name] != got[name]:
            problems.append(f"{name}: pyproject.toml says {want[name]!r}, environment.yml says {got[name]!r}")
    requires = re.sub(r"\s+", "", project["requires-python"])
    if python != requires:
        problems.append(f"python: requires-python is {requires!r}, environment.yml says {python!r}")
    comments = env_comment_extras(env_text)
    for extra in ("cuda12", "cuda13", "class", "torch"):
        if extra not in comments:
            problems.append(f"extra {extra}: no '# extra {extra}: ...' line in environment.yml")
        elif comments[extra] != as_pins(extras[extra]):
            says = f"pyproject.toml says {as_pins(extras[extra])}, environment.yml says {comments[extra]}"
            problems.append(f"extra {extra}: {says}")
    return problems


# ---- the two files agree ------------------------------------------------------------------------
def test_pyproject_and_environment_agree():
    assert mismatches(load_pyproject(), load_env(), ENVIRONMENT.read_text()) == []


@pytest.mark.parametrize(
    "file, old, new, expect",
    [
        ("env", "- plotly>=6", "- plotly", "plotly: pyproject.toml says '>=6', environment.yml says ''"),
        ("env", "      - nvidia-cudnn-frontend==1.28.*\n", "", "nvidia-cudnn-frontend: in pyproject.toml"),
        ("env", "- tqdm\n", "- tqdm\n  - scipy\n", "scipy: in environment.yml, missing"),
        ("env", "- python>=3.10", "- python>=3.11", "python: requires-python"),
        ("env", "cupy-cuda13x nvidia", "cupy-cuda12x nvidia", "extra cuda13"),
        ("env", "jupyterhub-firstuseauthenticator nvidia-ml-py", "nvidia-ml-py", "extra class"),
        ("env", "extra torch: torch torchvision", "extra torch: torch", "extra torch"),
        ("pyproject", '"ipywidgets>=8"', '"ipywidgets>=8.1"', "ipywidgets: pyproject.toml says '>=8.1'"),
        ("pyproject", '    "hypothesis",\n', "", "hypothesis: in environment.yml, missing"),
    ],
)
def test_a_mismatch_is_caught(file, old, new, expect):
    """The comparison can fail: each edit to one file alone is reported."""
    py_text, env_text = PYPROJECT.read_text(), ENVIRONMENT.read_text()
    if file == "env":
        assert old in env_text
        env_text = env_text.replace(old, new, 1)
    else:
        assert old in py_text
        py_text = py_text.replace(old, new, 1)
    problems = mismatches(load_pyproject(py_text), load_env(env_text), env_text)
    assert any(expect in p for p in problems), problems


def test_names_are_normalised():
    assert parse_requirement("Nvidia_CUDNN.frontend == 1.28.*") == ("nvidia-cudnn-frontend", "==1.28.*")
    assert parse_requirement("numpy<3, >=1.24") == parse_requirement("numpy >=1.24,<3")


def test_fallback_parser_agrees_with_yaml():
    yaml = pytest.importorskip("yaml", reason="PyYAML absent: only the fallback parser is in use")
    text = ENVIRONMENT.read_text()
    assert parse_env_lines(text) == yaml.safe_load(text)


def test_no_cuda_wheels_in_core_or_test():
    project = load_pyproject()["project"]
    names = as_pins(project["dependencies"] + project["optional-dependencies"]["test"])
    assert not [n for n in names if n.startswith(("cupy", "nvidia-cudnn-cu", "nvidia-cuda", "torch"))]
    for extra in ("cuda12", "cuda13"):
        assert as_pins(project["optional-dependencies"][extra])["nvidia-cudnn-frontend"] == "==1.28.*"


# ---- the installed environment ------------------------------------------------------------------
def test_installed_versions_satisfy_pins():
    from importlib import metadata

    try:
        metadata.distribution("labkit")
    except metadata.PackageNotFoundError:
        pytest.skip("not running in the project environment (labkit is not installed): use `make test`")
    specifiers = pytest.importorskip("packaging.specifiers")
    project = load_pyproject()["project"]
    wrong = []
    for name, spec in as_pins(project["dependencies"] + project["optional-dependencies"]["test"]).items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} is not installed")
            continue
        if not specifiers.SpecifierSet(spec).contains(version, prereleases=True):
            wrong.append(f"{name} {version} does not satisfy {spec!r}")
    assert wrong == [], "re-run `make setup`: " + "; ".join(wrong)


def test_cudnn_frontend_imports_without_a_gpu():
    """The real 'cudnn present' path: the frontend imports on any machine (no GPU needed)."""
    from importlib import metadata

    try:
        version = metadata.version("nvidia-cudnn-frontend")
    except metadata.PackageNotFoundError:
        pytest.skip("nvidia-cudnn-frontend not installed (it comes with the `test` extra)")
    import cudnn

    assert version.startswith("1.28.")
    assert hasattr(cudnn, "pygraph")


# ---- quick start, the two tiers and CI ------------------------------------------------------------
def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README.md needs a '## Quick start' section"
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", section.group(1), re.S)
    commands = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip()
        and not line.strip().startswith("#")
        and not line.strip().startswith(("git clone", "cd "))
    ]
    assert commands == ["make lab", "make test"]


def test_ci_runs_the_readme_full_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make check\b", ci, re.M), ".ci/run must run `make check`, the full tier"
    assert "set -euo pipefail" in ci
    readme = (ROOT / "README.md").read_text()
    assert "`make check`" in readme and "`make test`" in readme, "the README names both tiers"


def test_the_quick_tier_leaves_out_only_the_browser_and_slow_tests():
    make = (ROOT / "Makefile").read_text()
    quick = re.search(r"^QUICK_TIER := (.*)$", make, re.M)
    assert quick and quick.group(1).startswith('-m "not browser and not slow"'), quick
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} >= {"gpu", "browser", "slow"}


def test_the_full_tier_is_the_quick_tier_then_every_test_it_leaves_out():
    """`make check` runs the quick tier on every core, then the tests it leaves out (the browser and
    slow ones) one at a time: the two selections together are every test, none twice."""
    make = (ROOT / "Makefile").read_text()
    rest = re.search(r"^REST_TIER := (.*)$", make, re.M)
    assert rest and rest.group(1) == '-m "browser or slow"', rest
    assert "-n" not in rest.group(1).split(), "the browser tests keep their time budgets: one at a time"
    check = re.search(r"^check:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    assert [re.search(r"TIER_ARGS='\$\((\w+)\)'", line).group(1) for line in check.splitlines()] == [
        "QUICK_TIER",
        "REST_TIER",
    ]


# ---- the gpu skip hook in conftest.py -----------------------------------------------------------
_FAKE_ENV = {
    "recorded": "def mode():\n    return SimpleNamespace(name='recorded', reason='no CUDA device')\n",
    "live": "def mode():\n    return SimpleNamespace(name='live', reason='NVIDIA H100, cuDNN 9.27')\n",
    "raises": "def mode():\n    raise RuntimeError('LABKIT_MODE=live but there is no CUDA device')\n",
    # (a fake labkit without env.py is not enough: the editable install's finder would supply the real one)
    "broken": "raise ModuleNotFoundError(\"No module named 'cupy'\", name='cupy')\n",
}


@pytest.mark.parametrize(
    "case, summary, reason",
    [
        pytest.param(
            "recorded",
            "2 passed, 2 skipped",
            "needs a CUDA GPU (labkit mode is recorded: no CUDA device)",
            id="recorded",
        ),
        pytest.param("live", "4 passed", None, id="live"),
        pytest.param(
            "raises",
            "2 passed, 2 skipped",
            "needs a CUDA GPU (labkit.env.mode() failed: RuntimeError: LABKIT_MODE=live",
            id="raises",
        ),
        pytest.param(
            "broken",
            "2 passed, 2 skipped",
            "labkit.env not importable: ModuleNotFoundError: No module named 'cupy'",
            id="broken",
        ),
    ],
)
def test_gpu_tests_skip_visibly_unless_live(tmp_path, case, summary, reason):
    fake = tmp_path / "fake" / "labkit"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "env.py").write_text("from types import SimpleNamespace\n" + _FAKE_ENV[case])
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), suite / "conftest.py")
    cfg = load_pyproject()["tool"]["pytest"]["ini_options"]
    (suite / "pytest.ini").write_text(
        "[pytest]\naddopts = "
        + cfg["addopts"]
        + "\nmarkers =\n"
        + "".join(f"    {m}\n" for m in cfg["markers"])
    )
    (suite / "test_marked.py").write_text(
        textwrap.dedent("""\
        import pytest

        @pytest.mark.gpu
        def test_on_gpu():
            pass

        @pytest.mark.gpu
        def test_in_its_turn():  # live, a GPU test holds the turn: no one else may take it
            import conftest, filelock
            with pytest.raises(filelock.Timeout):
                filelock.FileLock(conftest.gpu_turn_file(), timeout=0).acquire()

        @pytest.mark.browser
        def test_in_browser():
            pass

        def test_on_cpu():
            pass
    """)
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")])
    )
    env.pop("PYTEST_ADDOPTS", None)
    env["LABKIT_TEST_GPU_TURN"] = str(tmp_path / "gpu-turn.lock")
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the hook under test; starts in a fraction of the time
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", str(suite)],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert summary in out, out
    if reason is None:
        assert "SKIPPED" not in out, out
    else:
        assert re.search(r"SKIPPED \[1\] test_marked.py:\d+: " + re.escape(reason), out), out


def test_warm_kernels_without_a_gpu_says_so_and_succeeds():
    """``make setup`` runs ``python -m labkit warm-kernels`` on every machine: without a live GPU it
    compiles nothing, says why, and exits 0 (setup must not fail on a CPU machine)."""
    import subprocess
    import sys

    from labkit import env

    if env.mode().live:
        pytest.skip("a live GPU: tests/test_numerics_gpu.py runs the real warm-up")
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "warm-kernels"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "nothing to compile (recorded mode:" in done.stdout
    assert "warm-kernels" in (ROOT / "Makefile").read_text()
