"""The persistent cache's key, part by part: each part hashed by JAX's own per-part hash
function (``jax._src.cache_key._hash_*``), and the readable values cheap to keep.

Its own module: the part order and hash functions are ``jax._src.cache_key``'s (the same
parts from JAX 0.8 to 0.12). Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest,
default and newest test venvs). Fallback: without ``jax._src.cache_key`` no parts
(``None``); a part whose function moved is ``""`` (said at install), one whose function
fails on a real input is ``""`` and said once (most need a compile's backend).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._core._where import jax_call
from ._capabilities import say_lost

#: The parts of JAX's persistent-cache key, in the order ``jax._src.cache_key.get`` hashes
#: them (JAX 0.8 to 0.12); the first one that differs between two runs is the one named.
CACHE_KEY_PARTS = ("computation", "jax_lib version", "backend version", "XLA flags",
                   "compile_options", "accelerator_config", "compression", "custom_hook")
_KEY_DIGITS = 16


class CacheKeyParts(NamedTuple):
    """Each part of one compile's cache key as a short hash (``""`` where JAX's per-part
    hash function moved), and the readable values that are cheap and safe to keep."""

    hashes: dict[str, str]
    readable: dict[str, Any]


_static_parts: dict[Any, tuple[dict[str, str], dict[str, Any]]] = {}


def _part_hash(part: str, fn: Any, *args: Any, **kwargs: Any) -> str:
    """One part hashed by JAX's own function for it, as JAX's DEBUG log prints it (the
    first digits of a sha256 of that part alone); ``""`` when the function moved (said at
    install) or fails on this real input (said once, here: most need a compile's backend,
    so install could not try them)."""
    import hashlib

    if not callable(fn):
        return ""
    try:
        h = hashlib.sha256()
        fn(h, *args, **kwargs)
        return h.hexdigest()[:_KEY_DIGITS]
    except Exception as exc:
        say_lost("cache_miss_reasons", f"hashing the {part} part of the key fails "
                  f"({type(exc).__name__}: {str(exc)[:120]})")
        return ""


@jax_call
def xla_flags_in_key(cache_key: Any = None) -> list[str]:
    """The XLA flags JAX puts in the cache key, as it reads them (``XLA_FLAGS``,
    ``LIBTPU_INIT_ARGS``, and the program's ``--xla*`` arguments and registered prefixes),
    sorted, without the flags it leaves out of the key."""
    import os
    import sys

    if cache_key is None:
        from jax._src import cache_key
    prefixes = tuple(getattr(cache_key, "get_flag_prefixes", list)())
    flags: list[str] = []
    for var in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        flags.extend((os.getenv(var) or "").split())
    flags.extend(a for a in sys.argv if isinstance(a, str) and (
        a.startswith("--xla") or any(a.startswith(p) for p in prefixes)))
    excluded = set(getattr(cache_key, "xla_flags_to_exclude_from_cache_key", ()))
    return [f for f in sorted(flags) if f.split("=")[0] not in excluded]


def _compression(compilation_cache: Any) -> str:
    # As compilation_cache.get_cache_key names it (JAX 0.8 - 0.12).
    return "zstandard" if getattr(compilation_cache, "zstandard", None) is not None else "zlib"


@jax_call
def cache_key_parts(inputs: Any, program: str = "") -> CacheKeyParts | None:
    """The parts of the persistent-cache key of one backend compile, from its captured
    inputs (``_compile_entry.CompileInputs``), each hashed by JAX's per-part hash function.

    ``program``: the program fingerprint already computed (``program_digest``), which
    hashes the same canonical bytes as the ``computation`` part: used as that part, so
    the program is serialised once. Parts that do not change within a process (versions,
    backend, compression) are hashed once per backend; the XLA flags once per value of
    the variables and arguments they come from. ``None`` when JAX's cache-key module moved.
    """
    import os
    import sys

    try:
        from jax._src import cache_key, compilation_cache
    except Exception:
        return None
    backend = inputs.backend
    platform = str(getattr(backend, "platform", "unknown"))
    flags_source = (os.getenv("XLA_FLAGS"), os.getenv("LIBTPU_INIT_ARGS"),
                    tuple(a for a in sys.argv if isinstance(a, str) and a.startswith("--")),
                    tuple(getattr(cache_key, "get_flag_prefixes", list)()))
    static_key = (id(backend), flags_source)
    static = _static_parts.get(static_key)
    if static is None:
        hashes: dict[str, str] = {}
        readable: dict[str, Any] = {}
        version = getattr(cache_key, "jaxlib_version_str", None)
        if isinstance(version, str):
            hashes["jax_lib version"] = _part_hash(
                "jax_lib version", lambda h: h.update(version.encode("utf-8")))
            readable["jaxlib"] = version
        try:
            import jax

            readable["jax"] = str(jax.__version__)
        except Exception:
            pass
        hashes["backend version"] = _part_hash(
            "backend version", getattr(cache_key, "_hash_platform", None), backend)
        readable["backend"] = f"{platform} {getattr(backend, 'platform_version', '?')}"
        prefixes = list(flags_source[3])
        hashes["XLA flags"] = _part_hash("XLA flags", getattr(cache_key, "_hash_xla_flags", None),
                                         prefixes)
        try:
            readable["xla_flags"] = xla_flags_in_key(cache_key)
        except Exception:
            pass
        compression = _compression(compilation_cache)
        hashes["compression"] = _part_hash(
            "compression", getattr(cache_key, "_hash_string", None), compression)
        readable["compression"] = compression
        if len(_static_parts) > 64:
            _static_parts.clear()
        static = _static_parts[static_key] = (hashes, readable)
    hashes = {"computation": program, **static[0]}
    readable = dict(static[1])
    hashes["compile_options"] = _part_hash(
        "compile_options", getattr(cache_key, "_hash_serialized_compile_options", None),
        inputs.compile_options, strip_device_assignment=(platform == "gpu"))
    devices = inputs.devices
    hashes["accelerator_config"] = _accelerator_hash(cache_key, devices)
    try:
        flat = list(devices.flat)
        kinds = sorted({str(getattr(d, "device_kind", "?")) for d in flat})
        readable["devices"] = f"{len(flat)} x {'/'.join(kinds)}"
    except Exception:
        pass
    hash_string = getattr(cache_key, "_hash_string", None)
    hook = getattr(cache_key, "custom_hook", None)
    hashes["custom_hook"] = _part_hash(
        "custom_hook", lambda h: hash_string(h, hook())
    ) if callable(hook) and callable(hash_string) else ""
    return CacheKeyParts({p: hashes.get(p, "") for p in CACHE_KEY_PARTS}, readable)


_accelerator_hashes: dict[tuple[Any, ...], str] = {}


def _accelerator_hash(cache_key: Any, devices: Any) -> str:
    """The accelerator-config part, hashed once per set of devices (a topology query)."""
    try:
        ids = tuple(getattr(d, "id", None) for d in devices.flat)
    except Exception:
        return ""
    found = _accelerator_hashes.get(ids)
    if found is None:
        found = _part_hash("accelerator_config",
                           getattr(cache_key, "_hash_accelerator_config", None), devices)
        if len(_accelerator_hashes) > 256:
            _accelerator_hashes.clear()
        _accelerator_hashes[ids] = found
    return found
