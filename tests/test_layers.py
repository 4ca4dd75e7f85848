"""labkit's imports point down its layers, never up and never in a circle, including imports
made inside functions (read from the source, nothing is imported), and every relative import
names a module that exists (a GPU-only path that imports a moved module fails here, on CPU).

Layers, bottom to top (README, "Where things live"):

0. what a convolution is and what the machine has, and the signals every layer may send:
   errors, spec, env, cancel (stop a measurement), progress (a table so far), ceilings, keys,
   networks (the conv layers of a network)
1. the GPU core (labkit/gpu/: memory, numerics, reference, frontend, engine, builds, autotune, measure,
   verify, legacy, workspace, workloads, concurrency, isolated), the data (recordings, localcache, plan_store), what charts are
   built with (plots) and what lesson text is written with (prose)
2. the experiments (labkit/experiments/), bottom to top: core (decorator, requests, dispatch),
   checking (what exercise checks are written with), one module per lesson topic (run functions,
   charts, summaries, checks, recorded calls: no topic imports another), the package (gathers the
   topics); then grid (the recorded calls in order) and the background worker (prefetch)
3. what the notebooks call: lessons (session results, texts), widgets (panels), check (exercises),
   netreport (a whole network's workspace report)
4. the command line and the tools around it: record, bench, __main__, and the package's __init__
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "labkit"

LAYERS = {
    0: {"errors", "spec", "env", "cancel", "progress", "ceilings", "keys", "networks"},
    1: {"gpu", "recordings", "localcache", "plan_store", "plots", "prose"},
    2: {"experiments", "grid", "prefetch", "compare"},
    3: {"lessons", "widgets", "check", "compare_check", "netreport"},
    4: {"record", "bench", "__main__"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules():
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


#: order inside layer 2 (any other labkit.experiments.<topic> module: 2.2)
SUBLAYERS = {"labkit.experiments.core": 2.0, "labkit.experiments.checking": 2.1, "labkit.experiments": 2.3,
             "labkit.grid": 2.4, "labkit.compare": 2.4, "labkit.prefetch": 2.5}


def layer(mod: str) -> float:
    if mod in SUBLAYERS:
        return SUBLAYERS[mod]
    if mod.startswith("labkit.experiments."):
        return 2.2
    parts = mod.split(".")
    if len(parts) == 1:  # labkit itself (__init__): it may re-export from anywhere below the CLI
        return 4
    for n, names in LAYERS.items():
        if parts[1] in names:
            return n
    raise AssertionError(f"{mod} is in no layer: add it to tests/test_layers.py LAYERS (and the README)")


def imports(mod: str, path: Path):
    """(line, imported labkit module) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text())
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
    missing = [f"{known[m].relative_to(PKG.parent)}:{line} imports {t}" for m, p in known.items()
               for line, t in imports(m, p) if t not in known]
    assert not missing, "\n".join(missing)


def test_every_module_is_in_a_layer():
    for mod in modules():
        layer(mod)


def test_imports_point_down():
    known = modules()
    up = []
    for mod, path in known.items():
        for line, t in imports(mod, path):
            if t in known and t != "labkit" and (layer(t) > layer(mod) or (layer(t) == layer(mod) == 2.2 and t != mod)):
                up.append(f"{path.relative_to(PKG.parent)}:{line}: {mod} (layer {layer(mod)}) imports {t} (layer {layer(t)})")
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
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t in edges and state.get(t) is None:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if state.get(m) is None:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("limit", [200])
def test_no_function_or_class_is_longer_than_the_limit(limit):
    long = []
    for mod, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    long.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)
