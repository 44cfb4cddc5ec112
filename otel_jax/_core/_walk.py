"""A bounded walk through the objects a function reaches: wrappers, partials, closures.

Finding the user's function behind a library's wrapper, or the pieces of JAX's own
closures around it, means following references whose shape nobody promises. The walk
is depth first, visits each object once, goes no deeper than ``depth`` and stops after
``budget`` objects, so a cyclic or huge graph costs a bounded amount of work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: What an object leads to (its wrapped function, closure contents, ...).
Children = Callable[[Any], Iterable[Any]]


def walk(root: Any, children: Children, depth: int, budget: int) -> Iterator[Any]:
    """``root`` and the objects reached from it through ``children``, depth first (an
    object's children in the order ``children`` gives them), each once. A ``children``
    that raises leads nowhere."""
    stack: list[tuple[Any, int]] = [(root, depth)]
    seen: set[int] = set()
    while stack and budget > 0:
        value, left = stack.pop()
        budget -= 1
        if id(value) in seen:
            continue
        seen.add(id(value))
        yield value
        if left > 0:
            try:
                found = list(children(value))
            except Exception:  # an attribute lookup that raises: look no deeper
                continue
            stack.extend((child, left - 1) for child in reversed(found))
