"""The names JAX gives functions: in its compile events (``jit(f)``), for partials and
callable objects, and in a jaxpr's debug source (``"f at /path/train.py:12"``).

Its own module: these are JAX's spellings, read as text, and they change between versions.
Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs).
Fallback: ``jax._src.util.fun_name`` missing, a function is named by its ``__name__`` (or
its ``func``'s, for a partial); a name or source that does not parse is kept whole
(``function_name_from_event``) or not read (``transformed_source`` gives ``None``).
"""

from __future__ import annotations

from typing import Any


def event_name(fun: Any) -> str:
    """The name JAX's compile events give ``fun`` (``f`` in ``jit(f)``)."""
    try:
        from jax._src.util import fun_name

        return str(fun_name(fun))
    except Exception:
        name = getattr(fun, "__name__", None)
        if name is None:
            name = getattr(getattr(fun, "func", None), "__name__", "<unnamed function>")
        return str(name)


#: What some JAX versions call partials and callable objects in their events.
PLACEHOLDER_NAMES = frozenset({"<unknown>", "<unnamed function>", "<unnamed wrapped function>"})


def function_name_from_event(fun_name: str) -> str:
    """``jit(f)`` -> ``f``: the only name JAX's monitoring events carry."""
    if fun_name.endswith(")"):
        head, sep, rest = fun_name.partition("(")
        if sep and head.isidentifier():
            return rest[:-1]
    return fun_name


def transformed_source(source: str | None) -> tuple[str, str, int] | None:
    """``(name, file, line)`` from a jaxpr's debug source (``"f at /path/train.py:12"``)."""
    head, sep, site = (source or "").rpartition(" at ")
    file, colon, line = site.rpartition(":")
    if not (sep and colon and line.isdigit()):
        return None
    return head, file, int(line)
