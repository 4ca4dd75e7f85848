"""Every public function and class of labkit says what it takes and what it gives (read from the
source with ``ast``, nothing is imported): each parameter named under ``Args:`` (a dataclass's or
named tuple's fields under ``Attributes:``), and a ``Returns:`` (``Yields:`` for a generator)
wherever something is returned. Public means a module-level name, or a method of a public class,
that does not start with ``_``; a class's parameters are its ``__init__``'s, documented on the class
or on ``__init__``. Properties need only their summary. An override need not repeat the Args and
Returns of the labkit method it overrides; one with no docstring of its own takes its base's (as
`inspect.getdoc` does). The base is checked where it stands.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import parsed_sources
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "labkit"
#: decorators of a method that is read as an attribute: its summary is enough
PROPERTIES = {"property", "cached_property", "setter", "deleter", "getter"}
#: parameters that are the object itself
SELF = {"self", "cls"}
#: a section header line of a Google-style docstring
SECTION = re.compile(r"^(\s*)([A-Z][A-Za-z ]*):\s*$")
#: an entry of an ``Args:``/``Attributes:`` section: ``name: ...`` or ``name (type): ...``
ENTRY = re.compile(r"^\s*(\*{0,2}[A-Za-z_]\w*)\s*(\([^)]*\))?\s*:")
#: return annotations that mean nothing comes back
NOTHING = {"None", "NoReturn", "Never"}


def sections(doc: str | None) -> dict[str, list[str]]:
    """A docstring's Google-style sections.

    Args:
        doc: the docstring, or None.

    Returns:
        Section title (``"Args"``, ``"Returns"``...) -> the names its entries start with, in order.
    """
    found: dict[str, list[str]] = {}
    lines = (doc or "").expandtabs().splitlines()
    i = 0
    while i < len(lines):
        m = SECTION.match(lines[i])
        if not m:
            i += 1
            continue
        indent, title = len(m.group(1)), m.group(2)
        names, entry_indent = found.setdefault(title, []), None
        i += 1
        while i < len(lines):
            line = lines[i]
            if line.strip():
                depth = len(line) - len(line.lstrip())
                if depth <= indent:
                    break
                if entry_indent is None:
                    entry_indent = depth
                if depth == entry_indent and (e := ENTRY.match(line)):
                    names.append(e.group(1).lstrip("*"))
            i += 1
    return found


def decorator_names(node) -> set[str]:
    """The last dotted part of each decorator: ``functools.cached_property`` -> ``cached_property``."""
    names = set()
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Attribute):
            names.add(d.attr)
        elif isinstance(d, ast.Name):
            names.add(d.id)
    return names


def parameters(fn) -> list[str]:
    """The parameters a caller passes, self/cls and ``_``-named ones left out."""
    a = fn.args
    every = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs]
    every += [a.kwarg] if a.kwarg else []
    return [p.arg for p in every if p.arg not in SELF and not p.arg.startswith("_")]


def own_nodes(fn):
    """The nodes of a function's own body, nested functions, lambdas and classes left out."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack = [n for n in fn.body if not isinstance(n, nested)]
    while stack:
        node = stack.pop()
        yield node
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, nested)]


def returns(fn) -> str | None:
    """What a function gives back, judged from its annotation or its ``return``/``yield`` statements.

    Returns:
        ``"Yields"`` for a generator, ``"Returns"`` for a value, None for nothing.
    """
    own = list(own_nodes(fn))
    yields = [n for n in own if isinstance(n, (ast.Yield, ast.YieldFrom))]
    if yields:  # a bare ``yield`` (a context manager's) gives nothing
        return "Yields" if any(n.value is not None for n in yields) else None
    if fn.returns is not None:
        text = ast.unparse(fn.returns).strip("'\"").split(".")[-1]
        return None if text in NOTHING else "Returns"
    valued = [
        n
        for n in own
        if isinstance(n, ast.Return)
        and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
    ]
    return "Returns" if valued else None


def is_record(cls: ast.ClassDef) -> bool:
    """A dataclass or a named tuple: its fields are its parameters."""
    bases = {ast.unparse(b).split(".")[-1] for b in cls.bases}
    return "dataclass" in decorator_names(cls) or "NamedTuple" in bases


def fields(cls: ast.ClassDef) -> list[str]:
    """A dataclass's or named tuple's own fields that ``__init__`` takes."""
    names = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if "ClassVar" in ast.unparse(node.annotation) or node.target.id.startswith("_"):
            continue
        value = node.value
        if (
            isinstance(value, ast.Call)
            and ast.unparse(value.func).split(".")[-1] == "field"
            and any(k.arg == "init" and ast.unparse(k.value) == "False" for k in value.keywords)
        ):
            continue
        names.append(node.target.id)
    return names


def top_level(tree: ast.Module):
    """The module's own definitions, including those under a top-level ``if`` or ``try``."""
    stack = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            stack[:0] = [*node.body, *getattr(node, "handlers", []), *node.orelse]
            stack[:0] = getattr(node, "finalbody", [])
        elif isinstance(node, ast.ExceptHandler):
            stack[:0] = node.body
        else:
            yield node


def all_classes() -> dict[str, list[ast.ClassDef]]:
    """Every module-level class of labkit by name (two modules may share a name)."""
    found: dict[str, list[ast.ClassDef]] = {}
    for path in sorted(PKG.rglob("*.py")):
        for node in top_level(parsed_sources.tree(path)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def base_sections(cls: ast.ClassDef, name: str, classes: dict) -> dict[str, list[str]] | None:
    """The sections of method ``name``'s docstring in the labkit base classes of ``cls``.

    Args:
        cls: the class whose bases are searched, nearest first.
        name: the method's name.
        classes: every labkit class by name (`all_classes`).

    Returns:
        Each section's entries, merged over the bases that document the method; None when none does.
    """
    merged: dict[str, list[str]] | None = None
    seen, todo = set(), [ast.unparse(b).split(".")[-1] for b in cls.bases]
    while todo:
        base = todo.pop(0)
        if base in seen:
            continue
        seen.add(base)
        for node in classes.get(base, []):
            for item in node.body:
                doc = ast.get_docstring(item) if isinstance(item, ast.FunctionDef) else None
                if doc and item.name == name:
                    merged = merged or {}
                    for title, names in sections(doc).items():
                        merged.setdefault(title, []).extend(names)
            todo += [ast.unparse(b).split(".")[-1] for b in node.bases]
    return merged


def problems(
    fn, doc: str | None, *, params: list[str], record: bool = False, inherited: dict | None = None
) -> list[str]:
    """What a definition's docstring lacks.

    Args:
        fn: the function (or class) node, for its return.
        doc: the docstring that documents it.
        params: the parameters it must name.
        record: it is a dataclass or named tuple (its fields may stand under ``Attributes:``).
        inherited: the sections of the method it overrides (`base_sections`), which it need not
            repeat.

    Returns:
        One phrase per thing missing, empty when none is.
    """
    if not doc:
        return ["no docstring"]
    found = sections(doc)
    for title, names in (inherited or {}).items():
        found.setdefault(title, []).extend(names)
    named = set(found.get("Args", [])) | set(found.get("Arguments", []))
    if record:
        named |= set(found.get("Attributes", []))
    out = []
    missing = [p for p in params if p not in named]
    if missing:
        out.append(f"{'Attributes' if record else 'Args'} lacks {', '.join(missing)}")
    kind = returns(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if kind and not ({kind, "Returns"} & set(found)):
        out.append(f"no {kind}:")
    return out


def offenders(source: str, where: str, classes: dict) -> list[str]:
    """``file:line name: what is missing`` for each public definition of one module.

    Args:
        source: the module's text.
        where: its path, as the lines name it.
        classes: every labkit class by name (`all_classes`), for inherited docstrings.

    Returns:
        One line per thing a public function, method or class's docstring lacks.
    """
    out = []

    def note(node, name, found):
        out.extend(f"{where}:{node.lineno} {name}: {p}" for p in found)

    for node in top_level(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            note(node, node.name, problems(node, ast.get_docstring(node), params=parameters(node)))
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
            continue
        methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        doc = ast.get_docstring(node)
        if is_record(node):
            note(node, node.name, problems(node, doc, params=fields(node), record=True))
        elif "__init__" in methods:
            init = methods["__init__"]
            own = ast.get_docstring(init)
            joined = "\n".join(d for d in (doc, own) if d)
            found = problems(node, joined or None, params=parameters(init))
            note(node, node.name, [p for p in found if p != "no docstring"] if doc or own else found)
        else:
            note(node, node.name, problems(node, doc, params=[]))
        for name, m in methods.items():
            if name.startswith("_") or decorator_names(m) & PROPERTIES:
                continue
            mdoc, inherited = ast.get_docstring(m), base_sections(node, name, classes)
            if not mdoc and inherited is not None:
                continue
            note(m, f"{node.name}.{name}", problems(m, mdoc, params=parameters(m), inherited=inherited))
    return out


def every_offender() -> list[str]:
    """`offenders` of every module of labkit."""
    classes = all_classes()
    return [
        line
        for path in sorted(PKG.rglob("*.py"))
        for line in offenders(path.read_text(), path.relative_to(ROOT).as_posix(), classes)
    ]


def test_every_public_function_and_class_names_its_args_and_returns():
    found = every_offender()
    assert not found, f"{len(found)} things missing from docstrings:\n" + "\n".join(found)


GOOD = '''
def f(a, *, b=1) -> int:
    """Sum.

    Args:
        a: one, in us.
        b (int): two.

    Returns:
        The sum, in us.
    """
    return a + b
'''


@pytest.mark.parametrize(
    "source, expected",
    [
        (GOOD, []),
        ("def f(a):\n    return a\n", ["f: no docstring"]),
        ('def f(a, b):\n    """Doc.\n\n    Args:\n        a: one.\n    """\n', ["f: Args lacks b"]),
        ('def f() -> int:\n    """Doc."""\n', ["f: no Returns:"]),
        ('def f():\n    """Doc."""\n    return 3\n', ["f: no Returns:"]),
        ('def f():\n    """Doc."""\n    yield 3\n', ["f: no Yields:"]),
        ('def f():\n    """Doc."""\n    yield\n', []),
        ('def f() -> None:\n    """Doc."""\n    return\n', []),
        ("def _f(a):\n    return a\n", []),
        (
            'def f():\n    """Doc."""\n\n    def g():\n        return 1\n\n    g()\n',
            [],
        ),
        (
            'class A:\n    """Doc."""\n\n    def __init__(self, x):\n        pass\n',
            ["A: Args lacks x"],
        ),
        (
            'class A:\n    """Doc.\n\n    Args:\n        x: one.\n    """\n\n'
            "    def __init__(self, x):\n        pass\n\n"
            "    @property\n    def y(self):\n        return 1\n\n"
            "    def z(self, q):\n        return q\n",
            ["A.z: no docstring"],
        ),
        (
            "@dataclass\nclass D:\n"
            '    """Doc.\n\n    Attributes:\n        a: one.\n    """\n\n'
            "    a: int\n    b: int = 0\n    c: ClassVar[int] = 1\n",
            ["D: Attributes lacks b"],
        ),
        (
            'class A:\n    """Doc."""\n\n    def run(self, x):\n'
            '        """Run.\n\n        Args:\n            x: it.\n        """\n\n'
            'class B(A):\n    """Doc."""\n\n    def run(self, x):\n        pass\n',
            [],
        ),
        (
            'class A:\n    """Doc."""\n\n    def run(self, x):\n'
            '        """Run.\n\n        Args:\n            x: it.\n        """\n\n'
            'class B(A):\n    """Doc."""\n\n    def run(self, x, y):\n        """Own."""\n',
            ["B.run: Args lacks y"],
        ),
    ],
)
def test_the_check_finds_what_it_should(source, expected):
    classes = {n.name: [n] for n in top_level(ast.parse(source)) if isinstance(n, ast.ClassDef)}
    assert [line.split(" ", 1)[1] for line in offenders(source, "m.py", classes)] == expected
