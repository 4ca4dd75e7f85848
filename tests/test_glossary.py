"""Words before they are used: lesson 00 defines each term of `TERMS` under an anchor of its own,
and in every lesson 01-10 the first mention of a term in the prose (headings, code and links to
other pages left out) is a link to that anchor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name[:2] != "00")
GLOSSARY = "00_start_here.ipynb"

#: anchor in lesson 00 -> how the lessons write the term (case aside)
TERMS = {
    "workspace": r"\bworkspaces?\b",
    "cudnn-graph": r"\bcuDNN graphs?\b",  # a bare "graph" is as often a CUDA graph
    "engine": r"\bengines?\b",
    "knob": r"\bknobs?\b",
    "plan": r"\bplans?\b",
    "heuristic": r"\bheuristics?\b",
    "autotune": r"\bautotun(?:e|es|ed|ing)\b",
    "fallback": r"\bfallbacks?\b|\bfall(?:s|ing)? back\b|\bfell back\b",
    "stream": r"\bstreams?\b",
    "event": r"\bevents?\b",
    "cuda-graph": r"\bCUDA[- ]graphs?\b",
    "handle": r"\bhandles?\b",
    "layout": r"\blayouts?\b",
    "direction": r"\bdirections?\b",
    "tensor-core": r"\btensor[- ]cores?\b",
    "hbm": r"\bHBM\w*",
    "arithmetic-intensity": r"\barithmetic intensity\b",
    "onednn": r"\boneDNN\b",
}
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)\)")
#: a link to a glossary anchor (lower case: a link to one of lesson 00's headings keeps its capitals)
GLOSSARY_ANCHOR = re.compile(re.escape(GLOSSARY) + r"#([a-z][a-z-]*)$")


def prose(path: Path) -> str:
    """A notebook's Markdown, in order, without fenced code, headings and inline code."""
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))
    return re.sub(r"`[^`]*`", " ", text)


def first_uses(text: str) -> dict:
    """Term anchor -> (whether its first mention links to the glossary, the words around it).

    A link to a glossary anchor counts as a linked mention of that term; the text of a link to
    anything else (another lesson, a web page) is not a mention."""
    marks, pieces, last = [], [], 0
    for m in LINK.finditer(text):
        pieces.append(text[last : m.start()])
        anchor = GLOSSARY_ANCHOR.match(m.group(2))
        if anchor:
            marks.append(anchor.group(1))
            pieces.append(f"\x00{len(marks) - 1}\x00")
        else:
            pieces.append(" ")
        last = m.end()
    pieces.append(text[last:])
    flat = "".join(pieces)
    found = {}
    for anchor, pattern in TERMS.items():
        linked = [m.start() for m in re.finditer(r"\x00(\d+)\x00", flat) if marks[int(m.group(1))] == anchor]
        bare = re.search(pattern, flat, re.I)
        first_linked = linked[0] if linked else None
        if bare is None and first_linked is None:
            continue
        ok = first_linked is not None and (bare is None or first_linked < bare.start())
        at = bare.start() if bare is not None else first_linked
        found[anchor] = (
            ok,
            re.sub(r"\x00\d+\x00", "[..]", flat[max(0, at - 50) : at + 40]).replace("\n", " "),
        )
    return found


def test_every_term_has_its_anchor_and_definition_in_lesson_00():
    cells = json.loads((NOTEBOOKS / GLOSSARY).read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for anchor in TERMS:
        m = re.search(rf'<a id="{anchor}"></a>\*\*([^*]+)\*\*([^:]*): (\S.{{40,}})', text)
        assert m, f"lesson 00 has no definition under <a id={anchor!r}>"
        assert re.search(TERMS[anchor], m.group(1) + m.group(2), re.I), (anchor, m.group(1) + m.group(2))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_a_lessons_first_use_of_a_term_links_to_the_glossary(path):
    loose = [f"{a}: ...{around}..." for a, (ok, around) in first_uses(prose(path)).items() if not ok]
    assert not loose, f"{path.name}: first uses not linked to {GLOSSARY}#<term>:\n  " + "\n  ".join(loose)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_every_glossary_link_names_a_term(path):
    anchors = [a.group(1) for m in LINK.finditer(prose(path)) if (a := GLOSSARY_ANCHOR.match(m.group(2)))]
    assert anchors and all(a in TERMS for a in anchors), anchors


def test_the_check_can_fail():
    uses = first_uses(f"a plan, then a [plan]({GLOSSARY}#plan) and a [workspace]({GLOSSARY}#workspace)")
    assert uses["plan"][0] is False and uses["workspace"][0] is True
