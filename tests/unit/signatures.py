"""Signatures built by hand from real JAX values, for the unit tests of one module.

``build`` lays out a call the way ``_build.from_miss`` does (the tree is
``(positional_args, kwargs)``, leaves named by the parameter they belong to), from
real arrays, Python scalars or ``jax.ShapeDtypeStruct``: their abstract values,
types and placements come from JAX itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax

from otel_jax._capture import _arg_texts, _statics
from otel_jax._capture._signature import Signature, StaticArg
from otel_jax._core._idcache import SERIALS


def step(*args: Any, **kwargs: Any) -> Any:
    """The function the signatures are of, unless a test names another."""
    return args, kwargs


def _name(names: Sequence[str], path: tuple[Any, ...]) -> str:
    head, key, rest = path[0], path[1], path[2:]
    if head.idx == 0:
        base = names[key.idx] if key.idx < len(names) else f"args[{key.idx}]"
    else:
        base = str(key.key)
    return base + jax.tree_util.keystr(rest)


def build(*args: Any, names: Sequence[str] = (), kwargs: dict[str, Any] | None = None,
          statics: Sequence[StaticArg] = (), fun: Callable[..., Any] = step,
          options: tuple[tuple[str, str], ...] = (),
          context: tuple[tuple[str, Any], ...] = (), transform: str = "",
          program: str = "", bound: tuple[tuple[str, str], ...] = ()) -> Signature:
    """The signature of ``fun(*args, **kwargs)`` with ``statics`` beside the arguments."""
    names = tuple(names) or tuple(f"a{i}" for i in range(len(args)))
    tree = (tuple(args), dict(kwargs or {}))
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    leaves = [leaf for _, leaf in with_paths]
    avals = [jax.typeof(leaf) for leaf in leaves]
    return Signature(
        function_ref=weakref.ref(fun), function_id=id(fun),
        function_serial=SERIALS.of(fun), options=options,
        context=context, treedef=treedef, avals=avals, top_names=names[:len(args)],
        paths=[_name(names, p) for p, _ in with_paths],
        types=[_arg_texts.aval_text(a) for a in avals],
        placements=[_arg_texts.placement(leaf) for leaf in leaves],
        statics=tuple(statics), transform=transform, program=program, bound=bound,
        tree_hash=hash(treedef))


def static(name: str, value: Any, **kw: Any) -> StaticArg:
    """A static argument as the signature records it."""
    return _statics.static_arg(name, value, **kw)
