"""The code's form, checked by tools: ruff's lint and formatter find nothing in labkit/, tests/ and
scripts/ (pyproject.toml's [tool.ruff]), and no line in labkit/ is over 110 characters (the
formatter leaves long strings and comments alone; E501 and this count catch them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("labkit", "tests", "scripts")
#: pyproject.toml's ``line-length``
LIMIT = 110

#: Files being rewritten elsewhere, with the findings they may still have ("format": the formatter
#: would rewrap a long line). Nothing else is let through in them. This set must shrink to empty:
#: a file that no longer needs its entry fails `test_pending_lists_only_what_is_still_pending`.
PENDING: dict = {}


def ruff(*args: str) -> list[dict]:
    """Run ``ruff <args> --output-format json`` on `TREES` from the repository root.

    Args:
        *args: the subcommand and its options, e.g. ``"check"`` or ``"format", "--check"``.

    Returns:
        One dict per finding, with ``path`` (relative to the root, POSIX), ``code`` and ``row``.
    """
    run = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--output-format", "json", *TREES],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode in (0, 1), run.stderr
    found = json.loads(run.stdout or "[]")
    return [
        dict(
            path=Path(f["filename"]).resolve().relative_to(ROOT).as_posix(),
            code=f["code"] if args[0] == "check" else "format",
            row=f["location"]["row"],
        )
        for f in found
    ]


def findings() -> list[dict]:
    """Every finding of ``ruff check`` and ``ruff format --check``, pending or not."""
    return ruff("check", "--no-cache") + ruff("format", "--check", "--no-cache")


def long_lines(path: Path) -> list[int]:
    """The line numbers of ``path`` longer than `LIMIT` characters."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [n for n, line in enumerate(lines, 1) if len(line) > LIMIT]


def test_ruff_finds_nothing_outside_pending():
    left = [f for f in findings() if f["code"] not in PENDING.get(f["path"], ())]
    assert not left, "\n".join(f"{f['path']}:{f['row']}: {f['code']}" for f in left)


def test_no_line_in_labkit_is_over_the_limit():
    over = [
        f"{path.relative_to(ROOT).as_posix()}:{n}"
        for path in sorted((ROOT / "labkit").rglob("*.py"))
        if "E501" not in PENDING.get(path.relative_to(ROOT).as_posix(), ())
        for n in long_lines(path)
    ]
    assert not over, f"lines over {LIMIT} characters:\n" + "\n".join(over)


def test_pending_lists_only_what_is_still_pending():
    seen = {(f["path"], f["code"]) for f in findings()}
    seen |= {(path, "E501") for path in PENDING if long_lines(ROOT / path)}
    stale = [
        f"{path}: {code}" for path, codes in PENDING.items() for code in codes if (path, code) not in seen
    ]
    assert not stale, "clean now; remove from PENDING:\n" + "\n".join(stale)
