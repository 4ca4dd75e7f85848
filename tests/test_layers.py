"""labkit's imports point down its layers, never up and never in a circle, including imports
made inside functions (read from the source, nothing is imported), and every relative import
names a module that exists (a GPU-only path that imports a moved module fails here, on CPU).

Layers, bottom to top (docs/architecture.md): a module's layer is the longest entry of
`LAYERS` its dotted name starts with.

0. what a convolution is and what the machine has: errors, spec, env, ceilings, version, networks (the conv
   layers of a network); and the signals every layer may send or hear (labkit/signals/: progress,
   cancel)
1. the GPU core (labkit/gpu/, in folders by concept, in the order tests/test_gpu_rooms.py
   keeps: host, buffers, checks, classic, cudnn, audits, timing, device, workspaces), storage
   (labkit/store/: request keys, shipped recordings, this GPU's recording, saved plans) and what
   charts and lesson text are drawn with (labkit/draw/)
1.5 the simulated GPU (labkit/simgpu/): the device seam of labkit/gpu/ answered from a recording
1.7 the hands-on GPU (labkit/practice/): the seam's calls for a learner's cell, this GPU or the
   simulated one, with the log a hands-on check reads
2. the experiments (labkit/experiments/), bottom to top: core (decorator, requests, dispatch),
   checking (what exercise checks are written with), one module per lesson topic (run functions,
   charts, summaries, checks, recorded calls: no topic imports another), the package (gathers the
   topics), grid (the recorded calls in order)
2.5 a session (labkit/session/): the background worker (prefetch), this session's results and the
   lesson texts (the mode banner), then lessons (what the notebooks call)
3. presentation (labkit/present/): panels and their parts, exercise checks, comparisons across
   GPUs, the network report
4. the command line (labkit/cli/), ``python -m labkit`` and the package's __init__
"""

from __future__ import annotations

import ast
import builtins
import functools
from pathlib import Path

import parsed_sources
import pytest

PKG = Path(__file__).resolve().parents[1] / "labkit"

LAYERS = {
    "labkit.errors": 0,
    "labkit.spec": 0,
    "labkit.env": 0,
    "labkit.version": 0,
    "labkit.ceilings": 0,
    "labkit.networks": 0,
    "labkit.signals": 0,
    "labkit.gpu": 1,
    "labkit.store": 1,
    "labkit.draw": 1,
    "labkit.simgpu": 1.5,  # a GPU simulated from a recording: the gpu/ seam's other side
    "labkit.practice": 1.7,  # the hands-on GPU: live or simulated, one API, logged for the checks
    "labkit.experiments": 2.2,  # a lesson topic; the others are named below
    "labkit.experiments.core": 2.0,
    "labkit.experiments.checking": 2.1,
    "labkit.experiments.exercise": 2.1,  # exercises as data: a topic's EXERCISES hold them
    "labkit.experiments.handson_check": 2.1,  # hands-on checks' verdicts and hints
    "labkit.experiments.worked": 2.1,  # exercises whose answer is a number worked out from a model
    "labkit.experiments.panel_config": 2.1,
    "labkit.experiments.grid": 2.4,
    "labkit.session": 2.5,
    "labkit.session.prefetch": 2.5,
    "labkit.session.warmup": 2.5,
    "labkit.session.results": 2.55,
    "labkit.session.texts": 2.55,
    "labkit.session.lessons": 2.6,
    "labkit.present": 3,
    "labkit.cli": 4,
    "labkit.__main__": 4,
    "labkit": 4,
}
#: a package's own __init__ (e.g. labkit.experiments) sits where this says, not at its folder's layer
PACKAGE_INITS = {"labkit.experiments": 2.3}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def modules():
    """Module name -> file, for every module of labkit (listed once per test process: `imports` asks
    for it for every module it reads; callers read it, never change it)."""
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(mod: str) -> float:
    if mod in PACKAGE_INITS:
        return PACKAGE_INITS[mod]
    best = max((k for k in LAYERS if mod == k or mod.startswith(k + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(
            f"{mod} is in no layer: add it to tests/test_layers.py LAYERS (and docs/architecture.md)"
        )
    return LAYERS[best]


def topic(mod: str) -> str:
    """A lesson topic's name: ``labkit.experiments.<topic>``, a module or a folder whose parts may
    import each other (one topic), never another topic."""
    return ".".join(mod.split(".")[:3])


@functools.lru_cache(maxsize=None)
def imports(mod: str, path: Path) -> tuple:
    """(line, imported labkit module) for every import in the file, at any depth (found once per
    module per test process: four tests read every module's imports)."""
    return tuple(_walk_imports(mod, path))


def _walk_imports(mod: str, path: Path):
    tree = parsed_sources.tree(path)
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    known = modules()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "labkit":
                target = node.module
            else:
                continue
            names = [f"{target}.{a.name}" for a in node.names]
            subs = [n for n in names if n in known]
            if subs:
                for n in subs:
                    yield node.lineno, n
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "labkit":
                    yield node.lineno, a.name


def graph():
    known = modules()
    edges = {}
    for mod, path in known.items():
        edges[mod] = sorted({t for _, t in imports(mod, path) if t != mod})
    return edges


def test_every_relative_import_names_a_module_that_exists():
    known = modules()
    missing = [
        f"{known[m].relative_to(PKG.parent)}:{line} imports {t}"
        for m, p in known.items()
        for line, t in imports(m, p)
        if t not in known
    ]
    assert not missing, "\n".join(missing)


def test_every_module_is_in_a_layer():
    for mod in modules():
        layer(mod)


def test_imports_point_down():
    known = modules()
    up = []
    for mod, path in known.items():
        for line, t in imports(mod, path):
            if (
                t in known
                and t != "labkit"
                and (layer(t) > layer(mod) or (layer(t) == layer(mod) == 2.2 and topic(t) != topic(mod)))
            ):
                where = f"{path.relative_to(PKG.parent)}:{line}"
                up.append(f"{where}: {mod} (layer {layer(mod)}) imports {t} (layer {layer(t)})")
    assert not up, "upward imports:\n" + "\n".join(up)


def test_no_import_cycles():
    edges = graph()
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, ()):
            if t == "labkit":
                continue
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t in edges and state.get(t) is None:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if state.get(m) is None:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("limit", [260])
def test_no_function_or_class_is_longer_than_the_limit(limit):
    long = []
    for mod, path in modules().items():
        for node in ast.walk(parsed_sources.tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    long.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)


#: the folders a layer may never import from (the rule the folders exist to show)
NEVER = {
    "labkit.store": ("labkit.session", "labkit.present", "labkit.cli"),
    "labkit.session": ("labkit.present", "labkit.cli"),
    "labkit.present": ("labkit.cli",),
    "labkit.gpu": ("labkit.experiments", "labkit.session", "labkit.present", "labkit.cli", "labkit.simgpu"),
    "labkit.simgpu": ("labkit.experiments", "labkit.session", "labkit.present", "labkit.cli"),
    "labkit.practice": ("labkit.experiments", "labkit.session", "labkit.present", "labkit.cli"),
}


def test_storage_and_session_never_import_presentation_and_presentation_never_the_cli():
    bad = []
    for mod, path in modules().items():
        for folder, banned in NEVER.items():
            if mod == folder or mod.startswith(folder + "."):
                bad += [
                    f"{path.relative_to(PKG.parent)}:{line} imports {t}"
                    for line, t in imports(mod, path)
                    if any(t == b or t.startswith(b + ".") for b in banned)
                ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("limit", [15])
def test_no_folder_holds_more_than_the_limit_of_modules(limit):
    """A folder is a room a reader can take in: past the limit it is cut into subpackages by concept
    (labkit/gpu/ is), each with an ``__init__`` docstring saying what it holds."""
    crowded, bare = [], []
    for folder in sorted({p.parent for p in PKG.rglob("*.py")}):
        mods = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(mods) > limit:
            crowded.append(f"{folder.relative_to(PKG.parent)}: {len(mods)} modules")
        init = folder / "__init__.py"
        if folder != PKG and (not init.exists() or ast.get_docstring(ast.parse(init.read_text())) is None):
            bare.append(f"{folder.relative_to(PKG.parent)} has no __init__ docstring")
    assert not crowded and not bare, "\n".join(crowded + bare)


def test_the_top_level_holds_at_most_8_modules_besides_the_folders():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("limit", [700])
def test_no_module_is_longer_than_the_limit(limit):
    long = [
        f"{p.relative_to(PKG.parent)}: {n} lines"
        for p in sorted(PKG.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > limit
    ]
    assert not long, "\n".join(long)


def test_no_class_is_assembled_from_mixins():
    """A labkit class has at most one base class: parts are objects a class holds, not classes it
    inherits state from."""
    mixed = []
    for mod, path in modules().items():
        for node in ast.walk(parsed_sources.tree(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            own = [b for b in node.bases if not (isinstance(b, ast.Name) and hasattr(builtins, b.id))]
            if isinstance(node, ast.ClassDef) and len(own) > 1:
                bases = ", ".join(map(ast.unparse, node.bases))
                mixed.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name}({bases})")
    assert not mixed, "\n".join(mixed)


def test_the_names_notebooks_and_the_readme_import_keep_working():
    import labkit
    from labkit import ConvSpec, check, compare, compare_check, experiments, lessons, plots, widgets  # noqa: F401

    assert callable(labkit.report) and labkit.Report.__name__ == "Report"
    assert widgets.Panel and lessons.data and check.mode and labkit.ConvSpec is ConvSpec
    assert labkit.recordings.use


def test_every_name_imported_from_a_labkit_package_is_defined_there():
    """``from labkit.gpu import x`` (or ``from ..gpu import x``, at any depth) names a submodule of
    the package or a name its ``__init__`` binds: an import of a module that moved or went away
    fails here, on CPU, not first on a GPU."""
    known = modules()
    missing = []
    for mod, path in known.items():
        tree = parsed_sources.tree(path)
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                target = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "labkit":
                target = node.module
            else:
                continue
            if target not in known or known[target].name != "__init__.py":
                continue
            bound = _bound_names(known[target])
            missing += [
                f"{path.relative_to(PKG.parent)}:{node.lineno} imports {a.name} from {target}"
                for a in node.names
                if a.name != "*" and f"{target}.{a.name}" not in known and a.name not in bound
            ]
    assert not missing, "\n".join(missing)


def _bound_names(init: Path) -> set:
    """The names a package's ``__init__`` binds at its top level (including under if and try), and
    those its module ``__getattr__`` answers when it lists them in a dict or tuple."""
    names = set()
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # a lazy name a module __getattr__ looks up by its string
    return names
