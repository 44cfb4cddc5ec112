"""Which function a compile belongs to, and whether it is one of JAX's own eager ops.

One entry point, :func:`name_compile`. A compile is named after the user's
function, with its qualified name and definition site, even when a library
jits a function of its own around it (``jax.pmap``), when only a transformed
program's jaxpr reached us (grad outside jit), or when no miss was seen at
all (the bare name JAX's event carries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from . import _source, _wrappers
from ._jax import _eager, _jit_info, _names
from ._source import FunctionInfo, function_info

if TYPE_CHECKING:
    from ._jax._miss import Miss


class Naming(NamedTuple):
    """What names a compile.

    ``stands_for`` is set when a library jits a function of its own that
    closes over the user's (``jax.pmap``): the user's function object, not the
    library's per-call one, is the identity that matters.
    """

    info: FunctionInfo
    stands_for: Any | None = None
    eager_op: bool = False


def belongs_to(miss: Miss, event_fun_name: str) -> bool:
    """Whether the compile JAX names ``event_fun_name`` is the one ``miss`` led to.

    A compile of another function during the miss (an eager op JAX compiles
    while tracing) must not take the miss's signature. Some JAX versions name
    partials and callable objects with a placeholder.
    """
    event_fun = _names.function_name_from_event(event_fun_name)
    # JAX names a function by its ``__name__`` when it has one: read that first.
    return (event_fun == getattr(miss.fun, "__name__", None)
            or event_fun == _names.event_name(miss.fun)
            or event_fun in _names.PLACEHOLDER_NAMES)


def name_compile(miss: Miss | None, event_fun_name: str) -> Naming:
    """The function a compile belongs to; may raise on hostile objects (caller guards)."""
    if miss is None:
        return Naming(FunctionInfo(_names.function_name_from_event(event_fun_name)))
    fun = jitted_function(miss)
    given = _transformed_library_program(miss) if miss.transformed else None
    if given is not None:  # a library's jitted function of the user's, transformed
        info, stands_for = given, None
    elif fun is None:  # a transformed program known only by its jaxpr
        info = _transformed_info(miss.fun)
        if info.file is None:  # no debug source (a callable object's program)
            info = _transformed_names.get(_transformed_key(miss)) or info
        stands_for = None
    else:
        exported = _eager.exported_program(fun)
        if exported is not None:
            # A served model (``exported.call``): named after the function it was
            # exported from; a user's program, whatever JAX calls its wrapper.
            return Naming(FunctionInfo(_eager.exported_name(exported)))
        info, stands_for = _named_function(fun, miss)
        if miss.transformed:
            _remember(miss, info)
    return Naming(info, stands_for, _is_eager(fun, info))


def fallback(event_fun_name: str) -> Naming:
    """The name when reading the miss failed: the bare name JAX's event carries."""
    return Naming(FunctionInfo(_names.function_name_from_event(event_fun_name)))


def jitted_function(miss: Miss) -> Any | None:
    """The jitted function behind a miss: for a transformed program, the one that
    bound it when that call is still running (vmap), else ``None``."""
    return getattr(miss.fun, "origin", None) if miss.transformed else miss.fun


def _named_function(fun: Any, miss: Miss) -> tuple[FunctionInfo, Any | None]:
    info = function_info(fun)
    if info.file is None or not _source.is_library_file(info.file):
        return _library_wrapper(fun, info), None
    given = None if miss.transformed else _wrappers.equinox_callable(miss)
    if given is not None:
        # equinox jits one function of its own per name for every callable it is given
        # (a Module, a bound method, another wrapper): the one given names the compile,
        # or, when no user code is reached through it (a library's Module), JAX's own
        # name at the site of what was given, one real function per site.
        user = _source.find_user_callable(given)
        if user is not None:
            return function_info(user), None
        jax_name = _names.event_name(fun)
        user = _source.find_user_function(_wrappers.equinox_arguments(miss))
        if user is not None:
            # a library's function given the user's as an argument
            # (``filter_jit(filter_jvp)(f, ...)``): another program per user function,
            # filed apart from the user's own jit of it
            found = function_info(user)
            return FunctionInfo(f"{jax_name}({found.qualname})", found.file, found.line), None
        site = function_info(given)
        return FunctionInfo(jax_name, site.file, site.line), None
    statics = () if miss.transformed else [v for _, v in _jit_info.static_arguments(miss)]
    user = _source.find_user_function(statics)
    if user is not None:
        found = function_info(user)
        jax_name = _names.event_name(fun)
        if jax_name == found.qualname.rpartition(".")[2]:
            return found, None
        # A library's function of its own around the user's (chex's fake_pmap jits a
        # ``wrapped_fn`` of the user's function): another program than the user's own
        # jit of it, filed apart from it under JAX's name for it.
        return FunctionInfo(f"{jax_name}({found.qualname})", found.file, found.line), None
    # Only JAX's own wrappers (pmap, vectorize) and haiku's: another library's function
    # may close over user callbacks it merely calls (an optax schedule),
    # which would be the wrong name.
    user = (_source.find_user_function_in_closure(fun)
            if _source.transforms_user_functions(info.file) else None)
    if user is not None:
        return function_info(user), user
    if getattr(fun, "__code__", None) is None and not hasattr(fun, "__self__"):
        # A library's callable object that wraps the user's function (``jax.jit`` of an
        # ``equinox.filter_custom_vjp``: its ``fn``): that function, not the library
        # class's one ``__call__`` for every user function.
        user = _source.find_user_callable(fun)
        if user is not None:
            return function_info(user), None
    return _source.owner_info(fun) or _library_wrapper(fun, info), None


#: The function each transformed program named through the jitted function that bound
#: it was filed under, by its debug source and the number of the function the
#: transformation was applied to: grad's backward program, evaluated after that call
#: returned, is filed with its forward one. Bounded, emptied when full.
_transformed_names: dict[tuple[str, int], FunctionInfo] = {}
_TRANSFORMED_NAMES_MAX = 1024


def _transformed_key(miss: Miss) -> tuple[str, int]:
    transformed = miss.fun
    return (str(getattr(transformed, "source", None)),
            int(getattr(transformed, "program", 0) or 0))


def _remember(miss: Miss, info: FunctionInfo) -> None:
    key = _transformed_key(miss)
    if key[1]:  # an unknown function (0) would file other functions' programs here
        if len(_transformed_names) >= _TRANSFORMED_NAMES_MAX:
            _transformed_names.clear()
        _transformed_names[key] = info


def _transformed_library_program(miss: Miss) -> FunctionInfo | None:
    """The user's function behind a transformed program of a library's jitted function
    (``filter_jvp(filter_jit(f))``, ``filter_grad(filter_jit(f))``: equinox jits one
    ``fun_wrapped`` of its own for every callable), or ``None`` for any other program.

    Only the jaxpr reaches the miss; what equinox was given is read off its call frame,
    still on the stack while the program is evaluated (jvp, vmap, grad's forward pass),
    and remembered for the programs evaluated after it returned (grad's backward pass)."""
    transformed = miss.fun
    source = getattr(transformed, "source", None)
    site = _names.transformed_source(source)
    if site is None or not _source.is_library_file(site[1]) or _source.is_jax_file(site[1]):
        return None
    key = _transformed_key(miss)
    given = _wrappers.equinox_called(getattr(transformed, "origin", None))
    if given is None:
        return _transformed_names.get(key) if key[1] else None
    user = _source.find_user_callable(given)
    info = function_info(user if user is not None else given)
    _remember(miss, info)
    return info


def _library_wrapper(fun: Any, info: FunctionInfo) -> FunctionInfo:
    """``wrapped_fn(foo)`` for a library's function that wraps the user's ``foo`` (a
    ``functools.wraps`` of a ``functools.partial``, chex's ``fake_pmap``) but could not
    take its name: JAX names that compile after the wrapper, another program than the
    user's own jit of ``foo``, so it is filed apart from it. A wrapper that took the
    user's name (``functools.wraps`` of a function, ``jax.grad``) is the user's."""
    code = getattr(fun, "__code__", None)
    if code is None or not _source.is_library_file(code.co_filename):
        return info
    jax_name = _names.event_name(fun)
    if jax_name == info.qualname.rpartition(".")[2]:
        return info
    return FunctionInfo(f"{jax_name}({info.qualname})", info.file, info.line)


def _transformed_info(fun: Any) -> FunctionInfo:
    """Name and site of a transformed program, from its jaxpr's debug source."""
    name = str(fun.__name__)
    site = _names.transformed_source(fun.source)
    if site is None:
        return FunctionInfo(name)
    head, file, line = site
    name = head or name
    return FunctionInfo(_source.qualname_at(file, line, name) or name, file, line)


def _is_eager(fun: Any | None, info: FunctionInfo) -> bool:
    if fun is None:  # jnp.sum under grad is still one of JAX's own ops
        return info.file is not None and _source.is_jax_file(info.file)
    # A library's jitted function standing for a user's one (jax.pmap's)
    # is named after the user's function and is not an eager op.
    return _eager.is_eager_op(fun) and (
        info.file is None or _source.is_library_file(info.file))
