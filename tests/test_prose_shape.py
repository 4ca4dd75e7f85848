"""labkit's sentences are written whole, and chart functions stay of a readable size.

A *fragment-glued sentence* is what this file looks for in every module of labkit (`PROSE_MODULES`):
a lesson's text, a chart's notes, the command line's output, an error's message. Python joins
adjacent string literals into one literal, so a sentence wrapped over several source lines is one
piece and fine. What is not fine is a sentence put together at run
time from pieces, one of which holds only part of it. A *glued piece* is a string literal (plain or
f-string) that is an operand of ``+`` (a chain of them, looking through ``a if c else b`` to both
branches; glued on its left unless first, on its right unless last), the value of ``+=`` (glued on
both sides), or the value assigned to a name that the same function glues with ``+`` or ``+=``
(``head = "..."`` before ``head + "..."``; glued on its right). It is a *fragment* when its text (an
f-string's fields read as ``{}``, HTML tags and plotly's ``%{..}`` left out) holds a letter and either

- it is glued on its left and does not start a sentence: its first character, after spaces, markdown
  marks (``*_#>-``), ``(`` and backquotes, is not an upper-case letter, a digit or a field
  (``"; none of the"``, ``" and needs"``);
- or it is glued on its right and does not end one: its text, less trailing spaces, ends in none of
  ``. ! ?`` (optionally followed by ``) * ` ' "``), and it does not end a line (``"\\n"``):
  ``"whose largest "``, ``"Hint: "``, ``f"... takes {t}"``.

Such a sentence is written as one f-string per variant, chosen by branch, or as one f-string whose
varying clause is a named field computed before it (``drops = ", and ..." if below else ""``), or a
template with named fields (``str.format``). Whole sentences may still be collected and joined
(``" ".join(sentences)``, ``text += " Another sentence."``), and a chart's notes with ``" · "``.
Text that is no sentence is built the same way: a file name as ``f"{name}.csv"``, a pattern as one
``rf"..."``. No module of labkit holds a fragment.

Chart functions: no chart function in labkit is longer than `CHART_FUNCTION_LINES` lines (from
``def`` to its last line, docstring included). A chart function is any function of a charts module
(`CHART_MODULES`: every ``charts.py`` under labkit), and any function elsewhere in labkit that builds
a figure (calls one of `FIGURE_CALLS`) or is annotated to return one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "labkit" / "experiments"

#: The modules whose strings someone reads: every module of labkit, with no exception.
PROSE_MODULES = sorted((ROOT / "labkit").rglob("*.py"))

CHART_MODULES = sorted((ROOT / "labkit").rglob("charts.py"))
#: every other module of labkit, whose figure-building functions are chart functions too
OTHER_MODULES = sorted(set((ROOT / "labkit").rglob("*.py")) - set(CHART_MODULES))
CHART_FUNCTION_LINES = 80
#: the calls (by their last name) that build or finish a figure: a function making one draws a chart
FIGURE_CALLS = {"Figure", "FigureWidget", "make_subplots", "new_figure", "new_figure_widget", "finish"}

_FIELD = "{}"
_START = re.compile(r"[\s*_#>\-(`]*")
_END = re.compile(r"[.!?][)*`'\"]*$")


def _text(piece: ast.AST) -> str:
    if isinstance(piece, ast.Constant):
        text = piece.value
    else:
        text = "".join(v.value if isinstance(v, ast.Constant) else _FIELD for v in piece.values)
    text = re.sub(r"%\{[^}]*\}", _FIELD, text)
    return re.sub(r"<[^>]*>", "", text)


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _operands(node: ast.AST, left: bool, right: bool):
    """``(operand, glued on its left, glued on its right)`` for each operand of a ``+`` chain, looking
    through conditional expressions to both branches; ``left`` and ``right``: whether the whole is."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _operands(node.left, left, True)
        yield from _operands(node.right, True, right)
    elif isinstance(node, ast.IfExp):
        yield from _operands(node.body, left, right)
        yield from _operands(node.orelse, left, right)
    else:
        yield node, left, right


def is_fragment(text: str, *, left: bool = True, right: bool = True) -> bool:
    """Whether a glued piece of text holds part of a sentence (see the module's docstring).

    Args:
        text: the piece's text, fields as ``{}``.
        left: whether something is glued before it.
        right: whether something is glued after it.

    Returns:
        True when it has a letter and does not start a sentence where glued on its left, or does not
        end one where glued on its right.
    """
    if not re.search(r"[A-Za-z]", text.replace(_FIELD, "")):
        return False
    head = text[_START.match(text).end() :]
    starts = bool(head) and (head[0].isupper() or head[0].isdigit() or head.startswith(_FIELD))
    ends = text.endswith("\n") or bool(_END.search(text.rstrip()))
    return (left and not starts) or (right and not ends)


def fragments(source: str):
    """The fragment-glued pieces of a module's source.

    Glued pieces are the string operands of ``+`` and ``+=`` and the string values assigned to a name
    that the same function glues (``head = "..."`` before ``head + "..."``).

    Args:
        source: Python source.

    Returns:
        A sorted list of ``(line, text)``, one per glued piece that holds part of a sentence.
    """
    return sorted({found for scope in _scopes(ast.parse(source)) for found in _glued(scope)})


def _scopes(tree: ast.Module):
    """The nodes of each function (nested ones included), and those of the module outside them."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inside = {id(n) for f in functions for n in ast.walk(f)}
    yield [n for n in ast.walk(tree) if id(n) not in inside]
    for f in functions:
        yield list(ast.walk(f))


def _glued(nodes):
    """``(line, text)`` of each fragment glued in one scope's nodes."""
    pieces, glued_names, seen = [], set(), set()
    for node in nodes:
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            operands = list(_operands(node.value, True, True))
            if isinstance(node.target, ast.Name):
                glued_names.add(node.target.id)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and id(node) not in seen:
            seen.update(id(n) for n in ast.walk(node))
            operands = list(_operands(node, False, False))
            if not any(_is_string(p) for p, _, _ in operands):
                continue
            glued_names.update(p.id for p, _, _ in operands if isinstance(p, ast.Name))
        else:
            continue
        pieces += [o for o in operands if _is_string(o[0])]
    for node in nodes:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] in (
            [n] for n in glued_names
        ):
            pieces += [o for o in _operands(node.value, False, True) if _is_string(o[0])]
    return {
        (p.lineno, _text(p)) for p, left, right in pieces if is_fragment(_text(p), left=left, right=right)
    }


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_detector_finds_a_sentence_glued_from_fragments():
    bad = """
def summary(fast, zero):
    head = f"The fastest plan takes {fast} "
    if zero:
        return head + "and needs no workspace."
    head += "with a workspace of "
    return head + ("1 MiB." if fast else "2 MiB.")
"""
    assert [line for line, _ in fragments(bad)] == [3, 5, 6]
    assert fragments('x = "Hint: " + hint()') == [(1, "Hint: ")]
    assert fragments('x = f"{a} takes {t}" + (", fused" if f else "")') == [
        (1, ", fused"),
        (1, "{} takes {}"),
    ]


def test_the_detector_lets_whole_sentences_be_joined():
    good = """
def summary(fast, zero, rows):
    if zero:
        return f"The fastest plan takes {fast} and needs no workspace."
    text = f"The fastest plan takes {fast}."
    text += " It needs a workspace."
    text += "\\n" + "\\n".join(rows) + "\\n\\nThe kernel traces say why:\\n"
    return text + f" {len(rows)} rows." + "<br>" + f"{fast:.1%}"
"""
    assert fragments(good) == []


def test_labkit_glues_no_sentence_from_fragments():
    assert len(PROSE_MODULES) > 150 and EXPERIMENTS / "start_here.py" in PROSE_MODULES
    assert ROOT / "labkit" / "cli" / "main.py" in PROSE_MODULES
    found = [f"{_rel(p)}:{n} {t!r}" for p in PROSE_MODULES for n, t in fragments(p.read_text())]
    assert not found, (
        "sentences glued from fragments (write each whole, see tests/test_prose_shape.py):\n"
        + ("\n".join(found))
    )


def chart_function_lengths(source: str, *, keep=lambda function: True):
    """Every function's length in a module.

    Args:
        source: Python source.
        keep: which functions to count (an ``ast.FunctionDef`` -> bool); every one by default.

    Returns:
        ``{name: lines}``, nested functions named ``outer.inner``.
    """
    lengths = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                if keep(child):
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(ast.parse(source), "")
    return lengths


def _draws(function: ast.AST) -> bool:
    """Whether a function builds a figure (calls one of `FIGURE_CALLS`) or is annotated to return one."""
    if function.returns is not None and "Figure" in ast.unparse(function.returns):
        return True
    calls = (n for n in ast.walk(function) if isinstance(n, ast.Call))
    return any(ast.unparse(c.func).split(".")[-1] in FIGURE_CALLS for c in calls)


def figure_function_lengths(source: str):
    """The length of every function of a module that draws a chart (`_draws`).

    Args:
        source: Python source.

    Returns:
        ``{name: lines}`` of those functions, nested ones named ``outer.inner``.
    """
    return chart_function_lengths(source, keep=_draws)


def test_the_length_check_counts_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(CHART_FUNCTION_LINES))
    assert chart_function_lengths(f"def chart():\n{body}\n") == {"chart": CHART_FUNCTION_LINES + 1}


def test_a_function_that_builds_a_figure_is_a_chart_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(CHART_FUNCTION_LINES))
    source = (
        f"def table():\n{body}\n"
        f"def drawn():\n    fig = go.Figure()\n{body}\n"
        f"def finished(df):\n    return plots.finish(df)\n"
        f"def typed(df) -> go.Figure:\n    return df\n"
    )
    assert figure_function_lengths(source) == {"drawn": CHART_FUNCTION_LINES + 2, "finished": 2, "typed": 2}


def test_every_charts_module_of_labkit_is_checked():
    assert len(CHART_MODULES) >= 9 and ROOT / "labkit" / "present" / "compare" / "charts.py" in CHART_MODULES
    assert len(OTHER_MODULES) > 100


@pytest.mark.parametrize("path", CHART_MODULES, ids=_rel)
def test_chart_functions_are_of_a_readable_size(path):
    long = {
        name: n for name, n in chart_function_lengths(path.read_text()).items() if n > CHART_FUNCTION_LINES
    }
    assert not long, f"over {CHART_FUNCTION_LINES} lines (split into named parts): {long}"


def test_functions_that_draw_elsewhere_in_labkit_are_of_a_readable_size():
    long = {
        f"{_rel(path)}:{name}": n
        for path in OTHER_MODULES
        for name, n in figure_function_lengths(path.read_text()).items()
        if n > CHART_FUNCTION_LINES
    }
    assert not long, f"chart functions over {CHART_FUNCTION_LINES} lines (split into named parts): {long}"
