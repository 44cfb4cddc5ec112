"""JAX's persistent compilation cache as its config sets it: whether it is on, its directory,
its file-system layer, and why an entry was not written.

Its own module: these read ``jax.config`` options and ``jax._src.path``. Checked on JAX
0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test venvs). Fallback: a config
option that moved reads as the cache off (no directory) and the reason not written as
``other``; without ``jax._src.path``, ``etils.epath`` directly, else no path (the ledger
stays local).
"""

from __future__ import annotations

from typing import Any

from ..._core._vocab import NotWrittenReason


def persistent_cache_skip_reason(backend_compile_s: float, process_index: int,
                                 ) -> NotWrittenReason:
    """Why JAX did not write a persistent-cache entry, as far as its config tells.

    JAX skips the write on processes other than 0, for programs that compiled
    faster than ``jax_persistent_cache_min_compile_time_secs``, for programs
    with host callbacks, for entries under the minimum size, and on write
    errors; the last three are not told apart here.
    """
    if process_index != 0:
        return NotWrittenReason.NOT_PROCESS_0
    try:
        import jax

        minimum = getattr(jax.config, "jax_persistent_cache_min_compile_time_secs")
        if backend_compile_s < float(minimum):
            return NotWrittenReason.COMPILE_TIME_BELOW_MINIMUM
    except Exception:
        pass
    return NotWrittenReason.OTHER


def persistent_cache_dir() -> str | None:
    """The persistent compilation cache's directory when the cache is enabled, else ``None``."""
    try:
        import jax

        directory = getattr(jax.config, "jax_compilation_cache_dir")
        if directory and bool(getattr(jax.config, "jax_enable_compilation_cache", True)):
            return str(directory)
    except Exception:
        pass
    return None


def cache_path(url: str) -> Any:
    """``url`` as a path of the file-system layer JAX's persistent cache uses
    (``jax._src.path.Path``: ``etils.epath`` when installed, so ``gs://`` and ``s3://``
    reach the same store the same way); ``None`` when no such layer is installed."""
    try:
        from jax._src import path as jax_path

        if getattr(jax_path, "epath_installed", False):
            return jax_path.Path(url)
    except Exception:
        pass
    try:  # JAX's module moved: the layer it uses
        from etils import epath

        return epath.Path(url)
    except Exception:
        return None


def persistent_cache_enabled() -> bool:
    try:
        import jax

        return bool(getattr(jax.config, "jax_compilation_cache_dir")) and bool(
            getattr(jax.config, "jax_enable_compilation_cache", True))
    except Exception:
        return False
