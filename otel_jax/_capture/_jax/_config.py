"""The config values that are part of JAX's tracing cache key (its "trace context").

Its own module: the one reader of ``jax._src.config``, whose listing of the trace
context's names appeared after JAX 0.8. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the
oldest, default and newest test venvs). Fallback: where ``config.trace_context_names`` is
missing (JAX 0.8) or fails, a known list of config values (and the mesh context) is read
instead; without ``jax._src.config`` at all, no config values (a config change is then not
named as a cause).
"""

from __future__ import annotations

from typing import Any

# Config values known to be part of the tracing cache key, for JAX versions
# whose config does not list the names of its trace context.
_KNOWN_TRACE_CONTEXT = (
    "jax_enable_x64", "jax_default_matmul_precision", "jax_default_device",
    "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion", "jax_disable_jit",
    "jax_threefry_partitionable", "jax_softmax_custom_jvp", "jax_use_shardy_partitioner",
    "jax_random_seed_offset",
)


_trace_context_names: dict[int, tuple[str, ...]] = {}


def trace_context_items() -> tuple[tuple[str, Any], ...]:
    """The named config values that are part of JAX's tracing cache key."""
    try:
        from jax._src import config
    except Exception:
        return ()
    try:
        values = config.trace_context()
        names = _trace_context_names.get(len(values))
        if names is None:
            names = _trace_context_names[len(values)] = tuple(config.trace_context_names())
        return tuple(zip(names, values))
    except Exception:
        pass
    items = []
    states = getattr(config, "config_states", {})
    for name in _KNOWN_TRACE_CONTEXT:
        state = states.get(name)
        if state is not None:
            try:
                items.append((name, state.value))
            except Exception:
                continue
    try:
        from jax._src import mesh as mesh_lib

        items.append(("mesh_context_manager", mesh_lib.thread_resources.env.physical_mesh))
    except Exception:
        pass
    return tuple(items)
