"""A jitted computation JAX evaluates under a transformation outside jit
(``jax.grad(jitted)(x)``): its miss, made from ``jit_p``'s parameters, and which
transformations the running code is under, read off the stack; and the transformations a
jitted callable is made of (``jax.jit(jax.vmap(f, out_axes=1))``), read from its closures.

Its own module: the jaxpr's debug info, ``jit_p``'s parameter names and the code objects
and free variables of JAX's transformation closures (grad, value_and_grad, jacfwd, jacrev,
vmap, jvp, vjp, linearize, checkify) are all JAX's private layout. Checked on JAX 0.8.0,
0.10.2, 0.12.0.1 and 0.12.1 (the oldest, default and newest test venvs). Fallback: arguments
without debug names are ``args[i]``; the transformations not found (their closures moved)
are ``""``, and the function's number is then the one last traced from the program's
definition (its debug source), else ``0``; a checkify that moved leaves the others named.
"""

from __future__ import annotations

import inspect
import sys
import threading
import types
from typing import Any, NamedTuple

from ..._core._idcache import SERIALS
from ._cache_clears import cache_clears
from ._miss import Miss
from ._names import transformed_source


class TransformedFunction:
    """Stands in for the function of a computation JAX runs under a transformation.

    Only the jaxpr reaches the miss, so the name and definition site come from
    its debug info (``"f at /path/train.py:12"``), unless the jitted function
    that bound it is known (``origin``: under vmap, the call is still running).
    """

    __slots__ = ("__name__", "applied", "origin", "pass_", "program", "source")

    def __init__(self, name: str, source: str | None, origin: Any = None,
                 program: int = 0, pass_: str = "", applied: Any = None) -> None:
        self.__name__ = name
        self.source = source
        self.origin = origin
        #: The number (``Serials``) of the function the transformation was applied to,
        #: ``0`` unknown.
        self.program = program
        #: Which of the programs JAX derives from one trace this is (``PASS_FORWARD``...),
        #: ``""`` unknown: a program is compared only with earlier ones of its pass.
        self.pass_ = pass_
        #: That function, held for the miss only (what it binds is read from it).
        self.applied = applied

    def __repr__(self) -> str:
        return f"<transformed {self.__name__}>"


class _TransformedParams(NamedTuple):
    in_avals: tuple[Any, ...]
    in_tree: Any
    arg_names: tuple[str, ...]
    consts: tuple[Any, ...]
    out_count: int  # with the input count, tells grad's forward and backward programs apart
    op_count: int = 0  # ... and so does this when both have as many inputs and outputs


class _TransformedJitInfo(NamedTuple):
    """The jit options a transformed computation carries, under ``PjitInfo``'s field names.

    Output shardings and layouts are per output: the program's shape
    (``out_count``) tells those programs apart instead.
    """

    donate_argnums: tuple[int, ...]
    in_shardings_leaves: Any
    in_layouts_leaves: Any
    keep_unused: Any
    inline: Any
    compiler_options_kvs: Any


_in_trees: dict[int, Any] = {}


def _flat_in_tree(n: int) -> Any:
    """The ``(args, kwargs)`` tree of ``n`` positional leaves, as a jit call has."""
    tree = _in_trees.get(n)
    if tree is None:
        from jax import tree_util

        if len(_in_trees) > 256:
            _in_trees.clear()
        tree = _in_trees[n] = tree_util.tree_structure((tuple(range(n)), {}))
    return tree


def transformed_miss(args: tuple[Any, ...], params: dict[str, Any], started: float,
                     origin: Any = None) -> Miss:
    """The miss of a jitted computation JAX evaluates under a transformation."""
    jaxpr = params["jaxpr"]
    # A ClosedJaxpr (JAX <= 0.10), or from 0.11 the Jaxpr it was merged into.
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    debug = getattr(inner, "debug_info", None)
    source = getattr(debug, "func_src_info", None)
    in_avals = tuple(jaxpr.in_avals)
    names = getattr(debug, "arg_names", None)
    if (not isinstance(names, tuple) or len(names) != len(in_avals)
            or not all(isinstance(n, str) and n for n in names)):
        names = tuple(f"args[{i}]" for i in range(len(in_avals)))
    donated = params.get("donated_invars") or ()
    jit_info = _TransformedJitInfo(
        donate_argnums=tuple(i for i, d in enumerate(donated) if d),
        in_shardings_leaves=params.get("in_shardings"),
        in_layouts_leaves=params.get("in_layouts"),
        keep_unused=params.get("keep_unused"),
        inline=params.get("inline"),
        compiler_options_kvs=params.get("compiler_options_kvs"),
    )
    applied = transformed_function()
    serial = SERIALS.of(applied) if applied is not None else 0
    if not serial:
        # A transformation whose closures are not known here (checkify, a library's own).
        # Under vmap the jitted function whose call bound this program is still running;
        # otherwise (checkify traces first, evaluates after) the function last traced
        # from this definition on this thread is the one. Either is what a re-created
        # function changes: JAX traces once per function object.
        applied = origin
        serial = (SERIALS.of(origin) if origin is not None
                  else _nested_serial(source if isinstance(source, str) else None))
    fun = TransformedFunction(str(params.get("name", "<unnamed function>")),
                              source if isinstance(source, str) else None, origin, serial,
                              program_pass(), applied)
    return Miss(fun, jit_info, args, {},
                _TransformedParams(in_avals, _flat_in_tree(len(in_avals)), names, (),
                                   len(jaxpr.out_avals), len(getattr(inner, "eqns", ()))),
                args, started, transformed=True, transformation=transformations_on_stack(),
                cache_clears=cache_clears())


# --- which function a program of an unknown transformation was traced from -----------

_nested = threading.local()
#: Definitions remembered per thread (cleared past it: a serial missed is a vaguer cause).
_NESTED_MAX = 1024


def note_nested_trace(fun: Any) -> None:
    """Remember ``fun`` as the function last traced, inside another trace, from its
    definition (file and first line, as a jaxpr's debug source names it). Called for
    every jitted call made while tracing: cheap, and never raises."""
    try:
        if hasattr(fun, "__wrapped__"):  # as JAX names a decorated function's definition
            fun = inspect.unwrap(fun)
        code = fun.__code__
        seen = _nested.__dict__.setdefault("serials", {})
        if len(seen) >= _NESTED_MAX:
            seen.clear()
        seen[(code.co_filename, code.co_firstlineno)] = SERIALS.of(fun)
    except Exception:  # not a plain function (a partial, a callable object): not named
        pass


def _nested_serial(source: str | None) -> int:
    site = transformed_source(source)
    if site is None:
        return 0
    serials: dict[tuple[str, int], int] = _nested.__dict__.get("serials", {})
    return serials.get((site[1], site[2]), 0)


# --- which transformations a computation runs under ----------------------------------
#
# A jitted function called under jax.grad outside jit is evaluated as a new program per
# transformation and its parameters: grad(argnums=0) and grad(argnums=(0, 1)) compile
# forward programs that may read the same argument for argument. Only the jaxpr reaches
# the miss; the transformations are read off the stack, from the frames of JAX's own
# transformation closures (their parameters are those closures' free variables). JAX
# code only, never the user's: nothing is called, values are rendered only when plain.


class _Transformation(NamedTuple):
    name: str
    always: tuple[str, ...]  # parameters always shown
    when_set: tuple[tuple[str, Any], ...]  # parameters shown when not at their default


_GRAD = _Transformation("grad", ("argnums",), (("has_aux", False), ("holomorphic", False),
                                                ("allow_int", False)))
_JAC = ("argnums",), (("has_aux", False), ("holomorphic", False), ("allow_int", False))
_VMAP = _Transformation("vmap", ("in_axes",), (("out_axes", 0), ("axis_name", None),
                                               ("axis_size", None),
                                               ("spmd_axis_name", None)))
_AUX_ONLY: tuple[tuple[str, Any], ...] = (("has_aux", False),)
# its one parameter, the error set, is a set of classes: never shown
_CHECKIFY = _Transformation("checkify", (), ())

# code object -> what its frame stands for; ``None`` until first needed, ``{}`` if unreadable
_transformation_codes: dict[Any, _Transformation] | None = None
_grad_wrappers: frozenset[Any] = frozenset()  # grad's closures around value_and_grad's
_jax_dir = ""


def _closure_code(function: Any, name: str, *more: Any) -> Any:
    """The code of the closure ``name`` that ``function`` defines, else the first of
    ``more`` (functions it delegates to) that defines it; None when none does."""
    for where in (function, *more):
        code = getattr(inspect.unwrap(where), "__code__", None) if where is not None else None
        found = next((c for c in getattr(code, "co_consts", ())
                      if getattr(c, "co_name", None) == name), None)
        if found is not None:
            return found
    return None


_checkify_read = False


def _add_checkify(codes: dict[Any, _Transformation]) -> None:
    """checkify's closure, once its module is loaded (never loaded here: importing it
    would cost the first compile of a program that never uses it)."""
    global _checkify_read
    checkify = sys.modules.get("jax._src.checkify")
    if checkify is None:
        return
    _checkify_read = True
    try:  # apart: a checkify that moved leaves the others named
        code = _closure_code(checkify.checkify, "checked_fun")
    except Exception:
        return
    if code is not None:
        codes[code] = _CHECKIFY


def _read_transformation_codes() -> dict[Any, _Transformation]:
    global _grad_wrappers, _jax_dir
    import os

    import jax
    from jax._src import api

    codes: dict[Any, _Transformation] = {}
    closures: tuple[tuple[Any, str, _Transformation], ...] = (
            (api.value_and_grad, "value_and_grad_f", _GRAD._replace(name="value_and_grad")),
            (api.jacfwd, "jacfun", _Transformation("jacfwd", *_JAC)),
            (api.jacrev, "jacfun", _Transformation("jacrev", *_JAC)),
            (api.vmap, "vmap_f", _VMAP))
    for function, closure, meaning in closures:
        # JAX 0.12.1 moved vmap's body to ``api._vmap``, which ``api.vmap`` calls: looked
        # for there only where ``api.vmap`` no longer defines the closure itself
        code = _closure_code(function, closure,
                             *((getattr(api, "_vmap", None),) if function is api.vmap else ()))
        if code is not None:
            codes[code] = meaning
    plain: tuple[tuple[Any, str], ...] = (
        (api.jvp, "jvp"), (api.vjp, "vjp"), (api.linearize, "linearize"))
    for top, name in plain:
        code = getattr(inspect.unwrap(top), "__code__", None)
        if code is not None:
            codes[code] = _Transformation(name, (), _AUX_ONLY)
    _grad_wrappers = frozenset(c for name in ("grad_f", "grad_f_aux")
                               if (c := _closure_code(api.grad, name)) is not None)
    _jax_dir = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep
    return codes


def _codes() -> dict[Any, _Transformation]:
    """JAX's transformation closures by code object, read at their first use (``{}``: they
    moved), checkify's among them once its module is loaded."""
    global _transformation_codes
    codes = _transformation_codes
    if codes is None:
        try:
            codes = _read_transformation_codes()
        except Exception:  # moved: the transformations are not named
            codes = {}
        _transformation_codes = codes
    if codes and not _checkify_read:
        _add_checkify(codes)
    return codes


_STACK_LIMIT = 1000  # frames walked at most


def transformed_function() -> Any:
    """The function the outermost transformation on the stack was applied to (its ``fun``:
    the user's jitted function under ``jax.grad(jax.jit(f))``), ``None`` when none is
    found. Its number tells a function re-created per call from the same one, whose
    forward and backward programs are compiled apart."""
    try:
        codes = _codes()
        if not codes:
            return None
        # The outermost one: the transformation the user applied, whose forward and
        # backward programs are both compiled inside its one call (the transformations
        # JAX applies inside it wrap the function anew for each program).
        outermost: Any = None
        frame: Any = sys._getframe(1)
        for _ in range(_STACK_LIMIT):
            if frame is None:
                break
            # checkify traces first and evaluates after: its function is not the one
            # whose program this is (``_nested_serial`` finds that one)
            if (codes.get(frame.f_code, _CHECKIFY) is not _CHECKIFY
                    or frame.f_code in _grad_wrappers) \
                    and frame.f_locals.get("fun") is not None:
                outermost = frame
            frame = frame.f_back
        return outermost.f_locals["fun"] if outermost is not None else None
    except Exception:  # a frame that cannot be read: not found
        return None


# --- which pass of a transformation a program is --------------------------------------
#
# grad (and vjp, jacrev, linearize) derives programs of their own from one trace of the
# jitted function: a forward pass (jit_p's linearize or partial-eval rule evaluates it)
# and a backward pass (its transpose rule, inside JAX's backward pass), or linearize's
# tangent program. Each is compared only with earlier programs of its own pass: the
# backward program is no recompile of the forward one. Read off the stack by the names of
# those rules' functions (jax._src.pjit, jax._src.interpreters.ad).

PASS_FORWARD = "forward"
PASS_BACKWARD = "backward"
PASS_TANGENT = "tangent"
_PASS_FRAMES = {
    "_pjit_linearize": PASS_FORWARD, "_pjit_partial_eval": PASS_FORWARD,
    "_pjit_transpose": PASS_BACKWARD, "_pjit_transpose_fancy": PASS_BACKWARD,
    "backward_pass": PASS_BACKWARD, "backward_pass3": PASS_BACKWARD,
    "_lift_linearized": PASS_TANGENT,
}


def program_pass() -> str:
    """The pass the transformed program being evaluated belongs to: ``PASS_FORWARD``,
    ``PASS_BACKWARD``, ``PASS_TANGENT``, or ``""`` when no such rule of JAX's is running
    (jvp's one program, vmap's, checkify's; or the rules moved)."""
    try:
        if not _jax_dir:
            _codes()  # reads JAX's directory once
            if not _jax_dir:  # unread: a user's function of a rule's name is no rule
                return ""
        frame: Any = sys._getframe(1)
        for _ in range(_STACK_LIMIT):
            if frame is None:
                break
            code = frame.f_code
            found = _PASS_FRAMES.get(code.co_name)
            if found is not None and code.co_filename.startswith(_jax_dir):
                return found
            frame = frame.f_back
        return ""
    except Exception:  # a frame that cannot be read: not known
        return ""


def transformations_on_stack() -> str:
    """The transformations the running code is under, outermost first and as a user
    applied them (``vmap(in_axes=0) of grad(argnums=0)``); those JAX applies inside
    another (jacrev's own vjp and vmap) are left out. ``""`` when none is found."""
    try:
        codes = _codes()
        if not codes:
            return ""
        found: list[str] = []
        pending: tuple[Any, _Transformation] | None = None
        frame: Any = sys._getframe(1)
        for _ in range(_STACK_LIMIT):
            if frame is None:
                break
            code = frame.f_code
            meaning = codes.get(code)
            if pending is not None:
                if meaning is not None or code in _grad_wrappers:
                    # called by another transformation's own code: part of that one,
                    # unless it is grad's wrapper around value_and_grad
                    if code in _grad_wrappers and pending[1] is not None:
                        found.append(_render(pending[0].f_locals,
                                             pending[1]._replace(name="grad")))
                    pending = None
                elif not code.co_filename.startswith(_jax_dir):
                    # called from the user's code
                    found.append(_render(pending[0].f_locals, pending[1]))
                    pending = None
            if meaning is not None:
                pending = (frame, meaning)
            frame = frame.f_back
        if pending is not None:
            found.append(_render(pending[0].f_locals, pending[1]))
        return " of ".join(reversed(found))
    except Exception:  # a frame that cannot be read: not named
        return ""


_WRAPPER_DEPTH = 8  # functions walked into at most, from a jitted callable
# the cells that hold the function a transformation or JAX's api boundary wraps
_WRAPPED_CELLS = ("fun", "f", "value_and_grad_f")


def transformations_of(fun: Any) -> str:
    """The transformations a jitted callable is made of, outermost first and as a user
    applied them (``vmap(in_axes=0, out_axes=1)`` for ``jax.jit(jax.vmap(f, out_axes=1))``),
    read from the closures of JAX's transformations: a re-created one with other
    parameters is another program. ``""`` when none is found. Reads the function objects
    and closure cells of JAX's functions only: no user code runs, and a user's function
    is where the walk ends."""
    try:
        codes = _codes()
        if not codes:
            return ""
        found: list[str] = []
        for _ in range(_WRAPPER_DEPTH):
            # JAX's own functions only: a user's function that calls a transformed one it
            # closes over (``f``) is not made of that transformation
            if type(fun) is not types.FunctionType \
                    or not fun.__code__.co_filename.startswith(_jax_dir):
                break
            code = fun.__code__
            cells = dict(zip(code.co_freevars, (_cell(c) for c in fun.__closure__ or ())))
            if code in _grad_wrappers:
                inner = _unwrapped(cells.get("value_and_grad_f"))
                meaning = codes.get(getattr(inner, "__code__", None))
                if inner is not None and meaning is not None:
                    values = dict(zip(inner.__code__.co_freevars,
                                      (_cell(c) for c in inner.__closure__ or ())))
                    found.append(_render(values, meaning._replace(name="grad")))
                    fun = values.get("fun")
                    continue
            elif code in codes:
                found.append(_render(cells, codes[code]))
            fun = next((cells[n] for n in _WRAPPED_CELLS if cells.get(n) is not None), None)
        return " of ".join(found)
    except Exception:  # a closure that cannot be read: not named
        return ""


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _unwrapped(fun: Any) -> Any:
    """The function inside JAX's api-boundary wrapper (its one cell, ``fun``)."""
    if type(fun) is types.FunctionType and fun.__code__.co_freevars == ("fun",):
        return _cell(fun.__closure__[0])  # type: ignore[index]
    return fun


def _render(values: Any, meaning: _Transformation) -> str:
    shown = [f"{p}={_plain(values.get(p))}" for p in meaning.always if p in values]
    # a parameter JAX replaced by a sentinel object of its own (vmap's axis_name) is
    # not one the user set
    shown += [f"{p}={text}" for p, default in meaning.when_set
              if p in values and not _is_default(values[p], default)
              and not (text := _plain(values[p])).startswith("<")]
    return f"{meaning.name}({', '.join(shown)})"


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (type(value) is type(default) and value == default)


_PLAIN_LIMIT = 80


def _plain(value: Any, depth: int = 0) -> str:
    """A parameter's text without running user code: built-in values by repr, containers
    of them item by item, anything else by its type's name."""
    t = type(value)
    if value is None or t in (bool, int, float, str):
        text = repr(value)
    elif t in (tuple, list) and depth < 3 and len(value) <= 16:
        items = [_plain(v, depth + 1) for v in value]
        text = (f"({items[0]},)" if t is tuple and len(items) == 1 else
                ("({})" if t is tuple else "[{}]").format(", ".join(items)))
    elif t is dict and depth < 3 and len(value) <= 16:
        text = "{" + ", ".join(f"{_plain(k, depth + 1)}: {_plain(v, depth + 1)}"
                               for k, v in value.items()) + "}"
    else:
        text = f"<{getattr(t, '__qualname__', 'object')}>"
    return text if len(text) <= _PLAIN_LIMIT else text[:_PLAIN_LIMIT - 3] + "..."
