"""The front door holds: every snippet in README.md and docs/*.md runs (Python in recorded mode,
every command line that works without a GPU), a line marked ``# GPU`` or ``# long`` answers
``--help``, inline commands name real commands, options, targets and files; docs/benchmarks.md
is what ``python -m labkit bench summary`` writes; and the repository speaks about itself as it is
(no work-item numbers, no development-step ordinals, no paths outside the repository)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: a command line's trailing comment that says it is not run here, only asked for --help
NOT_RUN = re.compile(r"#.*\b(GPU|long|writes)\b")  # GPU, minutes, or it rewrites a committed file
README_LINES = 300


def blocks(language: str):
    """(file, line, text) of every fenced block in the docs in ``language``."""
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == language:
                yield doc.relative_to(ROOT), text[: m.start()].count("\n") + 1, m.group(2)


def shell_lines():
    for doc, line, text in blocks("bash"):
        for i, raw in enumerate(text.splitlines()):
            if raw.strip() and not raw.strip().startswith("#"):
                yield pytest.param(raw.strip(), id=f"{doc}:{line + 1 + i}")


def run(argv, cwd, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, LABKIT_MODE="recorded", PYTHONPATH=str(ROOT))
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def as_argv(line: str, tmp: Path) -> list:
    """A documented command line as this interpreter and this checkout run it."""
    argv = shlex.split(line.split(" #")[0])
    if argv[0] in ("python", "python3", ".venv/bin/python"):
        argv[0] = sys.executable
    if argv[0] == ".venv/bin/pip":
        argv[:1] = [sys.executable, "-m", "pip"]
    argv = [str(ROOT / a) if a.startswith("scripts/") else a for a in argv]
    if argv[1:5] == ["-m", "labkit", "bench", "summary"] and "--out" not in argv:
        argv += ["--out", str(tmp / "benchmarks.md")]  # the page itself is compared below
    return argv


def help_argv(argv: list) -> list:
    """The same command asked for ``--help``: ``python -m labkit CMD``, a script, or gpu.sh."""
    if argv[1:3] == ["-m", "labkit"]:
        return argv[:4] + ["--help"]
    return argv[:2] + ["--help"]


def extras_dependencies() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:
        tomllib = pytest.importorskip("tomli")
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name: {re.split(r"[<>=!~\[; ]", d)[0] for d in deps} for name, deps in found.items()}


def extras() -> set:
    return set(extras_dependencies())


#: a command run for a documented line -> what it gave: a command written the same way in two docs
#: (README.md and the page that says more), or the one ``--help`` that several lines marked ``# GPU``
#: ask for (``python -m labkit report --help``), is the same command, run once
_RAN: dict = {}


def run_once(argv: list, cwd: Path, timeout=300) -> subprocess.CompletedProcess:
    """`run`, once per test process for each command (its output goes to ``cwd``, read by no test)."""
    key = tuple(argv)
    if key not in _RAN:
        _RAN[key] = run(argv, cwd, timeout=timeout)
    return _RAN[key]


@pytest.mark.parametrize("line", list(shell_lines()))
def test_every_command_line_runs_or_answers_help(line, tmp_path):
    argv = as_argv(line, tmp_path)
    if argv[0] == "git" or argv[0] == "cd":
        assert line.startswith("git clone <this repository> && cd <its folder>"), line
        return
    if argv[0] == "make":
        done = run(["make", "-n", *[a for a in argv[1:] if a != "-n"]], ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        return
    if argv[1:4] == ["-m", "pip", "install"] and "--index-url" in argv:
        # a build from another index (PyTorch's CPU wheels) of packages an extra names
        named = {a for a in argv[4:] if not a.startswith("-") and "://" not in a}
        deps = {d for ds in extras_dependencies().values() for d in ds}
        assert named and named <= deps, f"{line}: {named - deps} in no extra of pyproject.toml"
        return
    if argv[1:4] == ["-m", "pip", "install"]:
        wanted = {e for a in argv if a.startswith((".[", '".[')) for e in a.strip('".[]').split(",")}
        assert wanted and wanted <= extras(), f"{line}: extras {wanted - extras()} not in pyproject.toml"
        return
    if NOT_RUN.search(line):
        done = run_once(help_argv(argv), tmp_path, timeout=120)
        assert done.returncode == 0 and "usage" in done.stdout.lower() + done.stderr.lower(), done.stderr
        return
    done = run_once(argv, tmp_path)
    assert done.returncode == 0, (
        f"{line}: exit {done.returncode}\n{done.stderr[-1500:]}\n"
        "(a command that needs a GPU or minutes is marked `# GPU` or `# long` on its line)"
    )


@pytest.mark.parametrize(
    "block", [pytest.param(text, id=f"{doc}:{line}") for doc, line, text in blocks("python")]
)
def test_every_python_block_runs_in_recorded_mode(block, tmp_path):
    done = run([sys.executable, "-c", block], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_block_is_python_or_bash():
    for doc in DOCS:
        for m in FENCE.finditer(doc.read_text()):
            assert m.group(1) in ("python", "bash"), (
                f"{doc.name}: a ```{m.group(1)} block is neither run nor checked"
            )


# ---- inline commands ---------------------------------------------------------------------------
INLINE = re.compile(r"`([^`\n]+)`")


def inline_commands():
    for doc in DOCS:
        for m in INLINE.finditer(doc.read_text()):
            code = m.group(1).split(" #")[0].strip()
            if re.match(
                r"(\.venv/bin/)?python3? -m labkit |make |bash scripts/|(\.venv/bin/)?python3? scripts/", code
            ):
                yield doc.name, code


def test_inline_commands_name_real_commands_options_and_targets():
    from labkit.cli.main import parser

    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    steps = set(re.findall(r"^step_(\w+)\(\)", (ROOT / "scripts" / "gpu.sh").read_text(), re.M))
    seen = 0
    for doc, code in inline_commands():
        seen += 1
        words = shlex.split(code.replace("<", "").replace(">", ""))
        if words[0] == "make":
            assert words[1] in targets, f"{doc}: `{code}`: no target {words[1]!r} in the Makefile"
        elif words[0] == "bash":
            assert (ROOT / words[1]).is_file(), f"{doc}: `{code}`"
            assert all(w.startswith("-") or w in steps for w in words[2:]), f"{doc}: `{code}`: unknown step"
        elif words[1] == "-m":
            stand_in = {"NET": "resnet50", "PRESET": "resnet50", "DIR": "x", "WHICH": "summary"}
            args = [stand_in.get(w, w) for w in words[3:] if w != "..."]
            if args and args[0] == "report" and "--out" not in args:
                args += ["--out", "x"]  # required; the inline text names the command, not every option
            try:
                parser().parse_args(args)
            except SystemExit as exc:
                pytest.fail(f"{doc}: `{code}` does not parse ({exc})")
        else:
            assert (ROOT / words[1]).is_file(), f"{doc}: `{code}`: no such script"
    assert seen > 10


PATH = re.compile(r"(?<![\w./-])((?:scripts|docs|data|tests|labkit|notebooks|class)/[\w./-]*\w)")


def test_every_path_the_docs_name_exists():
    missing = []
    for doc in DOCS:
        for m in PATH.finditer(doc.read_text()):
            path = m.group(1)
            if path == "class/README.md":
                continue  # the class's JupyterHub set-up, beside this checkout's
            if not (ROOT / path).exists() and not (doc.parent / path).exists():
                missing.append(f"{doc.name}: {path}")
    assert missing == []


def test_the_readme_is_short_and_shows_every_lesson():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shot = f"docs/screenshots/{nb.stem}.png"
        assert shot in readme and (ROOT / shot).is_file(), shot
        assert (ROOT / shot).stat().st_size < 300_000, f"{shot}: keep the README's pictures small"


# ---- docs/benchmarks.md ------------------------------------------------------------------------
def test_benchmarks_md_is_what_the_bench_summary_writes():
    from labkit.cli import bench_summary

    assert (ROOT / "docs" / "benchmarks.md").read_text() == bench_summary.render(), (
        "docs/benchmarks.md is generated: run `python -m labkit bench summary`"
    )


def test_every_benchmark_table_names_its_gpu_date_and_commit():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    sections = text.split("\n## ")[1:]
    assert len(sections) == len(list((ROOT / "data" / "bench").glob("*.csv")))
    for s in sections:
        assert re.search(r"(GPU|machine): .+ · date: .+ · commit: ", s), s.splitlines()[0]


# ---- the repository as it is ------------------------------------------------------------------
ORDINALS = "second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth"
HISTORY = [
    (re.compile(r"\bissues? #?\d+", re.I), "a work-item number"),
    (re.compile(rf"\b(?:{ORDINALS}|\d+(?:st|nd|rd|th))\s+sessions?\b", re.I), "a development-step ordinal"),
    (re.compile(r"\bsession \d+\b", re.I), "a development-step number"),
    (re.compile(r"\.\./shared|(?<![\w.])\.old/|\bFACTS\b|/work/"), "a path outside the repository"),
]
#: edited on another branch at the time of writing; scrubbed when it comes in
PENDING: set = set()


def scrubbed_files():
    yield from DOCS
    yield from sorted((ROOT / "notebooks").glob("*.ipynb"))
    yield from sorted((ROOT / "labkit").rglob("*.py"))
    yield from sorted(p for p in (ROOT / "scripts").iterdir() if p.is_file())


def test_no_development_history_in_the_docs_notebooks_labkit_and_scripts():
    found = []
    for path in scrubbed_files():
        rel = str(path.relative_to(ROOT))
        if rel in PENDING:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for pattern, what in HISTORY:
                if m := pattern.search(line):
                    found.append(f"{rel}:{n}: {what}: {m.group(0)!r}")
    assert found == []


@pytest.mark.parametrize(
    "text, bad",
    [
        ("as issue 27 asked", True),
        ("the ninth session's code", True),
        ("see ../shared/gpu-host/x.sh", True),
        ("from .old/ as before", True),
        ("FACTS says", True),
        ("the first session of a class", False),
        ("env.facts()", False),
        ("python-jsonschema/jsonschema#1428", False),
    ],
)
def test_the_history_patterns_catch_what_they_should(text, bad):
    assert any(p.search(text) for p, _ in HISTORY) == bad


def test_at_most_twelve_scripts():
    assert len([p for p in (ROOT / "scripts").iterdir() if p.is_file()]) <= 12


def test_the_snippet_check_fails_an_unmarked_gpu_line_and_a_wrong_call(tmp_path):
    """What the checks above would catch: a GPU command not marked as one, a call that is not labkit's."""
    if not __import__("labkit").env.mode().live:
        assert run(as_argv("python -m labkit fill --quick", tmp_path), tmp_path).returncode == 2
    assert run([sys.executable, "-c", "import labkit; labkit.mode()"], tmp_path).returncode == 1
