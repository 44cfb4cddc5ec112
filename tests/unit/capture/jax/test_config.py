"""``_capture._jax._config``: the config values in JAX's tracing cache key."""

from __future__ import annotations

import jax

from otel_jax._capture._jax import _config


def test_the_trace_context_is_named_and_follows_the_config():
    outside = dict(_config.trace_context_items())
    assert outside and all(isinstance(name, str) for name in outside)
    with jax.default_matmul_precision("highest"):
        inside = dict(_config.trace_context_items())
    assert inside.keys() == outside.keys()
    assert inside != outside
    changed = [n for n in inside if inside[n] != outside[n]]
    assert any("matmul_precision" in n for n in changed), changed
