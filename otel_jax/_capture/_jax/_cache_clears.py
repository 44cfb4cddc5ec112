"""Counting ``jax.clear_caches()`` calls: a do-nothing cache registered among JAX's own,
whose ``cache_clear`` every such call runs. The evidence for naming a cache clear as a
cause.

Its own module: the one use of ``jax._src.util.register_cache``. Checked on JAX 0.8.0,
0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: where it cannot
be registered the count is ``-1`` (not watched), and a cache clear is never named as a
cause.
"""

from __future__ import annotations


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
