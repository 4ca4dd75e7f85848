"""A workspace strategy's label, the one way every table, chart and check names a strategy with its
options (`label`), and the label among several that a learner's spelling names (`match`).
"""

from __future__ import annotations

from typing import Optional, Sequence

MIB = 1 << 20
#: a fixed arena's size when none is given, bytes (`FixedArena`'s default)
ARENA_BYTES = 1 << 30
#: a keyed cache's budget when none is given, bytes (`KeyedCache`'s default)
CACHE_BUDGET_BYTES = 256 << 20


def _size(n: int) -> str:
    """Bytes as a label writes them: whole MiB from 1 MiB up, else bytes."""
    return f"{n / MIB:.0f} MiB" if n >= MIB else f"{n:,} B"


def label(name: str, **options) -> str:
    """A strategy's label: its name, then the options that tell it from another of its kind.

    Args:
        name: a strategy's name, as `make` takes it (``fixed_arena``, ``keyed_cache``, ``scratchpad``...).
        **options: its options, as `make` takes them: ``size_bytes`` (bytes), ``budget_bytes``
            (bytes), ``key``, ``shared``.

    Returns:
        E.g. ``fixed_arena (1024 MiB)``, ``keyed_cache (32 MiB, key=full)``, ``scratchpad_per_stream``,
        ``async_pool``.
    """
    if name == "fixed_arena":
        return f"{name} ({_size(int(options.get('size_bytes', ARENA_BYTES)))})"
    if name == "keyed_cache":
        budget = _size(int(options.get("budget_bytes", CACHE_BUDGET_BYTES)))
        return f"{name} ({budget}, key={options.get('key', 'full')})"
    if name == "scratchpad":
        return "scratchpad_shared" if options.get("shared") else "scratchpad_per_stream"
    return name


def _norm(text: str) -> str:
    """Lower case, without spaces: ``Keyed_cache (32 MiB)`` -> ``keyed_cache(32mib)``."""
    return "".join(str(text).split()).lower()


def _parts(text: str) -> tuple:
    """(name, options) of a normalised label: ``keyed_cache(32mib,key=full)`` -> (``keyed_cache``,
    ``32mib,key=full``)."""
    name, _, rest = text.partition("(")
    return name, rest.rstrip(")")


def match(answer: str, labels: Sequence[str]) -> Optional[str]:
    """The one label of ``labels`` a learner's spelling names, or None.

    Any case and spacing does; so does a strategy's name alone (``scratchpad`` for
    ``scratchpad_per_stream``), with anything in parentheses after it, where one label has that
    name; where several do, the options written must begin one label's options (``keyed_cache (32
    MiB)``); so does a beginning of one label alone (``pre``).

    Args:
        answer: what the learner wrote.
        labels: the labels the chart or table shows.

    Returns:
        The label, or None when the answer names none or several.
    """
    a = _norm(answer)
    exact = [lab for lab in labels if _norm(lab) == a]
    if len(exact) == 1:
        return exact[0]
    name, opts = _parts(a)
    kind = [lab for lab in labels if _parts(_norm(lab))[0] == name] or [
        lab for lab in labels if _parts(_norm(lab))[0].startswith(name + "_")
    ]
    if len(kind) == 1:
        return kind[0]
    hit = [lab for lab in kind if opts and _parts(_norm(lab))[1].startswith(opts)]
    if len(hit) == 1:
        return hit[0]
    begun = [lab for lab in labels if _norm(lab).startswith(a)]
    return begun[0] if len(begun) == 1 else None
