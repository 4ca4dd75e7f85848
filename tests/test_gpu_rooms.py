"""labkit/gpu/'s rooms (its subpackages) stand in one strict order: a room imports only rooms below
it, at the top of a module and inside functions alike (the ``# heavy:`` imports), and so does a
worker process's target named by string (``"labkit.gpu.room.module:function"``). A module directly
in labkit/gpu/ sits above every room. Read from the source: nothing is imported.

The order, bottom to top, and why (each room's ``__init__`` docstring says what it holds):

* `host`: the machine around the GPU (the lock, contention, worker processes); no GPU work;
* `buffers`: what a device buffer is (allocations, guarded buffers, storage formats);
* `checks`: what a right result is (the float64 reference, tolerances, the verdict book), which
  cuDNN's plans are admitted by;
* `classic`: the classic cuDNN API (its algorithm table);
* `cudnn`: frontend graphs and their plans, admitted only after a run against float64;
* `audits`: checks of cuDNN's plans from outside their admission (one plan on fresh inputs, the
  wrong plans' reproductions);
* `timing`: CUDA-event timing, autotune, traces, NVTX ranges;
* `device`: the seam strategies reach a GPU through, with this GPU's implementation (which builds
  cuDNN graphs and captures CUDA graphs) and the device in use;
* `workspaces`: the strategies and what runs them.
"""

from __future__ import annotations

import ast
import re

import parsed_sources
from test_layers import PKG, imports, modules

#: labkit/gpu/'s rooms, bottom to top
ROOMS = ("host", "buffers", "checks", "classic", "cudnn", "audits", "timing", "device", "workspaces")
GPU = "labkit.gpu"
#: a worker process's target, named by string: "labkit.gpu.room.module:function"
TARGET = re.compile(r"^(labkit\.gpu(?:\.\w+)+):\w+$")


def rank(mod: str) -> float:
    """A module's place: its room's index in `ROOMS`; a module directly in labkit/gpu/ (and the
    package itself) above them all."""
    parts = mod.split(".")
    if len(parts) > 2 and parts[2] in ROOMS:
        return ROOMS.index(parts[2])
    return len(ROOMS)


def gpu_imports(mod, path):
    """(line, labkit.gpu module) for every import of the file, at any depth, and every string that
    names a worker's target."""
    for line, target in imports(mod, path):
        if target == GPU or target.startswith(GPU + "."):
            yield line, target
    for node in ast.walk(parsed_sources.tree(path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := TARGET.match(node.value)):
            yield node.lineno, m.group(1)


def test_every_folder_of_labkit_gpu_is_a_room_in_the_order():
    folders = sorted(p.name for p in (PKG / "gpu").iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(ROOMS), f"labkit/gpu/ holds {folders}; ROOMS names {sorted(ROOMS)}"


def test_each_room_imports_only_rooms_below_it():
    up = []
    for mod, path in modules().items():
        if not mod.startswith(GPU + ".") or rank(mod) == len(ROOMS):
            continue
        room = mod.split(".")[2]
        for line, target in gpu_imports(mod, path):
            if target.split(".")[:3] != mod.split(".")[:3] and rank(target) >= rank(mod):
                there = target.split(".")[2] if rank(target) < len(ROOMS) else "labkit/gpu/ itself"
                where = f"{path.relative_to(PKG.parent)}:{line}"
                up.append(f"{where}: {room} imports {target} ({there} is not below {room})")
    assert not up, f"rooms in order {' < '.join(ROOMS)}; imports that do not point down:\n" + "\n".join(up)


def test_the_order_check_sees_function_level_and_string_imports(tmp_path):
    """The check reads a ``# heavy:`` import inside a function, and a worker's target by string."""
    path = tmp_path / "probe.py"
    path.write_text(
        "def f():\n"
        "    from ..workspaces import runner  # heavy: CuPy\n"
        "TARGET = 'labkit.gpu.timing.measure:capture'\n"
    )
    found = [t for _, t in gpu_imports("labkit.gpu.cudnn.probe", path)]
    assert found == ["labkit.gpu.workspaces.runner", "labkit.gpu.timing.measure"], found
    assert all(rank(t) > rank("labkit.gpu.cudnn.probe") for t in found)
