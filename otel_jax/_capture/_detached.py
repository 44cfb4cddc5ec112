"""Reading a dispatch-cache miss into what its signature is built from (``Detached``).

Its own module: the read happens on the caller's thread, during the call, and for an
eager op must keep nothing of the call's or of JAX's alive (:func:`detach`); the
signature itself is built later, or at once, by ``_build``.
"""

from __future__ import annotations

import enum
import sys
import types
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .._core._idcache import SERIALS
from . import _wrappers
from ._arg_texts import option_texts, placements_of
from ._jax import _config, _eager, _jit_info, _traced, _transformed
from ._reprs import PLAIN_TYPES, bound_values
from ._signature import UNCOMMITTED, Placement, StaticArg, TraceContext
from ._statics import EXPORTED_PROGRAM, static_arg

if TYPE_CHECKING:
    from ._jax._miss import Miss


def detach(miss: Miss, stands_for: Any | None = None) -> Detached | None:
    """What ``_build.from_detached`` needs of ``miss`` to make its signature later, read now
    into plain data and weak references: nothing of the call's or of JAX's (the jitted
    function, its jit options and parameters, a ``HashablePartial`` JAX jits per
    primitive) outlives the call through it. JAX's caches hold functions and their
    parameters weakly; one kept alive until the record is made would turn a later
    compile JAX would have made into a cache hit.

    The costly part (texts of abstract values, of static values that hold nothing but
    scalars) is left to ``_build.from_detached``. ``None``: a call a wrapper library lays
    out or an exported program, read whole with ``_build.from_miss`` instead."""
    parameters = _jit_info.call_parameters(miss.jit_info, len(miss.args))
    if miss.fun is not None and _eager.exported_program(miss.fun) is not None:
        return None
    # A single primitive JAX applies (most eager ops) is no library's wrapper.
    if (_eager.primitive_params(miss.fun) is None
            and _wrappers.layout_for(miss, parameters.positional) is not None):
        return None
    return read_miss(miss, stands_for, parameters, None, None, None, detached=True)


class Pending(NamedTuple):
    """A static value whose ``StaticArg`` is made when the signature is built."""

    name: str
    value: Any
    keyword: bool = False


@dataclass(frozen=True, slots=True)
class Detached:
    """What a signature is built from, read off a dispatch miss (see :func:`detach`).

    Read by :func:`detach`, it holds plain data and weak references only: abstract
    values and the argument tree (values, compared by value), texts, numbers, and
    static values that are scalars or tuples of them (``_inert``); every other static
    value is a ``StaticArg`` already."""

    avals: tuple[Any, ...]
    in_tree: Any
    arg_names: tuple[str, ...] | None  # JAX's leaf paths, when it kept them
    out_count: int
    op_count: int
    placements: tuple[Placement, ...]
    context: TraceContext
    top_names: tuple[str, ...]
    statics: tuple[StaticArg | Pending, ...]  # the call's static arguments
    params: tuple[StaticArg | Pending, ...]  # an eager primitive's parameters
    options: tuple[tuple[str, str], ...]
    function_ref: Any
    function_id: int
    function_serial: int
    bound_method: bool
    bound: tuple[tuple[str, str], ...]
    transformed: bool
    transformation: str  # the transformations the program was traced under or the jitted
    # callable is made of, as text
    cache_clears: int  # ``jax.clear_caches()`` calls seen before the miss
    program_serial: int  # transformed only: the traced program's number
    program_pass: str  # transformed only: its pass (forward, backward), "" unknown
    var_keyword: str  # the ``**kwargs`` parameter's name, if any
    keywords: frozenset[str]  # parameters a keyword argument can fill by name


def _inert(value: Any, depth: int = 0) -> bool:
    """Whether holding ``value`` holds nothing else and its text cannot change: a
    built-in scalar, an enum member or a NumPy dtype (kept alive by their classes
    anyway), a tuple or frozenset of those."""
    kind = type(value)
    if kind in PLAIN_TYPES or isinstance(value, enum.Enum):
        return True
    numpy = sys.modules.get("numpy")  # not imported: no value is one of its types
    if numpy is not None and isinstance(value, (numpy.dtype, numpy.generic)):
        return True
    if isinstance(value, (tuple, frozenset)) and depth < 3 and len(value) <= 64:
        return all(_inert(v, depth + 1) for v in value)
    return False


def _static_entry(name: str, value: Any, keyword: bool, detached: bool,
                  ) -> StaticArg | Pending:
    if detached and not _inert(value):
        return static_arg(name, value, keyword=keyword)
    return Pending(name, value, keyword)


def resolved(entry: StaticArg | Pending) -> StaticArg:
    """The ``StaticArg`` of a ``Detached``'s static entry, made now if it was left pending."""
    if isinstance(entry, StaticArg):
        return entry
    return static_arg(entry.name, entry.value, keyword=entry.keyword)


def read_miss(miss: Miss, stands_for: Any | None, parameters: _jit_info.CallParameters,
              context: TraceContext | None, placements: Sequence[Placement] | None,
              exported: Any | None, detached: bool) -> Detached:
    """What the signature of ``miss`` is built from (``detached``: holding nothing of the
    call's or JAX's, see :func:`detach`)."""
    names = parameters.positional
    inputs = _traced.miss_inputs(miss)
    flat, n = inputs.flat, len(inputs.avals)
    if placements is None or len(placements) != n:
        placements = placements_of(flat) if len(flat) == n else (UNCOMMITTED,) * n
    statics = tuple(_static_entry(name, v, name in miss.kwargs, detached)
                    for name, v in _jit_info.static_arguments(miss, names))
    primitive = _eager.primitive_params(miss.fun)
    params = () if primitive is None else tuple(
        _static_entry(EXPORTED_PROGRAM if v is exported else f"params.{k}", v, False, detached)
        for k, v in sorted(primitive.items()))
    # One function object per primitive parameters, and one jaxpr per argument
    # types under a transformation: neither identity says anything more.
    by_identity = primitive is None and not miss.transformed
    identity = miss.fun if stands_for is None else stands_for
    return Detached(
        avals=inputs.avals, in_tree=inputs.in_tree, arg_names=inputs.arg_names,
        out_count=inputs.out_count, op_count=inputs.op_count,
        placements=tuple(placements),
        context=_config.trace_context_items() if context is None else context,
        top_names=tuple(names[i] for i in _jit_info.dynamic_positions(miss)),
        statics=statics, params=params,
        # A library's internal jit wrapper derives its options (pmap's
        # in_shardings) from the call: they are not the user's to change.
        options=option_texts(miss.jit_info) if stands_for is None else (),
        function_ref=_weak(identity) if by_identity else None,
        function_id=id(identity) if by_identity else 0,
        function_serial=SERIALS.of(identity) if by_identity else 0,
        bound_method=by_identity and getattr(identity, "__self__", None) is not None
        and hasattr(identity, "__func__"),
        bound=bound_values(identity) if by_identity else _applied_bound(miss),
        transformed=miss.transformed,
        # a jitted transformation (``jax.jit(jax.vmap(f, out_axes=1))``): its parameters
        transformation=miss.transformation or (
            _transformed.transformations_of(identity) if by_identity else ""),
        cache_clears=miss.cache_clears,
        program_serial=int(getattr(miss.fun, "program", 0) or 0) if miss.transformed else 0,
        program_pass=str(getattr(miss.fun, "pass_", "") or "") if miss.transformed else "",
        # A library's own jit wrapper (pmap's) takes **kwargs for the user's parameters.
        var_keyword=parameters.var_keyword if stands_for is None else "",
        keywords=parameters.keywords,
    )


def _applied_bound(miss: Miss) -> tuple[tuple[str, str], ...]:
    """What the function a transformation was applied to binds (``jax.grad(f)`` of a jitted
    ``f`` re-created per call: the closure value that changed), read inside its jit
    wrapper; ``()`` when it is not known."""
    applied = getattr(miss.fun, "applied", None) if miss.transformed else None
    if applied is None:
        return ()
    if type(applied) is not types.FunctionType:
        # a jit wrapper: what it binds is the function it wraps (``__wrapped__``)
        applied = getattr(applied, "__wrapped__", applied)
    return bound_values(applied)


def _weak(obj: Any) -> Any:
    try:
        return weakref.ref(obj)
    except TypeError:
        return None
