"""How wrapper libraries lay a user's arguments out around a jitted function of their own.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MAX_CACHED_TREES = 256
_leaf_keys_cache: dict[Any, list[tuple[Any, ...]]] = {}

STRUCTURE = "<argument structure>"


@dataclass(frozen=True, slots=True)
class Layout:
    """The user's view of one call through a wrapper library."""

    rename: Callable[[str], str]  # JAX's name of a dynamic leaf -> the user's path
    statics: list[tuple[str, Any]]  # (user path, value) of each static leaf
    # (user name, treedef) of each argument: what fixes the trees besides leaf paths
    structure: tuple[tuple[str, Any], ...]


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


def equinox_layout(miss: Any) -> Layout | None:
    """The layout of an ``equinox.filter_jit`` call, or ``None`` for anything else."""
    module = getattr(miss.fun, "__module__", None) or ""
    if not module.startswith("equinox") or len(miss.args) != 3:
        return None
    static = miss.args[2]
    if not (isinstance(static, tuple) and len(static) == 3 and all(map(_is_pair, static))):
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
        "first": first_path, "rest": rest_path, "fun": lambda i: f"<function>[{i}]"}

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
    statics += [(f"<function>[{i}]", v) for i, v in enumerate(fun_leaves) if v is not None]
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


def layout_for(miss: Any) -> Layout | None:
    """The layout of a wrapper library's call, if ``miss`` is one otel_jax can read."""
    try:
        return equinox_layout(miss)
    except Exception:  # a layout that moved: keep JAX's own names
        return None
