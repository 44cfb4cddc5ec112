"""What this JAX version lets the readers read, found by running them on real inputs: the
program readers on a tiny probe program, the cache-key part hashes that need no backend on
real values.

Its own module: the check install() runs once, beside the patches' own (``_hooks``);
decided by behaviour, never by a version number. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1
(the oldest, default and newest test venvs), with no gaps on any of them. Fallback: each
failing reader is a :class:`~._capabilities.Unavailable` said once at install; readers
that need a compile's backend are only checked for presence here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._program import ProgramHashing, probe_fingerprints

if TYPE_CHECKING:
    from ._capabilities import Unavailable


#: The per-part hash functions of ``jax._src.cache_key`` the cache-key readers call.
_CACHE_KEY_HASHES = ("_hash_serialized_compile_options", "_hash_platform", "_hash_xla_flags",
                     "_hash_accelerator_config", "_hash_string")


def reader_gaps() -> list[Unavailable]:
    """The facts whose readers fail on this JAX version, found by running them on real
    inputs: the program readers on a tiny program (once per process), the cache-key part
    hashes that need no backend on real values. Readers that need a compile's backend
    (not started at install: ``jax.distributed.initialize`` may not have run yet) are
    only checked for presence here, and a first real use that fails says so then."""
    from ._capabilities import Capability, Unavailable

    gaps: list[Unavailable] = []
    cache_key: Any = None
    try:
        from jax._src import cache_key
    except Exception:
        pass
    if cache_key is None:
        return [Unavailable(Capability.PROGRAM_FINGERPRINTS, "no jax._src.cache_key"),
                Unavailable(Capability.CACHE_MISS_REASONS, "no jax._src.cache_key")]
    probe_fingerprints()
    if ProgramHashing.failure is not None:
        gaps.append(Unavailable(Capability.PROGRAM_FINGERPRINTS, ProgramHashing.failure))
    failing = _cache_key_gap(cache_key)
    if failing:
        gaps.append(Unavailable(Capability.CACHE_MISS_REASONS, failing))
    # The trace context's names are not listed here: without them (JAX 0.8) a known
    # list of config values is read, the designed reader for those versions.
    return gaps


def _cache_key_gap(cache_key: Any) -> str:
    """Why the cache-key part hashes fail (``""`` when they work): missing ones, and those
    that need no backend run on real values (the string and XLA-flag parts)."""
    import hashlib

    missing = [n for n in _CACHE_KEY_HASHES if not callable(getattr(cache_key, n, None))]
    if missing:
        return f"no jax._src.cache_key.{', '.join(missing)}"
    try:
        h = hashlib.sha256()
        cache_key._hash_string(h, "zlib")
        cache_key._hash_xla_flags(h, list(getattr(cache_key, "get_flag_prefixes", list)()))
    except Exception as exc:
        return (f"jax._src.cache_key's part hashes fail ({type(exc).__name__}: "
                f"{str(exc)[:120]})")
    return ""
