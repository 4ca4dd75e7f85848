"""What the recorded hands-on tests of lessons 03-04 and 07-08 share: the shipped recordings' GPUs, a
learner's cell as its notebook holds it, a cell run as the notebook runs it, and a verdict's hint."""

from __future__ import annotations

import json
import re
from pathlib import Path

from labkit.experiments import handson_check
from labkit.present import check
from labkit.session import handson, lessons

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = {"h100-sxm": "H100 SXM", "h200": "H200 SXM"}


def body(lesson: str, name: str) -> str:
    """The learner's cell ``%%handson name`` of a lesson, as the notebook holds it (after its magic line)."""
    (nb,) = (ROOT / "notebooks").glob(f"{lesson}_*.ipynb")
    for cell in json.loads(nb.read_text())["cells"]:
        src = "".join(cell["source"])
        m = re.match(r"%%handson\s+(\w+)\s*\n", src)
        if m and m.group(1) == name:
            return src[m.end() :]
    raise AssertionError(f"{nb.name} has no %%handson {name} cell")


def flat(text: str) -> str:
    return " ".join(text.split())


def run(name: str, source: str, capsys, **given) -> tuple:
    """Run ``source`` as hands-on cell ``name``: (its namespace, what it printed)."""
    ns = {"lessons": lessons, "check": check, **given}
    handson.run(name, source, ns)
    return ns, capsys.readouterr().out


def assert_hinted(out: str, kind: str, gpu: str = "H100 SXM", first: bool = True, own=None):
    """A verdict that is not yet right, said to be simulated, with the hint of ``kind`` that leads."""
    said = flat(out[out.index("not yet") :])
    assert f"simulated from the {gpu} recording" in said, out
    pair = (own or {}).get(kind) or handson_check.HINTS[kind]
    assert "Hint: " + flat(pair[0 if first else 1])[:60] in said, out
