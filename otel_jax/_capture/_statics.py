"""A signature's statics entries, made from values: a static argument with its texts,
hash and fields, and the nodes, attributes and structures of a library's arguments.

Its own module: what a static value is recorded as (the only user values a signature
describes beyond their types) is decided in one place, for a signature built at
once and for one built later from a detached read.
"""

from __future__ import annotations

from typing import Any

from .._core._idcache import SERIALS, IdentityCache
from .._core._text import REPR_LIMIT, type_name
from . import _wrappers
from ._jax import _values
from ._reprs import (
    DETAIL_LIMIT,
    MAX_FIELDS,
    bound_text,
    identity_fields,
    one_line_repr,
    static_fields,
    static_text,
)
from ._signature import StaticArg, StaticKind
from ._static_value import StaticValue

#: The name of the program an ``exported.call`` runs, among that compile's statics.
EXPORTED_PROGRAM = "<exported program>"


def _object_number(value: Any) -> int:
    """What tells identity-hashed values apart after the call: a serial, else the id."""
    return SERIALS.of(value) or id(value)


def static_arg(name: str, value: Any, kind: StaticKind = StaticKind.STATIC_ARGUMENT,
               keyword: bool = False) -> StaticArg:
    """A static value as a signature records it: its texts, hash, fields and a weak hold."""
    t = type(value)
    identity = getattr(t, "__hash__", None) is object.__hash__
    try:
        h: int | None = hash(value)
    except Exception:
        h = None
    long = static_text(name, value, h, identity, DETAIL_LIMIT)
    text = long if len(long) <= REPR_LIMIT else static_text(name, value, h, identity)
    return StaticArg(
        name=name, type=type_name(value), repr=text,
        detail=long if long != text else "",
        hash=h, identity_hashed=identity,
        obj_id=_object_number(value) if identity else 0,
        kind=kind,
        tree=value if kind is StaticKind.PYTREE_STRUCTURE else None,
        keyword=keyword,
        fields=_readable_fields(value, identity) if kind is StaticKind.STATIC_ARGUMENT else (),
        field_ids=identity_fields(value, SERIALS.of)
        if kind is StaticKind.STATIC_ARGUMENT and not identity else (),
        value=StaticValue(value) if identity or kind is StaticKind.STATIC_ARGUMENT else None,
        interned=identity and _values.interned_by_jax(value),
    )


def _readable_fields(value: Any, identity: bool) -> tuple[tuple[str, str], ...]:
    """What can be compared of a static value without running its code: a dataclass-like
    value's fields, a Mesh's axes and devices, and for an object hashed by identity its
    instance attributes (plain values by repr, anything else by type)."""
    found = static_fields(value) or _values.mesh_fields(value)
    if found or not identity:
        return found or ()
    try:
        state = object.__getattribute__(value, "__dict__")
    except Exception:  # slots, or no attributes: compared by identity alone
        return ()
    if type(state) is not dict:
        return ()
    return tuple((str(k), bound_text(v, str(k)))
                 for k, v in list(state.items())[:MAX_FIELDS] if isinstance(k, str))


def _node_arg(path: str, node_type: str, description: str) -> StaticArg:
    """A node of a library's argument graph (an nnx sub-module): its type, its item count."""
    return StaticArg(name=path, type=node_type, repr=description, hash=hash(description),
                     identity_hashed=False, kind=StaticKind.GRAPH_NODE)


def _attribute_arg(path: str, value: Any) -> StaticArg:
    """A static attribute of a library's graph node (``model.dropout.deterministic``)."""
    identity = getattr(type(value), "__hash__", None) is object.__hash__
    try:
        h: int | None = hash(value)
    except Exception:
        h = None
    return StaticArg(name=path, type=type_name(value),
                     repr=f"static {one_line_repr(value, name=path.rpartition('.')[2])}",
                     hash=h, identity_hashed=identity,
                     obj_id=_object_number(value) if identity else 0,
                     kind=StaticKind.PYTREE_STRUCTURE,
                     value=StaticValue(value))


_MAX_CACHED_GRAPHS = 256
# Graph read-backs are cached by the GraphDef they come from (``_wrappers``):
# the same Graph object again means the same nodes and attributes.
_graph_args_cache: IdentityCache[tuple[StaticArg, ...]] = IdentityCache(_MAX_CACHED_GRAPHS)


def graph_args(graph: _wrappers.Graph) -> tuple[StaticArg, ...]:
    """The statics entries of one graph node argument: its nodes, then its attributes."""
    cached = _graph_args_cache.get(graph)
    if cached is None:
        cached = _graph_args_cache.put(graph, tuple(
            _node_arg(*node) for node in graph.nodes) + tuple(
            _attribute_arg(path, value) for path, value in graph.statics))
    return cached


def fallback_arg(name: str, tree: Any) -> StaticArg:
    """A library's whole argument structure, compared (by ``==``, at diff time) only
    when nothing else differs: no hash or repr of a large structure per compile."""
    return StaticArg(name=name, type="structure", repr="", hash=None, identity_hashed=False,
                     kind=StaticKind.PYTREE_STRUCTURE, tree=tree, fallback=True)
