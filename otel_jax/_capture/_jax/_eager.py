"""JAX compiling its own ops eagerly (op-by-op outside jit), and the exported programs an
eager primitive can carry (``exported.call(x)``).

Its own module: what tells an eager op from a user's program is read off the closure JAX
builds per primitive and off ``jax.export.Exported``. Checked on JAX 0.8.0, 0.10.2 and
0.12.0.1 (the oldest, default and newest test venvs). Fallback: a primitive whose closure
cannot be read has no parameters (its repeat is not explained by them); without
``jax.export`` no primitive is an exported program; an exported function's argument paths
that cannot be rebuilt are ``None`` (JAX's flat names are kept).
"""

from __future__ import annotations

from typing import Any


def primitive_params(fun: Any) -> dict[str, Any] | None:
    """The parameters an eager primitive was compiled for (its closure), or ``None``.

    JAX builds a new function object per distinct primitive parameters (e.g.
    the target shape of ``broadcast_in_dim``): those parameters, not the
    function object, are what changed when such a compile repeats.
    """
    if not getattr(fun, "_apply_primitive", False):
        return None
    try:
        cells = dict(zip(fun.__code__.co_freevars, fun.__closure__ or ()))
        params = cells["params"].cell_contents
        return dict(params) if isinstance(params, dict) else None
    except Exception:
        return None


def is_eager_op(fun: Any) -> bool:
    """JAX compiling one of its own ops for op-by-op (eager) execution.

    Either a single primitive (``x + 1`` outside jit) or one of JAX's own
    jitted library functions called eagerly (``jnp.sin(x)`` is a jitted
    function inside ``jax.numpy``). A primitive that carries a whole user
    program (``exported.call(x)`` binds one primitive holding the exported
    function) is that program, not an op: see :func:`exported_program`.
    """
    if getattr(fun, "_apply_primitive", False):
        return exported_program(fun) is None
    module = getattr(fun, "__module__", None) or ""
    return module == "jax" or module.startswith(("jax.", "jax._src"))


def _exported_type() -> type | None:
    try:
        from jax import export

        exported = export.Exported
    except Exception:  # no jax.export in this JAX
        return None
    return exported if isinstance(exported, type) else None


def exported_program(fun: Any) -> Any | None:
    """The ``jax.export.Exported`` an eager primitive's compile runs, or ``None``.

    ``exported.call(x)`` outside jit makes JAX compile one primitive whose
    parameters hold the exported program: a user's whole program (a served
    model), told by what the compile carries, not by the name JAX gives it.
    (``jax.jit(exported.call)`` is a jit of a bound method, named as such.)
    """
    if not getattr(fun, "_apply_primitive", False):
        return None
    kind = _exported_type()
    params = primitive_params(fun) if kind is not None else None
    if kind is None or params is None:
        return None
    return next((v for v in params.values() if isinstance(v, kind)), None)


def exported_name(exported: Any) -> str:
    """The name of the function an ``Exported`` was exported from (``f``)."""
    name = getattr(exported, "fun_name", None)
    return name if isinstance(name, str) and name else "<exported function>"


def exported_leaf_paths(exported: Any, n: int) -> tuple[str, ...] | None:
    """The path of each of the ``n`` flat arguments of an exported function in the
    ``(args, kwargs)`` tree it was exported with (``args[1]``, ``args[0]['w']``)."""
    tree = getattr(exported, "in_tree", None)
    if tree is None or getattr(tree, "num_leaves", None) != n:
        return None
    try:
        from jax import tree_util

        keyed = tree_util.tree_unflatten(tree, list(range(n)))
        paths = tree_util.tree_flatten_with_path(keyed)[0]
    except Exception:
        return None
    out = []
    for keys, _ in paths:
        keys = tuple(keys)
        if len(keys) < 2:
            return None
        head = getattr(keys[0], "idx", None)
        if head == 0:  # positional
            out.append(f"args[{getattr(keys[1], 'idx', '?')}]" + tree_util.keystr(keys[2:]))
        else:
            out.append(str(getattr(keys[1], "key", "?")) + tree_util.keystr(keys[2:]))
    return tuple(out) if len(out) == n else None
