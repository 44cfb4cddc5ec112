"""``jax.monitoring``: the events otel_jax listens to around a compile, and taking its
listeners off again.

Its own module: the event names are JAX's (``jax/_src/dispatch.py``,
``compilation_cache.py``), and the way to unregister a listener changed (public from JAX
0.9, ``_..._by_callback`` before). Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest,
default and newest test venvs). Fallback: without an unregister function, the listener is
removed from JAX's list.
"""

from __future__ import annotations

from typing import Any

# Event names JAX records around compilation (jax/_src/dispatch.py).
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
PHASE_EVENTS = frozenset({TRACE_EVENT, LOWER_EVENT, BACKEND_COMPILE_EVENT})
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
CACHE_WRITE_EVENT = "/jax/compilation_cache/cache_misses"


def unregister(monitoring: Any, fn_names: tuple[str, ...], list_name: str,
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
