"""What a jit wrapper's ``PjitInfo`` says about a call: its options by their public names,
which arguments are static, and how the arguments are named after the parameters.

Its own module: the fields of ``PjitInfo`` are JAX's private names. Checked on JAX 0.8.0,
0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: a field that
moved reads as unset (``None`` or empty: no static arguments, an option not shown);
parameters that cannot be read are named ``args[i]``, as JAX names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ._miss import Miss


# JAX keeps argnums and argnames in sync when it can read the signature, so
# one of each pair is enough (names are used only when no numbers are set).
_PAIRED_FIELDS = (
    ("donate_argnums", "donate_argnums", "donate_argnames"),
    ("static_argnums", "static_argnums", "static_argnames"),
)
_JIT_OPTION_FIELDS = (
    ("in_shardings", "in_shardings_leaves"),
    ("out_shardings", "out_shardings_leaves"),
    ("in_layouts", "in_layouts_leaves"),
    ("out_layouts", "out_layouts_leaves"),
    ("device", "device"),
    ("backend", "backend"),
    ("keep_unused", "keep_unused"),
    ("inline", "inline"),
    ("compiler_options", "compiler_options_kvs"),
)


def jit_options(jit_info: Any) -> tuple[tuple[str, Any], ...]:
    """The options of one ``jax.jit`` wrapper, by their public names."""
    paired = tuple(
        (public, getattr(jit_info, nums, None) or getattr(jit_info, names, None) or ())
        for public, nums, names in _PAIRED_FIELDS)
    return paired + tuple(
        (public, getattr(jit_info, field, None)) for public, field in _JIT_OPTION_FIELDS)


def static_arguments(miss: Miss, names: Sequence[str] | None = None,
                     ) -> list[tuple[str, Any]]:
    """``(name, value)`` of each static argument of the call, in call order.

    ``names``: the call's :func:`parameter_names`, when the caller has them.
    """
    ji = miss.jit_info
    if names is None:
        names = parameter_names(ji, len(miss.args))
    out = [(names[i], miss.args[i]) for i in getattr(ji, "static_argnums", ())
           if 0 <= i < len(miss.args)]
    out.extend((k, miss.kwargs[k]) for k in getattr(ji, "static_argnames", ())
               if k in miss.kwargs)
    return out


def parameter_names(jit_info: Any, n_args: int) -> list[str]:
    """Names of the first ``n_args`` positional arguments, as JAX names their leaves: a
    parameter's name, ``features[i]`` for the ones a ``*features`` parameter collects
    (``args[i]`` when the function's parameters cannot be read)."""
    return call_parameters(jit_info, n_args).positional


class CallParameters(NamedTuple):
    """How a call's arguments are named after the function's parameters."""

    positional: list[str]  # one name per positional argument of the call
    var_keyword: str = ""  # the ``**kwargs`` parameter's name, if the function has one
    keywords: frozenset[str] = frozenset()  # parameters a keyword argument can fill by name


def call_parameters(jit_info: Any, n_args: int) -> CallParameters:
    """:func:`parameter_names` with what names keyword arguments: those ``**kwargs``
    collects are named ``kwargs['k']``, as in JAX's leaf names, the others by name."""
    names: list[str] = []
    var_positional = var_keyword = ""
    keywords: set[str] = set()
    sig = getattr(jit_info, "fun_signature", None)
    if sig is not None:
        import inspect

        for p in sig.parameters.values():
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                          inspect.Parameter.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          inspect.Parameter.KEYWORD_ONLY):
                keywords.add(p.name)
            elif p.kind is inspect.Parameter.VAR_POSITIONAL:
                var_positional = p.name
            elif p.kind is inspect.Parameter.VAR_KEYWORD:
                var_keyword = p.name
    names = names[:n_args]
    start = len(names)
    if var_positional:
        names.extend(f"{var_positional}[{i - start}]" for i in range(start, n_args))
    else:
        names.extend(f"args[{i}]" for i in range(start, n_args))
    return CallParameters(names, var_keyword, frozenset(keywords))


def dynamic_positions(miss: Miss) -> list[int]:
    """Indices into ``miss.args`` of the arguments that are traced (not static)."""
    static = set(getattr(miss.jit_info, "static_argnums", ()))
    return [i for i in range(len(miss.args)) if i not in static]
