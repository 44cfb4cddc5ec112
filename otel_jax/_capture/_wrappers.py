"""How wrapper libraries lay a user's arguments out around a jitted function of their own.

``flax.nnx.jit`` passes each graph node (a Module, an Optimizer) as a
``NodeStates``: a ``GraphDef`` (static: node types, attribute names, the
values of non-array attributes) and the flat list of its array leaves. JAX
then names a leaf ``model.states[0][3]`` and reports any change of the module
as one ``GraphDef`` repr. ``nnx_layout`` reads the GraphDef back: each leaf
named by its attribute path (``model.l1.kernel``), each non-array attribute
its own static field (``model.dropout.deterministic``), each sub-module a
node (``model.l3``, ``model.layers`` with its item count).

``equinox.filter_jit`` jits ``fun_wrapped(dynamic_donate, dynamic_nodonate,
static)``: the user's arguments are flattened, arrays go to the two dynamic
dicts (``first`` argument, ``rest`` of the arguments and keywords, ``fun``) and
every other leaf, with the tree structures, to one static tuple. JAX then
names a leaf ``dynamic_nodonate['rest'][3]`` and reports every static change
as one unreadable ``static`` tuple. A ``Layout`` undoes that: each leaf named
by the user's own path (``batch[1]``, ``params['w']``), each static leaf its
own static argument, and the argument structure as one more.

Everything here reads a library's private layout: any surprise returns
``None`` and the signature keeps JAX's own names.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MAX_CACHED_TREES = 256
_leaf_keys_cache: dict[Any, list[tuple[Any, ...]]] = {}

STRUCTURE = "<argument structure>"
FUNCTION = "<function>"  # what equinox.filter_jit was given


@dataclass(frozen=True, slots=True)
class Graph:
    """One graph node argument read back: its leaves, static attributes and sub-nodes."""

    leaves: tuple[str, ...]  # user path of each array leaf, in nnx's leaf order
    statics: tuple[tuple[str, Any], ...]  # (user path, value) of each non-array attribute
    nodes: tuple[tuple[str, str, str], ...]  # (user path, node type, description)


@dataclass(frozen=True, slots=True)
class Layout:
    """The user's view of one call through a wrapper library."""

    rename: Callable[[str], str]  # JAX's name of a dynamic leaf -> the user's path
    statics: list[tuple[str, Any]]  # (user path, value) of each static leaf
    # (user name, treedef) of each argument: what fixes the trees besides leaf paths
    structure: tuple[tuple[str, Any], ...]
    # graph node arguments read back (nnx): their nodes and static attributes
    graphs: tuple[Graph, ...] = ()
    # (user name, treedef) of each argument, compared only when nothing above
    # differs: the library's own structure, read whole (today's explanation)
    fallback: tuple[tuple[str, Any], ...] = ()
    # whether the call's own static arguments stand beside ``statics``
    keeps_statics: bool = False
    # (user name, value) of each argument with no array leaf (``rngs=None``): it has
    # no leaf path to stand for it, and is kept in the argument tree as it was passed
    empty: tuple[tuple[str, Any], ...] = ()


def _leaf_keys(treedef: Any) -> list[tuple[Any, ...]]:
    """The key path of each leaf of ``treedef``, in flattening order."""
    keys = _leaf_keys_cache.get(treedef)
    if keys is None:
        from jax import tree_util

        tree = tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves)))
        keys = [tuple(path) for path, _ in tree_util.tree_flatten_with_path(tree)[0]]
        if len(_leaf_keys_cache) >= _MAX_CACHED_TREES:
            _leaf_keys_cache.clear()
        _leaf_keys_cache[treedef] = keys
    return keys


def _keystr(keys: tuple[Any, ...]) -> str:
    from jax import tree_util

    return tree_util.keystr(keys) if keys else ""


def _key_value(key: Any) -> Any:
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return getattr(key, attr)
    return None


def _positional_names(fun: Any) -> tuple[list[str], str | None]:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return [], None
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_POSITIONAL), None)
    return names, star


def _user_parameters(fun_leaves: tuple[Any, ...], fun_tree: Any) -> tuple[list[str], str | None]:
    """Positional parameter names of what was filter_jit-ed: a function or a callable Module."""
    if fun_tree.num_leaves == 1 and fun_tree.num_nodes == 1 and callable(fun_leaves[0]):
        return _positional_names(fun_leaves[0])
    data = fun_tree.node_data()
    call = getattr(data[0], "__call__", None) if data else None
    if call is None:
        return [], None
    names, star = _positional_names(call)
    return names[1:], star  # unbound __call__: drop self


def _is_pair(value: Any) -> bool:
    """``(leaves, treedef)`` as equinox's ``hashable_partition`` returns it."""
    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple)
            and hasattr(value[1], "num_leaves") and len(value[0]) == value[1].num_leaves)


def _equinox_static(miss: Any) -> tuple[Any, Any, Any] | None:
    """The ``static`` argument of an ``equinox.filter_jit`` call: three ``(leaves, treedef)``
    pairs (the function, the first argument, the rest), or ``None`` for anything else."""
    module = getattr(miss.fun, "__module__", None) or ""
    if not module.startswith("equinox") or len(miss.args) != 3:
        return None
    static = miss.args[2]
    if not (isinstance(static, tuple) and len(static) == 3 and all(map(_is_pair, static))):
        return None
    return static


def equinox_callable(miss: Any) -> Any | None:
    """What ``equinox.filter_jit`` was given (a function, a Module instance, a bound
    method, another wrapper), rebuilt from the call's static part with ``None`` for its
    array leaves: enough to find the user's callable, never to call. ``None`` for any
    other miss, or when it does not rebuild."""
    static = _equinox_static(miss)
    if static is None:
        return None
    return _rebuilt(static[0])


def _rebuilt(pair: Any) -> Any | None:
    leaves, treedef = pair
    from jax import tree_util

    try:
        return tree_util.tree_unflatten(treedef, list(leaves))
    except Exception:  # a node that will not rebuild without its arrays
        return None


_FRAMES_WALKED = 200


def equinox_called(jitted: Any) -> Any | None:
    """What ``equinox.filter_jit`` was given, for a call of ``jitted`` (its jitted function,
    or the function that jits) still running on this thread, or ``None``.

    Under a transformation outside jit (``filter_jvp``, ``filter_vmap``, grad's forward
    program) only the traced program reaches the miss, not the call's static part, which
    holds the callable: it is a local (``static``) of equinox's own call frame
    (``_call(jit_wrapper, ...)``), matched by the jitted function it calls. Read off the
    stack, no user code run: a frame laid out otherwise is passed over."""
    if jitted is None:
        return None
    frame: Any = sys._getframe(1)
    for _ in range(_FRAMES_WALKED):
        if frame is None:
            return None
        code = frame.f_code
        if (code.co_name == "_call" and "jit_wrapper" in code.co_varnames
                and str(frame.f_globals.get("__name__", "")).startswith("equinox")):
            found = frame.f_locals
            static = found.get("static")
            cached = getattr(found.get("jit_wrapper"), "_cached", None)
            # the jitted function, or the function it jits (what a transformed miss keeps)
            if (cached is jitted or getattr(cached, "__wrapped__", None) is jitted) and \
                    isinstance(static, tuple) and len(static) == 3 and _is_pair(static[0]):
                return _rebuilt(static[0])
        frame = frame.f_back
    return None


def equinox_arguments(miss: Any) -> tuple[Any, ...]:
    """The static leaves of an ``equinox.filter_jit`` call's arguments (not of the callable
    it was given): where a library function given to it (``filter_jit(filter_jvp)``) finds
    the user's function it was called with."""
    static = _equinox_static(miss)
    if static is None:
        return ()
    return tuple(static[1][0]) + tuple(static[2][0])


def describe_callable(fun: Any, depth: int = 4) -> str:
    """``filter_value_and_grad(loss)``: a wrapped callable named by its wrappers, for the
    static entry that tells two wrappings of one function apart."""
    name = _WRAPPER_NAMES.get(type(fun).__name__) if depth > 0 else None
    inner = getattr(fun, "__wrapped__", None) if name else None
    if name and inner is not None and inner is not fun:
        return f"{name}({describe_callable(inner, depth - 1)})"
    inner = getattr(fun, "__wrapped__", None) if depth > 0 else None
    code = getattr(fun, "__code__", None)
    if inner is not None and code is not None and code.co_name != getattr(
            inner, "__name__", None):  # jax.grad(f): a function of JAX's that wraps f
        return f"{code.co_name}({describe_callable(inner, depth - 1)})"
    if isinstance(fun, type) or code is not None or hasattr(fun, "__func__"):
        return str(getattr(fun, "__qualname__", None) or getattr(fun, "__name__", "?"))
    return type(fun).__qualname__


#: equinox's wrapper modules, by the function that makes them
_WRAPPER_NAMES = {
    "_JitWrapper": "filter_jit", "_GradWrapper": "filter_grad",
    "_ValueAndGradWrapper": "filter_value_and_grad", "_VmapWrapper": "filter_vmap",
    "_PmapWrapper": "filter_pmap", "_CheckpointWrapper": "filter_checkpoint",
}


def equinox_layout(miss: Any) -> Layout | None:
    """The layout of an ``equinox.filter_jit`` call, or ``None`` for anything else."""
    static = _equinox_static(miss)
    if static is None:
        return None
    (fun_leaves, fun_tree), (first_leaves, first_tree), (rest_leaves, rest_tree) = static
    names, star = _user_parameters(fun_leaves, fun_tree)

    def positional(i: int) -> str:
        if i < len(names):
            return names[i]
        return f"{star or 'args'}[{i - len(names)}]"

    first_keys = _leaf_keys(first_tree)
    rest_keys = _leaf_keys(rest_tree)

    def first_path(i: int) -> str:
        return positional(0) + _keystr(first_keys[i])

    def rest_path(i: int) -> str:
        keys = rest_keys[i]
        if len(keys) >= 2 and _key_value(keys[0]) == 0:  # the positional arguments
            return positional(1 + int(_key_value(keys[1]))) + _keystr(keys[2:])
        if len(keys) >= 2 and _key_value(keys[0]) == 1:  # the keyword arguments
            return str(_key_value(keys[1])) + _keystr(keys[2:])
        return _keystr(keys)

    parts: dict[str, Callable[[int], str]] = {
        "first": first_path, "rest": rest_path, "fun": lambda i: f"{FUNCTION}[{i}]"}

    def rename(jax_name: str) -> str:
        # "dynamic_nodonate['rest'][3]" -> the user's path of rest leaf 3
        head, sep, tail = jax_name.partition("['")
        part, sep2, index = tail.partition("'][")
        if not (sep and sep2 and head in ("dynamic_donate", "dynamic_nodonate")
                and index.endswith("]") and index[:-1].isdigit() and part in parts):
            return jax_name
        try:
            return parts[part](int(index[:-1]))
        except (IndexError, ValueError, TypeError):
            return jax_name

    statics = [(first_path(i), v) for i, v in enumerate(first_leaves) if v is not None]
    statics += [(rest_path(i), v) for i, v in enumerate(rest_leaves) if v is not None]
    fun_keys = _leaf_keys(fun_tree)
    if fun_tree.num_nodes > 1:  # a wrapper or a Module: which one, then its fields
        given = equinox_callable(miss)
        if given is not None:
            statics.append((FUNCTION, describe_callable(given)))
    statics += [(FUNCTION + _keystr(fun_keys[i]) if fun_keys[i] else f"{FUNCTION}[{i}]", v)
                for i, v in enumerate(fun_leaves) if v is not None]
    return Layout(rename, statics, _named_trees(positional, first_tree, rest_tree))


def _named_trees(positional: Callable[[int], str], first_tree: Any, rest_tree: Any,
                 ) -> tuple[tuple[str, Any], ...]:
    """Each user argument's own tree: the first one, then ``((rest...), kwargs)`` split up."""
    out = [(positional(0), first_tree)]
    rest_args, kwargs = rest_tree.children()
    for j, child in enumerate(rest_args.children()):
        out.append((positional(1 + j), child))
    data = kwargs.node_data()
    if data is not None and data[0] is dict and data[1] is not None:
        out.extend((str(k), child) for k, child in zip(data[1], kwargs.children()))
    return tuple(out)


# --- flax.nnx ------------------------------------------------------------------------

_MAX_CACHED_GRAPHS = 256
_MAX_GRAPH_NODES = 100_000
_graph_cache: dict[Any, list[tuple[Any, Graph | None]]] = {}
# nnx's own bookkeeping attributes, not the user's
_INTERNAL_PREFIXES = ("_pytree__", "_object__", "_graph_node__")


SHARED = "<shared reference>"  # the node type of a reference to a node seen before


class _Unreadable(Exception):
    """A GraphDef laid out in a way this reader does not know."""


def nnx_pytree_aux(node_type: Any, aux: Any) -> tuple[tuple[Any, ...], dict[Any, Any]] | None:
    """``(child keys, {static key: value})`` of an nnx Module/Pytree flattened as a
    JAX pytree (``nnx.jit(graph=False)``), or ``None`` for any other node."""
    if not (isinstance(node_type, type) and hasattr(node_type, "_pytree__nodes")):
        return None
    if not (isinstance(aux, tuple) and len(aux) == 3 and all(isinstance(p, tuple) for p in aux)
            and len(aux[1]) == len(aux[2])):
        return None
    node_keys, static_keys, static_values = aux
    statics = {k: v for k, v in zip(static_keys, static_values)
               if not (isinstance(k, str) and k.startswith(_INTERNAL_PREFIXES))}
    return node_keys, statics


def is_nnx_variable(node_type: Any) -> bool:
    """An nnx ``Variable`` (``Param``, ``BatchStat``...): one child, its ``.value``."""
    try:
        return any(k.__name__ == "Variable" and (k.__module__ or "").startswith("flax.nnx")
                   for k in node_type.__mro__)
    except Exception:
        return False


def is_graphdef(value: Any) -> bool:
    t = type(value)
    return t.__name__ == "GraphDef" and (getattr(t, "__module__", "") or "").startswith("flax")


def child_path(path: str, key: Any) -> str:
    """``model.l1`` for an attribute, ``model.layers[0]`` for an index."""
    return _child_path(path, key)


def _is_node_states(value: Any) -> bool:
    t = type(value)
    return t.__name__ == "NodeStates" and (getattr(t, "__module__", "") or "").startswith(
        "flax")


def _child_path(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def read_graphdef(graphdef: Any, head: str, shared: dict[Any, str] | None = None,
                  ) -> Graph | None:
    """The user's view of an nnx ``GraphDef`` rooted at ``head``, or ``None`` if unknown.

    Reads the flat layout of flax 0.11+ (``nodes``, ``attributes``,
    ``num_leaves``; nodes and attributes in depth-first order). ``shared``
    maps node indices to paths across the arguments of one call (a module
    passed twice is a reference the second time).
    """
    try:
        # Keyed by a cheap fingerprint, matched by ``==``: hashing a large GraphDef
        # (its metadata mappings sort their keys) costs more than comparing it.
        key = (head, len(graphdef.nodes), len(graphdef.attributes), graphdef.num_leaves)
    except Exception:
        return None
    if shared is None:
        for known, graph in _graph_cache.get(key, ()):
            try:
                if known is graphdef or known == graphdef:
                    return graph
            except Exception:
                return None
    try:
        graph = _read_graphdef(graphdef, head, {} if shared is None else shared)
    except (_Unreadable, StopIteration, AttributeError, TypeError, ValueError):
        graph = None
    if shared is None:
        if len(_graph_cache) >= _MAX_CACHED_GRAPHS:
            _graph_cache.clear()
        bucket = _graph_cache.setdefault(key, [])
        if len(bucket) >= 4:
            del bucket[0]
        bucket.append((graphdef, graph))
    return graph


def _read_graphdef(graphdef: Any, head: str, index_paths: dict[Any, str]) -> Graph:
    nodes = list(graphdef.nodes)
    attributes = list(graphdef.attributes)
    num_leaves = int(graphdef.num_leaves)
    if len(nodes) > _MAX_GRAPH_NODES or not nodes:
        raise _Unreadable
    node_iter, attr_iter = iter(nodes), iter(attributes)
    leaves: list[str] = []
    statics: list[tuple[str, Any]] = []
    described: list[tuple[str, str, str]] = []

    def visit(nodedef: Any, path: str, hidden: bool) -> None:
        kind = type(nodedef).__name__
        if kind == "NodeRef":  # a node seen before: no leaves of its own
            if not hidden:
                earlier = index_paths.get(getattr(nodedef, "index", None))
                described.append((path, SHARED, f"shared with {earlier}" if earlier
                                  else "a shared reference"))
            return
        if kind == "VariableDef":
            index_paths.setdefault(nodedef.index, path)
            if type(getattr(nodedef, "array_refdef", None)).__name__ != "NodeRef":
                leaves.append(path)
            return
        if kind == "ArrayRefDef":
            leaves.append(path)
            return
        if kind != "NodeDef":
            raise _Unreadable(kind)
        node_type = nodedef.type
        type_text = getattr(node_type, "__name__", None) or type(node_type).__name__
        if nodedef.index is not None:
            index_paths.setdefault(nodedef.index, path)
        slot = len(described)
        if not hidden:
            described.append((path, type_text, type_text))
        items = 0
        for _ in range(int(nodedef.num_attributes)):
            key, attr = next(attr_iter)
            internal = hidden or (isinstance(key, str) and key.startswith(_INTERNAL_PREFIXES))
            child = _child_path(path, key)
            attr_kind = type(attr).__name__
            if attr_kind == "Static":
                if not internal and not (key == "_length" and type_text.endswith("List")):
                    statics.append((child, attr.value))
            elif attr_kind in ("LeafAttr", "ArrayAttr"):
                leaves.append(child)
            elif attr_kind in ("NodeAttr", "MutableArrayAttr"):
                visit(next(node_iter), child, internal)
            else:
                raise _Unreadable(attr_kind)
            items += isinstance(key, int)
        if items and not hidden:
            described[slot] = (path, type_text,
                               f"{type_text} with {items} item{'s' * (items != 1)}")

    visit(next(node_iter), head, False)
    if (len(leaves) != num_leaves or next(node_iter, None) is not None
            or next(attr_iter, None) is not None):
        raise _Unreadable("leftover")
    return Graph(tuple(leaves), tuple(statics), tuple(described))


def nnx_layout(miss: Any, names: list[str] | None = None) -> Layout | None:
    """The layout of a ``flax.nnx.jit`` call (graph nodes as ``NodeStates``), or ``None``."""
    args, kwargs = miss.args, miss.kwargs
    found = [(i, a) for i, a in enumerate(args) if _is_node_states(a)]
    found_kw = [(k, v) for k, v in kwargs.items() if _is_node_states(v)]
    if not found and not found_kw:
        return None
    names = names or []
    leaf_paths: dict[str, tuple[str, ...]] = {}
    graphs: list[Graph] = []
    shared: dict[Any, str] = {}
    heads = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in found]
    heads += [(str(k), v) for k, v in found_kw]
    for head, value in heads:
        graphdef = getattr(value, "_graphdef", None)
        if graphdef is None:
            continue
        graph = read_graphdef(graphdef, head, shared if len(heads) > 1 else None)
        if graph is None:
            return None  # a layout this reader does not know: JAX's own names, whole
        graphs.append(graph)
        states = getattr(value, "states", ())
        if isinstance(states, tuple) and len(states) == 1 and isinstance(
                states[0], (list, tuple)) and len(states[0]) == len(graph.leaves):
            leaf_paths[head] = graph.leaves

    def rename(jax_name: str) -> str:
        # "model.states[0][3]" -> the user's path of leaf 3 of model
        head, sep, tail = jax_name.partition(".states[0][")
        paths = leaf_paths.get(head) if sep else None
        index, sep2, rest = tail.partition("]")
        if paths is None or not (sep2 and index.isdigit()) or int(index) >= len(paths):
            return jax_name
        return paths[int(index)] + rest

    named = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)]
    named += [(str(k), v) for k, v in kwargs.items()]
    empty = tuple((n, v) for n, v in named if _leafless(v))
    return Layout(rename, [], (), tuple(graphs), _argument_trees(miss, heads),
                  keeps_statics=True, empty=empty)


def _leafless(value: Any) -> bool:
    """``None`` or an empty container: an argument with no array leaf."""
    return value is None or (type(value) in (tuple, list, dict) and not value)


def _argument_trees(miss: Any, heads: list[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """Each graph node argument's own treedef (its GraphDef inside), for the fallback."""
    from jax import tree_util

    out = []
    for head, value in heads:
        try:
            out.append((head, tree_util.tree_structure(value)))
        except Exception:
            continue
    return tuple(out)


# --- jax.pmap ------------------------------------------------------------------------

_FLAT_NAME = re.compile(r"(?:flat_)?args\[\d+\]")


def pmap_layout(miss: Any) -> Layout | None:
    """The layout of a ``jax.pmap`` call: JAX jits a function of its own over the
    flattened arguments (``flat_args[3]``); each leaf is named by the user's path
    (``batch['x']``), and the argument tree is the user's, keyed by those paths."""
    from ._jax import _pmap, _traced

    module = getattr(miss.fun, "__module__", None) or ""
    if not module.startswith("jax"):
        return None
    jax_names = _traced.miss_inputs(miss).arg_names
    # pmap's function takes ``*flat_args``: JAX names every leaf by its position
    if not jax_names or not all(_FLAT_NAME.fullmatch(n) for n in jax_names):
        return None
    found = _pmap.pmap_arguments(miss.fun, len(jax_names))
    if found is None:
        return None
    by_jax_name = dict(zip(jax_names, found.paths))
    return Layout(lambda name: by_jax_name.get(name, name), list(found.statics), (),
                  keeps_statics=True, empty=found.empty)


def layout_for(miss: Any, names: list[str] | None = None) -> Layout | None:
    """The layout of a wrapper library's call, if ``miss`` is one otel_jax can read.

    ``names``: the positional parameter names of the jitted function.
    """
    try:
        return equinox_layout(miss) or nnx_layout(miss, names) or pmap_layout(miss)
    except Exception:  # a layout that moved: keep JAX's own names
        return None
