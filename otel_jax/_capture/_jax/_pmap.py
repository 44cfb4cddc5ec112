"""The user's view of the arguments of the function ``jax.pmap`` jits: leaf paths, static
(``static_broadcasted_argnums``) arguments and the arguments without array leaves.

Its own module: pmap keeps these in different places per JAX version (the debug info of a
wrapped function in 0.8, a closure cell beside the user's function from 0.10), read by a
bounded walk. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest
test venvs). Fallback: ``None`` when nothing is found, and JAX's own flat names
(``flat_args[i]``) are kept.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._core._walk import walk


class PmapArguments(NamedTuple):
    """What ``jax.pmap`` keeps of a call's arguments beside the function it jits."""

    paths: tuple[str, ...]  # the user's path of each flat argument (``batch['x']``)
    statics: tuple[tuple[str, Any], ...]  # ``(parameter, value)`` of static_broadcasted ones
    # ``(name, value)`` of the arguments without array leaves (``scale=None``), where known
    empty: tuple[tuple[str, Any], ...] = ()


def pmap_arguments(fun: Any, n: int) -> PmapArguments | None:
    """The user's view of the ``n`` flat arguments of the function ``jax.pmap`` jits,
    or ``None`` when ``fun`` is not one.

    ``jax.pmap(f)`` jits a function of JAX's own over the flattened arguments, which
    JAX names ``flat_args[i]`` (0.10) or ``args[i]`` (0.8). The user's names are kept
    beside it: JAX 0.8 keeps them whole in the debug info of the wrapped function it
    closes over; JAX 0.10 keeps the ``(args, kwargs)`` tree in a closure cell
    (``in_tree``) next to the user's wrapped function, whose debug info lists the
    parameter names. Static arguments (``static_broadcasted_argnums``) are bound to
    the wrapped function by ``argnums_partial`` in both. Read with a bounded walk.
    """
    paths: tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None = None
    statics: tuple[tuple[str, Any], ...] | None = None
    for value in walk(fun, _pmap_inner, depth=6, budget=96):
        try:
            if paths is None:
                paths = _pmap_paths_at(value, n)
            if statics is None:
                statics = _pmap_statics_at(value)
        except Exception:
            pass
        if paths is not None and statics is not None:
            break
    return PmapArguments(paths[0], statics or (), paths[1]) if paths is not None else None


def _pmap_statics_at(value: Any) -> tuple[tuple[str, Any], ...] | None:
    """The static arguments ``argnums_partial`` bound to a wrapped function of pmap's."""
    transforms = getattr(value, "transforms", None)
    if not isinstance(transforms, tuple) or _pmap_debug_names(value) is None:
        return None
    for entry in transforms:
        gen, params = entry
        if getattr(gen, "__name__", "") != "_argnums_partial":
            continue
        dyn_argnums, fixed = params
        positions = sorted(_static_positions(dyn_argnums, fixed))
        names = _parameter_names(getattr(value, "f", None))
        return tuple(
            (names[i] if i < len(names) else f"args[{i}]", getattr(box, "val", box))
            for i, box in zip(positions, fixed))
    return ()


def _parameter_names(fun: Any) -> list[str]:
    import inspect

    try:
        return [p.name for p in inspect.signature(fun).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _pmap_debug_names(wrapped: Any) -> tuple[str, ...] | None:
    info = getattr(wrapped, "debug_info", None)
    if getattr(info, "traced_for", None) != "pmap":
        return None
    names = getattr(info, "arg_names", None)
    if isinstance(names, tuple) and all(isinstance(x, str) for x in names):
        return names
    return None


def _pmap_paths_at(value: Any, n: int,
                   ) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None:
    cells = _cells(value)
    tree, wrapped = cells.get("in_tree"), cells.get("fun")
    names = _pmap_debug_names(wrapped)
    if names is not None and getattr(tree, "num_leaves", None) == n:
        return _paths_from_tree(tree, wrapped, names)  # JAX 0.10
    names = _pmap_debug_names(value)
    transforms = getattr(value, "transforms", None)
    if names is None or not isinstance(transforms, tuple):
        return None
    # JAX 0.8: the wrapped function's transformations hold the tree (``flatten_fun``)
    # and the static positions (``argnums_partial``); its debug info, made for the
    # call, names each flat argument
    by_name = {getattr(gen, "__name__", ""): params for gen, params in transforms}
    flat_tree = (by_name.get("flatten_fun") or (None,))[0]
    if getattr(flat_tree, "num_leaves", None) == n:
        fixed = by_name.get("_argnums_partial")
        static = _static_positions(*fixed) if fixed else set()
        dynamic = tuple(p for i, p in enumerate(_all_parameter_names(getattr(value, "f", None)))
                        if i not in static)
        found = _paths_from_tree(flat_tree, value, dynamic)
        if found is not None:
            return found
    info = getattr(value, "debug_info", None)
    if len(names) == n and getattr(info, "result_paths", None):
        return names, ()
    return None


def _static_positions(dyn_argnums: Any, fixed: Any) -> set[int]:
    total = len(dyn_argnums) + len(fixed)
    return {i for i in range(total) if i not in set(dyn_argnums)}


def _all_parameter_names(fun: Any) -> list[str]:
    import inspect

    try:
        return list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return []


def _cells(value: Any) -> dict[str, Any]:
    code = getattr(value, "__code__", None)
    closure = getattr(value, "__closure__", None)
    if code is None or not closure:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, closure):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return out


def _pmap_inner(value: Any) -> list[Any]:
    # callables, and the wrapped functions (``lu.WrappedFun``) they close over
    out = [v for v in _cells(value).values() if callable(v) or hasattr(v, "transforms")]
    for attr in ("__wrapped__", "__self__"):
        inner = getattr(value, attr, None)
        if inner is not None:
            out.append(inner)
    return out


def _paths_from_tree(tree: Any, wrapped: Any, dynamic: tuple[str, ...],
                     ) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]] | None:
    """Leaf paths of an ``(args, kwargs)`` tree, positional arguments named after the
    parameters of the user's function that are among ``dynamic`` (JAX's debug names of
    the parameters left after the static ones)."""
    import inspect

    from jax import tree_util

    target: Any = getattr(wrapped, "f", None)
    names: list[str] = []
    star = None
    try:
        for p in inspect.signature(target).parameters.values():
            if p.name not in dynamic:
                continue
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                star = p.name
    except (TypeError, ValueError):
        pass
    keyed = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    out = []
    for keys, _ in tree_util.tree_flatten_with_path(keyed)[0]:
        keys = tuple(keys)
        if len(keys) < 2:
            return None
        rest = tree_util.keystr(keys[2:])
        if getattr(keys[0], "idx", None) == 0:
            i = int(getattr(keys[1], "idx", -1))
            head = names[i] if 0 <= i < len(names) else f"{star or 'args'}[{i - len(names)}]"
        else:
            head = str(getattr(keys[1], "key", "?"))
        out.append(head + rest)
    return tuple(out), _leafless_arguments(tree, names, star)


def _leafless_arguments(tree: Any, names: list[str], star: str | None,
                        ) -> tuple[tuple[str, Any], ...]:
    """``(name, value)`` of the top-level arguments of an ``(args, kwargs)`` tree that
    hold no array (``None``), rebuilt from the tree: they have no leaf to name them."""
    from jax import tree_util

    args, kwargs = tree.children()
    out = []
    for i, child in enumerate(args.children()):
        if child.num_leaves == 0:
            name = names[i] if i < len(names) else f"{star or 'args'}[{i - len(names)}]"
            out.append((name, tree_util.tree_unflatten(child, [])))
    data = kwargs.node_data()
    if data is not None and data[0] is dict and data[1] is not None:
        for key, child in zip(data[1], kwargs.children()):
            if child.num_leaves == 0:
                out.append((str(key), tree_util.tree_unflatten(child, [])))
    return tuple(out)
