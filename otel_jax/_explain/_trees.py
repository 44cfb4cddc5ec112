"""The pytree walk: two argument trees walked together, reported where they part.

Children are named as a user writes them (dict keys, NamedTuple and dataclass
fields, nnx attributes) and matched by name where nodes are keyed, so an added
key is one change, not every later leaf shifted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._capture import _wrappers
from .._capture._signature import (
    Signature,
)
from .._core._text import safe_repr, truncate
from .._core._vocab import CauseKind
from ._aux import aux_changes
from ._merge import merge_moved_arguments
from ._model import AddChange, Change, added, removed
from ._parts import leaf_change, placement_change
from ._same import safe_ne


def structure_changes(old: Signature, new: Signature, add: AddChange) -> None:
    """Walk both argument trees together and report where they part."""
    found: list[Change] = []
    positional: set[str] = set()
    try:
        positional = _walk_arguments(old, new, found.append)
    except Exception:
        found = [Change("<arguments>", CauseKind.PYTREE_STRUCTURE,
                        safe_repr(old.treedef, 200), safe_repr(new.treedef, 200))]
    for change in merge_moved_arguments(found, positional):
        add(change)


def _walk_arguments(old: Signature, new: Signature, add: AddChange) -> set[str]:
    """Report where the argument trees part; returns the earlier call's positional names."""
    a, b = old.treedef, new.treedef
    # The root is ``(positional_args, kwargs)``: name the positional ones.
    (pa, ka), (pb, kb) = a.children(), b.children()
    names_a = list(old.top_names) + [f"args[{i}]" for i in range(
        len(old.top_names), len(pa.children()))]
    names_b = list(new.top_names) + [f"args[{i}]" for i in range(
        len(new.top_names), len(pb.children()))]
    ca, cb = pa.children(), pb.children()
    offs_a, offs_b = _offsets(ca, 0), _offsets(cb, 0)
    if len(ca) != len(cb):
        common = min(len(ca), len(cb))
        for i in range(common, len(ca)):
            add(removed(names_a[i], CauseKind.PYTREE_STRUCTURE, _summary(ca[i], old, offs_a[i])))
        for i in range(common, len(cb)):
            add(added(names_b[i], CauseKind.PYTREE_STRUCTURE, _summary(cb[i], new, offs_b[i])))
    for i in range(min(len(ca), len(cb))):
        _walk(ca[i], cb[i], names_b[i], offs_a[i], offs_b[i], old, new, add)
    _walk(ka, kb, "", pa.num_leaves, pb.num_leaves, old, new, add,
          _kwarg_names(ka, old), _kwarg_names(kb, new))
    return set(names_a[:len(ca)])


def _kwarg_names(t: Any, sig: Signature) -> list[str] | None:
    """The name of each keyword argument: its parameter's, or ``kwargs['k']`` for one
    that the function's ``**kwargs`` collects (as JAX names its leaves)."""
    data = None if _is_leaf(t) else t.node_data()
    if not (data and data[0] is dict and data[1] is not None):
        return None
    var, named = sig.var_keyword, sig.keywords
    return [str(k) if not var or k in named else f"{var}[{k!r}]" for k in data[1]]


def _walk(a: Any, b: Any, path: str, oa: int, ob: int, old: Signature, new: Signature,
          add: AddChange, names_a: list[str] | None = None,
          names_b: list[str] | None = None) -> None:
    if _is_leaf(a) and _is_leaf(b):
        if oa < len(old.types) and ob < len(new.types):
            if old.types[oa] != new.types[ob]:
                add(leaf_change(path, old.avals[oa], new.avals[ob], old.types[oa],
                                 new.types[ob]))
            elif old.placements[oa] != new.placements[ob]:
                add(placement_change(path, old.placements[oa], new.placements[ob]))
        return
    da = None if _is_leaf(a) else a.node_data()
    db = None if _is_leaf(b) else b.node_data()
    keyed = da is not None and db is not None and da[0] is db[0] and (
        da[0] is dict or _wrappers.nnx_pytree_aux(da[0], da[1]) is not None
        or (mapping_keys(a, da) is not None and mapping_keys(b, db) is not None))
    if da is None or db is None or da[0] is not db[0] or (
            not keyed and len(a.children()) != len(b.children())):
        if da is not None and db is not None and _fields_changed(
                a, b, path, oa, ob, da[0], db[0], old, new, add):
            return
        add(Change(path or "<arguments>", CauseKind.PYTREE_STRUCTURE,
                   _summary(a, old, oa), _summary(b, new, ob)))
        return
    if da[0] is not dict and safe_ne(da[1], db[1]) and not (
            keyed and mapping_keys(a, da) is not None):
        # Same node type and arity, other auxiliary data: the static fields of a
        # dataclass-like node (flax.struct, equinox, register_dataclass) changed.
        aux_changes(path or "<arguments>", da[0], da[1], db[1], add)
    ca, cb = a.children(), b.children()
    offs_a, offs_b = _offsets(ca, oa), _offsets(cb, ob)
    if keyed:  # children matched by key: a dict's, an nnx Module's attributes
        na = names_a or _child_names(a, path, da)
        nb = names_b or _child_names(b, path, db)
        index_b = {n: i for i, n in enumerate(nb)}
        seen = set()
        for i, n in enumerate(na):
            j = index_b.get(n)
            if j is None:
                add(removed(n, CauseKind.PYTREE_STRUCTURE, _summary(ca[i], old, offs_a[i])))
            else:
                seen.add(j)
                _walk(ca[i], cb[j], n, offs_a[i], offs_b[j], old, new, add)
        for j, n in enumerate(nb):
            if j not in seen:
                add(added(n, CauseKind.PYTREE_STRUCTURE, _summary(cb[j], new, offs_b[j])))
        return
    nb = names_b or _paired_names(path, da[0], ((a, old, oa), (b, new, ob)))
    for i, (x, y) in enumerate(zip(ca, cb)):
        _walk(x, y, nb[i], offs_a[i], offs_b[i], old, new, add)


def _fields_changed(a: Any, b: Any, path: str, oa: int, ob: int, type_a: Any, type_b: Any,
                    old: Signature, new: Signature, add: AddChange) -> bool:
    """A node with field names (a NamedTuple, a dataclass pytree) that gained or lost
    fields, or a class of the same name defined again: named field by field.
    ``False`` when the two nodes are not one class's versions (then summarised whole)."""
    if type_a is not type_b and getattr(type_a, "__qualname__", None) != getattr(
            type_b, "__qualname__", type_a):
        return False
    ca, cb = a.children(), b.children()
    head = path or "<arguments>"
    fa = _side_names(head, type_a, a, old, oa)
    fb = _side_names(head, type_b, b, new, ob)
    if fa is None or fb is None:
        return False
    if fa == fb:  # the same fields: only the class object differs
        if type_a is type_b:
            return False
        add(Change(head, CauseKind.PYTREE_STRUCTURE, f"{type_name_of(type_a)} (a class)",
                   f"another class {type_name_of(type_b)} with the same fields (the class "
                   "was defined again: JAX keys a tree by its node classes)"))
    offs_a, offs_b = _offsets(ca, oa), _offsets(cb, ob)
    index_b = {f: j for j, f in enumerate(fb)}
    for i, f in enumerate(fa):
        j = index_b.get(f)
        if j is None:
            add(removed(f, CauseKind.PYTREE_STRUCTURE, _summary(ca[i], old, offs_a[i])))
        else:
            _walk(ca[i], cb[j], f, offs_a[i], offs_b[j], old, new, add)
    known = set(fa)
    for j, f in enumerate(fb):
        if f not in known:
            add(added(f, CauseKind.PYTREE_STRUCTURE, _summary(cb[j], new, offs_b[j])))
    return True


# --- naming a node's children by the key paths JAX gave its leaves -------------------
#
# A node's children are in the order its flatten function gives them, which need not
# be the order its class declares its fields in (a chex.dataclass flattens them sorted
# by name; any tree_flatten may reorder). The leaf names JAX gave at the compile (its
# key paths, ``state.ema_params['b']``) say which key each child is under; field names
# are used only where those paths confirm the order, positions (``state[1]``) otherwise.


def key_after(leaf_path: str, path: str) -> str | None:
    """``path`` and the one key that follows it in ``leaf_path`` (``.name``, ``[0]``,
    ``['k']``), or ``None`` when ``leaf_path`` is not under ``path``."""
    if not path or not leaf_path.startswith(path) or len(leaf_path) <= len(path):
        return None
    rest = leaf_path[len(path):]
    if rest[0] == ".":
        end = 1
        while end < len(rest) and rest[end] not in ".[":
            end += 1
        return path + rest[:end] if end > 1 else None
    if rest[0] != "[":
        return None
    if len(rest) > 1 and rest[1] in "'\"":
        quote, i = rest[1], 2
        while i < len(rest) and rest[i] != quote:
            i += 2 if rest[i] == "\\" else 1
        if i + 1 < len(rest) and rest[i + 1] == "]":
            return path + rest[:i + 2]
        return None
    end = rest.find("]")
    return path + rest[:end + 1] if end > 1 else None


def _keys_from_paths(t: Any, path: str, sig: Signature, offset: int) -> list[str | None]:
    """Each child's name from the key path JAX gave its first leaf (``None``: no leaf)."""
    out: list[str | None] = []
    paths = sig.paths
    for child in t.children():
        name = None
        if child.num_leaves and offset < len(paths):
            name = key_after(str(paths[offset]), path)
        out.append(name)
        offset += child.num_leaves
    return out


def _declared(path: str, node_type: Any, n: int) -> tuple[list[str] | None, bool]:
    """The field names a node's class declares, and whether they are JAX's own order
    (a NamedTuple's fields) rather than a guess to be confirmed by key paths."""
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n and all(isinstance(f, str) for f in fields):
        return [f"{path}.{f}" for f in fields], True
    data_fields = _data_field_names(node_type, n)
    if data_fields is not None:
        return [f"{path}.{f}" for f in data_fields], False
    return None, False


def _named(path: str, node_type: Any, n: int, found: list[str | None]) -> list[str | None]:
    """Each child's name: its key path where one was found, else its declared field when
    the key paths found confirm the declared order, else ``None``."""
    known = [k for k in found if k is not None]
    if len(set(known)) != len(known):  # not key paths of one node: trust none of them
        found = [None] * n
    declared, own_order = _declared(path, node_type, n)
    if declared is not None:
        agree = [k == d for k, d in zip(found, declared) if k is not None]
        if all(agree) and (own_order or any(agree)):
            return [k or d for k, d in zip(found, declared)]
    return found


def _paired_names(path: str, node_type: Any, sides: Sequence[tuple[Any, Signature, int]],
                  ) -> list[str]:
    """The names of the children of one node type seen in two signatures (same arity):
    what either side's key paths say, a position where neither says."""
    n = len(sides[0][0].children())
    found: list[str | None] = [None] * n
    for t, sig, offset in sides:
        for i, k in enumerate(_keys_from_paths(t, path, sig, offset)):
            found[i] = found[i] or k
    head = path or "<arguments>"
    return [k or f"{head}[{i}]" for i, k in enumerate(_named(head, node_type, n, found))]


def _side_names(path: str, node_type: Any, t: Any, sig: Signature, offset: int,
                ) -> list[str] | None:
    """Every field's name in one signature of a node with fields (a NamedTuple, a
    dataclass pytree), or ``None`` when one cannot be told."""
    n = len(t.children())
    if _declared(path, node_type, n)[0] is None:  # no fields: a tuple, a list, a node
        return None
    names = _named(path, node_type, n, _keys_from_paths(t, path, sig, offset))
    return None if any(k is None for k in names) else [k for k in names if k is not None]


def _node_fields(node_type: Any, n: int) -> list[str] | None:
    """The field name of each of a NamedTuple's or dataclass pytree's ``n`` children."""
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n and all(isinstance(f, str) for f in fields):
        return list(fields)
    return _data_field_names(node_type, n)


def _data_field_names(node_type: Any, n: int) -> list[str] | None:
    """Names of a dataclass pytree's children (flax.struct, equinox Modules,
    register_dataclass): its fields that are not static, when they are ``n``."""
    import dataclasses

    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return None
    try:
        names = [f.name for f in dataclasses.fields(node_type)
                 if not (f.metadata.get("static") or f.metadata.get("pytree_node") is False)]
    except Exception:
        return None
    return names if len(names) == n else None


#: Node types seen, and whether their auxiliary data is their children's keys.
_mapping_types: dict[Any, bool] = {}
_MAX_MAPPING_TYPES = 256


def mapping_keys(t: Any, data: Any) -> tuple[Any, ...] | None:
    """The keys of a mapping-like node (a dict, flax's ``FrozenDict``, nnx's ``State``):
    its auxiliary data when that is its children's keys, as JAX's key paths name them
    (``DictKey``); ``None`` for any other node. Checked once per node type."""
    node_type, aux = data
    if node_type is dict:
        return tuple(aux) if aux is not None else None
    if not (isinstance(aux, tuple) and len(aux) == len(t.children())):
        return None
    verdict = _mapping_types.get(node_type)
    if verdict is None:
        verdict = _keys_are(t, aux)
        if len(_mapping_types) >= _MAX_MAPPING_TYPES:
            _mapping_types.clear()
        _mapping_types[node_type] = verdict
    return aux if verdict else None


def _keys_are(t: Any, aux: tuple[Any, ...]) -> bool:
    """Whether ``t``'s children, flattened with their keys, are keyed by ``aux``."""
    try:
        from jax import tree_util

        obj = tree_util.tree_unflatten(t, [0] * t.num_leaves)
        children = tree_util.tree_flatten_with_path(obj, is_leaf=lambda x: x is not obj)[0]
        keys = tuple(getattr(path[0], "key", _NO_KEY) for path, _ in children)
        return len(keys) == len(aux) and set(keys) == set(aux)
    except Exception:  # a node that will not rebuild from placeholders
        return False


_NO_KEY = object()


def _child_names(t: Any, path: str, data: Any) -> list[str]:
    node_type, aux = data
    n = len(t.children())
    if node_type is dict and aux is not None:
        return [f"{path}[{k!r}]" for k in aux]
    keys = mapping_keys(t, data) if node_type is not tuple and node_type is not list else None
    if keys is not None:
        return [f"{path}[{k!r}]" for k in keys]
    if node_type is not dict and node_type is not tuple and node_type is not list:
        nnx = _wrappers.nnx_pytree_aux(node_type, aux)
        if nnx is not None and len(nnx[0]) == n:
            return [_wrappers.child_path(path, k) for k in nnx[0]]
        if n == 1 and _wrappers.is_nnx_variable(node_type):
            return [f"{path}.value"]
    fields = getattr(node_type, "_fields", None)
    if isinstance(fields, tuple) and len(fields) == n:
        return [f"{path}.{f}" for f in fields]
    data_fields = _data_field_names(node_type, n)
    if data_fields is not None:
        return [f"{path}.{f}" for f in data_fields]
    return [f"{path}[{i}]" for i in range(n)]


def type_name_of(node_type: Any) -> str:
    """A node class as a user names it: qualified by its module unless a builtin or main."""
    module = getattr(node_type, "__module__", "") or ""
    qual = getattr(node_type, "__qualname__", None) or getattr(node_type, "__name__", "node")
    return str(qual) if module in ("builtins", "__main__", "") else f"{module}.{qual}"


def _offsets(children: Sequence[Any], start: int) -> list[int]:
    out = []
    for c in children:
        out.append(start)
        start += c.num_leaves
    return out


def _is_leaf(t: Any) -> bool:
    return bool(t.num_nodes == 1 and t.num_leaves == 1)


def _summary(t: Any, sig: Signature, offset: int) -> str:
    if _is_leaf(t):
        return sig.types[offset] if offset < len(sig.types) else "leaf"
    data = t.node_data()
    node_type = data[0] if data else None
    if node_type is type(None):
        return "None"
    name = getattr(node_type, "__name__", "node")
    keys = mapping_keys(t, data) if data else None
    if keys is not None:
        return truncate(f"{name} with keys {list(keys)}")
    return f"{name} with {t.num_leaves} leaves"


def tree_changes(path: str, a: Any, b: Any, add: AddChange) -> None:
    """Where two argument trees (treedefs a wrapper passed as static) part."""
    if a is None or b is None or not hasattr(a, "node_data") or not hasattr(b, "node_data"):
        add(Change(path, CauseKind.PYTREE_STRUCTURE, safe_repr(a), safe_repr(b)))
        return
    if not safe_ne(a, b):
        return
    da = None if _is_leaf(a) else a.node_data()
    db = None if _is_leaf(b) else b.node_data()
    keys_a = mapping_keys(a, da) if da is not None else None
    keys_b = mapping_keys(b, db) if db is not None else None
    mapping = keys_a is not None and keys_b is not None
    if da is None or db is None or da[0] is not db[0] or (
            not mapping and len(a.children()) != len(b.children())):
        if da is not None and db is not None and _tree_fields_changed(path, a, b, da[0],
                                                                      db[0], add):
            return
        add(Change(path, CauseKind.PYTREE_STRUCTURE, _tree_text(a, da), _tree_text(b, db)))
        return
    if mapping:
        kb = dict(zip(keys_b or (), b.children()))
        ka = dict(zip(keys_a or (), a.children()))
        for k, child in ka.items():
            if k not in kb:
                add(removed(f"{path}[{k!r}]", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
            else:
                tree_changes(f"{path}[{k!r}]", child, kb[k], add)
        for k, child in kb.items():
            if k not in ka:
                add(added(f"{path}[{k!r}]", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
        return
    if safe_ne(da[1], db[1]):
        aux_changes(path, da[0], da[1], db[1], add)
    for name, x, y in zip(_child_names(b, path, db), a.children(), b.children()):
        tree_changes(name, x, y, add)


def _tree_fields_changed(path: str, a: Any, b: Any, type_a: Any, type_b: Any,
                         add: AddChange) -> bool:
    """``_fields_changed`` for two bare treedefs (a wrapper's static structure)."""
    if type_a is not type_b and getattr(type_a, "__qualname__", None) != getattr(
            type_b, "__qualname__", type_a):
        return False
    ca, cb = a.children(), b.children()
    fa, fb = _node_fields(type_a, len(ca)), _node_fields(type_b, len(cb))
    if fa is None or fb is None or (fa == fb and type_a is type_b):
        return False
    if fa == fb:
        add(Change(path, CauseKind.PYTREE_STRUCTURE, f"{type_name_of(type_a)} (a class)",
                   f"another class {type_name_of(type_b)} with the same fields (the class "
                   "was defined again: JAX keys a tree by its node classes)"))
    by_field = dict(zip(fb, cb))
    for f, child in zip(fa, ca):
        if f in by_field:
            tree_changes(f"{path}.{f}", child, by_field[f], add)
        else:
            add(removed(f"{path}.{f}", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
    for f, child in zip(fb, cb):
        if f not in set(fa):
            add(added(f"{path}.{f}", CauseKind.PYTREE_STRUCTURE, _tree_text(child)))
    return True


def _tree_text(t: Any, data: Any = None) -> str:
    if _is_leaf(t):
        return "leaf"
    data = data or t.node_data()
    node_type = data[0] if data else None
    if node_type is type(None):
        return "None"
    return f"{getattr(node_type, '__name__', 'node')} with {t.num_leaves} leaves"
