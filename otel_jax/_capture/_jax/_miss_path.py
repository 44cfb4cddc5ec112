"""The patches on jit's dispatch-miss path, and the miss they leave current on this thread.

Public ``jax.monitoring`` tells us *that* a compile happened and how long each phase took,
but not *which call* caused it. The call's function, arguments and jit options are only
visible inside ``jax._src.pjit``: the C++ dispatch path falls back to Python on a cache
miss and calls the module-level ``_infer_params`` by name. Wrapping that name costs
nothing on cache hits (the C++ fast path never reaches it). ``_run_python_pjit`` runs
right after it in the same miss; wrapping it lets us drop the captured arguments as soon
as the call is over, so we never keep a user's arrays alive.

A jitted function called under a transformation outside jit (``jax.grad(jitted)(x)``,
``jax.vmap(jitted)(xs)``) never reaches ``_run_python_pjit``: JAX evaluates the
transformed computation (a new jaxpr) through ``_pjit_call_impl_python``, again only on a
cache miss. Wrapping that name too turns those compiles into a signature of flat
arguments.

Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs).
(JAX 0.8 traces inside ``_python_pjit_helper``; from 0.9 ``_run_python_pjit`` follows the
trace entry; 0.12 names the entry ``_trace_for_jit``.) The names wrapped are those the
miss path really calls, read off its code. Fallback: when these names are missing (a JAX
version that moved them), nothing is wrapped, and otel_jax still emits one span per
compile from the monitoring events, with cause ``unknown`` and an explanation saying that
the signature could not be captured.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from ._cache_clears import cache_clears
from ._miss import Miss
from ._patch import leading_parameters
from ._transformed import note_nested_trace, transformed_miss

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


def _top_level() -> Callable[[], bool]:
    """JAX's "no trace in progress" test; misses made while tracing never compile."""
    try:
        from jax._src import core

        return core.trace_state_clean
    except Exception:  # pragma: no cover - moved: treat every miss as top level
        return lambda: True


def wrap_infer_params(original: Callable[..., Any], miss_path: Any = None,
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
            # jitted function): it binds into that trace and never compiles, unless
            # a transformation evaluates the trace after (checkify): its function is
            # noted for that compile.
            note_nested_trace(fun)
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


def wrap_run_python_pjit(original: Callable[..., Any], trace_inside: bool,
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


def wrap_call_impl_python(original: Callable[..., Any]) -> Callable[..., Any]:
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


def miss_path_code(pjit: Any) -> Any:
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
                and len(leading_parameters(function) or ()) == 4):
            return PjitEntries(pjit, entry, scope, inside)
    return None


def pjit_gap(pjit: Any) -> str:
    """Which part of the jit miss path this JAX lacks, in a few words (for the warning)."""
    if pjit is None:
        return "no jax._src.pjit"
    names = _miss_path_names(pjit)
    if not any(n in names for n in _SCOPE_NAMES):
        return f"the jit miss path calls none of {', '.join(_SCOPE_NAMES)}"
    return (f"the jit miss path calls none of {', '.join(_TRACE_ENTRY_NAMES)} as "
            "(fun, jit_info, args, kwargs)")


def pjit_patched() -> bool:
    """Whether otel_jax's wrappers are on ``jax._src.pjit`` right now."""
    from jax._src import pjit

    return any(
        hasattr(getattr(pjit, name, None), "__otel_jax_original__")
        for name in (*_TRACE_ENTRY_NAMES, *_SCOPE_NAMES, "_pjit_call_impl_python")
    )
