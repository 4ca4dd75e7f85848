"""Read-only dicts and lists for a table's ``attrs`` (its provenance and request).

pandas deep-copies a frame's ``attrs`` into every frame an operation makes from it: a column read,
a filter, a copy. A recorded table's attrs hold its request and the recording's conditions, nested
dicts a chart reads a few hundred times while it draws (tens of microseconds each time). A frozen
value is its own copy, so those copies cost nothing; a change to one raises instead of reaching the
other frames that share it.
"""

from __future__ import annotations

from typing import Any


def _read_only(self, *args, **kwargs):
    raise TypeError(f"a table's {type(self).__name__} is read-only: change a copy (dict(...), list(...))")


class FrozenDict(dict):
    """A dict that refuses changes and is its own (deep) copy; it equals, prints and serialises as
    the dict it holds."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> "FrozenDict":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenDict":
        return self

    def __reduce__(self):
        return (FrozenDict, (dict(self),))


class FrozenList(list):
    """A list that refuses changes and is its own (deep) copy; it equals, prints and serialises as
    the list it holds."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only

    def __copy__(self) -> "FrozenList":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenList":
        return self

    def __reduce__(self):
        return (FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it, at any depth, made read-only.

    Args:
        value: a JSON-like value (dicts, lists, strings, numbers, None).

    Returns:
        The same value: dicts as `FrozenDict`, lists as `FrozenList`, anything else as it is.
    """
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value
