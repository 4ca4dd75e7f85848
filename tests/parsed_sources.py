"""Source files parsed once per test process, shared by the tests that read labkit's code: a
parse of every module takes most of a second, and a dozen tests walk them all.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.lru_cache(maxsize=None)
def tree(path: Path) -> ast.Module:
    """The module at ``path``, parsed (the same object for every caller: read it, never change it).

    Args:
        path: a Python source file.

    Returns:
        Its syntax tree.
    """
    return ast.parse(Path(path).read_text())
