"""A pytree node's static (auxiliary) data compared, read back by library:
dataclass pytrees' static fields (flax.struct, equinox, ``register_dataclass``),
flax.nnx Modules as pytrees and nnx graph definitions, ``jax.tree_util.Partial``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._capture import _wrappers
from .._capture._jax import _traced
from .._capture._reprs import one_line_repr
from .._core._text import safe_repr
from .._core._vocab import CauseKind
from ._model import AddChange, Change, Detail, added, removed
from ._parts import last_name, static_value_change
from ._same import safe_ne

#: Text for a key of a node's static attributes: the path it names, or the name the
#: scrubbing rules see.
KeyText = Callable[[Any], str]


def _static_field_names(node_type: Any, n: int) -> list[str] | None:
    """Names of a dataclass node's static fields, when they account for its aux data."""
    import dataclasses

    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return None
    try:
        fields = dataclasses.fields(node_type)
    except Exception:
        return None
    static = [f.name for f in fields
              if f.metadata.get("static") or f.metadata.get("pytree_node") is False]
    if len(static) == n:
        return static
    registered = _traced.dataclass_meta_fields(node_type)  # meta_fields=[...]
    if registered is not None and len(registered) == n:
        return list(registered)
    # equinox keeps one entry per field, a placeholder for the dynamic ones
    return [f.name for f in fields] if len(fields) == n else None


def aux_changes(path: str, node_type: Any, before: Any, after: Any, add: AddChange) -> None:
    """The static data of a node at ``path`` changed: each static field, nnx attribute or
    graph-definition entry that differs, by name; else the static data whole."""
    name = getattr(node_type, "__name__", "node")
    nnx_a = _wrappers.nnx_pytree_aux(node_type, before)
    nnx_b = _wrappers.nnx_pytree_aux(node_type, after) if nnx_a is not None else None
    if nnx_a is not None and nnx_b is not None:
        # An nnx Module as a pytree: its non-array attributes, by name.
        _keyed_static_changes(path, nnx_a[1], nnx_b[1], add)
        return
    if _wrappers.is_graphdef(before) and _wrappers.is_graphdef(after):
        if _graphdef_changes(path, before, after, add):
            return
    if not (isinstance(before, tuple) and isinstance(after, tuple)
            and len(before) == len(after)):
        if isinstance(node_type, type) and issubclass(node_type, functools.partial):
            # jax.tree_util.Partial: its static data is the function it wraps
            static_value_change(f"{path}.func", before, after, add)
            return
        text_a, text_b = safe_repr(before), safe_repr(after)
        if text_a == text_b:  # the same text, not equal: say why
            static_value_change(f"{path}.<static data>", before, after, add)
            return
        add(Change(path, CauseKind.PYTREE_STRUCTURE, f"{name} with static data {text_a}",
                   f"{name} with static data {text_b}"))
        return
    names = _static_field_names(node_type, len(after))
    for i, (x, y) in enumerate(zip(before, after)):
        if not safe_ne(x, y):
            continue
        if (_wrappers.is_graphdef(x) and _wrappers.is_graphdef(y)
                and _graphdef_changes(path, x, y, add)):
            continue  # an nnx graph definition kept as static data: read back
        field = names[i] if names else f"<static {i}>"
        static_value_change(f"{path}.{field}", x, y, add)


def _keyed_static_changes(path: str, before: dict[Any, Any], after: dict[Any, Any],
                          add: AddChange) -> None:
    """Static attributes by name: changed, added or removed."""
    _keyed_changes(before, after, add, lambda key: _wrappers.child_path(path, key), str)


def _keyed_changes(before: dict[Any, Any], after: dict[Any, Any], add: AddChange,
                   path_of: KeyText, name_of: KeyText) -> None:
    """Static values by key, changed, added or removed; ``path_of(key)`` names where,
    ``name_of(key)`` the name the scrubbing rules see."""
    for key, y in after.items():
        if key not in before:
            add(added(path_of(key), CauseKind.PYTREE_STRUCTURE,
                       f"static {one_line_repr(y, name=name_of(key))}"))
        elif safe_ne(before[key], y):
            static_value_change(path_of(key), before[key], y, add)
    for key, x in before.items():
        if key not in after:
            add(removed(path_of(key), CauseKind.PYTREE_STRUCTURE,
                         f"static {one_line_repr(x, name=name_of(key))}"))


def _graphdef_changes(path: str, before: Any, after: Any, add: AddChange) -> bool:
    """Two nnx graph definitions of the module at ``path``, read back and compared:
    sub-modules and static attributes by name. ``False`` when either is unreadable."""
    ga = _wrappers.read_graphdef(before, path)
    gb = _wrappers.read_graphdef(after, path)
    if ga is None or gb is None:
        return False
    na = {p: (t, d) for p, t, d in ga.nodes}
    found = False
    for p, t, d in gb.nodes:
        prev = na.get(p)
        if prev is None:
            add(added(p, CauseKind.PYTREE_STRUCTURE, d))
        elif prev[0] != t:
            add(Change(p, CauseKind.PYTREE_STRUCTURE, prev[1], d, Detail.REPLACED))
        elif prev[1] != d:
            add(Change(p, CauseKind.PYTREE_STRUCTURE, prev[1], d))
        else:
            continue
        found = True
    gone = na.keys() - {p for p, _, _ in gb.nodes}
    for p in sorted(gone):
        add(removed(p, CauseKind.PYTREE_STRUCTURE, na[p][1]))
    sa, sb = dict(ga.statics), dict(gb.statics)
    counted: list[Change] = []
    _keyed_paths_changes(sa, sb, counted.append)
    for change in counted:
        add(change)
    return found or bool(gone) or bool(counted)


def _keyed_paths_changes(before: dict[str, Any], after: dict[str, Any], add: AddChange) -> None:
    _keyed_changes(before, after, add, lambda p: p, last_name)
