"""``_capture._jax._program``: the program digest, as JAX's persistent cache hashes it."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from otel_jax._capture._jax import _program


def lowered(fn):
    return jax.jit(fn).lower(jnp.ones(2)).compiler_ir("stablehlo")


def test_the_same_program_has_the_same_digest_another_program_another():
    _program.probe_fingerprints()
    assert _program.ProgramHashing.failure is None
    assert _program.ProgramHashing.tail is not None  # found on the probe
    triple = _program.program_digest(lowered(lambda x: x * 3))
    assert isinstance(triple, bytes) and len(triple) == 8
    assert _program.program_digest(lowered(lambda y: y * 3)) == triple  # names do not count
    assert _program.program_digest(lowered(lambda x: x * 4)) != triple
