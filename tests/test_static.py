"""Names that do not exist, found without running the code: labkit's GPU modules import CuPy, so on a
machine without a GPU their tests are skipped and a broken line in them would go unseen until a GPU
run (it happened: a stray line in gpu/engine.py).

pyflakes' three fatal checks as ruff runs them (F821 undefined name, F822 undefined name in
``__all__``, F823 local referenced before assignment; the same rules, ported), with every ``# noqa``
ignored: the whole tree in a tenth of a second where pyflakes took seconds. tests/test_style.py runs
all of ruff's rules, but it honours ``# noqa`` and its pending list; this check honours neither.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what would fail when the line runs (unused imports are re-exports here)
FATAL = "F821,F822,F823"


def test_labkit_and_the_scripts_use_no_undefined_name():
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", FATAL, "--ignore-noqa", "--no-cache"]
        + ["--output-format", "json", "labkit", "scripts", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode in (0, 1), run.stderr
    found = [  # a syntax error comes as "invalid-syntax", whatever is selected
        f"{Path(f['filename']).relative_to(ROOT)}:{f['location']['row']}: {f['code']} {f['message']}"
        for f in json.loads(run.stdout or "[]")
    ]
    assert not found, "\n".join(found)
