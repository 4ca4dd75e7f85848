"""Imports sit at the top of labkit's modules, where a reader (and a static tool) follows them.

An import inside a function or method is allowed in one case: it keeps a heavy module (`HEAVY`) off
this module's import, and says so on its line with ``# heavy: <why>``. An import is heavy when it
loads, itself or through the top-level imports of the labkit modules it names (and of their
packages' ``__init__``), a module of `HEAVY` that this module's own top-level imports do not load
already; a ``# heavy:`` import that loads none is refused too. Imports under ``if TYPE_CHECKING:``
are allowed. Upward imports are refused at any depth (tests/test_layers.py), so none is lazy for
that reason. Read from the source: nothing is imported, except in the light-path test at the end.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import parsed_sources
from test_layers import PKG, modules

#: the modules an import may keep off a module's import, lazily: the optional extras (absent
#: without a GPU, or loading CUDA's libraries: CuPy, the cuDNN frontend, torch, CUPTI, NVML, NVTX);
#: what a chart or a kernel needs and the command line and a lesson's first cell do not (plotly,
#: ipywidgets, IPython); and pandas (0.3 s), kept off the light path (`LIGHT`)
HEAVY = {
    "cupy",
    "cupyx",
    "cudnn",
    "torch",
    "torchvision",
    "cupti",
    "pynvml",
    "nvtx",
    "plotly",
    "ipywidgets",
    "IPython",
    "pandas",
}
MARK = "# heavy:"
#: the light path: ``import labkit``, ``labkit.env``, a lesson's first cell (the banner's modules)
#: and the command line's start, none of which loads a heavy module
LIGHT = (
    "labkit",
    "labkit.env",
    "labkit.session.texts",
    "labkit.session.handson",
    "labkit.session.warmup",
    "labkit.cli.main",
)


def _loaded(mod: str, path: Path, node) -> set:
    """What an import statement loads: the labkit modules it names, with their packages, and the
    top-level names of the others."""
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    else:
        base = node.module
        if node.level:
            base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
        names = {base} | {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in _KNOWN}
    out = set()
    for n in names:
        parts = n.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} if parts[0] == "labkit" else {parts[0]}
    return out


def _imports(tree: ast.Module) -> list:
    """(import statement, whether it sits in a function) for every import outside ``if TYPE_CHECKING:``."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test).endswith("TYPE_CHECKING"):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            visit(
                child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            )

    visit(tree, False)
    return found


_KNOWN = modules()


def top_level_imports() -> dict:
    """Every labkit module -> what its top-level imports (and its own packages) load."""
    graph = {}
    for mod, path in _KNOWN.items():
        loaded = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)}
        for node, in_function in _imports(parsed_sources.tree(path)):
            if not in_function:
                loaded |= _loaded(mod, path, node)
        graph[mod] = loaded - {mod}
    return graph


def heavy_loaded(graph: dict, start) -> set:
    """The modules of `HEAVY` that importing ``start`` (names) loads, following labkit's top-level imports."""
    seen, todo, heavy = set(), list(start), set()
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            heavy |= {m} & HEAVY
            todo += graph.get(m, ())
    return heavy


def misplaced(mod: str, path: Path, source: str, graph: dict) -> list:
    """``path:line`` and what it imports, for each import in a function that is not a marked heavy one.

    Args:
        mod: the module's dotted name.
        path: its file (its name tells a package's ``__init__``).
        source: its source.
        graph: `top_level_imports`, for the labkit modules it imports.

    Returns:
        One line per misplaced import.
    """
    lines = source.splitlines()
    tree = ast.parse(source)
    own = heavy_loaded(graph, {t for node, f in _imports(tree) if not f for t in _loaded(mod, path, node)})
    bad = []
    for node, in_function in _imports(tree):
        if not in_function:
            continue
        where = f"{path.relative_to(PKG.parent)}:{node.lineno} {ast.unparse(node)}"
        marked = any(MARK in line for line in lines[node.lineno - 1 : node.end_lineno])
        heavy = heavy_loaded(graph, _loaded(mod, path, node)) - own
        if not marked:
            bad.append(
                f"{where}: move it to the top of the module" + (f" or mark it {MARK}" if heavy else "")
            )
        elif not heavy:
            bad.append(f"{where}: marked heavy, but loads no heavy module this module does not load already")
    return bad


def test_imports_sit_at_the_top_of_modules_but_marked_heavy_ones():
    graph = top_level_imports()
    bad = [line for mod, path in _KNOWN.items() for line in misplaced(mod, path, path.read_text(), graph)]
    assert not bad, "imports inside functions:\n" + "\n".join(bad)


def test_an_import_in_a_function_is_found_unless_marked_heavy_and_heavy():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..session import results\n"
        "def f():\n"
        "    import json\n"
        "    import cupy  # heavy: CuPy, live only\n"
        "    from ..draw import plots  # heavy: plotly, where a chart is drawn\n"
        "    import re  # heavy: not really\n"
        "class C:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            from ..errors import InvalidSpec\n"
    )
    got = misplaced("labkit.store.made_up", PKG / "store" / "made_up.py", source, top_level_imports())
    assert [line.split(":")[1].split()[0] for line in got] == ["5", "8", "12"], got
    assert "import json: move it to the top" in got[0] and "marked heavy, but loads no heavy" in got[1]


def test_an_import_of_what_the_module_loads_already_is_not_heavy():
    source = "import pandas as pd\ndef f():\n    import pandas  # heavy: pandas\n"
    got = misplaced("labkit.store.made_up", PKG / "store" / "made_up.py", source, top_level_imports())
    assert len(got) == 1 and "loads no heavy module" in got[0], got


def test_the_light_path_loads_no_heavy_module():
    """``import labkit``, ``labkit.env``, a first cell's banner modules and the command line's start,
    in a fresh interpreter: what the ``# heavy:`` pandas imports keep off them."""
    code = (
        "import json, sys\n"
        f"for name in {LIGHT!r}:\n"
        "    __import__(name)\n"
        f"print(json.dumps(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules)))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PKG.parent
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
    assert not heavy_loaded(top_level_imports(), LIGHT)
