"""Every use of JAX internals lives here, each with a fallback for when it moves.

Public ``jax.monitoring`` tells us *that* a compile happened and how long each
phase took, but not *which call* caused it. The call's function, arguments and
jit options are only visible inside ``jax._src.pjit``: the C++ dispatch path
falls back to Python on a cache miss and calls the module-level
``_infer_params`` by name. Wrapping that name costs nothing on cache hits (the
C++ fast path never reaches it). ``_run_python_pjit`` runs right after it in
the same miss; wrapping it lets us drop the captured arguments as soon as the
call is over, so we never keep a user's arrays alive.

A jitted function called under a transformation outside jit
(``jax.grad(jitted)(x)``, ``jax.vmap(jitted)(xs)``) never reaches
``_run_python_pjit``: JAX evaluates the transformed computation (a new jaxpr)
through ``_pjit_call_impl_python``, again only on a cache miss. Wrapping that
name too turns those compiles into a signature of flat arguments.

When these names are missing (a JAX version that moved them), otel_jax still
emits one span per compile from the monitoring events, with cause ``unknown``
and an explanation saying that the signature could not be captured. What each
missing internal costs is a :class:`Capability`; ``Hooks.unavailable`` lists
those this JAX version lacks, and the engine says so once.
"""

from __future__ import annotations

import enum
import inspect
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .._core._idcache import SERIALS

# Event names JAX records around compilation (jax/_src/dispatch.py).
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
PHASE_EVENTS = frozenset({TRACE_EVENT, LOWER_EVENT, BACKEND_COMPILE_EVENT})
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_WRITE_EVENT = "/jax/compilation_cache/cache_misses"


class Capability(enum.Enum):
    """A fact otel_jax reads off JAX internals rather than public API.

    On a JAX version where those internals moved the fact is unavailable and its
    fallback is reported instead. Compile counts, durations and phases come from
    JAX's monitoring events and are always kept.
    """

    #: The call's function, arguments and jit options on a dispatch miss: the cause diff.
    CAUSES = "causes"
    #: The same for a jitted function called under grad/vmap/jvp outside jit.
    TRANSFORMED_CAUSES = "transformed_causes"
    #: The lowered program's digest (``jax.compile.program_fingerprint``).
    PROGRAM_FINGERPRINTS = "program_fingerprints"
    #: The persistent-cache key part by part: why the persistent cache missed.
    CACHE_MISS_REASONS = "cache_miss_reasons"

    @property
    def lost(self) -> str:
        """What is reported without it."""
        return _LOST[self]


_LOST = {
    Capability.CAUSES: "recompile causes (cause 'unknown')",
    Capability.TRANSFORMED_CAUSES:
        "causes of jitted functions called under grad/vmap outside jit (cause 'unknown')",
    Capability.PROGRAM_FINGERPRINTS: "program fingerprints (none)",
    Capability.CACHE_MISS_REASONS: "why the persistent cache missed (reason not told)",
}


class Unavailable(NamedTuple):
    """One capability this JAX version lacks, and which internal moved."""

    capability: Capability
    reason: str


def unavailable_message(jax_version: str, unavailable: Sequence[Unavailable]) -> str:
    """The one warning that says what this JAX version costs (causes and what moved)."""
    lost = {u.capability for u in unavailable}
    shown = [u for u in unavailable if not (u.capability is Capability.TRANSFORMED_CAUSES
                                            and Capability.CAUSES in lost)]
    listed = "; ".join(f"{u.capability.lost} [{u.reason}]" for u in shown)
    return (f"otel_jax: on jax {jax_version} some facts are unavailable: {listed}. "
            "Compile counts, durations and phases are kept; the jit calls are unaffected.")


class Miss(NamedTuple):
    """What one dispatch-cache miss saw: enough to build a signature later.

    Built on every miss (including the nested ones made while tracing), so it
    only stores references; the signature is derived from it only when a
    backend compile really follows.
    """

    fun: Any  # the jitted function, or a TransformedFunction
    jit_info: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    params: Any  # PjitParams: in_avals, in_tree, arg_names, consts
    args_flat: Any  # consts + dynamic args, as JAX will pass them
    started: float  # wall clock (JAX's clock for phases) when the miss began
    transformed: bool = False  # a jitted computation evaluated under grad/vmap/jvp
    # transformed only: the transformations the computation runs under and their
    # parameters, outermost first (``grad(argnums=(0, 1))``); "" when not read
    transformation: str = ""
    # ``jax.clear_caches()`` calls seen before the miss (-1: not watched): read at the
    # miss, since a signature may be built from it later
    cache_clears: int = -1


class TransformedFunction:
    """Stands in for the function of a computation JAX runs under a transformation.

    Only the jaxpr reaches the miss, so the name and definition site come from
    its debug info (``"f at /path/train.py:12"``), unless the jitted function
    that bound it is known (``origin``: under vmap, the call is still running).
    """

    __slots__ = ("__name__", "origin", "program", "source")

    def __init__(self, name: str, source: str | None, origin: Any = None,
                 program: int = 0) -> None:
        self.__name__ = name
        self.source = source
        self.origin = origin
        #: The number (``Serials``: it is not held) of the function the transformation was
        #: applied to, ``0`` unknown.
        self.program = program

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


_tls = threading.local()


def _enter_level(miss: Miss | None) -> list[Miss | None]:
    """Push a call level whose miss is ``miss``: calls nest (a host callback calling
    a jitted function, JAX compiling an op it needs), and the outer call's miss
    must be current again when its own compile starts."""
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    stack.append(miss)
    return stack


def _leave_level(stack: list[Miss | None]) -> None:
    # The call is over: stop referencing its arguments, so that donated or
    # large arrays can be freed.
    stack.pop()
    _tls.miss = stack[-1] if stack else None


def current_miss() -> Miss | None:
    """The latest miss seen on this thread whose call has not finished yet."""
    return getattr(_tls, "miss", None)


def clear_miss() -> None:
    _tls.miss = None
    _tls.direct = False
    _tls.bound_fun = None
    stack = getattr(_tls, "stack", None)
    if stack:
        stack[-1] = None


class CompileInputs(NamedTuple):
    """What one backend compile was asked to compile (references, dropped after its event).

    Read by ``_jax_read``: the lowered program (to fingerprint it, as JAX's
    persistent cache does), the devices, the compile options and the backend.
    """

    computation: Any  # the lowered MLIR module
    devices: Any  # numpy array of devices
    compile_options: Any
    backend: Any
    host_callbacks: int


# The entry JAX calls (inside its backend-compile event) to compile a lowered
# program or fetch it from the persistent cache, looked up by name at call time.
_COMPILE_ENTRY = "compile_or_get_cached"


# Its leading parameters, as JAX 0.8 - 0.12 name them; read by name or position.
_COMPILE_PARAMS = ("backend", "computation", "devices", "compile_options", "host_callbacks")


def _wrap_compile_or_get_cached(original: Callable[..., Any]) -> Callable[..., Any]:
    # Any arguments pass through untouched, so a JAX that calls it another way
    # loses the program's facts, never the compile.
    def compile_or_get_cached(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            given = dict(zip(_COMPILE_PARAMS, args))
            given.update((k, kwargs[k]) for k in _COMPILE_PARAMS if k in kwargs)
            _tls.compile_inputs = CompileInputs(
                given["computation"], given["devices"], given["compile_options"],
                given["backend"], len(given["host_callbacks"]))
        except Exception:  # arguments moved
            _tls.compile_inputs = None
        return original(*args, **kwargs)

    return compile_or_get_cached


def _leading_parameters(function: Any) -> tuple[str, ...] | None:
    """The names of ``function``'s positional parameters (``None`` when unreadable or when
    it takes ``*args``)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))


def take_compile_inputs() -> CompileInputs | None:
    """The inputs of the backend compile that just ended on this thread (then forgotten:
    the lowered program can be large)."""
    inputs = getattr(_tls, "compile_inputs", None)
    _tls.compile_inputs = None
    return inputs


class _Patch:
    """A wrapped module attribute that can be removed without clobbering others."""

    def __init__(self, module: Any, name: str, make_wrapper: Callable[[Any], Any]):
        self.module = module
        self.name = name
        self.original = getattr(module, name)
        self.wrapper = make_wrapper(self.original)
        self.wrapper.__otel_jax_original__ = self.original
        setattr(module, name, self.wrapper)

    def remove(self) -> None:
        if getattr(self.module, self.name, None) is self.wrapper:
            setattr(self.module, self.name, self.original)


def _top_level() -> Callable[[], bool]:
    """JAX's "no trace in progress" test; misses made while tracing never compile."""
    try:
        from jax._src import core

        return core.trace_state_clean
    except Exception:  # pragma: no cover - moved: treat every miss as top level
        return lambda: True


def _wrap_infer_params(original: Callable[..., Any], miss_path: Any = None,
                       on_trace_only: Callable[[Miss], None] | None = None,
                       ) -> Callable[..., Any]:
    """``miss_path``: the code object of the dispatch miss (``cache_miss``), whose
    call of the trace entry is followed by the scope that ends the call; any
    other caller (``.trace()``, ``.lower()``, ``jax.eval_shape``) only traces, and
    ``on_trace_only`` reads its miss at once."""
    top_level = _top_level()

    def _infer_params(fun, ji, args, kwargs):  # type: ignore[no-untyped-def]
        if not top_level():
            # A jitted call made while tracing another (every jnp op inside a
            # jitted function): it binds into that trace and never compiles.
            return original(fun, ji, args, kwargs)
        started = time.time()
        result = original(fun, ji, args, kwargs)
        if getattr(_tls, "slot_open", False):
            # Inside the scope of a call (JAX < 0.9): the scope's end drops it.
            _tls.slot_open = False  # this call's own slot, not an outer call's
            _tls.miss = _tls.stack[-1] = _miss(fun, ji, args, kwargs, result, started)
        elif miss_path is None or sys._getframe(1).f_code is miss_path:
            # The dispatch miss: _run_python_pjit follows at once and its end
            # drops the miss.
            _tls.miss = _miss(fun, ji, args, kwargs, result, started)
        elif on_trace_only is not None:
            # A trace with no call around it: nothing would ever drop a miss kept
            # now, and it references the user's arrays. The listener reads what
            # the compile that may follow (an AOT ``.lower().compile()``) needs, now.
            miss = _miss(fun, ji, args, kwargs, result, started)
            if miss is not None:
                try:
                    on_trace_only(miss)
                except Exception:  # pragma: no cover - the listener guards itself
                    pass
        return result

    return _infer_params


def _miss(fun: Any, ji: Any, args: Any, kwargs: Any, result: Any, started: float,
          ) -> Miss | None:
    try:
        return Miss(fun, ji, args, kwargs, result[0], result[1], started,
                    cache_clears=cache_clears())
    except Exception:  # pragma: no cover - result shape moved
        return None


def _wrap_run_python_pjit(original: Callable[..., Any], trace_inside: bool,
                          ) -> Callable[..., Any]:
    """``trace_inside``: the trace entry runs inside this scope (JAX < 0.9), and
    fills the level's slot with its miss; otherwise it ran just before."""
    top_level = _top_level()
    fun_index = 0 if trace_inside else 2  # (fun, ji, ...) / (p, args_flat, fun, ...)

    def _run_python_pjit(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not top_level():
            # Under vmap (or an eager shard_map) the call binds jit_p, which
            # evaluates the transformed program right away: remember whose it is.
            bound = getattr(_tls, "bound_fun", None)
            _tls.bound_fun = args[fun_index] if len(args) > fun_index else None
            try:
                return original(*args, **kwargs)
            finally:
                _tls.bound_fun = bound
        # Tells the _pjit_call_impl_python wrapper that this call's own miss
        # is already the current one (restored after: calls nest).
        direct = getattr(_tls, "direct", False)
        _tls.direct = True
        stack = _enter_level(getattr(_tls, "miss", None))
        slot_open = getattr(_tls, "slot_open", False)
        _tls.slot_open = trace_inside
        try:
            return original(*args, **kwargs)
        finally:
            _tls.direct = direct
            _tls.slot_open = slot_open
            _leave_level(stack)

    return _run_python_pjit


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
    fun = TransformedFunction(str(params.get("name", "<unnamed function>")),
                              source if isinstance(source, str) else None, origin,
                              transformed_function_serial())
    return Miss(fun, jit_info, args, {},
                _TransformedParams(in_avals, _flat_in_tree(len(in_avals)), names, (),
                                   len(jaxpr.out_avals), len(getattr(inner, "eqns", ()))),
                args, started, transformed=True, transformation=transformations_on_stack(),
                cache_clears=cache_clears())


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

# code object -> what its frame stands for; ``None`` until first needed, ``{}`` if unreadable
_transformation_codes: dict[Any, _Transformation] | None = None
_grad_wrappers: frozenset[Any] = frozenset()  # grad's closures around value_and_grad's
_jax_dir = ""


def _closure_code(function: Any, name: str) -> Any:
    code = getattr(inspect.unwrap(function), "__code__", None)
    return next((c for c in getattr(code, "co_consts", ())
                 if getattr(c, "co_name", None) == name), None)


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
        code = _closure_code(function, closure)
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


_STACK_LIMIT = 1000  # frames walked at most


def transformed_function_serial() -> int:
    """The number (``Serials``) of the function the outermost transformation on the stack
    was applied to (its ``fun``: the user's jitted function under ``jax.grad(jax.jit(f))``),
    ``0`` when none is found. The function is not held: its number tells a function
    re-created per call from the same one, whose forward and backward programs are
    compiled apart."""
    try:
        codes = _transformation_codes
        if codes is None:
            transformations_on_stack()  # reads the codes once
            codes = _transformation_codes
        if not codes:
            return 0
        # The outermost one: the transformation the user applied, whose forward and
        # backward programs are both compiled inside its one call (the transformations
        # JAX applies inside it wrap the function anew for each program).
        outermost: Any = None
        frame: Any = sys._getframe(1)
        for _ in range(_STACK_LIMIT):
            if frame is None:
                break
            if (frame.f_code in codes or frame.f_code in _grad_wrappers) \
                    and frame.f_locals.get("fun") is not None:
                outermost = frame
            frame = frame.f_back
        return SERIALS.of(outermost.f_locals["fun"]) if outermost is not None else 0
    except Exception:  # a frame that cannot be read: no number
        return 0


def transformations_on_stack() -> str:
    """The transformations the running code is under, outermost first and as a user
    applied them (``vmap(in_axes=0) of grad(argnums=0)``); those JAX applies inside
    another (jacrev's own vjp and vmap) are left out. ``""`` when none is found."""
    global _transformation_codes
    try:
        if _transformation_codes is None:
            try:
                _transformation_codes = _read_transformation_codes()
            except Exception:  # moved: the transformations are not named
                _transformation_codes = {}
        codes = _transformation_codes
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
                        found.append(_render(pending[0], pending[1]._replace(name="grad")))
                    pending = None
                elif not code.co_filename.startswith(_jax_dir):
                    found.append(_render(*pending))  # called from the user's code
                    pending = None
            if meaning is not None:
                pending = (frame, meaning)
            frame = frame.f_back
        if pending is not None:
            found.append(_render(*pending))
        return " of ".join(reversed(found))
    except Exception:  # a frame that cannot be read: not named
        return ""


def _render(frame: Any, meaning: _Transformation) -> str:
    values = frame.f_locals
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


def _wrap_call_impl_python(original: Callable[..., Any]) -> Callable[..., Any]:
    # No trace-state test here: this is jit_p's evaluation rule, reached only
    # to run a computation, and vmap may still hold a trace while it does.
    def _pjit_call_impl_python(*args, **params):  # type: ignore[no-untyped-def]
        if getattr(_tls, "direct", False):
            _tls.direct = False  # reached from _run_python_pjit: its miss is current
            return original(*args, **params)
        try:
            miss: Miss | None = transformed_miss(args, params, time.time(),
                                                 getattr(_tls, "bound_fun", None))
        except Exception:  # the jit_p parameters moved: the compile stays uncaptured
            miss = None
        stack = _enter_level(miss)
        _tls.miss = miss
        try:
            return original(*args, **params)
        finally:
            _leave_level(stack)

    return _pjit_call_impl_python


# What the miss path calls to trace, by JAX version (same arguments and result).
_TRACE_ENTRY_NAMES = ("_infer_params", "_trace_for_jit")


def _global_names(function: Any, inner: str | None = None) -> frozenset[str]:
    """Global names ``function`` (or the closure ``inner`` defined in it) looks up."""
    code = getattr(function, "__code__", None)
    if inner is not None:
        code = next((c for c in getattr(code, "co_consts", ())
                     if getattr(c, "co_name", None) == inner), None)
    return frozenset(getattr(code, "co_names", ()))


def _miss_path_names(pjit: Any) -> frozenset[str]:
    """What the ``cache_miss`` closure of ``_cpp_pjit`` (a jit call's miss) calls."""
    return _global_names(getattr(pjit, "_cpp_pjit", None), "cache_miss")


def _miss_path_code(pjit: Any) -> Any:
    """The code object of the ``cache_miss`` closure of ``_cpp_pjit``, or ``None``."""
    code = getattr(getattr(pjit, "_cpp_pjit", None), "__code__", None)
    return next((c for c in getattr(code, "co_consts", ())
                 if getattr(c, "co_name", None) == "cache_miss"), None)


def _call_impl_miss_names(pjit: Any) -> frozenset[str]:
    """What the ``call_impl_cache_miss`` closure of ``_pjit_call_impl`` calls."""
    return _global_names(getattr(pjit, "_pjit_call_impl", None), "call_impl_cache_miss")


def transformed_entry(pjit: Any) -> str | None:
    """The name JAX calls on a miss of a jitted computation run under a transformation."""
    name = "_pjit_call_impl_python"
    if name in _call_impl_miss_names(pjit) and callable(getattr(pjit, name, None)):
        return name
    return None


# What the miss calls around tracing and running, by JAX version: JAX >= 0.9
# calls the trace entry and then _run_python_pjit; older versions call
# _python_pjit_helper, which calls the trace entry itself.
_SCOPE_NAMES = ("_run_python_pjit", "_python_pjit_helper")


class PjitEntries(NamedTuple):
    module: Any
    trace: str  # returns the traced call's PjitParams
    scope: str  # runs the whole miss: the miss is current while it runs
    trace_inside_scope: bool


def pjit_module() -> PjitEntries | None:
    """``jax._src.pjit`` and the names its jit miss path calls, if they can be wrapped.

    Reads the names the miss path really calls, so a JAX version that renamed
    them falls back to uncaptured signatures instead of wrapping a function
    that is never called.
    """
    try:
        from jax._src import pjit
    except Exception:
        return None
    names = _miss_path_names(pjit)
    scope = next((n for n in _SCOPE_NAMES if n in names and callable(getattr(pjit, n, None))),
                 None)
    if scope is None:
        return None
    inside = scope != "_run_python_pjit"
    trace_names = _global_names(getattr(pjit, scope)) if inside else names
    for entry in _TRACE_ENTRY_NAMES:
        function = getattr(pjit, entry, None)
        # Wrapped as (fun, jit_info, args, kwargs): one that takes other arguments
        # is left alone.
        if (entry in trace_names and callable(function)
                and len(_leading_parameters(function) or ()) == 4):
            return PjitEntries(pjit, entry, scope, inside)
    return None


def _pjit_gap(pjit: Any) -> str:
    """Which part of the jit miss path this JAX lacks, in a few words (for the warning)."""
    if pjit is None:
        return "no jax._src.pjit"
    names = _miss_path_names(pjit)
    if not any(n in names for n in _SCOPE_NAMES):
        return f"the jit miss path calls none of {', '.join(_SCOPE_NAMES)}"
    return (f"the jit miss path calls none of {', '.join(_TRACE_ENTRY_NAMES)} as "
            "(fun, jit_info, args, kwargs)")


class _ClearWatch:
    """Counts ``jax.clear_caches()`` calls: registered among JAX's own caches, whose every
    ``cache_clear`` that call runs. The evidence for naming a cache clear as a cause."""

    __slots__ = ("clears", "__weakref__")

    def __init__(self) -> None:
        self.clears = 0

    def cache_clear(self) -> None:
        self.clears += 1

    def cache_info(self) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)  # holds nothing


_clear_watch = _ClearWatch()
_clear_watch_registered = False


def watch_cache_clears() -> bool:
    """Register the clear counter with JAX's cache registry (once); whether it is."""
    global _clear_watch_registered
    if not _clear_watch_registered:
        try:
            from jax._src import util

            util.register_cache(_clear_watch, "otel_jax: counts jax.clear_caches() calls")
            _clear_watch_registered = True
        except Exception:  # moved: a cache clear is never named as a cause
            pass
    return _clear_watch_registered


def cache_clears() -> int:
    """``jax.clear_caches()`` calls seen so far (``-1``: not watched, so never evidence)."""
    return _clear_watch.clears if _clear_watch_registered else -1


class Hooks:
    """JAX listeners and patches owned by one otel_jax engine."""

    def __init__(
        self,
        on_time_span: Callable[..., None],
        on_event: Callable[..., None],
        on_trace_only: Callable[[Miss], None] | None = None,
    ) -> None:
        self._on_time_span = on_time_span
        self._on_event = on_event
        self._on_trace_only = on_trace_only
        self._patches: list[_Patch] = []
        self.captures_signatures = False
        self.captures_programs = False
        #: What this JAX version's internals do not give (empty on a tested version).
        self.unavailable: tuple[Unavailable, ...] = ()

    def install(self) -> None:
        from jax._src import monitoring

        _exclude_from_tracebacks()
        watch_cache_clears()
        monitoring.register_event_time_span_listener(self._on_time_span)
        monitoring.register_event_listener(self._on_event)
        gaps: list[Unavailable] = []
        # Each patch is tried on its own: one that fails costs its facts, not the others.
        patched = len(self._patches)
        try:
            gaps += self._patch_pjit()
        except Exception as exc:
            # Half a miss path would keep misses (and the user's arrays) alive: none at all.
            for patch in reversed(self._patches[patched:]):
                patch.remove()
            del self._patches[patched:]
            why = f"{type(exc).__name__} reading jax._src.pjit"
            gaps += [Unavailable(Capability.CAUSES, why),
                     Unavailable(Capability.TRANSFORMED_CAUSES, why)]
        self.captures_signatures = not any(g.capability is Capability.CAUSES for g in gaps)
        try:
            gap = self._patch_compiler()
        except Exception as exc:
            gap = f"{type(exc).__name__} reading jax._src.compiler"
        self.captures_programs = gap is None
        if gap is not None:
            gaps += [Unavailable(Capability.PROGRAM_FINGERPRINTS, gap),
                     Unavailable(Capability.CACHE_MISS_REASONS, gap)]
        self.unavailable = tuple(gaps)

    def _patch_compiler(self) -> str | None:
        """Wrap the backend-compile entry so the compile event can see what was compiled;
        returns what is missing when it cannot."""
        try:
            from jax._src import compiler
        except Exception:
            return "no jax._src.compiler"
        entry = getattr(compiler, _COMPILE_ENTRY, None)
        if not callable(entry):
            return f"no jax._src.compiler.{_COMPILE_ENTRY}"
        if (_leading_parameters(entry) or ())[:len(_COMPILE_PARAMS)] != _COMPILE_PARAMS:
            return f"{_COMPILE_ENTRY} takes other arguments"
        self._patches.append(_Patch(compiler, _COMPILE_ENTRY, _wrap_compile_or_get_cached))
        return None

    def _patch_pjit(self) -> list[Unavailable]:
        found = pjit_module()
        if found is None:
            module: Any = None
            try:
                from jax._src import pjit as module
            except Exception:
                pass
            gap = _pjit_gap(module)
            return [Unavailable(Capability.CAUSES, gap),
                    Unavailable(Capability.TRANSFORMED_CAUSES, gap)]
        pjit = found.module
        miss_path = _miss_path_code(pjit)
        self._patches.append(_Patch(
            pjit, found.trace,
            lambda original: _wrap_infer_params(original, miss_path, self._on_trace_only)))
        self._patches.append(_Patch(
            pjit, found.scope,
            lambda original: _wrap_run_python_pjit(original, found.trace_inside_scope)))
        transformed = transformed_entry(pjit)
        if transformed is None:
            return [Unavailable(Capability.TRANSFORMED_CAUSES,
                                "jit_p's miss path calls no _pjit_call_impl_python")]
        self._patches.append(_Patch(pjit, transformed, _wrap_call_impl_python))
        return []

    def uninstall(self) -> None:
        from jax._src import monitoring

        for patch in reversed(self._patches):
            patch.remove()
        self._patches.clear()
        self.captures_signatures = False
        self.captures_programs = False
        self.unavailable = ()
        _tls.compile_inputs = None
        _unregister(monitoring, ("unregister_event_time_span_listener",
                                 "_unregister_event_time_span_listener_by_callback"),
                    "_event_time_span_listeners", self._on_time_span)
        _unregister(monitoring, ("unregister_event_listener",
                                 "_unregister_event_listener_by_callback"),
                    "_event_listeners", self._on_event)
        clear_miss()


def _exclude_from_tracebacks() -> None:
    """Hide these wrappers from JAX's filtered tracebacks and source locations.

    They sit on the stack of every traced jit call; an error in the user's
    function should point at the user's code and JAX, not at otel_jax. The two
    lists are separate: ``traceback_util``'s filters tracebacks, while
    ``source_info_util``'s picks the user frame that ``jax_explain_cache_misses``
    and equation source locations name.
    """
    try:
        from jax._src import traceback_util

        if __file__ not in getattr(traceback_util, "_exclude_paths", ()):
            traceback_util.register_exclusion(__file__)
    except Exception:  # pragma: no cover - moved: tracebacks just show one more frame
        pass
    try:
        from jax._src import source_info_util

        if __file__ not in getattr(source_info_util, "_exclude_paths", ()):
            source_info_util.register_exclusion(__file__)
    except Exception:  # pragma: no cover - moved: JAX names this frame as the call site
        pass


def _unregister(monitoring: Any, fn_names: tuple[str, ...], list_name: str,
                callback: Any) -> None:
    # Public since JAX 0.9; "_..._by_callback" before.
    unregister = next((getattr(monitoring, n) for n in fn_names if hasattr(monitoring, n)),
                      None)
    try:
        if unregister is not None:
            unregister(callback)
            return
    except (AssertionError, ValueError):
        return  # already gone
    listeners = getattr(monitoring, list_name, None)
    if listeners is not None and callback in listeners:
        listeners.remove(callback)


def pjit_patched() -> bool:
    """Whether otel_jax's wrappers are on ``jax._src.pjit`` right now."""
    from jax._src import pjit

    return any(
        hasattr(getattr(pjit, name, None), "__otel_jax_original__")
        for name in (*_TRACE_ENTRY_NAMES, *_SCOPE_NAMES, "_pjit_call_impl_python")
    )
