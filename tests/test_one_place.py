"""Each list and name labkit knows is written out in one place and imported everywhere else: the
workloads (`labkit.gpu.workspaces.workloads.WORKLOADS`), the strategies
(`labkit.gpu.workspaces.workspace.STRATEGIES`),
the panels (`labkit.experiments.PANELS`, whose classes `labkit.present.widgets` makes) and the
version (`labkit.version`). Read from the source: a second copy fails here, whatever its name."""

from __future__ import annotations

import ast
from pathlib import Path

import parsed_sources

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "labkit"


def trees():
    """(path relative to the repository, parsed module) for every labkit module and script."""
    for path in sorted([*PKG.rglob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        yield path.relative_to(ROOT).as_posix(), parsed_sources.tree(path)


def names_bound(name: str):
    """Where a module binds ``name`` to a value of its own (an assignment, not an import)."""
    for where, tree in trees():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                yield f"{where}:{node.lineno}"


def literals_listing(words):
    """Where a tuple, list, set or dict (its keys) written in the source holds every one of ``words``
    as a string of its own."""
    words = set(words)
    for where, tree in trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]
            else:
                continue
            held = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
            if words <= held:
                yield f"{where}:{node.lineno}"


def test_the_workloads_are_written_out_once():
    from labkit.gpu.workspaces import workloads

    assert [w.split(":")[0] for w in names_bound("WORKLOADS")] == ["labkit/gpu/workspaces/workloads.py"]
    assert [w.split(":")[0] for w in literals_listing(workloads.WORKLOADS)] == [
        "labkit/gpu/workspaces/workloads.py"
    ]


def test_the_strategy_list_is_written_out_once():
    """The strategies' names, as a list or a table's keys, only in `labkit.gpu.workspaces.workspace` (the
    benchmark's and the report's runs name a strategy with its options, one entry each)."""
    from labkit.gpu.workspaces import workspace

    assert len(workspace.STRATEGIES) == 7
    assert [w.split(":")[0] for w in names_bound("STRATEGIES")] == ["labkit/gpu/workspaces/workspace.py"]
    assert [w.split(":")[0] for w in literals_listing(workspace.STRATEGIES)] == [
        "labkit/gpu/workspaces/workspace.py"
    ]


def test_the_version_has_one_home_that_the_package_and_the_recordings_import():
    import labkit
    from labkit import version
    from labkit.store import localcache

    assert labkit.__version__ is version.__version__ is localcache.__version__
    assert [w.split(":")[0] for w in names_bound("__version__")] == ["labkit/version.py"]
    assert 'version = { attr = "labkit.version.__version__" }' in (ROOT / "pyproject.toml").read_text()
    from_root = [
        f"{where}:{node.lineno}"
        for where, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and any(a.name == "__version__" for a in node.names)
        and (node.module == "labkit" or (node.level and node.module is None))
    ]
    assert not from_root, f"import the version from labkit.version: {from_root}"


def test_a_panel_class_is_written_only_where_it_adds_something():
    """`labkit.present.widgets` makes one class per `labkit.experiments.PANELS` entry; a class written
    out there holds more than a docstring and its experiment's name (the lab panel's chart
    control). A panel is made one way: ``widgets.Panel("plans")`` or the class named after it,
    ``widgets.PlansPanel()``."""
    from labkit import experiments
    from labkit.present import widgets

    assert list(widgets.PANELS) == list(experiments.PANELS)
    for name, cls in widgets.PANELS.items():
        assert getattr(widgets, cls.__name__) is cls and cls.experiment == name
        assert issubclass(cls, widgets.Panel) and cls.__module__ == widgets.__name__
    tree = ast.parse((PKG / "present" / "widgets.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name != "Panel":
            own = [
                n
                for n in node.body
                if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
                and not (isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["experiment"])
            ]
            assert own, f"widgets.{node.name} adds nothing to Panel: let PANELS make it"
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert "panel" not in functions, "a panel is made as widgets.Panel(name) or its class"
