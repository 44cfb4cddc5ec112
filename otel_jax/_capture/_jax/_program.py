"""The compiled program's digest (``jax.compile.program_fingerprint``), hashed as JAX's
persistent cache hashes it (``jax._src.cache_key._hash_computation``).

Its own module: how ``_hash_computation`` is called changed between versions (an enum
``IgnoreCallbacks`` to JAX 0.10, a bool from 0.11); the way that works is found by calling
it on a real program, a probe parsed at install (or the first compile's), once per
process. Checked on JAX 0.8.0, 0.10.2 and 0.12.0.1 (the oldest, default and newest test
venvs). Fallback: when no way works, or the module moved, no fingerprint (``None``), said
once as install() says what a JAX version lacks.
"""

from __future__ import annotations

from typing import Any

from ..._core._where import jax_call
from ._capabilities import say_lost

#: A tiny program as JAX lowers ``jax.jit(lambda x: x + x)`` of an ``f32[2]``: the real
#: input the program readers are tried on once, at install. Parsed, not lowered, so that
#: the probe traces and compiles nothing a user's telemetry, listeners or caches could see.
_PROBE_PROGRAM = """module @jit_probe attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}"""


def _probe_program() -> Any:
    """``_PROBE_PROGRAM`` as an MLIR module in a context like the one JAX lowers into."""
    from jax._src.interpreters import mlir
    from jax._src.lib import mlir as mlir_lib

    ir: Any = getattr(mlir_lib, "ir")
    return ir.Module.parse(_PROBE_PROGRAM, context=mlir.make_ir_context())


def _hash_tails(cache_key: Any) -> list[tuple[Any, ...]]:
    """What may follow ``(hash, module)`` in a call of ``_hash_computation``, each meaning
    "hash the whole program", in the order tried: ``IgnoreCallbacks.NO`` (JAX 0.8 - 0.10's
    ``ignore_callbacks``), ``False`` (0.11's ``ignore_custom_partitioning``), nothing (a
    JAX that dropped the parameter). Passed by position: its name changes between versions.
    The enum comes first where it exists: ``False`` runs there too but means another mode."""
    tails: list[tuple[Any, ...]] = []
    no = getattr(getattr(cache_key, "IgnoreCallbacks", None), "NO", None)
    if no is not None:
        tails.append((no,))
    tails += [(False,), ()]
    return tails


class ProgramHashing:
    """How this JAX's ``_hash_computation`` is called, found by calling it on a real
    program (the probe at install, else the first compile's): one process, one JAX."""

    tail: tuple[Any, ...] | None = None  # the arguments after (hash, module) that work
    failure: str | None = None  # why no way of calling it works, once every way failed


def _digest(hash_computation: Any, computation: Any, tail: tuple[Any, ...]) -> bytes:
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    hash_computation(h, computation, *tail)
    return h.digest()


def _find_hashing(cache_key: Any, computation: Any) -> bytes | None:
    """Try each way of calling ``_hash_computation`` on ``computation``; the first that
    works is kept (and its digest returned), or, when none does, why."""
    hash_computation = getattr(cache_key, "_hash_computation", None)
    if not callable(hash_computation):
        ProgramHashing.failure = "no jax._src.cache_key._hash_computation"
        return None
    error: Exception | None = None
    for tail in _hash_tails(cache_key):
        try:
            digest = _digest(hash_computation, computation, tail)
        except Exception as exc:
            error = error or exc  # the first way's error says most
            continue
        ProgramHashing.tail = tail
        return digest
    ProgramHashing.failure = ("jax._src.cache_key._hash_computation fails on a lowered "
                               f"program ({type(error).__name__}: {str(error)[:120]})")
    return None


@jax_call
def program_digest(computation: Any) -> bytes | None:
    """A digest of a lowered program, computed as JAX's persistent cache hashes it: the
    MLIR bytecode without debug information (no file paths or line numbers), so the
    same program gives the same digest in every process and run. ``None`` when JAX's
    hashing fails on every program (said once, as install() says what it lacks)."""
    try:
        from jax._src import cache_key
    except Exception:
        return None
    if ProgramHashing.failure is not None:
        return None
    tail = ProgramHashing.tail
    if tail is not None:
        # Found working: an error now is this program's, reported as an internal error.
        return _digest(getattr(cache_key, "_hash_computation"), computation, tail)
    digest = _find_hashing(cache_key, computation)
    if ProgramHashing.failure is not None:  # the probe could not run at install
        say_lost("program_fingerprints", ProgramHashing.failure)
    return digest


@jax_call
def probe_fingerprints() -> None:
    """Find how ``_hash_computation`` is called, on the probe program, unless known. Left
    to the first compile when the probe itself cannot be built (MLIR's API moved)."""
    if ProgramHashing.tail is not None or ProgramHashing.failure is not None:
        return
    try:
        from jax._src import cache_key
    except Exception:
        return
    if not callable(getattr(cache_key, "_hash_computation", None)):
        ProgramHashing.failure = "no jax._src.cache_key._hash_computation"
        return
    try:
        program = _probe_program()
    except Exception:
        return
    _find_hashing(cache_key, program)
