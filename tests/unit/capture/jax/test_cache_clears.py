"""``_capture._jax._cache_clears``: ``jax.clear_caches()`` calls, counted."""

from __future__ import annotations

import jax

from otel_jax._capture._jax import _cache_clears


def test_each_clear_caches_call_is_counted():
    assert _cache_clears.watch_cache_clears()
    before = _cache_clears.cache_clears()
    assert before >= 0
    jax.clear_caches()
    assert _cache_clears.cache_clears() == before + 1
